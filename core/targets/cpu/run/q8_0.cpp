#include "core/targets/cpu/run/q8_0.h"

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
#include "core/targets/cpu/run/blas_products.h"
#include "core/targets/cpu/run/half_convert.h"
#include "core/runtime/kernel_times.h"
#include "core/targets/cpu/run/lane_tree.h"
#include "core/targets/cpu/run/strip_products.h"
#include "core/targets/cpu/run/row_dots.h"
#include "core/runtime/worker_pool.h"
#include "core/support/fork_safe_once.h"
#include "core/support/host_cpu.h"

#define TM_Q8_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TM_Q8_AVX512 __attribute__((target("avx512f,avx512bw,avx2,fma,f16c")))

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
    case Variant::kAvx512:
      return CpuHas("avx512f") && CpuHas("avx512bw") && CpuHas("avx2") && CpuHas("fma") &&
             CpuHas("f16c");
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
// Dequantization (exact: an f16 times an int8 fits in f32), for the prefill strips.

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
// Activations in 16 bits (q8_0.h): each block of 32 values of a row of x becomes a
// power-of-two scale s = 2^e and 32 integers qx = round(x / s), |qx| <= 2^14.

// A float of bits `bits`.
inline float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// 2^e as an f32, for e in [-149, 127] (subnormal below -126).
inline float PowerOfTwo(int e) {
  return FromBits(e >= -126 ? static_cast<uint32_t>(e + 127) << 23 : uint32_t{1} << (e + 149));
}

constexpr uint32_t kAbsMask = 0x7fffffffu, kInfinityBits = 0x7f800000u;
const float kPoisonScale = FromBits(0x7fc00000u);  // a quiet NaN: the block had one

// The scale exponent of a block whose largest magnitude has the bits amax_bits (finite,
// nonzero): floor(log2 amax) - 13, so that amax / 2^e is in [2^13, 2^14), but at least -149
// (the smallest power of two an f32 holds; amax / 2^-149 is then below 2^14 too).
inline int BlockExponent(uint32_t amax_bits) {
  const int field = static_cast<int>(amax_bits >> 23);
  const int log2 = field != 0 ? field - 127 : (31 - __builtin_clz(amax_bits)) - 149;
  return std::max(-149, log2 - 13);
}

// x / 2^e is (x * 2^a) * 2^b with a + b = -e, both powers normal f32s: each multiply is
// exact, or underflows only where the quotient is below 2^-68 and so rounds to 0 anyway.
struct Unscale {
  float up, down;
  explicit Unscale(int e) : up(PowerOfTwo(-e / 2)), down(PowerOfTwo(-e - -e / 2)) {}
};

// v rounded to the nearest integer, ties to even, whatever the rounding mode (|v| < 2^23).
inline int32_t RoundToEven(float v) {
  const float r = std::floor(v), rest = v - r;  // both exact
  const int32_t n = static_cast<int32_t>(r);
  return n + (rest > 0.5f || (rest == 0.5f && (n & 1) != 0) ? 1 : 0);
}

// The canonical quantizer of one block: x[0], x[incx], ... x[31 * incx] into q; returns s
// (NaN when the block holds a NaN or an infinity, its q then 0; 1 for a block of zeros).
float QuantizeXBlock(const float *x, int64_t incx, int16_t *q) {
  uint32_t amax_bits = 0;
  for (int j = 0; j < kQ8BlockElements; ++j)
    amax_bits = std::max(amax_bits, FloatBits(x[j * incx]) & kAbsMask);
  if (amax_bits == 0 || amax_bits >= kInfinityBits) {
    std::fill(q, q + kQ8BlockElements, int16_t{0});
    return amax_bits == 0 ? 1.0f : kPoisonScale;
  }
  const int e = BlockExponent(amax_bits);
  const Unscale unscale(e);
  for (int j = 0; j < kQ8BlockElements; ++j)
    q[j] = static_cast<int16_t>(RoundToEven(x[j * incx] * unscale.up * unscale.down));
  return PowerOfTwo(e);
}

