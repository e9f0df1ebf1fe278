#include "core/runtime/cpu/q8_0.h"

#include <cblas.h>
// GCC 12 warns that the AVX-512 intrinsics' own placeholder (_mm512_undefined_*) "may be
// used uninitialized" wherever they are inlined; the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/runtime/guarded_call.h"
#include "core/runtime/cpu/blas_products.h"
#include "core/runtime/cpu/half_convert.h"
#include "core/runtime/cpu/kernel_times.h"
#include "core/runtime/cpu/row_dots.h"
#include "core/runtime/cpu/worker_pool.h"
#include "core/support/fork_safe_once.h"
#include "core/support/host_cpu.h"

#define TM_Q8_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TM_Q8_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

namespace tinymlir {
namespace {

// ---------------------------------------------------------------------------------------
// Quantization: integer arithmetic only, so the bytes do not depend on the machine or on
// the floating-point rounding mode.

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// num / den rounded to the nearest integer, ties to even (den > 0).
uint64_t RoundDivide(uint64_t num, uint64_t den) {
  const uint64_t quotient = num / den, twice_rest = 2 * (num % den);
  return twice_rest > den || (twice_rest == den && (quotient & 1)) ? quotient + 1 : quotient;
}

// A finite f32 of magnitude a as a * 2^exponent with an integer significand (0 for zero).
void Decompose(float a, uint64_t *significand, int *exponent) {
  const uint32_t bits = FloatBits(a) & 0x7fffffffu;
  const uint32_t field = bits >> 23, mantissa = bits & 0x7fffffu;
  *significand = field == 0 ? mantissa : (mantissa | 0x800000u);
  *exponent = field == 0 ? -149 : static_cast<int>(field) - 150;
}

// The f16 nearest to amax / 127 (exactly, ties to even), for a finite amax in
// [0, kQ8MaxAbs]. It is also the f16 nearest to the f32 quotient amax / 127.0f (what the
// format's definition computes): with amax = M 2^E (M < 2^24 an integer) and y = amax / 127
// in [2^e, 2^(e+1)), an f16 midpoint h = (2j + 1) 2^(e-11) (or (2j + 1) 2^-25 below 2^-14)
// differs from y, unless equal, by |M 2^E - 127 h| / 127 >= 2^min(E, e-11) / 127 (or
// 2^min(E, -25) / 127), which exceeds y's f32 half ulp 2^(e-24): 2^(e-11) / 127 does, and
// so does 2^E / 127, since M < 2^24 and M 2^E / 127 >= 2^e give 2^E > 127 * 2^(e-24)
// (2^-25 / 127 does for the e <= -15 of that range). So the f32 rounding of y never
// reaches a midpoint y was not on, and rounding twice gives what rounding once does.
uint16_t ScaleBits(float amax) {
  uint64_t m;
  int e_amax;
  Decompose(amax, &m, &e_amax);
  if (m == 0) return 0;
  // With 2^t <= m < 2^(t+1), m / 127 lies in [2^(t-7) * 128/127, 2^(t-6) * 128/127): its
  // binade is t - 6 from m >= 127 * 2^(t-6) on, t - 7 below. y's binade is that + e_amax.
  const int t = 63 - __builtin_clzll(m);
  const int e = t - 7 + ((m << 6) >= (uint64_t{127} << t) ? 1 : 0) + e_amax;
  // The f16 quantum at y: 2^(e-10) for a normal, 2^-24 below 2^-14.
  const int s = std::max(e - 10, -24);
  // n = round(y / 2^s) = round(m 2^(e_amax - s) / 127).
  const int shift = e_amax - s;
  uint64_t n;
  if (shift >= 0) n = RoundDivide(m << shift, 127);  // only below 2^-14, shift < 17
  else if (-shift > 40) n = 0;                         // y / 2^s < 2^24 / 2^47: 0
  else n = RoundDivide(m, uint64_t{127} << -shift);
  if (s == -24) return static_cast<uint16_t>(n);  // subnormal (n = 1024: 2^-14, also right)
  // n in [1024, 2048]; 2048 carries into the exponent.
  return static_cast<uint16_t>(((e + 15) << 10) + (n - 1024));
}

// q = clamp(round(x / dq), -127, 127), ties to even, exactly, for dq > 0 (an f16 as f32).
// Through a double quotient, which decides the rounding exactly: x = M 2^E (M < 2^24) and
// dq = D 2^F (D < 2^11), so a quotient that is not a tie n + 1/2 differs from it by
// |2 M 2^E - (2n + 1) D 2^F| / (2 dq) >= 2^min(E, F) / (2 dq): at least 2^-25 of the quotient
// (1 / (2M) when F >= E; when F < E, the quotient below 127.5 bounds 2^(E-F) and so the
// fraction by 1 / (255 D)), far above the division's rounding (2^-53 of it, in any rounding
// mode); and a tie is exact. floor and the
// comparisons do not depend on the rounding mode. (The integer RoundDivide per element this
// replaces gave the same bytes at a tenth of the speed: 1.2 s of GPT-2 124M's load.)
int8_t QuantizeValue(float x, float dq) {
  const double q = std::fabs(static_cast<double>(x)) / static_cast<double>(dq);
  if (!(q < 127.5)) return static_cast<int8_t>(std::signbit(x) ? -127 : 127);
  const double n = std::floor(q), rest = q - n;  // exact: q < 2^7
  const int r = static_cast<int>(n) + (rest > 0.5 || (rest == 0.5 && std::fmod(n, 2.0) != 0.0));
  return static_cast<int8_t>(std::signbit(x) ? -r : r);
}

void QuantizeBlock(const float *x, uint8_t *out) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQ8BlockElements; ++j) amax = std::max(amax, std::fabs(x[j]));
  const uint16_t scale = ScaleBits(amax);
  out[0] = static_cast<uint8_t>(scale & 0xff);
  out[1] = static_cast<uint8_t>(scale >> 8);
  const float dq = HalfToFloat(HalfKind::kF16, scale);
  for (int64_t j = 0; j < kQ8BlockElements; ++j)
    out[2 + j] = static_cast<uint8_t>(scale == 0 ? 0 : QuantizeValue(x[j], dq));
}

