#include "core/passes/unshare_destinations.h"

#include <algorithm>

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

namespace tinymlir {
namespace {

// Each user of a shared tensor fill after the first gets a clone of it (and of its empty).
void OneFillPerUse(mlir::Operation *root) {
  llvm::SmallVector<mlir::linalg::FillOp> fills;
  root->walk([&](mlir::linalg::FillOp fill) {
    if (fill.hasPureTensorSemantics() && !fill->getResult(0).hasOneUse()) fills.push_back(fill);
  });
  for (mlir::linalg::FillOp fill : fills) {
    llvm::SmallVector<mlir::OpOperand *> uses;
    for (mlir::OpOperand &use : fill->getResult(0).getUses()) uses.push_back(&use);
    // The first user (in the use list's order, any) keeps the original.
    for (size_t i = 1; i < uses.size(); ++i) {
      mlir::OpBuilder b(uses[i]->getOwner());
      mlir::IRMapping map;
      mlir::Value init = fill.getOutputs()[0];
      if (auto empty = init.getDefiningOp<mlir::tensor::EmptyOp>())
        map.map(init, b.clone(*empty)->getResult(0));
      uses[i]->set(b.clone(*fill, map)->getResult(0));
    }
  }
}

// The users of a shared tensor.empty, in program order, in groups of kUsersPerEmpty: the
// first group keeps it, each next one gets a clone placed before its first user.
void EmptiesInBoundedGroups(mlir::Operation *root) {
  llvm::SmallVector<mlir::tensor::EmptyOp> empties;
  root->walk([&](mlir::tensor::EmptyOp empty) {
    if (!empty->getResult(0).hasOneUse()) empties.push_back(empty);
  });
  for (mlir::tensor::EmptyOp empty : empties) {
    // Each use with the op of the empty's block that holds it, which orders them.
    mlir::Block *block = empty->getBlock();
    llvm::SmallVector<std::pair<mlir::Operation *, mlir::OpOperand *>> uses;
    for (mlir::OpOperand &use : empty->getResult(0).getUses())
      uses.push_back({block->findAncestorOpInBlock(*use.getOwner()), &use});
    llvm::stable_sort(uses, [](const auto &a, const auto &b) {
      return a.first != b.first && a.first->isBeforeInBlock(b.first);
    });
    for (size_t first = kUsersPerEmpty; first < uses.size(); first += kUsersPerEmpty) {
      mlir::OpBuilder b(uses[first].first);
      mlir::Value clone = b.clone(*empty)->getResult(0);
      for (size_t i = first; i < std::min(uses.size(), first + kUsersPerEmpty); ++i)
        uses[i].second->set(clone);
    }
  }
}

class UnshareDestinationsPass
    : public mlir::PassWrapper<UnshareDestinationsPass, mlir::OperationPass<>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(UnshareDestinationsPass)

  llvm::StringRef getArgument() const override { return kUnshareDestinationsPassName; }
  llvm::StringRef getDescription() const override {
    return "One tensor linalg.fill per user; a tensor.empty per bounded group of users";
  }

  void runOnOperation() override {
    OneFillPerUse(getOperation());
    EmptiesInBoundedGroups(getOperation());
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateUnshareDestinationsPass() {
  return std::make_unique<UnshareDestinationsPass>();
}

}  // namespace tinymlir
