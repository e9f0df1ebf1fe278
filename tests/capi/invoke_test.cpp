// tm_invoke on caller buffers: specialisation checks (before any native code runs),
// gather index checks, aliasing, strided views, rank-0 tensors and concurrent calls.
#include <cstring>
#include <thread>

#include "test_util.h"

namespace tmtest {
namespace {

constexpr float kSentinel = -12345.0f;

bool Untouched(const std::vector<float> &v) {
  for (float f : v)
    if (f != kSentinel) return false;
  return true;
}

// y = x + 1 on f32 (2,3): the simplest program to invoke wrongly.
Program CompilePlusOne(tm_context *ctx, std::vector<int64_t> shape = {2, 3}) {
  Trace t = NewTrace(ctx, "plus_one");
  tm_value x = Input(t, TM_F32, shape);
  End(t, {Op(tm_op_add, t, x, Op(tm_op_scalar, t, TM_F32, 1.0))});
  Program p;
  EXPECT_EQ(tm_compile(ctx, t, nullptr, p.out()), TM_OK) << tm_last_error();
  return p;
}

tm_status Invoke(tm_program *p, std::vector<tm_tensor> in, std::vector<tm_tensor> out) {
  return tm_invoke(p, in.data(), static_cast<int32_t>(in.size()), out.data(),
                   static_cast<int32_t>(out.size()));
}

// ---- Specialisation mismatches: an error, and no native call (output untouched) --------

TEST(Invoke, WrongInputDtypeIsDtypeErrorAndNothingRuns) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx);
  Host<double> x({2, 3}, 1.0);
  Host<float> y({2, 3}, kSentinel);
  TM_EXPECT_STATUS(Invoke(p, {x.view()}, {y.view()}), TM_ERROR_DTYPE);
  EXPECT_TRUE(Untouched(y.data));
}

TEST(Invoke, WrongOutputDtypeIsDtypeError) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx);
  Host<float> x({2, 3}, 1.0f);
  Host<int32_t> y({2, 3}, 77);
  TM_EXPECT_STATUS(Invoke(p, {x.view()}, {y.view()}), TM_ERROR_DTYPE);
  for (int32_t v : y.data) EXPECT_EQ(v, 77);
}

TEST(Invoke, WrongRankIsShapeErrorAndNothingRuns) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx);
  Host<float> x({6}, 1.0f), x3({1, 2, 3}, 1.0f), y({2, 3}, kSentinel);
  TM_EXPECT_STATUS(Invoke(p, {x.view()}, {y.view()}), TM_ERROR_SHAPE);
  TM_EXPECT_STATUS(Invoke(p, {x3.view()}, {y.view()}), TM_ERROR_SHAPE);
  EXPECT_TRUE(Untouched(y.data));
}

TEST(Invoke, WrongShapeIsShapeErrorAndNothingRuns) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx);
  Host<float> x({3, 2}, 1.0f), good_x({2, 3}, 1.0f), y({2, 3}, kSentinel), bad_y({2, 4}, kSentinel);
  TM_EXPECT_STATUS(Invoke(p, {x.view()}, {y.view()}), TM_ERROR_SHAPE);
  EXPECT_TRUE(Untouched(y.data));
  TM_EXPECT_STATUS(Invoke(p, {good_x.view()}, {bad_y.view()}), TM_ERROR_SHAPE);
  EXPECT_TRUE(Untouched(bad_y.data));
}

// ---- Gather indices that are inputs are range-checked before the kernel runs -----------

template <typename I>
void ExpectGatherRejects(std::vector<I> indices, std::vector<int64_t> index_shape) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx, "gather");
  tm_value table = Input(t, TM_F32, {4, 2});
  tm_value idx = Input(t, DtypeOf<I>(), index_shape);
  End(t, {Op(tm_op_gather, t, table, idx)});
  std::vector<int64_t> out_shape = index_shape;
  out_shape.push_back(2);
  Host<float> tab({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}), y(out_shape, kSentinel);
  Host<I> ix(index_shape, indices);
  TM_EXPECT_STATUS(CompileInvoke(ctx, t, {tab.view(), ix.view()}, {y.view()}),
                   TM_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Untouched(y.data));
}

