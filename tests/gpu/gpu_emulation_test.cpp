// GPU emulation (TINYMLIR_GPU_EMULATE=1, which CTest sets for this program): the GPU
// target's kernels, run on the CPU thread by thread (core/targets/gpu/compile/gpu_emulation.h). Here the
// tiled shared-memory matmul kernel is checked against double-precision loops for every kind
// of tile edge (1, smaller than, equal to and not dividing the sizes, the largest), and the
// programs are checked to be that kernel on the host. The ops that join a product's kernel
// (its elementwise epilogue, the transposed heads it reads in place) are checked against
// double-precision loops too, alone and in an attention step. The op cases
// (gpu_check_emulated_*) and the GPT-2 goldens (gpu_emulated.*) run the rest of the GPU
// lowering the same way.
// Tolerances: 1e-5 relative (+1e-5 absolute) for f32, 1e-12 for f64: the kernel sums K in
// tile order, the reference in index order.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpu_op_cases.h"
#include "test_util.h"

namespace tmtest {
namespace {

tm_compile_options GpuOptions(int tile) {
  tm_compile_options o = Options();
  o.target = TM_TARGET_GPU;
  o.gpu_matmul_tile = tile;
  return o;
}

// C = A @ B (batch of `batch`, each m x k times k x n), in double.
std::vector<double> MatmulReference(const std::vector<double> &a, const std::vector<double> &b,
                                    int64_t batch, int64_t m, int64_t k, int64_t n) {
  std::vector<double> c(batch * m * n, 0.0);
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += a[(z * m + i) * k + p] * b[(z * k + p) * n + j];
        c[(z * m + i) * n + j] = sum;
      }
  return c;
}

// A trace of one matmul, a @ b, ended.
Trace MatmulTrace(tm_context *ctx, tm_dtype dtype, const std::vector<int64_t> &a_shape,
                  const std::vector<int64_t> &b_shape) {
  Trace t = NewTrace(ctx, "matmul");
  tm_value a = Input(t, dtype, a_shape), b = Input(t, dtype, b_shape);
  End(t, {Op(tm_op_matmul, t, a, b)});
  return t;
}

template <typename T>
void ExpectMatmul(int tile, int64_t batch, int64_t m, int64_t k, int64_t n, double rel,
                  double abs) {
  SCOPED_TRACE("tile " + std::to_string(tile) + ", " + std::to_string(batch) + " x " +
               std::to_string(m) + " x " + std::to_string(k) + " x " + std::to_string(n));
  Context ctx = NewContext();
  const std::vector<int64_t> a_shape =
      batch > 1 ? std::vector<int64_t>{batch, m, k} : std::vector<int64_t>{m, k};
  const std::vector<int64_t> b_shape =
      batch > 1 ? std::vector<int64_t>{batch, k, n} : std::vector<int64_t>{k, n};
  const std::vector<int64_t> c_shape =
      batch > 1 ? std::vector<int64_t>{batch, m, n} : std::vector<int64_t>{m, n};
  Trace t = MatmulTrace(ctx, DtypeOf<T>(), a_shape, b_shape);
  Host<T> ha(a_shape, Cast<T>(Pseudo(batch * m * k, -1, 1, 1)));
  Host<T> hb(b_shape, Cast<T>(Pseudo(batch * k * n, -1, 1, 2)));
  Host<T> hc(c_shape, T(0));
  const tm_compile_options o = GpuOptions(tile);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {ha.view(), hb.view()}, {hc.view()}, &o));
  EXPECT_TRUE(AllClose(
      hc.data, MatmulReference(ToDouble(ha.data), ToDouble(hb.data), batch, m, k, n), rel, abs));
}

TEST(GpuEmulation, RunsWithTheVariableSet) {
  const char *value = std::getenv("TINYMLIR_GPU_EMULATE");
  ASSERT_TRUE(value && std::strcmp(value, "1") == 0)
      << "run under CTest, or with TINYMLIR_GPU_EMULATE=1";
}

