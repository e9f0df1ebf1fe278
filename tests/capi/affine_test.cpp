// The fusion example (examples/c/affine.c) through the C API:
//   affine_activation(x, gain, bias) = (x * gain + bias) * 0.5
// Three elementwise ops trace to three linalg.generic; elementwise fusion makes one.
#include <cstring>

#include "test_util.h"

namespace tmtest {
namespace {

const std::vector<int64_t> kX = {2, 4}, kRow = {4};

// Traces affine_activation for x (2,4) and gain/bias (4,) in f32.
Trace TraceAffine(tm_context *ctx) {
  Trace t = NewTrace(ctx, "affine_activation");
  tm_value x = Input(t, TM_F32, kX);
  tm_value gain = Input(t, TM_F32, kRow);
  tm_value bias = Input(t, TM_F32, kRow);
  tm_value half = Op(tm_op_scalar, t, TM_F32, 0.5);
  tm_value y = Op(tm_op_mul, t, Op(tm_op_add, t, Op(tm_op_mul, t, x, gain), bias), half);
  End(t, {y});
  return t;
}

TEST(Affine, TracedHasThreeGenericsOptimizedHasOne) {
  Context ctx = NewContext();
  Trace t = TraceAffine(ctx);
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  EXPECT_EQ(CountSubstr(StageText(p, TM_STAGE_TRACED), "linalg.generic"), 3);
  EXPECT_EQ(CountSubstr(StageText(p, TM_STAGE_OPTIMIZED), "linalg.generic"), 1);
}

TEST(Affine, WithoutOptimizeNothingIsFused) {
  Context ctx = NewContext();
  Trace t = TraceAffine(ctx);
  tm_compile_options o = Options(/*optimize=*/0);
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, &o, p.out()));
  EXPECT_EQ(CountSubstr(StageText(p, TM_STAGE_TRACED), "linalg.generic"), 3);
  EXPECT_EQ(CountSubstr(StageText(p, TM_STAGE_OPTIMIZED), "linalg.generic"), 3);
}

TEST(Affine, MatchesHandComputedValues) {
  Context ctx = NewContext();
  Trace t = TraceAffine(ctx);
  Host<float> x(kX, {-2, -1, 0, 1, 2, 3, 4, 5}), gain(kRow, {1, 2, 3, 4}),
      bias(kRow, {0.5f, 0, -1, 2}), y(kX, -99.0f);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {x.view(), gain.view(), bias.view()}, {y.view()}));
  // Every intermediate is exactly representable in f32, so the comparison is exact.
  const std::vector<double> want = {-0.75, -1.0, -0.5, 3.0, 1.25, 3.0, 5.5, 11.0};
  EXPECT_TRUE(AllClose(y.data, want, 0.0));
}

TEST(Affine, OptimizeOffAndOnAreBitwiseIdentical) {
  Context ctx = NewContext();
  Trace t = TraceAffine(ctx);
  // Values whose products round: fusion must not change the order or rounding of the
  // three f32 operations.
  Host<float> x(kX, Cast<float>(Pseudo(8, -10, 10, 7))),
      gain(kRow, Cast<float>(Pseudo(4, -3, 3, 8))), bias(kRow, Cast<float>(Pseudo(4, -1, 1, 9)));
  Host<float> y0(kX, -99.0f), y1(kX, -98.0f);
  tm_compile_options off = Options(0), on = Options(1);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {x.view(), gain.view(), bias.view()}, {y0.view()}, &off));
  TM_ASSERT_OK(CompileInvoke(ctx, t, {x.view(), gain.view(), bias.view()}, {y1.view()}, &on));
  EXPECT_EQ(std::memcmp(y0.data.data(), y1.data.data(), 8 * sizeof(float)), 0);

  // And both agree exactly with the same three f32 operations done here (volatile: the
  // host compiler must not contract them into an FMA).
  for (int i = 0; i < 8; ++i) {
    volatile float prod = x[i] * gain[i % 4];
    volatile float sum = prod + bias[i % 4];
    float want = sum * 0.5f;
    EXPECT_EQ(y1[i], want) << "element " << i;
  }
}

}  // namespace
}  // namespace tmtest
