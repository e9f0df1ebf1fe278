// f16 and bf16: storage types with casts, data movement and mixed matmuls. Conversions
// against references written here (round to nearest even, in double precision);
// products against double-precision sums of the widened values; the decode kernels bit
// for bit against the f32 kernels on the widened matrix.
#include <cmath>
#include <cstring>
#include <functional>

#include "half_reference.h"
#include "test_util.h"

namespace tmtest {
namespace {

// ---- References -----------------------------------------------------------------------

// x (an f32 value) rounded to the nearest bfloat16 (ties to even): 7 fraction bits, f32's
// exponent range.
uint16_t FloatToBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  if (std::isnan(x)) return sign | 0x7fc0;
  const double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);
  // Subnormal bf16 values share f32's subnormal steps (2^-133 for 7 fraction bits).
  const int step = std::max(e - 8, -133);
  double rounded = std::ldexp(std::nearbyint(std::ldexp(a, -step)), step);
  float r = static_cast<float>(rounded);  // exact, or infinity past f32's largest
  if (rounded > 3.3895313892515355e38) r = INFINITY;  // bf16's largest finite value
  uint32_t rbits;
  std::memcpy(&rbits, &r, sizeof rbits);
  return sign | static_cast<uint16_t>(rbits >> 16);
}

double Widen(tm_dtype dtype, uint16_t h) {
  return dtype == TM_F16 ? F16ToDouble(h) : BF16ToDouble(h);
}

uint16_t Narrow(tm_dtype dtype, float x) {
  return dtype == TM_F16 ? DoubleToF16(x) : FloatToBF16(x);
}

const char *Name(tm_dtype dtype) { return dtype == TM_F16 ? "f16" : "bf16"; }

// A half-precision host tensor: uint16_t storage with the dtype it holds.
struct HalfHost {
  tm_dtype dtype;
  std::vector<int64_t> shape;
  std::vector<uint16_t> bits;
  tm_tensor view() {
    return {bits.data(), dtype, static_cast<int32_t>(shape.size()), shape.data(), nullptr};
  }
  double at(size_t i) const { return Widen(dtype, bits[i]); }
};

HalfHost RandomHalf(tm_dtype dtype, std::vector<int64_t> shape, uint32_t seed) {
  std::vector<double> v = Pseudo(static_cast<size_t>(NumElements(shape)), -1, 1, seed);
  HalfHost h{dtype, shape, {}};
  for (double x : v) h.bits.push_back(Narrow(dtype, static_cast<float>(x)));
  return h;
}

// ---- Conversions -------------------------------------------------------------------------

// f32 -> half -> f32 through two programs: the half values bit for bit against the
// references, the widened values exactly; the set covers ties, subnormals, overflow, signed
// zeros, infinities and NaN.
TEST(HalfPrecision, CastsRoundToNearestEvenAndWidenExactly) {
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -2.5f, 0.1f, 65504.0f, 65519.0f, 65520.0f,
                           1e6f, -1e6f, 6e-8f, 3e-8f, 2.98e-8f, 1e-5f, 6.1e-5f,
                           1.0f + 1.0f / 2048.0f,           // f16 tie: rounds to even (1.0)
                           1.0f + 3.0f / 2048.0f,           // f16 tie: rounds up
                           1.0f + 1.0f / 256.0f,            // bf16 tie
                           3.4e38f, 1e-40f, 9.2e-41f, INFINITY, -INFINITY, NAN};
  for (double x : Pseudo(200, -300, 300, 7)) xs.push_back(static_cast<float>(x));
  for (double x : Pseudo(200, -1e-3, 1e-3, 8)) xs.push_back(static_cast<float>(x));
  const std::vector<int64_t> shape = {static_cast<int64_t>(xs.size())};
  for (tm_dtype dtype : {TM_F16, TM_BF16}) {
    Context ctx = NewContext();
    Trace down = NewTrace(ctx, "narrow");
    End(down, {Op(tm_op_cast, down, Input(down, TM_F32, shape), dtype)});
    std::vector<uint16_t> half(xs.size(), 0xdead);
    tm_tensor in = View(xs.data(), shape);
    tm_tensor out = {half.data(), dtype, 1, shape.data(), nullptr};
    ASSERT_EQ(CompileInvoke(ctx, down, {in}, {out}), TM_OK) << tm_last_error();
    for (size_t i = 0; i < xs.size(); ++i) {
      const uint16_t want = Narrow(dtype, xs[i]);
      if (std::isnan(xs[i])) EXPECT_TRUE(std::isnan(Widen(dtype, half[i]))) << Name(dtype);
      else EXPECT_EQ(half[i], want) << Name(dtype) << " of " << xs[i];
    }

    Trace up = NewTrace(ctx, "widen");
    End(up, {Op(tm_op_cast, up, Input(up, dtype, shape), TM_F64)});
    std::vector<double> wide(xs.size());
    tm_tensor hin = {half.data(), dtype, 1, shape.data(), nullptr};
    ASSERT_EQ(CompileInvoke(ctx, up, {hin}, {View(wide.data(), shape)}), TM_OK)
        << tm_last_error();
    std::vector<double> want;
    for (uint16_t h : half) want.push_back(Widen(dtype, h));
    EXPECT_TRUE(AllClose(wide, want, 0.0)) << Name(dtype);
  }
}

