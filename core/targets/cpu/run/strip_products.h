// Matrix products with one operand in a compact format (f16/bf16 or q8_0 weights) that are
// not matrix-vector products (prefill). The product is cut into strips of C one OpenBLAS
// block wide (kBlasBlockCols columns when the compact operand is B, kBlasBlockRows rows when
// it is A); the worker pool's threads take strips in turn, and each converts its strip of
// the compact operand to f32 in scratch of its own, which stays in its core's cache, and at
// once runs the strip's blocks through OpenBLAS (RunBlasProductsHere). The blocks are those
// of the f32 product (blas_products.h), so a product with a half weight has the bits of
// the product with its widened f32 weight, for any thread count. tm_rt_sgemm_half
// (half_matmul.h) and tm_rt_sgemm_q8_0 (q8_0.h) are this with their own conversion.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/runtime/guarded_call.h"
#include "core/targets/cpu/run/blas_products.h"
#include "core/runtime/kernel_times.h"
#include "core/runtime/worker_pool.h"

namespace tinymlir {

// C(m x n) += op(A)(m x k) @ op(B)(k x n), C row-major with leading dimension ldc, A and B
// cblas row-major operands (trans_x: CblasNoTrans 111 or CblasTrans 112), where operand
// `compact` (0: A, 1: B) is not f32: fill(first, count, strip) writes op(A)'s rows (or
// op(B)'s columns) [first, first + count) into strip as f32, laid out as the operand is
// stored: count rows of k (A as stored, B transposed) or k rows of count (A transposed, B
// as stored), on the calling thread. The other operand is f32.
template <typename Fill>
void ProductByStrips(int compact, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                     int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                     float *c, int64_t ldc, const Fill &fill) {
  if (m <= 0 || n <= 0 || k <= 0) return;  // C keeps its value
  constexpr int32_t kTrans = 112;            // CblasTrans
  constexpr int32_t kF32 = 1;
  const bool ta = trans_a == kTrans, tb = trans_b == kTrans;
  const int64_t width = compact == 1 ? kBlasBlockCols : kBlasBlockRows;
  const int64_t extent = compact == 1 ? n : m;
  const int64_t strips = (extent + width - 1) / width;
  const int threads =
      static_cast<int>(std::min<int64_t>(BlasProductThreads(1, m, n, k), strips));
  // Every thread's scratch in one block, allocated here, through the guarded allocator:
  // when memory runs out the invoke fails with TM_ERROR_OUT_OF_MEMORY, before any thread
  // starts, instead of this kernel returning a wrong product.
  const size_t strip_floats = static_cast<size_t>(width * k);
  float *scratch = static_cast<float *>(
      tm_rt_malloc(strip_floats * static_cast<size_t>(threads) * sizeof(float)));
  if (!scratch) return;  // only outside a guarded call, where nothing can be reported
  const int reserved = ReserveBlasBuffers(threads);
  ScopedKernelTimer timer(KernelClass::kBlas);
  std::atomic<int64_t> next{0};
  auto run_strips = [&](int thread) {
    float *strip = scratch + static_cast<size_t>(thread) * strip_floats;
    for (int64_t s; (s = next.fetch_add(1, std::memory_order_relaxed)) < strips;) {
      const int64_t first = s * width, count = std::min(width, extent - first);
      fill(first, count, strip);
      if (compact == 1)  // C's columns [first, first + count)
        RunBlasProductsHere(kF32, 1, trans_a, trans_b, m, count, k, a, lda, 0, strip,
                            tb ? k : count, 0, c + first, ldc, 0);
      else  // C's rows [first, first + count)
        RunBlasProductsHere(kF32, 1, trans_a, trans_b, count, n, k, strip, ta ? count : k, 0,
                            b, ldb, 0, c + first * ldc, ldc, 0);
    }
  };
  if (threads == 1) {
    run_strips(0);
  } else {
    // Thread indices of ParallelFor are 0 .. pool size - 1; only the first `threads` take
    // strips (each has scratch).
    WorkerPool::Get().ParallelFor([&](int thread) {
      if (thread < threads) run_strips(thread);
    });
  }
  ReleaseBlasBuffers(reserved);
  tm_rt_free(scratch);
}

}  // namespace tinymlir