TEST(GpuEmulation, MatmulsEqualADoubleLoopForEveryTileEdge) {
  for (int tile : {1, 2, 7, 16, 32}) {
    ExpectMatmul<float>(tile, 1, 1, 1, 1, 1e-5, 1e-5);
    ExpectMatmul<float>(tile, 1, 37, 19, 23, 1e-5, 1e-5);
    ExpectMatmul<float>(tile, 1, 32, 64, 16, 1e-5, 1e-5);
    ExpectMatmul<double>(tile, 1, 45, 33, 17, 1e-12, 1e-12);
  }
}

// One row of A: the matrix-vector kernel (32 columns by 32 slices of K per block, each
// slice's loop unrolled 4 times), for widths around a block's 32 columns and depths around
// its slices and its unrolled steps (128).
TEST(GpuEmulation, OneRowProductsEqualADoubleLoop) {
  for (int64_t n : {1, 31, 32, 33, 100})
    for (int64_t k : {1, 7, 32, 33, 127, 128, 129, 300})
      ExpectMatmul<float>(16, 1, 1, k, n, 1e-5, 1e-5);
  ExpectMatmul<double>(16, 1, 1, 77, 45, 1e-12, 1e-12);
  ExpectMatmul<float>(16, 12, 1, 64, 19, 1e-5, 1e-5);  // a decode step's attention scores
  ExpectMatmul<float>(16, 12, 1, 19, 64, 1e-5, 1e-5);  // and its weighted values
}

// One column of B: the row-dot kernel (a warp of 32 lanes per row of A, 8 rows per block,
// each lane's loop unrolled 4 times), for heights around a block's 8 rows and depths around
// its lanes and its unrolled steps (128).
TEST(GpuEmulation, OneColumnProductsEqualADoubleLoop) {
  for (int64_t m : {2, 7, 8, 9, 100})
    for (int64_t k : {1, 31, 32, 33, 127, 128, 129, 300})
      ExpectMatmul<float>(16, 1, m, k, 1, 1e-5, 1e-5);
  ExpectMatmul<double>(16, 1, 45, 77, 1, 1e-12, 1e-12);
  ExpectMatmul<float>(16, 12, 19, 64, 1, 1e-5, 1e-5);
}

TEST(GpuEmulation, BatchMatmulsPutTheBatchOnTheGridsZ) {
  ExpectMatmul<float>(16, 3, 5, 17, 9, 1e-5, 1e-5);
  ExpectMatmul<float>(4, 12, 7, 64, 19, 1e-5, 1e-5);
  ExpectMatmul<double>(5, 2, 11, 13, 3, 1e-12, 1e-12);
}

