// q8_0 (core/targets/cpu/run/q8_0.h): 8-bit block-quantized weights, llama.cpp's Q8_0 layout.
// Quantization against its definition evaluated in double precision (the scale the f16
// nearest to amax / 127, each value the nearest integer to x / d, ties to even), with the
// header's error bounds checked element by element; the byte layout on a block made by
// hand; the activations' 16-bit quantization against its definition, per variant; the
// GEMV kernel against double-precision dot products of the dequantized weights with the
// quantized and with the f32 activations, within the header's bounds, and against the
// header's summation order written out here in scalar code, bit for bit, for every
// variant this machine runs; the prefill
// product against double loops; refused arguments. Nothing is checked against the kernels'
// own output except that the variants agree with each other.
#include "core/targets/cpu/run/q8_0.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/runtime/guarded_call.h"

namespace {

using tinymlir::kQ8BlockBytes;
using tinymlir::kQ8BlockElements;
using tinymlir::kQ8MaxAbs;
using tinymlir::Q8RowBytes;
namespace internal = tinymlir::q8_0_internal;

constexpr int32_t kNoTrans = 111, kTrans = 112;

// ----------------------------------------------------------------------------------------
// The format, decoded here independently of the library.

uint16_t ScaleBitsOf(const uint8_t *block) {
  return static_cast<uint16_t>(block[0] | (block[1] << 8));  // little-endian
}

// An f16 (by its bits) as a double: exact.
double F16(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

int8_t QAt(const uint8_t *block, int j) { return static_cast<int8_t>(block[2 + j]); }

// The dequantized element j of a stored row (exact in double, and in float).
double W(const uint8_t *row, int64_t j) {
  const uint8_t *block = row + j / kQ8BlockElements * kQ8BlockBytes;
  return F16(ScaleBitsOf(block)) * QAt(block, static_cast<int>(j % kQ8BlockElements));
}

// The f16 nearest to y >= 0 (bits), of two equally near the one with an even mantissa;
// F16 is increasing over the finite positive bit patterns.
uint16_t NearestF16(double y) {
  uint32_t lo = 0, hi = 0x7bff;  // the largest <= y: binary search
  if (y >= F16(0x7bff)) return 0x7bff;  // (never past 65504 here)
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (F16(static_cast<uint16_t>(mid)) <= y) lo = mid; else hi = mid - 1;
  }
  const uint16_t below = static_cast<uint16_t>(lo);
  const uint16_t above = F16(below) == y ? below : static_cast<uint16_t>(below + 1);
  const double down = y - F16(below), up = F16(above) - y;
  if (down < up) return below;
  if (up < down) return above;
  return (below & 1) ? above : below;
}

// round(r) to the nearest integer, ties to even, in double (r exact enough: the quotients
// below are of a 24-bit by an 11-bit significand, far from ties by more than double's
// rounding unless on one).
double RoundEven(double r) {
  const double f = std::floor(r), rest = r - f;
  if (rest > 0.5) return f + 1;
  if (rest < 0.5) return f;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

// The header's activation quantizer, evaluated here in double: per block of 32 values,
// s = 2^e with e = max(-149, floor(log2 amax) - 13) and qx = round(x / s), ties to even
// (x / s exact in double); a block of zeros s = 1, qx = 0; a block with a NaN or an
// infinity s = NaN, qx = 0.
struct XBlock {
  double s;
  int q[32];
};

XBlock QuantizeXReference(const float *x, int64_t incx) {
  XBlock block{};
  double amax = 0;
  bool finite = true;
  for (int j = 0; j < 32; ++j) {
    finite = finite && std::isfinite(x[j * incx]);
    if (std::isfinite(x[j * incx])) amax = std::max(amax, std::fabs(double(x[j * incx])));
  }
  if (!finite || amax == 0) {
    block.s = finite ? 1.0 : std::nan("");
    return block;
  }
  const int e = std::max(-149, std::ilogb(amax) - 13);
  block.s = std::ldexp(1.0, e);
  for (int j = 0; j < 32; ++j) block.q[j] = static_cast<int>(RoundEven(std::ldexp(x[j * incx], -e)));
  return block;
}

// Checks one quantized block against the definition and the header's bounds.
void ExpectBlockFollowsTheDefinition(const float *x, const uint8_t *block, const char *what) {
  double amax = 0;
  for (int j = 0; j < kQ8BlockElements; ++j) amax = std::max(amax, std::fabs(double(x[j])));
  const uint16_t bits = ScaleBitsOf(block);
  ASSERT_EQ(bits, NearestF16(amax / 127)) << what << ": amax " << amax;
  // The definition's f32 quotient rounded to f16 gives the same scale.
  const _Float16 via_f32 = static_cast<_Float16>(static_cast<float>(amax) / 127.0f);
  uint16_t via_f32_bits;
  std::memcpy(&via_f32_bits, &via_f32, 2);
  ASSERT_EQ(bits, via_f32_bits) << what << ": amax " << amax;
  const double dq = F16(bits);
  for (int j = 0; j < kQ8BlockElements; ++j) {
    const int q = QAt(block, j);
    const double want = dq == 0 ? 0 : std::clamp(RoundEven(x[j] / dq), -127.0, 127.0);
    ASSERT_EQ(q, want) << what << ": element " << j << " = " << x[j] << ", dq " << dq;
    const double err = std::fabs(x[j] - dq * q);
    const double uniform = amax / 254 * (1 + 0x1p-11) + 127 * 0x1p-25;
    ASSERT_LE(err, uniform) << what << ": element " << j;
    if (dq >= 0x1p-14) {  // normal scale: half a step, and never clamped
      ASSERT_LE(err, dq / 2) << what << ": element " << j;
      if (amax >= 127 * 0x1p-14) ASSERT_LE(dq / 2, amax / 254 * (1 + 0x1p-11)) << what;
      ASSERT_LT(std::fabs(x[j]) / dq, 127.5) << what << ": the clamp bound";
    } else {
      ASSERT_LE(err, std::max(dq / 2, 127 * 0x1p-25)) << what << ": element " << j;
    }
  }
}

std::vector<uint8_t> QuantizeOrDie(const std::vector<float> &x) {
  std::vector<uint8_t> out(static_cast<size_t>(Q8RowBytes(static_cast<int64_t>(x.size()))));
  EXPECT_TRUE(tinymlir::QuantizeRowQ8_0(x.data(), static_cast<int64_t>(x.size()), out.data()));
  return out;
}

void CheckRow(const std::vector<float> &x, const char *what) {
  const std::vector<uint8_t> out = QuantizeOrDie(x);
  for (size_t b = 0; b < x.size() / kQ8BlockElements; ++b)
    ExpectBlockFollowsTheDefinition(x.data() + b * kQ8BlockElements,
                                    out.data() + b * kQ8BlockBytes, what);
}

TEST(Q8_0Quantize, RandomBlocksOfEveryMagnitudeFollowTheDefinitionWithinTheBound) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> exponent(-40, 22);
  for (int row = 0; row < 200; ++row) {
    std::vector<float> x(32 * 16);
    for (size_t b = 0; b < 16; ++b) {
      const int e = exponent(rng);
      for (size_t j = 0; j < 32; ++j) x[b * 32 + j] = std::ldexp(u(rng), e);
    }
    CheckRow(x, "random");
  }
}

TEST(Q8_0Quantize, TinyHugeZeroAndTieBlocks) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  auto block = [&](float scale) {
    std::vector<float> x(32);
    for (float &v : x) v = u(rng) * scale;
    return x;
  };
  // Subnormal scales (amax below 127 * 2^-14), where the clamp binds, and scales that
  // round to zero.
  for (float amax : {7.7e-3f, 1e-3f, 1e-4f, 3e-6f, 2.5e-6f, 127 * 0x1p-25f, 1e-7f, 1e-30f,
                     1e-40f, 0x1p-149f})
    for (int t = 0; t < 20; ++t) {
      std::vector<float> x = block(amax);
      x[static_cast<size_t>(t) % 32] = (t & 1) ? -amax : amax;
      CheckRow(x, "tiny");
    }
  // Scales near f16's limit: amax up to kQ8MaxAbs (scale 65504).
  for (float amax : {kQ8MaxAbs, std::nextafter(kQ8MaxAbs, 0.0f), 8.3e6f, 8.31e6f, 65504.0f * 127,
                     1e6f})
    for (int t = 0; t < 20; ++t) {
      std::vector<float> x = block(amax);
      x[static_cast<size_t>(t) % 32] = (t & 1) ? -amax : amax;
      CheckRow(x, "huge");
    }
  {
    std::vector<float> x = block(kQ8MaxAbs);
    x[3] = kQ8MaxAbs;
    EXPECT_EQ(ScaleBitsOf(QuantizeOrDie(x).data()), 0x7bff);  // 65504
  }
  // All zeros (and negative zeros): scale 0, every q 0.
  {
    std::vector<float> x(64, 0.0f);
    for (size_t j = 1; j < 64; j += 3) x[j] = -0.0f;
    const std::vector<uint8_t> out = QuantizeOrDie(x);
    for (uint8_t byte : out) EXPECT_EQ(byte, 0);
  }
  // Ties: scale 1 (amax 127), values halfway between integers go to the even one.
  {
    std::vector<float> x = {127, 0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f, -3.5f, 126.5f,
                            -125.5f, 4.5f, 5.5f, 100.5f, 101.5f, -0.0f};
    x.resize(32, 0.25f);
    const std::vector<uint8_t> out = QuantizeOrDie(x);
    EXPECT_EQ(ScaleBitsOf(out.data()), 0x3c00);  // 1.0
    const int want[] = {127, 0, 2, 2, 4, 0, -2, -2, -4, 126, -126, 4, 6, 100, 102, 0};
    for (int j = 0; j < 16; ++j) EXPECT_EQ(QAt(out.data(), j), want[j]) << "element " << j;
    CheckRow(x, "ties");
  }
  // Ties with a scale of 2^-3 and the amax negative.
  {
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = (j - 16 + 0.5f) * 0.125f;
    x[0] = -127 * 0.125f;
    CheckRow(x, "ties, scale 1/8");
  }
  // A scale that is itself a tie between two f16 values: amax / 127 = 1 + 2^-11.
  {
    std::vector<float> x(32, 1.0f);
    x[5] = 127 * (1 + 0x1p-11f);
    const std::vector<uint8_t> out = QuantizeOrDie(x);
    EXPECT_EQ(ScaleBitsOf(out.data()), 0x3c00);  // to even: 1.0, not 1 + 2^-10
    CheckRow(x, "scale tie");
  }
}

