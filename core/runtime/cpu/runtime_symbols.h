// The functions generated CPU code may call, by address: matrix products (OpenBLAS on
// fixed blocks, blas_products.h), tinymlir's GEMV
// kernels, the guarded allocator, strided memref copies and libm. The engine's linker
// (elf_object.h) resolves every CPU program's calls from this table, in either library,
// and the compiler refuses code calling anything else. No LLVM here.
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

const std::unordered_map<std::string, void *> &RuntimeSymbols();

}  // namespace tinymlir
