// Native code as a relocatable object: emitted once from the optimised LLVM module; the
// engine's ELF linker (core/engine/elf_object.h) links it, whether it was just compiled or
// read from the disk cache or a program file, so every path runs the same bytes.
//
// This file knows LLVM (code generation) but not MLIR. Part of the compiler library.
#pragma once

#include <memory>
#include <string>

#include "core/contract/compiled_program.h"
#include "core/support/status.h"

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace tinymlir {

// A target machine for this host (its CPU and features), at LLVM codegen level 0..3.
std::unique_ptr<llvm::TargetMachine> HostTargetMachine(int opt_level, std::string *error);

// Adds `kPackedEntryName` to `module`: one argument, an array with a pointer to each of
// the program's arguments (memref descriptors). It holds the code of `kernel`'s C-interface
// wrapper (`_mlir_ciface_<kernel>`) and of `kernel` itself, both inlined into it and then
// removed, so that no function's argument list grows with the number of buffers: `kernel`
// takes each descriptor as five to seven scalars, and LLVM does per-argument work on a
// function at a cost that grows with its argument count (attribute inference copies the
// whole attribute list for each argument it marks; a call's operands are one selection
// DAG). 800 parameters updated by 4 elementwise ops each took 38 s and 2.0 GB to compile
// through `kernel`, 10 s and 0.3 GB inlined.
Status AddPackedEntry(llvm::Module &module, const std::string &kernel);

// LLVM's default -O<opt_level> pipeline on `module`, as `target` tunes it; the SLP
// (straight-line) vectoriser only when `slp_vectorize`. CalledValuePropagation is skipped:
// it annotates indirect calls, which lowered programs do not make, at a cost that grows with
// the square of the number of functions.
void OptimizeModule(llvm::Module &module, llvm::TargetMachine &target, int opt_level,
                    bool slp_vectorize);

// Moves each load the packed entry makes of its arguments (the array of pointers, the
// memref descriptors) down to just before its first use. The C-interface wrapper, inlined
// there, reads every descriptor before the first call, so each buffer's pointer stayed live
// across every loop nest's call: code generation of a program with thousands of buffers
// grew faster than their number (instruction selection and register allocation). Call
// after OptimizeModule; nothing in LLVM's pipeline moves them back up.
void SinkArgumentLoads(llvm::Module &module);

// Code generation: `module` (already optimised) as an ELF relocatable object.
Status EmitObject(llvm::Module &module, llvm::TargetMachine &target, std::string *object);

// The host assembly of an optimised LLVM IR module (its text), at codegen level opt_level.
Status AssemblyFromLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out);

}  // namespace tinymlir
