// GPU emulation: every gpu.launch of the GPU target (before outlining) becomes host loops
// that run its kernel thread by thread, so the GPU lowering's kernels can be checked
// against the CPU target where there is no GPU (TINYMLIR_GPU_EMULATE=1; CI has no GPU).
//
// Blocks run one after the other (scf.for over z, y, x). Within a block, the kernel body is
// cut at its gpu.barriers into phases, and each phase runs for every thread of the block
// (scf.for over thread z, y, x) before the next phase starts: exactly the ordering a
// barrier guarantees. What a thread computes in one phase and uses in a later one is kept
// per thread: values of pure operations are recomputed from the thread's ids, others
// (loads, loop results) are stored in a (block z, y, x)-shaped buffer. A barrier may stand
// in the body or in an scf.for whose bounds are the same for every thread (the tiled matmul
// kernel's loop over K), its loop-carried values kept per thread the same way.
// Workgroup memory becomes one host buffer per attribution, reused by block after block.
//
// What emulation does not check: the device code generation after this point (NVVM,
// libdevice's math, PTX; ptxas checks the PTX), the CUDA runtime, and races between
// threads (one thread's phase runs to its end before the next thread's starts).
#pragma once

#include "core/support/status.h"

namespace mlir {
class ModuleOp;
}

namespace tinymlir {

// Rewrites every gpu.launch in `module`, with the race check's calls when `check_races`
// (core/targets/gpu/run/emulation_runtime.h: every access to the launch's buffers and to
// workgroup memory is recorded, and two threads touching an element with no barrier between
// them fail the call; about a hundred times slower). Fails naming what cannot be emulated (a
// barrier under a condition, an async launch, private memory, a GPU operation other than
// ids, dimensions and barriers).
Status EmulateGpuLaunches(mlir::ModuleOp module, bool check_races);

}  // namespace tinymlir
