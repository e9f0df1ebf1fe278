// tm_rt_gemm (core/targets/cpu/run/blas_products.h): OpenBLAS, single-threaded, on blocks of C
// fixed by the shapes. Against a double-precision loop, on shapes that cut blocks at their
// edges, with every transpose, batches, padded leading dimensions and the one-row and
// one-column blocks that go to GEMV; and under concurrent callers, whose products must come
// back with the bits they have alone. (That logits do not depend on the thread count is
// checked end to end by tests/model/logits_reproducibility.sh threads: the pool's size is
// fixed per process.)
#include "core/targets/cpu/run/blas_products.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int32_t kNoTrans = 111, kTrans = 112;

struct Shape {
  int64_t batch, m, n, k;
  bool ta, tb;
  int64_t pad;  // extra elements at the end of every row of A, B and C (leading dimensions)
};

template <typename T>
struct Operands {
  Shape s;
  int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
  std::vector<T> a, b, c;

  explicit Operands(const Shape &shape, uint32_t seed) : s(shape) {
    // Stored A: m x k, or k x m when transposed; B: k x n, or n x k.
    const int64_t a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
    const int64_t b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
    lda = a_cols + s.pad, ldb = b_cols + s.pad, ldc = s.n + s.pad;
    stride_a = a_rows * lda, stride_b = b_rows * ldb, stride_c = s.m * ldc;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    auto fill = [&](std::vector<T> &v, int64_t size) {
      v.resize(static_cast<size_t>(size));
      for (T &x : v) x = static_cast<T>(u(rng));
    };
    fill(a, s.batch * stride_a);
    fill(b, s.batch * stride_b);
    fill(c, s.batch * stride_c);  // C accumulates: its initial values are part of the result
  }
  T A(int64_t bt, int64_t i, int64_t p) const {
    return a[bt * stride_a + (s.ta ? p * lda + i : i * lda + p)];
  }
  T B(int64_t bt, int64_t p, int64_t j) const {
    return b[bt * stride_b + (s.tb ? j * ldb + p : p * ldb + j)];
  }
  void Run(std::vector<T> *out) const {
    *out = c;
    tm_rt_gemm(std::is_same<T, float>::value ? 1 : 2, s.batch, s.ta ? kTrans : kNoTrans,
               s.tb ? kTrans : kNoTrans, s.m, s.n, s.k, a.data(), lda, stride_a, b.data(), ldb,
               stride_b, out->data(), ldc, stride_c);
  }
};

const std::vector<Shape> &Shapes() {
  static const std::vector<Shape> shapes = {
      {1, 300, 260, 70, false, false, 0},  // 2 x 3 blocks, the last ones partial
      {1, 300, 260, 70, true, false, 3},
      {1, 300, 260, 70, false, true, 1},
      {1, 300, 260, 70, true, true, 0},
      {3, 17, 129, 33, false, true, 2},    // a batch; a one-column last block (GEMV)
      {2, 257, 5, 9, true, false, 0},      // a one-row last block (GEMV)
      {1, 1, 300, 50, false, false, 0},    // a single row: GEMV per block of columns
      {1, 1, 300, 50, true, true, 4},
      {1, 280, 1, 40, false, false, 0},    // a single column: GEMV per block of rows
      {1, 280, 1, 40, true, true, 2},
      {4, 1, 1, 1000, false, false, 0},    // dot products
  };
  return shapes;
}

