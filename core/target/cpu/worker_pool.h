// A small persistent pool for the CPU runtime kernels (the decode GEMV): the calling thread
// plus (available cores - 1) workers that spin briefly between jobs and then sleep, so
// back-to-back calls within a token hand off in well under a microsecond and an idle
// process burns no CPU.
#pragma once

#include <functional>

namespace tinymlir {

class WorkerPool {
 public:
  // The process-wide pool, created on first use. Size: TINYMLIR_NUM_THREADS if set, else
  // the CPUs this process may run on.
  static WorkerPool &Get();

  // Participants in a ParallelFor, the caller included (>= 1).
  int size() const { return size_; }

  // Runs task(i) for every i in [0, size()) -- i == 0 on the calling thread -- and returns
  // when all are done. When another thread is using the pool, or in a child process after
  // fork(), runs every task on the caller instead (correct, just not parallel).
  void ParallelFor(const std::function<void(int)> &task);

 private:
  WorkerPool();
  struct State;
  State *state_;  // lives for the process (workers are detached)
  int size_;
};

}  // namespace tinymlir
