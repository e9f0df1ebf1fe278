#!/bin/sh
# scripts/gpu-check.sh as the GPU machine gets it, on a machine without a GPU: `prepare`
# builds the kit and runs its bundles against the fake driver with no launch refused; `run`
# goes as far as it can and stops saying there is no GPU, with exit status 2.
# Usage: gpu_check_script_test.sh SCRIPT BUILD_DIR KIT
set -u
script=$1 build=$2 kit=$3
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
if [ $ran -ne 2 ] || ! grep -q "no GPU: tm_invoke: no CUDA driver" "$kit.run.log"; then
  echo "FAIL: run ended with exit status $ran, not 2 (no GPU)"
  exit 1
fi
rm -rf "$kit" "$kit.prepare.log" "$kit.run.log"
