// The compiler library, libtinymlir_compiler.so: the half of tinymlir that links LLVM and
// MLIR (core/builder, core/passes, the code generation of core/target). libtinymlir.so
// does not link it: it loads it on the first compile that neither the memory cache nor the
// disk cache can answer, from the folder libtinymlir.so itself was loaded from. A process
// whose programs all come from the disk cache or from program files never maps LLVM (about
// 80 MB of resident library pages, and the load time).
//
// The compiler returns programs unlinked (signature, stage texts, relocatable object); the
// engine links them with its own ELF linker (core/engine/program_loader.h), as it links
// program files and disk cache entries, so every program runs through one linker and one
// symbol table.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/engine/program.h"
#include "core/support/status.h"
#include "core/target/compile.h"

namespace tinymlir {

// Whether the engine's linker resolves a call from generated code to `symbol` (the CPU's
// runtime table, or the GPU's when `gpu`). The compiler refuses code that calls anything
// else, so a compiled program always links, here and from a program file.
using CanLinkSymbol = bool (*)(const char *symbol, bool gpu);

// What the compiler library hands out. The two libraries exchange C++ objects, so they must
// come from one build: the compiler's own GNU build ID must equal the one recorded in
// libtinymlir.so when it was linked (kCompilerBuildId); `abi`, `version` and the sizes of the
// exchanged types name what differs when it does not.
struct CompilerEntryPoints {
  int abi;
  const char *version;
  const char *build_id;  // the compiler library's, as hex
  size_t trace_size, program_size, options_size, status_size;
  // The trace compiled for options.target: the program's signature, stage texts,
  // temporary bytes, compile phase times and relocatable object. Not linked.
  Status (*compile)(const Trace &trace, const CompileOptions &options, CanLinkSymbol can_link,
                    std::unique_ptr<Program> *program);
  // The host assembly of an optimised LLVM IR module (its text), at codegen level opt_level.
  Status (*assembly)(const std::string &llvm_ir, int opt_level, std::string *out);
};

inline constexpr int kCompilerAbi = 1;

// The GNU build ID of the compiler library this build linked, as hex: written by the build
// (cmake/compiler_build_id.cmake) once the compiler library is linked. Part of the disk
// cache's key, so a hit needs no compiler, and any change to the compiler is a new key.
extern const char kCompilerBuildId[];
// The one symbol the compiler library exports: const CompilerEntryPoints *(void).
inline constexpr const char *kCompilerEntryName = "tm_compiler_entry_points";

// The compiler library's path: TINYMLIR_COMPILER_FILE in the folder of the library (or
// executable) this code is linked into.
const std::string &CompilerLibraryPath();

// Loads the compiler library and checks it comes from this build; once per process (it is
// never unloaded: LLVM's libraries cannot be). Fails with TM_ERROR_UNSUPPORTED naming the
// file and what was wrong.
Status LoadCompiler(const CompilerEntryPoints **out);

// The host assembly of a CPU program's optimised LLVM IR (its kLlvmIr stage), at codegen
// level opt_level: printed on request by the compiler library, loaded if need be.
Status AssemblyOfLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out);

}  // namespace tinymlir
