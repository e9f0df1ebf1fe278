// The pass pipelines, as named constants in the order they run, kept as strings so that
// each stage can be reproduced with mlir-opt (docs/ARCHITECTURE.md lists them with the
// reason for each deviation from upstream MLIR's usual pipelines).
#pragma once

#include <memory>
#include <string>

#include "core/support/status.h"
#include "llvm/ADT/ArrayRef.h"

namespace mlir {
class ModuleOp;
class Pass;
}

namespace tinymlir {

// 1. Target-independent clean-up and elementwise fusion (3 generics -> 1 for
//    examples/c/affine.c). Upstream's linalg-fuse-elementwise-ops is replaced by
//    tm-fuse-elementwise-ops, which keeps matmuls named (see fuse_elementwise.h), and
//    upstream's cse by tm-cse, which puts operations' bodies in its hash (ops that differ
//    only in their bodies were compared pairwise, see cse_with_regions.h).
inline constexpr const char *kOptimizePipeline =
    "canonicalize,tm-cse,tm-fuse-elementwise-ops,canonicalize,tm-cse";

// 2. Bufferization, once for every target: tensors become memrefs, internal buffers are
//    freed. Two steps first. tm-unshare-tensors (see unshare_tensors.h) gives each user
//    of a shared zero fill its own, which removes a copy each (a pass over memory on the
//    CPU, a kernel launch on the GPU), and bounds the users of one tensor.empty, input or
//    constant, which keeps one-shot bufferization's analysis linear in the program's size. eliminate-empty-tensors makes a result that goes to an output
//    (bufferization.materialize_in_destination) be computed in the caller's buffer instead
//    of a buffer of its own copied there (the output is `restrict`: the engine copies the
//    inputs that overlap it). Then the frees, which a target picks (TargetLowering): each
//    small buffer freed right after its last use (tm-free-buffers, see free_buffers.h; the
//    CPU's), or upstream's buffer-deallocation-pipeline, which frees at the end of the
//    function (the GPU's: its kernel passes look at neighbouring operations, and its frees
//    wait for the end of the call anyway).
inline constexpr const char *kBufferizePipeline =
    "tm-unshare-tensors,eliminate-empty-tensors,"
    "one-shot-bufferize{bufferize-function-boundaries}";
inline constexpr const char *kCpuFreesPipeline = "tm-free-buffers,canonicalize,cse";
inline constexpr const char *kFreeAtReturnPipeline = "buffer-deallocation-pipeline";

// 3. A target's own step runs here, between bufferization and lowering (TargetLowering::lower,
//    core/targets/<name>/compile): the CPU's BLAS rewrite, the GPU's kernels.

// 4. Lowering to the LLVM dialect. Beyond upstream's usual list: copies between buffers as
//    linalg.copy (see copies_to_linalg.h), then linalg to parallel loops,
//    of which tm-parallelize-loops sends the large ones to the worker pool (see
//    parallel_loops.h) and tm-outline-loop-nests makes each other one a function of its own
//    (compile time linear in the program's size, see outline_loop_nests.h), and
//    tm-merge-identical-functions keeps one of each set of identical functions (a model's
//    repeated blocks compiled once, see merge_identical_functions.h);
//    tm-approximate-math (f32 tanh/exp/erf as vectorisable polynomials, see
//    approximate_math.h); convert-math-to-funcs, which expands math.ipowi (integer pow); and
//    convert-math-to-llvm before convert-math-to-libm, so that the fma/floor/abs the
//    approximations use become LLVM intrinsics (vectorisable) and only what has none (erf,
//    tanh in f64) calls libm. tm-argument-block gives each function's arguments an entry
//    block of their own, where convert-func-to-llvm rebuilds their descriptors (its cost
//    linear in the arguments, see argument_block.h).
inline constexpr const char *kLowerToLLVMPipeline =
    "tm-copies-to-linalg,convert-linalg-to-parallel-loops,tm-parallelize-loops,"
    "tm-outline-loop-nests,tm-merge-identical-functions,"
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "tm-approximate-math,convert-math-to-funcs,convert-math-to-llvm,convert-math-to-libm,"
    "convert-arith-to-llvm,"
    "tm-argument-block,convert-func-to-llvm,convert-cf-to-llvm,finalize-memref-to-llvm,"
    "reconcile-unrealized-casts";

// tinymlir's own passes, by the name the pipelines above use. They are created here, not
// looked up in MLIR's registry (see fuse_elementwise.h); tinymlir-opt registers them.
struct OwnPass {
  const char *name;
  std::unique_ptr<mlir::Pass> (*create)();
};
llvm::ArrayRef<OwnPass> OwnPasses();

// Parses `pipeline` (a comma-separated list of passes, anchored on builtin.module) and runs
// it on the module with the verifier on. Diagnostics go into the returned Status, which
// names `stage`.
Status RunPipeline(mlir::ModuleOp module, const char *stage, const std::string &pipeline);

// Verifies the module; a failure names `stage` and carries the diagnostics.
Status VerifyModule(mlir::ModuleOp module, const char *stage);

}  // namespace tinymlir
