// Op semantics against references computed here in double precision (or by hand).
// Typed tests run each op in f32 and in f64.
#include <cfloat>
#include <functional>
#include <limits>

#include "test_util.h"

namespace tmtest {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Traces body(trace, inputs) on inputs shaped like `ins` (all of dtype In), runs it and
// returns the one output, of dtype Out and shape out_shape (a mismatch fails the invoke).
template <typename Out, typename In>
std::vector<Out> RunOne(std::vector<Host<In>> ins, std::vector<int64_t> out_shape,
                     const std::function<tm_value(tm_trace *, std::vector<tm_value>)> &body,
                     const tm_compile_options *options = nullptr, std::string *lowered = nullptr) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  std::vector<tm_value> vs;
  std::vector<tm_tensor> views;
  for (Host<In> &h : ins) {
    vs.push_back(Input(t, DtypeOf<In>(), h.shape));
    views.push_back(h.view());
  }
  End(t, {body(t, vs)});
  Host<Out> y(out_shape, Out(-7));
  Program p;
  tm_status s = CompileInvoke(ctx, t, views, {y.view()}, options, &p);
  if (s != TM_OK) ADD_FAILURE() << tm_status_string(s) << ": " << tm_last_error();
  if (lowered && p) *lowered = StageText(p, TM_STAGE_LOWERED);
  return y.data;
}

// Tolerances for results vs a double-precision reference: a few f32 ulps (relative
// 1e-5, with an absolute floor of 1e-6 near zero) or f64 ulps (1e-12, floor 1e-13).
template <typename T> struct Tol;
template <> struct Tol<float> { static constexpr double rel = 1e-5, abs = 1e-6; };
template <> struct Tol<double> { static constexpr double rel = 1e-12, abs = 1e-13; };

template <typename T>
class OpsT : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(OpsT, FloatTypes);

template <typename T>
Host<T> Random(std::vector<int64_t> shape, double lo, double hi, uint32_t seed) {
  return Host<T>(shape, Cast<T>(Pseudo(NumElements(shape), lo, hi, seed)));
}

// ---- Elementwise ------------------------------------------------------------------------------

TYPED_TEST(OpsT, BinaryOpsBroadcastRowAgainstMatrix) {
  using T = TypeParam;
  using Fn = tm_status (*)(tm_trace *, tm_value, tm_value, tm_value *);
  struct Case { Fn op; std::function<double(double, double)> ref; };
  const std::vector<Case> cases = {
      {tm_op_add, [](double a, double b) { return a + b; }},
      {tm_op_sub, [](double a, double b) { return a - b; }},
      {tm_op_mul, [](double a, double b) { return a * b; }},
      {tm_op_div, [](double a, double b) { return a / b; }},
      {tm_op_pow, [](double a, double b) { return std::pow(a, b); }},
      {tm_op_maximum, [](double a, double b) { return std::max(a, b); }},
      {tm_op_minimum, [](double a, double b) { return std::min(a, b); }},
  };
  // a in [0.5, 2) keeps pow real; b in [0.5, 2) keeps div away from 0.
  Host<T> a = Random<T>({2, 3}, 0.5, 2, 1), b = Random<T>({3}, 0.5, 2, 2);
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<T> y = RunOne<T, T>({a, b}, {2, 3}, [&](tm_trace *t, std::vector<tm_value> v) {
      return Op(cases[c].op, t, v[0], v[1]);
    });
    std::vector<double> want(6);
    for (int i = 0; i < 6; ++i) want[i] = cases[c].ref(a[i], b[i % 3]);
    EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, Tol<T>::abs)) << "case " << c;
  }
}

// Every unary op of the library's table (tm_op_unary) against a double-precision formula
// written here, independently of the table: an op the library knows without a case here
// fails the test. Inputs span each op's domain.
struct UnaryCase {
  tm_unary_op op;
  double (*ref)(double);
  double lo, hi;
};
const std::vector<UnaryCase> &UnaryCases() {
  static const std::vector<UnaryCase> cases = {
      {TM_UNARY_NEG, [](double x) { return -x; }, -3, 3},
      {TM_UNARY_EXP, [](double x) { return std::exp(x); }, -5, 5},
      {TM_UNARY_LOG, [](double x) { return std::log(x); }, 0.01, 10},
      {TM_UNARY_TANH, [](double x) { return std::tanh(x); }, -4, 4},
      {TM_UNARY_SQRT, [](double x) { return std::sqrt(x); }, 0, 10},
      {TM_UNARY_RSQRT, [](double x) { return 1 / std::sqrt(x); }, 0.01, 10},
      {TM_UNARY_ERF, [](double x) { return std::erf(x); }, -3, 3},
      {TM_UNARY_ABS, [](double x) { return std::fabs(x); }, -3, 3},
      {TM_UNARY_SIGMOID, [](double x) { return 1 / (1 + std::exp(-x)); }, -12, 12},
  };
  return cases;
}

