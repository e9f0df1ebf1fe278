#include "core/targets/cpu/run/half_convert.h"

#include <immintrin.h>

#include <cstring>

#include "core/support/fork_safe_once.h"
#include "core/support/host_cpu.h"

namespace tinymlir {
namespace {

inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// binary16 -> binary32 without F16C: the exponent and mantissa moved into place, then
// scaled by 2^112 (which re-biases the exponent and normalises subnormals, exactly);
// infinities and NaNs keep an all-ones exponent.
inline float F16ToF32Portable(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  const uint32_t moved = magnitude << 13;
  const uint32_t bits =
      magnitude >= 0x7c00u ? (moved | 0x7f800000u)
                           : __builtin_bit_cast(uint32_t, BitsToFloat(moved) * 0x1p112f);
  return BitsToFloat(sign | bits);
}

__attribute__((target("avx,f16c"))) void WidenRowsF16c(const uint16_t *src, int64_t ld,
                                                          int64_t rows, int64_t cols, float *dst,
                                                          int64_t dst_stride) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8)
    for (int64_t r = 0; r < rows; ++r)
      _mm256_storeu_ps(dst + r * dst_stride + j,
                       _mm256_cvtph_ps(_mm_loadu_si128(
                           reinterpret_cast<const __m128i *>(src + r * ld + j))));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t jj = j; jj < cols; ++jj) dst[r * dst_stride + jj] = _cvtsh_ss(src[r * ld + jj]);
}

// WidenRows for any half type on any x86-64: eight elements of each row in turn.
void WidenRowsPortable(HalfKind kind, const uint16_t *src, int64_t ld, int64_t rows,
                       int64_t cols, float *dst, int64_t dst_stride) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8)
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t *s = src + r * ld + j;
      float *d = dst + r * dst_stride + j;
      if (kind == HalfKind::kF16)
        for (int l = 0; l < 8; ++l) d[l] = F16ToF32Portable(s[l]);
      else
        for (int l = 0; l < 8; ++l) d[l] = BitsToFloat(static_cast<uint32_t>(s[l]) << 16);
    }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t jj = j; jj < cols; ++jj)
      dst[r * dst_stride + jj] = HalfToFloat(kind, src[r * ld + jj]);
}

bool HasF16c() { return CpuHas("f16c") && CpuHas("avx"); }  // as TINYMLIR_CPU_EXCLUDE leaves them

ForkSafeOnce<bool> has_f16c;

}  // namespace

void WidenRows(HalfKind kind, const uint16_t *src, int64_t ld, int64_t rows, int64_t cols,
               float *dst, int64_t dst_stride) {
  if (kind == HalfKind::kF16 && has_f16c.Get(HasF16c))
    WidenRowsF16c(src, ld, rows, cols, dst, dst_stride);
  else WidenRowsPortable(kind, src, ld, rows, cols, dst, dst_stride);
}

float HalfToFloat(HalfKind kind, uint16_t bits) {
  return kind == HalfKind::kF16 ? F16ToF32Portable(bits)
                                : BitsToFloat(static_cast<uint32_t>(bits) << 16);
}

}  // namespace tinymlir
