#!/usr/bin/env bash
# The GPU target on a real GPU, in two steps, because the GPU machine has no LLVM or MLIR:
#
#   scripts/gpu-check.sh prepare [KIT]   here: builds, and writes into KIT (default gpu-kit/,
#                                        ignored by git) everything the GPU machine runs: the
#                                        runtime library and the libraries it needs, the
#                                        gpu_check and tinymlir-run programs, the op cases
#                                        (GPU programs + the CPU's results) and GPU bundles
#                                        of kjv-tiny and of a GPT-2 124M-shaped model;
#                                        then runs the kit's bundles against a fake CUDA
#                                        driver (no kernel runs; every launch is checked).
#   scripts/gpu-check.sh run [KIT]       there (or here, where it stops at "no GPU"):
#                                        1. every op case on the GPU = the CPU within 1e-5
#                                           relative (tests/gpu/gpu_check.cpp);
#                                        2. kjv-tiny's greedy tokens from its GPU bundle =
#                                           the Hugging Face golden (models/kjv-tiny);
#                                        3. the CUDA driver shim's tests on the device
#                                           (tests/gpu/cuda_shim_test.cpp, CudaDevice.*);
#                                        4. decode tokens/s of kjv-tiny and of GPT-2 124M
#                                           shapes (random weights), next to PyTorch on the
#                                           same GPU, eager and with a static KV cache
#                                           (bench/torch_gpu_decode.py, which needs no
#                                           NumPy; prepare checks its kjv-tiny ids on
#                                           this CPU).
# With the device tool: prepare here, then run
#   scripts/gpu-check.sh run gpu-kit 2>&1 | tee $OUT/gpu-check.log
# carrying gpu-kit (about 35 MB; the 124M checkpoint is generated there from its seed).
# Exit status of run: 0 all equal, 1 a difference or an error, 2 no GPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STEP="${1:-}"
KIT="${2:-$ROOT/gpu-kit}"
case "$KIT" in /*) ;; *) KIT="$PWD/$KIT" ;; esac
BUILD="${TINYMLIR_BUILD_DIR:-$ROOT/build}"
PROMPT_IDS="818 262 3726"  # "In the beginning", the first golden case of kjv-tiny

prepare() {
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  [[ -f "$BUILD/build.ninja" ]] || "$ROOT/scripts/build.sh" "$BUILD"
  ninja -C "$BUILD" tinymlir tinymlir_runtime tinymlir-cli tinymlir-run-cli gpu_check \
    gpu_check_writer gpu_shim_tests fake_cuda_driver >&2
  rm -rf "$KIT" && mkdir -p "$KIT/bin" "$KIT/lib" "$KIT/cases"
  export TINYMLIR_CACHE_DIR=off
  # The GPU machine's CPU is not this one, and a program file refuses a CPU without every
  # extension it was compiled with: the host code is compiled for x86-64-v3 (AVX2, FMA,
  # F16C, BMI, LZCNT, MOVBE), which any server beside an H200 has, whatever this CPU adds
  # (AVX-512, GFNI, AMD's SSE4A, ...).
  export TINYMLIR_CPU_EXCLUDE=sse4a,adx,aes,pclmul,sha,gfni,fma4,vaes,vpclmulqdq,avxvnni,avx512f
  "$BUILD/tests/gpu_check_writer" "$KIT/cases"
  "$BUILD/bin/tinymlir" compile --target gpu --out "$KIT/kjv-tiny-gpu" 2>&1 | tail -1
  # GPT-2 124M shapes: the bench's random checkpoint (generated here once, regenerated
  # there from the same seed); every program of the model.
  local ckpt="${TINYMLIR_BENCH_CACHE:-/tmp/tinymlir-bench}/gpt2-124m-random"
  /usr/bin/python3 -c "import sys; sys.path.insert(0, '$ROOT/bench'); import checkpoint; checkpoint.ensure_checkpoint('$ckpt', 0)"
  "$BUILD/bin/tinymlir" compile --target gpu --model "$ckpt" --out "$KIT/gpt2-124m-gpu" 2>&1 |
    tail -1
  strip -o "$KIT/bin/tinymlir-run" "$BUILD/bin/tinymlir-run"
  strip -o "$KIT/bin/gpu_check" "$BUILD/tests/gpu_check"
  # The shim's tests link the engine statically (26 MB stripped, 1.6 MB in xz).
  strip -o "$KIT/bin/gpu_shim_tests" "$BUILD/tests/gpu_shim_tests"
  xz -T0 -f "$KIT/bin/gpu_shim_tests"
  # The runtime library (stripped, 26 MB, most of it OpenBLAS's kernels for every CPU) and
  # the shared libraries it needs beyond the C/C++ runtime, which the GPU machine has, in
  # one xz archive (1.8 MB): the kit travels under a 64 MiB limit. `run` unpacks it.
  local stripped="$KIT/libtinymlir_runtime.so.1"
  strip -o "$stripped" "$BUILD/capi/libtinymlir_runtime.so.1"
  { echo "$stripped"
    ldd "$BUILD/capi/libtinymlir_runtime.so.1" | awk '/=>/ {print $3}' |
      grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux)[.-]'; } |
    tar -cJf "$KIT/lib/deps.tar.xz" --transform 's|.*/||' -h -P -T -
  rm "$stripped"
  self_check "$ckpt"
  # The PyTorch reference the GPU machine runs, on this CPU: its greedy ids must be kjv-tiny's
  # golden ones, or its speed would be a speed of something else.
  if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    /usr/bin/python3 "$ROOT/bench/torch_gpu_decode.py" --device cpu --tokens 16 \
      --model "$ROOT/models/kjv-tiny" --golden "$ROOT/models/kjv-tiny/golden.json"
  else
    echo "the PyTorch reference is not checked here: no PyTorch (apt-get install python3-torch)"
  fi
  du -sh "$KIT"
}