TEST(UnaryOpTable, EveryOpTheLibraryKnowsHasACaseAndAName) {
  ASSERT_EQ(static_cast<size_t>(tm_unary_op_count()), UnaryCases().size())
      << "a unary op without a case in UnaryCases (tests/capi/ops_test.cpp)";
  for (const UnaryCase &c : UnaryCases()) {
    ASSERT_NE(tm_unary_op_name(c.op), nullptr) << c.op;
    EXPECT_GT(std::strlen(tm_unary_op_name(c.op)), 0u);
  }
  EXPECT_EQ(tm_unary_op_name(static_cast<tm_unary_op>(tm_unary_op_count())), nullptr);
  EXPECT_EQ(tm_unary_op_name(static_cast<tm_unary_op>(-1)), nullptr);
}

TEST(UnaryOpTable, AnOpTheLibraryDoesNotKnowIsRefusedNamingIt) {
  Trace trace;
  Context ctx;
  ASSERT_EQ(tm_context_create(ctx.out()), TM_OK);
  ASSERT_EQ(tm_trace_begin(ctx, "unknown", trace.out()), TM_OK);
  tm_value x = 0, y = 0;
  const int64_t shape[] = {2};
  ASSERT_EQ(tm_op_input(trace, TM_F32, 1, shape, &x), TM_OK);
  const int unknown = tm_unary_op_count();
  EXPECT_EQ(tm_op_unary(trace, static_cast<tm_unary_op>(unknown), x, &y),
            TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("unknown op " + std::to_string(unknown)),
            std::string::npos)
      << tm_last_error();
}

TYPED_TEST(OpsT, UnaryOps) {
  using T = TypeParam;
  for (size_t c = 0; c < UnaryCases().size(); ++c) {
    const UnaryCase &u = UnaryCases()[c];
    Host<T> x = Random<T>({3, 5}, u.lo, u.hi, 3 + c);
    std::vector<T> y = RunOne<T, T>({x}, {3, 5}, [&](tm_trace *t, std::vector<tm_value> v) {
      tm_value out = 0;
      EXPECT_EQ(tm_op_unary(t, u.op, v[0], &out), TM_OK) << tm_last_error();
      return out;
    });
    std::vector<double> want;
    for (T v : x.data) want.push_back(u.ref(v));
    EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, Tol<T>::abs)) << tm_unary_op_name(u.op);
  }
}

// The named functions published before tm_op_unary record the same ops.
TYPED_TEST(OpsT, NamedUnaryFunctionsAreTheirOps) {
  using T = TypeParam;
  using Fn = tm_status (*)(tm_trace *, tm_value, tm_value *);
  const std::vector<std::pair<Fn, tm_unary_op>> named = {
      {tm_op_neg, TM_UNARY_NEG},   {tm_op_exp, TM_UNARY_EXP},   {tm_op_log, TM_UNARY_LOG},
      {tm_op_tanh, TM_UNARY_TANH}, {tm_op_sqrt, TM_UNARY_SQRT}, {tm_op_rsqrt, TM_UNARY_RSQRT},
      {tm_op_erf, TM_UNARY_ERF},   {tm_op_abs, TM_UNARY_ABS}};
  Host<T> x = Random<T>({7}, 0.1, 3, 11);
  for (const auto &[fn, op] : named) {
    std::vector<T> a = RunOne<T, T>({x}, {7}, [&](tm_trace *t, std::vector<tm_value> v) {
      return Op(fn, t, v[0]);
    });
    std::vector<T> b = RunOne<T, T>({x}, {7}, [&](tm_trace *t, std::vector<tm_value> v) {
      tm_value out = 0;
      EXPECT_EQ(tm_op_unary(t, op, v[0], &out), TM_OK);
      return out;
    });
    EXPECT_EQ(a, b) << tm_unary_op_name(op);
  }
}

