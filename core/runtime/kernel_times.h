// Optional timing of the runtime kernels compiled programs call: where a program's time goes
// (matrix products against everything else) and how long the caller waits for the worker
// pool. Off by default; when off, each kernel pays one relaxed atomic load. The counters are
// process-wide (tm_process_kernel_timing in the C API turns them on and reads them).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tinymlir {

enum class KernelClass : int {
  kGemv = 0,      // tinymlir's matrix-vector kernels (gemv_kernels.h)
  kBlas = 1,      // OpenBLAS GEMM/GEMV calls
  kPoolWait = 2,  // the caller of a parallel kernel waiting for the workers to finish
  kCount = 3,
};

struct KernelTimes {
  uint64_t calls[static_cast<int>(KernelClass::kCount)] = {};
  double seconds[static_cast<int>(KernelClass::kCount)] = {};
};

// Turns timing on (resetting the counters) or off.
void SetKernelTiming(bool on);
KernelTimes ReadKernelTimes();

namespace kernel_times_internal {
extern std::atomic<bool> g_on;
void Add(KernelClass kind, std::chrono::steady_clock::duration elapsed);
}  // namespace kernel_times_internal

inline bool KernelTimingOn() {
  return kernel_times_internal::g_on.load(std::memory_order_relaxed);
}

// Times its scope into `kind` when timing is on.
class ScopedKernelTimer {
 public:
  explicit ScopedKernelTimer(KernelClass kind) : kind_(kind), on_(KernelTimingOn()) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedKernelTimer() {
    if (on_) kernel_times_internal::Add(kind_, std::chrono::steady_clock::now() - start_);
  }
  ScopedKernelTimer(const ScopedKernelTimer &) = delete;
  ScopedKernelTimer &operator=(const ScopedKernelTimer &) = delete;

 private:
  KernelClass kind_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tinymlir