TEST(Invoke, GatherNegativeIndexIsOutOfRange) {
  ExpectGatherRejects<int32_t>({0, -1, 2}, {3});
  ExpectGatherRejects<int64_t>({1, 2, 3, -4}, {2, 2});
}

TEST(Invoke, GatherIndexPastTheTableIsOutOfRange) {
  ExpectGatherRejects<int32_t>({0, 4, 2}, {3});  // == rows
  ExpectGatherRejects<int64_t>({1, 2, 3, int64_t{1} << 40}, {2, 2});
}

// ---- Aliasing: the answer is the one distinct buffers would give ------------------------

TEST(Invoke, SameBufferAsTwoInputs) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value a = Input(t, TM_F32, {4}), b = Input(t, TM_F32, {4});
  End(t, {Op(tm_op_add, t, Op(tm_op_mul, t, a, b), a)});  // a*b + a
  Host<float> x({4}, {1, 2, 3, -4}), y({4}, kSentinel);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {x.view(), x.view()}, {y.view()}));
  EXPECT_TRUE(AllClose(y.data, {2, 6, 12, 12}, 0.0));  // x*x + x, exact
}

TEST(Invoke, OverlappingViewsAsTwoInputs) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value a = Input(t, TM_F32, {4}), b = Input(t, TM_F32, {4});
  End(t, {Op(tm_op_sub, t, a, b)});
  float buf[6] = {1, 2, 4, 8, 16, 32};
  std::vector<int64_t> shape = {4};
  Host<float> y({4}, kSentinel);
  // a = buf[0:4], b = buf[2:6]
  TM_ASSERT_OK(CompileInvoke(ctx, t, {View(buf, shape), View(buf + 2, shape)}, {y.view()}));
  EXPECT_TRUE(AllClose(y.data, {-3, -6, -12, -24}, 0.0));
}

TEST(Invoke, OutputWrittenInPlaceOverItsInput) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx, {5});
  float buf[5] = {1, 2, 3, 4, 5};
  std::vector<int64_t> shape = {5};
  TM_ASSERT_OK(Invoke(p, {View(buf, shape)}, {View(buf, shape)}));
  EXPECT_TRUE(AllClose(std::vector<float>(buf, buf + 5), {2, 3, 4, 5, 6}, 0.0));
}

TEST(Invoke, OutputIsAShiftedViewOfItsInput) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx, {4});
  std::vector<int64_t> shape = {4};
  // Data on which every wrong strategy gives its own answer: a no-op leaves
  // {1, 10, 100, 1000, 10000}; an in-place loop in the wrong direction reads values it has
  // already written ({1, 2, 3, 4, 5} forward, {10004, 10003, 10002, 10001, 10000} back).
  // y = buf[1:5] = buf[0:4] + 1
  float fwd[5] = {1, 10, 100, 1000, 10000};
  TM_ASSERT_OK(Invoke(p, {View(fwd, shape)}, {View(fwd + 1, shape)}));
  EXPECT_TRUE(AllClose(std::vector<float>(fwd, fwd + 5), {1, 2, 11, 101, 1001}, 0.0));
  // y = buf[0:4] = buf[1:5] + 1
  float back[5] = {1, 10, 100, 1000, 10000};
  TM_ASSERT_OK(Invoke(p, {View(back + 1, shape)}, {View(back, shape)}));
  EXPECT_TRUE(AllClose(std::vector<float>(back, back + 5), {11, 101, 1001, 10001, 10000}, 0.0));
}

