#include "core/target/cpu/gemv_kernels.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/target/cpu/kernel_times.h"
#include "core/target/cpu/worker_pool.h"

namespace tinymlir {
namespace {

// Below this many matrix elements a product runs on the calling thread: waking the pool
// would cost more than it saves.
constexpr int64_t kParallelElements = 1 << 16;

// Rows per chunk of tm_rt_sgemv_row's summed dimension (a multiple of RowsKernel's eight).
constexpr int64_t kRowsPerChunk = 128;

// Rows of A per block of tm_rt_sgemv_col that a participant takes at a time (3 MB of
// GPT-2's LM head): small enough that the last blocks finish close together.
constexpr int64_t kRowsPerBlock = 1024;

// y[0..n) += x[k0..k1) @ W[k0..k1, :]. Eight rows at a time: y is loaded and stored once
// per eight streamed rows.
__attribute__((target_clones("avx512f", "avx2", "default")))
void RowsKernel(const float *x, const float *w, int64_t ldw, float *y, int64_t k0, int64_t k1,
                int64_t n) {
  int64_t k = k0;
  for (; k + 8 <= k1; k += 8) {
    const float *w0 = w + k * ldw;
    const float a0 = x[k], a1 = x[k + 1], a2 = x[k + 2], a3 = x[k + 3];
    const float a4 = x[k + 4], a5 = x[k + 5], a6 = x[k + 6], a7 = x[k + 7];
    for (int64_t j = 0; j < n; ++j)
      y[j] += a0 * w0[j] + a1 * w0[ldw + j] + a2 * w0[2 * ldw + j] + a3 * w0[3 * ldw + j] +
              a4 * w0[4 * ldw + j] + a5 * w0[5 * ldw + j] + a6 * w0[6 * ldw + j] +
              a7 * w0[7 * ldw + j];
  }
  for (; k < k1; ++k) {
    const float *wk = w + k * ldw;
    const float a = x[k];
    for (int64_t j = 0; j < n; ++j) y[j] += a * wk[j];
  }
}

// Dot products of `S` rows of A with a contiguous x, in lockstep: each row is its own
// stream (more prefetch streams in flight than one row after another: GPT-2's LM head,
// interleaved runs, median 9.4 ms with four against 10.5 ms row by row, on a VM whose
// figures move 20% between runs). Every row is summed the same way: eight
// lanes over j, then the lanes in order, then the tail.
template <int S>
inline void DotRows(const float *const *row, const float *x, int64_t k, float *out) {
  float acc[S][8] = {};
  int64_t j = 0;
  for (; j + 8 <= k; j += 8)
    for (int s = 0; s < S; ++s)
      for (int l = 0; l < 8; ++l) acc[s][l] += row[s][j + l] * x[j + l];
  for (int s = 0; s < S; ++s) {
    float sum = 0.0f;
    for (int l = 0; l < 8; ++l) sum += acc[s][l];
    for (int64_t jj = j; jj < k; ++jj) sum += row[s][jj] * x[jj];
    out[s] = sum;
  }
}

// y[i * incy] += A row i . x for rows [i0, i1): four quarters of the range side by side.
__attribute__((target_clones("avx512f", "avx2", "default")))
void DotsKernel(const float *a, int64_t lda, const float *x, int64_t k, float *y, int64_t incy,
                int64_t i0, int64_t i1) {
  constexpr int kStreams = 4;
  const int64_t quarter = (i1 - i0) / kStreams;
  for (int64_t r = 0; r < quarter; ++r) {
    const float *rows[kStreams];
    for (int s = 0; s < kStreams; ++s) rows[s] = a + (i0 + s * quarter + r) * lda;
    float sums[kStreams];
    DotRows<kStreams>(rows, x, k, sums);
    for (int s = 0; s < kStreams; ++s) y[(i0 + s * quarter + r) * incy] += sums[s];
  }
  for (int64_t i = i0 + kStreams * quarter; i < i1; ++i) {
    const float *row = a + i * lda;
    float sum;
    DotRows<1>(&row, x, k, &sum);
    y[i * incy] += sum;
  }
}

// y[0..n) += p[0..n).
__attribute__((target_clones("avx512f", "avx2", "default")))
void AddInto(float *y, const float *p, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += p[j];
}


}  // namespace
}  // namespace tinymlir

