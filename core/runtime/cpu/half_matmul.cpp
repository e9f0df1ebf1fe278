#include "core/runtime/cpu/half_matmul.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>

#include "core/runtime/guarded_call.h"
#include "core/runtime/cpu/blas_products.h"
#include "core/runtime/cpu/half_convert.h"
#include "core/runtime/cpu/kernel_times.h"
#include "core/runtime/cpu/worker_pool.h"

namespace tinymlir {
namespace {

// Scratch per panel: 2 MB of f32, a fraction of the L3 cache, so a panel is read back
// from the cache by sgemm right after it is widened.
constexpr int64_t kPanelFloats = int64_t{1} << 19;

// A panel's width (rows or columns of the half operand widened at a time) for a summed
// dimension of k: a multiple of 16 within kPanelFloats, at least 16.
int64_t PanelWidth(int64_t k) {
  return std::max<int64_t>(16, (kPanelFloats / std::max<int64_t>(k, 1)) / 16 * 16);
}

// dst (rows x cols, row-major, contiguous) = the half matrix src at (r0, c0) with leading
// dimension ld, on every thread of the pool: widening streams the weight from memory, the
// part of a prefill product that OpenBLAS's threads do not share (GPT-2 124M's prefill-16
// took 208 ms with one thread widening, against 64 ms for F32 weights).
void WidenBlock(HalfKind kind, const uint16_t *src, int64_t ld, int64_t r0, int64_t c0,
                int64_t rows, int64_t cols, float *dst) {
  constexpr int64_t kRowsPerTask = 16;
  WorkerPool &pool = WorkerPool::Get();
  if (rows * cols < (int64_t{1} << 16) || pool.size() == 1) {
    WidenRows(kind, src + r0 * ld + c0, ld, rows, cols, dst, cols);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.ParallelFor([&](int) {
    for (int64_t r; (r = next.fetch_add(kRowsPerTask, std::memory_order_relaxed)) < rows;)
      WidenRows(kind, src + (r0 + r) * ld + c0, ld, std::min(kRowsPerTask, rows - r), cols,
                dst + r * cols, cols);
  });
}

}  // namespace
}  // namespace tinymlir

extern "C" void tm_rt_sgemm_half(int32_t dtype, int32_t half_operand, int32_t trans_a,
                                 int32_t trans_b, int64_t m, int64_t n, int64_t k,
                                 const void *a, int64_t lda, const void *b, int64_t ldb,
                                 float *c, int64_t ldc) {
  using tinymlir::WidenBlock;
  const auto kind = static_cast<tinymlir::HalfKind>(dtype);
  const bool ta = trans_a == CblasTrans, tb = trans_b == CblasTrans;
  const int64_t width = tinymlir::PanelWidth(k);
  // Allocated through the guarded allocator: when memory runs out, the invoke fails with
  // TM_ERROR_OUT_OF_MEMORY instead of this kernel returning a wrong product.
  float *panel = static_cast<float *>(tm_rt_malloc(static_cast<size_t>(width * k) * sizeof(float)));
  if (!panel) return;  // only outside a guarded call, where nothing can be reported
  // The widest panel's product uses the most threads.
  const int reserved =
      m <= 0 || n <= 0 || k <= 0
          ? 0
          : tinymlir::ReserveBlasBuffers(
                half_operand == 1 ? tinymlir::BlasProductThreads(1, m, std::min(width, n), k)
                                  : tinymlir::BlasProductThreads(1, std::min(width, m), n, k));
  tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kBlas);
  if (half_operand == 1) {  // panels of C's columns: B's columns j0 .. j0 + w
    const auto *hb = static_cast<const uint16_t *>(b);
    for (int64_t j0 = 0; j0 < n; j0 += width) {
      const int64_t w = std::min(width, n - j0);
      // op(B) = B (k x n stored): columns are a k x w block; op(B) = B^T (n x k stored):
      // they are w stored rows, given to sgemm transposed.
      if (tb) WidenBlock(kind, hb, ldb, j0, 0, w, k, panel);
      else WidenBlock(kind, hb, ldb, 0, j0, k, w, panel);
      tinymlir::RunBlasProducts(1, 1, trans_a, trans_b, m, w, k, a, lda, 0, panel,
                                tb ? k : w, 0, c + j0, ldc, 0);
    }
  } else {  // panels of C's rows: op(A)'s rows i0 .. i0 + w
    const auto *ha = static_cast<const uint16_t *>(a);
    for (int64_t i0 = 0; i0 < m; i0 += width) {
      const int64_t w = std::min(width, m - i0);
      if (ta) WidenBlock(kind, ha, lda, 0, i0, k, w, panel);
      else WidenBlock(kind, ha, lda, i0, 0, w, k, panel);
      tinymlir::RunBlasProducts(1, 1, trans_a, trans_b, w, n, k, panel, ta ? w : k, 0, b,
                                ldb, 0, c + i0 * ldc, ldc, 0);
    }
  }
  tinymlir::ReleaseBlasBuffers(reserved);
  tm_rt_free(panel);
}
