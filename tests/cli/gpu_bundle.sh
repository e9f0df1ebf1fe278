#!/bin/sh
# The GPU bundle path the GPU machine takes (scripts/gpu-check.sh: tinymlir-run, the
# runtime library only, on a bundle made here), as far as it goes without a GPU:
#   - a bundle of kjv-tiny's GPU programs, emulated on the CPU (TINYMLIR_GPU_EMULATE=fast
#     at compile time), generates kjv-tiny's golden greedy tokens through tinymlir-run;
#   - the real GPU bundle runs through tinymlir-run against the fake CUDA driver
#     (tests/gpu/fake_cuda_driver.cpp): every module loads, every kernel is found, and no
#     launch is refused (dimensions, host memory handed to a kernel).
# Usage: gpu_bundle.sh path/to/tinymlir path/to/tinymlir-run path/to/fake-cuda-driver-dir
set -eu
cli="$1"
run_cli="$2"
fake_driver="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
# The real GPU bundle's kernels call libdevice's math functions (tanh, exp, sqrt): without
# the CUDA toolkit's libdevice the compile is refused naming it, and this test is skipped.
if ! missing=$(sh "$(dirname "$0")/../cuda_toolkit.sh" missing libdevice); then
  echo "SKIP: $missing (the GPU bundle's kernels call its math functions)"
  exit 77
fi
golden="In the beginning of the first year of Darius the son of Darius, the son of Darius"

TINYMLIR_GPU_EMULATE=fast "$cli" compile --target gpu --out "$work/emulated" 2>"$work/err" ||
  { cat "$work/err" >&2; exit 1; }
"$run_cli" generate --greedy --tokens 32 --bundle "$work/emulated" "In the beginning" \
  >"$work/emulated.out" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
grep -q "$golden" "$work/emulated.out" ||
  { echo "emulated GPU bundle: wrong tokens:" >&2; cat "$work/emulated.out" >&2; exit 1; }

"$cli" compile --target gpu --out "$work/gpu" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
for kv in "" "--no-kv-cache"; do
  rm -f "$work/driver.log"
  LD_LIBRARY_PATH="$fake_driver" FAKE_CUDA_LOG="$work/driver.log" \
    "$run_cli" generate --greedy --tokens 4 $kv --bundle "$work/gpu" "In the beginning" \
    >"$work/gpu.out" 2>"$work/err" || { cat "$work/err" "$work/driver.log" >&2; exit 1; }
  launches=$(grep -c "^launch " "$work/driver.log")
  test "$launches" -ge 20 || { echo "only $launches launches ($kv)" >&2; exit 1; }
  if grep "violation" "$work/driver.log" >&2; then exit 1; fi
done
echo "gpu bundle: emulated tokens golden; $launches launches on the fake driver, none refused"
