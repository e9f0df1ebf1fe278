// Every target: build -> optimize -> bufferize -> the target's step and lowering to the LLVM
// dialect (its TargetLowering, core/compiler/passes/target_lowering.h) -> LLVM optimisation
// -> object code (codegen/native_object.h). A target with device code embeds it in the host
// object, and its text is the assembly stage. Every stage's text and the object are kept in
// the CompiledProgram, unlinked: the engine links it (core/driver/compile.h).
// Part of the compiler library.
#pragma once

#include <memory>

#include "core/contract/compile_options.h"
#include "core/contract/compiled_program.h"
#include "core/contract/compiler_interface.h"

namespace tinymlir {

Status CompileNative(const Trace &trace, const CompileOptions &options, CanLinkSymbol can_link,
                     std::unique_ptr<CompiledProgram> *program);

}  // namespace tinymlir
