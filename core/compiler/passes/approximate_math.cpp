#include "core/compiler/passes/approximate_math.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tinymlir {
namespace {

class ApproximateMathPass
    : public mlir::PassWrapper<ApproximateMathPass, mlir::OperationPass<>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApproximateMathPass)

  llvm::StringRef getArgument() const override { return kApproximateMathPassName; }
  llvm::StringRef getDescription() const override {
    return "Polynomial approximations of f32 tanh, exp and erf";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::arith::ArithDialect, mlir::math::MathDialect,
                    mlir::vector::VectorDialect>();
  }

  void runOnOperation() override {
    mlir::RewritePatternSet patterns(&getContext());
    mlir::populateMathPolynomialApproximationPatterns(patterns, [](llvm::StringRef op) {
      return op == "math.tanh" || op == "math.exp" || op == "math.erf";
    });
    if (mlir::failed(mlir::applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateApproximateMathPass() {
  return std::make_unique<ApproximateMathPass>();
}

}  // namespace tinymlir
