// A linalg op computed at one point of its loops, inside a kernel that the GPU passes write
// by hand (the matmul kernel's epilogue, the row kernels): its operands' indices there, and
// its body with its inputs loaded.
#pragma once

#include <vector>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"

namespace tinymlir {

// `operand`'s indices at the point `loops` of `op`'s loops; its indexing map is made of loops
// and constants (the passes check that before).
inline std::vector<mlir::Value> IndicesAt(mlir::OpBuilder &b, mlir::Location loc,
                                          mlir::linalg::LinalgOp op, mlir::OpOperand &operand,
                                          const std::vector<mlir::Value> &loops) {
  std::vector<mlir::Value> indices;
  for (mlir::AffineExpr e : op.getMatchingIndexingMap(&operand).getResults()) {
    if (auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(e))
      indices.push_back(loops[dim.getPosition()]);
    else
      indices.push_back(mlir::arith::ConstantIndexOp::create(
          b, loc, mlir::cast<mlir::AffineConstantExpr>(e).getValue()));
  }
  return indices;
}

// `op`'s body at the point `loops`, cloned at `b`: the block arguments `values` already maps
// are taken as they are (a product's sum, a reduction's running partial), the others that
// the body reads loaded (a scalar operand, a fill's value, is itself), and the body's
// operations cloned (linalg.index is the loop's index). Returns `values` with the body's
// results mapped.
inline mlir::IRMapping BodyAt(mlir::OpBuilder &b, mlir::Location loc, mlir::linalg::LinalgOp op,
                              const std::vector<mlir::Value> &loops, mlir::IRMapping values) {
  mlir::Block *body = op.getBlock();
  for (mlir::OpOperand &operand : op->getOpOperands()) {
    const mlir::Value arg = op.getMatchingBlockArgument(&operand);
    if (values.contains(arg) || arg.use_empty()) continue;  // given, or an output not read
    if (!mlir::isa<mlir::MemRefType>(operand.get().getType()))
      values.map(arg, operand.get());
    else
      values.map(arg, mlir::memref::LoadOp::create(b, loc, operand.get(),
                                                   IndicesAt(b, loc, op, operand, loops)));
  }
  for (mlir::Operation &inner : body->without_terminator()) {
    if (auto index = mlir::dyn_cast<mlir::linalg::IndexOp>(inner))
      values.map(index.getResult(), loops[index.getDim()]);
    else
      b.clone(inner, values);
  }
  return values;
}

}  // namespace tinymlir
