#!/bin/sh
# `tinymlir compile --target gpu` on a machine without the CUDA toolkit (Debian's archive has
# none), simulated on any machine by tests/without_cuda_toolkit.sh, which this script runs
# itself under. Two checks:
#   ptx        with libdevice but no ptxas (a toolkit folder holding only
#              nvvm/libdevice/libdevice.10.bc, linked from the real toolkit; exit 77 when
#              there is none), the GPU target still compiles: exit status 0, a bundle whose
#              manifest says `target gpu` and whose programs carry PTX (no ptxas needed: the
#              driver JIT-compiles PTX), which tinymlir-run loads and launches against the
#              fake CUDA driver, every kernel found and no launch refused;
#   libdevice  without any toolkit, what it cannot do is said: GPT-2's kernels call math
#              functions (exp, tanh, sqrt) that come from the toolkit's libdevice; PTX that
#              calls them unresolved (`.extern .func __nv_expf`) loads on no GPU, so the
#              compile must either fail or say, on stderr, that libdevice is missing.
# Usage: gpu_without_toolkit.sh ptx|libdevice path/to/tinymlir path/to/tinymlir-run
#          path/to/fake-cuda-driver-dir path/to/tests/data/tiny-a
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${TM_WITHOUT_CUDA_TOOLKIT:-}" ]; then
  # The real toolkit's libdevice, found before the toolkit is hidden (the ptx check).
  TM_REAL_LIBDEVICE=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}/nvvm/libdevice/libdevice.10.bc
  export TM_REAL_LIBDEVICE
  TM_WITHOUT_CUDA_TOOLKIT=1 exec sh "$here/../without_cuda_toolkit.sh" sh "$0" "$@"
fi
check=$1 cli=$2 run_cli=$3 fake_driver=$4 model=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off  # a cached program may have been compiled with the toolkit
if [ "$check" = ptx ]; then
  if [ ! -f "$TM_REAL_LIBDEVICE" ]; then
    echo "SKIP: no CUDA toolkit libdevice ($TM_REAL_LIBDEVICE) to give the compile"
    exit 77
  fi
  mkdir -p "$work/toolkit/nvvm/libdevice"
  ln -s "$TM_REAL_LIBDEVICE" "$work/toolkit/nvvm/libdevice/libdevice.10.bc"
  export CUDA_HOME="$work/toolkit"
fi

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

echo "without the CUDA toolkit: CUDA_HOME=$CUDA_HOME; ptxas on PATH: $(command -v ptxas || echo none)"
status=0
"$cli" compile --target gpu --model "$model" --out "$work/gpu" 2>"$work/compile.err" || status=$?
cat "$work/compile.err"

case $check in
  ptx)
    [ $status -eq 0 ] || fail "tinymlir compile --target gpu exited with status $status"
    grep -qx "target gpu" "$work/gpu/manifest.txt" || fail "the manifest does not say 'target gpu'"
    programs=0
    for f in "$work"/gpu/*.tmp; do
      [ -e "$f" ] || fail "no program in the bundle"
      programs=$((programs + 1))
      grep -aq "^\.target sm_[0-9]" "$f" && grep -aq "^\.visible \.entry " "$f" ||
        fail "$f carries no PTX kernel"
    done
    LD_LIBRARY_PATH="$fake_driver" FAKE_CUDA_LOG="$work/driver.log" \
      "$run_cli" generate --greedy --ids --tokens 3 --model "$model" --bundle "$work/gpu" "1 2 3" \
      >"$work/run.out" 2>"$work/run.err" || status=$?
    [ $status -eq 0 ] || { cat "$work/run.err" "$work/driver.log" >&2; fail "tinymlir-run on the fake driver: exit status $status"; }
    launches=$(grep -c "^launch " "$work/driver.log" || true)
    [ "$launches" -ge 1 ] || fail "no launch on the fake driver"
    if grep "violation" "$work/driver.log" >&2; then fail "the fake driver refused a launch"; fi
    echo "ok: $programs programs compiled to PTX without the toolkit; $launches launches on the fake driver, none refused"
    ;;
  libdevice)
    if [ $status -ne 0 ]; then
      grep -q "libdevice" "$work/compile.err" ||
        fail "tinymlir compile --target gpu failed (status $status) without naming libdevice"
      echo "ok: without libdevice the compile fails, naming it"
      exit 0
    fi
    calls=$(cat "$work"/gpu/*.tmp | grep -ao "^\.extern \.func .*__nv_[a-z0-9_]*" |
              grep -o "__nv_[a-z0-9_]*" | sort -u | tr '\n' ' ')
    if [ -z "$calls" ]; then
      echo "ok: the PTX calls no libdevice function"
      exit 0
    fi
    grep -q "libdevice" "$work/compile.err" ||
      fail "the bundle's PTX calls libdevice functions it does not define ($calls), which no GPU's
driver resolves, and tinymlir compile --target gpu exited 0 without a word on stderr: without
libdevice (\$CUDA_HOME/nvvm/libdevice/libdevice.10.bc) it must fail or say so"
    echo "ok: the PTX calls $calls unresolved, and the compile says libdevice is missing"
    ;;
  *) echo "usage: $0 ptx|libdevice TINYMLIR TINYMLIR_RUN FAKE_DRIVER_DIR MODEL" >&2; exit 2 ;;
esac
