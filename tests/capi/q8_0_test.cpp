// TM_Q8_0: 8-bit block-quantized weights. tm_quantize_q8_0 against a reference quantizer
// written here (double precision, from the header's definition); products, gathers and
// casts against double-precision computations on the dequantized values; every kind of
// misuse refused with a message; the products read the blocks in place (the lowered IR
// calls the q8_0 kernels, no f32 copy).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "half_reference.h"
#include "test_util.h"

namespace tmtest {
namespace {

constexpr int64_t kBlock = 32, kBlockBytes = 34;

// The header's definition, in double precision: d = binary16(max|x| / 127), q = x / d to
// nearest even, clamped to [-127, 127]; all zero when d is 0.
std::vector<uint8_t> ReferenceQuantize(const std::vector<float> &x, int64_t rows, int64_t k) {
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < k / kBlock; ++b) {
      const float *v = x.data() + r * k + b * kBlock;
      double amax = 0;
      for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(double{v[j]}));
      const uint16_t d = DoubleToF16(amax / 127.0);
      const double dq = F16ToDouble(d);
      out.push_back(static_cast<uint8_t>(d & 0xff));
      out.push_back(static_cast<uint8_t>(d >> 8));
      for (int j = 0; j < kBlock; ++j) {
        const double q = dq == 0 ? 0 : std::clamp(std::nearbyint(v[j] / dq), -127.0, 127.0);
        out.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
      }
    }
  return out;
}

// Element j of a stored q8_0 row (its dequantized value, exact in double).
double Dequantized(const std::vector<uint8_t> &blocks, int64_t row_bytes, int64_t r, int64_t j) {
  const uint8_t *block = blocks.data() + r * row_bytes + j / kBlock * kBlockBytes;
  const double d = F16ToDouble(static_cast<uint16_t>(block[0] | block[1] << 8));
  return d * static_cast<int8_t>(block[2 + j % kBlock]);
}

// A q8_0 host matrix (rows, k), made by tm_quantize_q8_0 from pseudo-random values.
struct Q8Host {
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  tm_tensor view() {
    return {bytes.data(), TM_Q8_0, static_cast<int32_t>(shape.size()), shape.data(), nullptr};
  }
  int64_t row_bytes() const { return shape.back() / kBlock * kBlockBytes; }
  double at(int64_t r, int64_t j) const { return Dequantized(bytes, row_bytes(), r, j); }
};

Q8Host RandomQ8(int64_t rows, int64_t k, uint32_t seed, double scale = 1.0) {
  std::vector<float> x = Cast<float>(Pseudo(static_cast<size_t>(rows * k), -scale, scale, seed));
  Q8Host q{{rows, k}, std::vector<uint8_t>(static_cast<size_t>(rows * k / kBlock * kBlockBytes))};
  EXPECT_EQ(tm_quantize_q8_0(x.data(), rows, k, q.bytes.data(), q.bytes.size()), TM_OK)
      << tm_last_error();
  return q;
}

// The products' error bound: every term reaches the result through at most k + 8 roundings
// of 2^-24 (the q8_0 GEMV kernels need k / 32 + 7, OpenBLAS's sgemm on dequantized panels
// up to k + 1), so |got - want| <= (k + 8) 2^-24 sum |w_j x_j|.
double ProductTolerance(int64_t k, double abs_sum) { return (k + 8) * std::ldexp(1.0, -24) * abs_sum; }

// What the decode kernel's 16-bit activations may add (core/targets/cpu/run/q8_0.h): each value
// of a block of 32 moves by at most 2^-14 of the block's largest magnitude, so the product
// by at most Σ_b 2^-14 amax_b Σ_(j in b) |w_j|. x(j) and w(j) give the activation row and
// the weight row.
template <typename X, typename Wt>
double ActivationQuantizationBound(int64_t k, const X &x, const Wt &w) {
  double bound = 0;
  for (int64_t b = 0; b < k / 32; ++b) {
    double amax = 0, wsum = 0;
    for (int64_t j = b * 32; j < b * 32 + 32; ++j) {
      amax = std::max(amax, std::fabs(double(x(j))));
      wsum += std::fabs(double(w(j)));
    }
    bound += std::ldexp(amax, -14) * wsum;
  }
  return bound;
}

// ---- tm_quantize_q8_0 ---------------------------------------------------------------------

