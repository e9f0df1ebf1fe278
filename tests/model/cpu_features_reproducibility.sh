#!/bin/sh
# Logits must not depend on the CPU's vector extensions. The decode kernels come in two
# variants, AVX2/FMA/F16C and portable scalar code, that do the same operations in the same
# order (core/target/cpu/gemv_kernels.cpp); generated code is never contracted or
# reassociated, so SSE and AVX code give the same bits; and without F16C the compiled code
# widens f16 through libgcc's __extendhfsf2 (resolved by the runtime symbol table). This
# runs logits_dump with every extension the machine has, then with
# TINYMLIR_CPU_EXCLUDE=avx2,fma,f16c (a CPU of 2011: SSE4.2 and AVX only; AVX-512, which
# needs them, goes too), with the weights in f32, f16 and bf16, and requires identical
# bytes. The disk cache is off: every program is compiled for the CPU the variable
# describes.
# Usage: cpu_features_reproducibility.sh path/to/logits_dump MODEL_DIR
set -eu
dump="$1"
model="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
excluded=avx2,fma,f16c
for weights in f32 f16 bf16; do
  env -u TINYMLIR_CPU_EXCLUDE "$dump" "$model" "$work/$weights-all" "$weights"
  TINYMLIR_CPU_EXCLUDE=$excluded "$dump" "$model" "$work/$weights-portable" "$weights"
  cmp "$work/$weights-all" "$work/$weights-portable" || {
    echo "FAIL: $weights weights: logits with TINYMLIR_CPU_EXCLUDE=$excluded differ from" \
         "those with every extension of this CPU"
    exit 1
  }
  echo "ok: $weights weights: $(wc -c <"$work/$weights-all") bytes of logits identical with" \
       "and without $excluded"
done
