#include "core/compiler/passes/outline_loop_nests.h"

#include <string>

#include "core/compiler/passes/loop_nest_inputs.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

namespace tinymlir {
namespace {

class OutlineLoopNestsPass
    : public mlir::PassWrapper<OutlineLoopNestsPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(OutlineLoopNestsPass)

  llvm::StringRef getArgument() const override { return kOutlineLoopNestsPassName; }
  llvm::StringRef getDescription() const override {
    return "Outline each top-level loop nest of a public function into a noinline function";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::arith::ArithDialect, mlir::func::FuncDialect, mlir::LLVM::LLVMDialect,
                    mlir::scf::SCFDialect>();
  }

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    llvm::SmallVector<mlir::Operation *> nests;
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (func.isExternal() || func.isPrivate()) continue;
      for (mlir::Block &block : func.getBody())
        for (mlir::Operation &op : block)
          if (mlir::isa<mlir::scf::ParallelOp, mlir::scf::ForOp>(op) && op.getNumResults() == 0)
            nests.push_back(&op);
    }
    int index = 0;
    for (mlir::Operation *nest : nests) Outline(module, nest, index++);
  }

 private:
  static void Outline(mlir::ModuleOp module, mlir::Operation *nest, int index) {
    const LoopNestInputs inputs = InputsOf(nest);
    const llvm::SmallVector<mlir::Value> &arguments = inputs.values;

    mlir::MLIRContext *ctx = module.getContext();
    mlir::Location loc = nest->getLoc();
    mlir::OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    llvm::SmallVector<mlir::Type> types;
    for (mlir::Value v : arguments) types.push_back(v.getType());
    auto fn = mlir::func::FuncOp::create(b, loc, kOutlinedLoopNestPrefix + std::to_string(index),
                                         mlir::FunctionType::get(ctx, types, {}));
    fn.setPrivate();
    // Carried to the LLVM function by convert-func-to-llvm: never inlined, and internal,
    // so that LLVM drops the arguments it does not read (most of each memref descriptor).
    fn->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
    fn->setAttr("llvm.linkage",
                mlir::LLVM::LinkageAttr::get(ctx, mlir::LLVM::linkage::Linkage::Internal));
    mlir::Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    mlir::IRMapping map;
    CloneConstants(b, inputs.constants, map);
    for (size_t i = 0; i < arguments.size(); ++i) map.map(arguments[i], entry->getArgument(i));
    b.clone(*nest, map);
    mlir::func::ReturnOp::create(b, loc);

    b.setInsertionPoint(nest);
    mlir::func::CallOp::create(b, loc, fn, arguments);
    nest->erase();
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateOutlineLoopNestsPass() {
  return std::make_unique<OutlineLoopNestsPass>();
}

}  // namespace tinymlir