// The scale from amax alone, over amax values of every binade and near the f16 steps,
// matches both the exact nearest f16 and the f32-then-f16 rounding.
TEST(Q8_0Quantize, ScaleIsTheF16NearestToAmaxOver127) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits(0, 0x4afdf20e);  // up to kQ8MaxAbs
  std::vector<float> x(32, 0.0f);
  for (int t = 0; t < 20000; ++t) {
    uint32_t b = bits(rng);
    float amax;
    std::memcpy(&amax, &b, 4);
    if (t % 4 == 1) {  // amax / 127 at an f16 midpoint or a step away from one
      const uint16_t h = static_cast<uint16_t>(1 + rng() % 0x7bfe);
      const double mid = (F16(h) + F16(static_cast<uint16_t>(h + 1))) / 2;
      amax = std::nextafter(static_cast<float>(mid * 127), t % 8 == 1 ? 0.0f : INFINITY);
      if (t % 16 == 1) amax = static_cast<float>(mid * 127);
      if (!(amax <= kQ8MaxAbs)) continue;
    }
    x[static_cast<size_t>(t) % 32] = amax;
    const std::vector<uint8_t> out = QuantizeOrDie(x);
    ExpectBlockFollowsTheDefinition(x.data(), out.data(), "scale");
    if (HasFatalFailure()) return;
    x[static_cast<size_t>(t) % 32] = 0.0f;
  }
}