template <typename T>
void ExpectMatchesTheDoubleLoop(double rel) {
  for (size_t i = 0; i < Shapes().size(); ++i) {
    const Shape &s = Shapes()[i];
    Operands<T> x(s, 10 + static_cast<uint32_t>(i));
    std::vector<T> got;
    x.Run(&got);
    int64_t bad = 0;
    for (int64_t bt = 0; bt < s.batch; ++bt)
      for (int64_t r = 0; r < s.m; ++r)
        for (int64_t j = 0; j < s.n; ++j) {
          const size_t at = static_cast<size_t>(bt * x.stride_c + r * x.ldc + j);
          double want = x.c[at], magnitude = std::fabs(x.c[at]);
          for (int64_t p = 0; p < s.k; ++p) {
            const double term = double(x.A(bt, r, p)) * double(x.B(bt, p, j));
            want += term;
            magnitude += std::fabs(term);
          }
          if (std::fabs(got[at] - want) > rel * magnitude && bad++ < 5)
            ADD_FAILURE() << "shape " << i << " [" << bt << ", " << r << ", " << j
                          << "]: " << got[at] << " vs " << want;
        }
    EXPECT_EQ(bad, 0) << "shape " << i;
    // The padding between rows of C is left alone.
    for (int64_t bt = 0; bt < s.batch; ++bt)
      for (int64_t r = 0; r < s.m; ++r)
        for (int64_t j = s.n; j < x.ldc; ++j) {
          const size_t at = static_cast<size_t>(bt * x.stride_c + r * x.ldc + j);
          EXPECT_EQ(got[at], x.c[at]) << "shape " << i << ": padding written";
        }
  }
}

// The error of a sum of k products is at most about k units of rounding of the sum of their
// magnitudes; with k <= 1000: 2^-23 * 1000 ~ 1.2e-4 worst case, 1e-5 in practice for f32
// (sums of random signs); 1e-13 for f64.
TEST(BlasProducts, F32MatchesTheDoubleLoop) { ExpectMatchesTheDoubleLoop<float>(1e-5); }
TEST(BlasProducts, F64MatchesTheDoubleLoop) { ExpectMatchesTheDoubleLoop<double>(1e-13); }

TEST(BlasProducts, EmptyProductsLeaveCAsItIs) {
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c = {1, 2, 3, 4};
  const std::vector<float> before = c;
  tm_rt_gemm(1, 1, kNoTrans, kNoTrans, 2, 2, 0, a.data(), 1, 0, b.data(), 2, 0, c.data(), 2, 0);
  tm_rt_gemm(1, 0, kNoTrans, kNoTrans, 2, 2, 2, a.data(), 2, 0, b.data(), 2, 0, c.data(), 2, 0);
  EXPECT_EQ(c, before);
}

// Host threads calling at once (each product then runs on its caller: the pool is busy)
// run OpenBLAS concurrently. Every product must come back with the bits it has alone: the
// library serialises OpenBLAS's buffer allocator, which the single-threaded build leaves
// unlocked (unlocked, 101 of 18000 such products came back wrong).
TEST(BlasProducts, ConcurrentCallersGetTheBitsOfTheirProductAlone) {
  const std::vector<Shape> shapes = {{1, 24, 64, 64, false, true, 0},
                                     {1, 40, 48, 80, false, false, 1},
                                     {2, 16, 33, 20, true, false, 0},
                                     {1, 1, 200, 300, false, false, 0}};
  std::vector<Operands<float>> f32;
  std::vector<std::vector<float>> alone(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    f32.emplace_back(shapes[i], 50 + static_cast<uint32_t>(i));
    f32.back().Run(&alone[i]);
  }
  Operands<double> f64({1, 30, 40, 50, true, true, 0}, 60);
  std::vector<double> alone64;
  f64.Run(&alone64);

  constexpr int kCallers = 6, kRounds = 3000;
  std::vector<int> wrong(kCallers, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      std::vector<float> out;
      std::vector<double> out64;
      for (int r = 0; r < kRounds; ++r) {
        if (t == kCallers - 1) {
          f64.Run(&out64);
          wrong[t] += std::memcmp(out64.data(), alone64.data(), out64.size() * 8) != 0;
        } else {
          const size_t i = static_cast<size_t>(t) % shapes.size();
          f32[i].Run(&out);
          wrong[t] += std::memcmp(out.data(), alone[i].data(), out.size() * 4) != 0;
        }
      }
    });
  }
  for (std::thread &c : callers) c.join();
  for (int t = 0; t < kCallers; ++t)
    EXPECT_EQ(wrong[t], 0) << "caller " << t << ": " << wrong[t] << " of " << kRounds
                           << " products differ from the product computed alone";
}

}  // namespace
