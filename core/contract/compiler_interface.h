// What the compiler library (core/compiler, libtinymlir_compiler.so) hands the compile
// driver (core/driver) that loads it: one table of entry points. Both sides link this
// contract, whose types (Trace, CompiledProgram, CompileOptions, Status) they exchange, so
// the table lives here and neither side includes the other.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/contract/compile_options.h"
#include "core/contract/compiled_program.h"
#include "core/support/status.h"
#include "core/trace/trace.h"

namespace tinymlir {

// Whether the engine's linker resolves a call from generated code to `symbol` for a program
// that runs on the device named `device` (Device::name()). The compiler refuses code that
// calls anything else, so a compiled program always links, here and from a program file.
using CanLinkSymbol = bool (*)(const char *symbol, const char *device);

// What the compiler library hands out. The two libraries exchange C++ objects, so they must
// come from one build: the compiler's own GNU build ID must equal the one recorded in
// libtinymlir.so when it was linked (kCompilerBuildId, core/driver/compiler_library.h);
// `abi`, `version` and the sizes of the exchanged types name what differs when it does not.
struct CompilerEntryPoints {
  int abi;
  const char *version;
  const char *build_id;  // the compiler library's, as hex
  size_t trace_size, program_size, options_size, status_size;
  // The trace compiled for options.target (options completed by the driver): the program's
  // signature, stage texts, temporary bytes, compile phase times and relocatable object.
  Status (*compile)(const Trace &trace, const CompileOptions &options, CanLinkSymbol can_link,
                    std::unique_ptr<CompiledProgram> *program);
  // The host assembly of an optimised LLVM IR module (its text), at codegen level opt_level.
  Status (*assembly)(const std::string &llvm_ir, int opt_level, std::string *out);
};

inline constexpr int kCompilerAbi = 3;

// The one symbol the compiler library exports: const CompilerEntryPoints *(void).
inline constexpr const char *kCompilerEntryName = "tm_compiler_entry_points";

}  // namespace tinymlir
