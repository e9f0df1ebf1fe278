#include "core/compiler/native_compiler.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "core/compiler/builder/build_module.h"
#include "core/compiler/passes/blas_rewrite.h"
#include "core/compiler/passes/free_buffers.h"
#include "core/compiler/passes/pipelines.h"
#include "core/compiler/diagnostics.h"
#include "core/compiler/cpu/entry_parts.h"
#include "core/compiler/cpu/native_object.h"
#include "core/compiler/gpu/gpu_lowering.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

namespace tinymlir {
namespace {

// Dialects, their bufferization/deallocation models and the LLVM IR translations, built
// once; each program's context copies it (measured: 0.9 ms per context with every dialect
// and extension registered, so a smaller registry would not pay for itself).
// std::call_once rather than a function-local static: its every call goes through
// pthread_once, which ThreadSanitizer sees, whereas a static's fast path is an inline load
// in this (uninstrumented) file and every compile on another thread was a false report.
const mlir::DialectRegistry &Registry() {
  static std::once_flag once;
  static mlir::DialectRegistry *registry = nullptr;
  std::call_once(once, [] {
    registry = new mlir::DialectRegistry();
    mlir::registerAllDialects(*registry);
    mlir::registerAllExtensions(*registry);
    mlir::registerBuiltinDialectTranslation(*registry);
    mlir::registerLLVMDialectTranslation(*registry);
    // The GPU target: compiling to NVVM/PTX, and translating gpu.binary / launch_func.
    mlir::NVVM::registerNVVMTargetInterfaceExternalModels(*registry);
    mlir::registerNVVMDialectTranslation(*registry);
    mlir::registerGPUDialectTranslation(*registry);
    mlir::gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(*registry);
  });
  return *registry;
}

// Stage text for people to read: constants of more than 16 elements are elided, so that a
// program holding a large constant does not keep several printed copies of it.
std::string Print(mlir::ModuleOp module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module.print(os, mlir::OpPrintingFlags().elideLargeElementsAttrs(16));
  return s;
}

// Constant bytes above which the LLVM IR text is not kept (it would print every element).
constexpr size_t kMaxConstantBytesForIrText = 1 << 20;

size_t ConstantBytes(const Trace &trace) {
  size_t total = 0;
  for (ValueId v = 0; v < trace.size(); ++v) total += trace.node(v).data.size();
  return total;
}

std::string Print(const llvm::Module &module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module.print(os, nullptr);
  return s;
}

// Every external function the lowered module declares must be one the engine's linker
// resolves; a missing one is a compile error here, not a link error later.
Status CheckExternals(mlir::ModuleOp module, DeviceKind device, CanLinkSymbol can_link) {
  std::string missing;
  module.walk([&](mlir::LLVM::LLVMFuncOp f) {
    if (!f.isExternal()) return;
    if (mlir::isa<mlir::gpu::GPUModuleOp>(f->getParentOp())) return;  // device code
    std::string name = f.getName().str();
    if (can_link(name.c_str(), device)) return;
    missing += (missing.empty() ? "" : ", ") + name;
  });
  if (!missing.empty())
    return CompileError("the generated code calls functions this library cannot provide: " +
                        missing);
  return Status::Ok();
}

// Adds the time since the last call (or construction) to one phase of `program`.
class PhaseClock {
 public:
  explicit PhaseClock(Program *program) : program_(program), last_(Now()) {}
  void Done(CompilePhase phase) {
    const auto now = Now();
    program_->seconds(phase) += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  static std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }
  Program *program_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

Status CompileNative(const Trace &trace, const CompileOptions &options, CanLinkSymbol can_link,
                     std::unique_ptr<Program> *out) {
  auto program = std::make_unique<Program>();
  program->device_kind = RunsOn(options);
  const bool gpu = program->device_kind == DeviceKind::kGpu;
  PhaseClock clock(program.get());
  for (ValueId in : trace.inputs()) program->inputs.push_back(trace.node(in).type);
  for (ValueId o : trace.outputs()) program->outputs.push_back(trace.node(o).type);
  std::vector<bool> live = trace.Live();
  for (ValueId v = 0; v < trace.size(); ++v) {
    const Node &n = trace.node(v);
    if (!live[v] || n.kind != OpKind::kGather) continue;
    const Node &indices = trace.node(n.operands[1]);
    if (indices.kind == OpKind::kInput)
      program->gather_checks.push_back(
          {indices.input_index, trace.node(n.operands[0]).type.shape[0]});
  }

  // The MLIR context and module live only for the compile: the program keeps the native
  // code (and the texts).
  mlir::MLIRContext ctx(Registry(), mlir::MLIRContext::Threading::DISABLED);
  DiagnosticCollector diagnostics(&ctx);
  mlir::OwningOpRef<mlir::ModuleOp> owned_module;

  TM_RETURN_IF_ERROR(BuildModule(trace, live, ctx, &owned_module));
  mlir::ModuleOp module = *owned_module;
  TM_RETURN_IF_ERROR(VerifyModule(module, "traced"));
  program->stage(Stage::kTraced) = Print(module);
  clock.Done(CompilePhase::kBuild);

  if (options.optimize) TM_RETURN_IF_ERROR(RunPipeline(module, "optimize", kOptimizePipeline));
  program->stage(Stage::kOptimized) = Print(module);
  clock.Done(CompilePhase::kOptimize);

  // An emulated GPU program is bufferized as the GPU's: its kernels are made the same way.
  const bool gpu_target = options.target == Target::kGpu;
  TM_RETURN_IF_ERROR(RunPipeline(module, "bufferize",
                                 std::string(kBufferizePipeline) + "," +
                                     (gpu_target ? kGpuFreesPipeline : kCpuFreesPipeline)));
  program->stage(Stage::kBufferized) = Print(module);
  clock.Done(CompilePhase::kBufferize);

  std::string device_code;
  // Temporaries are counted once the buffers are final: on the CPU after the BLAS rewrite,
  // which reads some transposes in place instead of copying them.
  if (gpu_target) {
    program->temporary_bytes = PeakTemporaryBytes(module, /*frees_take_effect=*/false);
    TM_RETURN_IF_ERROR(LowerForGpu(module, options, &device_code));
  } else {
    if (options.use_blas) RewriteMatmulsToBlas(module);
    program->temporary_bytes = PeakTemporaryBytes(module, /*frees_take_effect=*/true);
    TM_RETURN_IF_ERROR(VerifyModule(module, "blas rewrite"));
    TM_RETURN_IF_ERROR(RunPipeline(module, "lower to LLVM", kLowerToLLVMPipeline));
  }
  program->stage(Stage::kLowered) = Print(module);
  TM_RETURN_IF_ERROR(CheckExternals(module, program->device_kind, can_link));
  clock.Done(CompilePhase::kLower);

  std::string error;
  std::unique_ptr<llvm::TargetMachine> target = HostTargetMachine(options.opt_level, &error);
  if (!target) return CompileError("no host target machine: " + error);
  llvm::LLVMContext llvm_context;
  std::unique_ptr<llvm::Module> llvm_module =
      mlir::translateModuleToLLVMIR(module, llvm_context, "kernel");
  if (!llvm_module) return CompileError("translation to LLVM IR failed: " + diagnostics.Take());
  llvm_module->setDataLayout(target->createDataLayout());
  llvm_module->setTargetTriple(target->getTargetTriple());
  TM_RETURN_IF_ERROR(AddPackedEntry(*llvm_module, kKernelName));
  // A GPU program's host code is one long block of driver calls, each launch's arguments
  // stored into an array first: nothing there vectorises, and the SLP vectoriser's cost
  // grows with the square of a block's stores (24 layers of GPT-2 traced as one program:
  // 17 s of LLVM's optimisation, 21 times what 6 layers took).
  OptimizeModule(*llvm_module, *target, options.opt_level, /*slp_vectorize=*/!gpu);
  SinkArgumentLoads(*llvm_module);
  SplitEntryIntoParts(*llvm_module);
  std::string llvm_ir;
  if (ConstantBytes(trace) <= kMaxConstantBytesForIrText) llvm_ir = Print(*llvm_module);
  clock.Done(CompilePhase::kLlvmOptimize);
  std::string object;
  TM_RETURN_IF_ERROR(EmitObject(*llvm_module, *target, &object));
  clock.Done(CompilePhase::kCodegen);
  program->object_code = std::move(object);
  if (gpu) program->stage(Stage::kAssembly) = std::move(device_code);
  program->stage(Stage::kLlvmIr) = std::move(llvm_ir);
  *out = std::move(program);
  return Status::Ok();
}
}  // namespace tinymlir
