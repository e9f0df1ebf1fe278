#!/usr/bin/env bash
# Runs an application built against a 0.x header with only LIBRARY_DIR to search and
# requires the dynamic loader's refusal: exit status 127 and the message naming
# libtinymlir.so.0, which 1.x does not provide. Anything else (it ran, it crashed, another
# error) fails. Usage: expect_loader_refusal.sh APPLICATION LIBRARY_DIR [ARGS...]
set -u
app=$1 dir=$2
shift 2
output=$(LD_LIBRARY_PATH="$dir" "$app" "$@" 2>&1)
rc=$?
echo "$output"
if [ $rc -eq 127 ] && grep -q "libtinymlir.so.0: cannot open shared object file" <<<"$output"; then
  echo "refused by the loader, as a 0.x application must be (exit status 127)"
  exit 0
fi
echo "expected the loader to refuse $app (exit status 127, libtinymlir.so.0 not found); exit status $rc"
exit 1
