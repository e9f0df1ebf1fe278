#!/bin/sh
# Logits must not depend on tinymlir's thread count (TINYMLIR_NUM_THREADS): every kernel of
# its own sums in an order fixed by the shapes alone (the GEMV kernels split over outputs,
# never over the summed dimension). Runs logits_dump with 1, 2 and 3 threads and requires
# identical bytes. OpenBLAS's thread count is held at 1: its GEMM (prefill) gives other bits
# with another OPENBLAS_NUM_THREADS (measured with OpenBLAS 0.3.21 alone: M=16, N=384,
# K=128 differs between 1 and 2 threads), which this does not fix.
# Usage: thread_count_reproducibility.sh path/to/logits_dump MODEL_DIR
set -eu
dump="$1"
model="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
for n in 1 2 3; do
  TINYMLIR_NUM_THREADS=$n OPENBLAS_NUM_THREADS=1 "$dump" "$model" "$work/logits-$n.f32"
done
cmp "$work/logits-1.f32" "$work/logits-2.f32"
cmp "$work/logits-1.f32" "$work/logits-3.f32"
echo "ok: $(wc -c <"$work/logits-1.f32") bytes of logits identical with 1, 2 and 3 tinymlir threads"