TYPED_TEST(OpsT, ComparisonsAndWhere) {
  using T = TypeParam;
  Host<T> a({5}, {1, 2, 3, -1, 0}), b({5}, {2, 2, 1, -2, 0});
  auto cmp = [&](auto op) {
    return RunOne<uint8_t, T>({a, b}, {5}, [&](tm_trace *t, std::vector<tm_value> v) {
      return Op(op, t, v[0], v[1]);
    });
  };
  EXPECT_EQ(cmp(tm_op_less), (std::vector<uint8_t>{1, 0, 0, 0, 0}));
  EXPECT_EQ(cmp(tm_op_greater), (std::vector<uint8_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(cmp(tm_op_equal), (std::vector<uint8_t>{0, 1, 0, 0, 1}));
  // where(a < b, a, b) is the elementwise minimum.
  std::vector<T> y = RunOne<T, T>({a, b}, {5}, [&](tm_trace *t, std::vector<tm_value> v) {
    return Op(tm_op_where, t, Op(tm_op_less, t, v[0], v[1]), v[0], v[1]);
  });
  EXPECT_TRUE(AllClose(y, {1, 2, 1, -2, 0}, 0.0));
}

// ---- Reductions -------------------------------------------------------------------------------

TYPED_TEST(OpsT, ReductionsWithKeepdimsAndNegativeAxis) {
  using T = TypeParam;
  using Fn = tm_status (*)(tm_trace *, tm_value, int32_t, int32_t, tm_value *);
  Host<T> x = Random<T>({2, 3, 4}, -2, 2, 5);
  auto at = [&](int i, int j, int k) { return double(x[(i * 3 + j) * 4 + k]); };
  // Reference over axis 1 (written as -2), for (i, k).
  auto ref = [&](int i, int k, int what) {
    double sum = 0, mx = -kInf, sq = 0;
    for (int j = 0; j < 3; ++j) sum += at(i, j, k), mx = std::max(mx, at(i, j, k));
    double mean = sum / 3;
    for (int j = 0; j < 3; ++j) sq += (at(i, j, k) - mean) * (at(i, j, k) - mean);
    return what == 0 ? sum : what == 1 ? mx : what == 2 ? mean : sq / 3;
  };
  const Fn ops[] = {tm_op_reduce_sum, tm_op_reduce_max, tm_op_reduce_mean, tm_op_reduce_var};
  for (int what = 0; what < 4; ++what)
    for (int keep = 0; keep < 2; ++keep) {
      std::vector<int64_t> shape = keep ? std::vector<int64_t>{2, 1, 4} : std::vector<int64_t>{2, 4};
      std::vector<T> y = RunOne<T, T>({x}, shape, [&](tm_trace *t, std::vector<tm_value> v) {
        return Op(ops[what], t, v[0], -2, keep);
      });
      std::vector<double> want;
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 4; ++k) want.push_back(ref(i, k, what));
      EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, Tol<T>::abs)) << "op " << what << " keep " << keep;
    }
  // The last axis, non-negative, without keepdims: row sums of (2*3, 4).
  std::vector<T> y = RunOne<T, T>({x}, {2, 3}, [&](tm_trace *t, std::vector<tm_value> v) {
    return Op(tm_op_reduce_sum, t, v[0], 2, 0);
  });
  std::vector<double> want;
  for (int r = 0; r < 6; ++r) want.push_back(at(r / 3, r % 3, 0) + at(r / 3, r % 3, 1) +
                                             at(r / 3, r % 3, 2) + at(r / 3, r % 3, 3));
  EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, Tol<T>::abs));
}

// ---- Composites ------------------------------------------------------------------------------

TYPED_TEST(OpsT, LayerNorm) {
  using T = TypeParam;
  const double eps = 1e-5;
  Host<T> x = Random<T>({3, 8}, -3, 3, 6), g = Random<T>({8}, 0.5, 1.5, 7),
          b = Random<T>({8}, -1, 1, 8);
  std::vector<T> y = RunOne<T, T>({x, g, b}, {3, 8}, [&](tm_trace *t, std::vector<tm_value> v) {
    return Op(tm_op_layer_norm, t, v[0], v[1], v[2], eps);
  });
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 8; ++c) mean += x[r * 8 + c] / 8.0;
    for (int c = 0; c < 8; ++c) var += (x[r * 8 + c] - mean) * (x[r * 8 + c] - mean) / 8.0;
    for (int c = 0; c < 8; ++c)
      want.push_back((x[r * 8 + c] - mean) / std::sqrt(var + eps) * g[c] + b[c]);
  }
  // Outputs are O(1): the f32 floor is 1e-5 (f64: 1e-12) for the mean/var rounding.
  EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, 10 * Tol<T>::abs));
}

TYPED_TEST(OpsT, GeluTanhMatchesTheFormula) {
  using T = TypeParam;
  Host<T> x = Random<T>({16}, -5, 5, 9);
  x[0] = 0;
  std::vector<T> y = RunOne<T, T>({x}, {16}, [&](tm_trace *t, std::vector<tm_value> v) {
    return Op(tm_op_gelu_tanh, t, v[0]);
  });
  std::vector<double> want;
  for (T v : x.data) {
    double d = v;
    want.push_back(0.5 * d * (1 + std::tanh(std::sqrt(2 / M_PI) * (d + 0.044715 * d * d * d))));
  }
  EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, Tol<T>::abs));
}

TYPED_TEST(OpsT, CausalMask) {
  using T = TypeParam;
  for (int64_t offset : {0, 1, -1}) {
    Context ctx = NewContext();
    Trace t = NewTrace(ctx);
    End(t, {Op(tm_op_causal_mask, t, int64_t{3}, int64_t{5}, offset, DtypeOf<T>())});
    Host<T> y({3, 5}, T(7));
    TM_ASSERT_OK(CompileInvoke(ctx, t, {}, {y.view()}));
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 5; ++c) {
        T want = c <= r + offset ? T(0) : std::numeric_limits<T>::lowest();
        EXPECT_EQ(y[r * 5 + c], want) << "offset " << offset << " at " << r << "," << c;
      }
  }
}

