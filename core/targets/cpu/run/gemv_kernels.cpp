#include "core/targets/cpu/run/gemv_kernels.h"

// GCC 12 warns that the AVX-512 intrinsics' own placeholder (_mm512_undefined_*) "may be
// used uninitialized" wherever they are inlined; the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>

#include "core/support/fork_safe_once.h"
#include "core/support/host_cpu.h"
#include "core/targets/cpu/run/half_convert.h"
#include "core/runtime/kernel_times.h"
#include "core/targets/cpu/run/lane_tree.h"
#include "core/targets/cpu/run/row_dots.h"
#include "core/runtime/worker_pool.h"

namespace tinymlir {
namespace {

// Rows per chunk of tm_rt_gemv_rows's summed dimension (a multiple of RowsKernel's eight).
constexpr int64_t kRowsPerChunk = 128;

// The kernels are written once over an element type `E` (f32, f16 or bf16 bits) and
// instantiated per variant: with AVX2 and FMA intrinsics (f16 widened by F16C, bf16 by a
// shift, eight elements at a time, straight from the streamed row into a register), for the
// dot products also with AVX-512F (sixteen at a time), and as portable scalar code
// (std::fma). Every variant does the same operations in the same order on every
// element (each fused multiply-add where the other has one; nothing else contracted: the
// file is compiled with -ffp-contract=off), so
// - results do not depend on which variant a machine runs, and
// - a half-precision matrix gives exactly the bits of its f32 widening (an F16 checkpoint
//   keeps the tokens of F32), since widening is exact.
struct F32 {
  using T = float;
  static float One(const float *p) { return *p; }
  __attribute__((target("avx2,fma,f16c"), always_inline)) static __m256 Eight(const float *p) {
    return _mm256_loadu_ps(p);
  }
  __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static __m512 Sixteen(
      const float *p) {
    return _mm512_loadu_ps(p);
  }
};
struct F16 {
  using T = uint16_t;
  static float One(const uint16_t *p) { return HalfToFloat(HalfKind::kF16, *p); }
  __attribute__((target("avx2,fma,f16c"), always_inline)) static __m256 Eight(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static __m512 Sixteen(
      const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  }
};
struct BF16 {
  using T = uint16_t;
  static float One(const uint16_t *p) { return HalfToFloat(HalfKind::kBF16, *p); }
  __attribute__((target("avx2,fma,f16c"), always_inline)) static __m256 Eight(const uint16_t *p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static __m512 Sixteen(
      const uint16_t *p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
};

// Which variant this machine runs (AVX-512F for the dot products, AVX2, FMA and F16C, or the
// portable code), as TINYMLIR_CPU_EXCLUDE leaves its extensions (core/support/host_cpu.h).
ForkSafeOnce<bool> use_avx2, use_avx512;

bool UseAvx2() {
  return use_avx2.Get([] { return CpuHas("avx2") && CpuHas("fma") && CpuHas("f16c"); });
}

// The dot products' AVX-512F variant (the row-scaling kernels have none).
bool UseAvx512() {
  return use_avx512.Get([] { return UseAvx2() && CpuHas("avx512f"); });
}

// y[j] += x[k] W[k, j] + ... for one group of `rows` (1 or 8) rows from k, columns [j0, j1),
// one element at a time. A group of eight is summed in two chains, the even rows and the odd
// rows (each a product, then fused multiply-adds in row order), added together, then added
// to y; a single row is one product added to y.
template <typename E>
inline void RowsScalar(const float *x, const typename E::T *w, int64_t ldw, float *y,
                       int64_t k, int rows, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    auto wv = [&](int r) { return E::One(w + (k + r) * ldw + j); };
    if (rows == 1) {
      y[j] = y[j] + x[k] * wv(0);
      continue;
    }
    float even = x[k] * wv(0), odd = x[k + 1] * wv(1);
    for (int r = 2; r < 8; r += 2) {
      even = std::fma(x[k + r], wv(r), even);
      odd = std::fma(x[k + r + 1], wv(r + 1), odd);
    }
    y[j] = y[j] + (even + odd);
  }
}

// Columns of W per block when several rows of x share the weight rows: eight weight rows of
// this many columns stay in L1 while each row of x takes its turn (8 KB of f32).
constexpr int64_t kSharedColumns = 256;

// Y[i, :] += X[i, k0..k1) @ W[k0..k1, :] for the m rows i of X (row stride ldx) and Y (ldy).
// Eight weight rows at a time: each Y row is loaded and stored once per eight streamed
// weight rows; the weight rows left over one at a time. Every Y element is summed the same
// way whatever m is (the blocks of columns only change the order elements are visited in),
// so a row of a prompt gets the bits it gets alone, as a decode step.
template <typename E>
__attribute__((target("avx2,fma,f16c"))) void RowsAvx2(int64_t m, const float *x, int64_t ldx,
                                                   const typename E::T *w, int64_t ldw,
                                                   float *y, int64_t ldy, int64_t k0,
                                                   int64_t k1, int64_t n) {
  // One row streams each weight row from end to end (decode); several share column blocks.
  const int64_t block = m == 1 ? n : kSharedColumns;
  int64_t k = k0;
  for (; k + 8 <= k1; k += 8) {
    const typename E::T *w0 = w + k * ldw;
    for (int64_t c0 = 0; c0 < n; c0 += block) {
      const int64_t c1 = std::min(n, c0 + block);
      for (int64_t i = 0; i < m; ++i) {
        const float *xi = x + i * ldx;
        float *yi = y + i * ldy;
        __m256 a[8];
        for (int r = 0; r < 8; ++r) a[r] = _mm256_set1_ps(xi[k + r]);
        int64_t j = c0;
        for (; j + 8 <= c1; j += 8) {
          __m256 even = _mm256_mul_ps(a[0], E::Eight(w0 + j));
          __m256 odd = _mm256_mul_ps(a[1], E::Eight(w0 + ldw + j));
          for (int r = 2; r < 8; r += 2) {
            even = _mm256_fmadd_ps(a[r], E::Eight(w0 + r * ldw + j), even);
            odd = _mm256_fmadd_ps(a[r + 1], E::Eight(w0 + (r + 1) * ldw + j), odd);
          }
          _mm256_storeu_ps(yi + j, _mm256_add_ps(_mm256_loadu_ps(yi + j), _mm256_add_ps(even, odd)));
        }
        RowsScalar<E>(xi, w, ldw, yi, k, 8, j, c1);
      }
    }
  }
  for (; k < k1; ++k)
    for (int64_t i = 0; i < m; ++i) {
      const float *xi = x + i * ldx;
      float *yi = y + i * ldy;
      const __m256 a = _mm256_set1_ps(xi[k]);
      int64_t j = 0;
      for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(yi + j, _mm256_add_ps(_mm256_loadu_ps(yi + j),
                                               _mm256_mul_ps(a, E::Eight(w + k * ldw + j))));
      RowsScalar<E>(xi, w, ldw, yi, k, 1, j, n);
    }
}

template <typename E>
void RowsPortable(int64_t m, const float *x, int64_t ldx, const typename E::T *w, int64_t ldw,
                  float *y, int64_t ldy, int64_t k0, int64_t k1, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) RowsScalar<E>(x + i * ldx, w, ldw, y + i * ldy, k, 8, 0, n);
    for (; k < k1; ++k) RowsScalar<E>(x + i * ldx, w, ldw, y + i * ldy, k, 1, 0, n);
  }
}

template <typename E>
void RowsKernel(int64_t m, const float *x, int64_t ldx, const typename E::T *w, int64_t ldw,
                float *y, int64_t ldy, int64_t k0, int64_t k1, int64_t n) {
  if (UseAvx2()) RowsAvx2<E>(m, x, ldx, w, ldw, y, ldy, k0, k1, n);
  else RowsPortable<E>(m, x, ldx, w, ldw, y, ldy, k0, k1, n);
}

// Dot products of `S` rows of A with a contiguous x, in lockstep: each row is its own
// stream (more prefetch streams in flight than one row after another). Every row is summed
// the same way, in every variant: sixteen lanes over the body j < k - k % 16 (lane l takes
// j = l mod 16, fused multiply-adds, from 0), the lanes added in a fixed tree (l + 8, then
// l + 4, l + 2, l + 1: lane_tree.h), then the tail j in [body, k) fused into that sum in
// order.
// (Sixteen lanes so that the AVX-512 variant reads a 64-byte vector per instruction, which
// streams memory faster than 32-byte reads: docs/PERFORMANCE.md.)
template <typename E>
inline float DotTail(float sum, const typename E::T *row, const float *x, int64_t body,
                     int64_t k) {
  for (int64_t j = body; j < k; ++j) sum = std::fma(E::One(row + j), x[j], sum);
  return sum;
}

#define TM_GEMV_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

// AVX2: lanes 0-7 and 8-15 of each row in two ymm accumulators.
template <typename E, int S>
__attribute__((target("avx2,fma,f16c"))) void DotRowsAvx2(const typename E::T *const *row,
                                                      const float *x, int64_t k, float *out) {
  __m256 lo[S], hi[S];
  for (int s = 0; s < S; ++s) lo[s] = hi[s] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + 8);
    for (int s = 0; s < S; ++s) {
      lo[s] = _mm256_fmadd_ps(E::Eight(row[s] + j), x0, lo[s]);
      hi[s] = _mm256_fmadd_ps(E::Eight(row[s] + j + 8), x1, hi[s]);
    }
  }
  for (int s = 0; s < S; ++s) out[s] = DotTail<E>(Tree256(lo[s], hi[s]), row[s], x, j, k);
}

