// The race check of GPU emulation (core/targets/gpu/compile/gpu_emulation.h): the emulated kernels call
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

// The functions, in the order emulated kernels call them (emulation_functions.def):
//   tm_rt_gpu_emulation_launch_begin(grid x, y, z, block x, y, z): before a launch's first
//     block;
//   tm_rt_gpu_emulation_barrier(): a barrier passed by the block being emulated;
//   tm_rt_gpu_emulation_access(address, thread, block, kind): an access to the element at
//     `address` by thread `thread` (x + X * (y + Y * z)) of block `block` (the same over the
//     grid); `kind`: bit 0 a store (else a load), bit 1 workgroup memory (each block has its
//     own: the emulation reuses one buffer, block after block);
//   tm_rt_gpu_emulation_launch_end(): after the launch's last block.
extern "C" {
#define TM_RUNTIME_FUNCTION(name, parameters) void name parameters;
#include "core/targets/gpu/run/emulation_functions.def"
#undef TM_RUNTIME_FUNCTION
}  // extern "C"