// ---------------------------------------------------------------------------------------
// Reading blocks.

inline uint16_t ScaleBitsAt(const uint8_t *block) {
  return static_cast<uint16_t>(block[0] | (block[1] << 8));
}
inline float ScaleAt(const uint8_t *block) {
  return HalfToFloat(HalfKind::kF16, ScaleBitsAt(block));
}

using q8_0_internal::Variant;

// Every f16 as f32 (256 KB of static storage, filled on first use): the kernels read a block's scale from
// it with a broadcast load, where converting it (a word broadcast and a 512-bit VCVTPH2PS per
// block and row) cost 15% of the AVX-512 kernel's throughput from the cache. Only the entries
// of the scales a model has are ever read (a few KB for a matrix whose scales span a few
// binades).
float f16_table[65536];  // zero-initialised storage, filled on first use
ForkSafeOnce<const float *> f16_table_filled;

const float *F16Table() {
  return f16_table_filled.Get([] {
    for (uint32_t bits = 0; bits < 65536; ++bits)
      f16_table[bits] = HalfToFloat(HalfKind::kF16, static_cast<uint16_t>(bits));
    return static_cast<const float *>(f16_table);
  });
}

ForkSafeOnce<Variant> default_variant;

bool VariantAvailable(Variant variant) {
  switch (variant) {
    case Variant::kAvx512: return CpuHas("avx512f") && CpuHas("avx2") && CpuHas("fma") && CpuHas("f16c");
    case Variant::kAvx2: return CpuHas("avx2") && CpuHas("fma") && CpuHas("f16c");
    default: return true;
  }
}

Variant PickedVariant() {
  return default_variant.Get([] {
    if (VariantAvailable(Variant::kAvx512)) return Variant::kAvx512;
    if (VariantAvailable(Variant::kAvx2)) return Variant::kAvx2;
    return Variant::kPortable;
  });
}

// ---------------------------------------------------------------------------------------
// Dequantization (exact: an f16 times an int8 fits in f32), for the prefill panels.