// The elementwise op after a product runs in the product's kernel, on each element's sum
// (core/targets/gpu/compile/gpu_matmul.h): a bias and tanh, a scale and a broadcast mask (a decode step's
// attention scores), a residual beside the product kept as an output too, and an op that
// reads the product at other elements (the transpose), which stays a kernel of its own.
// Each against double-precision loops, for the tiled kernel (tiles that divide the sizes
// and tiles that do not), the matrix-vector one and the row-dot one.
TEST(GpuEmulation, ProductsWithTheirElementwiseEpiloguesEqualADoubleLoop) {
  const int64_t k = 19;
  for (int tile : {7, 16})
    for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 23}, {37, 23}, {37, 1}}) {
      SCOPED_TRACE("tile " + std::to_string(tile) + ", " + std::to_string(rows) + " x " +
                   std::to_string(n));
      Context ctx = NewContext();
      Trace t = NewTrace(ctx, "epilogues");
      tm_value a = Input(t, TM_F32, {rows, k}), b = Input(t, TM_F32, {k, n});
      tm_value b2 = Input(t, TM_F32, {k, n});
      tm_value bias = Input(t, TM_F32, {n}), r = Input(t, TM_F32, {rows, n});
      tm_value y = Op(tm_op_matmul, t, a, b2);
      End(t, {Op(tm_op_tanh, t, Op(tm_op_add, t, Op(tm_op_matmul, t, a, b), bias)), y,
              Op(tm_op_add, t, Op(tm_op_mul, t, y, Op(tm_op_scalar, t, TM_F32, 0.5)), r)});
      Host<float> ha({rows, k}, Cast<float>(Pseudo(rows * k, -1, 1, 4)));
      Host<float> hb({k, n}, Cast<float>(Pseudo(k * n, -1, 1, 5)));
      Host<float> hb2({k, n}, Cast<float>(Pseudo(k * n, -1, 1, 13)));
      Host<float> hbias({n}, Cast<float>(Pseudo(n, -1, 1, 6)));
      Host<float> hr({rows, n}, Cast<float>(Pseudo(rows * n, -1, 1, 7)));
      Host<float> h0({rows, n}, 0.0f), h1({rows, n}, 0.0f), h2({rows, n}, 0.0f);
      const tm_compile_options o = GpuOptions(tile);
      TM_ASSERT_OK(CompileInvoke(ctx, t,
                                 {ha.view(), hb.view(), hb2.view(), hbias.view(), hr.view()},
                                 {h0.view(), h1.view(), h2.view()}, &o));
      const std::vector<double> c =
          MatmulReference(ToDouble(ha.data), ToDouble(hb.data), 1, rows, k, n);
      const std::vector<double> c2 =
          MatmulReference(ToDouble(ha.data), ToDouble(hb2.data), 1, rows, k, n);
      std::vector<double> want0(c.size()), want2(c.size());
      for (size_t i = 0; i < c.size(); ++i) {
        want0[i] = std::tanh(c[i] + double(hbias[i % n]));
        want2[i] = c2[i] * 0.5 + double(hr[i]);
      }
      EXPECT_TRUE(AllClose(h0.data, want0, 1e-5, 1e-5));
      EXPECT_TRUE(AllClose(h1.data, c2, 1e-5, 1e-5));
      EXPECT_TRUE(AllClose(h2.data, want2, 1e-5, 1e-5));
    }

  // Attention scores of a decode step: 12 heads of one row, scaled, plus a (1, 19) mask.
  {
    Context ctx = NewContext();
    Trace t = NewTrace(ctx, "scores");
    tm_value q = Input(t, TM_F32, {12, 1, 64}), kt = Input(t, TM_F32, {12, 64, 19});
    tm_value mask = Input(t, TM_F32, {1, 19});
    End(t, {Op(tm_op_add, t,
               Op(tm_op_mul, t, Op(tm_op_matmul, t, q, kt), Op(tm_op_scalar, t, TM_F32, 0.125)),
               mask)});
    Host<float> hq({12, 1, 64}, Cast<float>(Pseudo(12 * 64, -1, 1, 8)));
    Host<float> hk({12, 64, 19}, Cast<float>(Pseudo(12 * 64 * 19, -1, 1, 9)));
    Host<float> hm({1, 19}, Cast<float>(Pseudo(19, -3, 0, 10)));
    Host<float> hs({12, 1, 19}, 0.0f);
    const tm_compile_options o = GpuOptions(16);
    TM_ASSERT_OK(CompileInvoke(ctx, t, {hq.view(), hk.view(), hm.view()}, {hs.view()}, &o));
    std::vector<double> want = MatmulReference(ToDouble(hq.data), ToDouble(hk.data), 12, 1, 64, 19);
    for (size_t i = 0; i < want.size(); ++i) want[i] = want[i] * 0.125 + double(hm[i % 19]);
    EXPECT_TRUE(AllClose(hs.data, want, 1e-5, 1e-5));
  }

  // y + y^T reads the product at another element than its own: not an epilogue.
  {
    Context ctx = NewContext();
    Trace t = NewTrace(ctx, "symmetric");
    const int64_t n = 23;
    tm_value a = Input(t, TM_F32, {n, k}), b = Input(t, TM_F32, {k, n});
    tm_value y = Op(tm_op_matmul, t, a, b);
    const int32_t perm[2] = {1, 0};
    End(t, {Op(tm_op_add, t, y, Op(tm_op_transpose, t, y, perm, 2))});
    Host<float> ha({n, k}, Cast<float>(Pseudo(n * k, -1, 1, 11)));
    Host<float> hb({k, n}, Cast<float>(Pseudo(k * n, -1, 1, 12)));
    Host<float> hs({n, n}, 0.0f);
    const tm_compile_options o = GpuOptions(16);
    TM_ASSERT_OK(CompileInvoke(ctx, t, {ha.view(), hb.view()}, {hs.view()}, &o));
    const std::vector<double> c = MatmulReference(ToDouble(ha.data), ToDouble(hb.data), 1, n, k, n);
    std::vector<double> want(c.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) want[i * n + j] = c[i * n + j] + c[j * n + i];
    EXPECT_TRUE(AllClose(hs.data, want, 1e-5, 1e-5));
  }
}