TEST(Q8_0, QuantizeMatchesTheDefinitionByteForByte) {
  const int64_t rows = 7, k = 96;
  std::vector<float> x = Cast<float>(Pseudo(rows * k, -3, 3, 11));
  // Blocks of other magnitudes: tiny (subnormal scales), huge, all zero, ties, one value.
  for (int j = 0; j < 32; ++j) x[32 + j] = static_cast<float>(1e-7 * (j - 16));
  for (int j = 0; j < 32; ++j) x[96 + j] = static_cast<float>(5e6 * std::sin(j));
  for (int j = 0; j < 32; ++j) x[128 + j] = 0.0f;
  for (int j = 0; j < 32; ++j) x[192 + j] = 127.0f * (j % 2 ? 1 : -1) * (j == 0 ? 1.0f : 0.5f + j / 64.0f);
  x[256] = 1.0f;
  for (int j = 1; j < 32; ++j) x[256 + j] = 0.5f / 127.0f * j;  // x/d lands on k + 0.5
  std::vector<uint8_t> got(rows * k / kBlock * kBlockBytes, 0xee);
  TM_ASSERT_OK(tm_quantize_q8_0(x.data(), rows, k, got.data(), got.size()));
  EXPECT_EQ(got, ReferenceQuantize(x, rows, k));
  // The layout, by hand, for the block of one value: d = binary16(1 / 127), q[0] = 127.
  const std::vector<uint8_t> expected_scale = {static_cast<uint8_t>(DoubleToF16(1.0 / 127) & 0xff),
                                               static_cast<uint8_t>(DoubleToF16(1.0 / 127) >> 8)};
  const size_t at = 256 / kBlock * kBlockBytes;
  EXPECT_EQ(std::vector<uint8_t>(got.begin() + at, got.begin() + at + 2), expected_scale);
  EXPECT_EQ(got[at + 2], 127);
  // The error bound of the header: |x - d q| <= d / 2 for normal scales.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const uint8_t *block = got.data() + (r * k + j) / kBlock * kBlockBytes;
      const double d = F16ToDouble(static_cast<uint16_t>(block[0] | block[1] << 8));
      if (d >= std::ldexp(1.0, -14))
        EXPECT_LE(std::fabs(x[r * k + j] - Dequantized(got, k / kBlock * kBlockBytes, r, j)), d / 2)
            << "row " << r << ", column " << j;
    }
}

TEST(Q8_0, QuantizeRefusesWhatItCannotHold) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(68);
  auto refused = [&](tm_status s, const std::string &needle) {
    EXPECT_EQ(s, TM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tm_last_error()).find(needle), std::string::npos) << tm_last_error();
  };
  refused(tm_quantize_q8_0(x.data(), 1, 48, out.data(), out.size()), "not a multiple");
  refused(tm_quantize_q8_0(x.data(), -1, 32, out.data(), out.size()), "negative");
  refused(tm_quantize_q8_0(x.data(), 1, 64, out.data(), 67), "need 68");
  refused(tm_quantize_q8_0(nullptr, 1, 64, out.data(), out.size()), "src is NULL");
  refused(tm_quantize_q8_0(x.data(), 1, 64, nullptr, out.size()), "dst is NULL");
  x[37] = NAN;
  out.assign(68, 0xab);
  refused(tm_quantize_q8_0(x.data(), 2, 32, out.data(), out.size()), "element 37 (row 1, column 5)");
  EXPECT_EQ(out, std::vector<uint8_t>(68, 0xab)) << "a refused call wrote into dst";
  x[37] = 1e7f;
  refused(tm_quantize_q8_0(x.data(), 2, 32, out.data(), out.size()), "binary16");
  TM_EXPECT_STATUS(tm_quantize_q8_0(nullptr, 0, 32, nullptr, 0), TM_OK);
}

// ---- Products ------------------------------------------------------------------------------