void DequantizeRowsPortable(const uint8_t *src, int64_t ld, int64_t rows, int64_t blocks,
                            float *dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t *p = src + r * ld + b * kQ8BlockBytes;
      const float d = ScaleAt(p);
      float *out = dst + r * ldd + b * kQ8BlockElements;
      for (int j = 0; j < kQ8BlockElements; ++j)
        out[j] = d * static_cast<float>(static_cast<int8_t>(p[2 + j]));
    }
}

TM_Q8_AVX2 void DequantizeRowsAvx2(const uint8_t *src, int64_t ld, int64_t rows,
                                   int64_t blocks, float *dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t *p = src + r * ld + b * kQ8BlockBytes;
      const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(ScaleBitsAt(p))));
      float *out = dst + r * ldd + b * kQ8BlockElements;
      for (int c = 0; c < 4; ++c)
        _mm256_storeu_ps(out + 8 * c,
                         _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                                              reinterpret_cast<const __m128i *>(p + 2 + 8 * c))))));
    }
}

void DequantizeRowsAny(const uint8_t *src, int64_t ld, int64_t rows, int64_t k, float *dst,
                       int64_t ldd) {
  const int64_t blocks = k / kQ8BlockElements;
  if (PickedVariant() == Variant::kPortable)
    DequantizeRowsPortable(src, ld, rows, blocks, dst, ldd);
  else DequantizeRowsAvx2(src, ld, rows, blocks, dst, ldd);
}

// ---------------------------------------------------------------------------------------
// Dot products in the canonical order (q8_0.h). Each kernel computes, for S rows of A
// (row[s], from block 0) and V rows of x (x + v * ldx), out[v * S + s] = the canonical sum
// over `blocks` blocks.

// The lanes' fixed tree: l + 8, l + 4, l + 2, l + 1.
inline float TreeScalar(const float *acc) {
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = acc[l] + acc[l + 8];
  for (int l = 0; l < 4; ++l) s[l] = s[l] + s[l + 4];
  for (int l = 0; l < 2; ++l) s[l] = s[l] + s[l + 2];
  return s[0] + s[1];
}

// The portable kernel reads x with a stride (the fallback when a strided x cannot be
// packed gives the same bits).
inline float DotPortable(const uint8_t *row, const float *x, int64_t incx, int64_t blocks,
                         const float *table) {
  float acc[16] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t *p = row + b * kQ8BlockBytes;
    const float d = table[ScaleBitsAt(p)];
    const auto *q = reinterpret_cast<const int8_t *>(p + 2);
    const float *xb = x + b * kQ8BlockElements * incx;
    for (int l = 0; l < 16; ++l) {
      float prod = static_cast<float>(q[l]) * xb[l * incx];
      prod = std::fma(static_cast<float>(q[l + 16]), xb[(l + 16) * incx], prod);
      acc[l] = std::fma(prod, d, acc[l]);
    }
  }
  return TreeScalar(acc);
}

template <int S, int V>
void KernelPortable(const uint8_t *const *row, const float *x, int64_t ldx, int64_t blocks,
                    const float *table, float *out) {
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s)
      out[v * S + s] = DotPortable(row[s], x + v * ldx, 1, blocks, table);
}

TM_Q8_AVX2 __attribute__((always_inline)) inline float Tree256(__m256 s8) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// Eight int8 values as f32.
TM_Q8_AVX2 __attribute__((always_inline)) inline __m256 Eight(const uint8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))));
}

