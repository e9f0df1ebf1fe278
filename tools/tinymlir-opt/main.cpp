// tinymlir-opt: mlir-opt with tinymlir's passes and every target's rewrites, by name, so
// that each can be run on a .mlir file and checked with FileCheck (tests/passes). The
// rewrites are functions the compile pipelines call directly (a target's TargetLowering
// lists its own, core/compiler/passes/target_lowering.h); here each is wrapped in a pass of
// the same effect. Only this tool registers anything of tinymlir's in MLIR's global
// registry, and only this tool registers every upstream pass and dialect: the compiler
// library, loaded into a caller's process, does neither.
#include <memory>
#include <string>

#include "core/compiler/passes/pipelines.h"
#include "core/compiler/passes/target_lowering.h"
#include "core/compiler/passes/target_lowering.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace tinymlir {
namespace {

// One target rewrite as a pass: its argument and description, and its parameter (if any)
// as the pass's one option.
class RewritePass : public mlir::PassWrapper<RewritePass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RewritePass)
  explicit RewritePass(const TargetRewrite &rewrite) : rewrite_(rewrite) {
    if (rewrite.parameter)
      parameter_ = std::make_unique<Option<int64_t>>(*this, rewrite.parameter,
                                                     llvm::cl::desc("the rewrite's parameter"),
                                                     llvm::cl::init(rewrite.parameter_default));
  }
  RewritePass(const RewritePass &other) : RewritePass(other.rewrite_) {}

  llvm::StringRef getArgument() const override { return rewrite_.argument; }
  llvm::StringRef getDescription() const override { return rewrite_.description; }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    rewrite_.dialects(registry);
  }
  void runOnOperation() override {
    const int64_t parameter = parameter_ ? int64_t(*parameter_) : rewrite_.parameter_default;
    const Status status = rewrite_.rewrite(getOperation(), parameter);
    if (status.ok()) return;
    getOperation().emitError(status.message());
    signalPassFailure();
  }

 private:
  const TargetRewrite &rewrite_;
  std::unique_ptr<Option<int64_t>> parameter_;
};

}  // namespace
}  // namespace tinymlir

int main(int argc, char **argv) {
  using namespace tinymlir;
  mlir::registerAllPasses();
  for (const OwnPass &pass : OwnPasses()) mlir::registerPass(pass.create);
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  for (int kind = 0; kind < kNumTargetKinds; ++kind) {
    const TargetLowering &lowering = LoweringFor(static_cast<TargetKind>(kind));
    lowering.register_dialects(registry);
    for (const TargetRewrite &rewrite : lowering.rewrites)
      mlir::registerPass([&rewrite] { return std::make_unique<RewritePass>(rewrite); });
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tinymlir-opt: MLIR's passes and tinymlir's\n", registry));
}
