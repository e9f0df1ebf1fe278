// The functions a GPU program's host code may call, by address: the GPU runtime
// (core/targets/gpu/run/gpu_runtime.h: mgpu* and the managed-memory allocator that stands in for
// malloc/aligned_alloc/free) over the host's functions (core/runtime/host_symbols.h: libm,
// memcpy...). No LLVM here.
#pragma once

#include <string>
#include <unordered_map>

namespace tinymlir {

const std::unordered_map<std::string, void *> &GpuRuntimeSymbols();

}  // namespace tinymlir
