// Where a program's results are made: in the caller's output buffers, not in buffers of
// their own copied there afterwards, and with no copy of a zero fill that several
// reductions or products start from (core/compiler/passes/pipelines.h, kBufferizePipeline). Each copy
// is a pass over memory on the CPU and a kernel launch on the GPU. And how long the
// program's own buffers live: on the CPU, each until its last use. The results are checked
// against double-precision loops; aliasing between inputs and outputs, which writing into
// the outputs directly makes matter, is checked in invoke_test.cpp.
#include "test_util.h"

namespace tmtest {
namespace {

constexpr int64_t kRows = 5, kCols = 7;

// Row sums of a rows x cols matrix.
std::vector<double> RowSums(const std::vector<double> &x, int64_t rows, int64_t cols) {
  std::vector<double> sums(rows, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) sums[i] += x[i * cols + j];
  return sums;
}

// a (m x k) @ b (k x n).
std::vector<double> Product(const std::vector<double> &a, const std::vector<double> &b, int64_t m,
                            int64_t k, int64_t n) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t x = 0; x < k; ++x) c[i * n + j] += a[i * k + x] * b[x * n + j];
  return c;
}

// Compiles the ended trace and returns its bufferized IR; the program is kept in *p.
std::string Bufferized(tm_context *ctx, tm_trace *trace, Program *p,
                       const tm_compile_options *options = nullptr) {
  EXPECT_EQ(tm_compile(ctx, trace, options, p->out()), TM_OK) << tm_last_error();
  return StageText(*p, TM_STAGE_BUFFERIZED);
}

TEST(Buffers, AnElementwiseResultIsComputedInTheOutput) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  End(t, {Op(tm_op_exp, t, Input(t, TM_F32, {kRows, kCols}))});
  Program p;
  const std::string ir = Bufferized(ctx, t, &p);
  EXPECT_EQ(CountSubstr(ir, "memref.copy"), 0) << ir;
  EXPECT_EQ(CountSubstr(ir, "memref.alloc"), 0) << ir;

  Host<float> x({kRows, kCols}, Cast<float>(Pseudo(kRows * kCols, -2, 2, 3)));
  Host<float> y({kRows, kCols}, -99.0f);
  std::vector<tm_tensor> in = {x.view()}, out = {y.view()};
  ASSERT_EQ(tm_invoke(p, in.data(), 1, out.data(), 1), TM_OK) << tm_last_error();
  std::vector<double> want;
  for (float v : x.data) want.push_back(std::exp(double(v)));
  EXPECT_TRUE(AllClose(y.data, want, 1e-6));  // polynomial exp: a few ulp
}

// Two reductions of the same shape start from the same zero fill (CSE merges theirs): each
// gets its own instead of a copy of the other's.
TEST(Buffers, ReductionsSharingAZeroFillCopyNothing) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value x = Input(t, TM_F32, {kRows, kCols});
  tm_value sum = Op(tm_op_reduce_sum, t, x, 1, 0);
  tm_value sum_of_squares = Op(tm_op_reduce_sum, t, Op(tm_op_mul, t, x, x), 1, 0);
  End(t, {sum, sum_of_squares});
  Program p;
  const std::string ir = Bufferized(ctx, t, &p);
  EXPECT_EQ(CountSubstr(StageText(p, TM_STAGE_OPTIMIZED), "linalg.fill"), 1);  // shared there
  EXPECT_EQ(CountSubstr(ir, "memref.copy"), 0) << ir;

  const std::vector<double> values = Pseudo(kRows * kCols, -1, 1, 4);
  Host<float> xs({kRows, kCols}, Cast<float>(values));
  Host<float> s({kRows}, -99.0f), ss({kRows}, -99.0f);
  std::vector<tm_tensor> in = {xs.view()}, out = {s.view(), ss.view()};
  ASSERT_EQ(tm_invoke(p, in.data(), 1, out.data(), 2), TM_OK) << tm_last_error();
  std::vector<double> rounded = ToDouble(xs.data), squares;
  for (double v : rounded) squares.push_back(double(float(v * v)));
  // Sums of 7 values in [-1, 1): 1e-6 relative, 1e-6 absolute.
  EXPECT_TRUE(AllClose(s.data, RowSums(rounded, kRows, kCols), 1e-6, 1e-6));
  EXPECT_TRUE(AllClose(ss.data, RowSums(squares, kRows, kCols), 1e-6, 1e-6));
}