// DotRowsAvx2 for two rows of x at once: each weight vector loaded once feeds both (a
// short prompt's products are bound by loads, not by memory); every accumulator is updated
// in the same order, so the sums are the same bits.
template <typename E, int S>
__attribute__((target("avx2,fma,f16c"))) void DotRowsAvx2Pair(const typename E::T *const *row,
                                                             const float *x0, const float *x1,
                                                             int64_t k, float *out0,
                                                             float *out1) {
  __m256 lo0[S], hi0[S], lo1[S], hi1[S];
  for (int s = 0; s < S; ++s) lo0[s] = hi0[s] = lo1[s] = hi1[s] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    const __m256 a0 = _mm256_loadu_ps(x0 + j), a1 = _mm256_loadu_ps(x0 + j + 8);
    const __m256 b0 = _mm256_loadu_ps(x1 + j), b1 = _mm256_loadu_ps(x1 + j + 8);
    for (int s = 0; s < S; ++s) {
      const __m256 w0 = E::Eight(row[s] + j), w1 = E::Eight(row[s] + j + 8);
      lo0[s] = _mm256_fmadd_ps(w0, a0, lo0[s]);
      hi0[s] = _mm256_fmadd_ps(w1, a1, hi0[s]);
      lo1[s] = _mm256_fmadd_ps(w0, b0, lo1[s]);
      hi1[s] = _mm256_fmadd_ps(w1, b1, hi1[s]);
    }
  }
  for (int s = 0; s < S; ++s) {
    out0[s] = DotTail<E>(Tree256(lo0[s], hi0[s]), row[s], x0, j, k);
    out1[s] = DotTail<E>(Tree256(lo1[s], hi1[s]), row[s], x1, j, k);
  }
}

