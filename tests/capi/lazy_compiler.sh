#!/bin/sh
# libtinymlir.so compiles in a compiler process and never maps LLVM itself
# (lazy_compiler_test.c): a cold process compiles into a fresh disk cache, a warm one runs
# from it and compiles more, TINYMLIR_COMPILE_IN_PROCESS=1 compiles in the calling process,
# a copy of libtinymlir.so alone in a folder still reads the disk cache but fails to compile
# with a clear message, and one beside a broken compiler fails to compile, says why, and
# carries on. No mode prints anything to stderr.
# Usage: lazy_compiler.sh TEST LIBTINYMLIR COMPILER PROCESS IMPOSTOR FAKE: libtinymlir's
# and the compiler library's SONAME files (lib*.so.N), the compiler process
# (tinymlir-compiler), any other shared library, and fake_compiler.py.
set -eu
unset TINYMLIR_COMPILE_IN_PROCESS  # the sanitizer suite sets it; each mode here says
test_program=$1 library=$2 compiler=$3 process=$4 impostor=$5 fake=$6
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quiet() {  # quiet ARGS...: runs the test; fails if it wrote to stderr
  "$test_program" "$@" 2> "$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
  if [ -s "$work/stderr" ]; then
    echo "lazy_compiler_test $1 wrote to stderr:" >&2
    cat "$work/stderr" >&2
    exit 1
  fi
}
quiet cold "$work"
quiet warm "$work"
TINYMLIR_COMPILE_IN_PROCESS=1 quiet in-process "$work"
# The library, its compiler and compiler process in a folder named by a relative path.
mkdir "$work/relative"
cp "$library" "$compiler" "$work/relative/"
cp "$process" "$work/relative/tinymlir-compiler"
(cd "$work" && LD_LIBRARY_PATH=relative quiet moved "$work")
quiet few-descriptors "$work"
quiet small-address-space "$work"
quiet killed-idle "$work"
mkdir "$work/alone"
cp "$library" "$work/alone/$(basename "$library")"
# The test's RUNPATH names the build's capi/ folder; LD_LIBRARY_PATH comes first.
LD_LIBRARY_PATH="$work/alone" quiet missing "$work"
# broken FOLDER WORDS: runs the test against the compiler in FOLDER.
broken() {
  cp "$library" "$1/$(basename "$library")"
  [ -e "$1/tinymlir-compiler" ] || cp "$process" "$1/tinymlir-compiler"
  LD_LIBRARY_PATH="$1" quiet broken "$work" "$2"
}
# A library that is not tinymlir's compiler, and tinymlir's from another build.
mkdir "$work/impostor" "$work/other-build"
cp "$impostor" "$work/impostor/$(basename "$compiler")"
broken "$work/impostor" "has no tm_compiler_entry_points"
# The same compiler with the last byte of its build ID changed.
objcopy -O binary --only-section=.note.gnu.build-id "$compiler" "$work/note"
size=$(wc -c < "$work/note")
last=$(tail -c 1 "$work/note" | od -An -tu1 | tr -d ' ')
head -c $((size - 1)) "$work/note" > "$work/note.other"
if [ "$last" = 1 ]; then printf '\002'; else printf '\001'; fi >> "$work/note.other"
objcopy --update-section .note.gnu.build-id="$work/note.other" "$compiler" \
  "$work/other-build/$(basename "$compiler")"
broken "$work/other-build" "is not the compiler library this libtinymlir was built with"
# A compiler process from another build than libtinymlir.so: as if its recorded build ID
# differed from the one libtinymlir.so passes.
mkdir "$work/other-process-build"
printf '#!/bin/sh\nexec "%s" "$1" "$2" 0123456789abcdef "$4"\n' "$process" \
  > "$work/other-process-build/tinymlir-compiler"
chmod +x "$work/other-process-build/tinymlir-compiler"
broken "$work/other-process-build" "the compiler process beside it is from another build"
# Compiler processes that crash or break the protocol (fake_compiler.py).
for mode in crash-at-start crash-compiling garbage-reply; do
  mkdir "$work/$mode"
  cp "$fake" "$work/$mode/tinymlir-compiler"
  case $mode in
    crash-at-start) words='killed by signal 11 (Segmentation fault); its last output: "fake compiler: about to crash at start"' ;;
    crash-compiling) words="failed while compiling trace 'lazy': the connection closed; it was killed by signal 6 (Aborted); its last output: \"LLVM ERROR: fake compiler ran out of registers\"" ;;
    garbage-reply) words="failed while compiling trace 'lazy': it sent a malformed reply; it was stopped by libtinymlir.so" ;;
  esac
  FAKE_COMPILER_MODE=$mode broken "$work/$mode" "$words"
done
# The same crash in an application that ignores SIGCHLD (the kernel reaps its children).
LAZY_IGNORE_SIGCHLD=1 FAKE_COMPILER_MODE=crash-compiling broken "$work/crash-compiling" \
  "the connection closed; it ended (its exit status is not known: the application reaped it, or ignores SIGCHLD); its last output: \"LLVM ERROR: fake compiler ran out of registers\""
# A working compiler in such an application.
quiet closed-streams "$work"
LAZY_IGNORE_SIGCHLD=1 quiet reaped "$work"
