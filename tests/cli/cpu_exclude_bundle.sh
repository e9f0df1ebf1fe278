#!/bin/sh
# Bundles for older CPUs. `tinymlir compile` under TINYMLIR_CPU_EXCLUDE=avx2,fma,f16c writes
# program files whose manifests require none of those extensions (nor AVX-512, which needs
# them), and tinymlir-run, in a process that sees every extension of this CPU, runs that
# bundle and prints the golden tokens. The other way round, where this CPU has AVX2: a
# bundle compiled with every extension is refused by a process that excludes avx2, with a
# message naming the extension and the variable.
# Usage: cpu_exclude_bundle.sh path/to/tinymlir path/to/tinymlir-run
set -eu
cli="$1"
run_cli="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
unset TINYMLIR_CPU_EXCLUDE
golden="In the beginning of the first year of Darius"

TINYMLIR_CPU_EXCLUDE=avx2,fma,f16c "$cli" compile --out "$work/older" 2>"$work/older.err" ||
  { cat "$work/older.err" >&2; exit 1; }
count=0
for f in "$work"/older/*.tmp; do
  count=$((count + 1))
  grep -aq -- "-avx2" "$f" || { echo "$f: its manifest does not name avx2 as absent" >&2; exit 1; }
  if grep -aqE -- "\+(avx2|fma|f16c|avx512f)(,| )" "$f"; then
    echo "$f: compiled under the exclusion, it requires an excluded extension:" >&2
    grep -aoE -- "\+(avx2|fma|f16c|avx512f)(,| )" "$f" >&2
    exit 1
  fi
done
test "$count" -gt 0 || { echo "no program files in the bundle" >&2; exit 1; }
"$run_cli" generate --greedy --tokens 12 --bundle "$work/older" "In the beginning" \
  >"$work/older.out" 2>"$work/older-run.err"
grep -q "$golden" "$work/older.out" ||
  { echo "wrong tokens:" >&2; cat "$work/older.out" "$work/older-run.err" >&2; exit 1; }
echo "ok: $count program files compiled without avx2, fma and f16c run with every extension"

if grep -qw avx2 /proc/cpuinfo; then
  "$cli" compile --out "$work/newer" 2>"$work/newer.err" || { cat "$work/newer.err" >&2; exit 1; }
  if TINYMLIR_CPU_EXCLUDE=avx2 "$run_cli" generate --bundle "$work/newer" "In the beginning" \
    >/dev/null 2>"$work/refused.err"; then
    echo "a bundle needing avx2 ran where TINYMLIR_CPU_EXCLUDE=avx2" >&2
    exit 1
  fi
  grep -q "which this CPU lacks (TINYMLIR_CPU_EXCLUDE=avx2)" "$work/refused.err" &&
    grep -q "avx2" "$work/refused.err" || { cat "$work/refused.err" >&2; exit 1; }
  echo "ok: a bundle needing avx2 is refused under TINYMLIR_CPU_EXCLUDE=avx2: $(head -1 "$work/refused.err")"
else
  echo "this CPU has no AVX2: the refusal of a bundle needing it is not exercised here"
fi