// A scalar cast to f16, bf16 or f32 holds the rounded value wherever it goes next (cast
// back to f64, or promoted by an op with an f64 tensor), as a tensor cast gives it, never
// the original; a scalar as made keeps its value, as a Python float does, whatever its
// dtype (an i32 tensor plus an f32 scalar 2.7 is f64 2.7, as NumPy gives).
TEST(HalfPrecision, ScalarsHoldTheValueOfTheirType) {
  const std::vector<double> xs = {0.1, -2.5, 1.0 / 3.0, 65504.0, 65519.0, 65520.0, 1e6,
                                  6e-8, 3e-8, 1e-5, 1.0 + 1.0 / 2048.0, 1.0 + 3.0 / 2048.0,
                                  1.0 + 1.0 / 256.0, 3.4e38, 1e-40, 1e300, -1e-300};
  for (tm_dtype dtype : {TM_F16, TM_BF16, TM_F32}) {
    SCOPED_TRACE(Name(dtype));
    Context ctx = NewContext();
    Trace t = NewTrace(ctx);
    tm_value low = Input(t, TM_F64, {});  // -inf: maximum(low, v) is v
    std::vector<tm_value> outs;
    for (double x : xs) {
      tm_value from_f64 = Op(tm_op_cast, t, Op(tm_op_scalar, t, TM_F64, x), dtype);
      outs.push_back(Op(tm_op_cast, t, from_f64, TM_F64));
      outs.push_back(Op(tm_op_maximum, t, from_f64, low));
      outs.push_back(Op(tm_op_cast, t, Op(tm_op_scalar, t, dtype, x), TM_F64));  // x itself
    }
    End(t, outs);
    const std::vector<int64_t> scalar_shape;
    double minus_inf = -INFINITY;
    std::vector<double> got(outs.size(), 7.0);
    std::vector<tm_tensor> out_views;
    for (double &g : got) out_views.push_back(View(&g, scalar_shape));
    ASSERT_EQ(CompileInvoke(ctx, t, {View(&minus_inf, scalar_shape)}, out_views), TM_OK)
        << tm_last_error();
    for (size_t i = 0; i < xs.size(); ++i) {
      // The reference: IEEE round-to-nearest-even of the double, through float only where
      // that is exact (every x above is a float, or needs f32 only).
      const float f = static_cast<float>(xs[i]);
      const double want = dtype == TM_F32 ? static_cast<double>(f) : Widen(dtype, Narrow(dtype, f));
      for (int form = 0; form < 2; ++form)
        EXPECT_EQ(got[3 * i + form], want) << xs[i] << " form " << form;
      EXPECT_EQ(got[3 * i + 2], xs[i]) << "a scalar made in " << Name(dtype);
    }
  }
}

// f16 <-> bf16 and half <-> integer casts go through f32.
TEST(HalfPrecision, CastsBetweenHalfTypesAndIntegers) {
  Context ctx = NewContext();
  const std::vector<int64_t> shape = {6};
  HalfHost x{TM_F16, shape, {}};
  for (float v : {0.5f, -3.0f, 1000.25f, 1.0f / 3.0f, -0.0f, 65504.0f})
    x.bits.push_back(DoubleToF16(v));
  Trace t = NewTrace(ctx);
  tm_value in = Input(t, TM_F16, shape);
  End(t, {Op(tm_op_cast, t, in, TM_BF16), Op(tm_op_cast, t, in, TM_I32)});
  std::vector<uint16_t> bf(6);
  std::vector<int32_t> ints(6);
  tm_tensor bf_view = {bf.data(), TM_BF16, 1, shape.data(), nullptr};
  ASSERT_EQ(CompileInvoke(ctx, t, {x.view()}, {bf_view, View(ints.data(), shape)}), TM_OK)
      << tm_last_error();
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(bf[i], FloatToBF16(static_cast<float>(x.at(i)))) << i;
    EXPECT_EQ(ints[i], static_cast<int32_t>(std::trunc(x.at(i)))) << i;
  }
}

