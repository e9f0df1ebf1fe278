// 8-bit block-quantized weights, format "q8_0": llama.cpp's / GGUF's Q8_0 block layout,
// and the CPU kernels that use them (decode GEMV, prefill through OpenBLAS).
//
// Layout. A matrix of `rows` rows of k elements (k a multiple of 32) is stored row by row;
// each row is k / 32 blocks of 34 bytes: the scale d, an IEEE binary16 in little-endian
// byte order (2 bytes), then 32 int8 values q. Element j of block b is float(d) * q[j]
// (exact in f32: an 11-bit significand times an 8-bit integer). Rows may lie a row stride
// apart (in bytes, at least Q8RowBytes(k)), and have no alignment.
//
// Quantization (QuantizeRowQ8_0), per block of 32 values x: amax = max |x|;
// d = f16(amax / 127) (the division in f32, then rounded to f16 to nearest even; this is
// the f16 nearest to the exact amax / 127: the f32 rounding can never move it onto or over
// an f16 midpoint, see q8_0.cpp); dq = float(d); q = clamp(round(x / dq), -127, 127), the
// quotient rounded to the nearest integer, ties to even, exactly (not through a rounded f32
// quotient); q = 0 for the whole block when dq == 0. Integer arithmetic and exact
// conversions only, independent of the floating-point rounding mode: the same bytes on
// every machine.
//
// Error bound, for every element x of a block (dq = float(d), amax the block's max |x|):
//   * when dq >= 2^-14 (a normal f16): |x - dq * q| <= dq / 2, and the clamp never binds
//     (|x| / dq <= 127 / (1 - 2^-11) < 127.5); when moreover amax >= 127 * 2^-14 ~ 0.00775
//     (amax / 127 itself in f16's normal range, so the rounding is relative),
//       dq / 2 <= (amax / 254) * (1 + 2^-11).
//     (Just below, amax / 127 in [2^-14 - 2^-25, 2^-14) rounds up to dq = 2^-14 with an
//     error of up to 2^-25, a hair over 2^-11 relative: that inequality fails there.)
//   * with a subnormal or zero scale (smaller blocks) dq is within 2^-25 of amax / 127, but
//     its relative error is unbounded: the clamp binds where amax / dq > 127.5, and with
//     dq == 0 every element becomes 0. Then |x - dq * q| <= max(dq / 2, 127 * 2^-25).
//   Uniformly: |x - dq * q| <= (amax / 254) * (1 + 2^-11) + 127 * 2^-25.
// (tests/cpu/q8_0_test.cpp checks each bound in double precision, element by element.)
//
// Products (decode, tm_rt_gemv_dots_q8_0). The activations are quantized too, to 16 bits,
// once per call, so that a block's 32 products are integer arithmetic (two per VPMADDWD
// lane, exact) and the kernel keeps up with the memory: per block of 32 values of a row of
// x, with amax the largest |x| (as f32 bits, so a NaN or an infinity is seen):
//   e = max(-149, floor(log2 amax) - 13); s = 2^e (an f32, subnormal below 2^-126);
//   qx = round(x / 2^e) (exact scaling, then to nearest, ties to even), |qx| <= 2^14;
//   amax == 0: s = 1, qx = 0; a NaN or an infinity in the block: s = NaN, qx = 0 (every
//   output of that row of X is then NaN, where the f32 product would be NaN or infinite).
// So |x - s * qx| <= s / 2 <= amax * 2^-14 (amax / 2^e is in [2^13, 2^14); below 2^-136,
// where e is held at -149, x / s is an integer and qx is exact): x keeps 14 significant
// bits at its block's largest, where the weights keep about 7 at theirs. (Quantizing x to 8 bits instead, as
// llama.cpp's Q8_0 x Q8_0 does, would add an error the size of the weights' own to every
// product; the 16-bit activations take one VPMOVSXBW and one VPMADDWD per block and row,
// where f32 activations would take two conversions of the weights, a product and a fused
// multiply-add.)
// The prefill products (tm_rt_sgemm_q8_0) multiply the dequantized weights by the f32
// activations through OpenBLAS.
#pragma once