// AVX2: lanes 0-7 in acc[.][0], lanes 8-15 in acc[.][1]. Each row's stream is prefetched
// kPrefetch bytes ahead, once per block (0: not at all).
template <int S, int V, int kPrefetch>
TM_Q8_AVX2 __attribute__((always_inline)) inline void KernelAvx2(
    const uint8_t *const *row, const float *x, int64_t ldx, int64_t blocks, const float *table,
    float *out) {
  __m256 acc[V][S][2];
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s) acc[v][s][0] = acc[v][s][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int s = 0; s < S; ++s) {
      const uint8_t *p = row[s] + b * kQ8BlockBytes;
      if constexpr (kPrefetch > 0) _mm_prefetch(reinterpret_cast<const char *>(p) + kPrefetch, _MM_HINT_T0);
      const __m256 d = _mm256_set1_ps(table[ScaleBitsAt(p)]);
      const __m256 q0 = Eight(p + 2), q1 = Eight(p + 10), q2 = Eight(p + 18),
                   q3 = Eight(p + 26);
      for (int v = 0; v < V; ++v) {
        const float *xb = x + v * ldx + b * kQ8BlockElements;
        __m256 p0 = _mm256_mul_ps(q0, _mm256_loadu_ps(xb));
        __m256 p1 = _mm256_mul_ps(q1, _mm256_loadu_ps(xb + 8));
        p0 = _mm256_fmadd_ps(q2, _mm256_loadu_ps(xb + 16), p0);
        p1 = _mm256_fmadd_ps(q3, _mm256_loadu_ps(xb + 24), p1);
        acc[v][s][0] = _mm256_fmadd_ps(p0, d, acc[v][s][0]);
        acc[v][s][1] = _mm256_fmadd_ps(p1, d, acc[v][s][1]);
      }
    }
  }
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s)
      out[v * S + s] = Tree256(_mm256_add_ps(acc[v][s][0], acc[v][s][1]));
}

// AVX-512: lanes 0-15 in one zmm.
template <int S, int V, int kPrefetch>
TM_Q8_AVX512 __attribute__((always_inline)) inline void KernelAvx512(
    const uint8_t *const *row, const float *x, int64_t ldx, int64_t blocks, const float *table,
    float *out) {
  __m512 acc[V][S];
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s) acc[v][s] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int s = 0; s < S; ++s) {
      const uint8_t *p = row[s] + b * kQ8BlockBytes;
      if constexpr (kPrefetch > 0) _mm_prefetch(reinterpret_cast<const char *>(p) + kPrefetch, _MM_HINT_T0);
      const __m512 d = _mm512_set1_ps(table[ScaleBitsAt(p)]);
      const __m512 lo = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 2))));
      const __m512 hi = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 18))));
      for (int v = 0; v < V; ++v) {
        const float *xb = x + v * ldx + b * kQ8BlockElements;
        __m512 prod = _mm512_mul_ps(lo, _mm512_loadu_ps(xb));
        prod = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xb + 16), prod);
        acc[v][s] = _mm512_fmadd_ps(prod, d, acc[v][s]);
      }
    }
  }
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s) {
      const __m512 a = acc[v][s];
      const __m256 s8 = _mm256_add_ps(
          _mm512_castps512_ps256(a),
          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
      out[v * S + s] = Tree256(s8);
    }
}

// The kernels of one variant, for DotsLoop: kStreams rows of A in lockstep (parts of the
// range far apart, as gemv_kernels.cpp's streams), each stream prefetched kPrefetch bytes
// ahead once per block, and kRowsOfX rows of x at a time when there are several. Measured
// with bench/q8_gemv_bandwidth.cpp on GPT-2 124M's decode shapes (2-vCPU Zen 5 VM; the
// ratio to a plain read of the same bytes from DRAM, medians of 11-15 repetitions; the
// VM's bandwidth moves between 30 and 65 GB/s, so only ratios compare):
//   AVX-512, 1 thread: 8 streams without prefetch 69-80%; 8 + 1 KB ahead 83-94%; 4 + 2 KB
//     88-98%; 2 + 4 KB 78-80%; 1 + 8 KB 76-82% (one row's lanes are one chain of fused
//     multiply-adds, latency-bound even from the cache). 2 threads: 76-91% with 8 streams
//     without prefetch, 84-102% with 4 + 2 KB.
//   AVX2, 1 thread: 4 streams 67-74% with or without prefetch (bound by its conversions:
//     31 GB/s from the cache); 2 threads: 76-84% without prefetch, 86-95% with 2 KB.
// Adjacent rows of A instead of far-apart parts read at 10-12 GB/s without prefetch (the
// hardware prefetcher does not follow them), no better than far-apart parts with it.
struct PortableKernels {
  static constexpr int kStreams = 1, kRowsOfX = 1;
  template <int S, int V>
  static void Run(const uint8_t *const *row, const float *x, int64_t ldx, int64_t blocks,
                  const float *table, float *out) {
    KernelPortable<S, V>(row, x, ldx, blocks, table, out);
  }
};
struct Avx2Kernels {
  // Four streams of two accumulators each: eight of the sixteen registers (the int8
  // vectors and the scale take five more). Several rows of x: two rows of A by two of x.
  static constexpr int kStreams = 4, kStreamsX = 2, kRowsOfX = 2, kPrefetch = 2048;
  template <int S, int V>
  TM_Q8_AVX2 static void Run(const uint8_t *const *row, const float *x, int64_t ldx,
                             int64_t blocks, const float *table, float *out) {
    KernelAvx2<S, V, kPrefetch>(row, x, ldx, blocks, table, out);
  }
};
struct Avx512Kernels {
  static constexpr int kStreams = 4, kStreamsX = 4, kRowsOfX = 4, kPrefetch = 2048;
  template <int S, int V>
  TM_Q8_AVX512 static void Run(const uint8_t *const *row, const float *x, int64_t ldx,
                               int64_t blocks, const float *table, float *out) {
    KernelAvx512<S, V, kPrefetch>(row, x, ldx, blocks, table, out);
  }
};