// ---- Storage types -------------------------------------------------------------------------

// Arithmetic on a half type is refused when traced, naming the dtype and the way out.
TEST(HalfPrecision, ArithmeticOnHalfIsRefusedWithAClearMessage) {
  for (tm_dtype dtype : {TM_F16, TM_BF16}) {
    Context ctx = NewContext();
    Trace t = NewTrace(ctx);
    tm_value a = Input(t, dtype, {4, 4}), b = Input(t, dtype, {4, 4}), out;
    tm_value f32 = Input(t, TM_F32, {4, 4}), s;
    // An empty operand too: the composites make none of the ops that would refuse it (the
    // C API fuzzer found softmax of an empty f16 accepted).
    tm_value empty = Input(t, dtype, {0, 1}), gamma = Input(t, dtype, {1});
    ASSERT_EQ(tm_op_scalar(t, TM_F64, 2.0, &s), TM_OK);
    struct Case {
      const char *what;
      std::function<tm_status()> call;
    };
    const std::vector<Case> cases = {
        {"add", [&] { return tm_op_add(t, a, b, &out); }},
        {"mul by a weak scalar", [&] { return tm_op_mul(t, a, s, &out); }},
        {"less", [&] { return tm_op_less(t, a, b, &out); }},
        {"exp", [&] { return tm_op_exp(t, a, &out); }},
        {"neg", [&] { return tm_op_neg(t, a, &out); }},
        {"sum", [&] { return tm_op_reduce_sum(t, a, 0, 0, &out); }},
        {"matmul of two halves", [&] { return tm_op_matmul(t, a, b, &out); }},
        {"softmax", [&] { return tm_op_softmax(t, a, -1, &out); }},
        {"softmax of an empty value", [&] { return tm_op_softmax(t, empty, -2, &out); }},
        {"layer norm of an empty value",
         [&] { return tm_op_layer_norm(t, empty, gamma, gamma, 1e-5, &out); }},
        {"gelu of an empty value", [&] { return tm_op_gelu_tanh(t, empty, &out); }},
        {"mean of an empty value", [&] { return tm_op_reduce_mean(t, empty, 0, 0, &out); }},
        {"var of an empty value", [&] { return tm_op_reduce_var(t, empty, 0, 0, &out); }},
    };
    for (const Case &c : cases) {
      EXPECT_EQ(c.call(), TM_ERROR_DTYPE) << Name(dtype) << " " << c.what;
      const std::string message = tm_last_error();
      EXPECT_NE(message.find(std::string(Name(dtype)) + " is a storage type"), std::string::npos)
          << message;
      EXPECT_NE(message.find("cast to f32"), std::string::npos) << message;
    }
    // With an f32 operand, the half one is promoted: allowed.
    EXPECT_EQ(tm_op_add(t, a, f32, &out), TM_OK) << tm_last_error();
    tm_dtype result;
    int32_t rank;
    ASSERT_EQ(tm_value_type(t, out, &result, &rank, nullptr), TM_OK);
    EXPECT_EQ(result, TM_F32);
  }
}

// Promotion: f16 with bf16 gives f32 (neither holds the other), integers with a half type
// give f64 (as NumPy's int32 + float16), bool keeps the half type.
TEST(HalfPrecision, PromotionRules) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  auto type_of = [&](tm_value v) {
    tm_dtype d = TM_F32;
    int32_t rank;
    EXPECT_EQ(tm_value_type(t, v, &d, &rank, nullptr), TM_OK);
    return d;
  };
  tm_value h = Input(t, TM_F16, {3}), b = Input(t, TM_BF16, {3}), i = Input(t, TM_I32, {3});
  tm_value flag = Input(t, TM_BOOL, {3}), out;
  ASSERT_EQ(tm_op_add(t, h, b, &out), TM_OK) << tm_last_error();
  EXPECT_EQ(type_of(out), TM_F32);
  ASSERT_EQ(tm_op_add(t, h, i, &out), TM_OK) << tm_last_error();
  EXPECT_EQ(type_of(out), TM_F64);
  ASSERT_EQ(tm_op_where(t, flag, h, h, &out), TM_OK) << tm_last_error();
  EXPECT_EQ(type_of(out), TM_F16);
}