TYPED_TEST(OpsT, SoftmaxIsStableAndHandlesInfinities) {
  using T = TypeParam;
  // Rows: ordinary; +-1e4 (exp overflows without the max shift); some -inf (masked);
  // all -inf (defined as uniform, see tm_op_softmax); one +inf among finite values.
  Host<T> x({6, 4}, Cast<T>({0.5, -1, 2, 0.25,             //
                             1e4, -1e4, 1e4 - 1, 0,         //
                             -kInf, 1, -kInf, 3,            //
                             -kInf, -kInf, -kInf, -kInf,    //
                             -1e4, -1e4 + 2, -1e4 + 1, -1e4,  //
                             kInf, 1, 2, -kInf}));
  std::vector<T> y = RunOne<T, T>({x}, {6, 4}, [&](tm_trace *t, std::vector<tm_value> v) {
    return Op(tm_op_softmax, t, v[0], -1);
  });
  std::vector<double> want;
  for (int r = 0; r < 6; ++r) {
    double mx = -kInf, sum = 0, e[4];
    for (int c = 0; c < 4; ++c) mx = std::max(mx, double(x[r * 4 + c]));
    for (int c = 0; c < 4; ++c) {
      double v = x[r * 4 + c];
      e[c] = v == mx ? 1.0 : std::exp(v - mx);  // the row's max (even +-inf) weighs exp(0)
      sum += e[c];
    }
    for (int c = 0; c < 4; ++c) want.push_back(e[c] / sum);
  }
  // Values: relative 1e-5 (f32) / 1e-12 (f64) of the double reference.
  EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, Tol<T>::abs));
  // Each row finite and summing to 1 within 1e-6 (f32) / 1e-12 (f64).
  const double sum_tol = std::is_same<T, float>::value ? 1e-6 : 1e-12;
  for (int r = 0; r < 6; ++r) {
    double sum = 0;
    for (int c = 0; c < 4; ++c) {
      EXPECT_TRUE(std::isfinite(y[r * 4 + c])) << "row " << r << " col " << c;
      sum += y[r * 4 + c];
    }
    EXPECT_NEAR(sum, 1.0, sum_tol) << "row " << r;
  }
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(y[3 * 4 + c], 0.25, sum_tol);  // uniform row
}

// ---- Matmul -----------------------------------------------------------------------------------

TYPED_TEST(OpsT, MatmulWithAndWithoutBlas) {
  using T = TypeParam;
  const bool f32 = std::is_same<T, float>::value;
  const std::string gemm = "tm_rt_gemm";
  // Single-row/column f32 products go to tinymlir's GEMV kernels, f64 to OpenBLAS's GEMV
  // inside tm_rt_gemm.
  const std::string gemv = f32 ? "tm_rt_gemv_" : "tm_rt_gemm";
  struct Case { std::vector<int64_t> a, b, y; bool vector; };
  const std::vector<Case> cases = {
      {{5, 7}, {7, 3}, {5, 3}, false},                  // 2-D
      {{33, 17}, {17, 9}, {33, 9}, false},               // 2-D, odd sizes
      {{1, 6}, {6, 4}, {1, 4}, true},                    // M = 1: gemv
      {{4, 6}, {6, 1}, {4, 1}, true},                    // N = 1: gemv
      {{1, 300}, {300, 400}, {1, 400}, true},            // M = 1, large: split across threads
      {{600, 200}, {200, 1}, {600, 1}, true},            // N = 1, large: split across threads
      {{3, 4, 5}, {3, 5, 2}, {3, 4, 2}, false},          // batch
      {{3, 1, 5}, {3, 5, 2}, {3, 1, 2}, true},           // batch, M = 1
      {{2, 3, 4, 5}, {2, 3, 5, 6}, {2, 3, 4, 6}, false},  // (b,h,m,k)@(b,h,k,n)
      {{2, 3, 4}, {4, 5}, {2, 3, 5}, false},             // (..,m,k)@(k,n)
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case &cs = cases[c];
    Host<T> a = Random<T>(cs.a, -1, 1, 30 + c), b = Random<T>(cs.b, -1, 1, 40 + c);
    // Reference: batch dims of a (b has none, or the same), then m, k, n.
    int64_t k = cs.a.back(), n = cs.b.back(), m = cs.a[cs.a.size() - 2];
    int64_t batch = NumElements(cs.a) / (m * k);
    bool shared_b = cs.b.size() == 2;
    if (shared_b) m *= batch, batch = 1;  // (..,m,k)@(k,n): the leading dims fold into m
    std::vector<double> want(batch * m * n);
    for (int64_t bt = 0; bt < batch; ++bt)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += double(a[(bt * m + i) * k + p]) * b[(bt * k + p) * n + j];
          want[(bt * m + i) * n + j] = acc;
        }
    for (int blas = 0; blas < 2; ++blas) {
      tm_compile_options o = Options(1, blas);
      std::string lowered;
      std::vector<T> y = RunOne<T, T>(
          {a, b}, cs.y,
          [&](tm_trace *t, std::vector<tm_value> v) { return Op(tm_op_matmul, t, v[0], v[1]); },
          &o, &lowered);
      // Sums of up to 17 products of values in [-1, 1): relative 1e-5 with an absolute
      // floor of 1e-5 (f32), 1e-12 and 1e-12 (f64).
      EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, f32 ? 1e-5 : 1e-12))
          << "case " << c << " blas " << blas;
      if (blas) {
        EXPECT_GE(CountSubstr(lowered, cs.vector ? gemv : gemm), 1) << "case " << c;
      } else {
        EXPECT_EQ(CountSubstr(lowered, "tm_rt_gem"), 0) << "case " << c;
      }
    }
  }
}