#include <cstdint>

#include "core/targets/cpu/run/cpu_kernels.h"
#include "core/support/q8_0_format.h"  // kQ8BlockElements (32), kQ8BlockBytes (34)

namespace tinymlir {

// The largest magnitude that can be quantized: the largest float whose f32 quotient by
// 127 stays below 65520 (from which f16 rounding gives infinity). 8321039 / 127 rounds to
// 65519.99..., whose f16 is 65504; 8321040 / 127 rounds to 65520.
constexpr float kQ8MaxAbs = 8321039.0f;

// The index in [0, n) of the first of x[0..n) that q8_0 cannot hold (not finite, or of
// magnitude above kQ8MaxAbs, whose block's scale would overflow f16), or -1 if none.
int64_t FindUnquantizableQ8_0(const float *x, int64_t n);

// Quantizes x[0..k) (k a multiple of 32) into Q8RowBytes(k) bytes at out, as described
// above. Returns false, leaving out untouched, when FindUnquantizableQ8_0(x, k) >= 0.
bool QuantizeRowQ8_0(const float *x, int64_t k, uint8_t *out);

// dst[r * ldd + j] = float(d) * q of element j of stored row r, for r in [0, rows), j in
// [0, k): src's rows ld_bytes apart. Exact (the f32 values the kernels below multiply by).
void DequantizeRowsQ8_0(const uint8_t *src, int64_t ld_bytes, int64_t rows, int64_t k,
                        float *dst, int64_t ldd);

// The variants of tm_rt_gemv_dots_q8_0, exposed for tests and measurements: each gives the
// same bits as the others.
namespace q8_0_internal {

enum class Variant : int {
  kPortable = 0,  // scalar, std::fma
  kAvx2 = 1,      // AVX2 + FMA + F16C: two ymm accumulators (lanes 0-7, 8-15) per row
  kAvx512 = 2,    // AVX-512F and BW: one zmm accumulator (lanes 0-15) per row
};

// The variant tm_rt_gemv_dots_q8_0 runs on this machine, as TINYMLIR_CPU_EXCLUDE leaves its
// extensions (core/support/host_cpu.h): AVX-512F + BW, else AVX2 + FMA + F16C, else
// portable.
Variant DefaultVariant();

// Whether this machine can run `variant` (as TINYMLIR_CPU_EXCLUDE leaves it).
bool Available(Variant variant);

// x[0..k) (k a multiple of 32) quantized to 16 bits as tm_rt_gemv_dots_q8_0 quantizes its
// activations, with `variant`'s code (which must be Available): integers into q[0..k),
// block b's scale into s[b].
void QuantizeActivations(Variant variant, const float *x, int64_t k, int16_t *q, float *s);

// tm_rt_gemv_dots_q8_0's work for A's rows [i0, i1), on the calling thread, with `variant`
// (which must be Available), X's rows contiguous (incx 1). a points at row 0.
void GemvDots(Variant variant, int64_t i0, int64_t i1, int64_t k, const uint8_t *a,
              int64_t lda_bytes, int64_t nx, const float *x, int64_t ldx, float *y,
              int64_t ldy, int64_t incy);

// The product tm_rt_gemv_dots_q8_0 falls back to when no scratch for the quantized X can be
// had: each block of x quantized as it is needed (portable code; the same bits).
void GemvDotsWithoutScratch(int64_t m, int64_t k, const uint8_t *a, int64_t lda_bytes,
                            int64_t nx, const float *x, int64_t ldx, int64_t incx, float *y,
                            int64_t ldy, int64_t incy);

}  // namespace q8_0_internal
}  // namespace tinymlir

