#include "core/compiler/passes/fuse_elementwise.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tinymlir {
namespace {

bool HasReductionLoops(mlir::Operation *op) {
  auto linalg_op = mlir::dyn_cast_or_null<mlir::linalg::LinalgOp>(op);
  return linalg_op && linalg_op.getNumReductionLoops() > 0;
}

// Upstream's control: fuse a producer only into its single user.
bool SingleUseProducer(mlir::OpOperand *fused) {
  mlir::Operation *producer = fused->get().getDefiningOp();
  return producer && producer->hasOneUse();
}

// Ops in the body of a linalg op's region (0 for anything else).
size_t BodyOps(mlir::Operation *op) {
  if (!op || op->getNumRegions() == 0 || op->getRegion(0).empty()) return 0;
  return op->getRegion(0).front().getOperations().size();
}

// Elementwise fusion: a single-use producer, unless the fused body would pass
// kMaxFusedBodyOps. Each fusion clones both bodies, so fusing a chain of n ops into one
// costs n^2 / 2 clones (a 20,000-op chain took minutes); bounded, it is linear in n, and a
// body that long already does enough work per element that one more pass over memory
// between two of them costs little.
bool FuseIntoBoundedBody(mlir::OpOperand *fused) {
  if (!SingleUseProducer(fused)) return false;
  return BodyOps(fused->get().getDefiningOp()) + BodyOps(fused->getOwner()) <= kMaxFusedBodyOps;
}

// For reshape folding, `fused` is either the linalg op's operand whose producer is a
// reshape, or the reshape's operand whose producer is the linalg op: refuse both when the
// linalg op is a contraction or reduction.
bool KeepContractionsNamed(mlir::OpOperand *fused) {
  if (!SingleUseProducer(fused)) return false;
  return !HasReductionLoops(fused->getOwner()) && !HasReductionLoops(fused->get().getDefiningOp());
}

class FuseElementwisePass
    : public mlir::PassWrapper<FuseElementwisePass, mlir::OperationPass<>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FuseElementwisePass)

  llvm::StringRef getArgument() const override { return kFuseElementwisePassName; }
  llvm::StringRef getDescription() const override {
    return "Fuse elementwise linalg ops; never fold reshapes into contractions";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::affine::AffineDialect, mlir::arith::ArithDialect,
                    mlir::linalg::LinalgDialect, mlir::tensor::TensorDialect>();
  }

  void runOnOperation() override {
    mlir::MLIRContext *context = &getContext();
    mlir::RewritePatternSet patterns(context);
    // The same pattern set as upstream's pass, with our control for reshape folding.
    mlir::linalg::populateElementwiseOpsFusionPatterns(patterns, FuseIntoBoundedBody);
    mlir::linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, KeepContractionsNamed);
    mlir::tensor::populateBubbleUpExpandShapePatterns(patterns);
    mlir::affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    mlir::linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    mlir::tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    mlir::tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    context->getLoadedDialect<mlir::linalg::LinalgDialect>()->getCanonicalizationPatterns(
        patterns);
    mlir::linalg::populateConstantFoldLinalgOperations(patterns, SingleUseProducer);
    if (mlir::failed(mlir::applyPatternsGreedily(
            getOperation(), std::move(patterns),
            mlir::GreedyRewriteConfig().setUseTopDownTraversal())))
      signalPassFailure();
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateFuseElementwisePass() {
  return std::make_unique<FuseElementwisePass>();
}

}  // namespace tinymlir
