// The batched GEMV kernels (core/targets/cpu/run/gemv_kernels.h), which take attention's
// per-head products in decode: every output bit for bit what a loop of the single calls
// over the batch gives (the single calls are checked against double precision by the C API
// suite), for f32, f16 and bf16 matrices, heads side by side in a row (a K or V cache) and
// apart, sizes below and above the batched kernels' pool threshold, odd tails; and, so that
// the comparison cannot pass with both wrong, one case against a double-precision loop.
#include "core/targets/cpu/run/gemv_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int32_t kF32 = 1, kF16 = 6, kBF16 = 7;

// A matrix buffer of `count` elements of `dtype` with values in [-1, 1): f32, or the bits
// of f16 / bf16 (bf16 by truncating an f32; f16 through _Float16).
std::vector<uint8_t> RandomMatrix(int32_t dtype, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  const size_t elem = dtype == kF32 ? 4 : 2;
  std::vector<uint8_t> out(count * elem);
  for (size_t i = 0; i < count; ++i) {
    const float v = u(rng);
    if (dtype == kF32) {
      std::memcpy(&out[i * 4], &v, 4);
    } else if (dtype == kF16) {
      const _Float16 h = static_cast<_Float16>(v);
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      const uint16_t top = static_cast<uint16_t>(bits >> 16);
      std::memcpy(&out[i * 2], &top, 2);
    }
  }
  return out;
}

std::vector<float> RandomFloats(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(count);
  for (float &f : v) f = u(rng);
  return v;
}

std::string Name(int32_t dtype) { return dtype == kF32 ? "f32" : dtype == kF16 ? "f16" : "bf16"; }

// Dot products: `batch` heads, head b's m rows of k elements at a + b * k (rows `lda`
// apart: side by side when lda = batch * k), nx rows of x per head.
struct Dots {
  int32_t dtype;
  int64_t batch, m, k, nx, incx, lda, stride_a, ldx, stride_x, ldy, stride_y;
  std::vector<uint8_t> a;
  std::vector<float> x, y;

  Dots(int32_t dtype_, int64_t batch_, int64_t m_, int64_t k_, int64_t nx_, int64_t incx_,
       bool side_by_side, uint32_t seed)
      : dtype(dtype_), batch(batch_), m(m_), k(k_), nx(nx_), incx(incx_) {
    lda = side_by_side ? batch * k + 3 : k + 1;
    stride_a = side_by_side ? k : m * lda;
    ldx = (k - 1) * incx + 1 + 2;
    stride_x = nx * ldx + 5;
    ldy = m + 4;
    stride_y = nx * ldy + 1;
    a = RandomMatrix(dtype, static_cast<size_t>(side_by_side ? m * lda : batch * m * lda), seed);
    x = RandomFloats(static_cast<size_t>(batch * stride_x), seed + 1);
    y = RandomFloats(static_cast<size_t>(batch * stride_y), seed + 2);
  }
  size_t Elem() const { return dtype == kF32 ? 4 : 2; }
  std::vector<float> Batched() const {
    std::vector<float> out = y;
    tm_rt_gemv_dots_batched(dtype, batch, m, k, a.data(), lda, stride_a, nx, x.data(), ldx,
                            incx, stride_x, out.data(), ldy, 1, stride_y);
    return out;
  }
  std::vector<float> Looped() const {
    std::vector<float> out = y;
    for (int64_t b = 0; b < batch; ++b)
      tm_rt_gemv_dots(dtype, m, k, a.data() + b * stride_a * Elem(), lda, nx,
                      x.data() + b * stride_x, ldx, incx, out.data() + b * stride_y, ldy, 1);
    return out;
  }
  std::string Describe() const {
    return Name(dtype) + " batch " + std::to_string(batch) + " m " + std::to_string(m) +
           " k " + std::to_string(k) + " nx " + std::to_string(nx) + " incx " +
           std::to_string(incx) + " lda " + std::to_string(lda);
  }
};

// Rows: `batch` heads, head b's one row of x (k elements) times its k x n matrix at
// w + b * n (rows `ldw` apart: side by side when ldw = batch * n).
struct Rows {
  int32_t dtype;
  int64_t batch, m, k, n, ldx, stride_x, ldw, stride_w, ldy, stride_y;
  std::vector<uint8_t> w;
  std::vector<float> x, y;

