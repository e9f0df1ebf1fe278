// The CPU target: build -> optimize -> bufferize -> BLAS rewrite -> lower to LLVM -> JIT,
// in-process with MLIR's ExecutionEngine. Every stage's text is kept in the Program.
#pragma once

#include <memory>

#include "core/engine/program.h"
#include "core/target/compile.h"

namespace tinymlir {

Status CompileForCpu(const Trace &trace, const CompileOptions &options,
                     std::unique_ptr<Program> *program);

}  // namespace tinymlir
