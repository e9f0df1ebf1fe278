#include "core/passes/one_fill_per_use.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

namespace tinymlir {
namespace {

class OneFillPerUsePass : public mlir::PassWrapper<OneFillPerUsePass, mlir::OperationPass<>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(OneFillPerUsePass)

  llvm::StringRef getArgument() const override { return kOneFillPerUsePassName; }
  llvm::StringRef getDescription() const override {
    return "Clones a tensor linalg.fill (and its tensor.empty) for each user after the first";
  }

  void runOnOperation() override {
    llvm::SmallVector<mlir::linalg::FillOp> fills;
    getOperation()->walk([&](mlir::linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() && !fill->getResult(0).hasOneUse()) fills.push_back(fill);
    });
    for (mlir::linalg::FillOp fill : fills) {
      llvm::SmallVector<mlir::OpOperand *> uses;
      for (mlir::OpOperand &use : fill->getResult(0).getUses()) uses.push_back(&use);
      // The first user (in the walk's order, any) keeps the original.
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
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateOneFillPerUsePass() {
  return std::make_unique<OneFillPerUsePass>();
}

}  // namespace tinymlir
