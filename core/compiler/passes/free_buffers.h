// tm-free-buffers: on the CPU, every buffer one-shot bufferization allocates is freed right
// after the last operation that uses it, or anything derived from it (a large one at the
// end of the function, below).
//
// Why not upstream's buffer-deallocation-pipeline (which the GPU keeps): its ownership-based
// deallocation frees a block's buffers at the end of the block, and a traced program is one
// block. Every temporary then lived until the program returned:
// - the program's peak memory was the sum of all its temporaries, not the most that are
//   live at once (an unrolled recurrence of 1,000 steps held 3,000 buffers where a handful
//   are ever in use);
// - each buffer's pointer was live across the rest of the program's function, and
//   instruction selection and register allocation of that function grew faster than its
//   length (the same recurrence: 11.3 s of code generation, 5.2 s with frees at last use);
// - the one dealloc at the end lists every buffer, and its simplification compares them in
//   pairs (1.5 s for the same recurrence, the square of the number of buffers);
// - a block freed early is reused by the next allocation of its size, still in cache.
//
// Buffers of kLargeBufferBytes or more are still freed at the end of the function. Freed
// early, glibc gives such a block back to the system (it unmaps it, or trims the heap's top),
// and the next call's allocation of its size faults every page in again: GPT-2's 128-token
// prefill spent 270 ms instead of 175 ms in its products, writing into fresh pages. A
// program has few of them (a model's activations); the many small ones are what made the
// function's code generation and peak grow.
//
// A traced program's function is one block whose buffers are all allocated at its top level
// and never returned (outputs are the caller's buffers): that is all this pass handles, and
// anything else is a compile error naming the operation, not a leak.
//
// "Derived" is conservative: every result of an operation that takes the buffer or a value
// derived from it (views, the aligned pointer a BLAS call takes, loads) is derived too, so
// nothing that can reach the buffer is used after its free.
#pragma once

#include <cstdint>
#include <memory>

namespace mlir {
class ModuleOp;
class Pass;
}  // namespace mlir

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kFreeBuffersPassName = "tm-free-buffers";

// The size from which a buffer is freed at the end of the function (glibc's smallest
// threshold for unmapping a freed block or trimming the heap is 128 KiB).
inline constexpr uint64_t kLargeBufferBytes = 64 << 10;

// Not put in MLIR's global pass registry (see fuse_elementwise.h); pipelines.cpp adds it by
// name.
std::unique_ptr<mlir::Pass> CreateFreeBuffersPass();

// The most bytes the module's buffers hold at once, in program order: a memref.alloc or
// alloca adds its size, a memref.dealloc of it takes it away (saturating; UINT64_MAX when
// a buffer's shape is not static). With `frees_take_effect` false (the GPU, whose frees
// wait for the end of the call), the sum of all of them.
uint64_t PeakTemporaryBytes(mlir::ModuleOp module, bool frees_take_effect);

}  // namespace tinymlir