// A transposed input that only feeds a matmul is read in place (BLAS's transpose flag or
// leading dimension), not copied: the attention's K and V cache rows, (L, h*hd) reshaped to
// (L, h, hd) and permuted. Results against the double loop; no copy left.
TYPED_TEST(OpsT, MatmulReadsTransposedInputsInPlace) {
  using T = TypeParam;
  const int64_t h = 3, hd = 4, l = 7;
  const int32_t to_hdl[] = {1, 2, 0}, to_hld[] = {1, 0, 2}, swap[] = {1, 0};
  for (int64_t t : {int64_t{1}, int64_t{5}}) {  // decode (GEMV kernels) and prefill (GEMM)
    Host<T> q = Random<T>({t, h * hd}, -1, 1, 70 + t), k = Random<T>({l, h * hd}, -1, 1, 80 + t);
    Host<T> p = Random<T>({h, t, l}, -1, 1, 90 + t);
    auto split = [](tm_trace *tr, tm_value x, int64_t rows, const int32_t *perm) {
      const int64_t shape[] = {rows, h, hd};
      return Op(tm_op_transpose, tr, Op(tm_op_reshape, tr, x, 3, shape), perm, 3);
    };
    struct Case {
      const char *name;
      std::vector<Host<T>> in;
      std::vector<int64_t> out;
      std::function<tm_value(tm_trace *, std::vector<tm_value>)> f;
      std::function<double(int64_t, int64_t, int64_t)> want;  // batch, row, column
    };
    auto dot_qk = [&](int64_t b, int64_t i, int64_t j) {  // q_b[i] . k_b[j]
      double acc = 0;
      for (int64_t x = 0; x < hd; ++x) acc += double(q[i * h * hd + b * hd + x]) * k[j * h * hd + b * hd + x];
      return acc;
    };
    const std::vector<Case> cases = {
        {"scores (h,t,hd)@(h,hd,l)", {q, k}, {h, t, l},
         [&](tm_trace *tr, std::vector<tm_value> v) {
           return Op(tm_op_matmul, tr, split(tr, v[0], t, to_hld), split(tr, v[1], l, to_hdl));
         },
         dot_qk},
        {"mix (h,t,l)@(h,l,hd)", {p, k}, {h, t, hd},
         [&](tm_trace *tr, std::vector<tm_value> v) {
           return Op(tm_op_matmul, tr, v[0], split(tr, v[1], l, to_hld));
         },
         [&](int64_t b, int64_t i, int64_t j) {
           double acc = 0;
           for (int64_t x = 0; x < l; ++x) acc += double(p[(b * t + i) * l + x]) * k[x * h * hd + b * hd + j];
           return acc;
         }},
        {"2-D q @ k^T", {q, k}, {1, t, l},
         [&](tm_trace *tr, std::vector<tm_value> v) {
           return Op(tm_op_matmul, tr, v[0], Op(tm_op_transpose, tr, v[1], swap, 2));
         },
         [&](int64_t, int64_t i, int64_t j) {
           double acc = 0;
           for (int64_t b = 0; b < h; ++b) acc += dot_qk(b, i, j);
           return acc;
         }},
    };
    for (const Case &c : cases) {
      std::vector<int64_t> out = c.out;
      if (out[0] == 1) out.erase(out.begin());
      tm_compile_options o = Options();
      std::string lowered;
      std::vector<T> y = RunOne<T, T>(c.in, out, c.f, &o, &lowered);
      std::vector<double> want;
      for (int64_t b = 0; b < c.out[0]; ++b)
        for (int64_t i = 0; i < c.out[1]; ++i)
          for (int64_t j = 0; j < c.out[2]; ++j) want.push_back(c.want(b, i, j));
      // Sums of up to 12 products of values in [-1, 1): as MatmulWithAndWithoutBlas.
      EXPECT_TRUE(AllClose(y, want, Tol<T>::rel, std::is_same<T, float>::value ? 1e-5 : 1e-12))
          << c.name << ", t = " << t;
      // No temporary: the product is computed in the output (buffers_test.cpp), and each
      // transpose copied would be one.
      EXPECT_EQ(CountSubstr(lowered, "llvm.call @malloc"), 0) << c.name << ", t = " << t;
    }
  }
}

