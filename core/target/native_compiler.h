// Both targets: build -> optimize -> bufferize -> the target step -> lower to LLVM -> LLVM
// optimisation -> object code (cpu/native_object.h), linked into this process. The target
// step is the BLAS rewrite on the CPU and core/target/gpu/gpu_lowering.h on the GPU, whose
// host object embeds the device code (PTX or cubin) and is linked by the engine's own ELF
// linker (it has constructors, which load the device modules). Every stage's text and the
// object are kept in the Program; the GPU's assembly stage is its PTX.
#pragma once

#include <memory>

#include "core/engine/program.h"
#include "core/target/compile.h"

namespace tinymlir {

Status CompileNative(const Trace &trace, const CompileOptions &options,
                     std::unique_ptr<Program> *program);

}  // namespace tinymlir
