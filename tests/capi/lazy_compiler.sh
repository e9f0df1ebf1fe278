#!/bin/sh
# libtinymlir.so loads its compiler library only to compile (lazy_compiler_test.c): a cold
# process compiles into a fresh disk cache, a warm one runs from it without LLVM, a copy of
# libtinymlir.so alone in a folder still reads the disk cache but fails to compile with a
# clear message, and one beside an impostor compiler library or a compiler library from
# another build (its build ID changed) refuses it.
# Usage: lazy_compiler.sh TEST LIBTINYMLIR COMPILER IMPOSTOR: libtinymlir's and the compiler
# library's SONAME files (lib*.so.N), and any other shared library.
set -eu
test_program=$1 library=$2 compiler=$3 impostor=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$test_program" cold "$work"
"$test_program" warm "$work"
mkdir "$work/alone"
cp "$library" "$work/alone/$(basename "$library")"
# The test's RUNPATH names the build's capi/ folder; LD_LIBRARY_PATH comes first.
LD_LIBRARY_PATH="$work/alone" "$test_program" missing "$work"
# Refused: a library that is not tinymlir's compiler, and tinymlir's from another build.
foreign() {  # foreign FOLDER WORDS: runs the test against FOLDER's compiler library
  cp "$library" "$1/$(basename "$library")"
  LD_LIBRARY_PATH="$1" "$test_program" foreign "$work" "$2"
}
mkdir "$work/impostor" "$work/other-build"
cp "$impostor" "$work/impostor/$(basename "$compiler")"
foreign "$work/impostor" "has no tm_compiler_entry_points"
# The same compiler with the last byte of its build ID changed.
objcopy -O binary --only-section=.note.gnu.build-id "$compiler" "$work/note"
size=$(wc -c < "$work/note")
last=$(tail -c 1 "$work/note" | od -An -tu1 | tr -d ' ')
head -c $((size - 1)) "$work/note" > "$work/note.other"
if [ "$last" = 1 ]; then printf '\002'; else printf '\001'; fi >> "$work/note.other"
objcopy --update-section .note.gnu.build-id="$work/note.other" "$compiler" \
  "$work/other-build/$(basename "$compiler")"
foreign "$work/other-build" "is not the compiler library this libtinymlir was built with"