// ---- Layout ops -------------------------------------------------------------------------------

TYPED_TEST(OpsT, ReshapeTransposeSliceConcat) {
  using T = TypeParam;
  Host<T> x({2, 3, 4}, T(0));
  for (int i = 0; i < 24; ++i) x[i] = T(i);  // element i holds i: results are indices
  auto run = [&](std::vector<int64_t> shape, std::function<tm_value(tm_trace *, tm_value)> f) {
    return ToDouble(RunOne<T, T>({x}, shape, [&](tm_trace *t, std::vector<tm_value> v) {
      return f(t, v[0]);
    }));
  };
  std::vector<double> iota(24);
  for (int i = 0; i < 24; ++i) iota[i] = i;

  const int64_t to[] = {4, -1};
  EXPECT_EQ(run({4, 6}, [&](tm_trace *t, tm_value v) { return Op(tm_op_reshape, t, v, 2, to); }),
            iota);
  // NULL perm reverses the axes: y[k][j][i] = x[i][j][k].
  std::vector<double> rev;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) rev.push_back((i * 3 + j) * 4 + k);
  EXPECT_EQ(run({4, 3, 2}, [&](tm_trace *t, tm_value v) {
    return Op(tm_op_transpose, t, v, static_cast<const int32_t *>(nullptr), 0);
  }), rev);
  const int32_t perm[] = {1, 0, 2};  // y[j][i][k] = x[i][j][k]
  std::vector<double> swapped;
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) swapped.push_back((i * 3 + j) * 4 + k);
  EXPECT_EQ(run({3, 2, 4}, [&](tm_trace *t, tm_value v) { return Op(tm_op_transpose, t, v, perm, 3); }),
            swapped);
  const int64_t begin[] = {1, 0, 1}, end[] = {2, 2, 4};  // x[1:2, 0:2, 1:4]
  EXPECT_EQ(run({1, 2, 3}, [&](tm_trace *t, tm_value v) { return Op(tm_op_slice, t, v, 3, begin, end); }),
            (std::vector<double>{13, 14, 15, 17, 18, 19}));
  // concat([x, x[:, :, 0:1]], axis=-1): each row gains a copy of its first element.
  std::vector<double> cat;
  for (int r = 0; r < 6; ++r) {
    for (int k = 0; k < 4; ++k) cat.push_back(r * 4 + k);
    cat.push_back(r * 4);
  }
  const int64_t b0[] = {0, 0, 0}, e0[] = {2, 3, 1};
  EXPECT_EQ(run({2, 3, 5}, [&](tm_trace *t, tm_value v) {
    tm_value xs[] = {v, Op(tm_op_slice, t, v, 3, b0, e0)};
    return Op(tm_op_concat, t, static_cast<const tm_value *>(xs), 2, -1);
  }), cat);
}

TYPED_TEST(OpsT, CastTruncatesAndToBoolIsNonZero) {
  using T = TypeParam;
  Host<T> x({7}, Cast<T>({-2.7, -0.5, 0.0, 0.5, 2.7, 1e3 + 0.9, kNaN}));
  Host<T> finite({6}, std::vector<T>(x.data.begin(), x.data.end() - 1));
  std::vector<int32_t> ints = RunOne<int32_t, T>({finite}, {6}, [&](tm_trace *t, std::vector<tm_value> v) {
    return Op(tm_op_cast, t, v[0], TM_I32);
  });
  EXPECT_EQ(ints, (std::vector<int32_t>{-2, 0, 0, 0, 2, 1000}));  // toward zero
  std::vector<uint8_t> bools = RunOne<uint8_t, T>({x}, {7}, [&](tm_trace *t, std::vector<tm_value> v) {
    return Op(tm_op_cast, t, v[0], TM_BOOL);
  });
  EXPECT_EQ(bools, (std::vector<uint8_t>{1, 1, 0, 1, 1, 1, 1}));  // NaN != 0, as NumPy
  Host<int32_t> i({4}, {-3, 0, 7, 1 << 20});
  std::vector<T> back = RunOne<T, int32_t>({i}, {4}, [&](tm_trace *t, std::vector<tm_value> v) {
    return Op(tm_op_cast, t, v[0], DtypeOf<T>());
  });
  EXPECT_TRUE(AllClose(back, {-3, 0, 7, 1 << 20}, 0.0));
}