// y = x @ W^T (+ b), W stored (n, k) as q8_0: the projections of a transformer. Within
// the rounding of k products plus what the decode kernel's 16-bit activations may add.
void CheckTransposedProduct(int64_t m, int64_t n, int64_t k, Program *keep = nullptr,
                            std::vector<float> *result = nullptr) {
  SCOPED_TRACE("m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k));
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value x = Input(t, TM_F32, {m, k}), w = Input(t, TM_Q8_0, {n, k}), b = Input(t, TM_F32, {n});
  const int32_t perm[] = {1, 0};
  tm_value wt = Op(tm_op_transpose, t.get(), w, perm, 2);
  End(t, {Op(tm_op_add, t.get(), Op(tm_op_matmul, t.get(), x, wt), b)});
  Host<float> xh({m, k}, Cast<float>(Pseudo(m * k, -1, 1, 3))), bh({n}, Cast<float>(Pseudo(n, -1, 1, 4)));
  Q8Host wh = RandomQ8(n, k, 5);
  Host<float> out({m, n}, 0.0f);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {xh.view(), wh.view(), bh.view()}, {out.view()}, nullptr, keep));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t o = 0; o < n; ++o) {
      double want = 0, abs_sum = 0;
      for (int64_t j = 0; j < k; ++j) {
        want += xh[i * k + j] * wh.at(o, j);
        abs_sum += std::fabs(xh[i * k + j] * wh.at(o, j));
      }
      const double tol = ProductTolerance(k, abs_sum) + 2 * std::ldexp(std::fabs(want + bh[o]), -24) +
                         ActivationQuantizationBound(k, [&](int64_t j) { return xh[i * k + j]; },
                                                     [&](int64_t j) { return wh.at(o, j); });
      ASSERT_NEAR(out[i * n + o], want + bh[o], tol) << "row " << i << ", output " << o;
    }
  if (result) *result = out.data;
}

TEST(Q8_0, ProductsWithATransposedWeightMatchDoublePrecision) {
  for (int64_t m : {1, 2, 16, 17, 40})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{48, 64}, {96, 768}}) CheckTransposedProduct(m, n, k);
}

// A prefill product whose weight is dequantized in two panels (16 MB of f32 each: 1360 rows
// at k = 3072, so 1400 rows take two, the second partial).
TEST(Q8_0, PrefillProductsSpanningSeveralPanels) { CheckTransposedProduct(17, 1400, 3072); }

// y = W @ x, W stored (m, k) as q8_0, x (k, n) as stored or as a transposed view of (n, k):
// the tied LM head (n = 1) and wider right operands.
TEST(Q8_0, ProductsWithALeftWeightMatchDoublePrecision) {
  const int64_t m = 70, k = 256;
  for (bool x_transposed : {false, true})
    for (int64_t n : {1, 3, 16, 17, 33}) {
      SCOPED_TRACE("n " + std::to_string(n) + (x_transposed ? ", x a transposed view" : ""));
      Context ctx = NewContext();
      Trace t = NewTrace(ctx);
      tm_value w = Input(t, TM_Q8_0, {m, k});
      tm_value x = x_transposed ? Input(t, TM_F32, {n, k}) : Input(t, TM_F32, {k, n});
      const int32_t perm[] = {1, 0};
      if (x_transposed) x = Op(tm_op_transpose, t.get(), x, perm, 2);
      End(t, {Op(tm_op_matmul, t.get(), w, x)});
      Q8Host wh = RandomQ8(m, k, 6, 0.5);
      Host<float> xh({x_transposed ? n : k, x_transposed ? k : n}, Cast<float>(Pseudo(n * k, -2, 2, 7)));
      Host<float> out({m, n}, 0.0f);
      TM_ASSERT_OK(CompileInvoke(ctx, t, {wh.view(), xh.view()}, {out.view()}));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t v = 0; v < n; ++v) {
          double want = 0, abs_sum = 0;
          for (int64_t j = 0; j < k; ++j) {
            const double xv = x_transposed ? xh[v * k + j] : xh[j * n + v];
            want += wh.at(i, j) * xv;
            abs_sum += std::fabs(wh.at(i, j) * xv);
          }
          const double quantization = ActivationQuantizationBound(
              k, [&](int64_t j) { return x_transposed ? xh[v * k + j] : xh[j * n + v]; },
              [&](int64_t j) { return wh.at(i, j); });
          ASSERT_NEAR(out[i * n + v], want, ProductTolerance(k, abs_sum) + quantization)
              << "(" << i << ", " << v << ")";
        }
    }
}

// The products read the blocks where they are: the lowered IR calls the q8_0 kernels (the
// GEMV kernel for a decode row, sgemm on dequantized panels for a long prompt) and makes no
// dequantized copy of the weight (no f32 buffer of its size).
TEST(Q8_0, ProductsReadTheBlocksInPlace) {
  for (int64_t m : {1, 40}) {
    Program program;
    CheckTransposedProduct(m, 96, 768, &program);
    const std::string lowered = StageText(program, TM_STAGE_LOWERED);
    EXPECT_EQ(CountSubstr(lowered, m == 1 ? "call @tm_rt_gemv_dots_q8_0" : "call @tm_rt_sgemm_q8_0"), 1)
        << lowered;
    EXPECT_EQ(CountSubstr(lowered, "768x96xf32"), 0) << "a dequantized copy:\n" << lowered;
    EXPECT_EQ(CountSubstr(lowered, "96x768xf32"), 0) << "a dequantized copy:\n" << lowered;
  }
}

