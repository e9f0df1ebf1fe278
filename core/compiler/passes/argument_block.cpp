#include "core/compiler/passes/argument_block.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tinymlir {
namespace {

class ArgumentBlockPass
    : public mlir::PassWrapper<ArgumentBlockPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ArgumentBlockPass)

  llvm::StringRef getArgument() const override { return kArgumentBlockPassName; }
  llvm::StringRef getDescription() const override {
    return "Give each function with arguments an entry block that only branches to its body";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::LLVM::LLVMDialect>();
  }

  void runOnOperation() override {
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal() || func.getNumArguments() == 0) continue;
      mlir::Block &entry = func.front();
      // A block of one op (its terminator) has nothing to renumber.
      if (entry.empty() || &entry.front() == &entry.back()) continue;
      mlir::Block *body = entry.splitBlock(&entry.front());
      mlir::OpBuilder b = mlir::OpBuilder::atBlockEnd(&entry);
      mlir::LLVM::BrOp::create(b, func.getLoc(), mlir::ValueRange{}, body);
    }
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateArgumentBlockPass() {
  return std::make_unique<ArgumentBlockPass>();
}

}  // namespace tinymlir
