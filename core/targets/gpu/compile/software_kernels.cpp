#include "core/targets/gpu/compile/software_kernels.h"

#include "core/support/fnv.h"
#include "core/targets/gpu/compile/gpu_emulation.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace tinymlir {
namespace {

// The emulation's buffers (per-thread values, workgroup memory) on the stack: a body runs
// inside the software device's driver, where an allocation through the GPU runtime (managed
// memory, from the driver) is not allowed. They are made once per body call, before its
// block loops.
void BuffersOnTheStack(mlir::func::FuncOp function) {
  std::vector<mlir::Operation *> frees;
  std::vector<mlir::memref::AllocOp> allocations;
  function.walk([&](mlir::memref::DeallocOp op) { frees.push_back(op); });
  function.walk([&](mlir::memref::AllocOp op) { allocations.push_back(op); });
  for (mlir::Operation *op : frees) op->erase();
  for (mlir::memref::AllocOp alloc : allocations) {
    mlir::OpBuilder b(alloc);
    auto stack = mlir::memref::AllocaOp::create(b, alloc.getLoc(), alloc.getType(),
                                                alloc.getDynamicSizes(), alloc.getSymbolOperands(),
                                                alloc.getAlignmentAttr());
    alloc.getResult().replaceAllUsesWith(stack.getResult());
    alloc.erase();
  }
}

// How many bytes the driver copies for a parameter of the lowered type `t` (0: none we pass).
uint32_t ParameterBytes(mlir::Type t) {
  if (mlir::isa<mlir::LLVM::LLVMPointerType>(t)) return 8;
  if (auto i = mlir::dyn_cast<mlir::IntegerType>(t)) return (i.getWidth() + 7) / 8;
  if (auto f = mlir::dyn_cast<mlir::FloatType>(t)) return f.getWidth() / 8;
  return 0;
}

// The PTX (or cubin) of the gpu.binary named `name`, as the driver is handed it: PTX up to its
// terminating NUL.
llvm::StringRef ImageOf(mlir::ModuleOp module, llvm::StringRef name) {
  auto binary = module.lookupSymbol<mlir::gpu::BinaryOp>(name);
  if (!binary || binary.getObjects().size() != 1) return {};
  auto object = mlir::dyn_cast<mlir::gpu::ObjectAttr>(binary.getObjects()[0]);
  if (!object) return {};
  llvm::StringRef bytes = object.getObject().getValue();
  if (object.getFormat() == mlir::gpu::CompilationTarget::Assembly)
    bytes = bytes.take_until([](char c) { return c == '\0'; });
  return bytes;
}

// `body`'s entry with the software device's KernelBody signature:
//   i32 (ptr params, ptr grid, ptr block, i32 shared_bytes)
// loading parameter i from *params[i], and the grid and block sizes (three i32 each) as the
// body's last six (index) arguments.
mlir::LLVM::LLVMFuncOp AddEntry(mlir::ModuleOp module, mlir::LLVM::LLVMFuncOp body,
                                std::string *param_bytes, Status *status) {
  mlir::MLIRContext *ctx = module.getContext();
  mlir::OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  const mlir::Location loc = body.getLoc();
  const auto ptr = mlir::LLVM::LLVMPointerType::get(ctx);
  const auto i32 = b.getI32Type(), i64 = b.getI64Type();
  auto entry = mlir::LLVM::LLVMFuncOp::create(
      b, loc, body.getName().str() + "_entry",
      mlir::LLVM::LLVMFunctionType::get(i32, {ptr, ptr, ptr, i32}));
  mlir::Block *block = entry.addEntryBlock(b);
  b.setInsertionPointToStart(block);
  llvm::ArrayRef<mlir::Type> types = body.getFunctionType().getParams();
  const size_t n = types.size() - 6;
  std::vector<mlir::Value> args;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bytes = ParameterBytes(types[i]);
    if (bytes == 0 || bytes > 8) {
      std::string type;
      llvm::raw_string_ostream os(type);
      types[i].print(os);
      *status = CompileError("a GPU kernel's CPU body cannot take a parameter of type " + type);
      return entry;
    }
    param_bytes->push_back(static_cast<char>(bytes));
    auto slot = mlir::LLVM::GEPOp::create(b, loc, ptr, ptr, block->getArgument(0),
                                          llvm::ArrayRef<mlir::LLVM::GEPArg>{static_cast<int32_t>(i)});
    auto address = mlir::LLVM::LoadOp::create(b, loc, ptr, slot);
    args.push_back(mlir::LLVM::LoadOp::create(b, loc, types[i], address));
  }
  for (unsigned which : {1u, 2u})
    for (int32_t d = 0; d < 3; ++d) {
      auto at = mlir::LLVM::GEPOp::create(b, loc, ptr, i32, block->getArgument(which),
                                          llvm::ArrayRef<mlir::LLVM::GEPArg>{d});
      auto size = mlir::LLVM::LoadOp::create(b, loc, i32, at);
      args.push_back(mlir::LLVM::ZExtOp::create(b, loc, i64, size));
    }
  mlir::LLVM::CallOp::create(b, loc, body, args);
  auto zero = mlir::LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(0));
  mlir::LLVM::ReturnOp::create(b, loc, mlir::ValueRange{zero});
  return entry;
}

}  // namespace

