// Matrix products with one half-precision operand that are not matrix-vector products
// (prefill with f16/bf16 weights): the half operand is widened panel by panel into a
// scratch block that stays in the cache, and each panel goes through OpenBLAS on fixed
// blocks (RunBlasProducts, blas_products.h).
// Called from generated code (the BLAS rewrite), so it has C linkage.
#pragma once

#include <cstdint>

#include "core/targets/cpu/run/cpu_kernels.h"

// C(m x n) += op(A)(m x k) @ op(B)(k x n), C row-major with leading dimension ldc; A and B as
// cblas_sgemm's row-major operands (trans_a/trans_b: CblasNoTrans 111 or CblasTrans 112).
// Exactly one of A and B is half precision: half_operand 0 (A) or 1 (B), of dtype TM_F16
// (6) or TM_BF16 (7); the other is f32.
// tm_rt_sgemm_half: declared in cpu_kernels.h (kernels.def).