// A step of attention as GPT-2 traces it: the heads split out of q, k and v (transposes),
// scores scaled and masked, softmax, the weighted values, the heads merged back into rows.
// On the GPU the q and v heads are read in place (views, no copy), the scale and mask and
// the merge are their products' epilogues (core/targets/gpu/compile/gpu_matmul.h); when the scores have
// the shape of q's heads (L = head size) bufferization reuses that buffer, which the view
// of q must survive. Against double-precision loops, 1e-5 relative + 1e-5 absolute.
TEST(GpuEmulation, AnAttentionStepEqualsADoubleLoop) {
  const int64_t h = 4, hd = 32, d = h * hd;
  for (int64_t t : {1, 3})
    for (int64_t l : {int64_t{8}, hd}) {
      SCOPED_TRACE(std::to_string(t) + " rows, " + std::to_string(l) + " keys");
      Context ctx = NewContext();
      Trace tr = NewTrace(ctx, "attention");
      End(tr, AttentionStep(tr, t, l, h, hd));
      Host<float> hq({t, d}, Cast<float>(Pseudo(t * d, -1, 1, 21)));
      Host<float> hk({l, d}, Cast<float>(Pseudo(l * d, -1, 1, 22)));
      Host<float> hv({l, d}, Cast<float>(Pseudo(l * d, -1, 1, 23)));
      std::vector<double> m(t * l);
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = 0; j < l; ++j) m[i * l + j] = j > l - t + i ? -1e9 : 0.0;
      Host<float> hm({t, l}, Cast<float>(m));
      Host<float> ho({t, d}, 0.0f);
      const tm_compile_options o = GpuOptions(16);
      TM_ASSERT_OK(
          CompileInvoke(ctx, tr, {hq.view(), hk.view(), hv.view(), hm.view()}, {ho.view()}, &o));
      std::vector<double> want(t * d);
      for (int64_t head = 0; head < h; ++head)
        for (int64_t i = 0; i < t; ++i) {
          std::vector<double> p(l);
          double top = -1e300, sum = 0;
          for (int64_t j = 0; j < l; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < hd; ++e)
              dot += double(hq[i * d + head * hd + e]) * double(hk[j * d + head * hd + e]);
            p[j] = dot * 0.125 + double(hm[i * l + j]);
            top = std::max(top, p[j]);
          }
          for (double &x : p) sum += (x = std::exp(x - top));
          for (int64_t e = 0; e < hd; ++e) {
            double acc = 0;
            for (int64_t j = 0; j < l; ++j) acc += p[j] / sum * double(hv[j * d + head * hd + e]);
            want[i * d + head * hd + e] = acc;
          }
        }
      EXPECT_TRUE(AllClose(ho.data, want, 1e-5, 1e-5));
    }
}

