// The CPU target step: row-major matmuls on memrefs become OpenBLAS calls.
//
// After bufferization every linalg.matmul / linalg.batch_matmul on f32/f64 memrefs whose
// operands BLAS can address (rows contiguous, or columns contiguous: a transposed view) is
// replaced by
//   - cblas_sgemm / cblas_dgemm (row-major, a transpose flag per operand, beta = 1 because
//     linalg.matmul accumulates into its output), with the base pointer, offset and strides
//     taken from memref.extract_strided_metadata;
//   - when one side is a single row or column (M == 1 or N == 1, every product of a decode
//     step): tm_rt_sgemv_row / tm_rt_sgemv_col for f32 (our bandwidth-bound kernels, see
//     core/target/cpu/gemv_kernels.h), cblas_dgemv for f64. GEMM is several times slower
//     than GEMV on such shapes;
//   - batch matmul: an scf.for over the batch of the same calls.
// First, a transpose copy (linalg.transpose, or a permuting linalg.generic) of a read-only
// function argument whose only readers are matmul operands is replaced by a transposed
// view: the attention's K and V cache rows are then read in place, not copied every step.
// Matmuls it cannot express (other element types, no unit stride, user-defined
// indexing maps) are left alone and lower to loops.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace tinymlir {

// Returns the number of matmuls rewritten.
int RewriteMatmulsToBlas(mlir::ModuleOp module);

}  // namespace tinymlir