Status AddCpuKernelBodies(mlir::ModuleOp module, std::vector<CpuKernelBody> *bodies) {
  bodies->clear();
  std::vector<mlir::gpu::GPUFuncOp> kernels;
  module.walk([&](mlir::gpu::GPUFuncOp f) {
    if (f.isKernel()) kernels.push_back(f);
  });
  mlir::OpBuilder b(module.getContext());
  for (mlir::gpu::GPUFuncOp f : kernels) {
    auto gpu_module = f->getParentOfType<mlir::gpu::GPUModuleOp>();
    const std::string what = "the CPU body of GPU kernel '" + f.getName().str() + "'";
    if (!f.getBody().hasOneBlock()) return CompileError(what + ": its body has several blocks");
    if (f.getNumPrivateAttributions() != 0)
      return CompileError(what + ": private memory is not emulated");
    // What the kernel calls (convert-math-to-funcs' functions), copied to the host once.
    b.setInsertionPointToEnd(module.getBody());
    for (mlir::func::FuncOp callee : gpu_module.getOps<mlir::func::FuncOp>())
      if (!module.lookupSymbol(callee.getSymName())) b.clone(*callee);

    const mlir::Location loc = f.getLoc();
    std::vector<mlir::Type> types(f.getArgumentTypes().begin(), f.getArgumentTypes().end());
    types.insert(types.end(), 6, b.getIndexType());
    const std::string name = "__tm_cpu_" + gpu_module.getName().str() + "_" + f.getName().str();
    auto host = mlir::func::FuncOp::create(b, loc, name, b.getFunctionType(types, {}));
    mlir::Block *entry = host.addEntryBlock();
    b.setInsertionPointToStart(entry);
    const unsigned n = f.getNumArguments();
    std::vector<mlir::Type> workgroup;
    for (mlir::BlockArgument a : f.getWorkgroupAttributions()) workgroup.push_back(a.getType());
    auto launch = mlir::gpu::LaunchOp::create(
        b, loc, entry->getArgument(n), entry->getArgument(n + 1), entry->getArgument(n + 2),
        entry->getArgument(n + 3), entry->getArgument(n + 4), entry->getArgument(n + 5),
        /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr, {}, workgroup);
    mlir::func::ReturnOp::create(b, loc);
    mlir::IRMapping map;
    for (unsigned i = 0; i < n; ++i) map.map(f.getArgument(i), entry->getArgument(i));
    for (unsigned i = 0; i < workgroup.size(); ++i)
      map.map(f.getWorkgroupAttributions()[i], launch.getWorkgroupAttributions()[i]);
    b.setInsertionPointToEnd(&launch.getBody().front());
    for (mlir::Operation &op : f.getBody().front()) {
      if (mlir::isa<mlir::gpu::ReturnOp>(op)) {
        mlir::gpu::TerminatorOp::create(b, op.getLoc());
        continue;
      }
      b.clone(op, map);
    }
    bodies->push_back({gpu_module.getName().str(), f.getName().str(), name});
  }
  if (bodies->empty()) return Status::Ok();
  // Outlining left no other gpu.launch: these are the emulation's to turn into host loops.
  TM_RETURN_IF_ERROR(EmulateGpuLaunches(module, /*check_races=*/false));
  for (const CpuKernelBody &body : *bodies)
    BuffersOnTheStack(module.lookupSymbol<mlir::func::FuncOp>(body.function));
  return Status::Ok();
}