using tinymlir::WorkerPool;

// These functions are called from generated code: nothing may throw through it, and they
// keep no thread_local state (a thread_local with a destructor pins the library in memory
// until the thread exits, so it could never be unloaded). Scratch memory is allocated per
// call; if it cannot be had, the product runs on the calling thread alone.

using tinymlir::kRowsPerChunk;

extern "C" void tm_rt_sgemv_row(int64_t k, int64_t n, const float *x, const float *w,
                                int64_t ldw, float *y) {
  tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kGemv);
  // The summed rows are cut into chunks of a fixed size, whatever the number of threads;
  // each chunk's sum goes to its own partial vector, and the partials are added to y in
  // chunk order. So every y[j] is summed in the same order for any TINYMLIR_NUM_THREADS
  // (bit-identical results), while each participant still streams whole contiguous rows
  // (splitting over the outputs instead measured 6-11% slower on GPT-2's decode products).
  // Which path runs depends on the shape alone.
  if (k * n < tinymlir::kParallelElements || k <= kRowsPerChunk) {
    tinymlir::RowsKernel(x, w, ldw, y, 0, k, n);
    return;
  }
  const int64_t chunks = (k + kRowsPerChunk - 1) / kRowsPerChunk;
  float *partial = static_cast<float *>(std::calloc(static_cast<size_t>(chunks * n), sizeof(float)));
  if (!partial) {  // no scratch: the rows in one pass (another summation order)
    tinymlir::RowsKernel(x, w, ldw, y, 0, k, n);
    return;
  }
  WorkerPool &pool = WorkerPool::Get();
  // Participants take chunks in turn from a shared counter, so a thread the machine slows
  // down (a vCPU shared with a neighbour) takes fewer; with fixed halves the other waited.
  // GPT-2 124M's decode products, 5 interleaved runs each: median 30.4 ms against 33.2 ms
  // (noisy). Which thread sums a chunk does not change its bits.
  std::atomic<int64_t> next_chunk{0};
  auto run = [&](int) {
    for (int64_t c; (c = next_chunk.fetch_add(1, std::memory_order_relaxed)) < chunks;)
      tinymlir::RowsKernel(x, w, ldw, partial + c * n, c * kRowsPerChunk,
                           std::min(k, (c + 1) * kRowsPerChunk), n);
  };
  if (pool.size() > 1) pool.ParallelFor(run); else run(0);
  for (int64_t c = 0; c < chunks; ++c) tinymlir::AddInto(y, partial + c * n, n);
  std::free(partial);
}

extern "C" void tm_rt_sgemv_col(int64_t m, int64_t k, const float *a, int64_t lda,
                                const float *x, int64_t incx, float *y, int64_t incy) {
  tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kGemv);
  float *packed = nullptr;
  if (incx != 1) {  // gather a strided x once; the kernel streams A against it m times
    packed = static_cast<float *>(std::malloc(static_cast<size_t>(k) * sizeof(float)));
    if (!packed) {  // no scratch: dot products straight from the strided x
      for (int64_t i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int64_t j = 0; j < k; ++j) sum += a[i * lda + j] * x[j * incx];
        y[i * incy] += sum;
      }
      return;
    }
    for (int64_t j = 0; j < k; ++j) packed[j] = x[j * incx];
    x = packed;
  }
  WorkerPool &pool = WorkerPool::Get();
  if (m * k < tinymlir::kParallelElements || pool.size() == 1) {
    tinymlir::DotsKernel(a, lda, x, k, y, incy, 0, m);
  } else {
    // Blocks of rows taken from a shared counter, as in tm_rt_sgemv_row; each output is
    // one thread's dot product, so the split never changes the bits.
    const int64_t block = tinymlir::kRowsPerBlock;
    std::atomic<int64_t> next_row{0};
    pool.ParallelFor([&](int) {
      for (int64_t i0; (i0 = next_row.fetch_add(block, std::memory_order_relaxed)) < m;)
        tinymlir::DotsKernel(a, lda, x, k, y, incy, i0, std::min(m, i0 + block));
    });
  }
  std::free(packed);
}
