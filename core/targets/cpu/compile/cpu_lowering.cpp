// The CPU target's compile side: after bufferization, matmuls become calls of the run side's
// kernels (blas_rewrite.h, unless use_blas is 0), each small buffer is freed after its last
// use, and the module is lowered to the LLVM dialect (core/compiler/passes/pipelines.h:
// kLowerToLLVMPipeline). The program runs on the "cpu" device.
#include "core/compiler/passes/free_buffers.h"
#include "core/compiler/passes/pipelines.h"
#include "core/compiler/passes/target_lowering.h"
#include "core/targets/cpu/compile/blas_rewrite.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

namespace tinymlir {
namespace {

void RegisterDialects(mlir::DialectRegistry &) {}

void RegisterPasses() {}

const char *Device(const CompileOptions &) { return "cpu"; }

Status Lower(mlir::ModuleOp module, const CompileOptions &options, LoweredModule *out) {
  if (options.Option("use_blas", 1)) RewriteMatmulsToBlas(module);
  // Counted once the buffers are final: the BLAS rewrite reads some transposes in place
  // instead of copying them.
  out->temporary_bytes = PeakTemporaryBytes(module, /*frees_take_effect=*/true);
  TM_RETURN_IF_ERROR(VerifyModule(module, "blas rewrite"));
  return RunPipeline(module, "lower to LLVM", kLowerToLLVMPipeline);
}

bool SlpVectorize(const CompileOptions &) { return true; }

Status BlasRewrite(mlir::ModuleOp module, int64_t) {
  RewriteMatmulsToBlas(module);
  return Status::Ok();
}

void BlasDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::func::FuncDialect, mlir::memref::MemRefDialect, mlir::arith::ArithDialect,
                  mlir::scf::SCFDialect, mlir::LLVM::LLVMDialect>();
}

constexpr TargetRewrite kRewrites[] = {
    {"tm-blas-rewrite", "Matmuls on memrefs become GEMV kernel or OpenBLAS calls (CPU)",
     &BlasRewrite, &BlasDialects},
};

const TargetLowering kCpuLowering = {&RegisterDialects, &RegisterPasses, &Device,
                                     kCpuFreesPipeline, &Lower,          &SlpVectorize,
                                     kRewrites};

}  // namespace

const TargetLowering &CpuLowering() { return kCpuLowering; }

}  // namespace tinymlir
