// Widening half-precision values to f32, exactly, with the fastest instructions the
// machine has (AVX-512 or F16C for f16, checked at run time; bf16 is a shift): for the
// strips tm_rt_sgemm_half hands to sgemm, and one element at a time for the kernels' tails. (The
// GEMV kernels widen in registers as they load: gemv_kernels.cpp.)
#pragma once

#include <cstdint>

namespace tinymlir {

// The C API's TM_F16 / TM_BF16 values, as generated code passes them to the runtime.
enum class HalfKind : int32_t { kF16 = 6, kBF16 = 7 };

// dst[r * dst_stride + j] = (float)src[r * ld + j] for r in [0, rows), j in [0, cols): the
// rows side by side, eight elements of each in turn, so that their streams from memory are
// all in flight together (one row after another, each short run waits on its own misses).
void WidenRows(HalfKind kind, const uint16_t *src, int64_t ld, int64_t rows, int64_t cols,
               float *dst, int64_t dst_stride);

// One element (tests and fallbacks).
float HalfToFloat(HalfKind kind, uint16_t bits);

}  // namespace tinymlir
