#include "core/targets/cpu/run/half_convert.h"

// GCC 12 warns that the AVX-512 intrinsics' own placeholder (_mm512_undefined_*) "may be
// used uninitialized" wherever they are inlined; the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

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

// Row by row, so that each row is read and written in one stream. A bf16 is the high half
// of its f32: widened by a shift.
__attribute__((target("avx512f,avx2,f16c"))) void WidenRowsAvx512(HalfKind kind,
                                                                    const uint16_t *src,
                                                                    int64_t ld, int64_t rows,
                                                                    int64_t cols, float *dst,
                                                                    int64_t dst_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t *s = src + r * ld;
    float *d = dst + r * dst_stride;
    int64_t j = 0;
    if (kind == HalfKind::kF16) {
      for (; j + 16 <= cols; j += 16)
        _mm512_storeu_ps(d + j, _mm512_cvtph_ps(_mm256_loadu_si256(
                                    reinterpret_cast<const __m256i *>(s + j))));
      for (; j < cols; ++j) d[j] = _cvtsh_ss(s[j]);
    } else {
      for (; j + 16 <= cols; j += 16)
        _mm512_storeu_si512(d + j, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                                         reinterpret_cast<const __m256i *>(s + j))),
                                                     16));
      for (; j < cols; ++j) d[j] = BitsToFloat(static_cast<uint32_t>(s[j]) << 16);
    }
  }
}

__attribute__((target("avx2,f16c"))) void WidenRowsAvx2(HalfKind kind, const uint16_t *src,
                                                         int64_t ld, int64_t rows, int64_t cols,
                                                         float *dst, int64_t dst_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t *s = src + r * ld;
    float *d = dst + r * dst_stride;
    int64_t j = 0;
    if (kind == HalfKind::kF16) {
      for (; j + 8 <= cols; j += 8)
        _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm_loadu_si128(
                                    reinterpret_cast<const __m128i *>(s + j))));
      for (; j < cols; ++j) d[j] = _cvtsh_ss(s[j]);
    } else {
      for (; j + 8 <= cols; j += 8)
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + j),
                            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(
                                                  reinterpret_cast<const __m128i *>(s + j))),
                                              16));
      for (; j < cols; ++j) d[j] = BitsToFloat(static_cast<uint32_t>(s[j]) << 16);
    }
  }
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

// The widest widening this CPU has, as TINYMLIR_CPU_EXCLUDE leaves its features.
enum class Widening { kPortable, kAvx2, kAvx512 };
Widening ChooseWidening() {
  if (!CpuHas("avx2") || !CpuHas("f16c")) return Widening::kPortable;
  return CpuHas("avx512f") ? Widening::kAvx512 : Widening::kAvx2;
}

ForkSafeOnce<Widening> widening;

}  // namespace

void WidenRows(HalfKind kind, const uint16_t *src, int64_t ld, int64_t rows, int64_t cols,
               float *dst, int64_t dst_stride) {
  switch (widening.Get(ChooseWidening)) {
    case Widening::kAvx512: return WidenRowsAvx512(kind, src, ld, rows, cols, dst, dst_stride);
    case Widening::kAvx2: return WidenRowsAvx2(kind, src, ld, rows, cols, dst, dst_stride);
    case Widening::kPortable: return WidenRowsPortable(kind, src, ld, rows, cols, dst, dst_stride);
  }
}

float HalfToFloat(HalfKind kind, uint16_t bits) {
  return kind == HalfKind::kF16 ? F16ToF32Portable(bits)
                                : BitsToFloat(static_cast<uint32_t>(bits) << 16);
}

}  // namespace tinymlir
