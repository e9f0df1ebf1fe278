#!/bin/sh
# What the tests need of the CUDA toolkit, found where tinymlir and MLIR look for it:
# the toolkit is $CUDA_HOME, else $CUDA_PATH, else /usr/local/cuda (core/targets/gpu/compile/
# gpu_lowering.cpp); libdevice (the math functions of GPU kernels) is
# <toolkit>/nvvm/libdevice/libdevice.10.bc; ptxas (cubin, and the tests' check of the PTX)
# is <toolkit>/bin/ptxas, else the first on PATH, else $CUDA_ROOT/bin/ptxas (MLIR's order).
# Usage: cuda_toolkit.sh missing ptxas|libdevice...
#          prints what is missing, one reason per line ("no ptxas: ..."), and exits 1 if
#          anything is; prints nothing and exits 0 if all is there.
#        cuda_toolkit.sh ptxas
#          prints the ptxas tinymlir would run (exit 1 if none).
set -u
toolkit=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}

find_ptxas() {
  if [ -x "$toolkit/bin/ptxas" ]; then
    echo "$toolkit/bin/ptxas"
  elif command -v ptxas >/dev/null 2>&1; then
    command -v ptxas
  elif [ -n "${CUDA_ROOT:-}" ] && [ -x "$CUDA_ROOT/bin/ptxas" ]; then
    echo "$CUDA_ROOT/bin/ptxas"
  else
    return 1
  fi
}

case "${1:-}" in
  ptxas) find_ptxas ;;
  missing)
    shift
    missing=0
    for what in "$@"; do
      case "$what" in
        ptxas)
          find_ptxas >/dev/null || {
            echo "no ptxas: neither $toolkit/bin/ptxas (the CUDA toolkit: \$CUDA_HOME, \$CUDA_PATH or /usr/local/cuda) nor PATH has it"
            missing=1
          } ;;
        libdevice)
          [ -f "$toolkit/nvvm/libdevice/libdevice.10.bc" ] || {
            echo "no libdevice: $toolkit/nvvm/libdevice/libdevice.10.bc is missing (the CUDA toolkit: \$CUDA_HOME, \$CUDA_PATH or /usr/local/cuda); GPU kernels that call math functions cannot be completed without it"
            missing=1
          } ;;
        *) echo "$0: unknown part '$what'" >&2; exit 2 ;;
      esac
    done
    exit $missing ;;
  *) echo "usage: $0 missing ptxas|libdevice... | $0 ptxas" >&2; exit 2 ;;
esac
