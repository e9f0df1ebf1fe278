#!/bin/sh
# Logits must be the same bytes however the machine runs them. logits_dump writes kjv-tiny's
# prompt logits (prompts of 1 to 250 tokens: the decode kernels, short prompts, OpenBLAS in
# several blocks of columns); each mode runs it under different conditions and requires
# identical files. The disk cache is off: every program is compiled for its run.
#
#   threads         with the weights held in f16 (kjv-tiny as stored), f32 and q8_0, under 1, 2
#                   and 3 tinymlir threads (TINYMLIR_NUM_THREADS) and 1 and 2 OpenBLAS
#                   threads: every product sums in an order fixed by the shapes alone (the
#                   GEMV kernels split over outputs, never over the summed dimension;
#                   OpenBLAS runs single-threaded on blocks of C fixed by the shapes,
#                   core/targets/cpu/run/blas_products.h, so its own thread count has no say). The
#                   pool never starts more threads than the CPUs the process may use: on a
#                   2-CPU machine, 3 means 2.
#   cpu-extensions  with the weights in f32, f16, bf16 and q8_0, with every extension of this
#                   CPU, with TINYMLIR_CPU_EXCLUDE=avx512f (the AVX2 kernels; where the CPU
#                   has no AVX-512 this is the first run again) and with
#                   TINYMLIR_CPU_EXCLUDE=avx2,fma,f16c (a CPU of 2011: SSE4.2 and AVX;
#                   AVX-512 goes too): the decode kernels' variants do the same operations in
#                   the same order (core/targets/cpu/run/gemv_kernels.cpp, q8_0.h), generated
#                   code is never contracted or reassociated, so SSE and AVX code give the
#                   same bits, and without F16C the compiled code widens f16 through libgcc's
#                   __extendhfsf2.
#
# Usage: logits_reproducibility.sh threads|cpu-extensions path/to/logits_dump MODEL_DIR
set -eu
mode="$1"
dump="$2"
model="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
unset TINYMLIR_CPU_EXCLUDE

# same FILE REFERENCE WHAT: FILE must hold REFERENCE's bytes; WHAT says how it was made.
same() {
  cmp "$1" "$2" || { echo "FAIL: logits $3 differ" >&2; exit 1; }
}

case "$mode" in
  threads)
    for weights in f16 f32 q8_0; do
      TINYMLIR_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$dump" "$model" "$work/$weights-ref" "$weights"
      for threads in "1 2" "2 1" "2 2" "3 3"; do
        set -- $threads
        TINYMLIR_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$2 "$dump" "$model" "$work/$weights-$1-$2" "$weights"
        same "$work/$weights-$1-$2" "$work/$weights-ref" \
          "of $weights weights with TINYMLIR_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$2 and with 1 and 1"
      done
      echo "ok: $weights weights: $(wc -c <"$work/$weights-ref") bytes of logits identical with" \
           "1, 2 and 3 tinymlir threads and 1 and 2 OpenBLAS threads"
    done
    ;;
  cpu-extensions)
    for weights in f32 f16 bf16 q8_0; do
      "$dump" "$model" "$work/$weights-all" "$weights"
      for excluded in avx512f avx2,fma,f16c; do
        TINYMLIR_CPU_EXCLUDE=$excluded "$dump" "$model" "$work/$weights-$excluded" "$weights"
        same "$work/$weights-$excluded" "$work/$weights-all" \
          "of $weights weights with TINYMLIR_CPU_EXCLUDE=$excluded and with every extension"
      done
      echo "ok: $weights weights: $(wc -c <"$work/$weights-all") bytes of logits identical with" \
           "every extension, without avx512f and without avx2,fma,f16c"
    done
    ;;
  *)
    echo "usage: $0 threads|cpu-extensions path/to/logits_dump MODEL_DIR" >&2
    exit 2
    ;;
esac
