#include "core/compiler/codegen/native_object.h"

#include <algorithm>
#include <vector>

#include "core/support/host_cpu.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/Cloning.h"

namespace tinymlir {
namespace {

void InitializeNativeTargetOnce() {
  static const bool done = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    return true;
  }();
  (void)done;
}

std::string ErrorText(llvm::Error error) { return llvm::toString(std::move(error)); }

// Inlines `call` (to `name`, which nothing else calls).
Status InlineOnlyCall(llvm::CallInst &call, const std::string &name) {
  llvm::InlineFunctionInfo info;
  llvm::InlineResult inlined = llvm::InlineFunction(call, info);
  if (!inlined.isSuccess())
    return CompileError("cannot inline '" + name +
                        "' into the entry: " + inlined.getFailureReason());
  return Status::Ok();
}

// Whether `load` reads the engine's memory: the entry's array of argument pointers, what
// they point at (the C interface's pointer to each memref descriptor), or a descriptor.
// The engine builds all three for the call, and nothing in a program writes them.
bool ReadsTheArguments(const llvm::LoadInst &load, const llvm::Argument &args) {
  const llvm::Value *base = llvm::getUnderlyingObject(load.getPointerOperand());
  for (int level = 0; level < 2 && base != &args; ++level) {
    const auto *pointer = llvm::dyn_cast<llvm::LoadInst>(base);
    if (!pointer) return false;
    base = llvm::getUnderlyingObject(pointer->getPointerOperand());
  }
  return base == &args;
}

}  // namespace

Status AssemblyFromLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out) {
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm_ir, "kernel", false);
  std::unique_ptr<llvm::Module> m = llvm::parseIR(*buffer, diag, ctx);
  if (!m) return CompileError("assembly: cannot re-read LLVM IR: " + diag.getMessage().str());
  std::string error;
  auto tm = HostTargetMachine(opt_level, &error);
  if (!tm) return CompileError("assembly: no host target: " + error);
  m->setDataLayout(tm->createDataLayout());
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream os(text);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    return CompileError("assembly: the host target cannot emit assembly");
  pm.run(*m);
  *out = text.str().str();
  return Status::Ok();
}

std::unique_ptr<llvm::TargetMachine> HostTargetMachine(int opt_level, std::string *error) {
  InitializeNativeTargetOnce();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    *error = ErrorText(builder.takeError());
    return nullptr;
  }
  static const llvm::CodeGenOptLevel levels[] = {
      llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less,
      llvm::CodeGenOptLevel::Default, llvm::CodeGenOptLevel::Aggressive};
  builder->setCodeGenOptLevel(levels[opt_level < 0 ? 0 : opt_level > 3 ? 3 : opt_level]);
  // Extensions TINYMLIR_CPU_EXCLUDE takes away; LLVM's "-name" also drops those that need
  // them, as CpuHas does.
  for (const std::string &feature : CpuExcludedFeatures())
    builder->getFeatures().AddFeature(feature, /*Enable=*/false);
  // Position-independent: an exported object is linked at any address by elf_object.h
  // (calls through stubs, external data through GOT slots). On x86-64 this costs nothing.
  builder->setRelocationModel(llvm::Reloc::PIC_);
  auto tm = builder->createTargetMachine();
  if (!tm) {
    *error = ErrorText(tm.takeError());
    return nullptr;
  }
  return std::move(*tm);
}

void OptimizeModule(llvm::Module &module, llvm::TargetMachine &target, int opt_level,
                    bool slp_vectorize) {
  static const llvm::OptimizationLevel levels[] = {
      llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1, llvm::OptimizationLevel::O2,
      llvm::OptimizationLevel::O3};
  const llvm::OptimizationLevel level = levels[opt_level < 0 ? 0 : opt_level > 3 ? 3 : opt_level];
  // What MLIR's makeOptimizingTransformer sets, SLP aside.
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = slp_vectorize;
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PassInstrumentationCallbacks instrumentation;
  instrumentation.registerShouldRunOptionalPassCallback(
      [](llvm::StringRef pass, llvm::Any) { return pass != "CalledValuePropagationPass"; });
  llvm::PassBuilder builder(&target, tuning, std::nullopt, &instrumentation);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  llvm::ModulePassManager passes = level == llvm::OptimizationLevel::O0
                                       ? builder.buildO0DefaultPipeline(level)
                                       : builder.buildPerModuleDefaultPipeline(level);
  passes.run(module, modules);
}