// Y[v * ldy + i * incy] += A row i . X row v for rows [i0, i1) of A and the nx rows of X
// (contiguous, rows ldx apart): the range cut into S parts read side by side (S streams
// from memory), each group of S rows of A dotted with V rows of X at a time, then with two
// (when V > 2) and one at a time for those left over; the rows of A left over one at a
// time. Every output is one canonical sum, whatever S, V, nx or the range.
template <typename K, int S, int V>
inline void DotsLoop(const uint8_t *a, int64_t lda, int64_t nx, const float *x, int64_t ldx,
                     int64_t blocks, float *y, int64_t ldy, int64_t incy, int64_t i0,
                     int64_t i1, const float *table) {
  const int64_t part = (i1 - i0) / S;
  auto group = [&](auto rows_of_x, const uint8_t *const *rows, int64_t v, int64_t r) {
    constexpr int W = decltype(rows_of_x)::value;
    float sums[W * S];
    K::template Run<S, W>(rows, x + v * ldx, ldx, blocks, table, sums);
    for (int u = 0; u < W; ++u)
      for (int s = 0; s < S; ++s) y[(v + u) * ldy + (i0 + s * part + r) * incy] += sums[u * S + s];
  };
  for (int64_t r = 0; r < part; ++r) {
    const uint8_t *rows[S];
    for (int s = 0; s < S; ++s) rows[s] = a + (i0 + s * part + r) * lda;
    int64_t v = 0;
    if constexpr (V > 1)
      for (; v + V <= nx; v += V) group(std::integral_constant<int, V>(), rows, v, r);
    if constexpr (V > 2)
      for (; v + 2 <= nx; v += 2) group(std::integral_constant<int, 2>(), rows, v, r);
    for (; v < nx; ++v) group(std::integral_constant<int, 1>(), rows, v, r);
  }
  for (int64_t i = i0 + S * part; i < i1; ++i) {
    const uint8_t *row = a + i * lda;
    for (int64_t v = 0; v < nx; ++v) {
      float sum;
      K::template Run<1, 1>(&row, x + v * ldx, ldx, blocks, table, &sum);
      y[v * ldy + i * incy] += sum;
    }
  }
}

template <typename K>
inline void Dots(const uint8_t *a, int64_t lda, int64_t nx, const float *x, int64_t ldx,
                 int64_t blocks, float *y, int64_t ldy, int64_t incy, int64_t i0, int64_t i1,
                 const float *table) {
  if (nx == 1)
    DotsLoop<K, K::kStreams, 1>(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1, table);
  else if constexpr (K::kRowsOfX > 1)
    DotsLoop<K, K::kStreamsX, K::kRowsOfX>(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1, table);
  else
    DotsLoop<K, K::kStreams, 1>(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1, table);
}

