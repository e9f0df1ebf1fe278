#include "core/target/cpu/blas_products.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "core/target/cpu/kernel_times.h"
#include "core/target/cpu/worker_pool.h"

// Debian's single-threaded OpenBLAS hands out its packing buffers without a lock (it is not
// built with USE_LOCKING), so two threads calling it at once may pack into the same buffer:
// 15097 of 200000 concurrent sgemm calls came back wrong in a stress test, 0 of 200000 with
// this lock. The link wraps the two functions (--wrap, CMakeLists.txt's openblas_private);
// the lock is held only while a buffer is taken or returned, never during a product.
namespace {
std::mutex g_openblas_buffers;
}  // namespace

extern "C" void *__real_blas_memory_alloc(int position);
extern "C" void __real_blas_memory_free(void *buffer);
extern "C" void *__wrap_blas_memory_alloc(int position) {
  std::lock_guard<std::mutex> lock(g_openblas_buffers);
  return __real_blas_memory_alloc(position);
}
extern "C" void __wrap_blas_memory_free(void *buffer) {
  std::lock_guard<std::mutex> lock(g_openblas_buffers);
  __real_blas_memory_free(buffer);
}

namespace tinymlir {
namespace {

// The blocks of C. 128 columns keep the share of a call spent packing its A block near 1%
// (GPT-2's prefill products: 6 to 24 blocks per product); 256 rows leave a prompt of up to
// 256 tokens in one row block, so its weights are packed once per column block.
constexpr int64_t kBlockRows = 256;
constexpr int64_t kBlockCols = 128;

// Products under this many multiply-adds run on the calling thread: waking the pool would
// cost more than it saves. The blocks, and so the bits, are the same either way.
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a,
          int lda, const float *b, int ldb, float *c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc);
}
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const double *a,
          int lda, const double *b, int ldb, double *c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 1.0, c, ldc);
}
void Gemv(CBLAS_TRANSPOSE t, int m, int n, const float *a, int lda, const float *x, int incx,
          float *y, int incy) {
  cblas_sgemv(CblasRowMajor, t, m, n, 1.0f, a, lda, x, incx, 1.0f, y, incy);
}
void Gemv(CBLAS_TRANSPOSE t, int m, int n, const double *a, int lda, const double *x,
          int incx, double *y, int incy) {
  cblas_dgemv(CblasRowMajor, t, m, n, 1.0, a, lda, x, incx, 1.0, y, incy);
}

template <typename T>
struct Product {
  bool ta, tb;
  int64_t m, n, k;
  const T *a;
  int64_t lda, stride_a;
  const T *b;
  int64_t ldb, stride_b;
  T *c;
  int64_t ldc, stride_c;

  int64_t row_blocks() const { return (m + kBlockRows - 1) / kBlockRows; }
  int64_t col_blocks() const { return (n + kBlockCols - 1) / kBlockCols; }

  // Block `index` of C, counted over (batch element, row block, column block), as one
  // single-threaded OpenBLAS call. A block of one row or one column is a GEMV, which reads
  // its matrix where it is instead of packing it first.
  void RunBlock(int64_t index) const {
    const int64_t cols_index = index % col_blocks();
    const int64_t rows_index = index / col_blocks() % row_blocks();
    const int64_t batch_index = index / (col_blocks() * row_blocks());
    const int64_t i0 = rows_index * kBlockRows, j0 = cols_index * kBlockCols;
    const int rows = static_cast<int>(std::min(kBlockRows, m - i0));
    const int cols = static_cast<int>(std::min(kBlockCols, n - j0));
    const T *ab = a + batch_index * stride_a + (ta ? i0 : i0 * lda);
    const T *bb = b + batch_index * stride_b + (tb ? j0 * ldb : j0);
    T *cb = c + batch_index * stride_c + i0 * ldc + j0;
    const int kk = static_cast<int>(k), la = static_cast<int>(lda),
              lb = static_cast<int>(ldb);
    if (rows == 1) {  // C's row += A's row (stride 1, or lda when A is transposed) @ op(B)
      const int inc_a = ta ? la : 1;
      if (tb) Gemv(CblasNoTrans, cols, kk, bb, lb, ab, inc_a, cb, 1);
      else Gemv(CblasTrans, kk, cols, bb, lb, ab, inc_a, cb, 1);
    } else if (cols == 1) {  // C's column (stride ldc) += op(A) @ B's column
      const int inc_b = tb ? 1 : lb;
      if (ta) Gemv(CblasTrans, kk, rows, ab, la, bb, inc_b, cb, static_cast<int>(ldc));
      else Gemv(CblasNoTrans, rows, kk, ab, la, bb, inc_b, cb, static_cast<int>(ldc));
    } else {
      Gemm(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, rows, cols, kk, ab,
           la, bb, lb, cb, static_cast<int>(ldc));
    }
  }

  void Run(int64_t batch) const {
    const int64_t blocks = batch * row_blocks() * col_blocks();
    WorkerPool &pool = WorkerPool::Get();
    if (blocks == 1 || pool.size() == 1 || batch * m * n * k < kMinParallelWork) {
      for (int64_t i = 0; i < blocks; ++i) RunBlock(i);
      return;
    }
    std::atomic<int64_t> next{0};
    pool.ParallelFor([&](int) {
      for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) RunBlock(i);
    });
  }
};

}  // namespace

void RunBlasProducts(int32_t dtype, int64_t batch, int32_t trans_a, int32_t trans_b,
                     int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                     int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, void *c,
                     int64_t ldc, int64_t stride_c) {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return;  // C keeps its initial value
  const bool ta = trans_a == CblasTrans, tb = trans_b == CblasTrans;
  if (dtype == 2) {
    Product<double>{ta, tb, m, n, k, static_cast<const double *>(a), lda, stride_a,
                    static_cast<const double *>(b), ldb, stride_b, static_cast<double *>(c),
                    ldc, stride_c}
        .Run(batch);
  } else {
    Product<float>{ta, tb, m, n, k, static_cast<const float *>(a), lda, stride_a,
                   static_cast<const float *>(b), ldb, stride_b, static_cast<float *>(c), ldc,
                   stride_c}
        .Run(batch);
  }
}

}  // namespace tinymlir

extern "C" void tm_rt_gemm(int32_t dtype, int64_t batch, int32_t trans_a, int32_t trans_b,
                           int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                           int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                           void *c, int64_t ldc, int64_t stride_c) {
  tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kBlas);
  tinymlir::RunBlasProducts(dtype, batch, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb,
                            stride_b, c, ldc, stride_c);
}