// AVX-512: the sixteen lanes of each row in one zmm accumulator.
template <typename E, int S>
TM_GEMV_AVX512 void DotRowsAvx512(const typename E::T *const *row, const float *x, int64_t k,
                                  float *out) {
  __m512 acc[S];
  for (int s = 0; s < S; ++s) acc[s] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    const __m512 xv = _mm512_loadu_ps(x + j);
    for (int s = 0; s < S; ++s) acc[s] = _mm512_fmadd_ps(E::Sixteen(row[s] + j), xv, acc[s]);
  }
  for (int s = 0; s < S; ++s) out[s] = DotTail<E>(Tree512(acc[s]), row[s], x, j, k);
}

template <typename E, int S>
TM_GEMV_AVX512 void DotRowsAvx512Pair(const typename E::T *const *row, const float *x0,
                                      const float *x1, int64_t k, float *out0, float *out1) {
  __m512 acc0[S], acc1[S];
  for (int s = 0; s < S; ++s) acc0[s] = acc1[s] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    const __m512 a = _mm512_loadu_ps(x0 + j), b = _mm512_loadu_ps(x1 + j);
    for (int s = 0; s < S; ++s) {
      const __m512 w = E::Sixteen(row[s] + j);
      acc0[s] = _mm512_fmadd_ps(w, a, acc0[s]);
      acc1[s] = _mm512_fmadd_ps(w, b, acc1[s]);
    }
  }
  for (int s = 0; s < S; ++s) {
    out0[s] = DotTail<E>(Tree512(acc0[s]), row[s], x0, j, k);
    out1[s] = DotTail<E>(Tree512(acc1[s]), row[s], x1, j, k);
  }
}

// DotRowsAvx512Pair for four rows of x: sixteen accumulators, each weight vector loaded once
// for all four rows, so that a few rows (a batch's decode step, a short prompt) are bound by
// the multiply-adds rather than by loads; each sum is still the same bits.
template <typename E, int S>
TM_GEMV_AVX512 void DotRowsAvx512Quad(const typename E::T *const *row, const float *const *x,
                                      int64_t k, int64_t ahead, float (*out)[S]) {
  __m512 acc[4][S];
  for (int v = 0; v < 4; ++v)
    for (int s = 0; s < S; ++s) acc[v][s] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    for (int s = 0; s < S; ++s)
      _mm_prefetch(reinterpret_cast<const char *>(row[s] + ahead + j), _MM_HINT_T0);
    __m512 xv[4];
    for (int v = 0; v < 4; ++v) xv[v] = _mm512_loadu_ps(x[v] + j);
    for (int s = 0; s < S; ++s) {
      const __m512 w = E::Sixteen(row[s] + j);
      for (int v = 0; v < 4; ++v) acc[v][s] = _mm512_fmadd_ps(w, xv[v], acc[v][s]);
    }
  }
  for (int v = 0; v < 4; ++v)
    for (int s = 0; s < S; ++s) out[v][s] = DotTail<E>(Tree512(acc[v][s]), row[s], x[v], j, k);
}

