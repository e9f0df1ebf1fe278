// Managed memory that GPU program calls hand back to each other instead of to the driver.
//
// Each call of a GPU program allocates its temporaries (the host code's malloc) and the
// managed copies of the caller's tensors (the invoke's staging), and a decode step makes the
// same calls with the same sizes again. From the driver, each of those is a cuMemAllocManaged
// and a cuMemFree, and each fresh block's pages fault into device memory when a kernel first
// touches them. Recycled, a block keeps its pages where the last kernel left them.
//
// A block is recycled only once the device is done with it: the blocks of a call wait, as a
// group, for an event recorded on the engine's stream after the call's work (DeferredFrees
// in gpu_runtime.h), and become idle when a later allocation finds that event passed. So
// the host never waits for a call to end before the next, and any call (and the host code,
// which writes constants into fresh blocks) may take any idle block. Blocks are matched
// by exact size (a call's sizes repeat exactly), and at most kMaxIdleBytes stay idle; past
// that, or for a block this did not allocate, the block goes back to the driver.
#pragma once

#include <cstdint>
#include <vector>

#include "core/support/status.h"

namespace tinymlir {
namespace gpu {

inline constexpr uint64_t kMaxIdleBytes = uint64_t{256} << 20;

// `bytes` of managed memory (none for zero): an idle block of that size, or a new one. When
// the driver is out of memory, the idle blocks are freed and the allocation tried again.
Status AllocateRecycled(uint64_t bytes, void **out);

// Makes a block from AllocateRecycled idle, for the next allocation of its size; the device
// must be done with it. Any other managed block is freed (ManagedFree). NULL is a no-op.
void Recycle(void *block);

// Makes `blocks` (from AllocateRecycled, or any other managed block, which is freed then)
// idle once the device has done the work queued on the engine's stream so far. Without an
// event to wait for (a driver lacking cuEventQuery, or a failed record), waits for the
// stream first.
void RecycleAfterQueuedWork(const std::vector<void *> &blocks);

// Frees a block from AllocateRecycled now (the release function of an unwinding call, which
// has waited for the device first).
void FreeRecycled(void *block);

// Bytes in idle blocks: free for the next calls, though the driver counts them as used.
// Blocks still waiting for their event are not counted.
uint64_t IdleBytes();

// Gives every idle block back to the driver, and every block waiting for its event once the
// device has done the work queued so far (it waits for that).
void FreeIdle();

// `bytes` of new managed memory (ManagedAlloc); when the driver is out of memory, the idle
// blocks are given back first and the allocation tried again. What AllocateRecycled does for
// a size it has no idle block of, and what tm_process_managed_alloc does.
Status ManagedAllocMakingRoom(uint64_t bytes, void **out);

}  // namespace gpu
}  // namespace tinymlir