TEST(Q8_0Quantize, ValuesThatAreScaleTimesIntegerComeBackExactly) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_int_distribution<int> scale_bits(0x0400, 0x7bff);  // normal f16 scales
  for (int t = 0; t < 500; ++t) {
    const uint16_t d = static_cast<uint16_t>(scale_bits(rng));
    std::vector<int> qs(32);
    for (int &v : qs) v = q(rng);
    qs[static_cast<size_t>(t) % 32] = (t & 1) ? 127 : -127;  // amax = 127 d exactly
    std::vector<float> x(32);
    for (size_t j = 0; j < 32; ++j) x[j] = static_cast<float>(F16(d) * qs[j]);  // exact
    const std::vector<uint8_t> out = QuantizeOrDie(x);
    ASSERT_EQ(ScaleBitsOf(out.data()), d);
    for (int j = 0; j < 32; ++j) ASSERT_EQ(QAt(out.data(), j), qs[static_cast<size_t>(j)]);
    std::vector<float> back(32);
    tinymlir::DequantizeRowsQ8_0(out.data(), 34, 1, 32, back.data(), 32);
    for (size_t j = 0; j < 32; ++j) ASSERT_EQ(back[j], x[j]);
  }
}

TEST(Q8_0Quantize, LayoutOfAHandMadeBlock) {
  // Scale 1 + 2^-10 (f16 0x3c01: bytes 01 3c, little-endian), q = -127, -126, ..., values
  // q * scale (exact in f32).
  const double d = 1 + 0x1p-10;
  std::vector<float> x(32);
  int8_t q[32];
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<int8_t>(j % 2 ? 127 - 5 * j : -127 + 3 * j);
    x[static_cast<size_t>(j)] = static_cast<float>(q[j] * d);
  }
  const std::vector<uint8_t> out = QuantizeOrDie(x);
  ASSERT_EQ(out.size(), 34u);
  EXPECT_EQ(out[0], 0x01);
  EXPECT_EQ(out[1], 0x3c);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[2 + static_cast<size_t>(j)], static_cast<uint8_t>(q[j])) << j;
  EXPECT_EQ(Q8RowBytes(768), 816);
}

TEST(Q8_0Quantize, RefusesNonFiniteAndOverlargeValues) {
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY,
                              std::nextafter(kQ8MaxAbs, INFINITY), -8321040.0f, 1e30f};
  for (float bad : bad_values) {
    std::vector<float> x(96, 0.5f);
    x[70] = bad;
    std::vector<uint8_t> out(3 * 34, 0xab);
    EXPECT_EQ(tinymlir::FindUnquantizableQ8_0(x.data(), 96), 70) << bad;
    EXPECT_FALSE(tinymlir::QuantizeRowQ8_0(x.data(), 96, out.data())) << bad;
    for (uint8_t byte : out) ASSERT_EQ(byte, 0xab) << "written on failure";
    // Through the C entry: -(1 + flat index), nothing written.
    std::vector<float> m(4 * 32, 1.0f);
    m[2 * 32 + 7] = bad;
    std::vector<uint8_t> dst(4 * 34, 0xab);
    EXPECT_EQ(tm_rt_quantize_q8_0(m.data(), 4, 32, dst.data()), -(1 + 2 * 32 + 7)) << bad;
    for (uint8_t byte : dst) ASSERT_EQ(byte, 0xab) << "written on failure";
  }
  // The largest accepted magnitude, both signs.
  std::vector<float> x(32, 1.0f);
  x[0] = kQ8MaxAbs;
  x[1] = -kQ8MaxAbs;
  EXPECT_EQ(tinymlir::FindUnquantizableQ8_0(x.data(), 32), -1);
  // Invalid arguments.
  std::vector<uint8_t> dst(34);
  EXPECT_EQ(tm_rt_quantize_q8_0(x.data(), 1, 31, dst.data()), 1);
  EXPECT_EQ(tm_rt_quantize_q8_0(x.data(), -1, 32, dst.data()), 1);
  EXPECT_EQ(tm_rt_quantize_q8_0(nullptr, 1, 32, dst.data()), 1);
  EXPECT_EQ(tm_rt_quantize_q8_0(x.data(), 0, 32, nullptr), 0);
  EXPECT_EQ(tm_rt_quantize_q8_0(x.data(), 1, 32, dst.data()), 0);
  EXPECT_EQ(dst, QuantizeOrDie(x));
}

