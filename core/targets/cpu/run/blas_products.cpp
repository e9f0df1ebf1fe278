#include "core/targets/cpu/run/blas_products.h"

#include <cblas.h>
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "core/runtime/guarded_call.h"
#include "core/support/fork_safe_mutex.h"
#include "core/runtime/kernel_times.h"
#include "core/runtime/worker_pool.h"

// Debian's single-threaded OpenBLAS hands out its packing buffers without a lock (it is not
// built with USE_LOCKING), so two threads calling it at once may pack into the same buffer:
// 15097 of 200000 concurrent sgemm calls came back wrong in a stress test, 0 of 200000 with
// this lock. The link wraps the two functions (--wrap, CMakeLists.txt's openblas_private);
// the lock is held only while a buffer is taken or returned, never during a product.
//
// OpenBLAS hands out the first free buffer and maps a new one (128 MiB of address space,
// kept for the life of the process) only when every one it has mapped is in use. When that
// mapping fails (an address-space limit, ulimit -v) it retries forever: a hang in the middle
// of a product. So every product first reserves a buffer for each thread that may run its
// blocks, and has OpenBLAS map them then, where a failure can still be reported
// (ReserveBlasBuffers); the buffers in use never outnumber the reservations, so no mapping
// happens inside a product.
namespace {
tinymlir::ForkSafeMutex g_openblas_buffers;  // never left locked in a forked child
int g_buffers_in_use = 0;    // handed out by OpenBLAS and not returned
int g_buffers_mapped = 0;    // mapped by OpenBLAS (it never unmaps one)
int g_buffers_reserved = 0;  // the running products' reservations
// BUFFER_SIZE + FIXED_PAGESIZE of OpenBLAS 0.3.21 on x86-64 (common_x86_64.h), with room.
constexpr size_t kOpenBlasBufferBytes = (size_t{128} << 20) + (size_t{64} << 10);
// Debian's build has 128 buffers (NUM_BUFFERS); beyond them OpenBLAS maps one per call.
// Reservations (which count a product on a busy pool as if it had the pool) are mapped
// ahead up to this many.
constexpr int kMaxMappedAhead = 96;

// A forked child has only the forking thread: the buffers other threads held stay taken
// for good there, and their products' reservations are gone.
[[maybe_unused]] const int g_fork_handler =
    pthread_atfork(nullptr, nullptr, [] { g_buffers_reserved = g_buffers_in_use; });
}  // namespace

extern "C" void *__real_blas_memory_alloc(int position);
extern "C" void __real_blas_memory_free(void *buffer);

namespace {
// OpenBLAS's allocation, counted; g_openblas_buffers is held.
void *AllocateLocked(int position) {
  void *buffer = __real_blas_memory_alloc(position);
  if (!buffer) return nullptr;  // all NUM_BUFFERS in use
  if (g_buffers_in_use == g_buffers_mapped) ++g_buffers_mapped;
  ++g_buffers_in_use;
  return buffer;
}
void FreeLocked(void *buffer) {
  __real_blas_memory_free(buffer);
  --g_buffers_in_use;
}
// Whether the process can map one more buffer now (the address-space limit, and the
// commit limit under strict overcommit, count it as OpenBLAS's own mapping would).
bool CanMapABuffer() {
  void *probe = mmap(nullptr, kOpenBlasBufferBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  munmap(probe, kOpenBlasBufferBytes);
  return true;
}
}  // namespace

extern "C" void *__wrap_blas_memory_alloc(int position) {
  std::lock_guard<tinymlir::ForkSafeMutex> lock(g_openblas_buffers);
  return AllocateLocked(position);
}
extern "C" void __wrap_blas_memory_free(void *buffer) {
  std::lock_guard<tinymlir::ForkSafeMutex> lock(g_openblas_buffers);
  FreeLocked(buffer);
}

namespace tinymlir {
namespace {

// Reserves `count` buffers, OpenBLAS mapping any that the reservations now outnumber (it
// maps one each time it is asked while all it has are taken). False, with nothing
// reserved, when one cannot be mapped.
bool ReserveOpenBlasBuffers(int count) {
  std::lock_guard<tinymlir::ForkSafeMutex> lock(g_openblas_buffers);
  std::vector<void *> held;
  bool mapped = true;
  const int wanted = std::min(g_buffers_reserved + count, kMaxMappedAhead);
  while (g_buffers_mapped < wanted) {
    if (g_buffers_in_use == g_buffers_mapped && !CanMapABuffer()) {
      mapped = false;
      break;
    }
    void *buffer = AllocateLocked(0);
    if (!buffer) break;
    held.push_back(buffer);
  }
  for (void *buffer : held) FreeLocked(buffer);
  if (mapped) g_buffers_reserved += count;
  return mapped;
}

Status OpenBlasBufferUnavailable() {
  return OutOfMemory("OpenBLAS cannot map its packing buffer (" +
                     std::to_string(kOpenBlasBufferBytes >> 20) +
                     " MiB of address space) for a matrix product; is an address-space limit "
                     "(ulimit -v) set?");
}

}  // namespace

int ReserveBlasBuffers(int threads) {
  if (ReserveOpenBlasBuffers(threads)) return threads;
  // Inside an invoke this ends it (the caller's frame owns nothing, as required); elsewhere
  // the products go on as OpenBLAS would.
  if (InGuardedCall()) FailGuardedCall(OpenBlasBufferUnavailable());
  return 0;
}

void ReleaseBlasBuffers(int reserved) {
  std::lock_guard<tinymlir::ForkSafeMutex> lock(g_openblas_buffers);
  g_buffers_reserved -= reserved;
}

}  // namespace tinymlir

namespace tinymlir {
namespace {

// The blocks of C. 128 columns keep the share of a call spent packing its A block near 1%
// (GPT-2's prefill products: 6 to 24 blocks per product); 256 rows leave a prompt of up to
// 256 tokens in one row block, so its weights are packed once per column block.
constexpr int64_t kBlockRows = kBlasBlockRows;
constexpr int64_t kBlockCols = kBlasBlockCols;

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