// The same for every block of a contiguous row of x, eight values per instruction.
TM_Q8_AVX2 void QuantizeXRowAvx2(const float *x, int64_t blocks, int16_t *q, float *s) {
  const __m256i abs_mask = _mm256_set1_epi32(static_cast<int>(kAbsMask));
  for (int64_t b = 0; b < blocks; ++b, x += kQ8BlockElements, q += kQ8BlockElements) {
    __m256 v[4];
    __m256i amax = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      v[c] = _mm256_loadu_ps(x + 8 * c);
      amax = _mm256_max_epu32(amax, _mm256_and_si256(_mm256_castps_si256(v[c]), abs_mask));
    }
    __m128i m4 = _mm_max_epu32(_mm256_castsi256_si128(amax), _mm256_extracti128_si256(amax, 1));
    m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0x4e));
    m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0xb1));
    const uint32_t amax_bits = static_cast<uint32_t>(_mm_cvtsi128_si32(m4));
    if (amax_bits == 0 || amax_bits >= kInfinityBits) {
      s[b] = QuantizeXBlock(x, 1, q);
      continue;
    }
    const int e = BlockExponent(amax_bits);
    const Unscale unscale(e);
    const __m256 up = _mm256_set1_ps(unscale.up), down = _mm256_set1_ps(unscale.down);
    __m256i n[4];
    for (int c = 0; c < 4; ++c)
      n[c] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_mul_ps(v[c], up), down),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // packs works within 128-bit halves: [0-3 8-11 4-7 12-15]; the permute restores order.
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(q),
                        _mm256_permute4x64_epi64(_mm256_packs_epi32(n[0], n[1]), 0xd8));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + 16),
                        _mm256_permute4x64_epi64(_mm256_packs_epi32(n[2], n[3]), 0xd8));
    s[b] = PowerOfTwo(e);
  }
}

// X's nx rows (elements incx apart, rows ldx apart) quantized: row v's integers at
// q + v * k, its scales at s + v * (k / 32). The vector code where the variant has it.
void QuantizeX(Variant variant, int64_t nx, const float *x, int64_t ldx, int64_t incx,
               int64_t k, int16_t *q, float *s) {
  const int64_t blocks = k / kQ8BlockElements;
  for (int64_t v = 0; v < nx; ++v) {
    const float *row = x + v * ldx;
    if (variant != Variant::kPortable && incx == 1) {
      QuantizeXRowAvx2(row, blocks, q + v * k, s + v * blocks);
      continue;
    }
    for (int64_t b = 0; b < blocks; ++b)
      s[v * blocks + b] = QuantizeXBlock(row + b * kQ8BlockElements * incx, incx,
                                         q + v * k + b * kQ8BlockElements);
  }
}

// X quantized, as the kernels read it: row v's integers at q + v * k, scales at
// s + v * blocks.
struct QuantizedX {
  const int16_t *q;
  const float *s;
  int64_t k, blocks;
};

// ---------------------------------------------------------------------------------------
// Dot products in the canonical order (q8_0.h). Each kernel computes, for S rows of A
// (row[s], from block 0) and V rows of X (from row v0), out[v * S + s] = the canonical sum
// over the blocks.

// One block of one row into the lanes: t = the exact integer sum of a pair of products,
// acc[l] = fma(float(t), d * s, acc[l]).
inline void BlockPortable(const uint8_t *p, const int16_t *qx, float s, const float *table,
                          float *acc) {
  const float d = table[ScaleBitsAt(p)] * s;
  const auto *q = reinterpret_cast<const int8_t *>(p + 2);
  for (int l = 0; l < 16; ++l) {
    const int32_t t = q[2 * l] * qx[2 * l] + q[2 * l + 1] * qx[2 * l + 1];
    acc[l] = std::fma(static_cast<float>(t), d, acc[l]);
  }
}

template <int S, int V>
void KernelPortable(const uint8_t *const *row, const QuantizedX &x, int64_t v0,
                    const float *table, float *out) {
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s) {
      float acc[16] = {};
      for (int64_t b = 0; b < x.blocks; ++b)
        BlockPortable(row[s] + b * kQ8BlockBytes, x.q + (v0 + v) * x.k + b * kQ8BlockElements,
                      x.s[(v0 + v) * x.blocks + b], table, acc);
      out[v * S + s] = Tree16(acc);
    }
}

// The whole product from a strided x, each block of x quantized as it is needed: where no
// scratch for the quantized X can be had (the same bits, slowly).
void DotsUnquantized(const uint8_t *a, int64_t lda, int64_t i0, int64_t i1, int64_t k,
                     int64_t nx, const float *x, int64_t ldx, int64_t incx, float *y,
                     int64_t ldy, int64_t incy) {
  const float *table = F16Table();
  int16_t qx[kQ8BlockElements];
  for (int64_t v = 0; v < nx; ++v)
    for (int64_t i = i0; i < i1; ++i) {
      float acc[16] = {};
      for (int64_t b = 0; b < k / kQ8BlockElements; ++b) {
        const float s = QuantizeXBlock(x + v * ldx + b * kQ8BlockElements * incx, incx, qx);
        BlockPortable(a + i * lda + b * kQ8BlockBytes, qx, s, table, acc);
      }
      y[v * ldy + i * incy] += Tree16(acc);
    }
}

