#include "core/target/cpu/cpu_compiler.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "core/builder/build_module.h"
#include "core/engine/guarded_call.h"
#include "core/passes/blas_rewrite.h"
#include "core/passes/pipelines.h"
#include "core/support/diagnostics.h"
#include "core/target/cpu/gemv_kernels.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

// Strided memref copies lower to this function of MLIR's C runner utils.
extern "C" void memrefCopy(int64_t elemSize, void *src, void *dst);

namespace tinymlir {
namespace {

// Dialects, their bufferization/deallocation models and the LLVM IR translations, built
// once; each program's context copies it (measured: 0.9 ms per context with every dialect
// and extension registered, so a smaller registry would not pay for itself).
const mlir::DialectRegistry &Registry() {
  static const mlir::DialectRegistry *registry = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    auto *r = new mlir::DialectRegistry();
    mlir::registerAllDialects(*r);
    mlir::registerAllExtensions(*r);
    mlir::registerBuiltinDialectTranslation(*r);
    mlir::registerLLVMDialectTranslation(*r);
    return r;
  }();
  return *registry;
}

// External functions the generated code may call, by the addresses this library links
// against. The JIT must not depend on a process-global symbol search: a host that loads
// libtinymlir with RTLD_LOCAL (Python does) hides OpenBLAS and libm from such a search.
const std::unordered_map<std::string, void *> &RuntimeSymbols() {
  static const auto *symbols = new std::unordered_map<std::string, void *>{
      {"cblas_sgemm", reinterpret_cast<void *>(&cblas_sgemm)},
      {"cblas_dgemm", reinterpret_cast<void *>(&cblas_dgemm)},
      {"cblas_sgemv", reinterpret_cast<void *>(&cblas_sgemv)},
      {"cblas_dgemv", reinterpret_cast<void *>(&cblas_dgemv)},
      {"tm_rt_sgemv_row", reinterpret_cast<void *>(&tm_rt_sgemv_row)},
      {"tm_rt_sgemv_col", reinterpret_cast<void *>(&tm_rt_sgemv_col)},
      {"memrefCopy", reinterpret_cast<void *>(&memrefCopy)},
      // Temporaries go through the engine's guarded allocator (core/engine/guarded_call.h):
      // a failed allocation becomes TM_ERROR_OUT_OF_MEMORY instead of a write through NULL.
      {"malloc", reinterpret_cast<void *>(&tm_rt_malloc)},
      {"free", reinterpret_cast<void *>(&tm_rt_free)},
      {"aligned_alloc", reinterpret_cast<void *>(&tm_rt_aligned_alloc)},
      {"memcpy", reinterpret_cast<void *>(&::memcpy)},
      {"memmove", reinterpret_cast<void *>(&::memmove)},
      {"memset", reinterpret_cast<void *>(&::memset)},
#define TM_LIBM(name)                                                                   \
  {#name "f", reinterpret_cast<void *>(static_cast<float (*)(float)>(&::name##f))},    \
      {#name, reinterpret_cast<void *>(static_cast<double (*)(double)>(&::name))}
      TM_LIBM(exp), TM_LIBM(expm1), TM_LIBM(exp2), TM_LIBM(log), TM_LIBM(log1p),
      TM_LIBM(log2), TM_LIBM(log10), TM_LIBM(tanh), TM_LIBM(erf), TM_LIBM(sqrt),
      TM_LIBM(fabs), TM_LIBM(sin), TM_LIBM(cos), TM_LIBM(floor), TM_LIBM(ceil),
      TM_LIBM(round), TM_LIBM(trunc),
#undef TM_LIBM
      {"powf", reinterpret_cast<void *>(static_cast<float (*)(float, float)>(&::powf))},
      {"fmaf", reinterpret_cast<void *>(static_cast<float (*)(float, float, float)>(&::fmaf))},
      {"fma", reinterpret_cast<void *>(static_cast<double (*)(double, double, double)>(&::fma))},
      {"pow", reinterpret_cast<void *>(static_cast<double (*)(double, double)>(&::pow))},
      {"fmaxf", reinterpret_cast<void *>(static_cast<float (*)(float, float)>(&::fmaxf))},
      {"fminf", reinterpret_cast<void *>(static_cast<float (*)(float, float)>(&::fminf))},
      {"fmax", reinterpret_cast<void *>(static_cast<double (*)(double, double)>(&::fmax))},
      {"fmin", reinterpret_cast<void *>(static_cast<double (*)(double, double)>(&::fmin))},
  };
  return *symbols;
}

// Stage text for people to read: constants of more than 16 elements are elided, so that a
// program holding a large constant does not keep several printed copies of it.
std::string Print(mlir::ModuleOp module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module.print(os, mlir::OpPrintingFlags().elideLargeElementsAttrs(16));
  return s;
}

// The sum of the sizes of every buffer the module allocates (saturating). Run after
// bufferization, when every allocation is a memref.alloc/alloca of a static shape outside
// any loop; an upper bound on the peak, since the deallocation pipeline frees some early.
uint64_t TemporaryBytes(mlir::ModuleOp module) {
  uint64_t total = 0;
  module.walk([&](mlir::Operation *op) {
    if (!mlir::isa<mlir::memref::AllocOp, mlir::memref::AllocaOp>(op)) return;
    auto type = mlir::cast<mlir::MemRefType>(op->getResult(0).getType());
    if (!type.hasStaticShape()) {
      total = UINT64_MAX;
      return;
    }
    const uint64_t elem = (type.getElementTypeBitWidth() + 7) / 8;
    const uint64_t n = static_cast<uint64_t>(type.getNumElements());
    const uint64_t bytes = n != 0 && elem > UINT64_MAX / n ? UINT64_MAX : n * elem;
    total = bytes > UINT64_MAX - total ? UINT64_MAX : total + bytes;
  });
  return total;
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

// Every external function the lowered module declares must be one we can resolve; a
// missing one is a compile error here, not a JIT error printed to stderr later.
Status CheckExternals(mlir::ModuleOp module) {
  std::string missing;
  module.walk([&](mlir::LLVM::LLVMFuncOp f) {
    if (!f.isExternal()) return;
    std::string name = f.getName().str();
    if (RuntimeSymbols().count(name) || dlsym(RTLD_DEFAULT, name.c_str())) return;
    missing += (missing.empty() ? "" : ", ") + name;
  });
  if (!missing.empty())
    return CompileError("the generated code calls functions this library cannot provide: " +
                        missing);
  return Status::Ok();
}

std::unique_ptr<llvm::TargetMachine> HostTargetMachine(int opt_level, std::string *error) {
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    *error = llvm::toString(builder.takeError());
    return nullptr;
  }
  static const llvm::CodeGenOptLevel levels[] = {
      llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less,
      llvm::CodeGenOptLevel::Default, llvm::CodeGenOptLevel::Aggressive};
  builder->setCodeGenOptLevel(levels[opt_level]);
  auto tm = builder->createTargetMachine();
  if (!tm) {
    *error = llvm::toString(tm.takeError());
    return nullptr;
  }
  return std::move(*tm);
}

class CpuCode : public CompiledCode {
 public:
  // Declaration order is destruction order reversed: the engine goes first, then the
  // module, then the context they live in.
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::string llvm_ir;  // optimised, as compiled by the JIT
  int opt_level = 3;

  Status Assembly(std::string *out) const override {
    if (llvm_ir.empty())
      return Unsupported("the program holds more than " +
                         std::to_string(kMaxConstantBytesForIrText) +
                         " bytes of constants; its LLVM IR and assembly are not kept");
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
};

}  // namespace

Status CompileForCpu(const Trace &trace, const CompileOptions &options,
                     std::unique_ptr<Program> *out) {
  auto program = std::make_unique<Program>();
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

  auto code = std::make_unique<CpuCode>();
  code->opt_level = options.opt_level;
  code->context = std::make_unique<mlir::MLIRContext>(Registry(),
                                                      mlir::MLIRContext::Threading::DISABLED);
  mlir::MLIRContext &ctx = *code->context;
  DiagnosticCollector diagnostics(&ctx);

  TM_RETURN_IF_ERROR(BuildModule(trace, live, ctx, &code->module));
  mlir::ModuleOp module = *code->module;
  TM_RETURN_IF_ERROR(VerifyModule(module, "traced"));
  program->stage(Stage::kTraced) = Print(module);

  if (options.optimize) TM_RETURN_IF_ERROR(RunPipeline(module, "optimize", kOptimizePipeline));
  program->stage(Stage::kOptimized) = Print(module);

  TM_RETURN_IF_ERROR(RunPipeline(module, "bufferize", kBufferizePipeline));
  program->stage(Stage::kBufferized) = Print(module);
  program->temporary_bytes = TemporaryBytes(module);

  if (options.use_blas) RewriteMatmulsToBlas(module);
  TM_RETURN_IF_ERROR(VerifyModule(module, "blas rewrite"));
  TM_RETURN_IF_ERROR(RunPipeline(module, "lower to LLVM", kLowerToLLVMPipeline));
  program->stage(Stage::kLowered) = Print(module);
  TM_RETURN_IF_ERROR(CheckExternals(module));

  std::string error;
  std::unique_ptr<llvm::TargetMachine> target = HostTargetMachine(options.opt_level, &error);
  if (!target) return CompileError("no host target machine: " + error);
  auto optimize = mlir::makeOptimizingTransformer(static_cast<unsigned>(options.opt_level),
                                                  /*sizeLevel=*/0, target.get());
  std::string *llvm_ir = &code->llvm_ir;
  const bool keep_ir = ConstantBytes(trace) <= kMaxConstantBytesForIrText;
  std::function<llvm::Error(llvm::Module *)> transformer = [&](llvm::Module *m) {
    llvm::Error e = optimize(m);
    if (!e && keep_ir) *llvm_ir = Print(*m);
    return e;
  };
  mlir::ExecutionEngineOptions engine_options;
  engine_options.transformer = transformer;
  engine_options.jitCodeGenOptLevel = target->getOptLevel();
  engine_options.enableGDBNotificationListener = false;
  engine_options.enablePerfNotificationListener = false;
  auto engine = mlir::ExecutionEngine::create(module, engine_options, std::move(target));
  if (!engine)
    return CompileError("JIT compilation failed: " + llvm::toString(engine.takeError()) +
                        " " + diagnostics.Take());
  code->engine = std::move(*engine);
  code->engine->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    for (const auto &[name, address] : RuntimeSymbols())
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                             llvm::JITSymbolFlags::Exported};
    return map;
  });
  auto entry = code->engine->lookupPacked(std::string("_mlir_ciface_") + kKernelName);
  if (!entry)
    return CompileError("JIT lookup of the kernel failed: " +
                        llvm::toString(entry.takeError()));
  program->entry = *entry;
  program->stage(Stage::kLlvmIr) = code->llvm_ir;
  program->code = std::move(code);
  *out = std::move(program);
  return Status::Ok();
}

}  // namespace tinymlir
