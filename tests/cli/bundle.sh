#!/bin/sh
# Bundles through the main job: `tinymlir compile` writes every program of the embedded
# model; `tinymlir-run generate --bundle`, a process with neither libtinymlir.so nor LLVM
# loaded, then prints the golden greedy tokens with and without the KV cache, as does
# `tinymlir generate --bundle` (which compiles nothing: no disk cache either); a bundle made
# for another model is refused with a message, and tinymlir-run without a bundle says why;
# a GPU bundle compiles and, without a GPU, fails cleanly.
# Usage: bundle.sh path/to/tinymlir path/to/tinymlir-run path/to/tests/data/tiny-a
set -eu
cli="$1"
run_cli="$2"
other_model="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
golden="In the beginning of the first year of Darius the son of Darius, the son of Darius"

"$cli" compile --out "$work/bundle" --emit-ir "$work/ir" 2>"$work/compile.err"
test -f "$work/bundle/manifest.txt"
# --emit-ir: the six stages of every program in the manifest.
programs=$(sed '1,/^programs$/d' "$work/bundle/manifest.txt" | wc -l)
test "$(ls "$work/ir" | wc -l)" -eq $((programs * 6)) ||
  { echo "--emit-ir: $(ls "$work/ir" | wc -l) files for $programs programs" >&2; exit 1; }
grep -q "linalg.matmul" "$work/ir/gpt2_attn_mlp_t1_l64.0-traced.mlir"
grep -q "define.*tm_packed_entry" "$work/ir/gpt2_attn_mlp_t1_l64.4-llvm.ll"
grep -q "tm_packed_entry:" "$work/ir/gpt2_attn_mlp_t1_l64.5-assembly.s"

if ldd "$run_cli" | grep -E 'libtinymlir\.so|LLVM|MLIR'; then
  echo "tinymlir-run loads the compiler" >&2
  exit 1
fi
for c in "$run_cli" "$cli"; do
  "$c" generate --greedy --tokens 32 --bundle "$work/bundle" "In the beginning" \
    >"$work/kv.out" 2>"$work/kv.err"
  grep -q "$golden" "$work/kv.out" || { echo "$c: wrong tokens:" >&2; cat "$work/kv.out" >&2; exit 1; }
  grep -Eq "\(0 programs compiled, [1-9][0-9]* loaded from the bundle\)" "$work/kv.err" ||
    { echo "$c compiled despite the bundle:" >&2; cat "$work/kv.err" >&2; exit 1; }

  "$c" generate --greedy --tokens 12 --no-kv-cache --bundle "$work/bundle" "In the beginning" \
    >"$work/nokv.out" 2>"$work/nokv.err"
  grep -q "In the beginning of the first year of Darius" "$work/nokv.out" ||
    { echo "$c: wrong tokens without the KV cache:" >&2; cat "$work/nokv.out" "$work/nokv.err" >&2; exit 1; }

  # A batch (every decode step's programs for several rows, each sequence's attention) runs
  # from the bundle too, each line its prompt's tokens.
  printf 'In the beginning\nAnd God said\nThou\n' >"$work/batch.txt"
  "$c" generate --greedy --tokens 32 --bundle "$work/bundle" --batch "$work/batch.txt" \
    >"$work/batch.out" 2>"$work/batch.err" ||
    { echo "$c: a batch from the bundle failed:" >&2; cat "$work/batch.err" >&2; exit 1; }
  test "$(wc -l <"$work/batch.out")" -eq 3 && head -n 1 "$work/batch.out" | grep -q "^$golden" ||
    { echo "$c: wrong tokens in a batch:" >&2; cat "$work/batch.out" >&2; exit 1; }
  grep -Eq "\(0 programs compiled, [1-9][0-9]* loaded from the bundle\)" "$work/batch.err" ||
    { echo "$c compiled a batch's programs despite the bundle:" >&2; cat "$work/batch.err" >&2; exit 1; }
done

if "$run_cli" generate "In the beginning" >/dev/null 2>"$work/nobundle.err"; then
  echo "tinymlir-run ran without a bundle" >&2
  exit 1
fi
grep -q "runs bundles only: pass --bundle" "$work/nobundle.err" || { cat "$work/nobundle.err" >&2; exit 1; }

if "$run_cli" generate --model "$other_model" --ids --bundle "$work/bundle" "1 2 3" \
  >/dev/null 2>"$work/other.err"; then
  echo "a bundle of another model was accepted" >&2
  exit 1
fi
grep -q "compiled for another model" "$work/other.err" || { cat "$work/other.err" >&2; exit 1; }
# The GPU target: the bundle compiles here (no GPU), says so in its manifest, and running
# it where there is no CUDA driver is one clear line, not a crash. Without the CUDA toolkit's
# libdevice its kernels' math functions cannot be compiled: the compile must fail naming it.
if ! missing=$(sh "$(dirname "$0")/../cuda_toolkit.sh" missing libdevice); then
  if "$cli" compile --target gpu --out "$work/gpu-bundle" 2>"$work/gpu-compile.err"; then
    echo "the GPU bundle compiled without libdevice ($missing)" >&2
    exit 1
  fi
  grep -q "libdevice" "$work/gpu-compile.err" || { cat "$work/gpu-compile.err" >&2; exit 1; }
  echo "note: $missing: the GPU bundle's compile was refused, naming it"
else
  "$cli" compile --target gpu --out "$work/gpu-bundle" 2>"$work/gpu-compile.err" ||
    { cat "$work/gpu-compile.err" >&2; exit 1; }
  grep -qx "target gpu" "$work/gpu-bundle/manifest.txt"
  if "$run_cli" generate --greedy --tokens 4 --bundle "$work/gpu-bundle" "In the beginning" \
    >/dev/null 2>"$work/gpu-run.err"; then
    echo "note: a GPU is present; the GPU bundle ran" >&2
  else
    grep -q "generating: no CUDA driver" "$work/gpu-run.err" || { cat "$work/gpu-run.err" >&2; exit 1; }
  fi
fi
echo "ok: $(grep -o 'wrote .*' "$work/compile.err")"