// Each variant's loop flattened into one function in its own target context (everything
// it calls inlined: gemv_kernels.cpp measured a call per group of rows at 3-9%).
TM_Q8_AVX2 __attribute__((flatten)) void DotsAvx2(const uint8_t *a, int64_t lda, int64_t nx,
                                                  const float *x, int64_t ldx, int64_t blocks,
                                                  float *y, int64_t ldy, int64_t incy,
                                                  int64_t i0, int64_t i1) {
  Dots<Avx2Kernels>(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1, F16Table());
}
TM_Q8_AVX512 __attribute__((flatten)) void DotsAvx512(const uint8_t *a, int64_t lda,
                                                      int64_t nx, const float *x, int64_t ldx,
                                                      int64_t blocks, float *y, int64_t ldy,
                                                      int64_t incy, int64_t i0, int64_t i1) {
  Dots<Avx512Kernels>(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1, F16Table());
}
void DotsPortable(const uint8_t *a, int64_t lda, int64_t nx, const float *x, int64_t ldx,
                  int64_t blocks, float *y, int64_t ldy, int64_t incy, int64_t i0,
                  int64_t i1) {
  Dots<PortableKernels>(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1, F16Table());
}

void DotsVariant(Variant variant, const uint8_t *a, int64_t lda, int64_t nx, const float *x,
                 int64_t ldx, int64_t k, float *y, int64_t ldy, int64_t incy, int64_t i0,
                 int64_t i1) {
  const int64_t blocks = k / kQ8BlockElements;
  switch (variant) {
    case Variant::kAvx512: DotsAvx512(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1); break;
    case Variant::kAvx2: DotsAvx2(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1); break;
    default: DotsPortable(a, lda, nx, x, ldx, blocks, y, ldy, incy, i0, i1);
  }
}

// ---------------------------------------------------------------------------------------
// Refusing a call (generated code's broken precondition).

Status BadCall(const char *function, const char *why) {
  return InvalidArgument(std::string(function) + ": " + why);
}

// Ends the invoke with TM_ERROR_INVALID_ARGUMENT; outside one, aborts with the message.
// Nothing in the callers' frames has a destructor (FailGuardedCall's longjmp skips them).
[[noreturn]] void Refuse(const char *function, const char *why) {
  if (InGuardedCall()) FailGuardedCall(BadCall(function, why));
  std::fprintf(stderr, "tinymlir: %s: %s\n", function, why);
  std::abort();
}

// Scratch per panel: up to 16 MB of f32 (within the L3 cache), so that each of GPT-2's
// matrices is one panel: dequantized on every thread, then one OpenBLAS product over it.
// With 2 MB panels (tm_rt_sgemm_half's), a 3072-deep product was 18 panels of 160
// columns, each a narrow sgemm after a pause for its dequantization: GPT-2 124M's
// prefill-128 took 9.4-9.6 ms per block against 7.0-7.2 ms with F32 weights; with one panel
// per matrix, 7.0-7.3 ms (gpt2_profile_programs --t 128, interleaved runs).
constexpr int64_t kPanelFloats = int64_t{1} << 22;

int64_t PanelWidth(int64_t k) {
  return std::max<int64_t>(16, (kPanelFloats / std::max<int64_t>(k, 1)) / 16 * 16);
}

// dst (rows x k, contiguous) = stored rows [r0, r0 + rows) of src, dequantized, on every
// thread of the pool (the panel streams the weight from memory: the part of a prefill
// product OpenBLAS's threads do not share).
void DequantizeBlock(const uint8_t *src, int64_t ld, int64_t r0, int64_t rows, int64_t k,
                     float *dst) {
  constexpr int64_t kRowsPerTask = 16;
  WorkerPool &pool = WorkerPool::Get();
  if (rows * k < (int64_t{1} << 16) || pool.size() == 1) {
    DequantizeRowsAny(src + r0 * ld, ld, rows, k, dst, k);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.ParallelFor([&](int) {
    for (int64_t r; (r = next.fetch_add(kRowsPerTask, std::memory_order_relaxed)) < rows;)
      DequantizeRowsAny(src + (r0 + r) * ld, ld, std::min(kRowsPerTask, rows - r), k,
                        dst + r * k, k);
  });
}

}  // namespace

int64_t FindUnquantizableQ8_0(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!(std::fabs(x[i]) <= kQ8MaxAbs)) return i;  // NaN compares false
  return -1;
}

