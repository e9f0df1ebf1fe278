#!/bin/sh
# libtinymlir.so loads its compiler library only to compile (lazy_compiler_test.c): a cold
# process compiles into a fresh disk cache, a warm one runs from it without LLVM, and a copy
# of libtinymlir.so alone in a folder fails to compile with a clear message.
# Usage: lazy_compiler.sh TEST LIBTINYMLIR (its SONAME file, libtinymlir.so.N)
set -eu
test_program=$1 library=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$test_program" cold "$work"
"$test_program" warm "$work"
mkdir "$work/alone"
cp "$library" "$work/alone/$(basename "$library")"
# The test's RUNPATH names the build's capi/ folder; LD_LIBRARY_PATH comes first.
LD_LIBRARY_PATH="$work/alone" "$test_program" missing "$work"
