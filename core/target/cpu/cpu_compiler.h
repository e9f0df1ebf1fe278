// The CPU target: build -> optimize -> bufferize -> BLAS rewrite -> lower to LLVM ->
// LLVM optimisation -> object code (native_object.h), linked into this process. Every
// stage's text and the object are kept in the Program.
#pragma once

#include <memory>

#include "core/engine/program.h"
#include "core/target/compile.h"

namespace tinymlir {

Status CompileForCpu(const Trace &trace, const CompileOptions &options,
                     std::unique_ptr<Program> *program);

}  // namespace tinymlir