// Sixteen int8 values as int16.
TM_Q8_AVX2 __attribute__((always_inline)) inline __m256i Sixteen(const uint8_t *p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

// AVX2: lanes 0-7 (values 0-15) in acc[.][.][0], lanes 8-15 (values 16-31) in
// acc[.][.][1]; VPMADDWD sums each pair of products exactly. Each row's stream is
// prefetched kPrefetch bytes ahead, once per block (0: not at all).
template <int S, int V, int kPrefetch>
TM_Q8_AVX2 __attribute__((always_inline)) inline void KernelAvx2(
    const uint8_t *const *row, const QuantizedX &x, int64_t v0, const float *table,
    float *out) {
  __m256 acc[V][S][2];
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s) acc[v][s][0] = acc[v][s][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    for (int s = 0; s < S; ++s) {
      const uint8_t *p = row[s] + b * kQ8BlockBytes;
      if constexpr (kPrefetch > 0) _mm_prefetch(reinterpret_cast<const char *>(p) + kPrefetch, _MM_HINT_T0);
      const float dw = table[ScaleBitsAt(p)];
      const __m256i w0 = Sixteen(p + 2), w1 = Sixteen(p + 18);
      for (int v = 0; v < V; ++v) {
        const int16_t *qx = x.q + (v0 + v) * x.k + b * kQ8BlockElements;
        const __m256 d = _mm256_set1_ps(dw * x.s[(v0 + v) * x.blocks + b]);
        const auto *q = reinterpret_cast<const __m256i *>(qx);
        const __m256i t0 = _mm256_madd_epi16(w0, _mm256_loadu_si256(q));
        const __m256i t1 = _mm256_madd_epi16(w1, _mm256_loadu_si256(q + 1));
        acc[v][s][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t0), d, acc[v][s][0]);
        acc[v][s][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t1), d, acc[v][s][1]);
      }
    }
  }
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s)
      out[v * S + s] = Tree256(acc[v][s][0], acc[v][s][1]);
}

// AVX-512 (F and BW): lanes 0-15 in one zmm; a block's 32 weights widened to int16 by one
// VPMOVSXBW and multiplied by one VPMADDWD.
template <int S, int V, int kPrefetch>
TM_Q8_AVX512 __attribute__((always_inline)) inline void KernelAvx512(
    const uint8_t *const *row, const QuantizedX &x, int64_t v0, const float *table,
    float *out) {
  __m512 acc[V][S];
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s) acc[v][s] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    __m512i qx[V];
    __m512 sx[V];
    for (int v = 0; v < V; ++v) {
      qx[v] = _mm512_loadu_si512(x.q + (v0 + v) * x.k + b * kQ8BlockElements);
      sx[v] = _mm512_set1_ps(x.s[(v0 + v) * x.blocks + b]);
      // Hidden from the compiler as a broadcast: it would otherwise multiply the two scales
      // as scalars and broadcast the product (VMULSS, VBROADCASTSS: two vector operations
      // per block and row), where one VMULPS with the weight scale's broadcast load folded
      // in does it with the same bits. The kernel is short of vector throughput when two
      // threads share a core, so each operation saved shows.
      __asm__("" : "+v"(sx[v]));
    }
    for (int s = 0; s < S; ++s) {
      const uint8_t *p = row[s] + b * kQ8BlockBytes;
      if constexpr (kPrefetch > 0) _mm_prefetch(reinterpret_cast<const char *>(p) + kPrefetch, _MM_HINT_T0);
      const __m512 dw = _mm512_set1_ps(table[ScaleBitsAt(p)]);
      const __m512i w =
          _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 2)));
      for (int v = 0; v < V; ++v)
        acc[v][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(w, qx[v])),
                                    _mm512_mul_ps(dw, sx[v]), acc[v][s]);
    }
  }
  for (int v = 0; v < V; ++v)
    for (int s = 0; s < S; ++s) out[v * S + s] = Tree512(acc[v][s]);
}