// Layer norm and softmax over rows: their reductions, and the output, in place.
TEST(Buffers, LayerNormAndSoftmaxCopyNothing) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  tm_value x = Input(t, TM_F32, {kRows, kCols});
  tm_value gamma = Input(t, TM_F32, {kCols}), beta = Input(t, TM_F32, {kCols});
  tm_value normed = Op(tm_op_layer_norm, t, x, gamma, beta, 1e-5);
  End(t, {Op(tm_op_softmax, t, normed, 1)});
  Program p;
  const std::string ir = Bufferized(ctx, t, &p);
  EXPECT_EQ(CountSubstr(ir, "memref.copy"), 0) << ir;

  Host<float> xs({kRows, kCols}, Cast<float>(Pseudo(kRows * kCols, -3, 3, 5)));
  Host<float> g({kCols}, Cast<float>(Pseudo(kCols, 0.5, 1.5, 6)));
  Host<float> b({kCols}, Cast<float>(Pseudo(kCols, -0.5, 0.5, 7)));
  Host<float> y({kRows, kCols}, -99.0f);
  std::vector<tm_tensor> in = {xs.view(), g.view(), b.view()}, out = {y.view()};
  ASSERT_EQ(tm_invoke(p, in.data(), 3, out.data(), 1), TM_OK) << tm_last_error();
  std::vector<double> want;
  for (int64_t i = 0; i < kRows; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < kCols; ++j) mean += xs[i * kCols + j] / double(kCols);
    for (int64_t j = 0; j < kCols; ++j) {
      const double d = xs[i * kCols + j] - mean;
      var += d * d / double(kCols);
    }
    std::vector<double> row;
    double max = -1e300, total = 0;
    for (int64_t j = 0; j < kCols; ++j) {
      row.push_back((xs[i * kCols + j] - mean) / std::sqrt(var + 1e-5) * g[j] + b[j]);
      max = std::max(max, row.back());
    }
    for (double &v : row) total += (v = std::exp(v - max));
    for (double v : row) want.push_back(v / total);
  }
  EXPECT_TRUE(AllClose(y.data, want, 1e-5, 1e-7));
}

// Two products of the same shape from the same input share a zero fill too; both results go
// straight to the outputs, and a third output sums one of them.
TEST(Buffers, ProductsSharingAZeroFillCopyNothing) {
  constexpr int64_t m = 3, k = 6, n = 4;
  for (int use_blas : {0, 1}) {
    Context ctx = NewContext();
    Trace t = NewTrace(ctx);
    tm_value x = Input(t, TM_F32, {m, k});
    tm_value w1 = Input(t, TM_F32, {k, n}), w2 = Input(t, TM_F32, {k, n});
    tm_value y1 = Op(tm_op_matmul, t, x, w1), y2 = Op(tm_op_matmul, t, x, w2);
    End(t, {y1, y2, Op(tm_op_reduce_sum, t, y1, 1, 0)});
    tm_compile_options o = Options(1, use_blas);
    Program p;
    const std::string ir = Bufferized(ctx, t, &p, &o);
    EXPECT_EQ(CountSubstr(ir, "memref.copy"), 0) << "blas " << use_blas << "\n" << ir;

    Host<float> xs({m, k}, Cast<float>(Pseudo(m * k, -1, 1, 8)));
    Host<float> a({k, n}, Cast<float>(Pseudo(k * n, -1, 1, 9)));
    Host<float> c({k, n}, Cast<float>(Pseudo(k * n, -1, 1, 10)));
    Host<float> r1({m, n}, -99.0f), r2({m, n}, -99.0f), s({m}, -99.0f);
    std::vector<tm_tensor> in = {xs.view(), a.view(), c.view()};
    std::vector<tm_tensor> out = {r1.view(), r2.view(), s.view()};
    ASSERT_EQ(tm_invoke(p, in.data(), 3, out.data(), 3), TM_OK) << tm_last_error();
    const std::vector<double> want1 = Product(ToDouble(xs.data), ToDouble(a.data), m, k, n);
    // Sums of 6 products of values in [-1, 1): 1e-5 relative, 1e-6 absolute.
    EXPECT_TRUE(AllClose(r1.data, want1, 1e-5, 1e-6)) << "blas " << use_blas;
    EXPECT_TRUE(
        AllClose(r2.data, Product(ToDouble(xs.data), ToDouble(c.data), m, k, n), 1e-5, 1e-6))
        << "blas " << use_blas;
    EXPECT_TRUE(AllClose(s.data, RowSums(want1, m, n), 1e-5, 1e-5)) << "blas " << use_blas;
  }
}