Status AddCpuKernelRegistration(mlir::ModuleOp module, const std::vector<CpuKernelBody> &bodies) {
  if (bodies.empty()) return Status::Ok();
  mlir::MLIRContext *ctx = module.getContext();
  mlir::OpBuilder b(ctx);
  const mlir::Location loc = module.getLoc();
  const auto ptr = mlir::LLVM::LLVMPointerType::get(ctx);
  const auto i64 = b.getI64Type();
  const auto void_type = mlir::LLVM::LLVMVoidType::get(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto register_kernel = mlir::LLVM::LLVMFuncOp::create(
      b, loc, "tm_rt_gpu_software_register_kernel",
      mlir::LLVM::LLVMFunctionType::get(void_type, {i64, i64, ptr, ptr, ptr, i64}));
  auto withdraw_kernel = mlir::LLVM::LLVMFuncOp::create(
      b, loc, "tm_rt_gpu_software_withdraw_kernel",
      mlir::LLVM::LLVMFunctionType::get(void_type, {i64, i64, ptr, ptr}));
  auto registration = mlir::LLVM::LLVMFuncOp::create(b, loc, "__tm_cpu_register",
                                                     mlir::LLVM::LLVMFunctionType::get(void_type, {}));
  auto withdrawal = mlir::LLVM::LLVMFuncOp::create(b, loc, "__tm_cpu_withdraw",
                                                   mlir::LLVM::LLVMFunctionType::get(void_type, {}));
  mlir::OpBuilder in_register = mlir::OpBuilder::atBlockEnd(registration.addEntryBlock(b));
  mlir::OpBuilder in_withdraw = mlir::OpBuilder::atBlockEnd(withdrawal.addEntryBlock(b));
  const auto constant = [&](mlir::OpBuilder &at, uint64_t v) -> mlir::Value {
    return mlir::LLVM::ConstantOp::create(at, loc, i64, at.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  int index = 0;
  for (const CpuKernelBody &body : bodies) {
    const llvm::StringRef image = ImageOf(module, body.gpu_module);
    if (image.empty())
      return CompileError("the CPU body of GPU kernel '" + body.kernel + "': its module '" +
                          body.gpu_module + "' has no single image");
    auto lowered = module.lookupSymbol<mlir::LLVM::LLVMFuncOp>(body.function);
    if (!lowered) return CompileError("the lowered module has no function '" + body.function + "'");
    Status status;
    std::string param_bytes;
    mlir::LLVM::LLVMFuncOp entry = AddEntry(module, lowered, &param_bytes, &status);
    TM_RETURN_IF_ERROR(status);
    const uint64_t hash = Fnv1a64(image.data(), image.size());
    const std::string suffix = std::to_string(index++);
    for (bool registering : {true, false}) {
      mlir::OpBuilder &at = registering ? in_register : in_withdraw;
      const std::string prefix = registering ? "__tm_cpu_register_" : "__tm_cpu_withdraw_";
      const mlir::Value name = mlir::LLVM::createGlobalString(
          loc, at, prefix + "name_" + suffix, body.kernel + std::string(1, '\0'),
          mlir::LLVM::Linkage::Internal);
      const mlir::Value function = mlir::LLVM::AddressOfOp::create(at, loc, entry);
      if (registering) {
        const mlir::Value sizes = mlir::LLVM::createGlobalString(
            loc, at, prefix + "params_" + suffix, param_bytes, mlir::LLVM::Linkage::Internal);
        mlir::LLVM::CallOp::create(at, loc, register_kernel,
                                   mlir::ValueRange{constant(at, hash), constant(at, image.size()),
                                                    name, function, sizes,
                                                    constant(at, param_bytes.size())});
      } else {
        mlir::LLVM::CallOp::create(
            at, loc, withdraw_kernel,
            mlir::ValueRange{constant(at, hash), constant(at, image.size()), name, function});
      }
    }
  }
  mlir::LLVM::ReturnOp::create(in_register, loc, mlir::ValueRange{});
  mlir::LLVM::ReturnOp::create(in_withdraw, loc, mlir::ValueRange{});
  // Before the modules' own constructor (priority 123, the GPU dialect's translation) loads
  // them, and after their destructor.
  b.setInsertionPointToEnd(module.getBody());
  mlir::LLVM::GlobalCtorsOp::create(b, loc, b.getArrayAttr({mlir::FlatSymbolRefAttr::get(registration)}),
                                    b.getI32ArrayAttr({100}),
                                    b.getArrayAttr({mlir::LLVM::ZeroAttr::get(ctx)}));
  mlir::LLVM::GlobalDtorsOp::create(b, loc, b.getArrayAttr({mlir::FlatSymbolRefAttr::get(withdrawal)}),
                                    b.getI32ArrayAttr({100}),
                                    b.getArrayAttr({mlir::LLVM::ZeroAttr::get(ctx)}));
  return Status::Ok();
}

}  // namespace tinymlir
