#!/bin/sh
# Runs one libFuzzer target on its committed seeds without writing into them.
#   run_fuzzer.sh FUZZER CORPUS_DIR WORK_DIR [libFuzzer options...]
# WORK_DIR is emptied first; new interesting inputs go to WORK_DIR/new, crashes and other
# findings to WORK_DIR/artifacts/ (the path is printed when one is found). CTest runs it
# with -runs=N -seed=1; tests/fuzz/README.md shows longer runs.
set -eu
if [ $# -lt 3 ]; then
  echo "usage: $0 FUZZER CORPUS_DIR WORK_DIR [libFuzzer options...]" >&2
  exit 2
fi
fuzzer=$1
corpus=$2
work=$3
shift 3
rm -rf "$work"
mkdir -p "$work/new" "$work/artifacts"
exec "$fuzzer" -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$@" "$work/new" "$corpus"
