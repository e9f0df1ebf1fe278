#!/usr/bin/env bash
# Sets up, builds and runs every test (build/). Other modes, each in its own build folder:
#   --sanitize  AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer (build-asan/)
#   --tsan      ThreadSanitizer on the concurrency tests (build-tsan/)
set -euo pipefail
cd "$(dirname "$0")/.."
# cargo may live in ~/.cargo/bin (rustup) rather than on a minimal PATH.
if [ -d "$HOME/.cargo/bin" ]; then export PATH="$HOME/.cargo/bin:$PATH"; fi

# Divergences the goldens allow are collected here by the tests and shown at the end.
show_notes() {
  local notes="$1/test-notes.txt"
  if [ -s "$notes" ]; then
    echo "Notes from the tests (allowed by their stated tolerances):"
    sed 's/^/  /' "$notes"
  fi
}

# LeakSanitizer's stop-the-world tracer sometimes crashes at process exit on a loaded machine
# ("Tracer caught signal 11", then "LeakSanitizer has encountered a fatal error", after the
# test's own checks have passed; google/sanitizers#1353): the sanitizer failing, not the
# test. When every failed test can be that, those tests run once more; any other failure
# stands, and so does one that fails again.
run_sanitized_tests() {
  local log=build-asan/ctest-output.log failed=build-asan/Testing/Temporary/LastTestsFailed.log
  if ctest --test-dir build-asan --output-on-failure -j2 2>&1 | tee "$log"; then return 0; fi
  local n_failed n_crashes
  n_failed=$(grep -c . "$failed" 2>/dev/null || true)
  n_crashes=$(grep -c "LeakSanitizer has encountered a fatal error" "$log" || true)
  if [ "${n_failed:-0}" -gt 0 ] && [ "${n_crashes:-0}" -ge "$n_failed" ]; then
    echo "test.sh: LeakSanitizer's tracer crashed at exit in $n_crashes test process(es);" \
      "running the failed tests once more: $(tr '\n' ' ' < "$failed")" >&2
    ctest --test-dir build-asan --output-on-failure --rerun-failed
  else
    return 1
  fi
}

case "${1:-}" in
  --sanitize)
    scripts/build.sh build-asan -DTINYMLIR_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
    rm -f build-asan/test-notes.txt
    # Leaks are errors. JIT'd code and LLVM's own allocations are outside the sanitizer's
    # view; leaks of programs, engines or contexts are still reported through our own
    # allocations. tests/lsan.supp names the third-party allocations that are not ours.
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
    export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    export TINYMLIR_CACHE_DIR="$PWD/build-asan/test-cache"
    # The compiler runs in the test processes, where the sanitizers see it: in a compiler
    # process, its leak report would go to that process's private output and be lost.
    # lazy_compiler_test, which tests the compiler process itself, unsets this.
    export TINYMLIR_COMPILE_IN_PROCESS=1
    run_sanitized_tests
    show_notes build-asan
    ;;
  --tsan)
    scripts/build.sh build-tsan -DTINYMLIR_TSAN=ON
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
    # No disk cache: the model test then compiles its programs in parallel, under TSan.
    export TINYMLIR_CACHE_DIR=off
    ctest --test-dir build-tsan --output-on-failure -j1 \
      -R 'Concurren|ConcurrentUse|ContextMayBeDestroyed|unload_test|ProgramsAreSharedAcrossLayersAndModels|ContextsWritingTheSameEntryAtOnce|gpu_shim_fake_driver'
    ;;
  "")
    scripts/build.sh build
    rm -f build/test-notes.txt
    # The tests' compiled programs go to a disk cache of their own: later test processes
    # (and runs) read what earlier ones compiled, which exercises that path too.
    export TINYMLIR_CACHE_DIR="$PWD/build/test-cache"
    ctest --test-dir build --output-on-failure -j2
    show_notes build
    ;;
  *)
    echo "usage: scripts/test.sh [--sanitize | --tsan]" >&2
    exit 2
    ;;
esac