// A prompt of up to 16 rows is summed row by row as decode steps are: each row's bits are
// those of the same row alone.
TEST(Q8_0, PromptRowsGetTheirDecodeStepsBits) {
  std::vector<float> prompt, alone;
  CheckTransposedProduct(16, 96, 768, nullptr, &prompt);
  CheckTransposedProduct(1, 96, 768, nullptr, &alone);
  ASSERT_EQ(prompt.size(), 16u * 96);
  // Row 0 of the 16-row prompt has the inputs of the one-row program (the same Pseudo seed).
  EXPECT_EQ(std::vector<float>(prompt.begin(), prompt.begin() + 96), alone);
}

// ---- Gathers and casts ---------------------------------------------------------------------

TEST(Q8_0, GathersAndCastsDequantizeExactly) {
  const int64_t rows = 10, k = 64;
  Q8Host table = RandomQ8(rows, k, 9, 4.0);
  Host<int32_t> ids({3}, {7, 0, 7});
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value w = Input(t, TM_Q8_0, {rows, k}), i = Input(t, TM_I32, {3});
  tm_value g = Op(tm_op_gather, t.get(), w, i);
  End(t, {Op(tm_op_cast, t.get(), g, TM_F32), Op(tm_op_cast, t.get(), w, TM_F64),
          Op(tm_op_cast, t.get(), g, TM_F16)});
  Host<float> rows_f32({3, k}, 0.0f);
  Host<double> all_f64({rows, k}, 0.0);
  std::vector<uint16_t> rows_f16(3 * k);
  std::vector<int64_t> f16_shape = {3, k};
  tm_tensor f16_view = {rows_f16.data(), TM_F16, 2, f16_shape.data(), nullptr};
  TM_ASSERT_OK(CompileInvoke(ctx, t, {table.view(), ids.view()}, {rows_f32.view(), all_f64.view(), f16_view}));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(all_f64[r * k + j], table.at(r, j)) << r << ", " << j;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const double v = table.at(ids[r], j);
      ASSERT_EQ(rows_f32[r * k + j], static_cast<float>(v)) << r << ", " << j;  // exact in f32
      ASSERT_EQ(F16ToDouble(rows_f16[r * k + j]),
                F16ToDouble(DoubleToF16(v)))
          << r << ", " << j;
    }
}

// Empty q8_0 tensors (no rows, or rows of no blocks) compile and run: no element to read.
TEST(Q8_0, EmptyTensorsComputeNothing) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{0, 32}, {3, 0}}) {
    SCOPED_TRACE("W (" + std::to_string(n) + ", " + std::to_string(k) + ")");
    Context ctx = NewContext();
    Trace t = NewTrace(ctx);
    tm_value x = Input(t, TM_F32, {2, k}), w = Input(t, TM_Q8_0, {n, k});
    const int32_t perm[] = {1, 0};
    End(t, {Op(tm_op_matmul, t.get(), x, Op(tm_op_transpose, t.get(), w, perm, 2)),
            Op(tm_op_cast, t.get(), w, TM_F32)});
    Host<float> xh({2, k}, 1.0f), y({2, n}, -1.0f), cast({n, k}, 0.0f);
    std::vector<int64_t> shape = {n, k};
    tm_tensor wv = {nullptr, TM_Q8_0, 2, shape.data(), nullptr};
    TM_ASSERT_OK(CompileInvoke(ctx, t, {xh.view(), wv}, {y.view(), cast.view()}));
    for (float v : y.data) EXPECT_EQ(v, 0.0f);  // a sum of no terms
  }
}

// ---- Misuse ---------------------------------------------------------------------------------