bool QuantizeRowQ8_0(const float *x, int64_t k, uint8_t *out) {
  if (FindUnquantizableQ8_0(x, k) >= 0) return false;
  for (int64_t b = 0; b < k / kQ8BlockElements; ++b)
    QuantizeBlock(x + b * kQ8BlockElements, out + b * kQ8BlockBytes);
  return true;
}

void DequantizeRowsQ8_0(const uint8_t *src, int64_t ld_bytes, int64_t rows, int64_t k,
                        float *dst, int64_t ldd) {
  DequantizeRowsAny(src, ld_bytes, rows, k, dst, ldd);
}

namespace q8_0_internal {

Variant DefaultVariant() { return PickedVariant(); }

bool Available(Variant variant) { return VariantAvailable(variant); }

void GemvDots(Variant variant, int64_t i0, int64_t i1, int64_t k, const uint8_t *a,
              int64_t lda_bytes, int64_t nx, const float *x, int64_t ldx, float *y,
              int64_t ldy, int64_t incy) {
  DotsVariant(variant, a, lda_bytes, nx, x, ldx, k, y, ldy, incy, i0, i1);
}

}  // namespace q8_0_internal
}  // namespace tinymlir

extern "C" int tm_rt_quantize_q8_0(const float *src, int64_t rows, int64_t k, void *dst) {
  using namespace tinymlir;
  if (rows < 0 || k < 0 || k % kQ8BlockElements != 0) return 1;
  if (rows == 0 || k == 0) return 0;
  if (!src || !dst) return 1;
  const int64_t bad = FindUnquantizableQ8_0(src, rows * k);
  if (bad >= 0) return static_cast<int>(std::max<int64_t>(-(1 + bad), INT32_MIN));
  // Blocks are independent: any split gives the same bytes. Chunks of rows go to the pool
  // (the largest of GPT-2's matrices is 39 M values).
  auto *out = static_cast<uint8_t *>(dst);
  const int64_t blocks_per_row = k / kQ8BlockElements;
  auto quantize_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t b = 0; b < blocks_per_row; ++b)
        QuantizeBlock(src + r * k + b * kQ8BlockElements,
                      out + r * Q8RowBytes(k) + b * kQ8BlockBytes);
  };
  WorkerPool &pool = WorkerPool::Get();
  if (rows * k < kParallelElements || pool.size() == 1) {
    quantize_rows(0, rows);
    return 0;
  }
  const int64_t chunk = std::max<int64_t>(1, kParallelElements / k);
  std::atomic<int64_t> next{0};
  pool.ParallelFor([&](int) {
    for (int64_t r0; (r0 = next.fetch_add(chunk, std::memory_order_relaxed)) < rows;)
      quantize_rows(r0, std::min(rows, r0 + chunk));
  });
  return 0;
}

extern "C" void tm_rt_gemv_dots_q8_0(int64_t m, int64_t k, const void *a, int64_t lda_bytes,
                                     int64_t nx, const float *x, int64_t ldx, int64_t incx,
                                     float *y, int64_t ldy, int64_t incy) {
  using namespace tinymlir;
  if (m < 0 || k < 0 || nx < 0 || k % kQ8BlockElements != 0)
    Refuse("tm_rt_gemv_dots_q8_0", "a negative size, or k not a multiple of 32");
  if (m > 1 && lda_bytes < Q8RowBytes(k))
    Refuse("tm_rt_gemv_dots_q8_0", "a row stride (lda_bytes) below the row's k / 32 * 34 bytes");
  if (m == 0 || nx == 0) return;
  ScopedKernelTimer timer(KernelClass::kGemv);
  const auto *aq = static_cast<const uint8_t *>(a);
  const q8_0_internal::Variant variant = PickedVariant();
  DotsOverRows(
      m, k, Q8RowBytes(k), nx, x, ldx, incx,
      [&](const float *xs, int64_t ld, int64_t i0, int64_t i1) {
        DotsVariant(variant, aq, lda_bytes, nx, xs, ld, k, y, ldy, incy, i0, i1);
      },
      [&] {  // no scratch for a strided x: the portable dots straight from it (same bits)
        const int64_t blocks = k / kQ8BlockElements;
        for (int64_t v = 0; v < nx; ++v)
          for (int64_t i = 0; i < m; ++i)
            y[v * ldy + i * incy] +=
                DotPortable(aq + i * lda_bytes, x + v * ldx, incx, blocks, F16Table());
      });
}