  Rows(int32_t dtype_, int64_t batch_, int64_t m_, int64_t k_, int64_t n_, bool side_by_side,
       uint32_t seed)
      : dtype(dtype_), batch(batch_), m(m_), k(k_), n(n_) {
    ldx = k + 2;
    stride_x = m * ldx + 1;
    ldw = side_by_side ? batch * n + 5 : n + 3;
    stride_w = side_by_side ? n : k * ldw;
    ldy = n + 1;
    stride_y = m * ldy + 7;
    w = RandomMatrix(dtype, static_cast<size_t>(side_by_side ? k * ldw : batch * k * ldw), seed);
    x = RandomFloats(static_cast<size_t>(batch * stride_x), seed + 1);
    y = RandomFloats(static_cast<size_t>(batch * stride_y), seed + 2);
  }
  size_t Elem() const { return dtype == kF32 ? 4 : 2; }
  std::vector<float> Batched() const {
    std::vector<float> out = y;
    tm_rt_gemv_rows_batched(dtype, batch, m, k, n, x.data(), ldx, stride_x, w.data(), ldw,
                            stride_w, out.data(), ldy, stride_y);
    return out;
  }
  std::vector<float> Looped() const {
    std::vector<float> out = y;
    for (int64_t b = 0; b < batch; ++b)
      tm_rt_gemv_rows(dtype, m, k, n, x.data() + b * stride_x, ldx,
                      w.data() + b * stride_w * Elem(), ldw, out.data() + b * stride_y, ldy);
    return out;
  }
  std::string Describe() const {
    return Name(dtype) + " batch " + std::to_string(batch) + " m " + std::to_string(m) +
           " k " + std::to_string(k) + " n " + std::to_string(n) + " ldw " + std::to_string(ldw);
  }
};

TEST(GemvBatched, DotsGiveTheBitsOfOneCallPerElement) {
  uint32_t seed = 1;
  for (int32_t dtype : {kF32, kF16, kBF16})
    for (int64_t batch : {1, 3, 12})
      for (int64_t m : {1, 7, 16, 33, 128, 300})
        for (int64_t k : {1, 17, 64})
          for (bool side_by_side : {true, false}) {
            const Dots d(dtype, batch, m, k, 1, 1, side_by_side, seed++);
            const std::vector<float> got = d.Batched(), want = d.Looped();
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << d.Describe();
          }
  // Several rows of x, and a strided x (packed per element, as one call packs it).
  for (int64_t nx : {2, 3})
    for (int64_t incx : {1, 3}) {
      const Dots d(kF32, 12, 40, 64, nx, incx, true, seed++);
      const std::vector<float> got = d.Batched(), want = d.Looped();
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << d.Describe();
    }
}

TEST(GemvBatched, RowsGiveTheBitsOfOneCallPerElement) {
  uint32_t seed = 100;
  for (int32_t dtype : {kF32, kF16, kBF16})
    for (int64_t batch : {1, 3, 12})
      for (int64_t k : {1, 7, 16, 33, 128, 300, 1030})
        for (int64_t n : {1, 64, 70})
          for (bool side_by_side : {true, false}) {
            const Rows r(dtype, batch, 1, k, n, side_by_side, seed++);
            const std::vector<float> got = r.Batched(), want = r.Looped();
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << r.Describe();
          }
  // Several rows of x: one element after another.
  const Rows r(kF32, 4, 3, 40, 64, true, seed);
  const std::vector<float> got = r.Batched(), want = r.Looped();
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << r.Describe();
}

// Against double precision, so that the batched and the looped results cannot agree by
// both being wrong: 12 heads of a 128-row cache, side by side (tolerance: k + 2 roundings
// of 2^-24 relative to the sum of |terms| and |y|).
TEST(GemvBatched, MatchDoublePrecisionOnAnAttentionShape) {
  const Dots d(kF32, 12, 128, 64, 1, 1, true, 7);
  const std::vector<float> dots = d.Batched();
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t i = 0; i < d.m; ++i) {
      const float *row = reinterpret_cast<const float *>(d.a.data()) + i * d.lda + b * d.stride_a;
      double want = d.y[b * d.stride_y + i], mag = std::fabs(want);
      for (int64_t j = 0; j < d.k; ++j) {
        want += double(row[j]) * d.x[b * d.stride_x + j];
        mag += std::fabs(double(row[j]) * d.x[b * d.stride_x + j]);
      }
      ASSERT_NEAR(dots[b * d.stride_y + i], want, (d.k + 2) * 0x1p-24 * mag) << b << ", " << i;
    }
  const Rows r(kF32, 12, 1, 128, 64, true, 8);
  const std::vector<float> rows = r.Batched();
  for (int64_t b = 0; b < r.batch; ++b)
    for (int64_t c = 0; c < r.n; ++c) {
      const float *w = reinterpret_cast<const float *>(r.w.data()) + b * r.stride_w + c;
      double want = r.y[b * r.stride_y + c], mag = std::fabs(want);
      for (int64_t j = 0; j < r.k; ++j) {
        want += double(r.x[b * r.stride_x + j]) * w[j * r.ldw];
        mag += std::fabs(double(r.x[b * r.stride_x + j]) * w[j * r.ldw]);
      }
      ASSERT_NEAR(rows[b * r.stride_y + c], want, (r.k + 2) * 0x1p-24 * mag) << b << ", " << c;
    }
}

}  // namespace
