// A small persistent pool for the CPU runtime kernels (the decode GEMV): the calling thread
// plus (available cores - 1) workers that spin briefly between jobs and then sleep, so
// back-to-back calls within a token hand off in well under a microsecond and an idle
// process burns no CPU.
//
// The pool is a static object of the library: when the library is unloaded (dlclose) or the
// process exits, its destructor stops and joins the workers, so no thread outlives the code
// it runs. In a child after fork() the workers do not exist; the pool runs tasks serially
// there and its destructor has nothing to join.
#pragma once

#include <cstdint>
#include <functional>

namespace tinymlir {

// Most worker threads the pool ever starts, whatever the environment asks for.
inline constexpr int kMaxThreads = 64;

// The number of threads the pool uses: the CPUs this process may run on (its affinity
// mask, limited by a cgroup CPU quota when one is set, at most kMaxThreads), lowered by
// TINYMLIR_NUM_THREADS when that is set to a smaller positive number.
int ConfiguredThreads();

class WorkerPool {
 public:
  // The process-wide pool, created on first use.
  static WorkerPool &Get();

  // Participants in a ParallelFor, the caller included (>= 1).
  int size() const { return size_; }

  // Runs task(i) for every i in [0, size()) -- i == 0 on the calling thread -- and returns
  // when all are done. When another thread is using the pool, or in a child process after
  // fork(), runs every task on the caller instead (correct, just not parallel).
  void ParallelFor(const std::function<void(int)> &task);

  ~WorkerPool();
  WorkerPool(const WorkerPool &) = delete;
  WorkerPool &operator=(const WorkerPool &) = delete;

 private:
  WorkerPool();
  struct State;
  // Whether this process is a child forked after the pool's workers started: they are
  // not in it (only the forking thread is copied).
  bool InForkedChild() const;

  State *state_;
  int size_;
  uint64_t made_in_fork_generation_;  // ForkGeneration() when the workers started
};

}  // namespace tinymlir
