// The fixed tree in which the decode kernels add their sixteen f32 lanes into one sum: lane
// l + 8 into l, then l + 4, l + 2, l + 1 (gemv_kernels.cpp's dot products, q8_0.cpp's
// blocks). Written once for each place the lanes live -- an array, two ymm registers (lanes
// 0-7 and 8-15), one zmm -- with the same additions in the same order, so every variant of a
// kernel gives the same bits. Include only from files compiled with -ffp-contract=off.
#pragma once

// GCC 12 warns that the AVX-512 intrinsics' own placeholder (_mm512_undefined_*) "may be
// used uninitialized" wherever they are inlined; the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace tinymlir {

inline float Tree16(const float *acc) {
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = acc[l] + acc[l + 8];
  for (int l = 0; l < 4; ++l) s[l] = s[l] + s[l + 4];
  for (int l = 0; l < 2; ++l) s[l] = s[l] + s[l + 2];
  return s[0] + s[1];
}

// Lanes 0-7 in `lo`, 8-15 in `hi`.
__attribute__((target("avx2"), always_inline)) inline float Tree256(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

__attribute__((target("avx512f,avx2"), always_inline)) inline float Tree512(__m512 acc) {
  return Tree256(_mm512_castps512_ps256(acc),
                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
}

}  // namespace tinymlir