TEST(Invoke, TransposeInPlace) {
  // Each output element reads an input element at another address.
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value x = Input(t, TM_F32, {3, 3});
  End(t, {Op(tm_op_transpose, t, x, static_cast<const int32_t *>(nullptr), 0)});
  float buf[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<int64_t> shape = {3, 3};
  TM_ASSERT_OK(CompileInvoke(ctx, t, {View(buf, shape)}, {View(buf, shape)}));
  EXPECT_TRUE(AllClose(std::vector<float>(buf, buf + 9), {0, 3, 6, 1, 4, 7, 2, 5, 8}, 0.0));
}

// Results are computed in the output buffers themselves (no buffer of their own copied
// there at the end): a product starts by zeroing its output, and a reduction its own, so an
// input that overlaps the output must have been copied first.
TEST(Invoke, ProductAndReductionWrittenOverTheirInput) {
  constexpr int64_t n = 4;
  const std::vector<int64_t> square = {n, n}, column = {n};
  const std::vector<double> start = Pseudo(n * n, -1, 1, 11);
  const std::vector<double> rounded = ToDouble(Cast<float>(start));  // what the kernels see
  {  // x = x @ x
    Context ctx = NewContext();
    Trace t = NewTrace(ctx);
    tm_value x = Input(t, TM_F32, square);
    End(t, {Op(tm_op_matmul, t, x, x)});
    std::vector<float> buf = Cast<float>(start);
    TM_ASSERT_OK(CompileInvoke(ctx, t, {View(buf.data(), square)}, {View(buf.data(), square)}));
    std::vector<double> want(n * n, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < n; ++k) want[i * n + j] += rounded[i * n + k] * rounded[k * n + j];
    EXPECT_TRUE(AllClose(buf, want, 1e-5, 1e-6));  // sums of 4 products in [-1, 1)
  }
  {  // x[0, :] = sum of x's rows (the output is the input's first row)
    Context ctx = NewContext();
    Trace t = NewTrace(ctx);
    End(t, {Op(tm_op_reduce_sum, t, Input(t, TM_F32, square), 1, 0)});
    std::vector<float> buf = Cast<float>(start);
    TM_ASSERT_OK(CompileInvoke(ctx, t, {View(buf.data(), square)}, {View(buf.data(), column)}));
    std::vector<double> want(rounded);
    for (int64_t i = 0; i < n; ++i) {
      want[i] = 0;
      for (int64_t j = 0; j < n; ++j) want[i] += rounded[i * n + j];
    }
    EXPECT_TRUE(AllClose(buf, want, 1e-6, 1e-6));
  }
}

TEST(Invoke, OverlappingOutputsAreInvalid) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value x = Input(t, TM_F32, {4});
  End(t, {Op(tm_op_neg, t, x), Op(tm_op_abs, t, x)});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  Host<float> in({4}, {1, -2, 3, -4});
  std::vector<float> buf(6, kSentinel);
  std::vector<int64_t> shape = {4};
  TM_EXPECT_STATUS(Invoke(p, {in.view()}, {View(buf.data(), shape), View(buf.data(), shape)}),
                   TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(
      Invoke(p, {in.view()}, {View(buf.data(), shape), View(buf.data() + 2, shape)}),
      TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Untouched(buf));
  // Adjacent, not overlapping: fine.
  std::vector<float> pair(8, kSentinel);
  TM_ASSERT_OK(Invoke(p, {in.view()}, {View(pair.data(), shape), View(pair.data() + 4, shape)}));
  EXPECT_TRUE(AllClose(pair, {-1, 2, -3, 4, 1, 2, 3, 4}, 0.0));
}

// ---- Strided views ------------------------------------------------------------------------

TEST(Invoke, TransposedInputViaStrides) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx);  // x is (2,3)
  float buf[6] = {0, 1, 2, 3, 4, 5};  // a (3,2) matrix, row-major
  std::vector<int64_t> shape = {2, 3}, strides = {1, 2};  // its transpose
  Host<float> y({2, 3}, kSentinel);
  TM_ASSERT_OK(Invoke(p, {View(buf, shape, &strides)}, {y.view()}));
  EXPECT_TRUE(AllClose(y.data, {1, 3, 5, 2, 4, 6}, 0.0));
}

TEST(Invoke, EveryOtherColumnAndBroadcastInputViews) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx);
  float buf[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // (2,6)
  std::vector<int64_t> shape = {2, 3}, every_other = {6, 2}, row_repeated = {0, 1};
  Host<float> y({2, 3}, kSentinel);
  TM_ASSERT_OK(Invoke(p, {View(buf, shape, &every_other)}, {y.view()}));
  EXPECT_TRUE(AllClose(y.data, {1, 3, 5, 7, 9, 11}, 0.0));
  // Stride 0: the first row seen twice (NumPy's broadcast_to).
  TM_ASSERT_OK(Invoke(p, {View(buf, shape, &row_repeated)}, {y.view()}));
  EXPECT_TRUE(AllClose(y.data, {1, 2, 3, 1, 2, 3}, 0.0));
}