template <typename E, int S>
void DotRowsPortable(const typename E::T *const *row, const float *x, int64_t k, float *out) {
  for (int s = 0; s < S; ++s) {
    float acc[16] = {};
    int64_t j = 0;
    for (; j + 16 <= k; j += 16)
      for (int l = 0; l < 16; ++l) acc[l] = std::fma(E::One(row[s] + j + l), x[j + l], acc[l]);
    out[s] = DotTail<E>(Tree16(acc), row[s], x, j, k);
  }
}

// The row functions of the variants, for DotsLoop: kStreams rows of A for one row of x,
// kPairStreams for two (0: no pairs), eight accumulators in registers either way (AVX2: two
// ymm per row). One row of x (decode), AVX-512: four streams, which keep closer to the
// machine's read bandwidth than eight.
struct Avx512Dots {
  static constexpr int kStreams = 4, kPairStreams = 4;
  static constexpr bool kQuads = true;  // four rows of x at once (Quad)
  template <typename E, int S>
  TM_GEMV_AVX512 static void Quad(const typename E::T *const *row, const float *const *x,
                                  int64_t k, int64_t ahead, float (*out)[S]) {
    DotRowsAvx512Quad<E, S>(row, x, k, ahead, out);
  }
  template <typename E, int S>
  TM_GEMV_AVX512 static void Rows(const typename E::T *const *row, const float *x, int64_t k,
                                  float *out) {
    DotRowsAvx512<E, S>(row, x, k, out);
  }
  template <typename E, int S>
  TM_GEMV_AVX512 static void Pair(const typename E::T *const *row, const float *x0,
                                  const float *x1, int64_t k, float *out0, float *out1) {
    DotRowsAvx512Pair<E, S>(row, x0, x1, k, out0, out1);
  }
};
struct Avx2Dots {
  static constexpr int kStreams = 4, kPairStreams = 2;
  static constexpr bool kQuads = false;
  template <typename E, int S>
  __attribute__((target("avx2,fma,f16c"))) static void Rows(
      const typename E::T *const *row, const float *x, int64_t k, float *out) {
    DotRowsAvx2<E, S>(row, x, k, out);
  }
  template <typename E, int S>
  __attribute__((target("avx2,fma,f16c"))) static void Pair(
      const typename E::T *const *row, const float *x0, const float *x1, int64_t k,
      float *out0, float *out1) {
    DotRowsAvx2Pair<E, S>(row, x0, x1, k, out0, out1);
  }
};
struct PortableDots {
  static constexpr int kStreams = 4, kPairStreams = 0;  // no Pair: DotsLoop never asks
  template <typename E, int S>
  static void Rows(const typename E::T *const *row, const float *x, int64_t k, float *out) {
    DotRowsPortable<E, S>(row, x, k, out);
  }
};

// Y[v * ldy + i * incy] += A row i . X row v for rows [i0, i1) of A and the nx rows of X
// (row stride ldx, contiguous): A's range cut into S parts read side by side, each group of
// S A rows (one per part) dotted with every X row while it is in the cache, four or two X
// rows at a time when kPairs (four where the variant has Quad). Each output is one DotRows sum, the same for any nx and any number
// of streams.
template <typename E, typename D, int S, bool kPairs>
void DotsLoop(const typename E::T *a, int64_t lda, int64_t nx, const float *x, int64_t ldx,
              int64_t k, float *y, int64_t ldy, int64_t incy, int64_t i0, int64_t i1) {
  const int64_t part = (i1 - i0) / S;  // rows per stream
  for (int64_t r = 0; r < part; ++r) {
    const typename E::T *rows[S];
    for (int s = 0; s < S; ++s) rows[s] = a + (i0 + s * part + r) * lda;
    int64_t v = 0;
    if constexpr (kPairs) {
      if constexpr (D::kQuads)
        for (; v + 4 <= nx; v += 4) {
          float sums[4][S];
          const float *xs[4] = {x + v * ldx, x + (v + 1) * ldx, x + (v + 2) * ldx,
                                x + (v + 3) * ldx};
          D::template Quad<E, S>(rows, xs, k, lda, sums);
          for (int u = 0; u < 4; ++u)
            for (int s = 0; s < S; ++s)
              y[(v + u) * ldy + (i0 + s * part + r) * incy] += sums[u][s];
        }
    }
    if constexpr (kPairs)
      for (; v + 2 <= nx; v += 2) {
        float sums0[S], sums1[S];
        D::template Pair<E, S>(rows, x + v * ldx, x + (v + 1) * ldx, k, sums0, sums1);
        for (int s = 0; s < S; ++s) {
          y[v * ldy + (i0 + s * part + r) * incy] += sums0[s];
          y[(v + 1) * ldy + (i0 + s * part + r) * incy] += sums1[s];
        }
      }
    for (; v < nx; ++v) {
      float sums[S];
      D::template Rows<E, S>(rows, x + v * ldx, k, sums);
      for (int s = 0; s < S; ++s) y[v * ldy + (i0 + s * part + r) * incy] += sums[s];
    }
  }
  for (int64_t i = i0 + S * part; i < i1; ++i) {
    const typename E::T *row = a + i * lda;
    for (int64_t v = 0; v < nx; ++v) {
      float sum;
      D::template Rows<E, 1>(&row, x + v * ldx, k, &sum);
      y[v * ldy + i * incy] += sum;
    }
  }
}