// The kernels of one variant, for DotsLoop: kStreams rows of A in lockstep (parts of the
// range far apart, as gemv_kernels.cpp's streams), each stream prefetched kPrefetch bytes
// ahead once per block, and kRowsOfX rows of x at a time when there are several.
// bench/q8_gemv_bandwidth.cpp compares these choices with a plain read of the same bytes on
// GPT-2 124M's decode shapes: four streams 2 KB ahead come closest to it; eight streams,
// 4 KB ahead, no prefetch or adjacent rows instead of far-apart parts all read slower.
struct PortableKernels {
  static constexpr int kStreams = 1, kRowsOfX = 1;
  template <int S, int V>
  static void Run(const uint8_t *const *row, const QuantizedX &x, int64_t v0,
                  const float *table, float *out) {
    KernelPortable<S, V>(row, x, v0, table, out);
  }
};
struct Avx2Kernels {
  // Four streams of two accumulators each: eight of the sixteen registers (the widened
  // weights, the scale and the products take the rest). Several rows of x: two rows of A
  // by two of x.
  static constexpr int kStreams = 4, kStreamsX = 2, kRowsOfX = 2, kPrefetch = 2048;
  template <int S, int V>
  TM_Q8_AVX2 static void Run(const uint8_t *const *row, const QuantizedX &x, int64_t v0,
                             const float *table, float *out) {
    KernelAvx2<S, V, kPrefetch>(row, x, v0, table, out);
  }
};
struct Avx512Kernels {
  static constexpr int kStreams = 4, kStreamsX = 4, kRowsOfX = 4, kPrefetch = 2048;
  template <int S, int V>
  TM_Q8_AVX512 static void Run(const uint8_t *const *row, const QuantizedX &x, int64_t v0,
                               const float *table, float *out) {
    KernelAvx512<S, V, kPrefetch>(row, x, v0, table, out);
  }
};

// Y[v * ldy + i * incy] += A row i . X row v for rows [i0, i1) of A and the rows of X: the
// range cut into S parts read side by side (S streams from memory), each group of S rows
// of A dotted with V rows of X at a time, then with two (when V > 2) and one at a time for
// those left over; the rows of A left over one at a time. Every output is one canonical
// sum, whatever S, V, the number of rows of X or the range.
template <typename K, int S, int V>
inline void DotsLoop(const uint8_t *a, int64_t lda, int64_t nx, const QuantizedX &x,
                     float *y, int64_t ldy, int64_t incy, int64_t i0, int64_t i1,
                     const float *table) {
  const int64_t part = (i1 - i0) / S;
  auto group = [&](auto rows_of_x, const uint8_t *const *rows, int64_t v, int64_t r) {
    constexpr int W = decltype(rows_of_x)::value;
    float sums[W * S];
    K::template Run<S, W>(rows, x, v, table, sums);
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
      K::template Run<1, 1>(&row, x, v, table, &sum);
      y[v * ldy + i * incy] += sum;
    }
  }
}

template <typename K>
inline void Dots(const uint8_t *a, int64_t lda, int64_t nx, const QuantizedX &x, float *y,
                 int64_t ldy, int64_t incy, int64_t i0, int64_t i1, const float *table) {
  if (nx == 1)
    DotsLoop<K, K::kStreams, 1>(a, lda, nx, x, y, ldy, incy, i0, i1, table);
  else if constexpr (K::kRowsOfX > 1)
    DotsLoop<K, K::kStreamsX, K::kRowsOfX>(a, lda, nx, x, y, ldy, incy, i0, i1, table);
  else
    DotsLoop<K, K::kStreams, 1>(a, lda, nx, x, y, ldy, incy, i0, i1, table);
}

// Each variant's loop flattened into one function in its own target context (everything
// it calls inlined: gemv_kernels.cpp measured a call per group of rows at 3-9%).
TM_Q8_AVX2 __attribute__((flatten)) void DotsAvx2(const uint8_t *a, int64_t lda, int64_t nx,
                                                  const QuantizedX &x, float *y, int64_t ldy,
                                                  int64_t incy, int64_t i0, int64_t i1) {
  Dots<Avx2Kernels>(a, lda, nx, x, y, ldy, incy, i0, i1, F16Table());
}
TM_Q8_AVX512 __attribute__((flatten)) void DotsAvx512(const uint8_t *a, int64_t lda,
                                                      int64_t nx, const QuantizedX &x,
                                                      float *y, int64_t ldy, int64_t incy,
                                                      int64_t i0, int64_t i1) {
  Dots<Avx512Kernels>(a, lda, nx, x, y, ldy, incy, i0, i1, F16Table());
}
void DotsPortable(const uint8_t *a, int64_t lda, int64_t nx, const QuantizedX &x, float *y,
                  int64_t ldy, int64_t incy, int64_t i0, int64_t i1) {
  Dots<PortableKernels>(a, lda, nx, x, y, ldy, incy, i0, i1, F16Table());
}

