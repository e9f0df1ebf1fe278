#include "core/runtime/parallel_for.h"

#include <algorithm>
#include <atomic>

#include "core/runtime/worker_pool.h"

extern "C" void tm_rt_parallel_for(int64_t begin, int64_t end,
                                   void (*body)(int64_t, int64_t, void *), void *captures) {
  tinymlir::WorkerPool &pool = tinymlir::WorkerPool::Get();
  const int64_t n = end - begin;
  if (n <= 1 || pool.size() == 1) {
    if (n > 0) body(begin, end, captures);
    return;
  }
  // Four pieces per participant, taken from a shared counter: a participant the machine
  // slows down (a vCPU shared with a neighbour) takes fewer.
  const int64_t piece = std::max<int64_t>(1, n / (4 * pool.size()));
  std::atomic<int64_t> next{begin};
  pool.ParallelFor([&](int) {
    for (int64_t lo; (lo = next.fetch_add(piece, std::memory_order_relaxed)) < end;)
      body(lo, std::min(end, lo + piece), captures);
  });
}