// Data movement keeps the half type and the bits: gather rows of an f16 table, transpose,
// slice, concatenate, select.
TEST(HalfPrecision, DataMovementKeepsTheBits) {
  Context ctx = NewContext();
  HalfHost table = RandomHalf(TM_F16, {5, 3}, 11);
  std::vector<int32_t> ids = {4, 0, 2, 2};
  Trace t = NewTrace(ctx);
  tm_value tab = Input(t, TM_F16, {5, 3}), idx = Input(t, TM_I32, {4});
  tm_value rows = Op(tm_op_gather, t, tab, idx);  // (4, 3)
  const int32_t swap[] = {1, 0};
  tm_value cols = Op(tm_op_transpose, t, rows, swap, 2);  // (3, 4)
  const int64_t begin[] = {1, 0}, end[] = {3, 4};
  tm_value part = Op(tm_op_slice, t, cols, 2, begin, end);  // (2, 4)
  const tm_value both[] = {part, part};
  tm_value joined = Op(tm_op_concat, t, both, 2, 0);  // (4, 4)
  End(t, {joined});
  std::vector<int64_t> ids_shape = {4}, out_shape = {4, 4};
  std::vector<uint16_t> got(16);
  tm_tensor out = {got.data(), TM_F16, 2, out_shape.data(), nullptr};
  ASSERT_EQ(CompileInvoke(ctx, t, {table.view(), View(ids.data(), ids_shape)}, {out}), TM_OK)
      << tm_last_error();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(got[r * 4 + c], table.bits[ids[c] * 3 + (r % 2) + 1]) << r << "," << c;
}

// ---- Mixed matmuls -------------------------------------------------------------------------

// x @ W with a half weight W: every product shape the BLAS rewrite distinguishes (decode
// rows, decode columns, transposed weights, prefill), against the double-precision sum of
// the widened values. The widening copy is folded into the kernels: the lowered code calls
// the half kernel named and allocates nothing but the product itself.
TEST(HalfPrecision, MatmulWithAHalfWeight) {
  const int64_t k = 300, n = 517;  // k > one 128-row chunk; k * n above the parallel cut-off
  const int32_t swap[] = {1, 0};
  for (tm_dtype dtype : {TM_F16, TM_BF16}) {
    for (int64_t m : {int64_t{1}, int64_t{7}, int64_t{20}}) {  // decode, short and long prompts
      struct Case {
        const char *name;
        bool transposed;   // W given as (n, k) and transposed in the trace
        bool weight_left;  // W (n, k) @ x^T (k, 1): the tied LM head's form
        const char *kernel;
      };
      const std::vector<Case> cases = {
          {"x @ W", false, false, m <= 16 ? "tm_rt_gemv_rows" : "tm_rt_sgemm_half"},
          {"x @ W^T", true, false, m <= 16 ? "tm_rt_gemv_dots" : "tm_rt_sgemm_half"},
          {"W @ x^T", false, true, m == 1 ? "tm_rt_gemv_dots" : "tm_rt_sgemm_half"},
      };
      for (const Case &c : cases) {
        SCOPED_TRACE(std::string(Name(dtype)) + " " + c.name + " m=" + std::to_string(m));
        const bool stored_nk = c.transposed || c.weight_left;
        HalfHost w = RandomHalf(dtype, stored_nk ? std::vector<int64_t>{n, k}
                                                 : std::vector<int64_t>{k, n}, 21 + m);
        Host<float> x({m, k}, Cast<float>(Pseudo(static_cast<size_t>(m * k), -1, 1, 31 + m)));
        Context ctx = NewContext();
        Trace t = NewTrace(ctx);
        tm_value xv = Input(t, TM_F32, {m, k}), wv = Input(t, dtype, w.shape), y;
        if (c.weight_left) {
          y = Op(tm_op_matmul, t, wv, Op(tm_op_transpose, t, xv, swap, 2));  // (n, m)
        } else {
          tm_value rhs = c.transposed ? Op(tm_op_transpose, t, wv, swap, 2) : wv;
          y = Op(tm_op_matmul, t, xv, rhs);  // (m, n)
        }
        End(t, {y});
        std::vector<int64_t> out_shape =
            c.weight_left ? std::vector<int64_t>{n, m} : std::vector<int64_t>{m, n};
        Host<float> got(out_shape, -7.0f);
        tm_compile_options o = Options();
        Program p;
        ASSERT_EQ(CompileInvoke(ctx, t, {x.view(), w.view()}, {got.view()}, &o, &p), TM_OK)
            << tm_last_error();
        std::vector<double> want;
        for (int64_t r = 0; r < out_shape[0]; ++r)
          for (int64_t col = 0; col < out_shape[1]; ++col) {
            const int64_t i = c.weight_left ? col : r, j = c.weight_left ? r : col;
            double acc = 0;
            for (int64_t q = 0; q < k; ++q)
              acc += double(x[i * k + q]) * w.at(stored_nk ? j * k + q : q * n + j);
            want.push_back(acc);
          }
        // Sums of 300 products of values in [-1, 1) in f32: |error| < 300 * 2^-24 * sum|.|.
        EXPECT_TRUE(AllClose(got.data, want, 1e-5, 2e-5));
        const std::string lowered = StageText(p, TM_STAGE_LOWERED);
        EXPECT_GE(CountSubstr(lowered, std::string("llvm.call @") + c.kernel), 1) << lowered;
        EXPECT_LE(CountSubstr(lowered, "llvm.call @malloc"), 1);
      }
    }
  }
}

