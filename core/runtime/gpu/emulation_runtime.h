// The race check of GPU emulation (core/compiler/passes/gpu_emulation.h): the emulated kernels call
// these for every access to workgroup memory and to the buffers the launch was given, and
// a kernel in which two threads touch one element without a barrier between them (one of
// them writing) fails the program call with TM_ERROR_RUNTIME naming both threads. Sequential
// emulation would otherwise hide such a race: one thread's phase ends before the next
// thread's starts.
//
// Two accesses race when the threads differ and either their blocks differ (blocks never
// synchronise within a launch) or no barrier stands between them (the same phase count).
// Per element, the last write and the last two reads by distinct threads are remembered, for
// the duration of one launch; the state is per calling thread and released with the call.
#pragma once

#include <cstdint>

extern "C" {

// Before a launch's first block: its grid and block sizes (x, y, z).
void tm_rt_gpu_emulation_launch_begin(int64_t grid_x, int64_t grid_y, int64_t grid_z,
                                      int64_t block_x, int64_t block_y, int64_t block_z);

// A barrier passed by the block being emulated.
void tm_rt_gpu_emulation_barrier();

// An access to the element at `address` by thread `thread` (x + X * (y + Y * z)) of block
// `block` (the same over the grid). `kind`: bit 0 a store (else a load), bit 1 workgroup
// memory (each block has its own: the emulation reuses one buffer, block after block).
void tm_rt_gpu_emulation_access(int64_t address, int64_t thread, int64_t block, int32_t kind);

// After the launch's last block.
void tm_rt_gpu_emulation_launch_end();

}  // extern "C"
