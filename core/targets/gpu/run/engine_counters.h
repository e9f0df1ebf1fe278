// What the GPU engine asks of the CUDA driver, counted where it asks (the process's
// totals, DeviceCounters in core/contract/target.h): kernel and graph launches, host waits
// (context, stream and event synchronisations), driver allocations (cuMemAlloc,
// cuMemAllocManaged: a recycled block is none), and the bytes of the caller's tensors copied
// to the device and back. The figures `tinymlir generate --verbose` prints per decode token.
#pragma once

#include <cstdint>

#include "core/contract/target.h"

namespace tinymlir {
namespace gpu {

enum class EngineEvent { kGraphLaunch, kKernelLaunch, kHostSync, kAllocation };

void Count(EngineEvent event);
void CountBytesToDevice(uint64_t bytes);
void CountBytesFromDevice(uint64_t bytes);

DeviceCounters EngineCountersNow();

}  // namespace gpu
}  // namespace tinymlir
