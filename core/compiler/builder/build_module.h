// Trace -> MLIR: one `func.func @kernel` on tensors, in destination-passing style.
//
//   func.func @kernel(%in0: memref<...>, ..., %out0: memref<...>, ...)
//       attributes {llvm.emit_c_interface}
//
// Inputs become tensors through `bufferization.to_tensor ... restrict` (the runtime keeps
// that promise by copying aliased inputs); each result is written into the caller's output
// memref with `bufferization.materialize_in_destination`. Matmuls stay linalg.matmul /
// linalg.batch_matmul so the CPU target can recognise them after fusion; elementwise work
// is linalg.generic (scalars inlined as constants in the body); reductions linalg.reduce.
#pragma once

#include "core/trace/trace.h"
#include "core/support/status.h"

namespace mlir {
class MLIRContext;
class ModuleOp;
template <typename OpTy>
class OwningOpRef;
}  // namespace mlir

namespace tinymlir {

// The name of the function the builder emits and the engine calls.
inline constexpr const char *kKernelName = "kernel";

// The unit attribute on the linalg.generic of a cast from q8_0 (the dequantizing copy, from
// (..., k / 32, 34) i8 blocks to floats): the CPU target's BLAS rewrite hands a product
// that reads it the q8_0 bytes in place instead (passes/blas_rewrite.cpp).
inline constexpr const char *kDequantizeQ8Attr = "tinymlir.dequantize_q8_0";

// Builds the module for an ended trace, emitting the values marked in `live` (Trace::Live,
// which the caller has computed anyway). Every user error was caught when the trace was
// recorded, so a failure here is an internal error reported as StatusCode::kCompile.
Status BuildModule(const Trace &trace, const std::vector<bool> &live, mlir::MLIRContext &context,
                   mlir::OwningOpRef<mlir::ModuleOp> *module);

}  // namespace tinymlir