// The three forms of a prefill product with a weight W: x @ W (W stored (k, n)), x @ W^T
// (W stored (n, k)) and W @ x^T (W stored (n, k), on the left), for x of (m, k).
struct ProductForm {
  int form;  // 0, 1, 2 in that order
  bool stored_nk() const { return form != 0; }
  bool weight_left() const { return form == 2; }
  std::vector<int64_t> weight_shape(int64_t n, int64_t k) const {
    return stored_nk() ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  }
  std::vector<int64_t> out_shape(int64_t m, int64_t n) const {
    return weight_left() ? std::vector<int64_t>{n, m} : std::vector<int64_t>{m, n};
  }
  // Element (i, j) of W as op(W) is read, for row i of x (or column i of W @ x^T).
  int64_t weight_index(int64_t q, int64_t j, int64_t n, int64_t k) const {
    return stored_nk() ? j * k + q : q * n + j;
  }
  tm_value Product(Trace &t, tm_value x, tm_value w) const {
    const int32_t swap[] = {1, 0};
    if (weight_left()) return Op(tm_op_matmul, t, w, Op(tm_op_transpose, t, x, swap, 2));
    return Op(tm_op_matmul, t, x, form == 1 ? Op(tm_op_transpose, t, w, swap, 2) : w);
  }
};

// Prefill products whose half weight is widened in many strips (128 columns or 256 rows
// each: n = 3600 takes 29, the last one partial), in the three forms: strips of B's stored
// columns (x @ W), of B's stored rows (x @ W^T) and of A's stored rows (W @ x^T). Against
// the double-precision sum of the widened values.
TEST(HalfPrecision, PrefillProductsSpanningSeveralPanels) {
  const int64_t m = 20, k = 300, n = 3600;
  for (tm_dtype dtype : {TM_F16, TM_BF16})
    for (const ProductForm form : {ProductForm{0}, ProductForm{1}, ProductForm{2}}) {
      SCOPED_TRACE(std::string(Name(dtype)) + " form " + std::to_string(form.form));
      HalfHost w = RandomHalf(dtype, form.weight_shape(n, k), 51 + form.form);
      Host<float> x({m, k},
                    Cast<float>(Pseudo(static_cast<size_t>(m * k), -1, 1, 61 + form.form)));
      Context ctx = NewContext();
      Trace t = NewTrace(ctx);
      tm_value xv = Input(t, TM_F32, {m, k});  // input 0, then the weight: in this order
      tm_value wv = Input(t, dtype, w.shape);
      End(t, {form.Product(t, xv, wv)});
      const std::vector<int64_t> out_shape = form.out_shape(m, n);
      Host<float> got(out_shape, -7.0f);
      tm_compile_options o = Options();
      Program p;
      ASSERT_EQ(CompileInvoke(ctx, t, {x.view(), w.view()}, {got.view()}, &o, &p), TM_OK)
          << tm_last_error();
      EXPECT_GE(CountSubstr(StageText(p, TM_STAGE_LOWERED), "llvm.call @tm_rt_sgemm_half"), 1);
      // A sum of k products in f32 is within k * 2^-24 * sum |products| of the exact one.
      size_t wrong = 0;
      for (int64_t r = 0; r < out_shape[0]; ++r)
        for (int64_t col = 0; col < out_shape[1]; ++col) {
          const int64_t i = form.weight_left() ? col : r, j = form.weight_left() ? r : col;
          double acc = 0, magnitude = 0;
          for (int64_t q = 0; q < k; ++q) {
            const double product = double(x[i * k + q]) * w.at(form.weight_index(q, j, n, k));
            acc += product;
            magnitude += std::fabs(product);
          }
          const double bound = double(k) * 0x1p-24 * magnitude;
          const double value = got[r * out_shape[1] + col];
          if (!(std::fabs(value - acc) <= bound) && wrong++ < 5)
            ADD_FAILURE() << "element (" << r << ", " << col << "): " << value << ", exactly "
                          << acc << " (bound " << bound << ")";
        }
      EXPECT_EQ(wrong, 0u);
    }
}

