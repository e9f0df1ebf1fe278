#!/usr/bin/env bash
# GPT-2 124M benchmark: tinymlir vs NumPy vs PyTorch vs the memory-bandwidth ceiling.
#
#   bench/run.sh [bench.py options: --threads 2 --reps 5 --decode-tokens 64 --no-torch
#                 --no-xl --smoke ...]
#
# Builds what it needs (the library incrementally, the gpt2_bench driver), generates the
# random-weight checkpoints once (cached in $TINYMLIR_BENCH_CACHE, default /tmp/tinymlir-bench:
# GPT-2 124M, 0.5 GB, and GPT-2 XL's shapes, 6.2 GB, unless --no-xl), runs every
# implementation one after another (tinymlir with F32, F16, BF16 and Q8_0 weights), decodes
# them side by side against read-bandwidth samples, measures the load time of `tinymlir
# generate` (cold and warm) and the XL-shaped run, measures the compiled artifacts on the
# embedded kjv-tiny (bench/artifacts.py), prints a table, writes bench/results.json.
# It needs about 10 GB free in the cache's file system (the XL checkpoint and prepared files)
# and 8 GB of memory for the XL run in F32.
# Environment: TINYMLIR_BUILD_DIR (default build, the README's; configured here if missing),
# TINYMLIR_BENCH_NO_LIB_BUILD=1 to use the library as it is, TINYMLIR_BENCH_CACHE.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TINYMLIR_BUILD_DIR:-$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
CACHE="${TINYMLIR_BENCH_CACHE:-/tmp/tinymlir-bench}"
PY=/usr/bin/python3

# What the build and the references need (PyTorch unless --no-torch), from Debian.
case " $* " in
  *" --no-torch "*) "$ROOT/scripts/install-deps.sh" ;;
  *) "$ROOT/scripts/install-deps.sh" --bench ;;
esac
"$PY" -c "import numpy" || { echo "run.sh: $PY has no numpy (apt-get install python3-numpy)" >&2; exit 1; }

# 1. The library (and CLI): configure if there is no build tree, else an incremental build.
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "[run.sh] configuring $BUILD" >&2
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTINYMLIR_BUILD_TESTS=OFF >&2
fi
if [[ "${TINYMLIR_BENCH_NO_LIB_BUILD:-0}" != 1 || ! -f "$BUILD/capi/libtinymlir.so" ]]; then
  echo "[run.sh] building tinymlir in $BUILD" >&2
  cmake --build "$BUILD" --target tinymlir tinymlir-cli tinymlir_runtime tinymlir-run-cli -j 2 >&2
fi
LIB="$BUILD/capi/libtinymlir.so"

# 2. The driver: the build tree's target when bench/ is wired in, else compiled here.
if [[ -d "$BUILD/bench/CMakeFiles/gpt2_bench.dir" ]]; then  # add_subdirectory(bench) is wired
  cmake --build "$BUILD" --target gpt2_bench >&2
  DRIVER="$BUILD/bench/gpt2_bench"
else
  mkdir -p "$ROOT/bench/build"
  DRIVER="$ROOT/bench/build/gpt2_bench"
  echo "[run.sh] compiling $DRIVER" >&2
  "${CXX:-c++}" -O2 -std=c++17 -I"$ROOT/capi/include" -I"$ROOT/gpt2/include" -I"$BUILD/include" "$ROOT/bench/gpt2_bench.cpp" -o "$DRIVER" \
    -L"$BUILD/capi" -ltinymlir -Wl,-rpath,"$BUILD/capi" -pthread
fi

# 3. The benchmark.
if [[ " $* " != *" --no-torch "* ]] && ! "$PY" -c "import torch" 2>/dev/null; then
  echo "run.sh: $PY cannot import torch although python3-torch is installed; pass --no-torch" \
       "to run without PyTorch" >&2
  exit 1
fi
exec "$PY" "$ROOT/bench/bench.py" --driver "$DRIVER" --library "$LIB" --cache "$CACHE" \
  --build "$BUILD" "$@"
