// Errors: invalid programs fail at the op call with a message naming the op and shapes;
// every entry point survives NULL and bad arguments; statuses, versions, per-thread
// tm_last_error.
#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "test_util.h"

namespace tmtest {
namespace {

::testing::AssertionResult Mentions(const std::vector<std::string> &words) {
  std::string msg = tm_last_error();
  for (const std::string &w : words)
    if (msg.find(w) == std::string::npos)
      return ::testing::AssertionFailure() << "message '" << msg << "' lacks '" << w << "'";
  return ::testing::AssertionSuccess();
}

class Errors : public ::testing::Test {
 protected:
  Context ctx = NewContext();
  Trace t = NewTrace(ctx, "errors");
  tm_value out = 12345;  // output parameters are written only on success
};

// ---- Invalid programs fail at the op call -------------------------------------------------

TEST_F(Errors, BadBroadcastNamesOpAndShapes) {
  tm_value a = Input(t, TM_F32, {2, 3}), b = Input(t, TM_F32, {4, 3});
  TM_EXPECT_STATUS(tm_op_add(t, a, b, &out), TM_ERROR_SHAPE);
  EXPECT_TRUE(Mentions({"tm_op_add", "(2,3)", "(4,3)"}));
  EXPECT_EQ(out, 12345u);
  // The failed op recorded nothing: the trace is still usable.
  tm_value c = Op(tm_op_add, t, a, a);
  End(t, {c});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  EXPECT_EQ(tm_program_num_inputs(p), 2);
}

// ---- Where NumPy and the header part or NumPy leaves it open: the header's decisions ----

TEST_F(Errors, BoolTrueDivisionIsF64AsNumPys) {
  tm_value a = Input(t, TM_BOOL, {4}), b = Input(t, TM_BOOL, {4});
  tm_value q = Op(tm_op_div, t, a, b);
  tm_dtype dtype = TM_BOOL;
  int32_t rank = -1;
  TM_ASSERT_OK(tm_value_type(t, q, &dtype, &rank, nullptr));
  EXPECT_EQ(dtype, TM_F64);
  TM_EXPECT_STATUS(tm_op_sub(t, a, b, &out), TM_ERROR_DTYPE);  // NumPy: TypeError
  TM_EXPECT_STATUS(tm_op_pow(t, a, b, &out), TM_ERROR_DTYPE);  // NumPy: int8, which we lack
  End(t, {q});
  Host<uint8_t> x({4}, {1, 1, 0, 0}), y({4}, {1, 0, 1, 0});
  Host<double> r({4}, 0.0);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {x.view(), y.view()}, {r.view()}));
  EXPECT_EQ(r[0], 1.0);
  EXPECT_EQ(r[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(r[2], 0.0);
  EXPECT_TRUE(std::isnan(r[3]));  // 0 / 0
}

TEST_F(Errors, NegativeTransposeAxesCountFromTheEnd) {
  tm_value x = Input(t, TM_F32, {2, 3, 4});
  const int32_t perm[] = {-1, 0, -2}, duplicate[] = {-1, 2, 0}, too_low[] = {-4, 0, 1};
  tm_value y = Op(tm_op_transpose, t, x, perm, 3);
  int64_t shape[TM_MAX_RANK] = {};
  int32_t rank = 0;
  TM_ASSERT_OK(tm_value_type(t, y, nullptr, &rank, shape));
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(std::vector<int64_t>(shape, shape + 3), (std::vector<int64_t>{4, 2, 3}));
  TM_EXPECT_STATUS(tm_op_transpose(t, x, duplicate, 3, &out), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_op_transpose(t, x, too_low, 3, &out), TM_ERROR_OUT_OF_RANGE);
  End(t, {y});
  Host<float> in({2, 3, 4}, 0.0f);
  for (int i = 0; i < 24; ++i) in[i] = static_cast<float>(i);
  Host<float> r({4, 2, 3}, -1.0f);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {in.view()}, {r.view()}));
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c)  // y[a, b, c] = x[b, c, a]
        EXPECT_EQ(r[(a * 2 + b) * 3 + c], in[(b * 3 + c) * 4 + a]);
}