// Floats to ints saturate (NaN to 0), the same whether the value is an input (the CPU's
// conversion) or a constant (folded by the compiler): the compiler folded an out-of-range
// fptosi, which is poison, into a different garbage integer on every run.
template <typename F, typename I>
void CheckSaturatingCast() {
  constexpr I kMax = std::numeric_limits<I>::max(), kMin = std::numeric_limits<I>::min();
  const double limit = sizeof(I) == 8 ? 0x1p63 : 0x1p31;
  const std::vector<F> x = Cast<F>({kNaN, kInf, -kInf, 1e30, -1e30, limit, -limit, 2.9, -2.9,
                                    -0.0});
  const std::vector<I> want = {0, kMax, kMin, kMax, kMin, kMax, kMin, 2, -2, 0};
  const int64_t n = static_cast<int64_t>(x.size());
  Host<F> input({n}, x);
  EXPECT_EQ((RunOne<I, F>({input}, {n}, [&](tm_trace *t, std::vector<tm_value> v) {
              return Op(tm_op_cast, t, v[0], DtypeOf<I>());
            })),
            want)
      << "an input";
  Host<F> none({1}, Cast<F>({0.0}));  // RunOne wants an input; the constant ignores it
  EXPECT_EQ((RunOne<I, F>({none}, {n}, [&](tm_trace *t, std::vector<tm_value>) {
              Host<F> data({n}, x);
              const tm_tensor view = data.view();
              return Op(tm_op_cast, t, Op(tm_op_constant, t, &view), DtypeOf<I>());
            })),
            want)
      << "a constant";
}

TEST(Ops, FloatToIntCastsSaturateWhetherTheValueIsAnInputOrAConstant) {
  CheckSaturatingCast<float, int32_t>();
  CheckSaturatingCast<float, int64_t>();
  CheckSaturatingCast<double, int32_t>();
  CheckSaturatingCast<double, int64_t>();
}

// ---- NaN and infinities ----------------------------------------------------------------------

TEST(Ops, NanAndInfinitiesPropagate) {
  Host<float> x({5}, Cast<float>({kNaN, kInf, -kInf, 1.0, 0.0}));
  auto run = [&](std::function<tm_value(tm_trace *, tm_value)> f) {
    return RunOne<float, float>({x}, {5}, [&](tm_trace *t, std::vector<tm_value> v) {
      return f(t, v[0]);
    });
  };
  auto one = [](tm_trace *t) { return Op(tm_op_scalar, t, TM_F32, 1.0); };
  auto nan = [](tm_trace *t) { return Op(tm_op_scalar, t, TM_F32, kNaN); };
  EXPECT_TRUE(AllClose(run([&](tm_trace *t, tm_value v) { return Op(tm_op_add, t, v, one(t)); }),
                       {kNaN, kInf, -kInf, 2, 1}, 0.0));
  EXPECT_TRUE(AllClose(run([&](tm_trace *t, tm_value v) { return Op(tm_op_mul, t, v, v); }),
                       {kNaN, kInf, kInf, 1, 0}, 0.0));
  // exp: exact at the special values; exp(1) within f32 rounding (rel 1e-6).
  EXPECT_TRUE(AllClose(run([&](tm_trace *t, tm_value v) { return Op(tm_op_exp, t, v); }),
                       {kNaN, kInf, 0, std::exp(1.0), 1}, 1e-6));
  // maximum/minimum propagate NaN from either side, like NumPy (not fmax/fmin).
  EXPECT_TRUE(AllClose(run([&](tm_trace *t, tm_value v) { return Op(tm_op_maximum, t, v, one(t)); }),
                       {kNaN, kInf, 1, 1, 1}, 0.0));
  EXPECT_TRUE(AllClose(run([&](tm_trace *t, tm_value v) { return Op(tm_op_maximum, t, one(t), v); }),
                       {kNaN, kInf, 1, 1, 1}, 0.0));
  EXPECT_TRUE(AllClose(run([&](tm_trace *t, tm_value v) { return Op(tm_op_minimum, t, v, one(t)); }),
                       {kNaN, 1, -kInf, 1, 0}, 0.0));
  EXPECT_TRUE(AllClose(run([&](tm_trace *t, tm_value v) { return Op(tm_op_maximum, t, v, nan(t)); }),
                       {kNaN, kNaN, kNaN, kNaN, kNaN}, 0.0));
}

// ---- Gather -----------------------------------------------------------------------------------

template <typename I>
void CheckGather(std::vector<int64_t> index_shape, std::vector<I> indices) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx, "gather");
  tm_value table = Input(t, TM_F64, {5, 2, 3});  // rows of (2,3)
  tm_value idx = Input(t, DtypeOf<I>(), index_shape);
  End(t, {Op(tm_op_gather, t, table, idx)});
  Host<double> tab({5, 2, 3}, 0.0);
  for (int i = 0; i < 30; ++i) tab[i] = 100 * (i / 6) + i % 6;  // row r holds 100r + j
  std::vector<int64_t> out_shape = index_shape;
  out_shape.insert(out_shape.end(), {2, 3});
  Host<I> ix(index_shape, indices);
  Host<double> y(out_shape, -1.0);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {tab.view(), ix.view()}, {y.view()}));
  std::vector<double> want;
  for (I r : indices)
    for (int j = 0; j < 6; ++j) want.push_back(100.0 * r + j);
  EXPECT_TRUE(AllClose(y.data, want, 0.0));
}

