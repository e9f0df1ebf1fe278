// Matrix products with one half-precision operand that are not matrix-vector products
// (prefill with f16/bf16 weights): each thread widens a strip of the half operand, one
// OpenBLAS block wide, into scratch that stays in its cache, and runs the strip's blocks
// through OpenBLAS (ProductByStrips, strip_products.h): the bits of the product with the
// widened f32 operand.
// Called from generated code (the BLAS rewrite), so it has C linkage.
#pragma once

#include <cstdint>

#include "core/targets/cpu/run/cpu_kernels.h"

// C(m x n) += op(A)(m x k) @ op(B)(k x n), C row-major with leading dimension ldc; A and B as
// cblas_sgemm's row-major operands (trans_a/trans_b: CblasNoTrans 111 or CblasTrans 112).
// Exactly one of A and B is half precision: half_operand 0 (A) or 1 (B), of dtype TM_F16
// (6) or TM_BF16 (7); the other is f32.
// tm_rt_sgemm_half: declared in cpu_kernels.h (kernels.def).

