// The compiler process: libtinymlir.so compiles in a child process, `tinymlir-compiler`
// (compiler_process_main.cpp, beside libtinymlir.so), which loads the compiler library,
// LLVM and MLIR. The caller's process never maps them, so its memory is its weights and
// programs (LLVM and MLIR make about 80 MB of library pages resident, the compiler's heap
// another 45 MB while it works: +50% over an F16 GPT-2 124M's weights), and nothing the
// compiler does (an LLVM fatal error, a crash) can end it: a process that dies is a
// failed compile with its exit status and its last output in the message.
//
// One process serves one compile at a time; concurrent compiles start more. A process
// waits for the next request kCompilerIdleSeconds and then exits (a thread of this library
// reaps it then), so a long-running caller holds nothing of the compiler, not even a zombie,
// once it has stopped compiling; the next compile starts a new one (about 60 ms: most of it
// loading LLVM). What it prints goes to an anonymous file (memfd) of its own, never to the
// caller's stdout or stderr.
//
// TINYMLIR_COMPILE_IN_PROCESS=1 loads the compiler library into the calling process
// instead (compiler_library.h): for a debugger, or a sandbox that forbids starting
// processes.
#pragma once

#include <memory>
#include <string>

#include "core/engine/program.h"
#include "core/support/status.h"
#include "core/driver/compile.h"

namespace tinymlir {

inline constexpr int kCompilerIdleSeconds = 5;

// Whether TINYMLIR_COMPILE_IN_PROCESS=1 (read once).
bool CompileInThisProcess();

// The compiler process's executable: TINYMLIR_COMPILER_PROCESS_FILE in LibraryFolder().
const std::string &CompilerProcessPath();

// `trace` compiled for `options` by a compiler process: the program's data and object,
// not linked. Fails with the compiler's own status, or, when the process cannot start or
// dies, with a message naming the executable, how it ended and the end of its output.
Status CompileInCompilerProcess(const Trace &trace, const CompileOptions &options,
                                std::unique_ptr<Program> *program);

// The host assembly of a CPU program's LLVM IR, printed by a compiler process.
Status AssemblyInCompilerProcess(const std::string &llvm_ir, int opt_level, std::string *out);

}  // namespace tinymlir
