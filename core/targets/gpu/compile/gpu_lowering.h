// The GPU target step (NVIDIA): from the bufferized module to the LLVM dialect with the
// device code embedded, ready for translation like the CPU's.
//
//   1. matmuls become tiled shared-memory kernels (core/targets/gpu/compile/gpu_matmul.h), and
//      memref.copy becomes linalg.copy, so that copies between device buffers run on the
//      device too; a reduction along rows and the ops around it that work row by row (layer
//      norm, softmax) become one kernel with a block per row (core/targets/gpu/compile/gpu_row_kernels.h);
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
// With the gpu_emulate option (TINYMLIR_GPU_EMULATE), step 3 is replaced by gpu_emulation.h:
// the launches become host loops running the kernels thread by thread, lowered as a host
// program (no device code; the program runs on the run side's "gpu-emulation" device).
//
// The host code calls MLIR's mgpu* runtime functions, which tinymlir implements over the
// CUDA driver (core/targets/gpu/run/gpu_runtime.h); its own buffers come from managed memory.
//
// The compiler finds it as GpuLowering() (core/compiler/passes/target_lowering.h); the
// assembly stage is every kernel module's PTX, each preceded by a comment naming its module.
#pragma once
