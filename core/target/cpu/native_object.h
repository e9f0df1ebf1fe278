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

// Adds `kPackedEntryName` to `module`, calling `kernel`'s C-interface wrapper
// (`_mlir_ciface_<kernel>`) with its arguments unpacked. `kernel` itself becomes internal:
// only the wrapper calls it, and LLVM may then drop the memref descriptor words it never
// reads, which otherwise travel as scalar arguments (five per output of a 1-D program).
Status AddPackedEntry(llvm::Module &module, const std::string &kernel);

// LLVM's default -O<opt_level> pipeline on `module`, as `target` tunes it; the SLP
// (straight-line) vectoriser only when `slp_vectorize`. CalledValuePropagation is skipped:
// it annotates indirect calls, which lowered programs do not make, at a cost that grows with
// the square of the number of functions.
void OptimizeModule(llvm::Module &module, llvm::TargetMachine &target, int opt_level,
                    bool slp_vectorize);

// Code generation: `module` (already optimised) as an ELF relocatable object.
Status EmitObject(llvm::Module &module, llvm::TargetMachine &target, std::string *object);

// The host assembly of an optimised LLVM IR module (its text), at codegen level opt_level.
Status AssemblyFromLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out);

}  // namespace tinymlir