// DotsLoop with a vector variant's row functions, flattened: everything it calls is inlined
// here, in the variant's target context: a call per four rows costs much of a short row's
// time (a model with 128-element rows).
template <typename E>
TM_GEMV_AVX512 __attribute__((flatten)) void DotsAvx512(
    const typename E::T *a, int64_t lda, int64_t nx, const float *x, int64_t ldx, int64_t k,
    float *y, int64_t ldy, int64_t incy, int64_t i0, int64_t i1) {
  if (nx >= 2)
    DotsLoop<E, Avx512Dots, Avx512Dots::kPairStreams, true>(a, lda, nx, x, ldx, k, y, ldy,
                                                            incy, i0, i1);
  else
    DotsLoop<E, Avx512Dots, Avx512Dots::kStreams, false>(a, lda, nx, x, ldx, k, y, ldy, incy,
                                                         i0, i1);
}
template <typename E>
__attribute__((target("avx2,fma,f16c"), flatten)) void DotsAvx2(
    const typename E::T *a, int64_t lda, int64_t nx, const float *x, int64_t ldx, int64_t k,
    float *y, int64_t ldy, int64_t incy, int64_t i0, int64_t i1) {
  if (nx >= 2)
    DotsLoop<E, Avx2Dots, Avx2Dots::kPairStreams, true>(a, lda, nx, x, ldx, k, y, ldy, incy,
                                                        i0, i1);
  else
    DotsLoop<E, Avx2Dots, Avx2Dots::kStreams, false>(a, lda, nx, x, ldx, k, y, ldy, incy, i0,
                                                     i1);
}

// Y_b[v * ldy + i * incy] += A_b row i . X_b row v for rows [i0, i1) of every element b
// (A_b at a + b * stride_a elements, X_b and Y_b likewise): row i of every element before
// row i + 1, so a batch lying side by side in its rows (attention's heads in a K cache)
// is read in address order, one contiguous stream, as the prefetchers like it. Each output
// is one DotRows sum (the bits of DotsKernel).
template <typename E, typename D>
inline void BatchDotsLoop(int64_t batch, const typename E::T *a, int64_t lda, int64_t stride_a,
                          int64_t nx, const float *x, int64_t ldx, int64_t stride_x,
                          int64_t k, float *y, int64_t ldy, int64_t incy, int64_t stride_y,
                          int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t b = 0; b < batch; ++b) {
      const typename E::T *row = a + b * stride_a + i * lda;
      for (int64_t v = 0; v < nx; ++v) {
        float sum;
        D::template Rows<E, 1>(&row, x + b * stride_x + v * ldx, k, &sum);
        y[b * stride_y + v * ldy + i * incy] += sum;
      }
    }
}
template <typename E>
TM_GEMV_AVX512 __attribute__((flatten)) void BatchDotsAvx512(
    int64_t batch, const typename E::T *a, int64_t lda, int64_t stride_a, int64_t nx,
    const float *x, int64_t ldx, int64_t stride_x, int64_t k, float *y, int64_t ldy,
    int64_t incy, int64_t stride_y, int64_t i0, int64_t i1) {
  BatchDotsLoop<E, Avx512Dots>(batch, a, lda, stride_a, nx, x, ldx, stride_x, k, y, ldy, incy,
                               stride_y, i0, i1);
}
template <typename E>
__attribute__((target("avx2,fma,f16c"), flatten)) void BatchDotsAvx2(
    int64_t batch, const typename E::T *a, int64_t lda, int64_t stride_a, int64_t nx,
    const float *x, int64_t ldx, int64_t stride_x, int64_t k, float *y, int64_t ldy,
    int64_t incy, int64_t stride_y, int64_t i0, int64_t i1) {
  BatchDotsLoop<E, Avx2Dots>(batch, a, lda, stride_a, nx, x, ldx, stride_x, k, y, ldy, incy,
                             stride_y, i0, i1);
}
template <typename E>
void BatchDotsKernel(int64_t batch, const typename E::T *a, int64_t lda, int64_t stride_a,
                     int64_t nx, const float *x, int64_t ldx, int64_t stride_x, int64_t k,
                     float *y, int64_t ldy, int64_t incy, int64_t stride_y, int64_t i0,
                     int64_t i1) {
  if (UseAvx512())
    BatchDotsAvx512<E>(batch, a, lda, stride_a, nx, x, ldx, stride_x, k, y, ldy, incy, stride_y,
                       i0, i1);
  else if (UseAvx2())
    BatchDotsAvx2<E>(batch, a, lda, stride_a, nx, x, ldx, stride_x, k, y, ldy, incy, stride_y,
                     i0, i1);
  else
    BatchDotsLoop<E, PortableDots>(batch, a, lda, stride_a, nx, x, ldx, stride_x, k, y, ldy,
                                   incy, stride_y, i0, i1);
}

