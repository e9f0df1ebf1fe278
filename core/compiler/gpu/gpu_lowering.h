// The GPU target step (NVIDIA): from the bufferized module to the LLVM dialect with the
// device code embedded, ready for translation like the CPU's.
//
//   1. matmuls become tiled shared-memory kernels (core/compiler/passes/gpu_matmul.h), and
//      memref.copy becomes linalg.copy, so that copies between device buffers run on the
//      device too; a reduction along rows and the ops around it that work row by row (layer
//      norm, softmax) become one kernel with a block per row (core/compiler/passes/gpu_row_kernels.h);
//      constant tensors (host read-only data) are copied to managed memory;
//   2. every other linalg op becomes parallel loops (a reduction left stays sequential inside
//      one thread, so no two threads write one element; an op's parallel loops are put first,
//      so that a reduction over a leading axis is one kernel, not a host loop of launches),
//      tiled and mapped to blocks and threads, then to gpu.launch, and every launch is
//      outlined into a gpu.module; a function's launches are chained on one stream, with one
//      wait before it returns;
//   3. nvvm-attach-target (the chip), convert-gpu-to-nvvm (libdevice for math), the host
//      lowered as on the CPU with gpu-to-llvm, and gpu-module-to-binary: PTX (the driver
//      assembles it when the program is linked) or cubin (ptxas, at compile time).
//
// With options.gpu_emulate, step 3 is replaced by core/compiler/passes/gpu_emulation.h: the launches
// become host loops running the kernels thread by thread, lowered as on the CPU (no device
// code; the program is a CPU program).
//
// The host code calls MLIR's mgpu* runtime functions, which tinymlir implements over the
// CUDA driver (core/runtime/gpu/gpu_runtime.h); its own buffers come from managed memory.
#pragma once

#include <string>

#include "core/support/status.h"
#include "core/engine/compile_options.h"

namespace mlir {
class ModuleOp;
}

namespace tinymlir {

// Runs steps 1-3. *device_code receives the text of every kernel module's PTX (for the
// assembly stage), each preceded by a comment naming its module.
Status LowerForGpu(mlir::ModuleOp module, const CompileOptions &options, std::string *device_code);

}  // namespace tinymlir