TEST(Q8_0Quantize, DequantizeRowsWithStridesIsExact) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3, 3);
  const int64_t rows = 5, k = 96, ld = Q8RowBytes(k) + 7, ldd = k + 3;
  std::vector<uint8_t> a(static_cast<size_t>(rows * ld), 0xcd);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> x(static_cast<size_t>(k));
    for (float &v : x) v = u(rng);
    ASSERT_TRUE(tinymlir::QuantizeRowQ8_0(x.data(), k, a.data() + r * ld));
  }
  std::vector<float> out(static_cast<size_t>(rows * ldd), -7.0f);
  tinymlir::DequantizeRowsQ8_0(a.data(), ld, rows, k, out.data(), ldd);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(out[r * ldd + j], W(a.data() + r * ld, j));
    for (int64_t j = k; j < ldd; ++j) ASSERT_EQ(out[r * ldd + j], -7.0f) << "padding written";
  }
}

// ----------------------------------------------------------------------------------------
// GEMV.

struct Gemv {
  int64_t m, k, nx, lda, ldx, incx, ldy, incy;
  std::vector<uint8_t> a;
  std::vector<float> x, y;

  // Weights with the magnitude of each block drawn from a wide range (so that the
  // summation order shows in the low bits), x with padded, strided rows, y with gaps.
  Gemv(int64_t m_, int64_t k_, int64_t nx_, int64_t incx_, int64_t incy_, int64_t pad,
       uint32_t seed)
      : m(m_), k(k_), nx(nx_), incx(incx_), incy(incy_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    std::uniform_int_distribution<int> e(-6, 6);
    lda = Q8RowBytes(k) + pad;
    ldx = (k - 1) * incx + 1 + pad;
    ldy = (m - 1) * incy + 1 + pad;
    a.assign(static_cast<size_t>(m * lda), 0x5a);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t b = 0; b < k / 32; ++b) {
        const int scale = e(rng);
        for (int64_t j = 0; j < 32; ++j) row[b * 32 + j] = std::ldexp(u(rng), scale);
      }
      EXPECT_TRUE(tinymlir::QuantizeRowQ8_0(row.data(), k, a.data() + i * lda));
    }
    x.resize(static_cast<size_t>(nx * ldx));
    for (float &v : x) v = std::ldexp(u(rng), e(rng));
    y.resize(static_cast<size_t>(nx * ldy));
    for (float &v : y) v = u(rng);
  }
  float X(int64_t v, int64_t j) const { return x[v * ldx + j * incx]; }
  std::vector<float> Run() const {
    std::vector<float> out = y;
    tm_rt_gemv_dots_q8_0(m, k, a.data(), lda, nx, x.data(), ldx, incx, out.data(), ldy, incy);
    return out;
  }
  // Contiguous x (the kernels' input after packing).
  std::vector<float> PackedX() const {
    std::vector<float> p(static_cast<size_t>(nx * k));
    for (int64_t v = 0; v < nx; ++v)
      for (int64_t j = 0; j < k; ++j) p[v * k + j] = X(v, j);
    return p;
  }
  std::vector<float> RunVariant(internal::Variant variant, int64_t split) const {
    std::vector<float> out = y;
    const std::vector<float> p = PackedX();
    internal::GemvDots(variant, 0, split, k, a.data(), lda, nx, p.data(), k, out.data(), ldy, incy);
    internal::GemvDots(variant, split, m, k, a.data(), lda, nx, p.data(), k, out.data(), ldy, incy);
    return out;
  }
};

// The header's summation order, written out from its description (scalar; this file is
// compiled without FMA instructions or contraction, so only std::fma fuses).
float CanonicalDot(const uint8_t *row, const Gemv &g, int64_t v) {
  float acc[16] = {};
  for (int64_t b = 0; b < g.k / 32; ++b) {
    const uint8_t *block = row + b * 34;
    const XBlock x = QuantizeXReference(&g.x[v * g.ldx + b * 32 * g.incx], g.incx);
    const float d = static_cast<float>(F16(ScaleBitsOf(block))) * static_cast<float>(x.s);
    for (int l = 0; l < 16; ++l) {
      const int t = QAt(block, 2 * l) * x.q[2 * l] + QAt(block, 2 * l + 1) * x.q[2 * l + 1];
      acc[l] = std::fma(static_cast<float>(t), d, acc[l]);
    }
  }
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = acc[l] + acc[l + 8];
  for (int l = 0; l < 4; ++l) s[l] = s[l] + s[l + 4];
  for (int l = 0; l < 2; ++l) s[l] = s[l] + s[l + 2];
  return s[0] + s[1];
}