template <typename E>
void DotsKernel(const typename E::T *a, int64_t lda, int64_t nx, const float *x, int64_t ldx,
                int64_t k, float *y, int64_t ldy, int64_t incy, int64_t i0, int64_t i1) {
  if (UseAvx512()) DotsAvx512<E>(a, lda, nx, x, ldx, k, y, ldy, incy, i0, i1);
  else if (UseAvx2()) DotsAvx2<E>(a, lda, nx, x, ldx, k, y, ldy, incy, i0, i1);
  else DotsLoop<E, PortableDots, PortableDots::kStreams, false>(a, lda, nx, x, ldx, k, y, ldy,
                                                               incy, i0, i1);
}

// y[0..n) += p[0..n).
__attribute__((target_clones("avx512f", "avx2", "default")))
void AddInto(float *y, const float *p, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += p[j];
}


}  // namespace
}  // namespace tinymlir

using tinymlir::WorkerPool;

// These functions are called from generated code: nothing may throw through it, and they
// keep no thread_local state (a thread_local with a destructor pins the library in memory
// until the thread exits, so it could never be unloaded). Scratch memory is allocated per
// call; if it cannot be had, the product runs on the calling thread alone.

using tinymlir::kRowsPerChunk;

namespace {

// Y[i, :] += X[i, :] @ W for m rows, W's k rows summed, where rows(out, ld, k0, k1) adds
// X[:, k0..k1) @ W[k0..k1, :] into the m rows of out (row stride ld). The summed rows are cut
// into chunks of a fixed size, whatever the number of threads; each chunk's sum goes to its
// own partial rows, and the partials are added to Y in chunk order. So every Y element is
// summed in the same order for any TINYMLIR_NUM_THREADS and any m (bit-identical results),
// while each participant still streams whole contiguous weight rows (splitting over the
// outputs instead measured 6-11% slower on GPT-2's decode products). Which path runs
// depends on the shape alone.
template <typename Rows>
void GemvRows(int64_t m, int64_t k, int64_t n, float *y, int64_t ldy, const Rows &rows) {
  if (k * n < tinymlir::kParallelElements || k <= kRowsPerChunk) {
    rows(y, ldy, 0, k);
    return;
  }
  const int64_t chunks = (k + kRowsPerChunk - 1) / kRowsPerChunk;
  float *partial =
      static_cast<float *>(std::calloc(static_cast<size_t>(chunks * m * n), sizeof(float)));
  if (!partial) {  // no scratch: the rows in one pass (another summation order)
    rows(y, ldy, 0, k);
    return;
  }
  WorkerPool &pool = WorkerPool::Get();
  // Participants take chunks in turn from a shared counter, so a thread the machine slows
  // down (a vCPU shared with a neighbour) takes fewer; with fixed halves the other would
  // wait. Which thread sums a chunk does not change its bits.
  std::atomic<int64_t> next_chunk{0};
  auto run = [&](int) {
    for (int64_t c; (c = next_chunk.fetch_add(1, std::memory_order_relaxed)) < chunks;)
      rows(partial + c * m * n, n, c * kRowsPerChunk, std::min(k, (c + 1) * kRowsPerChunk));
  };
  if (pool.size() > 1) pool.ParallelFor(run); else run(0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < chunks; ++c)
      tinymlir::AddInto(y + i * ldy, partial + (c * m + i) * n, n);
  std::free(partial);
}

}  // namespace

