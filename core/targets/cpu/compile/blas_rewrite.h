// The CPU target step: matmuls on memrefs become calls to tinymlir's GEMV kernels or to
// OpenBLAS (through blas_products.h).
//
// After bufferization every linalg.matmul / linalg.batch_matmul on f32/f64 memrefs (f32
// with one f16/bf16 operand: a half weight read in place) whose operands can be addressed
// by pointer and strides (rows contiguous, or columns contiguous: a transposed view) is
// replaced by
//   - f32 products of one row or one column, and products of at most 16 rows with a half
//     matrix: tm_rt_gemv_rows / tm_rt_gemv_dots (core/targets/cpu/run/gemv_kernels.h),
//     bandwidth-bound, each row summed as it is alone;
//   - longer ones: tm_rt_gemm (core/targets/cpu/run/blas_products.h: OpenBLAS on blocks of C
//     fixed by the shapes, row-major, a transpose flag per operand, accumulating because
//     linalg.matmul accumulates into its output), with the base pointer, offset and
//     strides taken from memref.extract_strided_metadata; tm_rt_sgemm_half with a half
//     operand;
//   - batch matmul: one tm_rt_gemm call for the whole batch, or, for products the GEMV
//     kernels take (attention's per-head products in decode), one call of their batched
//     form (tm_rt_gemv_rows_batched / tm_rt_gemv_dots_batched: the bits of a call per
//     element, the heads' cache rows streamed in order and split over the pool); else an
//     scf.for over the batch of single calls.
// First, a transpose copy (linalg.transpose, or a permuting linalg.generic) or a widening
// copy of a read-only function argument whose only readers are matmul operands is replaced
// by a view of the argument: the attention's K and V cache rows are read in place, and a
// half-precision weight is never copied to f32. Matmuls it cannot express (other element
// types, no unit stride, user-defined indexing maps) are left alone and lower to loops.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace tinymlir {

// Returns the number of matmuls rewritten.
int RewriteMatmulsToBlas(mlir::ModuleOp module);

}  // namespace tinymlir