TEST(Ops, GatherRowsWithI32AndI64Indices) {
  CheckGather<int32_t>({4}, {4, 0, 2, 2});
  CheckGather<int64_t>({3}, {1, 3, 0});
  CheckGather<int32_t>({2, 2}, {0, 4, 3, 1});  // 2-D index arrays
  CheckGather<int64_t>({2, 3}, {4, 4, 0, 1, 2, 3});
}

TEST(Ops, GatherClampsComputedIndices) {
  // Indices computed inside the program are not range-checked by tm_invoke; the kernel
  // clamps them to the table, so no read leaves it.
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value table = Input(t, TM_F32, {4, 1});
  tm_value idx = Input(t, TM_I32, {3});
  tm_value shifted = Op(tm_op_add, t, idx, Op(tm_op_scalar, t, TM_I32, 1.0));
  End(t, {Op(tm_op_gather, t, table, shifted)});
  Host<float> tab({4, 1}, {10, 11, 12, 13}), y({3, 1}, -1.0f);
  Host<int32_t> ix({3}, {-3, 1, 10});  // shifted: -2, 2, 11 -> clamped 0, 2, 3
  TM_ASSERT_OK(CompileInvoke(ctx, t, {tab.view(), ix.view()}, {y.view()}));
  EXPECT_TRUE(AllClose(y.data, {10, 12, 13}, 0.0));
}

// ---- Promotion (NumPy rules) ------------------------------------------------------------------

TEST(Ops, DtypePromotionFollowsNumpy) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value f32 = Input(t, TM_F32, {2}), f64 = Input(t, TM_F64, {2}), i32 = Input(t, TM_I32, {2}),
           i32b = Input(t, TM_I32, {2});
  auto dtype = [&](tm_value v) {
    tm_dtype d = TM_BOOL;
    EXPECT_EQ(tm_value_type(t, v, &d, nullptr, nullptr), TM_OK) << tm_last_error();
    return d;
  };
  tm_value a = Op(tm_op_add, t, f32, Op(tm_op_scalar, t, TM_F64, 2.0));  // Python float
  tm_value b = Op(tm_op_add, t, f32, Op(tm_op_scalar, t, TM_F32, 2.0));
  tm_value c = Op(tm_op_add, t, f32, f64);
  tm_value d = Op(tm_op_add, t, i32, f32);  // f32 cannot hold every i32
  tm_value e = Op(tm_op_div, t, i32, i32b);  // true division
  tm_value f = Op(tm_op_mul, t, i32, Op(tm_op_scalar, t, TM_I64, 3.0));  // Python int
  EXPECT_EQ(dtype(a), TM_F32);
  EXPECT_EQ(dtype(b), TM_F32);
  EXPECT_EQ(dtype(c), TM_F64);
  EXPECT_EQ(dtype(d), TM_F64);
  EXPECT_EQ(dtype(e), TM_F64);
  EXPECT_EQ(dtype(f), TM_I32);
  End(t, {a, b, c, d, e, f});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  const tm_dtype want[] = {TM_F32, TM_F32, TM_F64, TM_F64, TM_F64, TM_I32};
  for (int i = 0; i < 6; ++i) {
    tm_dtype got = TM_BOOL;
    TM_ASSERT_OK(tm_program_output_type(p, i, &got, nullptr, nullptr));
    EXPECT_EQ(got, want[i]) << "output " << i;
  }
  // The values, exact: 7/2 is 3.5, not 3.
  Host<float> xf({2}, {0.5f, 1.5f});
  Host<double> xd({2}, {0.25, -1});
  Host<int32_t> xi({2}, {7, -3}), xi2({2}, {2, 2});
  Host<float> ya({2}, 0.f), yb({2}, 0.f);
  Host<double> yc({2}, 0.), yd({2}, 0.), ye({2}, 0.);
  Host<int32_t> yf({2}, 0);
  tm_tensor in[] = {xf.view(), xd.view(), xi.view(), xi2.view()};
  tm_tensor out[] = {ya.view(), yb.view(), yc.view(), yd.view(), ye.view(), yf.view()};
  TM_ASSERT_OK(tm_invoke(p, in, 4, out, 6));
  EXPECT_TRUE(AllClose(ya.data, {2.5, 3.5}, 0.0));
  EXPECT_TRUE(AllClose(yb.data, {2.5, 3.5}, 0.0));
  EXPECT_TRUE(AllClose(yc.data, {0.75, 0.5}, 0.0));
  EXPECT_TRUE(AllClose(yd.data, {7.5, -1.5}, 0.0));
  EXPECT_TRUE(AllClose(ye.data, {3.5, -1.5}, 0.0));
  EXPECT_EQ(yf.data, (std::vector<int32_t>{21, -9}));
}

}  // namespace
}  // namespace tmtest
