#include "core/runtime/worker_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/support/environment.h"
#include "core/support/exit_drain.h"
#include "core/support/fork_safe_mutex.h"
#include "core/support/fork_safe_once.h"
#include "core/runtime/kernel_times.h"

namespace tinymlir {
namespace {

// CPUs allowed by a cgroup v2 quota ("max 100000" = none; "150000 100000" = 1.5 -> 2).
int CgroupCpuLimit() {
  std::FILE *f = std::fopen("/sys/fs/cgroup/cpu.max", "r");
  if (!f) return kMaxThreads;
  char quota[32] = {0};
  long long period = 0;
  int fields = std::fscanf(f, "%31s %lld", quota, &period);
  std::fclose(f);
  if (fields != 2 || period <= 0 || quota[0] == 'm') return kMaxThreads;  // "max"
  long long q = std::atoll(quota);
  if (q <= 0) return kMaxThreads;
  return static_cast<int>(std::clamp<long long>((q + period - 1) / period, 1, kMaxThreads));
}

int AffinityCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return 1;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long a worker keeps polling for the next job before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);

}  // namespace

int ConfiguredThreads() {
  const int available = std::clamp(std::min(AffinityCpus(), CgroupCpuLimit()), 1, kMaxThreads);
  // More threads than CPUs only makes memory-bound kernels slower: the variable can lower
  // the count, never raise it past what the process may run on. (A value that is not a
  // count fails compiles and program loads: core/support/environment.h.)
  const int setting = ThreadCountSetting();
  return setting >= 1 ? std::min(setting, available) : available;
}

struct WorkerPool::State {
  std::mutex busy;                     // one ParallelFor at a time
  std::mutex sleep_mutex;
  std::condition_variable wake;
  std::atomic<uint64_t> generation{0};  // bumped once per job (and once to stop)
  std::atomic<int> remaining{0};        // workers still running the current job
  std::atomic<bool> stop{false};
  const std::function<void(int)> *task = nullptr;
  std::vector<pthread_t> threads;

  struct Start {
    State *state;
    int index;
  };
  static void *Main(void *arg) {
    Start start = *static_cast<Start *>(arg);
    delete static_cast<Start *>(arg);
    start.state->WorkerLoop(start.index);
    return nullptr;
  }

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
      if (stop.load(std::memory_order_acquire)) return;
      (*task)(index);
      remaining.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

// A static of the library: destroyed (workers joined) when the library is unloaded.
static ForkSafeOnce<WorkerPool> pool;

WorkerPool &WorkerPool::Get() {
  return pool.Get([] { return WorkerPool(); });
}

// A forked child has only the thread that called fork(): the workers are gone, so the pool
// must not wait for them (Python's multiprocessing forks, for one). Told by the fork
// generation rather than a fork handler of the pool's own, which, registered as the pool is
// made, could miss a fork another thread had under way.
bool WorkerPool::InForkedChild() const { return ForkGeneration() != made_in_fork_generation_; }

WorkerPool::WorkerPool()
    : state_(new State()), size_(ConfiguredThreads()), made_in_fork_generation_(ForkGeneration()) {
  for (int i = 1; i < size_; ++i) {
    pthread_t thread;
    auto *start = new State::Start{state_, i};
    if (pthread_create(&thread, nullptr, &State::Main, start) != 0) {
      delete start;  // fewer threads than asked for: run with what started
      size_ = i;
      break;
    }
    state_->threads.push_back(thread);
  }
}

WorkerPool::~WorkerPool() {
  // No thread inside a program may post work to a pool that is gone: drain first (the
  // drain registered at the first program normally ran already; this keeps it so).
  DrainNativeCode();
  // In a forked child the workers never existed here: nothing to stop or join.
  if (InForkedChild()) return;
  {
    std::lock_guard<std::mutex> busy(state_->busy);
    std::lock_guard<std::mutex> lock(state_->sleep_mutex);
    state_->stop.store(true, std::memory_order_release);
    state_->generation.fetch_add(1, std::memory_order_acq_rel);
  }
  state_->wake.notify_all();
  for (pthread_t thread : state_->threads) pthread_join(thread, nullptr);
  delete state_;
}

void WorkerPool::ParallelFor(const std::function<void(int)> &task) {
  if (InForkedChild()) {
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
  ScopedKernelTimer waiting(KernelClass::kPoolWait);
  while (state_->remaining.load(std::memory_order_acquire) != 0) CpuRelax();
}

}  // namespace tinymlir
