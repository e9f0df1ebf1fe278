#include "core/targets/gpu/compile/gpu_lowering.h"

#include <unistd.h>

#include <cctype>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/compiler/passes/copies_to_linalg.h"
#include "core/compiler/passes/free_buffers.h"
#include "core/compiler/passes/pipelines.h"
#include "core/compiler/passes/target_lowering.h"
#include "core/targets/gpu/compile/gpu_emulation.h"
#include "core/targets/gpu/compile/gpu_matmul.h"
#include "core/targets/gpu/compile/gpu_pipelines.h"
#include "core/targets/gpu/compile/gpu_row_kernels.h"
#include "core/targets/gpu/compile/software_kernels.h"
#include "mlir/Conversion/GPUCommon/GPUToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

namespace tinymlir {
namespace {

// A reduction over a leading axis (a sum over the rows of a matrix, say) is a linalg op
// whose reduction loop comes before a parallel one: convert-linalg-to-parallel-loops would
// leave that reduction loop in the host code, launching one kernel per reduced row and
// waiting for each. With the parallel loops first (the op generalized if need be, then
// interchanged), it is one kernel whose threads each reduce their own elements in order.
void ParallelLoopsFirst(mlir::ModuleOp module) {
  std::vector<mlir::linalg::LinalgOp> ops;
  module.walk([&](mlir::linalg::LinalgOp op) { ops.push_back(op); });
  mlir::IRRewriter rewriter(module.getContext());
  for (mlir::linalg::LinalgOp op : ops) {
    const auto iterators = op.getIteratorTypesArray();
    std::vector<unsigned> order;
    for (bool parallel : {true, false})
      for (unsigned i = 0; i < iterators.size(); ++i)
        if ((iterators[i] == mlir::utils::IteratorType::parallel) == parallel) order.push_back(i);
    if (std::is_sorted(order.begin(), order.end())) continue;
    rewriter.setInsertionPoint(op);
    auto generic = mlir::dyn_cast<mlir::linalg::GenericOp>(op.getOperation());
    if (!generic) {
      mlir::FailureOr<mlir::linalg::GenericOp> made = mlir::linalg::generalizeNamedOp(rewriter, op);
      if (mlir::failed(made)) continue;  // stays as it is: correct, one launch per row
      generic = *made;
    }
    (void)mlir::linalg::interchangeGenericOp(rewriter, generic, order);
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

// Whether the host code of `func` touches tensor memory only where no queued kernel can be
// using it: besides launches and pure operations (views, index arithmetic), it may only
// allocate (a block the device is done with), free (the runtime recycles what a call frees
// once the device has passed the call's work), and copy a constant into a buffer it has just
// allocated (GlobalsToDeviceMemory). Kernels on one stream run in order, so such a function
// needs no wait between its launches, nor before it returns.
bool HostNeedsNoWait(mlir::func::FuncOp func) {
  if (!func.getBody().hasOneBlock()) return false;
  for (mlir::Operation &op : func.getBody().front()) {
    if (auto launch = mlir::dyn_cast<mlir::gpu::LaunchFuncOp>(op)) {
      if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty() ||
          launch.hasClusterSize())
        return false;
      continue;
    }
    if (mlir::isa<mlir::memref::AllocOp, mlir::memref::DeallocOp, mlir::memref::GetGlobalOp,
                  mlir::func::ReturnOp>(op) ||
        mlir::isMemoryEffectFree(&op))
      continue;
    auto copy = mlir::dyn_cast<mlir::memref::CopyOp>(op);
    if (copy && copy.getSource().getDefiningOp<mlir::memref::GetGlobalOp>() &&
        copy.getTarget().getDefiningOp<mlir::memref::AllocOp>())
      continue;
    // Anything else (a host loop over launches, say) keeps every launch synchronous.
    return false;
  }
  return true;
}

// gpu-to-llvm gives every synchronous gpu.launch_func a stream of its own: created,
// launched on, waited for and destroyed, four driver calls and a round trip to the device
// per kernel. Where the host code allows it (HostNeedsNoWait), the launches of a
// function are chained on one stream instead (`gpu.wait async`, then `gpu.launch_func
// async [previous]`), and the function returns without waiting: the runtime's "new" stream
// is the engine's own (gpu_runtime.h), on which the device (gpu_device.cpp) queues the
// copies out after the call and waits only when the host must read a result, and which
// orders the next call's work after this one's. (Upstream's gpu-async-region would also
// wait before every allocation and free, which the host code does between most launches;
// the runtime recycles what a call frees only once the device has passed its work.)
void ChainLaunchesOnOneStream(mlir::ModuleOp module) {
  module.walk([](mlir::func::FuncOp func) {
    if (func.isExternal() || !HostNeedsNoWait(func)) return;
    auto launches = llvm::to_vector(func.getBody().front().getOps<mlir::gpu::LaunchFuncOp>());
    if (launches.empty()) return;
    mlir::OpBuilder b(launches.front());
    const mlir::Type token_type = b.getType<mlir::gpu::AsyncTokenType>();
    mlir::Value token =
        mlir::gpu::WaitOp::create(b, launches.front().getLoc(), token_type, mlir::ValueRange())
            .getAsyncToken();
    for (mlir::gpu::LaunchFuncOp launch : launches) {
      b.setInsertionPoint(launch);
      token = mlir::gpu::LaunchFuncOp::create(
                  b, launch.getLoc(), launch.getKernel(), launch.getGridSizeOperandValues(),
                  launch.getBlockSizeOperandValues(), launch.getDynamicSharedMemorySize(),
                  launch.getKernelOperands(), token_type, mlir::ValueRange{token})
                  .getAsyncToken();
      launch.erase();
    }
  });
}

// Whether the host code of `func` reads or writes memory itself (besides allocating,
// freeing, launching and calling), as a function HostNeedsNoWait refuses may.
bool HostTouchesMemory(mlir::func::FuncOp func) {
  bool touches = false;
  func.walk([&](mlir::Operation *op) {
    if (op->getNumRegions() > 0 || mlir::isMemoryEffectFree(op) ||
        mlir::isa<mlir::gpu::LaunchFuncOp, mlir::memref::AllocOp, mlir::memref::DeallocOp,
                  mlir::memref::GetGlobalOp, mlir::func::CallOp, mlir::func::ReturnOp>(op))
      return;
    touches = true;
  });
  return touches;
}

// The device stages a call's tensors with copies queued on the engine's stream and does not
// wait for them, nor for the calls before (gpu_device.cpp). A function whose host code
// touches memory itself (HostTouchesMemory, and not one HostNeedsNoWait takes) waits for
// the stream when it starts, so that what it reads is there and what it writes is no
// longer read; its launches are synchronous already.
void WaitAtEntryWhereTheHostTouchesMemory(mlir::ModuleOp module) {
  module.walk([](mlir::func::FuncOp func) {
    if (func.isExternal() || HostNeedsNoWait(func) || !HostTouchesMemory(func)) return;
    mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(&func.getBody().front());
    const mlir::Value token =
        mlir::gpu::WaitOp::create(b, func.getLoc(), b.getType<mlir::gpu::AsyncTokenType>(),
                                  mlir::ValueRange())
            .getAsyncToken();
    mlir::gpu::WaitOp::create(b, func.getLoc(), mlir::Type(), mlir::ValueRange{token});
  });
}

// The CUDA toolkit ptxas and libdevice come from: $CUDA_HOME, $CUDA_PATH, else /usr/local/cuda.
std::string CudaToolkit() {
  for (const char *name : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *dir = std::getenv(name); dir && *dir) return dir;
  return "/usr/local/cuda";
}

}  // namespace

// The options of gpu_options.def, by the compile side's names.
enum class GpuOption {
#define TM_GPU_OPTION(Id, name, ...) k##Id,
#include "core/targets/gpu/run/gpu_options.def"
#undef TM_GPU_OPTION
};
int Option(const CompileOptions &options, GpuOption option) {
  static constexpr const char *kNames[] = {
#define TM_GPU_OPTION(Id, name, ...) name,
#include "core/targets/gpu/run/gpu_options.def"
#undef TM_GPU_OPTION
  };
  return options.Option(kNames[static_cast<int>(option)]);
}

Status LowerForGpu(mlir::ModuleOp module, const CompileOptions &options, std::string *device_code) {
  RewriteMatmulsToGpuKernels(module, Option(options, GpuOption::kMatmulTile));
  ParallelLoopsFirst(module);
  // Copies as linalg.copy, which step 2 maps to the device like any other linalg op (on the
  // host they would touch managed memory page by page).
  CopiesToLinalg(module);
  RewriteRowsToGpuKernels(module);  // after CopiesToLinalg: a copy of a row may join
  GlobalsToDeviceMemory(module);  // after CopiesToLinalg: these copies run on the host
  TM_RETURN_IF_ERROR(VerifyModule(module, "gpu matmul and row kernels"));
  TM_RETURN_IF_ERROR(RunPipeline(module, "map to the GPU", kGpuMapPipeline));
  device_code->clear();
  if (const int emulate = Option(options, GpuOption::kEmulate)) {
    TM_RETURN_IF_ERROR(EmulateGpuLaunches(module, /*check_races=*/emulate == 1));
    TM_RETURN_IF_ERROR(VerifyModule(module, "gpu emulation"));
    return RunPipeline(module, "lower to LLVM", kLowerToLLVMPipeline);
  }
  TM_RETURN_IF_ERROR(RunPipeline(module, "outline the kernels", kGpuOutlinePipeline));
  WaitAtEntryWhereTheHostTouchesMemory(module);  // before the chains: it asks HostNeedsNoWait
  ChainLaunchesOnOneStream(module);
  TM_RETURN_IF_ERROR(VerifyModule(module, "gpu launches on one stream"));
  std::vector<CpuKernelBody> cpu_bodies;
  if (Option(options, GpuOption::kCpuBodies)) {
    TM_RETURN_IF_ERROR(AddCpuKernelBodies(module, &cpu_bodies));
    TM_RETURN_IF_ERROR(VerifyModule(module, "the kernels' CPU bodies"));
  }
  const std::string chip = "sm_" + std::to_string(Option(options, GpuOption::kSm));
  TM_RETURN_IF_ERROR(RunPipeline(
      module, "lower for the GPU",
      GpuLowerPipeline(chip, CudaToolkit(), Option(options, GpuOption::kCubin) != 0)));
  TM_RETURN_IF_ERROR(AddCpuKernelRegistration(module, cpu_bodies));
  // MLIR links libdevice when it finds it and goes on without it when it does not: PTX
  // calling its functions unresolved (`.extern .func __nv_expf`), which no driver loads.
  // Without the file, a kernel that needs it is a compile error here, not a failure on the
  // user's GPU.
  std::string unresolved;
  module.walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute attr : binary.getObjects()) {
      auto object = mlir::dyn_cast<mlir::gpu::ObjectAttr>(attr);
      if (!object || object.getFormat() != mlir::gpu::CompilationTarget::Assembly) continue;
      llvm::StringRef ptx = object.getObject().getValue();
      for (size_t at = ptx.find(".extern .func"); at != llvm::StringRef::npos;
           at = ptx.find(".extern .func", at + 1)) {
        llvm::StringRef line = ptx.substr(at, ptx.find('\n', at) - at);
        const size_t name = line.find("__nv_");
        if (name == llvm::StringRef::npos) continue;
        llvm::StringRef fn = line.substr(name).take_while(
            [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
        if (unresolved.find(fn.str()) == std::string::npos)
          unresolved += (unresolved.empty() ? "" : ", ") + fn.str();
      }
    }
  });
  const std::string libdevice = CudaToolkit() + "/nvvm/libdevice/libdevice.10.bc";
  if (!unresolved.empty() && access(libdevice.c_str(), R_OK) != 0)
    return Unsupported("the GPU kernels call CUDA's libdevice math functions (" + unresolved +
                       "), and " + libdevice + " cannot be read: install the CUDA toolkit, "
                       "or set CUDA_HOME to it");
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

namespace {

void RegisterDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::gpu::GPUDialect, mlir::NVVM::NVVMDialect>();
  mlir::gpu::registerBufferDeallocationOpInterfaceExternalModels(registry);
  // The kernels to NVVM (convert-gpu-to-nvvm), the launches to LLVM (gpu-to-llvm): patterns
  // those passes take from every dialect loaded.
  mlir::gpu::registerConvertGpuToLLVMInterface(registry);
  mlir::NVVM::registerConvertGpuToNVVMInterface(registry);
  mlir::registerConvertNVVMToLLVMInterface(registry);
  // Compiling to NVVM/PTX, and translating gpu.binary / launch_func.
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
}

// The passes of gpu_pipelines.h.
void RegisterPasses() {
  mlir::registerSCFParallelLoopFusion();
  mlir::registerSCFParallelLoopTiling();
  mlir::registerGpuMapParallelLoopsPass();
  mlir::registerConvertParallelLoopToGpuPass();
  mlir::registerGpuKernelOutliningPass();
  mlir::registerGpuNVVMAttachTarget();
  mlir::registerConvertGpuOpsToNVVMOps();
  mlir::registerGpuToLLVMConversionPass();
  mlir::registerGpuModuleToBinaryPass();
}

const char *Device(const CompileOptions &options) {
  return Option(options, GpuOption::kEmulate) ? "gpu-emulation" : "gpu";
}

Status Lower(mlir::ModuleOp module, const CompileOptions &options, LoweredModule *out) {
  // The frees take effect at the end of the call (kFreeAtReturnPipeline).
  out->temporary_bytes = PeakTemporaryBytes(module, /*frees_take_effect=*/false);
  return LowerForGpu(module, options, &out->device_code);
}

// A GPU program's host code is one long block of driver calls, each launch's arguments
// stored into an array first: nothing there vectorises, and the SLP vectoriser's cost grows
// with the square of a block's stores. Emulated kernels are host loops, which it helps.
bool SlpVectorize(const CompileOptions &options) { return Option(options, GpuOption::kEmulate) != 0; }

Status MatmulKernels(mlir::ModuleOp module, int64_t tile) {
  RewriteMatmulsToGpuKernels(module, tile);
  return Status::Ok();
}

Status RowKernels(mlir::ModuleOp module, int64_t) {
  RewriteRowsToGpuKernels(module);
  return Status::Ok();
}

Status Emulation(mlir::ModuleOp module, int64_t check_races) {
  return EmulateGpuLaunches(module, check_races != 0);
}

void KernelDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::gpu::GPUDialect, mlir::memref::MemRefDialect, mlir::arith::ArithDialect,
                  mlir::scf::SCFDialect>();
}

void EmulationDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::scf::SCFDialect, mlir::func::FuncDialect, mlir::memref::MemRefDialect,
                  mlir::arith::ArithDialect, mlir::LLVM::LLVMDialect>();
}

constexpr TargetRewrite kRewrites[] = {
    {"tm-gpu-matmul",
     "Matmuls on memrefs become tiled shared-memory or dot-product gpu.launch kernels",
     &MatmulKernels, &KernelDialects, "tile", 16},
    {"tm-gpu-row-kernels",
     "Row reductions and the ops around them become one gpu.launch, a block per row",
     &RowKernels, &KernelDialects},
    {"tm-gpu-emulation", "gpu.launch kernels become host loops calling the emulation runtime",
     &Emulation, &EmulationDialects, "check-races", 1},
};

const TargetLowering kGpuLowering = {&RegisterDialects,     &RegisterPasses, &Device,
                                     kFreeAtReturnPipeline, &Lower,          &SlpVectorize,
                                     kRewrites};

}  // namespace

const TargetLowering &GpuLowering() { return kGpuLowering; }

}  // namespace tinymlir
