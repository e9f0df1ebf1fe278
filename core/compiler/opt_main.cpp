// tinymlir-opt's body (tools/tinymlir-opt): MLIR's opt driver with every upstream pass and
// dialect, tinymlir's own passes, and its target rewrites as passes, all by name, so that
// each can be run on a .mlir file and checked with FileCheck (tests/passes). The rewrites
// are functions the compile pipelines call directly (native_compiler.cpp, gpu_lowering.cpp);
// here each is wrapped in a pass of the same effect. Only the tool registers anything in
// MLIR's global registry: a library loaded into a caller's process never does.
#include "core/compiler/opt_main.h"

#include "core/compiler/passes/blas_rewrite.h"
#include "core/compiler/passes/gpu_emulation.h"
#include "core/compiler/passes/gpu_matmul.h"
#include "core/compiler/passes/gpu_row_kernels.h"
#include "core/compiler/passes/pipelines.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace tinymlir {
namespace {

// The CPU target step (blas_rewrite.h).
struct BlasRewritePass
    : mlir::PassWrapper<BlasRewritePass, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(BlasRewritePass)
  llvm::StringRef getArgument() const override { return "tm-blas-rewrite"; }
  llvm::StringRef getDescription() const override {
    return "Matmuls on memrefs become GEMV kernel or OpenBLAS calls (CPU)";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::func::FuncDialect, mlir::memref::MemRefDialect,
                    mlir::arith::ArithDialect, mlir::scf::SCFDialect>();
  }
  void runOnOperation() override { RewriteMatmulsToBlas(getOperation()); }
};

// The GPU's product kernels (gpu_matmul.h).
struct GpuMatmulPass : mlir::PassWrapper<GpuMatmulPass, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuMatmulPass)
  GpuMatmulPass() = default;
  GpuMatmulPass(const GpuMatmulPass &other) : PassWrapper(other) {}
  llvm::StringRef getArgument() const override { return "tm-gpu-matmul"; }
  llvm::StringRef getDescription() const override {
    return "Matmuls on memrefs become tiled shared-memory or dot-product gpu.launch kernels";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::gpu::GPUDialect, mlir::memref::MemRefDialect,
                    mlir::arith::ArithDialect, mlir::scf::SCFDialect>();
  }
  void runOnOperation() override { RewriteMatmulsToGpuKernels(getOperation(), tile); }
  Option<int64_t> tile{*this, "tile", llvm::cl::desc("the tiles' edge"), llvm::cl::init(16)};
};

// The GPU's row kernels (gpu_row_kernels.h).
struct GpuRowKernelsPass
    : mlir::PassWrapper<GpuRowKernelsPass, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuRowKernelsPass)
  llvm::StringRef getArgument() const override { return "tm-gpu-row-kernels"; }
  llvm::StringRef getDescription() const override {
    return "Row reductions and the ops around them become one gpu.launch, a block per row";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::gpu::GPUDialect, mlir::memref::MemRefDialect,
                    mlir::arith::ArithDialect, mlir::scf::SCFDialect>();
  }
  void runOnOperation() override { RewriteRowsToGpuKernels(getOperation()); }
};

// The emulated GPU (gpu_emulation.h).
struct GpuEmulationPass
    : mlir::PassWrapper<GpuEmulationPass, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuEmulationPass)
  GpuEmulationPass() = default;
  GpuEmulationPass(const GpuEmulationPass &other) : PassWrapper(other) {}
  llvm::StringRef getArgument() const override { return "tm-gpu-emulation"; }
  llvm::StringRef getDescription() const override {
    return "gpu.launch kernels become host loops calling the emulation runtime";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::scf::SCFDialect, mlir::func::FuncDialect, mlir::memref::MemRefDialect,
                    mlir::arith::ArithDialect, mlir::LLVM::LLVMDialect>();
  }
  void runOnOperation() override {
    const Status status = EmulateGpuLaunches(getOperation(), check_races);
    if (status.ok()) return;
    getOperation().emitError(status.message());
    signalPassFailure();
  }
  Option<bool> check_races{*this, "check-races",
                           llvm::cl::desc("check the emulated kernels for races"),
                           llvm::cl::init(true)};
};

}  // namespace

int OptMain(int argc, char **argv) {
  mlir::registerAllPasses();
  for (const OwnPass &pass : OwnPasses()) mlir::registerPass(pass.create);
  mlir::PassRegistration<BlasRewritePass>();
  mlir::PassRegistration<GpuMatmulPass>();
  mlir::PassRegistration<GpuRowKernelsPass>();
  mlir::PassRegistration<GpuEmulationPass>();
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tinymlir-opt: MLIR's passes and tinymlir's\n", registry));
}

}  // namespace tinymlir
