// The GPU target's pass pipelines, in the order they run, as named constants (as
// core/compiler/passes/pipelines.h's, which they follow: bufferization before them, the
// host's lowering of step 4 inside GpuLowerPipeline).
#pragma once

#include <string>

namespace tinymlir {

// 3'. After core/targets/gpu/compile/gpu_matmul.h's kernels: linalg to parallel loops, adjacent
//     loops over the same elements fused (each is a launch of its own otherwise: a
//     reduction's zeroing, its copy into the output), tiled 16 x 16 (no min/max bounds: the
//     tiles' inner loops keep constant bounds and guard the edge with an scf.if, which
//     convert-parallel-loops-to-gpu requires), mapped to blocks and threads, turned into
//     gpu.launch and outlined into gpu.modules.
inline constexpr const char *kGpuMapPipeline =
    "func.func(convert-linalg-to-parallel-loops,scf-parallel-loop-fusion,"
    "scf-parallel-loop-tiling{parallel-loop-tile-sizes=16,16 no-min-max-bounds=true},"
    "gpu-map-parallel-loops,convert-parallel-loops-to-gpu),"
    "lower-affine";

// 3''. Every gpu.launch outlined into a gpu.module (unless emulated on the host:
//      core/targets/gpu/compile/gpu_emulation.h, after which the host is lowered as in 4). First, math
//      ops convert-gpu-to-nvvm has no pattern for (integer powers) become calls of functions
//      of their own, which outlining copies into each kernel's module (made later, at the
//      top level, a kernel's call would reference a function outside its module); the host's
//      copies, now unused, go (symbol-dce). Identical kernels then share one module
//      (merge_identical_functions.h): a model's repeated blocks compiled to PTX once, and
//      JIT-compiled by the driver once.
inline constexpr const char *kGpuOutlinePipeline =
    "convert-math-to-funcs,gpu-kernel-outlining,symbol-dce,canonicalize,cse,"
    "tm-merge-identical-functions";

// 4'. Device code to NVVM with the chip attached, the host lowered as in 4 with
//     gpu-to-llvm for the launches, then gpu-module-to-binary: PTX ("isa"), or cubin
//     ("bin", through the toolkit's ptxas); libdevice (math functions) comes from the CUDA
//     toolkit at `cuda_toolkit`.
inline std::string GpuLowerPipeline(const std::string &chip, const std::string &cuda_toolkit,
                                    bool cubin) {
  return "nvvm-attach-target{chip=" + chip +
         "},"
         "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),"
         "expand-strided-metadata,lower-affine,gpu-to-llvm,convert-scf-to-cf,"
         "tm-approximate-math,convert-math-to-funcs,convert-math-to-llvm,convert-math-to-libm,"
         "convert-arith-to-llvm,convert-cf-to-llvm,finalize-memref-to-llvm,"
         "tm-argument-block,convert-func-to-llvm,reconcile-unrealized-casts,"
         "gpu-module-to-binary{format=" +
         std::string(cubin ? "bin" : "isa") + " toolkit=" + cuda_toolkit + "}";
}

}  // namespace tinymlir
