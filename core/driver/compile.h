// Compilation entry point: a trace and options in, a linked Program out, for any target.
// No LLVM here: the options are checked, the compiler compiles (in its own process,
// compiler_process.h, or with TINYMLIR_COMPILE_IN_PROCESS=1 in this one,
// compiler_library.h) and the engine's ELF linker links.
#pragma once

#include <memory>
#include <string>

#include "core/contract/compile_options.h"
#include "core/engine/program.h"
#include "core/trace/trace.h"

namespace tinymlir {

// Compiles `trace` (which must have ended) for options.target and links it. Fails with a
// message naming what was wrong: an unknown target or opt level, a compiler that cannot be
// started or loaded, a compiler process that died, or MLIR/LLVM's diagnostics.
Status Compile(const Trace &trace, const CompileOptions &options,
               std::unique_ptr<Program> *program);

// Links a program read back from the disk cache (its data and object filled in) for
// options.target, setting its entry and code; `name` is its trace's.
Status LinkCompiled(const CompileOptions &options, const std::string &name, Program *program);

}  // namespace tinymlir
