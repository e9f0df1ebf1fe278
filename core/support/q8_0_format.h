// The q8_0 block format's two numbers, shared by the layers that describe q8_0 tensors
// (core/trace/dtype.h) and the kernels that read them (core/targets/cpu/run/q8_0.h): the last
// axis in blocks of 32 elements, each 34 bytes (a little-endian binary16 scale, then 32
// int8 values), llama.cpp's Q8_0.
#pragma once

#include <cstdint>

namespace tinymlir {

inline constexpr int64_t kQ8BlockElements = 32;
inline constexpr int64_t kQ8BlockBytes = 34;

// Bytes of one stored row of k elements (k a multiple of 32).
constexpr int64_t Q8RowBytes(int64_t k) { return k / kQ8BlockElements * kQ8BlockBytes; }

}  // namespace tinymlir