# The kit as the GPU machine will use it (its stripped programs, its packed libraries), run
# here against the fake CUDA driver (tests/gpu/fake_cuda_driver.cpp): both bundles load,
# every kernel is found and no launch is refused. Kernels do not run, so tokens are not
# checked (cli_gpu_bundle_without_a_gpu checks them through GPU emulation).
self_check() {
  local ckpt="$1" libs log
  libs=$(mktemp -d)
  log="$libs/driver.log"
  tar -xJf "$KIT/lib/deps.tar.xz" -C "$libs"
  for bundle in "$KIT/kjv-tiny-gpu --model $ROOT/models/kjv-tiny" "$KIT/gpt2-124m-gpu --model $ckpt"; do
    # shellcheck disable=SC2086  # the bundle and its --model, split on purpose
    if ! LD_LIBRARY_PATH="$libs:$BUILD/tests/fake-cuda-driver" FAKE_CUDA_LOG="$log" \
         "$KIT/bin/tinymlir-run" generate --greedy --ids --tokens 3 --bundle $bundle "1 2 3" \
         >/dev/null 2>"$libs/err" || grep violation "$log"; then
      echo "gpu-check: the kit fails against a driver without a GPU:" >&2
      cat "$libs/err" >&2
      rm -rf "$libs"
      exit 1
    fi
  done
  echo "kit self-check: $(grep -c '^launch ' "$log") launches against a driver without a GPU, none refused"
  rm -rf "$libs"
}

run() {
  [[ -d "$KIT/bin" ]] || { echo "gpu-check: no kit at $KIT (run prepare first)" >&2; exit 1; }
  # Unpacked beside the kit, not into it: the kit stays what travels. (A global: the EXIT
  # trap reads it.)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tar -xJf "$KIT/lib/deps.tar.xz" -C "$work"
  export LD_LIBRARY_PATH="$work${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TINYMLIR_CACHE_DIR=off
  date -u +"gpu-check %Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
    echo "(no nvidia-smi)"
  if ldd "$KIT/bin/tinymlir-run" | grep "not found"; then
    echo "gpu-check: libraries missing on this machine (above)" >&2
    exit 1
  fi
  local status=0
  echo "== 1. op cases: GPU vs CPU"
  "$KIT/bin/gpu_check" "$KIT/cases" || status=$?
  [[ $status -eq 2 ]] && exit 2

  echo "== 2. kjv-tiny greedy tokens from the GPU bundle"
  local want got
  want=$(python3 -c "import json; c = json.load(open('$ROOT/models/kjv-tiny/golden.json'))['cases'][0]; print(' '.join(map(str, c['greedy_ids'])))")
  got=$("$KIT/bin/tinymlir-run" generate --greedy --ids --tokens "$(echo "$want" | wc -w)" \
          --model "$ROOT/models/kjv-tiny" --bundle "$KIT/kjv-tiny-gpu" "$PROMPT_IDS" \
          2>"$work/kjv.err" | tr -s ' ' | sed "s/^ *$PROMPT_IDS *//")
  cat "$work/kjv.err"
  if [[ "$(echo $got)" == "$(echo $want)" ]]; then echo "ok   kjv-tiny tokens = golden"
  else echo "FAIL kjv-tiny tokens: got $got, want $want"; status=1; fi

  echo "== 3. the CUDA driver shim on the device"
  xz -dc "$KIT/bin/gpu_shim_tests.xz" >"$work/gpu_shim_tests" && chmod +x "$work/gpu_shim_tests"
  "$work/gpu_shim_tests" --gtest_filter='CudaDevice.*' --gtest_brief=1 || status=1

  echo "== 4. decode tokens/s (tinymlir GPU bundle; PyTorch on the same GPU)"
  "$KIT/bin/tinymlir-run" generate --greedy --ids --tokens 64 --model "$ROOT/models/kjv-tiny" \
    --bundle "$KIT/kjv-tiny-gpu" "$PROMPT_IDS" 2>&1 >/dev/null | grep -o "decode .*" |
    sed 's/^/tinymlir kjv-tiny: /'
  local ckpt="$KIT/gpt2-124m-random"
  python3 "$ROOT/bench/torch_gpu_decode.py" --ensure-random "$ckpt" &&
    "$KIT/bin/tinymlir-run" generate --greedy --ids --tokens 64 --model "$ckpt" \
      --bundle "$KIT/gpt2-124m-gpu" "464 2068 7586 21831" 2>&1 >/dev/null |
      grep -o "decode .*" | sed 's/^/tinymlir gpt2-124m: /' || status=1
  python3 "$ROOT/bench/torch_gpu_decode.py" --model "$ROOT/models/kjv-tiny" --tokens 64 \
    --golden "$ROOT/models/kjv-tiny/golden.json" || status=1
  python3 "$ROOT/bench/torch_gpu_decode.py" --model "$ckpt" --tokens 64 || status=1
  exit $status
}

case "$STEP" in
  prepare) prepare ;;
  run) run ;;
  *) sed -n '2,24p' "$0" >&2; exit 1 ;;
esac