namespace {

// Whether a matrix of `dtype` holds half-precision elements (2 bytes) rather than f32.
bool IsHalf(int32_t dtype) {
  const auto kind = static_cast<tinymlir::HalfKind>(dtype);
  return kind == tinymlir::HalfKind::kF16 || kind == tinymlir::HalfKind::kBF16;
}

// fn(E{}) with E the kernels' element type for `dtype` (F32, F16 or BF16).
template <typename Fn>
void WithElementType(int32_t dtype, const Fn &fn) {
  switch (static_cast<tinymlir::HalfKind>(dtype)) {
    case tinymlir::HalfKind::kF16: fn(tinymlir::F16{}); break;
    case tinymlir::HalfKind::kBF16: fn(tinymlir::BF16{}); break;
    default: fn(tinymlir::F32{});
  }
}

// tm_rt_gemv_rows's product, untimed.
void GemvRowsProduct(int32_t dtype, int64_t m, int64_t k, int64_t n, const float *x,
                     int64_t ldx, const void *w, int64_t ldw, float *y, int64_t ldy) {
  GemvRows(m, k, n, y, ldy, [&](float *out, int64_t ld, int64_t k0, int64_t k1) {
    WithElementType(dtype, [&](auto e) {
      using E = decltype(e);
      tinymlir::RowsKernel<E>(m, x, ldx, static_cast<const typename E::T *>(w), ldw, out, ld,
                              k0, k1, n);
    });
  });
}

// tm_rt_gemv_dots's product, untimed.
void GemvDotsProduct(int32_t dtype, int64_t m, int64_t k, const void *a, int64_t lda,
                     int64_t nx, const float *x, int64_t ldx, int64_t incx, float *y,
                     int64_t ldy, int64_t incy) {
  const bool half = IsHalf(dtype);
  const auto kind = static_cast<tinymlir::HalfKind>(dtype);
  const auto *af = static_cast<const float *>(a);
  const auto *ah = static_cast<const uint16_t *>(a);
  // Without scratch for a strided x: each dot product straight from it (another summation
  // order; only when memory has run out).
  auto unpacked = [&] {
    for (int64_t v = 0; v < nx; ++v)
      for (int64_t i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int64_t j = 0; j < k; ++j)
          sum += (half ? tinymlir::HalfToFloat(kind, ah[i * lda + j]) : af[i * lda + j]) *
                 x[v * ldx + j * incx];
        y[v * ldy + i * incy] += sum;
      }
  };
  tinymlir::DotsOverRows(
      m, k, k * (half ? 2 : 4), nx, x, ldx, incx,
      [&](const float *xs, int64_t ld, int64_t i0, int64_t i1) {
        WithElementType(dtype, [&](auto e) {
          using E = decltype(e);
          tinymlir::DotsKernel<E>(static_cast<const typename E::T *>(a), lda, nx, xs, ld, k,
                                  y, ldy, incy, i0, i1);
        });
      },
      unpacked);
}

// Rows of the batched kernels handled per call of a row kernel, and the fewest the pool's
// ranges of tm_rt_gemv_dots_batched take: a multiple of eight (the rows kernels' groups);
// 16 of a 12-head attention's cache rows are 48 KB, and a decode step's smallest cache (32
// rows) two groups, one for each thread.
constexpr int64_t kBatchRowGroup = 16;

// From this many matrix elements in all (32 KB of f32) the batched kernels use the pool: a
// 12-head attention's cache of 32 rows is 24576 of them, about 6 us of reading for one
// thread; waking the other costs about 1 us.
constexpr int64_t kBatchParallelElements = int64_t{1} << 13;

}  // namespace

extern "C" void tm_rt_gemv_rows(int32_t dtype, int64_t m, int64_t k, int64_t n,
                                const float *x, int64_t ldx, const void *w, int64_t ldw,
                                float *y, int64_t ldy) {
  tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kGemv);
  GemvRowsProduct(dtype, m, k, n, x, ldx, w, ldw, y, ldy);
}

extern "C" void tm_rt_gemv_dots(int32_t dtype, int64_t m, int64_t k, const void *a,
                                int64_t lda, int64_t nx, const float *x, int64_t ldx,
                                int64_t incx, float *y, int64_t ldy, int64_t incy) {
  tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kGemv);
  GemvDotsProduct(dtype, m, k, a, lda, nx, x, ldx, incx, y, ldy, incy);
}

