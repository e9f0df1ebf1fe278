// The CPU target step: row-major matmuls on memrefs become OpenBLAS calls.
//
// After bufferization every linalg.matmul / linalg.batch_matmul on f32/f64 memrefs whose
// rows are contiguous (inner stride 1) is replaced by
//   - cblas_sgemm / cblas_dgemm (row-major, no transpose, beta = 1 because linalg.matmul
//     accumulates into its output), with the base pointer, offset and row strides taken
//     from memref.extract_strided_metadata (row stride = leading dimension);
//   - when one side is a single row or column (M == 1 or N == 1, every product of a decode
//     step): tm_rt_sgemv_row / tm_rt_sgemv_col for f32 (our bandwidth-bound kernels, see
//     core/target/cpu/gemv_kernels.h), cblas_dgemv for f64. GEMM is several times slower
//     than GEMV on such shapes;
//   - batch matmul: an scf.for over the batch of the same calls.
// Matmuls it cannot express (other element types, non-unit inner strides, user-defined
// indexing maps) are left alone and lower to loops.
#pragma once

namespace mlir {
class ModuleOp;
}

namespace tinymlir {

// Returns the number of matmuls rewritten.
int RewriteMatmulsToBlas(mlir::ModuleOp module);

}  // namespace tinymlir
