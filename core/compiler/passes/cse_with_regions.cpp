#include "core/compiler/passes/cse_with_regions.h"

#include <cstdint>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/CSE.h"

namespace tinymlir {
namespace {

// A hash of the operations in `op`'s regions, in order: their names, attributes, result
// types and the values they capture from outside `op` (canonicalisation hoists a body's
// constants out of it): a constant by its value, so that bodies capturing equal constants
// that this CSE run merges still meet; another value by identity. Values defined inside
// are left out: the equivalence CSE checks afterwards compares those.
uint64_t RegionHash(mlir::Operation *op) {
  llvm::hash_code hash = llvm::hash_value(op->getNumRegions());
  auto captured = [op](mlir::Value value) -> llvm::hash_code {
    mlir::Operation *owner = value.getParentRegion()->getParentOp();
    if (owner == op || op->isProperAncestor(owner)) return llvm::hash_code(0);
    mlir::Attribute constant;
    if (mlir::matchPattern(value, mlir::m_Constant(&constant))) return mlir::hash_value(constant);
    return mlir::hash_value(value);
  };
  for (mlir::Region &region : op->getRegions())
    region.walk([&](mlir::Operation *inner) {
      hash =
          llvm::hash_combine(hash, mlir::OperationEquivalence::computeHash(
                                       inner, captured, mlir::OperationEquivalence::ignoreHashValue,
                                       mlir::OperationEquivalence::IgnoreLocations));
    });
  return static_cast<uint64_t>(static_cast<size_t>(hash));
}

class CseWithRegionsPass
    : public mlir::PassWrapper<CseWithRegionsPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CseWithRegionsPass)

  llvm::StringRef getArgument() const override { return kCseWithRegionsPassName; }
  llvm::StringRef getDescription() const override {
    return "Common subexpression elimination with each operation's regions in its hash";
  }

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::MLIRContext *ctx = &getContext();
    const auto name = mlir::StringAttr::get(ctx, kRegionHashAttrName);
    const auto i64 = mlir::IntegerType::get(ctx, 64);
    // Functions and modules are not candidates; what they hold is.
    module.walk([&](mlir::Operation *op) {
      if (op->getNumRegions() == 0 || mlir::isa<mlir::ModuleOp, mlir::FunctionOpInterface>(op))
        return;
      op->setAttr(name, mlir::IntegerAttr::get(i64, static_cast<int64_t>(RegionHash(op))));
    });
    mlir::IRRewriter rewriter(ctx);
    mlir::DominanceInfo dominance;
    mlir::eliminateCommonSubExpressions(rewriter, dominance, module);
    module.walk([&](mlir::Operation *op) { op->removeAttr(name); });
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateCseWithRegionsPass() {
  return std::make_unique<CseWithRegionsPass>();
}

}  // namespace tinymlir
