#!/usr/bin/env bash
# Sets up, builds and runs every test. With --sanitize, does so in a separate build with
# AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
# cargo may live in ~/.cargo/bin (rustup) rather than on a minimal PATH.
if [ -d "$HOME/.cargo/bin" ]; then export PATH="$HOME/.cargo/bin:$PATH"; fi
if [ "${1:-}" = "--sanitize" ]; then
  scripts/build.sh build-asan -DTINYMLIR_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
  # JIT'd code and LLVM's own allocations are outside the sanitizer's view; leaks of
  # programs, engines or contexts are still reported through our own allocations.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  ctest --test-dir build-asan --output-on-failure -j2
else
  scripts/build.sh build
  ctest --test-dir build --output-on-failure -j2
fi
