#!/bin/sh
# Logits must not depend on tinymlir's thread count (TINYMLIR_NUM_THREADS): every kernel of
# its own sums in an order fixed by the shapes alone (the GEMV kernels split over outputs,
# never over the summed dimension). Runs logits_dump with 1, 2 and 3 threads and requires
# identical bytes, OpenBLAS's thread count held at 1.
# Prompts of up to 16 tokens run on tinymlir's kernels alone, so their logits must not
# depend on OPENBLAS_NUM_THREADS either: the first three prompts (1, 3 and 9 tokens) are
# compared with 1 and 2 OpenBLAS threads. The 40-token prompt's products go to OpenBLAS's
# GEMM, whose bits change with its own thread count (0.3.21): not compared.
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
TINYMLIR_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$dump" "$model" "$work/logits-blas2.f32"
short=$(( $(wc -c <"$work/logits-1.f32") / 4 * 3 ))  # the first three prompts' logits
cmp -n "$short" "$work/logits-1.f32" "$work/logits-blas2.f32"
echo "ok: $(wc -c <"$work/logits-1.f32") bytes of logits identical with 1, 2 and 3 tinymlir threads;"
echo "    the $short bytes of the prompts of up to 16 tokens also with 2 OpenBLAS threads"
