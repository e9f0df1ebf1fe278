// Both targets: build -> optimize -> bufferize -> the target step -> lower to LLVM -> LLVM
// optimisation -> object code (cpu/native_object.h). The target step is the BLAS rewrite on
// the CPU and core/compiler/gpu/gpu_lowering.h on the GPU, whose host object embeds the device
// code (PTX or cubin). Every stage's text and the object are kept in the Program, unlinked:
// the engine links it (core/driver/compile.h). The GPU's assembly stage is its PTX.
// Part of the compiler library.
#pragma once

#include <memory>

#include "core/engine/program.h"
#include "core/engine/compile_options.h"
#include "core/engine/compiler_interface.h"

namespace tinymlir {

Status CompileNative(const Trace &trace, const CompileOptions &options, CanLinkSymbol can_link,
                     std::unique_ptr<Program> *program);

}  // namespace tinymlir
