// The functions every device's host code may call, by address: the guarded allocator,
// memory copies (strided memref copies too), the worker pool's parallel loops and libm. Each
// device's symbol table (Device::symbols) is this plus its own kernels; the engine's linker
// (core/engine/elf_object.h) resolves a program's calls from its device's table, in either
// library, and the compiler refuses code calling anything else. No LLVM here.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

// MLIR's memrefCopy (strided copies between memrefs of equal shape), implemented here so
// that neither library needs MLIR's C runner utils: elem_size-byte elements from *src to
// *dst, both UnrankedMemRefType {int64_t rank; void *descriptor} whose descriptors are
// {base, data, offset, sizes[rank], strides[rank]} (strides in elements).
extern "C" void tm_rt_memref_copy(int64_t elem_size, void *src, void *dst);

namespace tinymlir {

const std::unordered_map<std::string, void *> &HostSymbols();

}  // namespace tinymlir