// Every output against two double-precision sums: Y_old + Σ w_j x^_j (x^ the activations
// quantized as the header defines) within the header's rounding bound γ_n (|Y_old| +
// Σ |w_j x^_j|), n = k/32 + 5; and Y_old + Σ w_j x_j (the f32 activations) within that plus
// the quantization's Σ_b s_b / 2 Σ_(j in b) |w_j|. Everything between the outputs untouched.
void ExpectWithinTheBound(const Gemv &g, const std::vector<float> &got, const std::string &what) {
  const double n = static_cast<double>(g.k / 32 + 5), u = 0x1p-24;
  const double gamma = n * u / (1 - n * u);
  int64_t bad = 0;
  for (int64_t v = 0; v < g.nx; ++v)
    for (int64_t i = 0; i < g.m; ++i) {
      const float old = g.y[v * g.ldy + i * g.incy];
      double want = old, magnitude = std::fabs(old), exact = old, quantization = 0;
      for (int64_t b = 0; b < g.k / 32; ++b) {
        const XBlock x = QuantizeXReference(&g.x[v * g.ldx + b * 32 * g.incx], g.incx);
        for (int j = 0; j < 32; ++j) {
          const double w = W(g.a.data() + i * g.lda, b * 32 + j);
          want += w * (x.s * x.q[j]);
          magnitude += std::fabs(w * (x.s * x.q[j]));
          exact += w * g.X(v, b * 32 + j);
          quantization += x.s / 2 * std::fabs(w);
        }
      }
      const double have = got[v * g.ldy + i * g.incy];
      const double err = std::fabs(have - want), err_exact = std::fabs(have - exact);
      if ((!(err <= gamma * magnitude) || !(err_exact <= gamma * magnitude + quantization)) &&
          bad++ < 5)
        ADD_FAILURE() << what << " [" << v << ", " << i << "]: " << have << " vs " << want
                      << " (quantized x), error " << err << " > " << gamma * magnitude
                      << "?; vs " << exact << " (f32 x), error " << err_exact << " > "
                      << gamma * magnitude + quantization << "?";
    }
  EXPECT_EQ(bad, 0) << what;
  std::vector<bool> output(g.y.size(), false);
  for (int64_t v = 0; v < g.nx; ++v)
    for (int64_t i = 0; i < g.m; ++i) output[static_cast<size_t>(v * g.ldy + i * g.incy)] = true;
  for (size_t at = 0; at < g.y.size(); ++at)
    if (!output[at]) ASSERT_EQ(got[at], g.y[at]) << what << ": y written at " << at;
}

std::string Describe(const Gemv &g) {
  return "m " + std::to_string(g.m) + " k " + std::to_string(g.k) + " nx " +
         std::to_string(g.nx) + " incx " + std::to_string(g.incx) + " incy " +
         std::to_string(g.incy) + " lda " + std::to_string(g.lda);
}

TEST(Q8_0Gemv, MatchesDoubleDotsOfTheDequantizedWeightsAndQuantizedActivations) {
  uint32_t seed = 100;
  for (int64_t m : {1, 7, 8, 9, 2304, 5003})
    for (int64_t k : {32, 64, 768, 3072})
      for (int64_t nx : {1, 2, 3, 16}) {
        if (m * k * nx > (int64_t{1} << 26)) continue;  // the double loop's time
        const Gemv g(m, k, nx, 1, 1, 0, seed++);
        ExpectWithinTheBound(g, g.Run(), Describe(g));
      }
}

TEST(Q8_0Gemv, StridedXPaddedRowsAndStridedY) {
  uint32_t seed = 200;
  for (int64_t m : {1, 9, 2304})
    for (int64_t k : {32, 768})
      for (int64_t nx : {1, 3, 16})
        for (int64_t incx : {1, 3})
          for (int64_t incy : {1, 2}) {
            const Gemv g(m, k, nx, incx, incy, 5, seed++);
            ExpectWithinTheBound(g, g.Run(), Describe(g));
          }
}

TEST(Q8_0Gemv, EmptyAndRefusedShapes) {
  const Gemv g(4, 64, 1, 1, 1, 0, 300);
  std::vector<float> y = g.y;
  tm_rt_gemv_dots_q8_0(0, 64, g.a.data(), g.lda, 1, g.x.data(), g.ldx, 1, y.data(), g.ldy, 1);
  tm_rt_gemv_dots_q8_0(4, 64, g.a.data(), g.lda, 0, g.x.data(), g.ldx, 1, y.data(), g.ldy, 1);
  EXPECT_EQ(y, g.y);
  // k = 0: every dot is 0, y unchanged.
  tm_rt_gemv_dots_q8_0(4, 0, g.a.data(), 0, 1, g.x.data(), 1, 1, y.data(), 1, 1);
  EXPECT_EQ(y, g.y);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(tm_rt_gemv_dots_q8_0(4, 48, g.a.data(), g.lda, 1, g.x.data(), g.ldx, 1,
                                    y.data(), g.ldy, 1),
               "multiple of 32");
  EXPECT_DEATH(tm_rt_gemv_dots_q8_0(4, 64, g.a.data(), 67, 1, g.x.data(), g.ldx, 1, y.data(),
                                    g.ldy, 1),
               "row stride");
}