// Heads split out of rows that are read again after the product (here doubled, as a second
// output) keep their copy: the product may still read them in place, but the copy's buffer
// must hold them for the later reader. And heads that are both operands of a product.
TEST(GpuEmulation, HeadsReadAgainAfterTheProductAreStillThere) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx, "heads");
  const int64_t split[3] = {5, 4, 32};
  const int32_t perm[3] = {1, 0, 2};
  tm_value xh =
      Op(tm_op_transpose, t, Op(tm_op_reshape, t, Input(t, TM_F32, {5, 128}), 3, split), perm, 3);
  End(t, {Op(tm_op_matmul, t, xh, Input(t, TM_F32, {4, 32, 7})),
          Op(tm_op_mul, t, xh, Op(tm_op_scalar, t, TM_F32, 2.0))});
  Host<float> hx({5, 128}, Cast<float>(Pseudo(5 * 128, -1, 1, 31)));
  Host<float> hy({4, 32, 7}, Cast<float>(Pseudo(4 * 32 * 7, -1, 1, 32)));
  Host<float> hp({4, 5, 7}, 0.0f), hd({4, 5, 32}, 0.0f);
  const tm_compile_options o = GpuOptions(16);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {hx.view(), hy.view()}, {hp.view(), hd.view()}, &o));
  std::vector<double> heads(4 * 5 * 32), doubled(heads.size());
  for (int64_t head = 0; head < 4; ++head)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t e = 0; e < 32; ++e) {
        heads[(head * 5 + i) * 32 + e] = hx[i * 128 + head * 32 + e];
        doubled[(head * 5 + i) * 32 + e] = 2.0 * hx[i * 128 + head * 32 + e];
      }
  EXPECT_TRUE(
      AllClose(hp.data, MatmulReference(heads, ToDouble(hy.data), 4, 5, 32, 7), 1e-5, 1e-5));
  EXPECT_TRUE(AllClose(hd.data, doubled, 0, 0));

  // The same heads as both operands of the product: (4, 32, 32) @ itself.
  Trace square = NewTrace(ctx, "square");
  const int64_t square_split[3] = {32, 4, 32};
  tm_value sh =
      Op(tm_op_transpose, square,
         Op(tm_op_reshape, square, Input(square, TM_F32, {32, 128}), 3, square_split), perm, 3);
  End(square, {Op(tm_op_matmul, square, sh, sh)});
  Host<float> hs({32, 128}, Cast<float>(Pseudo(32 * 128, -1, 1, 33)));
  Host<float> hss({4, 32, 32}, 0.0f);
  TM_ASSERT_OK(CompileInvoke(ctx, square, {hs.view()}, {hss.view()}, &o));
  std::vector<double> sheads(4 * 32 * 32);
  for (int64_t head = 0; head < 4; ++head)
    for (int64_t i = 0; i < 32; ++i)
      for (int64_t e = 0; e < 32; ++e)
        sheads[(head * 32 + i) * 32 + e] = hs[i * 128 + head * 32 + e];
  EXPECT_TRUE(AllClose(hss.data, MatmulReference(sheads, sheads, 4, 32, 32, 32), 1e-5, 1e-5));
}