// The decode kernels read a half matrix through the f32 arithmetic: a product with an f16
// or bf16 weight is bit for bit the product with its f32 widening (an F16 checkpoint keeps
// its tokens exactly), in both GEMV forms, at sizes with a parallel split and odd tails.
TEST(HalfPrecision, DecodeKernelsGiveTheBitsOfTheWidenedWeight) {
  const int32_t swap[] = {1, 0};
  for (tm_dtype dtype : {TM_F16, TM_BF16}) {
    for (int64_t k : {int64_t{129}, int64_t{768}, int64_t{1500}}) {
      const int64_t n = 1031;
      for (bool head : {false, true}) {  // x @ W (rows) or W(n, k) @ x^T (dot products)
        SCOPED_TRACE(std::string(Name(dtype)) + (head ? " head" : " rows") + " k=" +
                     std::to_string(k));
        HalfHost w = RandomHalf(dtype, head ? std::vector<int64_t>{n, k}
                                            : std::vector<int64_t>{k, n}, 41);
        Host<float> wide(w.shape, 0.0f);
        for (size_t i = 0; i < w.bits.size(); ++i) wide[i] = static_cast<float>(w.at(i));
        Host<float> x({1, k}, Cast<float>(Pseudo(static_cast<size_t>(k), -1, 1, 43)));
        auto run = [&](tm_dtype wdtype, tm_tensor weight) {
          Context ctx = NewContext();
          Trace t = NewTrace(ctx);
          tm_value xv = Input(t, TM_F32, {1, k}), wv = Input(t, wdtype, w.shape);
          End(t, {head ? Op(tm_op_matmul, t, wv, Op(tm_op_transpose, t, xv, swap, 2))
                       : Op(tm_op_matmul, t, xv, wv)});
          Host<float> y(head ? std::vector<int64_t>{n, 1} : std::vector<int64_t>{1, n}, 0.0f);
          tm_compile_options o = Options();
          EXPECT_EQ(CompileInvoke(ctx, t, {x.view(), weight}, {y.view()}, &o), TM_OK)
              << tm_last_error();
          return y.data;
        };
        std::vector<float> from_half = run(dtype, w.view()), from_f32 = run(TM_F32, wide.view());
        EXPECT_EQ(0, std::memcmp(from_half.data(), from_f32.data(), from_half.size() * sizeof(float)));
      }
    }
  }
}