void DotsVariant(Variant variant, const uint8_t *a, int64_t lda, int64_t nx,
                 const QuantizedX &x, float *y, int64_t ldy, int64_t incy, int64_t i0,
                 int64_t i1) {
  switch (variant) {
    case Variant::kAvx512: DotsAvx512(a, lda, nx, x, y, ldy, incy, i0, i1); break;
    case Variant::kAvx2: DotsAvx2(a, lda, nx, x, y, ldy, incy, i0, i1); break;
    default: DotsPortable(a, lda, nx, x, y, ldy, incy, i0, i1);
  }
}

// Scratch for X's rows quantized: one allocation, the integers then the scales; ok() false
// when it cannot be had.
class QuantizedXScratch {
 public:
  QuantizedXScratch(int64_t nx, int64_t k) : k_(k), blocks_(k / kQ8BlockElements) {
    q_ = static_cast<int16_t *>(std::malloc(static_cast<size_t>(nx * k) * sizeof(int16_t) +
                                            static_cast<size_t>(nx * blocks_) * sizeof(float) + 1));
    s_ = q_ ? reinterpret_cast<float *>(q_ + nx * k) : nullptr;
  }
  ~QuantizedXScratch() { std::free(q_); }
  QuantizedXScratch(const QuantizedXScratch &) = delete;
  QuantizedXScratch &operator=(const QuantizedXScratch &) = delete;
  bool ok() const { return q_ != nullptr; }
  int16_t *q() { return q_; }
  float *s() { return s_; }
  QuantizedX view() const { return {q_, s_, k_, blocks_}; }

 private:
  int64_t k_, blocks_;
  int16_t *q_;
  float *s_;
};

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

void QuantizeActivations(Variant variant, const float *x, int64_t k, int16_t *q, float *s) {
  QuantizeX(variant, 1, x, k, 1, k, q, s);
}

void GemvDots(Variant variant, int64_t i0, int64_t i1, int64_t k, const uint8_t *a,
              int64_t lda_bytes, int64_t nx, const float *x, int64_t ldx, float *y,
              int64_t ldy, int64_t incy) {
  QuantizedXScratch scratch(nx, k);
  if (!scratch.ok()) {
    DotsUnquantized(a, lda_bytes, i0, i1, k, nx, x, ldx, 1, y, ldy, incy);
    return;
  }
  QuantizeX(variant, nx, x, ldx, 1, k, scratch.q(), scratch.s());
  DotsVariant(variant, a, lda_bytes, nx, scratch.view(), y, ldy, incy, i0, i1);
}

void GemvDotsWithoutScratch(int64_t m, int64_t k, const uint8_t *a, int64_t lda_bytes,
                            int64_t nx, const float *x, int64_t ldx, int64_t incx, float *y,
                            int64_t ldy, int64_t incy) {
  DotsUnquantized(a, lda_bytes, 0, m, k, nx, x, ldx, incx, y, ldy, incy);
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
  QuantizedXScratch scratch(nx, k);
  if (!scratch.ok()) {  // no scratch: each block of x quantized as it is needed (same bits)
    DotsUnquantized(aq, lda_bytes, 0, m, k, nx, x, ldx, incx, y, ldy, incy);
    return;
  }
  const q8_0_internal::Variant variant = PickedVariant();
  QuantizeX(variant, nx, x, ldx, incx, k, scratch.q(), scratch.s());
  const QuantizedX quantized = scratch.view();
  RowRangesOverPool(m, k, Q8RowBytes(k), [&](int64_t i0, int64_t i1) {
    DotsVariant(variant, aq, lda_bytes, nx, quantized, y, ldy, incy, i0, i1);
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
  // Strips of C's columns from B^T's stored rows (q8_operand 1), or of C's rows from A's:
  // either way `count` stored rows of k, dequantized.
  const auto *q8 = static_cast<const uint8_t *>(q8_operand == 0 ? a : b);
  ProductByStrips(q8_operand, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                  [&](int64_t first, int64_t count, float *strip) {
                    DequantizeRowsAny(q8 + first * q8_ld, q8_ld, count, k, strip, k);
                  });
}
