// Native code as a relocatable object: emitted once from the optimised LLVM module; the
// engine's ELF linker (core/engine/elf_object.h) links it, whether it was just compiled or
// read from the disk cache or a program file, so every path runs the same bytes.
//
// This file knows LLVM (code generation) but not MLIR. Part of the compiler library.
#pragma once

#include <memory>
#include <string>

#include "core/engine/program.h"
#include "core/support/status.h"

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace tinymlir {

// A target machine for this host (its CPU and features), at LLVM codegen level 0..3.
std::unique_ptr<llvm::TargetMachine> HostTargetMachine(int opt_level, std::string *error);

// Adds `kPackedEntryName` to `module`, calling `function` with its arguments unpacked.
Status AddPackedEntry(llvm::Module &module, const std::string &function);

// LLVM's default -O<opt_level> pipeline on `module`, as `target` tunes it; the SLP
// (straight-line) vectoriser only when `slp_vectorize`.
void OptimizeModule(llvm::Module &module, llvm::TargetMachine &target, int opt_level,
                    bool slp_vectorize);

// Code generation: `module` (already optimised) as an ELF relocatable object.
Status EmitObject(llvm::Module &module, llvm::TargetMachine &target, std::string *object);

// The host assembly of an optimised LLVM IR module (its text), at codegen level opt_level.
Status AssemblyFromLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out);

}  // namespace tinymlir