// Prefill products (more than 16 rows) with a half weight are bit for bit the products with
// its f32 widening, in the three forms, at sizes with partial strips of 128 columns and 256
// rows and more than one row block (m = 300): the strips are the f32 product's blocks.
TEST(HalfPrecision, PrefillProductsGiveTheBitsOfTheWidenedWeight) {
  const int64_t m = 300, k = 200, n = 1031;
  for (tm_dtype dtype : {TM_F16, TM_BF16})
    for (const ProductForm form : {ProductForm{0}, ProductForm{1}, ProductForm{2}}) {
      SCOPED_TRACE(std::string(Name(dtype)) + " form " + std::to_string(form.form));
      HalfHost w = RandomHalf(dtype, form.weight_shape(n, k), 71 + form.form);
      Host<float> wide(w.shape, 0.0f);
      for (size_t i = 0; i < w.bits.size(); ++i) wide[i] = static_cast<float>(w.at(i));
      Host<float> x({m, k},
                    Cast<float>(Pseudo(static_cast<size_t>(m * k), -1, 1, 81 + form.form)));
      auto run = [&](tm_dtype wdtype, tm_tensor weight) {
        Context ctx = NewContext();
        Trace t = NewTrace(ctx);
        tm_value xv = Input(t, TM_F32, {m, k});  // input 0, then the weight
        tm_value wv = Input(t, wdtype, w.shape);
        End(t, {form.Product(t, xv, wv)});
        Host<float> y(form.out_shape(m, n), 0.0f);
        tm_compile_options o = Options();
        EXPECT_EQ(CompileInvoke(ctx, t, {x.view(), weight}, {y.view()}, &o), TM_OK)
            << tm_last_error();
        return y.data;
      };
      std::vector<float> from_half = run(dtype, w.view()), from_f32 = run(TM_F32, wide.view());
      ASSERT_EQ(from_half.size(), from_f32.size());
      EXPECT_EQ(0, std::memcmp(from_half.data(), from_f32.data(), from_half.size() * sizeof(float)));
    }
}

}  // namespace
}  // namespace tmtest

namespace tmtest {
namespace {

// The rows of a short prompt's product (up to 16), or of a batch's decode step, get exactly
// the bits each row gets alone, as in a decode step: with a half-precision weight x @ W (rows
// of W streamed) and x @ W^T (dot products, four rows of x at a time), in f16 and bf16; with
// an f32 weight x @ W^T (a weight stored output-major, as GPT-2's on the CPU). So the KV
// cache, recomputing the prefix and a batch agree to the bit on up to 16 rows. (An f32 x @ W
// goes to OpenBLAS from two rows on: its rows differ from decode's in their last bits.)
TEST(GemvKernels, RowsOfAShortPromptHaveTheirDecodeBits) {
  const int64_t k = 300, n = 257, m = 16;
  const int32_t swap[] = {1, 0};
  Host<float> x({m, k}, Cast<float>(Pseudo(static_cast<size_t>(m * k), -1, 1, 61)));
  for (tm_dtype dtype : {TM_F16, TM_BF16, TM_F32}) {
    for (bool transposed : {false, true}) {
      if (dtype == TM_F32 && !transposed) continue;
      SCOPED_TRACE(std::string(dtype == TM_F16 ? "f16" : dtype == TM_BF16 ? "bf16" : "f32") +
                   (transposed ? " x @ W^T" : " x @ W"));
      const std::vector<int64_t> wshape = transposed ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
      HalfHost half = RandomHalf(dtype == TM_F32 ? TM_F16 : dtype, wshape, 62);
      Host<float> wide(wshape, 0.0f);  // the f32 weight: the f16 one widened
      for (size_t i = 0; i < half.bits.size(); ++i) wide[i] = static_cast<float>(half.at(i));
      auto run = [&](int64_t rows, const float *xdata) {
        Context ctx = NewContext();
        Trace t = NewTrace(ctx);
        tm_value xv = Input(t, TM_F32, {rows, k}), wv = Input(t, dtype, wshape);
        End(t, {Op(tm_op_matmul, t, xv, transposed ? Op(tm_op_transpose, t, wv, swap, 2) : wv)});
        std::vector<int64_t> xs = {rows, k};
        Host<float> y({rows, n}, 0.0f);
        tm_tensor weight = dtype == TM_F32 ? wide.view() : half.view();
        tm_compile_options o = Options();
        EXPECT_EQ(CompileInvoke(ctx, t, {View(const_cast<float *>(xdata), xs), weight}, {y.view()}, &o),
                  TM_OK)
            << tm_last_error();
        return y.data;
      };
      const std::vector<float> all = run(m, x.data.data());
      for (int64_t i : {int64_t{0}, int64_t{5}, int64_t{10}, m - 1}) {
        const std::vector<float> one = run(1, x.data.data() + i * k);
        EXPECT_EQ(0, std::memcmp(one.data(), all.data() + i * n, static_cast<size_t>(n) * sizeof(float)))
            << "row " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tmtest
