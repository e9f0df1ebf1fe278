// Matrix products with one operand in a compact format (f16/bf16 or q8_0 weights) that are
// not matrix-vector products (prefill): the compact operand is converted to f32 panel by
// panel, into scratch that stays in the cache, and each panel goes through OpenBLAS on
// fixed blocks (RunBlasProducts, blas_products.h), so the bits do not depend on the thread
// count. tm_rt_sgemm_half (half_matmul.h) and tm_rt_sgemm_q8_0 (q8_0.h) are this with their
// own conversion and panel size.
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

// convert(r, count) for rows [0, rows) of `cols` elements, in tasks of 16 rows on every
// thread of the pool, or all on this thread when the block is small. Converting streams
// the compact operand from memory: the part of a prefill product that OpenBLAS's blocks do
// not share (GPT-2 124M's prefill-16 with f16 weights took 208 ms with one thread
// widening, against 64 ms for f32 weights).
template <typename Convert>
void ConvertRowsOnPool(int64_t rows, int64_t cols, const Convert &convert) {
  constexpr int64_t kRowsPerTask = 16;
  WorkerPool &pool = WorkerPool::Get();
  if (rows * cols < (int64_t{1} << 16) || pool.size() == 1) {
    convert(int64_t{0}, rows);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.ParallelFor([&](int) {
    for (int64_t r; (r = next.fetch_add(kRowsPerTask, std::memory_order_relaxed)) < rows;)
      convert(r, std::min(kRowsPerTask, rows - r));
  });
}

// C(m x n) += op(A)(m x k) @ op(B)(k x n), C row-major with leading dimension ldc, A and B
// cblas row-major operands (trans_x: CblasNoTrans 111 or CblasTrans 112), where operand
// `compact` (0: A, 1: B) is not f32: fill(first, count, panel) writes op(A)'s rows (or
// op(B)'s columns) [first, first + count) into panel as f32, laid out as the operand is
// stored: count rows of k (A as stored, B transposed) or k rows of count (A transposed, B
// as stored). At most `width` rows or columns a panel; the other operand is f32.
template <typename Fill>
void ProductByPanels(int compact, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                     int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                     float *c, int64_t ldc, int64_t width, const Fill &fill) {
  if (m <= 0 || n <= 0 || k <= 0) return;  // C keeps its value
  constexpr int32_t kTrans = 112;            // CblasTrans
  const bool ta = trans_a == kTrans, tb = trans_b == kTrans;
  // Through the guarded allocator: when memory runs out, the invoke fails with
  // TM_ERROR_OUT_OF_MEMORY instead of this kernel returning a wrong product.
  float *panel = static_cast<float *>(tm_rt_malloc(static_cast<size_t>(width * k) * sizeof(float)));
  if (!panel) return;  // only outside a guarded call, where nothing can be reported
  // The widest panel's product uses the most threads.
  const int reserved = ReserveBlasBuffers(compact == 1
                                              ? BlasProductThreads(1, m, std::min(width, n), k)
                                              : BlasProductThreads(1, std::min(width, m), n, k));
  ScopedKernelTimer timer(KernelClass::kBlas);
  if (compact == 1) {  // panels of C's columns
    for (int64_t j0 = 0; j0 < n; j0 += width) {
      const int64_t w = std::min(width, n - j0);
      fill(j0, w, panel);
      RunBlasProducts(1, 1, trans_a, trans_b, m, w, k, a, lda, 0, panel, tb ? k : w, 0,
                      c + j0, ldc, 0);
    }
  } else {  // panels of C's rows
    for (int64_t i0 = 0; i0 < m; i0 += width) {
      const int64_t w = std::min(width, m - i0);
      fill(i0, w, panel);
      RunBlasProducts(1, 1, trans_a, trans_b, w, n, k, panel, ta ? w : k, 0, b, ldb, 0,
                      c + i0 * ldc, ldc, 0);
    }
  }
  ReleaseBlasBuffers(reserved);
  tm_rt_free(panel);
}

}  // namespace tinymlir
