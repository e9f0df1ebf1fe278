#!/bin/sh
# Each FileCheck test must fail when its pass is taken out of its RUN lines: otherwise its
# CHECK lines only describe the input, and a pass that does nothing would pass. For every
# tests/passes/*.mlir, runs lit on a copy as it is (it must pass: the copy is faithful) and
# on a copy whose RUN lines have every --tm-* option removed (it must fail).
# Usage: check_tests_fail_without_their_pass.sh <lit> <tinymlir-opt> <FileCheck> <tests/passes> <work dir>
set -u
lit=$1
opt=$2
filecheck=$3
dir=$4
work=$5
rm -rf "$work"
mkdir -p "$work" || exit 1

# Runs lit on one copied test; its exit status is lit's.
run_lit() {
  "$lit" -q "$1" --param tinymlir_opt="$opt" --param filecheck="$filecheck" \
    --param exec_root="$1/out" >"$1/lit.log" 2>&1
}

count=0
failed=0
for test in "$dir"/*.mlir; do
  name=$(basename "$test" .mlir)
  count=$((count + 1))
  for variant in as_is without_pass; do
    copy="$work/$name.$variant"
    mkdir -p "$copy"
    cp "$dir/lit.cfg.py" "$copy/"
    if [ "$variant" = as_is ]; then
      cp "$test" "$copy/"
    else
      sed -E '/^\/\/ RUN:/s/ --tm-[a-z0-9-]+(=[^ |]*)?//g' "$test" >"$copy/$name.mlir"
      if grep '^// RUN:' "$copy/$name.mlir" | grep -q -- '--tm-'; then
        echo "error: $name.mlir: a --tm-* option is left in a RUN line after removal" >&2
        failed=1
      fi
    fi
    run_lit "$copy"
    status=$?
    if [ "$variant" = as_is ] && [ "$status" != 0 ]; then
      echo "error: $name.mlir fails when copied as it is (see $copy/lit.log)" >&2
      failed=1
    elif [ "$variant" = without_pass ] && [ "$status" = 0 ]; then
      echo "error: $name.mlir passes with its --tm-* pass removed from its RUN lines:" \
           "its CHECK lines do not test the pass" >&2
      failed=1
    fi
  done
done
if [ "$count" = 0 ]; then
  echo "error: no .mlir test in $dir" >&2
  exit 1
fi
[ "$failed" = 0 ] || exit 1
echo "all $count pass tests fail with their pass removed from their RUN lines"
