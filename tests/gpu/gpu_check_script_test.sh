#!/bin/sh
# scripts/gpu-check.sh as the GPU machine gets it: `prepare` builds the kit and runs its
# bundles against the fake driver with no launch refused (exit status 0, "none refused");
# `run` then goes as far as it can. On a GPU it must pass (exit status 0). Without one it
# must stop saying there is no GPU, with exit status 2: the test is then skipped (status 77,
# the reason on the last line), the kit's preparation having passed. On a GPU, a kit prepared
# without libdevice (no CUDA toolkit) cannot run its kernels' math functions: skipped too.
# Usage: gpu_check_script_test.sh SCRIPT BUILD_DIR KIT
set -u
script=$1 build=$2 kit=$3
here=$(dirname "$0")
# Without libdevice the kit's kernels cannot be compiled (their math functions): skipped.
if ! missing=$(sh "$here/../cuda_toolkit.sh" missing libdevice); then
  echo "SKIPPED: the kit's GPU kernels call libdevice's math functions and $missing"
  exit 77
fi
TINYMLIR_BUILD_DIR="$build" "$script" prepare "$kit" >"$kit.prepare.log" 2>&1
prepared=$?
cat "$kit.prepare.log"
if [ $prepared -ne 0 ] || ! grep -q "none refused" "$kit.prepare.log"; then
  echo "FAIL: prepare (exit status $prepared)"
  exit 1
fi
"$script" run "$kit" >"$kit.run.log" 2>&1
ran=$?
cat "$kit.run.log"
if [ $ran -eq 2 ] && no_gpu=$(grep -m1 "no GPU: tm_invoke: no CUDA driver" "$kit.run.log"); then
  rm -rf "$kit" "$kit.prepare.log" "$kit.run.log"
  note=
  if ! missing=$(sh "$here/../cuda_toolkit.sh" missing libdevice); then
    note=" (and $missing: this kit's kernels would not load on a GPU)"
  fi
  echo "SKIPPED: the kit is prepared and checked against the fake driver; run stopped at: $no_gpu$note"
  exit 77
fi
if [ $ran -ne 0 ]; then
  if missing=$(sh "$here/../cuda_toolkit.sh" missing libdevice); then
    echo "FAIL: run ended with exit status $ran (0: every check passed on the GPU; 2: no GPU)"
    exit 1
  fi
  echo "SKIPPED: run ended with exit status $ran on a kit prepared without the CUDA toolkit: $missing"
  exit 77
fi
rm -rf "$kit" "$kit.prepare.log" "$kit.run.log"
