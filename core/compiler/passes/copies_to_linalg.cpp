#include "core/compiler/passes/copies_to_linalg.h"

#include <vector>

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tinymlir {
namespace {

class CopiesToLinalgPass
    : public mlir::PassWrapper<CopiesToLinalgPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CopiesToLinalgPass)

  llvm::StringRef getArgument() const override { return kCopiesToLinalgPassName; }
  llvm::StringRef getDescription() const override {
    return "Every memref.copy becomes a linalg.copy (a loop nest)";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::linalg::LinalgDialect>();
  }
  void runOnOperation() override { CopiesToLinalg(getOperation()); }
};

}  // namespace

void CopiesToLinalg(mlir::ModuleOp module) {
  std::vector<mlir::memref::CopyOp> copies;
  module.walk([&](mlir::memref::CopyOp op) { copies.push_back(op); });
  for (mlir::memref::CopyOp op : copies) {
    mlir::OpBuilder b(op);
    mlir::linalg::CopyOp::create(b, op.getLoc(), op.getSource(), op.getTarget());
    op.erase();
  }
}

std::unique_ptr<mlir::Pass> CreateCopiesToLinalgPass() {
  return std::make_unique<CopiesToLinalgPass>();
}

}  // namespace tinymlir