// The public entry (the machine's variant, rows split across the pool in blocks) equals
// the header's order computed here, bit for bit, for every output.
TEST(Q8_0Gemv, PublicEntryFollowsTheCanonicalOrderBitForBit) {
  uint32_t seed = 400;
  for (int64_t m : {1, 9, 37, 2304})
    for (int64_t k : {32, 96, 768})
      for (int64_t nx : {1, 2, 5, 16})
        for (int64_t incx : {1, 2}) {
          const Gemv g(m, k, nx, incx, nx == 2 ? 3 : 1, 1, seed++);
          const std::vector<float> got = g.Run();
          int64_t bad = 0;
          for (int64_t v = 0; v < nx; ++v)
            for (int64_t i = 0; i < m; ++i) {
              const float want =
                  g.y[v * g.ldy + i * g.incy] + CanonicalDot(g.a.data() + i * g.lda, g, v);
              const float have = got[v * g.ldy + i * g.incy];
              if (std::memcmp(&want, &have, 4) != 0 && bad++ < 3)
                ADD_FAILURE() << Describe(g) << " [" << v << ", " << i << "]: " << have
                              << " vs " << want;
            }
          ASSERT_EQ(bad, 0) << Describe(g);
        }
}

// A NaN or an infinity in a row of X makes every output of that row NaN (its block's scale
// is NaN), and leaves the other rows' outputs as they were.
TEST(Q8_0Gemv, ANonFiniteActivationMakesItsRowsOutputsNaN) {
  Gemv g(37, 96, 3, 1, 1, 0, 450);
  const std::vector<float> clean = g.Run();
  g.x[1 * g.ldx + 40] = std::nanf("");
  g.x[2 * g.ldx + 5] = -INFINITY;
  const std::vector<float> got = g.Run();
  for (int64_t i = 0; i < g.m; ++i) {
    EXPECT_EQ(got[i * g.incy], clean[i * g.incy]) << "row 0, output " << i;
    EXPECT_TRUE(std::isnan(got[1 * g.ldy + i * g.incy])) << "row 1 (a NaN), output " << i;
    EXPECT_TRUE(std::isnan(got[2 * g.ldy + i * g.incy])) << "row 2 (-inf), output " << i;
  }
}

// Blocks of activations of every kind: every binade of f32 (subnormal ones included), ties
// at half a step, zeros, a block of the smallest subnormal's multiples, f32's largest, and
// blocks holding a NaN or an infinity.
std::vector<float> ActivationBlocks() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x;
  auto block = [&](auto value) {
    for (int j = 0; j < 32; ++j) x.push_back(value(j));
  };
  for (int e = -149; e <= 127; ++e)
    block([&](int) { return std::ldexp(u(rng), e); });
  for (int e : {-149, -140, -136, -130, -126, -20, 0, 7, 100, 114}) {
    // x / s at n + 1/2 (s = 2^e: x[0] = 2^(e+13) sets it), both signs.
    block([&](int j) {
      return j == 0 ? std::ldexp(1.0f, e + 13)
                    : std::ldexp((j % 2 ? -1.0f : 1.0f) * (static_cast<float>(j) + 0.5f), e);
    });
  }
  block([](int) { return 0.0f; });
  block([](int j) { return (j % 3 - 1) * std::numeric_limits<float>::denorm_min() * j; });
  block([](int j) { return j == 9 ? std::numeric_limits<float>::max() : -1.0f * j; });
  block([](int j) { return j == 3 ? std::nanf("") : 1.0f; });
  block([](int j) { return j == 31 ? INFINITY : 1.0f; });
  block([](int j) { return j == 0 ? -INFINITY : 0.0f; });
  return x;
}

// Each variant's activation quantizer gives the header's definition (QuantizeXReference)
// value for value, within the header's bounds: |qx| <= 2^14, |x - s qx| <= s / 2 <= amax
// 2^-14, qx exact where amax < 2^-136.
TEST(Q8_0Activations, EveryVariantFollowsTheDefinition) {
  const std::vector<float> x = ActivationBlocks();
  const int64_t k = static_cast<int64_t>(x.size()), blocks = k / 32;
  int ran = 0;
  for (internal::Variant variant : {internal::Variant::kPortable, internal::Variant::kAvx2,
                                    internal::Variant::kAvx512}) {
    if (!internal::Available(variant)) continue;
    ++ran;
    std::vector<int16_t> q(static_cast<size_t>(k), 7);
    std::vector<float> s(static_cast<size_t>(blocks), -1.0f);
    internal::QuantizeActivations(variant, x.data(), k, q.data(), s.data());
    for (int64_t b = 0; b < blocks; ++b) {
      const XBlock want = QuantizeXReference(&x[b * 32], 1);
      const std::string what = "variant " + std::to_string(static_cast<int>(variant)) +
                               ", block " + std::to_string(b) + " (x[0] " +
                               std::to_string(x[b * 32]) + ")";
      if (std::isnan(want.s)) {
        ASSERT_TRUE(std::isnan(s[b])) << what;
      } else {
        ASSERT_EQ(double(s[b]), want.s) << what;
      }
      double amax = 0;
      for (int j = 0; j < 32; ++j)
        if (std::isfinite(x[b * 32 + j])) amax = std::max(amax, std::fabs(double(x[b * 32 + j])));
      for (int j = 0; j < 32; ++j) {
        ASSERT_EQ(q[b * 32 + j], want.q[j]) << what << ", value " << j;
        if (std::isnan(want.s) || amax == 0) continue;
        ASSERT_LE(std::abs(int{q[b * 32 + j]}), 1 << 14) << what;
        const double err = std::fabs(x[b * 32 + j] - double(s[b]) * q[b * 32 + j]);
        ASSERT_LE(err, double(s[b]) / 2) << what << ", value " << j;
        ASSERT_LE(err, amax * 0x1p-14) << what << ", value " << j;
        if (amax < 0x1p-136) ASSERT_EQ(err, 0.0) << what << ", value " << j;
      }
    }
  }
  EXPECT_GT(ran, 0);
}