TEST_F(Errors, LayerNormEpsMustBeNonNegative) {
  tm_value x = Input(t, TM_F32, {2, 3}), g = Input(t, TM_F32, {3}), b = Input(t, TM_F32, {3});
  for (double eps : {-1e-5, std::nan("")}) {
    TM_EXPECT_STATUS(tm_op_layer_norm(t, x, g, b, eps, &out), TM_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(Mentions({"tm_op_layer_norm", "eps"}));
  }
  EXPECT_EQ(out, 12345u);
  Op(tm_op_layer_norm, t, x, g, b, 0.0);
  Op(tm_op_layer_norm, t, x, g, b, std::numeric_limits<double>::infinity());
}

TEST_F(Errors, IntComparedWithAnIntScalarThatDoesNotFitIsOutOfRange) {
  tm_value x = Input(t, TM_I32, {3});
  tm_value big = Op(tm_op_scalar, t, TM_I64, 3e9);
  TM_EXPECT_STATUS(tm_op_less(t, x, big, &out), TM_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Mentions({"tm_op_less", "does not fit", "i32"}));
  // The documented way out: widen the tensor first.
  tm_value wide = Op(tm_op_cast, t, x, TM_I64);
  Op(tm_op_less, t, wide, big);
}

TEST_F(Errors, IdentityReshapeOfAScalarKeepsItWeak) {
  tm_value half = Op(tm_op_scalar, t, TM_F64, 0.5);
  const int64_t no_dims[1] = {0};
  tm_value same = Op(tm_op_reshape, t, half, 0, no_dims);
  tm_value x = Input(t, TM_F32, {2});
  tm_value y = Op(tm_op_mul, t, x, same);
  tm_dtype dtype = TM_F64;
  int32_t rank = -1;
  TM_ASSERT_OK(tm_value_type(t, y, &dtype, &rank, nullptr));
  EXPECT_EQ(dtype, TM_F32);  // weak: f32 * 0.5 stays f32 (a 0-d NumPy array would widen)
}

TEST_F(Errors, BadMatmulShapes) {
  tm_value a = Input(t, TM_F32, {2, 3}), b = Input(t, TM_F32, {4, 5});
  TM_EXPECT_STATUS(tm_op_matmul(t, a, b, &out), TM_ERROR_SHAPE);
  EXPECT_TRUE(Mentions({"tm_op_matmul", "(2,3)", "(4,5)"}));
  tm_value a3 = Input(t, TM_F32, {2, 3, 4}), b3 = Input(t, TM_F32, {3, 4, 5});
  TM_EXPECT_STATUS(tm_op_matmul(t, a3, b3, &out), TM_ERROR_SHAPE);  // batch dims differ
  EXPECT_TRUE(Mentions({"tm_op_matmul", "(2,3,4)", "(3,4,5)"}));
  tm_value v = Input(t, TM_F32, {3});
  TM_EXPECT_STATUS(tm_op_matmul(t, v, b, &out), TM_ERROR_SHAPE);  // rank < 2
  tm_value bools = Input(t, TM_BOOL, {3, 3});
  TM_EXPECT_STATUS(tm_op_matmul(t, bools, bools, &out), TM_ERROR_DTYPE);
  EXPECT_EQ(out, 12345u);
}

TEST_F(Errors, BadReshape) {
  tm_value x = Input(t, TM_F32, {2, 3});
  const int64_t wrong[] = {4, 2}, two_inferred[] = {-1, -1}, not_divisible[] = {4, -1},
                negative[] = {-2, -3};
  TM_EXPECT_STATUS(tm_op_reshape(t, x, 2, wrong, &out), TM_ERROR_SHAPE);
  EXPECT_TRUE(Mentions({"tm_op_reshape", "(2,3)", "(4,2)"}));
  TM_EXPECT_STATUS(tm_op_reshape(t, x, 2, two_inferred, &out), TM_ERROR_SHAPE);
  TM_EXPECT_STATUS(tm_op_reshape(t, x, 2, not_divisible, &out), TM_ERROR_SHAPE);
  TM_EXPECT_STATUS(tm_op_reshape(t, x, 2, negative, &out), TM_ERROR_SHAPE);
  EXPECT_EQ(out, 12345u);
}

TEST_F(Errors, AxisAndIndexOutOfRange) {
  tm_value x = Input(t, TM_F32, {2, 3});
  TM_EXPECT_STATUS(tm_op_reduce_sum(t, x, 2, 0, &out), TM_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Mentions({"tm_op_reduce_sum"}));
  TM_EXPECT_STATUS(tm_op_reduce_max(t, x, -3, 1, &out), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_op_reduce_mean(t, x, 5, 0, &out), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_op_reduce_var(t, x, -4, 0, &out), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_op_softmax(t, x, 2, &out), TM_ERROR_OUT_OF_RANGE);
  tm_value xs[] = {x, x};
  TM_EXPECT_STATUS(tm_op_concat(t, xs, 2, 2, &out), TM_ERROR_OUT_OF_RANGE);
  const int32_t repeated[] = {0, 0}, too_big[] = {0, 2};
  TM_EXPECT_STATUS(tm_op_transpose(t, x, repeated, 2, &out), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_op_transpose(t, x, too_big, 2, &out), TM_ERROR_OUT_OF_RANGE);
  const int64_t b0[] = {0, 0}, past[] = {2, 4}, b_neg[] = {-1, 0}, e_ok[] = {1, 1},
                b_after[] = {1, 2};
  TM_EXPECT_STATUS(tm_op_slice(t, x, 2, b0, past, &out), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_op_slice(t, x, 2, b_neg, e_ok, &out), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_op_slice(t, x, 2, b_after, e_ok, &out), TM_ERROR_OUT_OF_RANGE);  // begin > end
  EXPECT_EQ(out, 12345u);
}

// Arrays come with their length, and the library checks it against the value's rank, so
// a short array is an error rather than a read past its end.
TEST_F(Errors, ArrayLengthsMustMatchTheRank) {
  tm_value x = Input(t, TM_F32, {2, 3});
  const int32_t perm3[] = {0, 1, 2}, perm1[] = {0};
  TM_EXPECT_STATUS(tm_op_transpose(t, x, perm3, 3, &out), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Mentions({"tm_op_transpose", "3 entries", "rank 2"}));
  TM_EXPECT_STATUS(tm_op_transpose(t, x, perm1, 1, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_transpose(t, x, perm1, -1, &out), TM_ERROR_INVALID_ARGUMENT);
  const int64_t b1[] = {0}, e1[] = {1};
  TM_EXPECT_STATUS(tm_op_slice(t, x, 1, b1, e1, &out), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Mentions({"tm_op_slice", "rank 2"}));
  TM_EXPECT_STATUS(tm_op_slice(t, x, -2, b1, e1, &out), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(out, 12345u);
  // NULL with 0 reverses the axes.
  TM_ASSERT_OK(tm_op_transpose(t, x, nullptr, 0, &out));
  int32_t rank = 0;
  int64_t shape[TM_MAX_RANK];
  TM_ASSERT_OK(tm_value_type(t, out, nullptr, &rank, shape));
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(shape[0], 3);
  EXPECT_EQ(shape[1], 2);
}

TEST_F(Errors, GatherWithFloatOrBoolIndicesIsDtypeError) {
  tm_value table = Input(t, TM_F32, {4, 2});
  tm_value f = Input(t, TM_F32, {3}), b = Input(t, TM_BOOL, {3});
  TM_EXPECT_STATUS(tm_op_gather(t, table, f, &out), TM_ERROR_DTYPE);
  EXPECT_TRUE(Mentions({"tm_op_gather"}));
  TM_EXPECT_STATUS(tm_op_gather(t, table, b, &out), TM_ERROR_DTYPE);
  tm_value scalar_table = Input(t, TM_F32, {}), idx = Input(t, TM_I32, {3});
  TM_EXPECT_STATUS(tm_op_gather(t, scalar_table, idx, &out), TM_ERROR_SHAPE);
  EXPECT_EQ(out, 12345u);
}

TEST_F(Errors, DtypeErrorsAtTheOpCall) {
  tm_value f = Input(t, TM_F32, {3}), i = Input(t, TM_I32, {3}), b = Input(t, TM_BOOL, {3});
  TM_EXPECT_STATUS(tm_op_where(t, f, f, f, &out), TM_ERROR_DTYPE);  // cond not bool
  TM_EXPECT_STATUS(tm_op_exp(t, b, &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_neg(t, b, &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_sub(t, b, b, &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_reduce_sum(t, b, 0, 0, &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_softmax(t, i, 0, &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_gelu_tanh(t, i, &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_causal_mask(t, 2, 2, 0, TM_I32, &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_causal_mask(t, -1, 2, 0, TM_F32, &out), TM_ERROR_SHAPE);
  TM_EXPECT_STATUS(tm_op_cast(t, f, static_cast<tm_dtype>(42), &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_scalar(t, static_cast<tm_dtype>(0), 1.0, &out), TM_ERROR_DTYPE);
  TM_EXPECT_STATUS(tm_op_input(t, static_cast<tm_dtype>(9), 0, nullptr, &out), TM_ERROR_DTYPE);
  EXPECT_EQ(out, 12345u);
}

TEST_F(Errors, RanksAndDimsAreChecked) {
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, negative[2] = {2, -1};
  TM_EXPECT_STATUS(tm_op_input(t, TM_F32, 9, nine, &out), TM_ERROR_SHAPE);
  TM_EXPECT_STATUS(tm_op_input(t, TM_F32, -1, nine, &out), TM_ERROR_SHAPE);
  TM_EXPECT_STATUS(tm_op_input(t, TM_F32, 2, negative, &out), TM_ERROR_SHAPE);
  float data[2] = {0, 0};
  tm_tensor bad = {data, TM_F32, 2, negative, nullptr};
  TM_EXPECT_STATUS(tm_op_constant(t, &bad, &out), TM_ERROR_SHAPE);
  tm_tensor deep = {data, TM_F32, 9, nine, nullptr};
  TM_EXPECT_STATUS(tm_op_constant(t, &deep, &out), TM_ERROR_SHAPE);
  EXPECT_EQ(out, 12345u);
  // TM_MAX_RANK itself is fine.
  TM_ASSERT_OK(tm_op_input(t, TM_F32, TM_MAX_RANK, nine, &out));
}

// ---- Trace and compile lifecycle ----------------------------------------------------------

TEST_F(Errors, TraceEndNeedsOutputsAndHappensOnce) {
  tm_value x = Input(t, TM_F32, {2});
  TM_EXPECT_STATUS(tm_trace_end(t, &x, 0), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_trace_end(t, nullptr, 1), TM_ERROR_INVALID_ARGUMENT);
  tm_value unknown = 999;
  TM_EXPECT_STATUS(tm_trace_end(t, &unknown, 1), TM_ERROR_INVALID_ARGUMENT);
  TM_ASSERT_OK(tm_trace_end(t, &x, 1));
  TM_EXPECT_STATUS(tm_trace_end(t, &x, 1), TM_ERROR_INVALID_ARGUMENT);
}

TEST_F(Errors, NoOpsAfterTraceEnd) {
  tm_value x = Input(t, TM_F32, {2});
  End(t, {x});
  const int64_t shape[] = {2};
  TM_EXPECT_STATUS(tm_op_input(t, TM_F32, 1, shape, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_scalar(t, TM_F32, 1.0, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_add(t, x, x, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_exp(t, x, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_softmax(t, x, 0, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_reduce_mean(t, x, 0, 0, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_layer_norm(t, x, x, x, 1e-5, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_gelu_tanh(t, x, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_causal_mask(t, 2, 2, 0, TM_F32, &out), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(out, 12345u);
}

TEST_F(Errors, UnknownValueIsInvalidArgument) {
  tm_value x = Input(t, TM_F32, {2});
  TM_EXPECT_STATUS(tm_op_add(t, x, 999, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_exp(t, 999, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_transpose(t, 999, nullptr, 0, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_op_softmax(t, 999, 0, &out), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_value_type(t, 999, nullptr, nullptr, nullptr), TM_ERROR_INVALID_ARGUMENT);
}

TEST_F(Errors, CompileChecksTraceAndOptions) {
  tm_value x = Input(t, TM_F32, {2});
  Program p;
  TM_EXPECT_STATUS(tm_compile(ctx, t, nullptr, p.out()), TM_ERROR_INVALID_ARGUMENT);  // not ended
  EXPECT_EQ(p.get(), nullptr);
  End(t, {Op(tm_op_exp, t, x)});
  tm_compile_options o = Options();
  o.struct_size = 16;  // below the first published layout (20 bytes)
  TM_EXPECT_STATUS(tm_compile(ctx, t, &o, p.out()), TM_ERROR_INVALID_ARGUMENT);
  o = Options(1, 1, 4);
  TM_EXPECT_STATUS(tm_compile(ctx, t, &o, p.out()), TM_ERROR_INVALID_ARGUMENT);
  o = Options();
  o.target = static_cast<tm_target>(7);
  TM_EXPECT_STATUS(tm_compile(ctx, t, &o, p.out()), TM_ERROR_INVALID_ARGUMENT);
  o = Options();
  o.target = TM_TARGET_GPU;
  o.gpu_sm = 12;  // no such compute capability
  TM_EXPECT_STATUS(tm_compile(ctx, t, &o, p.out()), TM_ERROR_INVALID_ARGUMENT);
  o.gpu_sm = 90;
  o.gpu_matmul_tile = 64;  // 4096 threads per block: more than any GPU runs
  TM_EXPECT_STATUS(tm_compile(ctx, t, &o, p.out()), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(p.get(), nullptr);
  uint64_t entries = 9;
  TM_ASSERT_OK(tm_cache_stats(ctx, nullptr, nullptr, &entries));
  EXPECT_EQ(entries, 0u);
}

TEST_F(Errors, InvokeCountsAndNullData) {
  tm_value x = Input(t, TM_F32, {2});
  End(t, {Op(tm_op_neg, t, x)});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  Host<float> xs({2}, {1, 2}), ys({2}, 0.f), extra({2}, 0.f);
  tm_tensor in = xs.view(), outs[] = {ys.view(), extra.view()};
  TM_EXPECT_STATUS(tm_invoke(p, &in, 1, outs, 2), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_invoke(p, &in, 1, outs, 0), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_invoke(p, &in, 0, outs, 1), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_invoke(p, &in, -1, outs, 1), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_invoke(p, nullptr, 1, outs, 1), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_invoke(p, &in, 1, nullptr, 1), TM_ERROR_INVALID_ARGUMENT);
  tm_tensor null_data = {nullptr, TM_F32, 1, xs.shape.data(), nullptr};
  TM_EXPECT_STATUS(tm_invoke(p, &null_data, 1, outs, 1), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_invoke(p, &in, 1, &null_data, 1), TM_ERROR_INVALID_ARGUMENT);
  tm_tensor null_shape = {xs.data.data(), TM_F32, 1, nullptr, nullptr};
  TM_EXPECT_STATUS(tm_invoke(p, &null_shape, 1, outs, 1), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ys.data, (std::vector<float>{0, 0}));
}

// ---- NULL handles and pointers everywhere ------------------------------------------------

TEST_F(Errors, NullHandlesAndPointersAreErrorsNotCrashes) {
  const int64_t shape[] = {2};
  tm_value x = Input(t, TM_F32, {2});
  tm_trace *nt = nullptr;
  tm_value *no = nullptr;
  const tm_status kInvalid = TM_ERROR_INVALID_ARGUMENT;
  TM_EXPECT_STATUS(tm_context_create(nullptr), kInvalid);
  TM_EXPECT_STATUS(tm_cache_stats(nullptr, nullptr, nullptr, nullptr), kInvalid);
  tm_trace *tr = nullptr;
  TM_EXPECT_STATUS(tm_trace_begin(nullptr, "x", &tr), kInvalid);
  TM_EXPECT_STATUS(tm_trace_begin(ctx, "x", nullptr), kInvalid);
  TM_EXPECT_STATUS(tm_trace_end(nullptr, &x, 1), kInvalid);
  TM_EXPECT_STATUS(tm_value_type(nullptr, x, nullptr, nullptr, nullptr), kInvalid);
  // Every op, with a NULL trace and with a NULL out.
  for (int null_trace = 0; null_trace < 2; ++null_trace) {
    tm_trace *tt = null_trace ? nt : t.get();
    tm_value *oo = null_trace ? &out : no;
    float c = 0;
    tm_tensor ct = {&c, TM_F32, 0, nullptr, nullptr};
    const int32_t perm[] = {0};
    const int64_t b[] = {0}, e[] = {1};
    tm_value xs[] = {x, x};
    TM_EXPECT_STATUS(tm_op_input(tt, TM_F32, 1, shape, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_scalar(tt, TM_F32, 1.0, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_constant(tt, &ct, oo), kInvalid);
    for (auto op : {tm_op_add, tm_op_sub, tm_op_mul, tm_op_div, tm_op_pow, tm_op_maximum,
                    tm_op_minimum, tm_op_less, tm_op_greater, tm_op_equal, tm_op_matmul,
                    tm_op_gather})
      TM_EXPECT_STATUS(op(tt, x, x, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_where(tt, x, x, x, oo), kInvalid);
    for (auto op : {tm_op_neg, tm_op_exp, tm_op_log, tm_op_tanh, tm_op_sqrt, tm_op_rsqrt,
                    tm_op_erf, tm_op_abs, tm_op_gelu_tanh})
      TM_EXPECT_STATUS(op(tt, x, oo), kInvalid);
    for (auto op : {tm_op_reduce_sum, tm_op_reduce_max, tm_op_reduce_mean, tm_op_reduce_var})
      TM_EXPECT_STATUS(op(tt, x, 0, 0, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_reshape(tt, x, 1, shape, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_transpose(tt, x, perm, 1, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_slice(tt, x, 1, b, e, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_concat(tt, xs, 2, 0, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_cast(tt, x, TM_F64, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_softmax(tt, x, 0, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_layer_norm(tt, x, x, x, 1e-5, oo), kInvalid);
    TM_EXPECT_STATUS(tm_op_causal_mask(tt, 2, 2, 0, TM_F32, oo), kInvalid);
  }
  // NULL pointer arguments other than the handles.
  TM_EXPECT_STATUS(tm_op_input(t, TM_F32, 1, nullptr, &out), kInvalid);
  TM_EXPECT_STATUS(tm_op_constant(t, nullptr, &out), kInvalid);
  tm_tensor no_data = {nullptr, TM_F32, 1, shape, nullptr};
  TM_EXPECT_STATUS(tm_op_constant(t, &no_data, &out), kInvalid);
  TM_EXPECT_STATUS(tm_op_reshape(t, x, 1, nullptr, &out), kInvalid);
  TM_EXPECT_STATUS(tm_op_slice(t, x, 1, nullptr, nullptr, &out), kInvalid);
  TM_EXPECT_STATUS(tm_op_concat(t, nullptr, 2, 0, &out), kInvalid);
  TM_EXPECT_STATUS(tm_op_concat(t, &x, 0, 0, &out), kInvalid);
  EXPECT_EQ(out, 12345u);

  End(t, {x});
  tm_program *np = nullptr;
  TM_EXPECT_STATUS(tm_compile(nullptr, t, nullptr, &np), kInvalid);
  TM_EXPECT_STATUS(tm_compile(ctx, nullptr, nullptr, &np), kInvalid);
  TM_EXPECT_STATUS(tm_compile(ctx, t, nullptr, nullptr), kInvalid);
  EXPECT_EQ(np, nullptr);
  char *text = nullptr;
  TM_EXPECT_STATUS(tm_program_ir(nullptr, TM_STAGE_TRACED, &text), kInvalid);
  TM_EXPECT_STATUS(tm_program_input_type(nullptr, 0, nullptr, nullptr, nullptr), kInvalid);
  TM_EXPECT_STATUS(tm_program_output_type(nullptr, 0, nullptr, nullptr, nullptr), kInvalid);
  TM_EXPECT_STATUS(tm_invoke(nullptr, nullptr, 0, nullptr, 0), kInvalid);
  EXPECT_EQ(tm_program_num_inputs(nullptr), 0);
  EXPECT_EQ(tm_program_num_outputs(nullptr), 0);
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  TM_EXPECT_STATUS(tm_program_ir(p, TM_STAGE_TRACED, nullptr), kInvalid);
  TM_EXPECT_STATUS(tm_program_ir(p, static_cast<tm_stage>(42), &text), kInvalid);
  TM_EXPECT_STATUS(tm_program_input_type(p, 1, nullptr, nullptr, nullptr), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_program_output_type(p, -1, nullptr, nullptr, nullptr), TM_ERROR_OUT_OF_RANGE);
  EXPECT_EQ(text, nullptr);
}

TEST(ErrorsNoFixture, DestroyAndReleaseAcceptNull) {
  tm_context_release(nullptr);
  tm_trace_destroy(nullptr);
  tm_program_retain(nullptr);
  tm_program_release(nullptr);
  tm_free(nullptr);
  SUCCEED();
}

// ---- IR stages, statuses, versions ----------------------------------------------------------

TEST_F(Errors, EveryStageHasText) {
  tm_value a = Input(t, TM_F32, {20, 20});  // more rows than the GEMV kernels take: GEMM
  End(t, {Op(tm_op_exp, t, Op(tm_op_matmul, t, a, a))});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  // What each stage must show, from the design: inputs enter as restrict tensors, results
  // leave through materialize_in_destination, the matmul stays named through fusion, the
  // temporary between matmul and exp is allocated and freed after bufferization, the CPU
  // target calls BLAS, and the JIT'd entry point exists in LLVM IR and assembly.
  const std::vector<std::vector<std::string>> markers = {
      {"bufferization.to_tensor", "restrict", "bufferization.materialize_in_destination",
       "linalg.matmul", "math.exp"},
      {"linalg.matmul", "linalg.generic", "bufferization.materialize_in_destination"},
      {"memref.alloc", "memref.dealloc", "linalg.matmul"},
      {"llvm.func", "tm_rt_gemm", "_mlir_ciface_kernel"},
      {"define", "@tm_packed_entry", "tm_rt_gemm"},
      {"tm_packed_entry", ".globl"}};
  for (int s = TM_STAGE_TRACED; s <= TM_STAGE_ASSEMBLY; ++s) {
    std::string text = StageText(p, static_cast<tm_stage>(s));
    for (const std::string &m : markers[s])
      EXPECT_NE(text.find(m), std::string::npos) << "stage " << s << " lacks " << m;
  }
  EXPECT_EQ(StageText(p, TM_STAGE_LOWERED).find("linalg."), std::string::npos)
      << "linalg left after lowering";
  // x86-64 assembly (AT&T syntax, the LLVM default): 64-bit registers, x86 mnemonics.
  std::string asm_text = StageText(p, TM_STAGE_ASSEMBLY);
  EXPECT_NE(asm_text.find("%rsp"), std::string::npos);
  EXPECT_NE(asm_text.find("\tret"), std::string::npos);
  EXPECT_NE(asm_text.find("\tmovq\t"), std::string::npos);
  EXPECT_NE(asm_text.find(".globl"), std::string::npos);
}

TEST(ErrorsNoFixture, StatusStringsAndVersions) {
  const std::pair<tm_status, const char *> names[] = {
      {TM_OK, "TM_OK"},
      {TM_ERROR_INVALID_ARGUMENT, "TM_ERROR_INVALID_ARGUMENT"},
      {TM_ERROR_SHAPE, "TM_ERROR_SHAPE"},
      {TM_ERROR_DTYPE, "TM_ERROR_DTYPE"},
      {TM_ERROR_OUT_OF_RANGE, "TM_ERROR_OUT_OF_RANGE"},
      {TM_ERROR_COMPILE, "TM_ERROR_COMPILE"},
      {TM_ERROR_RUNTIME, "TM_ERROR_RUNTIME"},
      {TM_ERROR_UNSUPPORTED, "TM_ERROR_UNSUPPORTED"},
      {TM_ERROR_IO, "TM_ERROR_IO"},
      {TM_ERROR_OUT_OF_MEMORY, "TM_ERROR_OUT_OF_MEMORY"},
  };
  for (const auto &[status, name] : names) EXPECT_STREQ(tm_status_string(status), name);
  EXPECT_NE(tm_status_string(static_cast<tm_status>(1000)), nullptr);
  EXPECT_EQ(tm_api_version(), TM_API_VERSION);
  ASSERT_NE(tm_version(), nullptr);
  EXPECT_STRNE(tm_version(), "");
  EXPECT_STREQ(tm_version(), TM_VERSION_STRING);
}

// ---- tm_last_error is per thread ------------------------------------------------------------

TEST_F(Errors, LastErrorIsPerThread) {
  tm_value a = Input(t, TM_F32, {2, 3}), b = Input(t, TM_F32, {4, 3});
  ASSERT_NE(tm_op_add(t, a, b, &out), TM_OK);
  const std::string mine = tm_last_error();
  ASSERT_NE(mine.find("tm_op_add"), std::string::npos);

  std::string fresh, theirs;
  std::thread other([&] {
    fresh = tm_last_error();  // nothing failed on this thread yet
    tm_context_create(nullptr);
    theirs = tm_last_error();
  });
  other.join();
  EXPECT_EQ(fresh, "");
  EXPECT_NE(theirs.find("tm_context_create"), std::string::npos) << theirs;
  EXPECT_EQ(std::string(tm_last_error()), mine);
  // Successful calls leave it unchanged.
  Op(tm_op_add, t, a, a);
  EXPECT_EQ(std::string(tm_last_error()), mine);
}

}  // namespace
}  // namespace tmtest

// ---- Regressions found in review -----------------------------------------------------------

namespace {

tm_status InputOfShape(tm_trace *t, std::vector<int64_t> shape, tm_value *out) {
  return tm_op_input(t, TM_F32, static_cast<int32_t>(shape.size()), shape.data(), out);
}

}  // namespace

// Sizes whose byte count overflows int64 are shape errors at the op, not wrapped counts.
TEST(Regressions, HugeShapesAreRejectedAtTheOp) {
  tm_context *ctx = nullptr;
  ASSERT_EQ(tm_context_create(&ctx), TM_OK);
  tm_trace *t = nullptr;
  ASSERT_EQ(tm_trace_begin(ctx, "huge", &t), TM_OK);
  tm_value v;
  EXPECT_EQ(InputOfShape(t, {int64_t{1} << 32, int64_t{1} << 32}, &v), TM_ERROR_SHAPE);
  EXPECT_NE(std::string(tm_last_error()).find("too many elements"), std::string::npos);
  const int64_t huge[2] = {int64_t{1} << 32, int64_t{1} << 32};
  tm_tensor c = {nullptr, TM_F32, 2, huge, nullptr};
  EXPECT_EQ(tm_op_constant(t, &c, &v), TM_ERROR_SHAPE);
  // Each operand fits, their broadcast does not.
  tm_value a, b;
  ASSERT_EQ(InputOfShape(t, {int64_t{1} << 31, 1}, &a), TM_OK);
  ASSERT_EQ(InputOfShape(t, {1, int64_t{1} << 31}, &b), TM_OK);
  EXPECT_EQ(tm_op_add(t, a, b, &v), TM_ERROR_SHAPE);
  EXPECT_EQ(tm_op_matmul(t, a, b, &v), TM_ERROR_SHAPE);
  tm_trace_destroy(t);
  tm_context_release(ctx);
}

// A table without rows cannot be gathered from: even clamped indices would leave it.
TEST(Regressions, GatherFromAnEmptyTableIsAShapeError) {
  tm_context *ctx = nullptr;
  ASSERT_EQ(tm_context_create(&ctx), TM_OK);
  tm_trace *t = nullptr;
  ASSERT_EQ(tm_trace_begin(ctx, "gather", &t), TM_OK);
  tm_value table, ids, v;
  ASSERT_EQ(InputOfShape(t, {0, 4}, &table), TM_OK);
  const int64_t n[1] = {3};
  ASSERT_EQ(tm_op_input(t, TM_I32, 1, n, &ids), TM_OK);
  EXPECT_EQ(tm_op_gather(t, table, ids, &v), TM_ERROR_SHAPE);
  tm_trace_destroy(t);
  tm_context_release(ctx);
}

// An f32 scalar that is itself an output (or reshaped) keeps its value.
TEST(Regressions, F32ScalarOutputsKeepTheirValue) {
  tm_context *ctx = nullptr;
  ASSERT_EQ(tm_context_create(&ctx), TM_OK);
  tm_trace *t = nullptr;
  ASSERT_EQ(tm_trace_begin(ctx, "scalars", &t), TM_OK);
  tm_value half, reshaped;
  ASSERT_EQ(tm_op_scalar(t, TM_F32, 0.5, &half), TM_OK);
  const int64_t one_by_one[2] = {1, 1};
  ASSERT_EQ(tm_op_reshape(t, half, 2, one_by_one, &reshaped), TM_OK);
  const tm_value outs[2] = {half, reshaped};
  ASSERT_EQ(tm_trace_end(t, outs, 2), TM_OK);
  tm_program *p = nullptr;
  ASSERT_EQ(tm_compile(ctx, t, nullptr, &p), TM_OK) << tm_last_error();
  float a = 0, b = 0;
  tm_tensor out[2] = {{&a, TM_F32, 0, nullptr, nullptr}, {&b, TM_F32, 2, one_by_one, nullptr}};
  ASSERT_EQ(tm_invoke(p, nullptr, 0, out, 2), TM_OK) << tm_last_error();
  EXPECT_EQ(a, 0.5f);
  EXPECT_EQ(b, 0.5f);
  tm_program_release(p);
  tm_trace_destroy(t);
  tm_context_release(ctx);
}

// Zero-sized products give zeros without calling BLAS (which would print to stderr).
TEST(Regressions, ZeroSizedMatmulIsSilentAndZero) {
  tm_context *ctx = nullptr;
  ASSERT_EQ(tm_context_create(&ctx), TM_OK);
  tm_trace *t = nullptr;
  ASSERT_EQ(tm_trace_begin(ctx, "empty_k", &t), TM_OK);
  tm_value a, b, y;
  ASSERT_EQ(InputOfShape(t, {2, 0}, &a), TM_OK);
  ASSERT_EQ(InputOfShape(t, {0, 3}, &b), TM_OK);
  ASSERT_EQ(tm_op_matmul(t, a, b, &y), TM_OK);
  ASSERT_EQ(tm_trace_end(t, &y, 1), TM_OK);
  tm_program *p = nullptr;
  ASSERT_EQ(tm_compile(ctx, t, nullptr, &p), TM_OK) << tm_last_error();
  const int64_t sa[2] = {2, 0}, sb[2] = {0, 3}, sy[2] = {2, 3};
  float ys[6];
  for (float &v : ys) v = 7.0f;
  tm_tensor in[2] = {{nullptr, TM_F32, 2, sa, nullptr}, {nullptr, TM_F32, 2, sb, nullptr}};
  tm_tensor out = {ys, TM_F32, 2, sy, nullptr};
  testing::internal::CaptureStderr();
  tm_status s = tm_invoke(p, in, 2, &out, 1);
  std::string printed = testing::internal::GetCapturedStderr();
  ASSERT_EQ(s, TM_OK) << tm_last_error();
  EXPECT_EQ(printed, "");
  for (float v : ys) EXPECT_EQ(v, 0.0f);
  tm_program_release(p);
  tm_trace_destroy(t);
  tm_context_release(ctx);
}

// Composites report a closed trace as such, and mean/var reject bool like other reductions.
TEST(Regressions, CompositesCheckTheTraceFirstAndRejectBool) {
  tm_context *ctx = nullptr;
  ASSERT_EQ(tm_context_create(&ctx), TM_OK);
  tm_trace *t = nullptr;
  ASSERT_EQ(tm_trace_begin(ctx, "composites", &t), TM_OK);
  tm_value x, flag, v;
  ASSERT_EQ(InputOfShape(t, {2, 3}, &x), TM_OK);
  const int64_t s[1] = {3};
  ASSERT_EQ(tm_op_input(t, TM_BOOL, 1, s, &flag), TM_OK);
  EXPECT_EQ(tm_op_reduce_mean(t, flag, 0, 0, &v), TM_ERROR_DTYPE);
  EXPECT_EQ(tm_op_reduce_var(t, flag, 0, 0, &v), TM_ERROR_DTYPE);
  ASSERT_EQ(tm_trace_end(t, &x, 1), TM_OK);
  EXPECT_EQ(tm_op_softmax(t, flag, 0, &v), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_op_gelu_tanh(t, flag, &v), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_op_layer_norm(t, x, x, x, -1.0, &v), TM_ERROR_INVALID_ARGUMENT);
  tm_trace_destroy(t);
  tm_context_release(ctx);
}
