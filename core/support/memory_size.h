// A memory size as the environment gives one (TINYMLIR_SOFTWARE_GPU_MEMORY,
// TINYMLIR_GPU_MEMORY_BUDGET): digits with an optional K, M, G or T (powers of 1024).
#pragma once

#include <cstdint>

namespace tinymlir {

// `text`'s size in bytes; false for anything else, zero and overflow included.
bool ParseMemorySize(const char *text, uint64_t *bytes);

}  // namespace tinymlir