// Each way of using a q8_0 value outside what the header allows, refused when traced with
// the status it names and a message that says q8_0.
TEST(Q8_0, EveryOtherUseIsRefusedWithAMessage) {
  Context ctx = NewContext();
  const int32_t swap[] = {1, 0};
  struct Case {
    const char *what;
    tm_status want;
    std::function<tm_status(tm_trace *, tm_value w, tm_value x, tm_value *out)> call;
  };
  const std::vector<Case> cases = {
      {"elementwise", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value x, tm_value *o) { (void)x; return tm_op_add(t, w, w, o); }},
      {"elementwise with f32", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value x, tm_value *o) { (void)x; tm_value s; tm_op_scalar(t, TM_F32, 1.0, &s); return tm_op_mul(t, w, s, o); }},
      {"unary", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { return tm_op_exp(t, w, o); }},
      {"reduce", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { return tm_op_reduce_sum(t, w, 1, 0, o); }},
      {"reshape", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { const int64_t s[] = {64, 32}; return tm_op_reshape(t, w, 2, s, o); }},
      {"slice", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { const int64_t b[] = {0, 0}, e[] = {2, 64}; return tm_op_slice(t, w, 2, b, e, o); }},
      {"concat", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { const tm_value xs[] = {w, w}; return tm_op_concat(t, xs, 2, 0, o); }},
      {"where", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { tm_value c; tm_op_scalar(t, TM_BOOL, 1, &c); return tm_op_where(t, c, w, w, o); }},
      {"softmax", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { return tm_op_softmax(t, w, -1, o); }},
      {"cast to an integer", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { return tm_op_cast(t, w, TM_I32, o); }},
      {"cast to q8_0", TM_ERROR_DTYPE, [](tm_trace *t, tm_value, tm_value x, tm_value *o) { return tm_op_cast(t, x, TM_Q8_0, o); }},
      {"cast of a transposed view", TM_ERROR_DTYPE, [&](tm_trace *t, tm_value w, tm_value, tm_value *o) { tm_value v; tm_op_transpose(t, w, swap, 2, &v); return tm_op_cast(t, v, TM_F32, o); }},
      {"transpose of a transposed view", TM_ERROR_DTYPE, [&](tm_trace *t, tm_value w, tm_value, tm_value *o) { tm_value v; tm_op_transpose(t, w, swap, 2, &v); return tm_op_transpose(t, v, swap, 2, o); }},
      {"matmul of two q8_0", TM_ERROR_DTYPE, [&](tm_trace *t, tm_value w, tm_value, tm_value *o) { tm_value v; tm_op_transpose(t, w, swap, 2, &v); return tm_op_matmul(t, w, v, o); }},
      {"matmul with f64", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { tm_value y; const int64_t s[] = {64, 3}; tm_op_input(t, TM_F64, 2, s, &y); return tm_op_matmul(t, w, y, o); }},
      {"matmul, right operand as stored", TM_ERROR_DTYPE, [](tm_trace *t, tm_value w, tm_value, tm_value *o) { tm_value y; const int64_t s[] = {5, 2}; tm_op_input(t, TM_F32, 2, s, &y); return tm_op_matmul(t, y, w, o); }},
      {"matmul, left operand transposed", TM_ERROR_DTYPE, [&](tm_trace *t, tm_value w, tm_value, tm_value *o) { tm_value v, y; const int64_t s[] = {2, 7}; tm_op_input(t, TM_F32, 2, s, &y); tm_op_transpose(t, w, swap, 2, &v); return tm_op_matmul(t, v, y, o); }},
      {"gather from a vector", TM_ERROR_SHAPE, [](tm_trace *t, tm_value, tm_value, tm_value *o) { tm_value v, i; const int64_t s[] = {64}, n[] = {2}; tm_op_input(t, TM_Q8_0, 1, s, &v); tm_op_input(t, TM_I32, 1, n, &i); return tm_op_gather(t, v, i, o); }},
      {"an input whose last axis is not in blocks", TM_ERROR_SHAPE, [](tm_trace *t, tm_value, tm_value, tm_value *o) { const int64_t s[] = {4, 48}; return tm_op_input(t, TM_Q8_0, 2, s, o); }},
      {"an input of rank 8", TM_ERROR_SHAPE, [](tm_trace *t, tm_value, tm_value, tm_value *o) { const int64_t s[] = {1, 1, 1, 1, 1, 1, 1, 32}; return tm_op_input(t, TM_Q8_0, 8, s, o); }},
      {"a scalar", TM_ERROR_DTYPE, [](tm_trace *t, tm_value, tm_value, tm_value *o) { return tm_op_scalar(t, TM_Q8_0, 1.0, o); }},
      {"a constant", TM_ERROR_DTYPE, [](tm_trace *t, tm_value, tm_value, tm_value *o) { std::vector<uint8_t> b(34); int64_t s[] = {1, 32}; tm_tensor c = {b.data(), TM_Q8_0, 2, s, nullptr}; return tm_op_constant(t, &c, o); }},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    Trace t = NewTrace(ctx);
    tm_value w = Input(t, TM_Q8_0, {2, 64}), x = Input(t, TM_F32, {2, 64}), out;
    const tm_status s = c.call(t.get(), w, x, &out);
    EXPECT_EQ(s, c.want) << tm_status_string(s) << ": " << tm_last_error();
    if (s != TM_OK) EXPECT_NE(std::string(tm_last_error()).find("q8_0"), std::string::npos) << tm_last_error();
  }
  // An output cannot be q8_0.
  Trace t = NewTrace(ctx);
  tm_value w = Input(t, TM_Q8_0, {2, 64});
  TM_EXPECT_STATUS(tm_trace_end(t, &w, 1), TM_ERROR_DTYPE);
  EXPECT_NE(std::string(tm_last_error()).find("q8_0"), std::string::npos) << tm_last_error();
}

