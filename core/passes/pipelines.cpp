#include "core/passes/pipelines.h"

#include <mutex>

#include "core/passes/approximate_math.h"
#include "core/passes/fuse_elementwise.h"
#include "core/support/diagnostics.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

namespace tinymlir {
namespace {
void RegisterPassesOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerAllPasses();
    RegisterFuseElementwisePass();
    RegisterApproximateMathPass();
  });
}
}  // namespace

Status RunPipeline(mlir::ModuleOp module, const char *stage, const std::string &pipeline) {
  RegisterPassesOnce();
  DiagnosticCollector diagnostics(module.getContext());
  // A PassManager anchored on builtin.module, with the passes added to it directly:
  // parsing "builtin.module(...)" into it would nest the pipeline and silently run nothing.
  mlir::PassManager pm(module.getContext());
  std::string parse_errors;
  llvm::raw_string_ostream os(parse_errors);
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, os)))
    return CompileError(std::string(stage) + ": invalid pass pipeline '" + pipeline +
                        "': " + parse_errors);
  if (mlir::failed(pm.run(module)))
    return CompileError(std::string(stage) + " pipeline failed: " + diagnostics.Take());
  return Status::Ok();
}

Status VerifyModule(mlir::ModuleOp module, const char *stage) {
  DiagnosticCollector diagnostics(module.getContext());
  if (mlir::failed(mlir::verify(module)))
    return CompileError(std::string(stage) + ": module does not verify: " + diagnostics.Take());
  return Status::Ok();
}

}  // namespace tinymlir
