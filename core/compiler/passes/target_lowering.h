// What the compiler (core/compiler/native_compiler.cpp) asks of a target's compile side
// (core/targets/<name>/compile), found by kind (LoweringFor, target_lowerings.cpp).
// Between bufferization and the host code's translation to LLVM IR, everything that
// differs between targets is here; the rest of the compile is the same for all.
#pragma once

#include <cstdint>
#include <string>

#include "core/contract/compile_options.h"
#include "core/support/status.h"
#include "llvm/ADT/ArrayRef.h"

namespace mlir {
class DialectRegistry;
class ModuleOp;
}  // namespace mlir

namespace tinymlir {

// One of a target's rewrites as a pass of tinymlir-opt (tools/tinymlir-opt), for its
// FileCheck test: `argument` runs `rewrite` on the module, with `parameter` (its name in
// the pass's options, its default) when the rewrite takes one.
struct TargetRewrite {
  const char *argument;
  const char *description;
  Status (*rewrite)(mlir::ModuleOp module, int64_t parameter);
  // The dialects whose ops it makes (a pass's dependent dialects).
  void (*dialects)(mlir::DialectRegistry &registry);
  const char *parameter = nullptr;
  int64_t parameter_default = 0;
};

struct LoweredModule {
  // Bytes of temporary memory the code allocates at most during one call.
  uint64_t temporary_bytes = 0;
  // The device code as text, for the assembly stage (empty: the host's own assembly).
  std::string device_code;
};

struct TargetLowering {
  // The dialects, interface models and LLVM IR translations its lowering needs beyond the
  // compiler's own (core/compiler/passes/upstream.cpp), added to every compile's registry.
  void (*register_dialects)(mlir::DialectRegistry &registry);
  // Registers the upstream passes its pipelines name beyond the compiler's own (upstream.cpp).
  void (*register_passes)();
  // The device a program compiled with `options` runs on: a device of its run side
  // (Device::name()).
  const char *(*device)(const CompileOptions &options);
  // The pipeline that frees the buffers bufferization made (core/compiler/passes/pipelines.h).
  const char *frees_pipeline;
  // The bufferized module to the LLVM dialect: the host code ready for translation, the
  // device code (if any) embedded in it.
  Status (*lower)(mlir::ModuleOp module, const CompileOptions &options, LoweredModule *out);
  // Whether LLVM's SLP vectorizer runs on the host code.
  bool (*slp_vectorize)(const CompileOptions &options);
  llvm::ArrayRef<TargetRewrite> rewrites;
};

// The compile side of every target of core/contract/targets.def, by kind.
const TargetLowering &LoweringFor(TargetKind kind);

}  // namespace tinymlir
