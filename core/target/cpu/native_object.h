// Native code as a relocatable object: emitted once from the optimised LLVM module, then
// linked into this process by a small JIT linker. A freshly compiled program and one read
// from the disk cache go through the same LoadNativeObject, so both run the same bytes.
//
// This file knows LLVM (code generation, ORC) but not MLIR.
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

// The host as a cache key part: triple, CPU name and feature string. Native code compiled
// for one CPU may use instructions another lacks, so it is only reused on an equal host.
const std::string &HostDescription();

// Adds `kPackedEntryName` to `module`, calling `function` with its arguments unpacked.
Status AddPackedEntry(llvm::Module &module, const std::string &function);

// Code generation: `module` (already optimised) as an ELF relocatable object.
Status EmitObject(llvm::Module &module, llvm::TargetMachine &target, std::string *object);

// Whether generated code may call `symbol`: the runtime functions this library hands the
// linker (BLAS, GEMV kernels, the guarded allocator, libm) or one the process exports.
bool CanResolveSymbol(const std::string &symbol);

// The host assembly of an optimised LLVM IR module (its text), at codegen level opt_level.
Status AssemblyFromLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out);

// Links `object` into this process and returns its owner and packed entry. `llvm_ir` (may be
// empty) is kept to print assembly on request, at `opt_level`.
Status LoadNativeObject(const std::string &object, std::string llvm_ir, int opt_level,
                        std::unique_ptr<CompiledCode> *code, Program::Entry *entry);

}  // namespace tinymlir
