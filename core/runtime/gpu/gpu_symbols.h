// The functions a GPU program's host code may call, by address: the GPU runtime
// (core/runtime/gpu/gpu_runtime.h: mgpu* and the managed-memory allocator that stands in for
// malloc/aligned_alloc/free) over everything a CPU program may call (RuntimeSymbols(): libm,
// memcpy, BLAS...). CPU programs keep resolving through RuntimeSymbols() alone. No LLVM here.
#pragma once

#include <string>
#include <unordered_map>

namespace tinymlir {

const std::unordered_map<std::string, void *> &GpuRuntimeSymbols();

}  // namespace tinymlir
