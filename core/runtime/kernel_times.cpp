#include "core/runtime/kernel_times.h"

namespace tinymlir {
namespace {

constexpr int kKinds = static_cast<int>(KernelClass::kCount);
std::atomic<uint64_t> g_calls[kKinds];
std::atomic<int64_t> g_nanoseconds[kKinds];

}  // namespace

namespace kernel_times_internal {

std::atomic<bool> g_on{false};

void Add(KernelClass kind, std::chrono::steady_clock::duration elapsed) {
  const int i = static_cast<int>(kind);
  g_calls[i].fetch_add(1, std::memory_order_relaxed);
  g_nanoseconds[i].fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count(),
      std::memory_order_relaxed);
}

}  // namespace kernel_times_internal

void SetKernelTiming(bool on) {
  if (on)
    for (int i = 0; i < kKinds; ++i) {
      g_calls[i].store(0, std::memory_order_relaxed);
      g_nanoseconds[i].store(0, std::memory_order_relaxed);
    }
  kernel_times_internal::g_on.store(on, std::memory_order_relaxed);
}

KernelTimes ReadKernelTimes() {
  KernelTimes t;
  for (int i = 0; i < kKinds; ++i) {
    t.calls[i] = g_calls[i].load(std::memory_order_relaxed);
    t.seconds[i] = 1e-9 * static_cast<double>(g_nanoseconds[i].load(std::memory_order_relaxed));
  }
  return t;
}

}  // namespace tinymlir
