// Dot products of a matrix's rows with a few vectors, split over the worker pool: what the
// decode kernels of every weight format share (gemv_kernels.cpp for f32/f16/bf16, q8_0.cpp
// for 8-bit blocks). Each output is one thread's whole dot product, so how the rows are
// split never changes the bits.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "core/runtime/worker_pool.h"

namespace tinymlir {

// Below this many matrix elements a product runs on the calling thread: waking the pool
// would cost more than it saves.
inline constexpr int64_t kParallelElements = 1 << 16;

// Bytes of A in the smallest range of rows a participant takes: small enough that the last
// ranges finish close together. (Blocks of a fixed 1024 rows left GPT-2's 768-row
// projections as one block, streamed by one thread while the other waited: 3.9-4.4 ms of a
// 30-32 ms decode token.)
inline constexpr int64_t kBytesPerBlock = int64_t{1} << 17;

// Rows in the smallest range for rows of `row_bytes`: a multiple of eight, at least eight
// (128 KB is 40 rows of a 768-wide f32 matrix, 80 of an f16 one).
inline int64_t RowsPerBlock(int64_t row_bytes) {
  return std::max<int64_t>(8, kBytesPerBlock / std::max<int64_t>(1, row_bytes) / 8 * 8);
}

// Runs rows(i0, i1) over [0, m) on every participant of `pool`, each taking ranges from a
// shared counter, so that a thread the machine slows down (a vCPU shared with a neighbour)
// takes fewer: guided (OpenMP's schedule of that name), each range a 1 / threads share of
// the rows still left, rounded down to eight, and at least `least` rows. Each participant's
// first range is long, one stream the hardware prefetcher can run well ahead in; the short
// ones at the end let the participants finish together.
template <typename Rows>
void GuidedRangesOnPool(WorkerPool &pool, int64_t m, int64_t least, const Rows &rows) {
  const int64_t share = pool.size();
  std::atomic<int64_t> next_row{0};
  pool.ParallelFor([&](int) {
    int64_t i0 = next_row.load(std::memory_order_relaxed), take;
    for (;;) {
      do {
        if (i0 >= m) return;
        take = std::min(m - i0, std::max(least, (m - i0) / share / 8 * 8));
      } while (!next_row.compare_exchange_weak(i0, i0 + take, std::memory_order_relaxed));
      rows(i0, i0 + take);
      i0 = next_row.load(std::memory_order_relaxed);
    }
  });
}

// Runs rows(i0, i1) over [0, m) of a matrix of m rows of k elements (row_bytes each), on the
// calling thread when the matrix is small, else on the pool in guided ranges of at least
// one block of RowsPerBlock rows. Guided ranges, rather than fixed blocks, keep each
// thread's first rows one long stream; a share of 1 / threads, rather than 1 / (2 *
// threads), keeps the last ranges of the small 8-bit and half-precision matrices long
// enough to read near the machine's ceiling (bench/q8_gemv_bandwidth measures both).
template <typename Rows>
void RowRangesOverPool(int64_t m, int64_t k, int64_t row_bytes, const Rows &rows) {
  WorkerPool &pool = WorkerPool::Get();
  if (m * k < kParallelElements || pool.size() == 1) {
    rows(int64_t{0}, m);
    return;
  }
  GuidedRangesOnPool(pool, m, RowsPerBlock(row_bytes), rows);
}

// Y[v * ldy + i * incy] += A row i . X row v for A's m rows (of k elements, row_bytes each)
// and X's nx rows (elements incx apart, rows ldx apart), where dots(x, ldx, i0, i1) adds rows
// [i0, i1) against contiguous rows of x. A strided x is packed once first (the kernel streams
// A against it m times); where no scratch can be had, unpacked() does the whole product from
// the strided x instead. The rows go over the pool as RowRangesOverPool splits them.
template <typename Dots, typename Unpacked>
void DotsOverRows(int64_t m, int64_t k, int64_t row_bytes, int64_t nx, const float *x,
                  int64_t ldx, int64_t incx, const Dots &dots, const Unpacked &unpacked) {
  float *packed = nullptr;
  if (incx != 1) {
    packed = static_cast<float *>(std::malloc(static_cast<size_t>(nx * k) * sizeof(float)));
    if (!packed) {
      unpacked();
      return;
    }
    for (int64_t v = 0; v < nx; ++v)
      for (int64_t j = 0; j < k; ++j) packed[v * k + j] = x[v * ldx + j * incx];
    x = packed;
    ldx = k;
  }
  RowRangesOverPool(m, k, row_bytes, [&](int64_t i0, int64_t i1) { dots(x, ldx, i0, i1); });
  std::free(packed);
}

}  // namespace tinymlir
