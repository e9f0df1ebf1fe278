#include "core/compiler/passes/unshare_tensors.h"

#include <algorithm>

#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
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

// Program order, numbered once: each clone invalidates its block's own order, and asking
// isBeforeInBlock again for the next shared tensor would cost the block's length each time.
using Positions = llvm::DenseMap<mlir::Operation *, size_t>;

// The users of `shared`'s one result, in program order, in groups of kUsersPerTensor: the
// first group keeps it, each next one gets a clone placed before its first user.
void UsersInBoundedGroups(mlir::Operation *shared, const Positions &position) {
  // Each use with the op of the shared op's block that holds it, which orders them.
  mlir::Block *block = shared->getBlock();
  llvm::SmallVector<std::pair<mlir::Operation *, mlir::OpOperand *>> uses;
  for (mlir::OpOperand &use : shared->getResult(0).getUses())
    uses.push_back({block->findAncestorOpInBlock(*use.getOwner()), &use});
  llvm::stable_sort(uses, [&](const auto &a, const auto &b) {
    return position.lookup(a.first) < position.lookup(b.first);
  });
  for (size_t first = kUsersPerTensor; first < uses.size(); first += kUsersPerTensor) {
    mlir::OpBuilder b(uses[first].first);
    mlir::Value clone = b.clone(*shared)->getResult(0);
    for (size_t i = first; i < std::min(uses.size(), first + kUsersPerTensor); ++i)
      uses[i].second->set(clone);
  }
}

// Whether `op` makes a tensor nothing may write: a function input (to_tensor without
// `writable`, of a block argument) or a tensor constant.
bool IsReadOnlyTensor(mlir::Operation *op) {
  if (auto input = mlir::dyn_cast<mlir::bufferization::ToTensorOp>(op))
    return !input.getWritable() && mlir::isa<mlir::BlockArgument>(input.getBuffer());
  auto constant = mlir::dyn_cast<mlir::arith::ConstantOp>(op);
  return constant && mlir::isa<mlir::TensorType>(constant.getType());
}

// Shared tensor.empty ops and read-only tensors with more than a group of users.
void SharedTensorsInBoundedGroups(mlir::Operation *root) {
  llvm::SmallVector<mlir::Operation *> shared;
  Positions position;
  root->walk<mlir::WalkOrder::PreOrder>([&](mlir::Operation *op) {
    position.try_emplace(op, position.size());
    if (op->getNumResults() != 1) return;
    if ((mlir::isa<mlir::tensor::EmptyOp>(op) && !op->getResult(0).hasOneUse()) ||
        (IsReadOnlyTensor(op) && op->getResult(0).hasNUsesOrMore(kUsersPerTensor + 1)))
      shared.push_back(op);
  });
  for (mlir::Operation *op : shared) UsersInBoundedGroups(op, position);
}

class UnshareTensorsPass : public mlir::PassWrapper<UnshareTensorsPass, mlir::OperationPass<>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(UnshareTensorsPass)

  llvm::StringRef getArgument() const override { return kUnshareTensorsPassName; }
  llvm::StringRef getDescription() const override {
    return "One tensor linalg.fill per user; a tensor.empty, input or constant per bounded "
           "group of users";
  }

  void runOnOperation() override {
    OneFillPerUse(getOperation());
    SharedTensorsInBoundedGroups(getOperation());
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateUnshareTensorsPass() {
  return std::make_unique<UnshareTensorsPass>();
}

}  // namespace tinymlir