// Without scratch for the quantized activations (malloc failing), the product quantizes
// each block of x as it needs it: the same bits as the public entry, strided x included.
TEST(Q8_0Gemv, TheProductWithoutScratchGivesTheSameBits) {
  uint32_t seed = 470;
  for (int64_t incx : {1, 3})
    for (int64_t nx : {1, 4}) {
      const Gemv g(37, 96, nx, incx, 2, 1, seed++);
      std::vector<float> got = g.y;
      internal::GemvDotsWithoutScratch(g.m, g.k, g.a.data(), g.lda, g.nx, g.x.data(), g.ldx,
                                       g.incx, got.data(), g.ldy, g.incy);
      const std::vector<float> want = g.Run();
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << Describe(g);
    }
}

// Every variant this machine can run gives the same bits, for any split of the rows (which
// changes how rows are grouped into streams) and equals the public entry.
TEST(Q8_0Gemv, VariantsAgreeBitForBit) {
  const internal::Variant variants[] = {internal::Variant::kPortable, internal::Variant::kAvx2,
                                        internal::Variant::kAvx512};
  int ran = 0;
  uint32_t seed = 500;
  for (int64_t m : {1, 7, 9, 37, 300, 2304})
    for (int64_t k : {32, 64, 768})
      for (int64_t nx : {1, 2, 3, 4, 5, 9}) {
        const Gemv g(m, k, nx, 1, 2, 3, seed++);
        const std::vector<float> want = g.Run();
        for (internal::Variant variant : variants) {
          if (!internal::Available(variant)) continue;
          ++ran;
          for (int64_t split : {int64_t{0}, m / 3, m}) {
            const std::vector<float> got = g.RunVariant(variant, split);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
                << Describe(g) << ": variant " << static_cast<int>(variant) << ", split at "
                << split;
          }
        }
      }
  EXPECT_GT(ran, 0);
  const char *names[] = {"portable", "AVX2", "AVX-512"};
  for (internal::Variant variant : variants)
    if (!internal::Available(variant))
      std::printf("note: the %s variant is not available here (the CPU, or "
                  "TINYMLIR_CPU_EXCLUDE): not compared\n", names[static_cast<int>(variant)]);
}

// ----------------------------------------------------------------------------------------
// Prefill products.

struct Sgemm {
  int32_t q8_operand;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  std::vector<uint8_t> q;  // the q8_0 operand
  std::vector<float> f;    // the f32 one
  std::vector<float> c;

  Sgemm(int32_t q8_operand_, bool f32_trans, int64_t m_, int64_t n_, int64_t k_, int64_t pad,
        uint32_t seed)
      : q8_operand(q8_operand_), m(m_), n(n_), k(k_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    ta = q8_operand == 1 && f32_trans;
    tb = q8_operand == 1 || f32_trans;
    const int64_t q_rows = q8_operand == 0 ? m : n;
    const int64_t q_ld = Q8RowBytes(k) + pad;
    // The f32 operand as stored: B (k x n, or n x k when transposed) or A (m x k, or k x m).
    const int64_t f_rows = q8_operand == 0 ? (tb ? n : k) : (ta ? k : m);
    const int64_t f_cols = q8_operand == 0 ? (tb ? k : n) : (ta ? m : k);
    const int64_t f_ld = f_cols + pad;
    (q8_operand == 0 ? lda : ldb) = q_ld;
    (q8_operand == 0 ? ldb : lda) = f_ld;
    ldc = n + pad;
    q.assign(static_cast<size_t>(q_rows * q_ld), 0x77);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < q_rows; ++r) {
      for (float &v : row) v = u(rng);
      EXPECT_TRUE(tinymlir::QuantizeRowQ8_0(row.data(), k, q.data() + r * q_ld));
    }
    f.resize(static_cast<size_t>(f_rows * f_ld));
    for (float &v : f) v = u(rng);
    c.resize(static_cast<size_t>(m * ldc));
    for (float &v : c) v = u(rng);
  }
  double A(int64_t i, int64_t p) const {
    if (q8_operand == 0) return W(q.data() + i * lda, p);
    return f[ta ? p * lda + i : i * lda + p];
  }
  double B(int64_t p, int64_t j) const {
    if (q8_operand == 1) return W(q.data() + j * ldb, p);  // B^T's row j
    return f[tb ? j * ldb + p : p * ldb + j];
  }
  std::vector<float> Run() const {
    std::vector<float> out = c;
    const void *a = q8_operand == 0 ? static_cast<const void *>(q.data()) : f.data();
    const void *b = q8_operand == 1 ? static_cast<const void *>(q.data()) : f.data();
    tm_rt_sgemm_q8_0(q8_operand, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, m, n, k, a,
                     lda, b, ldb, out.data(), ldc);
    return out;
  }
};

