#include "core/compiler/native_compiler.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "core/compiler/builder/build_module.h"
#include "core/compiler/codegen/entry_parts.h"
#include "core/compiler/codegen/native_object.h"
#include "core/compiler/passes/diagnostics.h"
#include "core/compiler/passes/pipelines.h"
#include "core/compiler/passes/target_lowering.h"
#include "core/compiler/passes/upstream.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Target/LLVMIR/Export.h"

namespace tinymlir {
namespace {

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
// resolves; a missing one is a compile error here, not a link error later. Functions of
// nested modules are device code, which the device's own loader links.
Status CheckExternals(mlir::ModuleOp module, const char *device, CanLinkSymbol can_link) {
  std::string missing;
  module.walk([&](mlir::LLVM::LLVMFuncOp f) {
    if (!f.isExternal() || f->getParentOp() != module.getOperation()) return;
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
  explicit PhaseClock(CompiledProgram *program) : program_(program), last_(Now()) {}
  void Done(CompilePhase phase) {
    const auto now = Now();
    program_->seconds(phase) += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  static std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }
  CompiledProgram *program_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

Status CompileNative(const Trace &trace, const CompileOptions &options, CanLinkSymbol can_link,
                     std::unique_ptr<CompiledProgram> *out) {
  const TargetLowering &target = LoweringFor(options.target);
  auto program = std::make_unique<CompiledProgram>();
  program->device = target.device(options);
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
  mlir::MLIRContext ctx(CompilerDialects(), mlir::MLIRContext::Threading::DISABLED);
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

  TM_RETURN_IF_ERROR(RunPipeline(module, "bufferize",
                                 std::string(kBufferizePipeline) + "," + target.frees_pipeline));
  program->stage(Stage::kBufferized) = Print(module);
  clock.Done(CompilePhase::kBufferize);

  LoweredModule lowered;
  TM_RETURN_IF_ERROR(target.lower(module, options, &lowered));
  program->temporary_bytes = lowered.temporary_bytes;
  program->stage(Stage::kLowered) = Print(module);
  TM_RETURN_IF_ERROR(CheckExternals(module, program->device.c_str(), can_link));
  clock.Done(CompilePhase::kLower);

  std::string error;
  std::unique_ptr<llvm::TargetMachine> host = HostTargetMachine(options.opt_level, &error);
  if (!host) return CompileError("no host target machine: " + error);
  llvm::LLVMContext llvm_context;
  std::unique_ptr<llvm::Module> llvm_module =
      mlir::translateModuleToLLVMIR(module, llvm_context, "kernel");
  if (!llvm_module) return CompileError("translation to LLVM IR failed: " + diagnostics.Take());
  llvm_module->setDataLayout(host->createDataLayout());
  llvm_module->setTargetTriple(host->getTargetTriple());
  TM_RETURN_IF_ERROR(AddPackedEntry(*llvm_module, kKernelName));
  OptimizeModule(*llvm_module, *host, options.opt_level, target.slp_vectorize(options));
  SinkArgumentLoads(*llvm_module);
  SplitEntryIntoParts(*llvm_module);
  std::string llvm_ir;
  if (ConstantBytes(trace) <= kMaxConstantBytesForIrText) llvm_ir = Print(*llvm_module);
  clock.Done(CompilePhase::kLlvmOptimize);
  std::string object;
  TM_RETURN_IF_ERROR(EmitObject(*llvm_module, *host, &object));
  clock.Done(CompilePhase::kCodegen);
  program->object_code = std::move(object);
  if (!lowered.device_code.empty()) program->stage(Stage::kAssembly) = std::move(lowered.device_code);
  program->stage(Stage::kLlvmIr) = std::move(llvm_ir);
  *out = std::move(program);
  return Status::Ok();
}
}  // namespace tinymlir
