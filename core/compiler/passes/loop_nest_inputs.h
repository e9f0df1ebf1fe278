// What a loop nest uses from outside itself, for the passes that outline nests into
// functions (parallel_loops.h, outline_loop_nests.h): its bounds and steps and every value
// its body reads, split into constants, which the outlined copy clones (a bound passed in
// instead leaves LLVM with loops it cannot vectorise), and the rest, which it receives.
#pragma once

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

namespace tinymlir {

struct LoopNestInputs {
  llvm::SmallVector<mlir::Value> constants;  // results of arith.constant ops
  llvm::SmallVector<mlir::Value> values;     // everything else, in first-use order
};

inline LoopNestInputs InputsOf(mlir::Operation *nest) {
  llvm::SetVector<mlir::Value> used;
  for (mlir::Region &region : nest->getRegions()) mlir::getUsedValuesDefinedAbove(region, used);
  for (mlir::Value v : nest->getOperands()) used.insert(v);
  LoopNestInputs inputs;
  for (mlir::Value v : used) {
    // By op: the ConstantLike trait check returns false for arith.constant here (a trait's
    // type id is resolved per shared library, and ours does not match libMLIR's).
    const bool constant = mlir::isa_and_nonnull<mlir::arith::ConstantOp>(v.getDefiningOp());
    (constant ? inputs.constants : inputs.values).push_back(v);
  }
  return inputs;
}

// Clones `constants` at `b`'s insertion point, mapping each to its clone.
inline void CloneConstants(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Value> constants,
                           mlir::IRMapping &map) {
  for (mlir::Value v : constants) map.map(v, b.clone(*v.getDefiningOp())->getResult(0));
}

}  // namespace tinymlir
