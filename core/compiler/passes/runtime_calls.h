// Calls from generated code to runtime functions declared once, in a run side's list
// (core/targets/cpu/run/kernels.def, core/targets/gpu/run/emulation_functions.def): each
// entry is TM_RUNTIME_FUNCTION(name, (C parameters)). The run side declares the functions
// and resolves them by name; a compile side makes a table of the same list here, so the
// func.func it declares for a call has the MLIR types of those C parameters (int32_t i32,
// int64_t i64, any pointer !llvm.ptr), and a call built with other operands fails the
// verifier instead of reaching a kernel with its arguments misread.
//
//   #define TM_RUNTIME_FUNCTION(name, parameters) TM_RUNTIME_FUNCTION_ENTRY(name, parameters)
//   constexpr RuntimeFunction kKernels[] = {
//   #include "core/targets/cpu/run/kernels.def"
//   };
#pragma once

#include <cstdint>
#include <type_traits>

#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace tinymlir {

template <typename T>
mlir::Type MlirTypeOf(mlir::MLIRContext *ctx) {
  if constexpr (std::is_pointer_v<T>) {
    return mlir::LLVM::LLVMPointerType::get(ctx);
  } else {
    static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>,
                  "a runtime function's parameters are int32_t, int64_t or pointers");
    return mlir::IntegerType::get(ctx, 8 * sizeof(T));
  }
}

template <typename F>
struct RuntimeSignature;
template <typename... A>
struct RuntimeSignature<void(A...)> {
  static llvm::SmallVector<mlir::Type> Types(mlir::MLIRContext *ctx) {
    return {MlirTypeOf<A>(ctx)...};
  }
};

struct RuntimeFunction {
  const char *name;
  llvm::SmallVector<mlir::Type> (*types)(mlir::MLIRContext *);
};

#define TM_RUNTIME_FUNCTION_ENTRY(name, parameters) \
  ::tinymlir::RuntimeFunction{#name, &::tinymlir::RuntimeSignature<void parameters>::Types},

// Declares `fn` in `module` (once: a later call returns the same func.func), private, with
// its parameters' types and no result.
inline mlir::func::FuncOp DeclareRuntimeFunction(mlir::ModuleOp module,
                                                 const RuntimeFunction &fn) {
  if (auto f = module.lookupSymbol<mlir::func::FuncOp>(fn.name)) return f;
  mlir::OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  auto f = mlir::func::FuncOp::create(
      b, module.getLoc(), fn.name,
      b.getFunctionType(fn.types(module.getContext()), mlir::TypeRange{}));
  f.setPrivate();
  return f;
}

}  // namespace tinymlir