// `steps` times h = (h @ w) * 0.5 + x, with h (m x k) and w (k x k).
void TraceRecurrence(tm_trace *t, int64_t m, int64_t k, int steps) {
  tm_value h = Input(t, TM_F32, {m, k});
  tm_value w = Input(t, TM_F32, {k, k}), x = Input(t, TM_F32, {m, k});
  tm_value half = Op(tm_op_scalar, t, TM_F32, 0.5);
  for (int i = 0; i < steps; ++i)
    h = Op(tm_op_add, t, Op(tm_op_mul, t, Op(tm_op_matmul, t, h, w), half), x);
  End(t, {h});
}

// The same in double precision.
std::vector<double> Recurrence(std::vector<double> h, const std::vector<double> &w,
                               const std::vector<double> &x, int64_t m, int64_t k, int steps) {
  for (int i = 0; i < steps; ++i) {
    h = Product(h, w, m, k, k);
    for (int64_t j = 0; j < m * k; ++j) h[j] = h[j] * 0.5 + x[j];
  }
  return h;
}

// Each of the program's buffers is freed right after its last use (core/compiler/passes/
// free_buffers.h), not all at the end of the program: the peak of its temporaries does not
// grow with the number of steps, and the bufferized program frees as it goes. With and
// without the BLAS rewrite, whose calls take a pointer derived from the buffer (20 rows:
// OpenBLAS's product, not the GEMV kernels).
TEST(Buffers, EachTemporaryIsFreedAfterItsLastUse) {
  constexpr int64_t m = 20, k = 7;
  Host<float> h({m, k}, Cast<float>(Pseudo(m * k, -1, 1, 21)));
  Host<float> w({k, k}, Cast<float>(Pseudo(k * k, -0.25, 0.25, 22)));
  Host<float> x({m, k}, Cast<float>(Pseudo(m * k, -1, 1, 23)));
  for (int use_blas : {0, 1}) {
    uint64_t peak[2] = {0, 0};
    const int steps[2] = {8, 32};
    for (int i = 0; i < 2; ++i) {
      SCOPED_TRACE("blas " + std::to_string(use_blas) + ", steps " + std::to_string(steps[i]));
      Context ctx = NewContext();
      Trace t = NewTrace(ctx);
      TraceRecurrence(t, m, k, steps[i]);
      tm_compile_options o = Options(1, use_blas);
      Program p;
      const std::string ir = Bufferized(ctx, t, &p, &o);
      // Freed at the end, every step's buffers came before the first free.
      const size_t first_free = ir.find("memref.dealloc");
      ASSERT_NE(first_free, std::string::npos) << ir;
      EXPECT_LE(CountSubstr(ir.substr(0, first_free), "memref.alloc"), 3) << ir;
      peak[i] = tm_program_temporary_bytes(p);

      Host<float> y({m, k}, -99.0f);
      std::vector<tm_tensor> in = {h.view(), w.view(), x.view()}, out = {y.view()};
      ASSERT_EQ(tm_invoke(p, in.data(), 3, out.data(), 1), TM_OK) << tm_last_error();
      const std::vector<double> want =
          Recurrence(ToDouble(h.data), ToDouble(w.data), ToDouble(x.data), m, k, steps[i]);
      // Values within about [-2, 2], each step's rounding damped by the next (|h @ w| * 0.5
      // is at most 0.9 |h|): 1e-5 relative, 1e-6 absolute.
      EXPECT_TRUE(AllClose(y.data, want, 1e-5, 1e-6));
    }
    EXPECT_GT(peak[0], 0u) << "blas " << use_blas;
    EXPECT_EQ(peak[1], peak[0]) << "blas " << use_blas;
  }
}

// Buffers of 64 KiB or more are freed at the end of the program even so: freed early, glibc
// gives them back to the system and the next call's allocation of the size faults every page
// in again (GPT-2's 128-token prefill: 270 ms in its products instead of 175 ms). 128 x 128
// floats are 64 KiB.
TEST(Buffers, LargeTemporariesAreFreedAtTheEnd) {
  constexpr int64_t m = 128, k = 128;
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  TraceRecurrence(t, m, k, 4);
  Program p;
  const std::string ir = Bufferized(ctx, t, &p);
  const size_t first_free = ir.find("memref.dealloc"), last_op = ir.rfind("linalg.");
  ASSERT_NE(first_free, std::string::npos) << ir;
  ASSERT_NE(last_op, std::string::npos) << ir;
  EXPECT_GT(first_free, last_op) << ir;
  EXPECT_GE(tm_program_temporary_bytes(p), 2u * m * k * sizeof(float));
}

}  // namespace
}  // namespace tmtest
