// The basic op kinds, as traces for the GPU target's tests (gpu_target_test:
// IR and PTX; gpu_host_path_test: the host side against the fake CUDA driver): elementwise,
// reductions, softmax, layer norm, gelu, matmul with sizes that are not multiples of the
// tile, batch matmul, a constant tensor, gather, products with one row (decode) and
// products with the elementwise ops that join their kernels; and a step of attention.
#pragma once

#include <functional>
#include <vector>

#include "test_util.h"

namespace tmtest {

struct OpCase {
  const char *name;
  std::vector<std::vector<int64_t>> in_shapes;
  std::vector<tm_dtype> dtypes;
  std::function<std::vector<tm_value>(tm_trace *, const std::vector<tm_value> &)> build;
};

// The op kinds tested here, among them elementwise, reductions, softmax, layer norm, gelu,
// matmul with sizes that are not multiples of the tile, batch matmul and gather.
inline std::vector<OpCase> OpCases() {
  return {
      {"elementwise", {{5, 7}, {7}}, {TM_F32, TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_tanh, t, Op(tm_op_mul, t, v[0], v[1]))};
       }},
      {"reductions", {{6, 33}}, {TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_reduce_sum, t, v[0], 1, 0),
                                      Op(tm_op_reduce_max, t, v[0], 0, 1)};
       }},
      {"softmax_layer_norm_gelu", {{4, 50}, {50}, {50}}, {TM_F32, TM_F32, TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{
             Op(tm_op_softmax, t, v[0], -1),
             Op(tm_op_gelu_tanh, t, Op(tm_op_layer_norm, t, v[0], v[1], v[2], 1e-5))};
       }},
      {"matmul_odd_sizes", {{37, 19}, {19, 23}}, {TM_F32, TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_matmul, t, v[0], v[1])};
       }},
      {"batch_matmul_f64", {{3, 5, 17}, {3, 17, 9}}, {TM_F64, TM_F64},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_matmul, t, v[0], v[1])};
       }},
      {"constant_tensor", {{3, 4}}, {TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         static const float kTable[4] = {1, 2, 3, 4};
         static const int64_t kShape[1] = {4};
         const tm_tensor table = {const_cast<float *>(kTable), TM_F32, 1, kShape, nullptr};
         return std::vector<tm_value>{Op(tm_op_mul, t, v[0], Op(tm_op_constant, t, &table))};
       }},
      {"gather", {{9, 8}, {4}}, {TM_F32, TM_I32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_gather, t, v[0], v[1])};
       }},
      // One row of A, as in a decode step: the matrix-vector kernel.
      {"matvec", {{1, 300}, {300, 77}}, {TM_F32, TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_matmul, t, v[0], v[1])};
       }},
      {"batch_matvec", {{12, 1, 64}, {12, 64, 19}}, {TM_F32, TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_matmul, t, v[0], v[1])};
       }},
      // Elementwise ops after a product, run as the product kernel's epilogue: a bias and
      // GELU (tiled kernel), a residual beside the product kept as an output (matrix-vector
      // kernel), a decode step's scaled and masked attention scores (batch).
      {"matmul_bias_gelu", {{37, 19}, {19, 23}, {23}}, {TM_F32, TM_F32, TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{
             Op(tm_op_gelu_tanh, t, Op(tm_op_add, t, Op(tm_op_matmul, t, v[0], v[1]), v[2]))};
       }},
      {"matvec_residual", {{1, 300}, {300, 77}, {1, 77}}, {TM_F32, TM_F32, TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         tm_value y = Op(tm_op_matmul, t, v[0], v[1]);
         return std::vector<tm_value>{y, Op(tm_op_add, t, v[2], y)};
       }},
      {"batch_matvec_masked", {{12, 1, 64}, {12, 64, 19}, {1, 19}}, {TM_F32, TM_F32, TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         tm_value scale = Op(tm_op_scalar, t, TM_F32, 0.125);
         return std::vector<tm_value>{
             Op(tm_op_add, t, Op(tm_op_mul, t, Op(tm_op_matmul, t, v[0], v[1]), scale), v[2])};
       }},
      // An integer power: a math op with no NVVM lowering, made a function in the kernel's
      // module (found by the C API fuzzer against the fake driver: it did not compile).
      {"integer_pow", {{5, 7}, {5, 7}}, {TM_I32, TM_I32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         return std::vector<tm_value>{Op(tm_op_pow, t, v[0], v[1])};
       }},
      // Every unary op the library knows (tm_op_unary), on |x| + 0.5 (inside every op's
      // domain), so that an op added to the table runs on the GPU target too.
      {"every_unary_op", {{3, 9}}, {TM_F32},
       [](tm_trace *t, const std::vector<tm_value> &v) {
         tm_value x = Op(tm_op_add, t, Op(tm_op_abs, t, v[0]), Op(tm_op_scalar, t, TM_F32, 0.5));
         std::vector<tm_value> out;
         for (int op = 0; op < tm_unary_op_count(); ++op) {
           tm_value y = 0;
           if (tm_op_unary(t, static_cast<tm_unary_op>(op), x, &y) != TM_OK) return std::vector<tm_value>{};
           out.push_back(y);
         }
         return out;
       }},
  };
}

// A step of attention as GPT-2 traces it, for `h` heads of `hd`, on inputs q: (rows, h * hd),
// k and v: (keys, h * hd) and a mask: (rows, keys): the heads split out of the rows
// (transposes), the scores scaled by 0.125 and masked, softmax, the weighted values, the
// heads merged back into rows.
inline std::vector<tm_value> AttentionStep(tm_trace *t, int64_t rows, int64_t keys, int64_t h,
                                           int64_t hd) {
  tm_value q = Input(t, TM_F32, {rows, h * hd}), k = Input(t, TM_F32, {keys, h * hd});
  tm_value v = Input(t, TM_F32, {keys, h * hd}), mask = Input(t, TM_F32, {rows, keys});
  auto heads = [&](tm_value x, int64_t n, std::vector<int32_t> perm) {
    const int64_t split[3] = {n, h, hd};
    return Op(tm_op_transpose, t, Op(tm_op_reshape, t, x, 3, split), perm.data(), 3);
  };
  tm_value scores = Op(tm_op_matmul, t, heads(q, rows, {1, 0, 2}), heads(k, keys, {1, 2, 0}));
  tm_value scaled = Op(tm_op_mul, t, scores, Op(tm_op_scalar, t, TM_F32, 0.125));
  tm_value probs = Op(tm_op_softmax, t, Op(tm_op_add, t, scaled, mask), -1);
  tm_value out = Op(tm_op_matmul, t, probs, heads(v, keys, {1, 0, 2}));
  const int32_t merge[3] = {1, 0, 2};
  const int64_t merged[2] = {rows, h * hd};
  return {Op(tm_op_reshape, t, Op(tm_op_transpose, t, out, merge, 3), 2, merged)};
}

inline Program CompileCase(tm_context *ctx, const OpCase &c, const tm_compile_options &o) {
  Trace t = NewTrace(ctx, c.name);
  std::vector<tm_value> in;
  for (size_t i = 0; i < c.in_shapes.size(); ++i) in.push_back(Input(t, c.dtypes[i], c.in_shapes[i]));
  End(t, c.build(t, in));
  Program p;
  EXPECT_EQ(tm_compile(ctx, t, &o, p.out()), TM_OK) << c.name << ": " << tm_last_error();
  return p;
}

}  // namespace tmtest
