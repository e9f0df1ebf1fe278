#!/bin/sh
# Runs COMMAND as on a machine without the CUDA toolkit (Debian 12's archive has none), on a
# machine that has one: CUDA_HOME points nowhere (tinymlir, MLIR and the tests look there
# first, and at /usr/local/cuda only when it is unset), CUDA_PATH and CUDA_ROOT are unset, and
# no folder on PATH offers the toolkit's programs: a folder under a cuda* path is dropped, and
# one that holds ptxas or nvcc among other programs (/usr/local/bin with wrappers) is replaced
# by a folder of links to its other programs. The CUDA driver (libcuda.so.1) is not the
# toolkit's and stays as it is.
# Usage: tests/without_cuda_toolkit.sh COMMAND [ARG...]
#   e.g. tests/without_cuda_toolkit.sh scripts/build.sh build-nocuda
#        tests/without_cuda_toolkit.sh ctest --test-dir build-nocuda
set -eu
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }
tools="ptxas nvcc nvlink fatbinary cuobjdump nvdisasm cudafe++ bin2c __nvcc_device_query"
shadow=$(mktemp -d "${TMPDIR:-/tmp}/without-cuda-toolkit.XXXXXX")
trap 'rm -rf "$shadow"' EXIT INT TERM
path=
n=0
old_ifs=$IFS
IFS=:
for dir in $PATH; do
  IFS=$old_ifs
  case "$dir" in
    "" | *cuda*) continue ;;
  esac
  has_tool=no
  for tool in $tools; do
    [ -e "$dir/$tool" ] && has_tool=yes
  done
  if [ $has_tool = yes ]; then
    n=$((n + 1))
    mkdir "$shadow/$n"
    for program in "$dir"/* "$dir"/.[!.]*; do
      [ -e "$program" ] || continue
      name=${program##*/}
      case " $tools " in *" $name "*) continue ;; esac
      ln -s "$program" "$shadow/$n/$name"
    done
    dir=$shadow/$n
  fi
  path=${path:+$path:}$dir
done
IFS=$old_ifs
unset CUDA_PATH CUDA_ROOT
CUDA_HOME=/nonexistent-cuda-toolkit
PATH=$path
export CUDA_HOME PATH
for tool in ptxas nvcc; do
  if command -v "$tool" >/dev/null 2>&1; then
    echo "$0: $tool is still on PATH at $(command -v "$tool")" >&2
    exit 2
  fi
done
status=0
"$@" || status=$?
exit $status