Status AddPackedEntry(llvm::Module &module, const std::string &kernel) {
  const std::string wrapper = "_mlir_ciface_" + kernel;
  llvm::Function *callee = module.getFunction(wrapper);
  if (!callee || callee->isDeclaration())
    return CompileError("the lowered module has no function '" + wrapper + "'");
  llvm::Function *body = module.getFunction(kernel);
  if (!body || body->isDeclaration())
    return CompileError("the lowered module has no function '" + kernel + "'");
  llvm::LLVMContext &ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto *type = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy()}, /*isVarArg=*/false);
  auto *entry = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                       kPackedEntryName, module);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", entry));
  llvm::Value *args = entry->getArg(0);
  // args[i] points at argument i; a non-void result is stored through args[n].
  auto slot = [&](unsigned i) {
    llvm::Value *address = b.CreateConstGEP1_64(b.getPtrTy(), args, i);
    return b.CreateLoad(b.getPtrTy(), address);
  };
  std::vector<llvm::Value *> values;
  for (llvm::Argument &arg : callee->args())
    values.push_back(b.CreateLoad(arg.getType(), slot(arg.getArgNo())));
  llvm::CallInst *call = b.CreateCall(callee, values);
  if (!call->getType()->isVoidTy()) b.CreateStore(call, slot(callee->arg_size()));
  b.CreateRetVoid();
  // The wrapper, then the kernel, inlined here before LLVM's pipeline sees them (see the
  // header: their argument lists grow with the number of buffers).
  TM_RETURN_IF_ERROR(InlineOnlyCall(*call, wrapper));
  callee->eraseFromParent();
  auto *inner = body->hasOneUse() ? llvm::dyn_cast<llvm::CallInst>(body->user_back()) : nullptr;
  if (!inner || inner->getCalledFunction() != body)
    return CompileError("'" + wrapper + "' does not call '" + kernel + "' once, directly");
  TM_RETURN_IF_ERROR(InlineOnlyCall(*inner, kernel));
  body->eraseFromParent();
  return Status::Ok();
}

void SinkArgumentLoads(llvm::Module &module) {
  llvm::Function *entry = module.getFunction(kPackedEntryName);
  if (!entry || entry->isDeclaration() || entry->arg_size() != 1) return;
  const llvm::Argument &args = *entry->getArg(0);
  for (llvm::BasicBlock &block : *entry) {
    // What may move: those loads and the address arithmetic feeding them, each before the
    // first instruction that stays put and uses it (directly or through others that move).
    std::vector<llvm::Instruction *> order;
    llvm::DenseMap<llvm::Instruction *, size_t> index;
    for (llvm::Instruction &inst : block) {
      index[&inst] = order.size();
      order.push_back(&inst);
    }
    auto movable = [&](llvm::Instruction *inst) {
      if (auto *load = llvm::dyn_cast<llvm::LoadInst>(inst))
        return load->isSimple() && ReadsTheArguments(*load, args);
      return llvm::isa<llvm::GetElementPtrInst>(inst);
    };
    std::vector<size_t> anchor(order.size());
    for (size_t i = order.size(); i-- > 0;) {
      anchor[i] = i;
      if (!movable(order[i])) continue;
      size_t first = order.size();
      for (llvm::User *user : order[i]->users()) {
        auto *inst = llvm::dyn_cast<llvm::Instruction>(user);
        auto found = inst ? index.find(inst) : index.end();
        if (found == index.end() || llvm::isa<llvm::PHINode>(inst)) {
          first = i;  // used in another block, or by a phi: stays
          break;
        }
        first = std::min(first, anchor[found->second]);
      }
      if (first < order.size()) anchor[i] = first;
    }
    for (size_t i = 0; i < order.size(); ++i)
      if (anchor[i] != i) order[i]->moveBefore(order[anchor[i]]->getIterator());
  }
}

Status EmitObject(llvm::Module &module, llvm::TargetMachine &target, std::string *object) {
  llvm::orc::SimpleCompiler compiler(target);
  auto buffer = compiler(module);
  if (!buffer) return CompileError("code generation failed: " + ErrorText(buffer.takeError()));
  *object = (*buffer)->getBuffer().str();
  return Status::Ok();
}

}  // namespace tinymlir