extern "C" {

// Quantizes `rows` rows of k f32 values (src, contiguous, row-major) into dst, contiguous
// rows of Q8RowBytes(k) bytes. For the public C API to wrap. Returns
//    0           done;
//    1           invalid arguments: rows < 0, k < 0 or not a multiple of 32, or a null
//                src or dst with rows * k > 0;
//   -(1 + i)     src[i] (flat index r * k + j) cannot be quantized: FindUnquantizableQ8_0's
//                first such element over the whole matrix (INT32_MIN when i >= 2^31 - 1:
//                FindUnquantizableQ8_0 then gives the index).
// Nothing is written to dst unless it returns 0.
int tm_rt_quantize_q8_0(const float *src, int64_t rows, int64_t k, void *dst);

// Y[v * ldy + i * incy] += dot(A row i, X row v) for the m rows i of A (q8_0 rows of k
// elements, lda_bytes apart) and the nx rows v of X (elements incx apart, rows ldx apart;
// quantized once first, into scratch from malloc; without it, block by block as needed). k
// must be a multiple of 32 and, when m > 1, lda_bytes at least Q8RowBytes(k) (otherwise
// the call is refused as tm_rt_sgemm_q8_0 refuses one). The rows are split across the
// worker pool in ranges taken from a shared counter (row_dots.h); timed as
// KernelClass::kGemv.
//
// Each row of X is quantized as described above (x^ = s * qx, per block); then the
// summation order of one output, the same bits in every variant, for any
// TINYMLIR_NUM_THREADS (each output is computed wholly by one thread) and any nx:
//   acc[0..16) = 0 (f32 lanes)
//   for each block b = 0, 1, ... of the row, in order, with d_b the weights' scale (f16 as
//   f32) and s_b x's: D = d_b * s_b (f32 product: exact, s_b being a power of two, barring
//   underflow and overflow); for each lane l in [0, 16):
//     t = q[32b + 2l] * qx[32b + 2l] + q[32b + 2l + 1] * qx[32b + 2l + 1]   (exact integer)
//     acc[l] = fma(float(t), D, acc[l])
//   s[l] = acc[l] + acc[l + 8]  (l < 8); s[l] = s[l] + s[l + 4]  (l < 4);
//   s[l] = s[l] + s[l + 2]  (l < 2); sum = s[0] + s[1]
//   Y[...] = Y[...] + sum
// Nothing else is contracted (the file is compiled with -ffp-contract=off).
//
// Error: with w_j = float(d) * q_j the dequantized weights and x^_j = s * qx_j the
// quantized activations, each term w_j x^_j (float(t) * D is exactly w x^ + w x^ for the
// pair) reaches Y through at most n = k/32 + 5 roundings of relative size u = 2^-24 (one
// fma into its lane per block from its own to the last, the 4 tree additions, the add to
// Y), so, barring underflow and overflow, |Y_new - (Y_old + Σ_j w_j x^_j)| <= γ_n (|Y_old| +
// Σ_j |w_j x^_j|), γ_n = n u / (1 - n u); and |Σ_j w_j (x_j - x^_j)| <= Σ_b s_b / 2 Σ_(j in b)
// |w_j| (tests/cpu/q8_0_test.cpp checks both against double-precision sums).
// tm_rt_gemv_dots_q8_0: declared in cpu_kernels.h (kernels.def).

// C(m x n) += op(A)(m x k) @ op(B)(k x n), C row-major (leading dimension ldc), for prompts
// longer than the GEMV kernels take. The q8_0 operand is always stored as rows of k
// elements (blocked along the contraction), its leading dimension in bytes:
//   q8_operand 0: A, m stored rows (trans_a CblasNoTrans, 111), lda in bytes; B is f32,
//                 trans_b either, ldb in elements;
//   q8_operand 1: B given as B^T, n stored rows (trans_b CblasTrans, 112), ldb in bytes; A is
//                 f32, trans_a either, lda in elements.
// Each thread of the pool dequantizes a strip of the q8_0 operand, one OpenBLAS block wide,
// into scratch from tm_rt_malloc and runs the strip's blocks through OpenBLAS
// (ProductByStrips, strip_products.h): the bits of an f32 product with the dequantized
// matrix.
// Any other combination, a k that is not a multiple of 32 or a leading dimension too small
// is refused: inside an invoke the call ends with TM_ERROR_INVALID_ARGUMENT
// (FailGuardedCall); outside one, where nothing can be reported, the process aborts with a
// message (a broken precondition of generated code).
// tm_rt_sgemm_q8_0: declared in cpu_kernels.h (kernels.def).

}  // extern "C"
