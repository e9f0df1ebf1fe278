#include "core/compiler/passes/pipelines.h"

#include <mutex>
#include <vector>

#include "core/compiler/passes/approximate_math.h"
#include "core/compiler/passes/argument_block.h"
#include "core/compiler/passes/copies_to_linalg.h"
#include "core/compiler/passes/cse_with_regions.h"
#include "core/compiler/passes/free_buffers.h"
#include "core/compiler/passes/fuse_elementwise.h"
#include "core/compiler/passes/merge_identical_functions.h"
#include "core/compiler/passes/outline_loop_nests.h"
#include "core/compiler/passes/parallel_loops.h"
#include "core/compiler/passes/unshare_tensors.h"
#include "core/compiler/passes/upstream.h"
#include "core/compiler/passes/diagnostics.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace tinymlir {
namespace {

constexpr OwnPass kOwnPasses[] = {
    {kFuseElementwisePassName, CreateFuseElementwisePass},
    {kApproximateMathPassName, CreateApproximateMathPass},
    {kCopiesToLinalgPassName, CreateCopiesToLinalgPass},
    {kFreeBuffersPassName, CreateFreeBuffersPass},
    {kParallelizeLoopsPassName, CreateParallelizeLoopsPass},
    {kUnshareTensorsPassName, CreateUnshareTensorsPass},
    {kOutlineLoopNestsPassName, CreateOutlineLoopNestsPass},
    {kMergeIdenticalFunctionsPassName, CreateMergeIdenticalFunctionsPass},
    {kArgumentBlockPassName, CreateArgumentBlockPass},
    {kCseWithRegionsPassName, CreateCseWithRegionsPass},
};

// The pipeline's top-level elements: split at commas outside (...) and {...}.
std::vector<llvm::StringRef> TopLevelElements(llvm::StringRef pipeline) {
  std::vector<llvm::StringRef> elements;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= pipeline.size(); ++i) {
    char c = i < pipeline.size() ? pipeline[i] : ',';
    if (c == '(' || c == '{') ++depth;
    if (c == ')' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      llvm::StringRef element = pipeline.slice(start, i).trim();
      if (!element.empty()) elements.push_back(element);
      start = i + 1;
    }
  }
  return elements;
}

}  // namespace

llvm::ArrayRef<OwnPass> OwnPasses() { return kOwnPasses; }

Status RunPipeline(mlir::ModuleOp module, const char *stage, const std::string &pipeline) {
  RegisterUpstreamPassesOnce();
  DiagnosticCollector diagnostics(module.getContext());
  // A PassManager anchored on builtin.module, with the passes added to it directly:
  // parsing "builtin.module(...)" into it would nest the pipeline and silently run nothing.
  mlir::PassManager pm(module.getContext());
  std::string parse_errors;
  llvm::raw_string_ostream os(parse_errors);
  for (llvm::StringRef element : TopLevelElements(pipeline)) {
    const OwnPass *own = nullptr;
    for (const OwnPass &candidate : kOwnPasses)
      if (element == candidate.name) own = &candidate;
    if (own) {
      pm.addPass(own->create());
    } else if (mlir::failed(mlir::parsePassPipeline(element, pm, os))) {
      return CompileError(std::string(stage) + ": invalid pass pipeline '" + pipeline +
                          "': " + parse_errors);
    }
  }
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