extern "C" void tm_rt_sgemm_q8_0(int32_t q8_operand, int32_t trans_a, int32_t trans_b,
                                 int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                                 const void *b, int64_t ldb, float *c, int64_t ldc) {
  using namespace tinymlir;
  constexpr const char *kName = "tm_rt_sgemm_q8_0";
  auto is_trans = [](int32_t t) { return t == CblasNoTrans || t == CblasTrans; };
  if (q8_operand == 0) {
    if (trans_a != CblasNoTrans || !is_trans(trans_b))
      Refuse(kName, "q8_operand 0 (A) takes trans_a CblasNoTrans and trans_b either");
  } else if (q8_operand == 1) {
    if (trans_b != CblasTrans || !is_trans(trans_a))
      Refuse(kName, "q8_operand 1 (B) takes trans_b CblasTrans and trans_a either");
  } else {
    Refuse(kName, "q8_operand is neither 0 (A) nor 1 (B)");
  }
  if (m < 0 || n < 0 || k < 0 || k % kQ8BlockElements != 0)
    Refuse(kName, "a negative size, or k not a multiple of 32");
  const bool ta = trans_a == CblasTrans, tb = trans_b == CblasTrans;
  // The q8_0 operand's rows hold Q8RowBytes(k) bytes; the f32 one's stored rows its columns.
  const int64_t q8_rows = q8_operand == 0 ? m : n, q8_ld = q8_operand == 0 ? lda : ldb;
  const int64_t f32_cols = q8_operand == 0 ? (tb ? k : n) : (ta ? m : k);
  const int64_t f32_ld = q8_operand == 0 ? ldb : lda;
  if ((q8_rows > 1 && q8_ld < Q8RowBytes(k)) || f32_ld < f32_cols || ldc < n)
    Refuse(kName, "a leading dimension below its rows' length");
  if (m == 0 || n == 0 || k == 0) return;  // C keeps its value
  // No wider than the q8_0 operand's rows: a small product takes a small panel.
  const int64_t width = std::min(PanelWidth(k), (q8_rows + 15) / 16 * 16);
  // Through the guarded allocator: when memory runs out, the invoke fails with
  // TM_ERROR_OUT_OF_MEMORY instead of this kernel returning a wrong product.
  float *panel = static_cast<float *>(tm_rt_malloc(static_cast<size_t>(width * k) * sizeof(float)));
  if (!panel) return;  // only outside a guarded call, where nothing can be reported
  // The widest panel's product uses the most threads.
  const int reserved = ReserveBlasBuffers(
      q8_operand == 1 ? BlasProductThreads(1, m, std::min(width, n), k)
                      : BlasProductThreads(1, std::min(width, m), n, k));
  ScopedKernelTimer timer(KernelClass::kBlas);
  if (q8_operand == 1) {  // panels of C's columns: w stored rows of B^T, given transposed
    const auto *qb = static_cast<const uint8_t *>(b);
    for (int64_t j0 = 0; j0 < n; j0 += width) {
      const int64_t w = std::min(width, n - j0);
      DequantizeBlock(qb, ldb, j0, w, k, panel);
      RunBlasProducts(1, 1, trans_a, CblasTrans, m, w, k, a, lda, 0, panel, k, 0, c + j0, ldc, 0);
    }
  } else {  // panels of C's rows: w stored rows of A
    const auto *qa = static_cast<const uint8_t *>(a);
    for (int64_t i0 = 0; i0 < m; i0 += width) {
      const int64_t w = std::min(width, m - i0);
      DequantizeBlock(qa, lda, i0, w, k, panel);
      RunBlasProducts(1, 1, CblasNoTrans, trans_b, w, n, k, panel, k, 0, b, ldb, 0,
                      c + i0 * ldc, ldc, 0);
    }
  }
  ReleaseBlasBuffers(reserved);
  tm_rt_free(panel);
}
