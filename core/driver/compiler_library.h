// The compiler library, libtinymlir_compiler.so: the half of tinymlir that links LLVM and
// MLIR (core/compiler: builder, passes, lowering and code generation). libtinymlir.so
// does not link it: its compiler process (compiler_process.h) loads it, from the folder
// libtinymlir.so itself was loaded from, when a compile is asked that neither the memory
// cache nor the disk cache can answer; with TINYMLIR_COMPILE_IN_PROCESS=1, libtinymlir.so
// loads it itself. A process whose programs all come from the disk cache or from program
// files never starts the compiler.
//
// The compiler returns programs unlinked (signature, stage texts, relocatable object); the
// engine links them with its own ELF linker (core/engine/program_loader.h), as it links
// program files and disk cache entries, so every program runs through one linker and one
// symbol table.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/contract/compiler_interface.h"
#include "core/support/status.h"

namespace tinymlir {

// The GNU build ID of the compiler library this build linked, as hex: written by the build
// (cmake/compiler_build_id.cmake) once the compiler library is linked. Part of the disk
// cache's key, so a hit needs no compiler, and any change to the compiler is a new key.
extern const char kCompilerBuildId[];

// The folder of the library (or executable) this code is linked into, with a final '/':
// where the compiler library and the compiler process are looked for.
const std::string &LibraryFolder();
// The compiler library's path: TINYMLIR_COMPILER_FILE in LibraryFolder().
const std::string &CompilerLibraryPath();

// Loads the compiler library at `path` and checks it comes from this build. Fails with
// TM_ERROR_UNSUPPORTED naming the file and what was wrong. The compiler process
// (compiler_process.h) loads it this way.
Status LoadCompilerLibrary(const std::string &path, const CompilerEntryPoints **out);

// Loads CompilerLibraryPath() into this process, once (it is never unloaded: LLVM's
// libraries cannot be): for TINYMLIR_COMPILE_IN_PROCESS=1.
Status LoadCompiler(const CompilerEntryPoints **out);

// The host assembly of a CPU program's optimised LLVM IR (its kLlvmIr stage), at codegen
// level opt_level: printed on request by the compiler, in its process or, with
// TINYMLIR_COMPILE_IN_PROCESS=1, in this one (core/driver/compile.cpp).
Status AssemblyOfLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out);

}  // namespace tinymlir