// Any order of summing k products and C's value: |error| <= γ_(k+1) (|C| + Σ |a b|) (the
// dequantized operand is exact, so this is the f32 product's own rounding).
TEST(Q8_0Sgemm, MatchesTheDoubleLoopForEitherOperand) {
  uint32_t seed = 600;
  for (int32_t operand : {0, 1})
    for (bool f32_trans : {false, true})
      for (auto [m, n, pad] : {std::tuple<int64_t, int64_t, int64_t>{300, 17, 0},
                               {5, 300, 3},
                               {300, 300, 1},
                               {1, 40, 0},
                               {33, 1, 2},
                               {700, 9, 0}}) {  // two panels of A's rows at k = 768
        if (operand == 1 && m == 700) m = 9, n = 700;    // two panels of B's rows
        const int64_t k = 768;
        const Sgemm s(operand, f32_trans, m, n, k, pad, seed++);
        const std::vector<float> got = s.Run();
        const double gamma = (k + 1) * 0x1p-24 / (1 - (k + 1) * 0x1p-24);
        int64_t bad = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double want = s.c[i * s.ldc + j], magnitude = std::fabs(want);
            for (int64_t p = 0; p < k; ++p) {
              const double term = s.A(i, p) * s.B(p, j);
              want += term;
              magnitude += std::fabs(term);
            }
            const double err = std::fabs(got[i * s.ldc + j] - want);
            if (!(err <= gamma * magnitude) && bad++ < 5)
              ADD_FAILURE() << "operand " << operand << " trans " << f32_trans << " m " << m
                            << " n " << n << " [" << i << ", " << j << "]: "
                            << got[i * s.ldc + j] << " vs " << want;
          }
          for (int64_t j = n; j < s.ldc; ++j)
            ASSERT_EQ(got[i * s.ldc + j], s.c[i * s.ldc + j]) << "padding of C written";
        }
        ASSERT_EQ(bad, 0) << "operand " << operand << " trans " << f32_trans << " m " << m
                          << " n " << n;
      }
}

void CallBadSgemm(void **args) {
  const float *f = static_cast<const float *>(args[0]);
  tm_rt_sgemm_q8_0(0, kTrans, kNoTrans, 2, 2, 32, args[1], 34, f, 2, static_cast<float *>(args[2]), 2);
}

TEST(Q8_0Sgemm, RefusesOtherCombinations) {
  std::vector<uint8_t> q(4 * 34, 0);
  std::vector<float> f(4 * 64, 1.0f), c(64, 0.0f);
  // Inside an invoke: the call ends with an invalid-argument status.
  void *args[] = {f.data(), q.data(), c.data()};
  const tinymlir::Status status = tinymlir::CallGuarded(&CallBadSgemm, args);
  EXPECT_EQ(status.code(), tinymlir::StatusCode::kInvalidArgument) << status.message();
  EXPECT_NE(status.message().find("trans_a"), std::string::npos) << status.message();
  // Outside one: the process aborts with the message.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const float *fd = f.data();
  float *cd = c.data();
  const uint8_t *qd = q.data();
  EXPECT_DEATH(tm_rt_sgemm_q8_0(2, kNoTrans, kNoTrans, 2, 2, 32, qd, 34, fd, 2, cd, 2),
               "neither 0");
  EXPECT_DEATH(tm_rt_sgemm_q8_0(1, kNoTrans, kNoTrans, 2, 2, 32, fd, 32, qd, 34, cd, 2),
               "trans_b CblasTrans");
  EXPECT_DEATH(tm_rt_sgemm_q8_0(0, kNoTrans, kNoTrans, 2, 2, 48, qd, 51, fd, 2, cd, 2),
               "multiple of 32");
  EXPECT_DEATH(tm_rt_sgemm_q8_0(0, kNoTrans, kNoTrans, 2, 2, 32, qd, 33, fd, 2, cd, 2),
               "leading dimension");
  EXPECT_DEATH(tm_rt_sgemm_q8_0(0, kNoTrans, 7, 2, 2, 32, qd, 34, fd, 2, cd, 2), "trans_b either");
  // Empty products leave C as it is.
  const std::vector<float> before = c;
  tm_rt_sgemm_q8_0(0, kNoTrans, kNoTrans, 0, 2, 32, qd, 34, fd, 2, cd, 2);
  tm_rt_sgemm_q8_0(1, kNoTrans, kTrans, 2, 2, 0, fd, 1, qd, 0, cd, 2);
  EXPECT_EQ(c, before);
}

}  // namespace
