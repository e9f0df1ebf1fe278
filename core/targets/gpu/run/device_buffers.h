// The device memory the GPU engine hands out and therefore knows: device buffers
// (tm_device_buffer: cuMemAlloc, reachable by kernels only) and the managed blocks of
// tm_process_managed_alloc. A call's tensor inside one of them is used in place; any other
// is host memory and is staged. The engine tells them apart by looking the address up here,
// never by asking the driver what a pointer is.
//
// Both count against the budget TINYMLIR_GPU_MEMORY_BUDGET (a size such as 512M or 2G;
// unset, the device's memory): an allocation past it, or one the driver refuses, is
// TM_ERROR_OUT_OF_MEMORY naming the bytes asked for and the bytes free.
#pragma once

#include <cstdint>

#include "core/support/status.h"

namespace tinymlir {
namespace gpu {

// `bytes` (> 0) of device memory, contents undefined, or managed memory when `managed`.
Status AllocateKnownBlock(uint64_t bytes, bool managed, void **out);

// Frees a block from AllocateKnownBlock (NULL is a no-op). Work still queued on the engine's
// stream that uses it must have been waited for, which cuMemFree does.
void FreeKnownBlock(void *block);

// Whether [p, p + bytes) lies inside one block from AllocateKnownBlock.
bool InKnownBlock(const void *p, uint64_t bytes);

// The budget in bytes (0: none but the device's own memory), and the bytes of known blocks
// now. Fails naming the variable when TINYMLIR_GPU_MEMORY_BUDGET is not a size.
Status MemoryBudget(uint64_t *budget);
uint64_t KnownBytes();

}  // namespace gpu
}  // namespace tinymlir