TEST(Invoke, StridedOutputWritesOnlyItsElements) {
  Context ctx = NewContext();
  Program p = CompilePlusOne(ctx);
  Host<float> x({2, 3}, {0, 1, 2, 3, 4, 5});
  std::vector<float> buf(12, kSentinel);  // (2,6); y is every other column
  std::vector<int64_t> shape = {2, 3}, strides = {6, 2};
  TM_ASSERT_OK(Invoke(p, {x.view()}, {View(buf.data(), shape, &strides)}));
  const float s = kSentinel;
  EXPECT_TRUE(AllClose(buf, {1, s, 2, s, 3, s, 4, s, 5, s, 6, s}, 0.0));
  // A transposed output view: y^T lands in a (3,2) buffer.
  std::vector<float> t(6, kSentinel);
  std::vector<int64_t> transposed = {1, 2};
  TM_ASSERT_OK(Invoke(p, {x.view()}, {View(t.data(), shape, &transposed)}));
  EXPECT_TRUE(AllClose(t, {1, 4, 2, 5, 3, 6}, 0.0));
  // Both at once: the transposed output view lies over the input's own buffer.
  float buf2[6] = {0, 1, 2, 3, 4, 5};
  TM_ASSERT_OK(Invoke(p, {View(buf2, shape)}, {View(buf2, shape, &transposed)}));
  EXPECT_TRUE(AllClose(std::vector<float>(buf2, buf2 + 6), {1, 4, 2, 5, 3, 6}, 0.0));
}

TEST(Invoke, TransposedViewIntoBlasMatmul) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value a = Input(t, TM_F64, {2, 3}), b = Input(t, TM_F64, {3, 2});
  End(t, {Op(tm_op_matmul, t, a, b)});
  double abuf[6] = {1, 4, 2, 5, 3, 6};  // a^T stored row-major: a = [[1,2,3],[4,5,6]]
  std::vector<int64_t> ashape = {2, 3}, astrides = {1, 2};
  Host<double> bm({3, 2}, {1, 0, 0, 1, 1, 1}), y({2, 2}, -1.0);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {View(abuf, ashape, &astrides), bm.view()}, {y.view()}));
  EXPECT_TRUE(AllClose(y.data, {4, 5, 10, 11}, 0.0));  // small integers: exact
}

// ---- Kernel timing ---------------------------------------------------------------------------

// tm_process_kernel_timing counts the matrix kernels a program calls while it is on, and nothing
// while it is off. (Counters are process-wide: each CTest entry is its own process.)
TEST(KernelTiming, CountsTheMatrixKernelsWhileOn) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value x = Input(t, TM_F32, {1, 64}), w = Input(t, TM_F32, {64, 32});
  // A GEMV, and a GEMM (more rows than the GEMV kernels take: 16).
  tm_value a = Input(t, TM_F32, {24, 64}), b = Input(t, TM_F32, {64, 16});
  End(t, {Op(tm_op_matmul, t, x, w), Op(tm_op_matmul, t, a, b)});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  Host<float> xs({1, 64}, 1.0f), ws({64, 32}, 0.5f), as({24, 64}, 1.0f), bs({64, 16}, 0.25f);
  Host<float> y({1, 32}, 0.0f), z({24, 16}, 0.0f);
  auto run = [&] { return Invoke(p, {xs.view(), ws.view(), as.view(), bs.view()}, {y.view(), z.view()}); };
  auto read = [] {
    tm_kernel_times k;
    std::memset(&k, 0xff, sizeof k);
    k.struct_size = sizeof k;
    EXPECT_EQ(tm_process_kernel_times(&k), TM_OK) << tm_last_error();
    return k;
  };
  tm_process_kernel_timing(1);
  for (int i = 0; i < 3; ++i) TM_ASSERT_OK(run());
  tm_kernel_times on = read();
  EXPECT_EQ(on.gemv_calls, 3u);
  EXPECT_EQ(on.blas_calls, 3u);
  EXPECT_GT(on.gemv_seconds, 0.0);
  EXPECT_GT(on.blas_seconds, 0.0);
  EXPECT_GE(on.gemv_seconds, on.pool_wait_seconds);
  tm_process_kernel_timing(0);
  TM_ASSERT_OK(run());
  tm_kernel_times off = read();
  EXPECT_EQ(off.gemv_calls, 3u);
  EXPECT_EQ(off.blas_calls, 3u);
  tm_process_kernel_timing(1);  // turning it on again resets the counters
  EXPECT_EQ(read().gemv_calls, 0u);
  tm_process_kernel_timing(0);
  EXPECT_EQ(y[0], 32.0f);  // 64 * 0.5: exact
}