  void Run(int64_t batch, bool here = false) const {
    const int64_t blocks = batch * row_blocks() * col_blocks();
    if (here || BlasProductThreads(batch, m, n, k) == 1) {
      for (int64_t i = 0; i < blocks; ++i) RunBlock(i);
      return;
    }
    std::atomic<int64_t> next{0};
    WorkerPool::Get().ParallelFor([&](int) {
      for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) RunBlock(i);
    });
  }
};

void RunProducts(bool here, int32_t dtype, int64_t batch, int32_t trans_a, int32_t trans_b,
                 int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, int64_t stride_a,
                 const void *b, int64_t ldb, int64_t stride_b, void *c, int64_t ldc,
                 int64_t stride_c) {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return;  // C keeps its initial value
  const bool ta = trans_a == CblasTrans, tb = trans_b == CblasTrans;
  if (dtype == 2) {
    Product<double>{ta, tb, m, n, k, static_cast<const double *>(a), lda, stride_a,
                    static_cast<const double *>(b), ldb, stride_b, static_cast<double *>(c),
                    ldc, stride_c}
        .Run(batch, here);
  } else {
    Product<float>{ta, tb, m, n, k, static_cast<const float *>(a), lda, stride_a,
                   static_cast<const float *>(b), ldb, stride_b, static_cast<float *>(c), ldc,
                   stride_c}
        .Run(batch, here);
  }
}

}  // namespace

void RunBlasProducts(int32_t dtype, int64_t batch, int32_t trans_a, int32_t trans_b,
                     int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                     int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, void *c,
                     int64_t ldc, int64_t stride_c) {
  RunProducts(false, dtype, batch, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb,
              stride_b, c, ldc, stride_c);
}

void RunBlasProductsHere(int32_t dtype, int64_t batch, int32_t trans_a, int32_t trans_b,
                         int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                         int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                         void *c, int64_t ldc, int64_t stride_c) {
  RunProducts(true, dtype, batch, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb,
              stride_b, c, ldc, stride_c);
}

int BlasProductThreads(int64_t batch, int64_t m, int64_t n, int64_t k) {
  const int64_t blocks =
      batch * ((m + kBlockRows - 1) / kBlockRows) * ((n + kBlockCols - 1) / kBlockCols);
  const int64_t pool = WorkerPool::Get().size();
  if (blocks <= 1 || pool == 1 || batch * m * n * k < kMinParallelWork) return 1;
  return static_cast<int>(std::min(pool, blocks));
}

}  // namespace tinymlir

extern "C" void tm_rt_gemm(int32_t dtype, int64_t batch, int32_t trans_a, int32_t trans_b,
                           int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                           int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                           void *c, int64_t ldc, int64_t stride_c) {
  const int reserved =
      batch > 0 && m > 0 && n > 0 && k > 0
          ? tinymlir::ReserveBlasBuffers(tinymlir::BlasProductThreads(batch, m, n, k))
          : 0;
  {
    tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kBlas);
    tinymlir::RunBlasProducts(dtype, batch, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb,
                              stride_b, c, ldc, stride_c);
  }
  tinymlir::ReleaseBlasBuffers(reserved);
}
