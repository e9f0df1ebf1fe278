#!/bin/sh
# Logits must not depend on the thread count, tinymlir's (TINYMLIR_NUM_THREADS) or
# OpenBLAS's (OPENBLAS_NUM_THREADS): every product sums in an order fixed by the shapes
# alone. The GEMV kernels split over outputs, never over the summed dimension; OpenBLAS runs
# single-threaded on blocks of C fixed by the shapes (core/target/cpu/blas_products.h), so
# its own thread count has no say. Runs logits_dump (prompts of 1 to 250 tokens) with the
# weights held in f16 (kjv-tiny as stored) and in f32, under 1, 2 and 3 tinymlir threads and
# 1 and 2 OpenBLAS threads, and requires identical bytes. (The pool never starts more
# threads than the CPUs the process may use: on a 2-CPU machine, 3 means 2.)
# Usage: thread_count_reproducibility.sh path/to/logits_dump MODEL_DIR
set -eu
dump="$1"
model="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
for weights in f16 f32; do
  TINYMLIR_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$dump" "$model" "$work/$weights-ref" "$weights"
  for threads in "1 2" "2 1" "2 2" "3 3"; do
    set -- $threads
    TINYMLIR_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$2 "$dump" "$model" "$work/$weights-$1-$2" "$weights"
    cmp "$work/$weights-ref" "$work/$weights-$1-$2" || {
      echo "FAIL: $weights weights: logits with TINYMLIR_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$2" \
           "differ from those with 1 and 1"
      exit 1
    }
  done
  echo "ok: $weights weights: $(wc -c <"$work/$weights-ref") bytes of logits identical with" \
       "1, 2 and 3 tinymlir threads and 1 and 2 OpenBLAS threads"
done