TEST(KernelTiming, BadArgumentsAreInvalid) {
  EXPECT_EQ(tm_process_kernel_times(nullptr), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("times is NULL"), std::string::npos);
  tm_kernel_times k{};
  k.struct_size = 4;
  EXPECT_EQ(tm_process_kernel_times(&k), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("struct_size is 4"), std::string::npos)
      << tm_last_error();
}

// ---- Rank-0 tensors -------------------------------------------------------------------------

TEST(Invoke, SumOfAVectorToAScalarOutput) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value x = Input(t, TM_F64, {5});
  End(t, {Op(tm_op_reduce_sum, t, x, 0, 0)});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  int32_t rank = -1;
  TM_ASSERT_OK(tm_program_output_type(p, 0, nullptr, &rank, nullptr));
  EXPECT_EQ(rank, 0);
  Host<double> xs({5}, {1, 2, 3, 4, 5.5});
  double y = -1;
  tm_tensor in = xs.view(), out = {&y, TM_F64, 0, nullptr, nullptr};
  TM_ASSERT_OK(tm_invoke(p, &in, 1, &out, 1));
  EXPECT_EQ(y, 15.5);  // exact
}

TEST(Invoke, ScalarInputTimesMatrix) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value s = Input(t, TM_F32, {}), m = Input(t, TM_F32, {2, 2});
  tm_value prod = Op(tm_op_mul, t, s, m);
  End(t, {prod, Op(tm_op_add, t, s, s)});  // a rank-0 output as well
  float sv = 2.5f, twice = -1;
  Host<float> mv({2, 2}, {1, 2, -3, 4}), y({2, 2}, kSentinel);
  tm_tensor scalar = {&sv, TM_F32, 0, nullptr, nullptr};
  tm_tensor scalar_out = {&twice, TM_F32, 0, nullptr, nullptr};
  TM_ASSERT_OK(CompileInvoke(ctx, t, {scalar, mv.view()}, {y.view(), scalar_out}));
  EXPECT_TRUE(AllClose(y.data, {2.5, 5, -7.5, 10}, 0.0));  // exact in f32
  EXPECT_EQ(twice, 5.0f);
}

// ---- Concurrency ----------------------------------------------------------------------------

TEST(Invoke, ConcurrentInvokesOfOneProgram) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value a = Input(t, TM_F32, {16, 32}), b = Input(t, TM_F32, {32, 8});
  End(t, {Op(tm_op_tanh, t, Op(tm_op_matmul, t, a, b))});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));

  constexpr int kThreads = 4, kIterations = 50;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id)
    threads.emplace_back([&, id] {
      // Each thread its own inputs, so that a mix-up between threads shows.
      Host<float> av({16, 32}, Cast<float>(Pseudo(512, -1, 1, 10 + id)));
      Host<float> bv({32, 8}, Cast<float>(Pseudo(256, -1, 1, 20 + id)));
      std::vector<double> want(16 * 8);
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) {
          double acc = 0;
          for (int k = 0; k < 32; ++k) acc += double(av[i * 32 + k]) * bv[k * 8 + j];
          want[i * 8 + j] = std::tanh(acc);
        }
      for (int it = 0; it < kIterations; ++it) {
        Host<float> y({16, 8}, kSentinel);
        tm_tensor in[] = {av.view(), bv.view()}, out = y.view();
        // f32 GEMM over k=32 of values in [-1,1), then tanh: abs 1e-5 covers rounding.
        if (tm_invoke(p, in, 2, &out, 1) != TM_OK || !AllClose(y.data, want, 1e-5, 1e-5))
          ++bad[id];
      }
    });
  for (std::thread &th : threads) th.join();
  for (int id = 0; id < kThreads; ++id) EXPECT_EQ(bad[id], 0) << "thread " << id;
}

}  // namespace
}  // namespace tmtest
