// The parts of upstream MLIR the compiler uses, named one by one: the dialects and their
// interface models (bufferization, deallocation, conversion to LLVM), the LLVM IR
// translations, and the passes its pipelines name (pipelines.h). Each target's compile side
// adds its own through TargetLowering::register_dialects and register_passes.
#pragma once

namespace mlir {
class DialectRegistry;
}  // namespace mlir

namespace tinymlir {

// Built once; every compile's context copies it.
const mlir::DialectRegistry &CompilerDialects();

// Registers the upstream passes the pipelines name in MLIR's registry (which lives in
// libMLIR and outlives the compiler library: hence -z nodelete). Idempotent.
void RegisterUpstreamPassesOnce();

}  // namespace tinymlir
