#!/bin/sh
# Fails, naming them, if any of tinymlir-opt's --tm-* passes has no FileCheck test: a file
# tests/passes/<name>.mlir (the pass's name without "tm-", dashes as underscores) with a RUN
# line that runs it.
# Usage: check_every_pass_has_a_test.sh <tinymlir-opt> <tests/passes folder>
set -u
tool=$1
dir=$2
help=$("$tool" --help) || { echo "error: '$tool --help' failed" >&2; exit 1; }
passes=$(printf '%s\n' "$help" | sed -n 's/^ *--\(tm-[a-z0-9-]*\) .*/\1/p' | sort -u)
if [ -z "$passes" ]; then
  echo "error: '$tool --help' lists no --tm-* pass" >&2
  exit 1
fi
count=0
failed=0
for pass in $passes; do
  count=$((count + 1))
  file="$dir/$(printf '%s' "${pass#tm-}" | tr - _).mlir"
  if [ ! -f "$file" ]; then
    echo "error: --$pass has no FileCheck test: $file is missing" >&2
    failed=1
  elif ! grep -Eq -- "^// RUN:.*--$pass([= |]|\$)" "$file"; then
    echo "error: --$pass has no FileCheck test: no RUN line of $file runs it" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1
echo "all $count --tm-* passes have a FileCheck test in $dir"
