// Quantizing weights to the q8_0 blocks the CPU target's kernels read
// (core/targets/cpu/run/q8_0.h says how, and within what bound), for tm_quantize_q8_0.
#pragma once

#include <cstdint>

namespace tinymlir {

// `rows` rows of k f32 values (src, contiguous) into dst, contiguous rows of Q8RowBytes(k)
// bytes (core/support/q8_0_format.h). Returns 0 when done; 1 for invalid arguments (a
// negative size, k not a multiple of 32, a NULL src or dst with elements to convert);
// -(1 + i) when src[i] cannot be quantized (not finite, or too large for a binary16 block
// scale), the first such element. Nothing is written unless it returns 0.
int QuantizeQ8_0(const float *src, int64_t rows, int64_t k, void *dst);

}  // namespace tinymlir