// Row kernels (core/targets/gpu/compile/gpu_row_kernels.h) against double loops: layer norm then GELU,
// softmax, a row max and a column sum, over rows of 3 columns (fewer than a warp), 37, 256
// (the block's threads exactly), 300 and 1000 (several per thread), for 1 row and 7; f64
// softmax and sums; and softmax read transposed after its kernel (p + p^T: two kernels).
// Tolerance 1e-5 relative + 1e-5 absolute for f32, 1e-12 for f64: the kernel combines a row
// as a tree, the reference in order.
TEST(GpuEmulation, RowKernelsEqualADoubleLoop) {
  for (int64_t rows : {1, 7})
    for (int64_t cols : {3, 37, 256, 300, 1000}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
      Context ctx = NewContext();
      Trace t = NewTrace(ctx, "rows");
      tm_value x = Input(t, TM_F32, {rows, cols});
      tm_value g = Input(t, TM_F32, {cols}), b = Input(t, TM_F32, {cols});
      End(t, {Op(tm_op_gelu_tanh, t, Op(tm_op_layer_norm, t, x, g, b, 1e-5)),
              Op(tm_op_softmax, t, x, -1), Op(tm_op_reduce_max, t, x, 1, 0),
              Op(tm_op_reduce_sum, t, x, 0, 0)});
      Host<float> hx({rows, cols}, Cast<float>(Pseudo(rows * cols, -3, 3, 41)));
      Host<float> hg({cols}, Cast<float>(Pseudo(cols, 0.5, 1.5, 42)));
      Host<float> hb({cols}, Cast<float>(Pseudo(cols, -1, 1, 43)));
      Host<float> norm({rows, cols}, 0.0f), soft({rows, cols}, 0.0f), top({rows}, 0.0f),
          sum({cols}, 0.0f);
      const tm_compile_options o = GpuOptions(16);
      TM_ASSERT_OK(CompileInvoke(ctx, t, {hx.view(), hg.view(), hb.view()},
                                 {norm.view(), soft.view(), top.view(), sum.view()}, &o));
      std::vector<double> want_norm(rows * cols), want_soft(rows * cols), want_top(rows),
          want_sum(cols, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const float *row = &hx.data[r * cols];
        double mean = 0, var = 0, high = -1e300, total = 0;
        for (int64_t c = 0; c < cols; ++c) mean += row[c];
        mean /= cols;
        for (int64_t c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
        var /= cols;
        for (int64_t c = 0; c < cols; ++c) {
          const double y = (row[c] - mean) / std::sqrt(var + 1e-5) * hg[c] + hb[c];
          want_norm[r * cols + c] =
              0.5 * y * (1 + std::tanh(std::sqrt(2 / M_PI) * (y + 0.044715 * y * y * y)));
          high = std::max(high, double(row[c]));
          want_sum[c] += row[c];
        }
        for (int64_t c = 0; c < cols; ++c) total += std::exp(row[c] - high);
        for (int64_t c = 0; c < cols; ++c)
          want_soft[r * cols + c] = std::exp(row[c] - high) / total;
        want_top[r] = high;
      }
      EXPECT_TRUE(AllClose(norm.data, want_norm, 1e-5, 1e-5));
      EXPECT_TRUE(AllClose(soft.data, want_soft, 1e-5, 1e-5));
      EXPECT_TRUE(AllClose(top.data, want_top, 0, 0));
      EXPECT_TRUE(AllClose(sum.data, want_sum, 1e-5, 1e-5));
    }

  // f64: softmax and a row sum (partials in f64 workgroup memory). Tolerance 1e-12.
  {
    Context ctx = NewContext();
    Trace t = NewTrace(ctx, "f64");
    tm_value x = Input(t, TM_F64, {3, 300});
    End(t, {Op(tm_op_softmax, t, x, -1), Op(tm_op_reduce_sum, t, x, 1, 0)});
    Host<double> hx({3, 300}, Pseudo(900, -3, 3, 45));
    Host<double> soft({3, 300}, 0.0), sum({3}, 0.0);
    const tm_compile_options o = GpuOptions(16);
    TM_ASSERT_OK(CompileInvoke(ctx, t, {hx.view()}, {soft.view(), sum.view()}, &o));
    std::vector<double> want_soft(900), want_sum(3, 0.0);
    for (int64_t r = 0; r < 3; ++r) {
      double high = -1e300, total = 0;
      for (int64_t c = 0; c < 300; ++c) {
        high = std::max(high, hx[r * 300 + c]);
        want_sum[r] += hx[r * 300 + c];
      }
      for (int64_t c = 0; c < 300; ++c) total += std::exp(hx[r * 300 + c] - high);
      for (int64_t c = 0; c < 300; ++c) want_soft[r * 300 + c] = std::exp(hx[r * 300 + c] - high) / total;
    }
    EXPECT_TRUE(AllClose(soft.data, want_soft, 1e-12, 1e-12));
    EXPECT_TRUE(AllClose(sum.data, want_sum, 1e-12, 1e-12));
  }

  Context ctx = NewContext();
  Trace t = NewTrace(ctx, "both");
  tm_value p = Op(tm_op_softmax, t, Input(t, TM_F32, {8, 8}), -1);
  const int32_t swap[2] = {1, 0};
  End(t, {Op(tm_op_add, t, p, Op(tm_op_transpose, t, p, swap, 2))});
  Host<float> hx({8, 8}, Cast<float>(Pseudo(64, -3, 3, 44)));
  Host<float> out({8, 8}, 0.0f);
  const tm_compile_options o = GpuOptions(16);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {hx.view()}, {out.view()}, &o));
  std::vector<double> soft(64), want(64);
  for (int64_t r = 0; r < 8; ++r) {
    double high = -1e300, total = 0;
    for (int64_t c = 0; c < 8; ++c) high = std::max(high, double(hx[r * 8 + c]));
    for (int64_t c = 0; c < 8; ++c) total += std::exp(hx[r * 8 + c] - high);
    for (int64_t c = 0; c < 8; ++c) soft[r * 8 + c] = std::exp(hx[r * 8 + c] - high) / total;
  }
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 8; ++c) want[r * 8 + c] = soft[r * 8 + c] + soft[c * 8 + r];
  EXPECT_TRUE(AllClose(out.data, want, 1e-5, 1e-5));
}