TEST(Q8_0, TheGpuTargetRefusesIt) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value w = Input(t, TM_Q8_0, {4, 32});
  End(t, {Op(tm_op_cast, t.get(), w, TM_F32)});
  tm_compile_options o = Options();
  o.target = TM_TARGET_GPU;
  Program p;
  TM_EXPECT_STATUS(tm_compile(ctx, t, &o, p.out()), TM_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(tm_last_error()).find("CPU target only"), std::string::npos) << tm_last_error();
}

// tm_invoke takes q8_0 tensors dense, of the program's dtype and shape.
TEST(Q8_0, InvokeChecksTheBlocksItIsGiven) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value w = Input(t, TM_Q8_0, {4, 64});
  End(t, {Op(tm_op_cast, t.get(), w, TM_F32)});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  Q8Host wh = RandomQ8(4, 64, 12);
  Host<float> out({4, 64}, 0.0f);
  auto invoke = [&](tm_tensor in) {
    tm_tensor o = out.view();
    return tm_invoke(p, &in, 1, &o, 1);
  };
  TM_EXPECT_STATUS(invoke(wh.view()), TM_OK);
  const int64_t dense[] = {64, 1}, strided[] = {128, 1};
  tm_tensor v = wh.view();
  v.strides = dense;
  TM_EXPECT_STATUS(invoke(v), TM_OK);
  v.strides = strided;
  TM_EXPECT_STATUS(invoke(v), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("dense"), std::string::npos) << tm_last_error();
  std::vector<float> as_f32(4 * 64);
  std::vector<int64_t> shape = {4, 64}, short_shape = {4, 32};
  TM_EXPECT_STATUS(invoke(tm_tensor{as_f32.data(), TM_F32, 2, shape.data(), nullptr}), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(invoke(tm_tensor{wh.bytes.data(), TM_Q8_0, 2, short_shape.data(), nullptr}), TM_ERROR_SHAPE);
}

// A program file keeps a q8_0 program's signature and code.
TEST(Q8_0, ProgramFilesRoundTrip) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value x = Input(t, TM_F32, {1, 64}), w = Input(t, TM_Q8_0, {8, 64});
  const int32_t perm[] = {1, 0};
  End(t, {Op(tm_op_matmul, t.get(), x, Op(tm_op_transpose, t.get(), w, perm, 2))});
  Program jit;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, jit.out()));
  const std::string path = ::testing::TempDir() + "q8_0_program_" + std::to_string(getpid()) + ".tmp";
  TM_ASSERT_OK(tm_program_export(jit, path.c_str()));
  Program loaded;
  TM_ASSERT_OK(tm_program_load(path.c_str(), loaded.out()));
  std::remove(path.c_str());
  Host<float> xh({1, 64}, Cast<float>(Pseudo(64, -1, 1, 13)));
  Q8Host wh = RandomQ8(8, 64, 14);
  Host<float> a({1, 8}, 0.0f), b({1, 8}, 0.0f);
  std::vector<tm_tensor> in = {xh.view(), wh.view()};
  tm_tensor oa = a.view(), ob = b.view();
  TM_ASSERT_OK(tm_invoke(jit, in.data(), 2, &oa, 1));
  TM_ASSERT_OK(tm_invoke(loaded, in.data(), 2, &ob, 1));
  EXPECT_EQ(a.data, b.data);
  tm_dtype dtype;
  int32_t rank;
  int64_t shape[8];
  TM_ASSERT_OK(tm_program_input_type(loaded, 1, &dtype, &rank, shape));
  EXPECT_EQ(dtype, TM_Q8_0);
  EXPECT_EQ(rank, 2);
}

}  // namespace
}  // namespace tmtest