extern "C" void tm_rt_gemv_rows_batched(int32_t dtype, int64_t batch, int64_t m, int64_t k,
                                        int64_t n, const float *x, int64_t ldx,
                                        int64_t stride_x, const void *w, int64_t ldw,
                                        int64_t stride_w, float *y, int64_t ldy,
                                        int64_t stride_y) {
  tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kGemv);
  const int64_t elem = IsHalf(dtype) ? 2 : 4;
  auto w_at = [&](int64_t b) { return static_cast<const char *>(w) + b * stride_w * elem; };
  // Elements side by side need one row of x whose product GemvRows sums in one pass (not
  // in chunks of the pool). Anything else: one element after another, as tm_rt_gemv_rows
  // does it.
  const bool one_pass = m == 1 && (k * n < tinymlir::kParallelElements || k <= kRowsPerChunk);
  if (!one_pass || batch <= 1) {
    for (int64_t b = 0; b < batch; ++b)
      GemvRowsProduct(dtype, m, k, n, x + b * stride_x, ldx, w_at(b), ldw, y + b * stride_y,
                      ldy);
    return;
  }
  // Elements [b0, b1), rows of W in groups: each group's rows are read for every element
  // before the next group's (the elements of attention's V cache lie side by side in a
  // row: the cache streams in order, where element after element it would be read in
  // short pieces at half the speed). Each still summed by RowsKernel in groups of eight
  // from row 0, as in one pass.
  auto elements = [&](int64_t b0, int64_t b1) {
    WithElementType(dtype, [&](auto e) {
      using E = decltype(e);
      for (int64_t k0 = 0; k0 < k; k0 += kBatchRowGroup)
        for (int64_t b = b0; b < b1; ++b)
          tinymlir::RowsKernel<E>(1, x + b * stride_x, ldx,
                                  reinterpret_cast<const typename E::T *>(w_at(b)), ldw,
                                  y + b * stride_y, ldy, k0, std::min(k, k0 + kBatchRowGroup),
                                  n);
    });
  };
  WorkerPool &pool = WorkerPool::Get();
  if (batch * k * n < kBatchParallelElements || pool.size() == 1) {
    elements(0, batch);  // small: on this thread
    return;
  }
  // One task per thread: the elements side by side in a row are read in longer pieces
  // (six of attention's twelve heads: 1.5 KB of each 3 KB cache row) than by more, smaller
  // tasks (bench/q8_gemv_bandwidth --attention measures it).
  std::atomic<int64_t> next{0};
  const int64_t per_task = std::max<int64_t>(1, batch / pool.size());
  pool.ParallelFor([&](int) {
    for (int64_t b0; (b0 = next.fetch_add(per_task, std::memory_order_relaxed)) < batch;)
      elements(b0, std::min(batch, b0 + per_task));
  });
}

extern "C" void tm_rt_gemv_dots_batched(int32_t dtype, int64_t batch, int64_t m, int64_t k,
                                        const void *a, int64_t lda, int64_t stride_a,
                                        int64_t nx, const float *x, int64_t ldx, int64_t incx,
                                        int64_t stride_x, float *y, int64_t ldy, int64_t incy,
                                        int64_t stride_y) {
  tinymlir::ScopedKernelTimer timer(tinymlir::KernelClass::kGemv);
  const int64_t elem = IsHalf(dtype) ? 2 : 4;
  auto a_at = [&](int64_t b) { return static_cast<const char *>(a) + b * stride_a * elem; };
  if (incx != 1 || batch <= 1) {  // a strided x is packed per element, as one call packs it
    for (int64_t b = 0; b < batch; ++b)
      GemvDotsProduct(dtype, m, k, a_at(b), lda, nx, x + b * stride_x, ldx, incx,
                      y + b * stride_y, ldy, incy);
    return;
  }
  // Rows [i0, i1) of every element, each row for every element before the next
  // (BatchDotsKernel: attention's K cache streams in order); the pool takes guided ranges
  // of at least kBatchRowGroup rows. Each output is one DotsKernel sum, whatever the
  // grouping.
  auto rows = [&](int64_t i0, int64_t i1) {
    WithElementType(dtype, [&](auto e) {
      using E = decltype(e);
      tinymlir::BatchDotsKernel<E>(batch, static_cast<const typename E::T *>(a), lda, stride_a,
                                   nx, x, ldx, stride_x, k, y, ldy, incy, stride_y, i0, i1);
    });
  };
  WorkerPool &pool = WorkerPool::Get();
  if (batch * m * k < kBatchParallelElements || pool.size() == 1) {
    rows(0, m);  // small: on this thread
    return;
  }
  // Guided: each thread's first rows one stream. Groups of kBatchRowGroup rows taken in
  // turn would cut each thread's rows into 48 KB pieces 48 KB apart, read well below the
  // machine's read ceiling (bench/q8_gemv_bandwidth --attention measures it).
  GuidedRangesOnPool(pool, m, kBatchRowGroup, rows);
}