// The program is the GPU lowering's kernel run on the host: no GPU operation, runtime call or
// device code is left, and the CPU target's BLAS call is not there either.
TEST(GpuEmulation, ProgramsAreTheKernelsOnTheHost) {
  Context ctx = NewContext();
  Trace t = MatmulTrace(ctx, TM_F32, {20, 30}, {30, 40});
  Program gpu, cpu;
  const tm_compile_options g = GpuOptions(16), c = Options();
  TM_ASSERT_OK(tm_compile(ctx, t, &g, gpu.out()));
  TM_ASSERT_OK(tm_compile(ctx, t, &c, cpu.out()));
  const std::string emulated = StageText(gpu, TM_STAGE_LOWERED);
  EXPECT_EQ(emulated.find("gpu."), std::string::npos);
  EXPECT_EQ(emulated.find("mgpu"), std::string::npos);
  EXPECT_EQ(emulated.find("tm_rt_gemm"), std::string::npos);
  EXPECT_NE(StageText(cpu, TM_STAGE_LOWERED).find("tm_rt_gemm"), std::string::npos);
  // Host assembly, not PTX.
  const std::string assembly = StageText(gpu, TM_STAGE_ASSEMBLY);
  EXPECT_EQ(assembly.find(".target sm_"), std::string::npos);
  EXPECT_NE(assembly.find("\tret"), std::string::npos) << assembly.substr(0, 600);
}

// An emulated program is exported and loaded like any other, and runs from its file.
TEST(GpuEmulation, ProgramFilesRunWithoutAGpu) {
  Context ctx = NewContext();
  Trace t = MatmulTrace(ctx, TM_F32, {9, 18}, {18, 5});
  Program compiled, loaded;
  const tm_compile_options o = GpuOptions(8);
  TM_ASSERT_OK(tm_compile(ctx, t, &o, compiled.out()));
  const char *tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/tinymlir-emulated-" +
                           std::to_string(getpid()) + ".tmp";
  TM_ASSERT_OK(tm_program_export(compiled, path.c_str()));
  TM_ASSERT_OK(tm_program_load(path.c_str(), loaded.out()));
  std::remove(path.c_str());
  Host<float> ha({9, 18}, Cast<float>(Pseudo(9 * 18))),
      hb({18, 5}, Cast<float>(Pseudo(90, -1, 1, 3)));
  Host<float> hc({9, 5}, 0.0f);
  std::vector<tm_tensor> in = {ha.view(), hb.view()}, out = {hc.view()};
  TM_ASSERT_OK(tm_invoke(loaded, in.data(), 2, out.data(), 1));
  EXPECT_TRUE(AllClose(hc.data, MatmulReference(ToDouble(ha.data), ToDouble(hb.data), 1, 9, 18, 5),
                       1e-5, 1e-5));
}

}  // namespace
}  // namespace tmtest
