#include "core/target/gpu/gpu_lowering.h"

#include <cstdlib>
#include <vector>

#include "core/passes/gpu_emulation.h"
#include "core/passes/gpu_matmul.h"
#include "core/passes/pipelines.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

namespace tinymlir {
namespace {

// Copies between buffers become linalg.copy, which step 2 maps to the device like any
// other linalg op (on the host they would touch managed memory page by page).
void CopiesToLinalg(mlir::ModuleOp module) {
  std::vector<mlir::memref::CopyOp> copies;
  module.walk([&](mlir::memref::CopyOp op) { copies.push_back(op); });
  for (mlir::memref::CopyOp op : copies) {
    mlir::OpBuilder b(op);
    mlir::linalg::CopyOp::create(b, op.getLoc(), op.getSource(), op.getTarget());
    op.erase();
  }
}

// Constant tensors live in the host object's read-only data, which a kernel cannot read:
// each use of one (memref.get_global) is replaced by a managed copy made on the host when
// the function starts and freed when it returns.
void GlobalsToDeviceMemory(mlir::ModuleOp module) {
  std::vector<mlir::memref::GetGlobalOp> uses;
  module.walk([&](mlir::memref::GetGlobalOp op) { uses.push_back(op); });
  for (mlir::memref::GetGlobalOp op : uses) {
    mlir::OpBuilder b(op);
    b.setInsertionPointAfter(op);
    auto type = mlir::cast<mlir::MemRefType>(op.getType());
    auto copy = mlir::memref::AllocOp::create(
        b, op.getLoc(), mlir::MemRefType::get(type.getShape(), type.getElementType()));
    op.getResult().replaceAllUsesWith(copy.getResult());
    mlir::memref::CopyOp::create(b, op.getLoc(), op.getResult(), copy.getResult());
    // Freed before every return of the function.
    op->getParentOfType<mlir::func::FuncOp>().walk([&](mlir::func::ReturnOp ret) {
      mlir::OpBuilder at(ret);
      mlir::memref::DeallocOp::create(at, ret.getLoc(), copy.getResult());
    });
  }
}

// The CUDA toolkit ptxas and libdevice come from: $CUDA_HOME, $CUDA_PATH, else /usr/local/cuda.
std::string CudaToolkit() {
  for (const char *name : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *dir = std::getenv(name); dir && *dir) return dir;
  return "/usr/local/cuda";
}

}  // namespace

Status LowerForGpu(mlir::ModuleOp module, const CompileOptions &options, std::string *device_code) {
  RewriteMatmulsToGpuKernels(module, options.gpu_matmul_tile);
  CopiesToLinalg(module);
  GlobalsToDeviceMemory(module);  // after CopiesToLinalg: these copies run on the host
  TM_RETURN_IF_ERROR(VerifyModule(module, "gpu matmul kernels"));
  TM_RETURN_IF_ERROR(RunPipeline(module, "map to the GPU", kGpuMapPipeline));
  device_code->clear();
  if (options.gpu_emulate != GpuEmulation::kOff) {
    TM_RETURN_IF_ERROR(
        EmulateGpuLaunches(module, options.gpu_emulate == GpuEmulation::kCheckRaces));
    TM_RETURN_IF_ERROR(VerifyModule(module, "gpu emulation"));
    return RunPipeline(module, "lower to LLVM", kLowerToLLVMPipeline);
  }
  TM_RETURN_IF_ERROR(RunPipeline(module, "outline the kernels", kGpuOutlinePipeline));
  const std::string chip = "sm_" + std::to_string(options.gpu_sm);
  TM_RETURN_IF_ERROR(RunPipeline(module, "lower for the GPU",
                                 GpuLowerPipeline(chip, CudaToolkit(), options.gpu_cubin)));
  module.walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute attr : binary.getObjects()) {
      auto object = mlir::dyn_cast<mlir::gpu::ObjectAttr>(attr);
      if (!object) continue;
      *device_code += "// ---- gpu module " + binary.getName().str() + " (" + chip + ")\n";
      if (object.getFormat() == mlir::gpu::CompilationTarget::Assembly)
        *device_code += object.getObject().getValue().str();
      else
        *device_code += "// (cubin, " + std::to_string(object.getObject().size()) + " bytes)\n";
      *device_code += "\n";
    }
  });
  return Status::Ok();
}

}  // namespace tinymlir
