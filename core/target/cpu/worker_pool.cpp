#include "core/target/cpu/worker_pool.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace tinymlir {
namespace {

int AvailableCpus() {
  if (const char *env = std::getenv("TINYMLIR_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long a worker keeps polling for the next job before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);

// A forked child has only the thread that called fork(): the workers are gone, so the
// pool must not wait for them (Python's multiprocessing forks, for one).
std::atomic<bool> forked_child{false};

}  // namespace

struct WorkerPool::State {
  std::mutex busy;                     // one ParallelFor at a time
  std::mutex sleep_mutex;
  std::condition_variable wake;
  std::atomic<uint64_t> generation{0};  // bumped once per job
  std::atomic<int> remaining{0};        // workers still running the current job
  const std::function<void(int)> *task = nullptr;

  void WorkerLoop(int index) {
    uint64_t seen = 0;
    for (;;) {
      auto start = std::chrono::steady_clock::now();
      int polls = 0;
      while (generation.load(std::memory_order_acquire) == seen) {
        CpuRelax();
        if (++polls % 256 == 0 && std::chrono::steady_clock::now() - start > kSpin) {
          std::unique_lock<std::mutex> lock(sleep_mutex);
          wake.wait(lock, [&] { return generation.load(std::memory_order_acquire) != seen; });
        }
      }
      seen = generation.load(std::memory_order_acquire);
      (*task)(index);
      remaining.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

WorkerPool &WorkerPool::Get() {
  static WorkerPool *pool = new WorkerPool();  // never destroyed: workers outlive main
  return *pool;
}

WorkerPool::WorkerPool() : state_(new State()), size_(AvailableCpus()) {
  pthread_atfork(nullptr, nullptr, [] { forked_child.store(true); });
  for (int i = 1; i < size_; ++i) std::thread([s = state_, i] { s->WorkerLoop(i); }).detach();
}

void WorkerPool::ParallelFor(const std::function<void(int)> &task) {
  if (forked_child.load(std::memory_order_relaxed)) {
    for (int i = 0; i < size_; ++i) task(i);
    return;
  }
  std::unique_lock<std::mutex> busy(state_->busy, std::try_to_lock);
  if (size_ == 1 || !busy.owns_lock()) {
    for (int i = 0; i < size_; ++i) task(i);
    return;
  }
  state_->task = &task;
  state_->remaining.store(size_ - 1, std::memory_order_relaxed);
  {
    // Under the sleep mutex, so a worker between its check and its wait cannot miss it.
    std::lock_guard<std::mutex> lock(state_->sleep_mutex);
    state_->generation.fetch_add(1, std::memory_order_acq_rel);
  }
  state_->wake.notify_all();
  task(0);
  while (state_->remaining.load(std::memory_order_acquire) != 0) CpuRelax();
}

}  // namespace tinymlir
