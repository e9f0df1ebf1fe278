#include "core/targets/gpu/run/engine_counters.h"

#include <atomic>

#include "core/support/fork_safe_once.h"

namespace tinymlir {
namespace gpu {
namespace {

// Relaxed: each is a tally, read as a whole only between calls.
struct Tallies {
  std::atomic<uint64_t> graph_launches{0}, kernel_launches{0}, host_syncs{0}, allocations{0},
      bytes_to_device{0}, bytes_from_device{0};
};

// Never destroyed: host objects' destructors may launch or wait at exit.
ForkSafeOnce<Tallies *> tallies;

Tallies &TheTallies() {
  return *tallies.Get([] { return new Tallies; });
}

}  // namespace

void Count(EngineEvent event) {
  Tallies &t = TheTallies();
  std::atomic<uint64_t> *tally = event == EngineEvent::kGraphLaunch    ? &t.graph_launches
                                 : event == EngineEvent::kKernelLaunch ? &t.kernel_launches
                                 : event == EngineEvent::kHostSync     ? &t.host_syncs
                                                                       : &t.allocations;
  tally->fetch_add(1, std::memory_order_relaxed);
}

void CountBytesToDevice(uint64_t bytes) {
  TheTallies().bytes_to_device.fetch_add(bytes, std::memory_order_relaxed);
}

void CountBytesFromDevice(uint64_t bytes) {
  TheTallies().bytes_from_device.fetch_add(bytes, std::memory_order_relaxed);
}

DeviceCounters EngineCountersNow() {
  const Tallies &t = TheTallies();
  DeviceCounters c;
  c.graph_launches = t.graph_launches.load(std::memory_order_relaxed);
  c.kernel_launches = t.kernel_launches.load(std::memory_order_relaxed);
  c.host_syncs = t.host_syncs.load(std::memory_order_relaxed);
  c.allocations = t.allocations.load(std::memory_order_relaxed);
  c.bytes_to_device = t.bytes_to_device.load(std::memory_order_relaxed);
  c.bytes_from_device = t.bytes_from_device.load(std::memory_order_relaxed);
  return c;
}

}  // namespace gpu
}  // namespace tinymlir
