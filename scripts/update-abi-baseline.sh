#!/usr/bin/env bash
# Writes the ABI baselines, abi/libtinymlir.abi and abi/libtinymlir_runtime.abi, from a build
# (default build/): what the CTest tests abi_libtinymlir and abi_libtinymlir_runtime compare
# every later build against (tests/abi/check_abi.sh).
#
# Run it only for an intended change of the C ABI, and commit the new baselines with it:
# - a compatible addition (a function, an enum value, a field at the end of a versioned
#   struct with its TM_<STRUCT>_SIZE_V<n>): bump TINYMLIR_ABI_MINOR in CMakeLists.txt first;
# - an incompatible change: only with a new major version (the SONAME), see the README's
#   "ABI" section.
# Usage: scripts/update-abi-baseline.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
for lib in libtinymlir libtinymlir_runtime; do
  abidw --exported-interfaces-only --drop-private-types --no-corpus-path --no-comp-dir-path \
    --suppressions abi/suppressions.txt \
    --headers-dir capi/include/tinymlir --headers-dir gpt2/include/tinymlir \
    --headers-dir "$build/include/tinymlir" \
    "$build/capi/$lib.so" --out-file "abi/$lib.abi"
  echo "wrote abi/$lib.abi from $build/capi/$lib.so"
done
