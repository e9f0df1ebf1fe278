// Matrix products through OpenBLAS, reproducible to the bit for any thread count.
//
// OpenBLAS's own threading splits a product by its thread count, and the kernels it then
// runs on each part sum in a different order: on GPT-2's shapes, 1, 2 and 3 threads give
// three different sets of low bits. So the library links a private, single-threaded
// OpenBLAS (Debian's serial build, linked statically with its symbols hidden, so a host's
// own OpenBLAS is neither used nor affected) and does the splitting itself: C is cut into
// blocks whose sizes depend on the shapes alone, each block is one single-threaded OpenBLAS
// call, and the worker pool (TINYMLIR_NUM_THREADS) takes the blocks in any order. Which
// thread computes a block never changes its bits. OPENBLAS_NUM_THREADS has no effect, and
// no OpenBLAS thread spins beside the pool after a product.
//
// Called from generated code (the BLAS rewrite), so the entry point has C linkage.
#pragma once

#include <cstdint>

#include "core/targets/cpu/run/cpu_kernels.h"

// For each b in [0, batch): C_b(m x n) += op(A_b)(m x k) @ op(B_b)(k x n), where X_b is X
// advanced by b * stride_x elements. C is row-major with leading dimension ldc; A and B are
// cblas row-major operands (trans_x: CblasNoTrans 111 or CblasTrans 112) with leading
// dimensions lda and ldb. dtype is the C API's TM_F32 (1) or TM_F64 (2), for all three.
// tm_rt_gemm: declared in cpu_kernels.h (kernels.def).


namespace tinymlir {

// OpenBLAS's packing buffers for `threads` threads running products, mapped now: OpenBLAS
// maps one the first time more are in use than it has, and retries a failed mapping
// forever. Call before the products, with nothing in the calling frame that has a
// destructor: inside an invoke, a buffer that cannot be mapped ends it with
// TM_ERROR_OUT_OF_MEMORY (guarded_call.h). Returns what to pass to ReleaseBlasBuffers.
int ReserveBlasBuffers(int threads);
void ReleaseBlasBuffers(int reserved);

// The blocks of C that RunBlasProducts cuts a product into: their sizes, with the shapes,
// decide the bits.
inline constexpr int64_t kBlasBlockRows = 256;
inline constexpr int64_t kBlasBlockCols = 128;

// How many threads RunBlasProducts runs a product of these sizes on.
int BlasProductThreads(int64_t batch, int64_t m, int64_t n, int64_t k);

// tm_rt_gemm without its kernel timer and buffer reservation, for runtime kernels that do
// both themselves.
void RunBlasProducts(int32_t dtype, int64_t batch, int32_t trans_a, int32_t trans_b,
                     int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                     int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, void *c,
                     int64_t ldc, int64_t stride_c);

// RunBlasProducts on the calling thread alone (the same blocks, so the same bits), for a
// kernel that runs on the worker pool itself.
void RunBlasProductsHere(int32_t dtype, int64_t batch, int32_t trans_a, int32_t trans_b,
                         int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                         int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                         void *c, int64_t ldc, int64_t stride_c);

}  // namespace tinymlir
