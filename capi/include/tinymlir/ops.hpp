// The op table's ops as methods of tinymlir.hpp's Tracer, each recording its op
// through tm_op (<tinymlir/ops.h> says what each computes): generated from
// core/trace/ops.def by scripts/generate-ops-header.py; DO NOT EDIT.
#ifndef TINYMLIR_OPS_HPP
#define TINYMLIR_OPS_HPP

#include <cstdint>
#include <vector>

#include "tinymlir/tinymlir.h"

namespace tinymlir {

// Tracer derives from OpMethods<Tracer>, which calls its op() and Refuse().
template <typename Tracer>
class OpMethods {
 public:
  // add(a, b)
  tm_value add(tm_value a, tm_value b) {
    return self().op(TM_OP_ADD, {a, b}, {}, 0.0);
  }
  // sub(a, b)
  tm_value sub(tm_value a, tm_value b) {
    return self().op(TM_OP_SUB, {a, b}, {}, 0.0);
  }
  // mul(a, b)
  tm_value mul(tm_value a, tm_value b) {
    return self().op(TM_OP_MUL, {a, b}, {}, 0.0);
  }
  // div(a, b)
  tm_value div(tm_value a, tm_value b) {
    return self().op(TM_OP_DIV, {a, b}, {}, 0.0);
  }
  // pow(a, b)
  tm_value pow(tm_value a, tm_value b) {
    return self().op(TM_OP_POW, {a, b}, {}, 0.0);
  }
  // maximum(a, b)
  tm_value maximum(tm_value a, tm_value b) {
    return self().op(TM_OP_MAXIMUM, {a, b}, {}, 0.0);
  }
  // minimum(a, b)
  tm_value minimum(tm_value a, tm_value b) {
    return self().op(TM_OP_MINIMUM, {a, b}, {}, 0.0);
  }
  // less(a, b)
  tm_value less(tm_value a, tm_value b) {
    return self().op(TM_OP_LESS, {a, b}, {}, 0.0);
  }
  // greater(a, b)
  tm_value greater(tm_value a, tm_value b) {
    return self().op(TM_OP_GREATER, {a, b}, {}, 0.0);
  }
  // equal(a, b)
  tm_value equal(tm_value a, tm_value b) {
    return self().op(TM_OP_EQUAL, {a, b}, {}, 0.0);
  }
  // where(condition, a, b)
  tm_value where(tm_value condition, tm_value a, tm_value b) {
    return self().op(TM_OP_WHERE, {condition, a, b}, {}, 0.0);
  }
  // cast(x, dtype: dtype)
  tm_value cast(tm_value x, tm_dtype dtype) {
    return self().op(TM_OP_CAST, {x}, {static_cast<int64_t>(dtype)}, 0.0);
  }
  // matmul(a, b)
  tm_value matmul(tm_value a, tm_value b) {
    return self().op(TM_OP_MATMUL, {a, b}, {}, 0.0);
  }
  // reduce_sum(x, axis: int, keepdims: bool = 0)
  tm_value reduce_sum(tm_value x, int64_t axis, bool keepdims = false) {
    return self().op(TM_OP_REDUCE_SUM, {x}, {static_cast<int64_t>(axis), static_cast<int64_t>(keepdims)}, 0.0);
  }
  // reduce_max(x, axis: int, keepdims: bool = 0)
  tm_value reduce_max(tm_value x, int64_t axis, bool keepdims = false) {
    return self().op(TM_OP_REDUCE_MAX, {x}, {static_cast<int64_t>(axis), static_cast<int64_t>(keepdims)}, 0.0);
  }
  // reduce_mean(x, axis: int, keepdims: bool = 0)
  tm_value reduce_mean(tm_value x, int64_t axis, bool keepdims = false) {
    return self().op(TM_OP_REDUCE_MEAN, {x}, {static_cast<int64_t>(axis), static_cast<int64_t>(keepdims)}, 0.0);
  }
  // reduce_var(x, axis: int, keepdims: bool = 0)
  tm_value reduce_var(tm_value x, int64_t axis, bool keepdims = false) {
    return self().op(TM_OP_REDUCE_VAR, {x}, {static_cast<int64_t>(axis), static_cast<int64_t>(keepdims)}, 0.0);
  }
  // reshape(x, shape: ints)
  tm_value reshape(tm_value x, const std::vector<int64_t> &shape) {
    std::vector<int64_t> ints = {};
    ints.insert(ints.end(), shape.begin(), shape.end());
    return self().op(TM_OP_RESHAPE, {x}, ints, 0.0);
  }
  // transpose(x, perm: ints = ())
  tm_value transpose(tm_value x, const std::vector<int64_t> &perm = {}) {
    std::vector<int64_t> ints = {};
    ints.insert(ints.end(), perm.begin(), perm.end());
    return self().op(TM_OP_TRANSPOSE, {x}, ints, 0.0);
  }
  // slice(x, begin: ints, end: ints)
  tm_value slice(tm_value x, const std::vector<int64_t> &begin, const std::vector<int64_t> &end) {
    if (begin.size() != end.size()) return self().Refuse("slice: begin, end differ in length");
    std::vector<int64_t> ints = {};
    ints.insert(ints.end(), begin.begin(), begin.end());
    ints.insert(ints.end(), end.begin(), end.end());
    return self().op(TM_OP_SLICE, {x}, ints, 0.0);
  }
  // concat(xs: values, axis: int = 0)
  tm_value concat(const std::vector<tm_value> &xs, int64_t axis = 0) {
    return self().op(TM_OP_CONCAT, xs, {static_cast<int64_t>(axis)}, 0.0);
  }
  // gather(table, indices)
  tm_value gather(tm_value table, tm_value indices) {
    return self().op(TM_OP_GATHER, {table, indices}, {}, 0.0);
  }
  // softmax(x, axis: int = -1)
  tm_value softmax(tm_value x, int64_t axis = -1) {
    return self().op(TM_OP_SOFTMAX, {x}, {static_cast<int64_t>(axis)}, 0.0);
  }
  // layer_norm(x, gamma, beta, eps: real = 1e-05)
  tm_value layer_norm(tm_value x, tm_value gamma, tm_value beta, double eps = 1e-05) {
    return self().op(TM_OP_LAYER_NORM, {x, gamma, beta}, {}, eps);
  }
  // gelu_tanh(x)
  tm_value gelu_tanh(tm_value x) {
    return self().op(TM_OP_GELU_TANH, {x}, {}, 0.0);
  }
  // causal_mask(rows: int, cols: int, offset: int = 0, dtype: dtype = f32)
  tm_value causal_mask(int64_t rows, int64_t cols, int64_t offset = 0, tm_dtype dtype = TM_F32) {
    return self().op(TM_OP_CAUSAL_MASK, {}, {static_cast<int64_t>(rows), static_cast<int64_t>(cols), static_cast<int64_t>(offset), static_cast<int64_t>(dtype)}, 0.0);
  }
  // argmax(x, axis: int = -1, keepdims: bool = 0)
  tm_value argmax(tm_value x, int64_t axis = -1, bool keepdims = false) {
    return self().op(TM_OP_ARGMAX, {x}, {static_cast<int64_t>(axis), static_cast<int64_t>(keepdims)}, 0.0);
  }

 private:
  Tracer &self() { return static_cast<Tracer &>(*this); }
};

}  // namespace tinymlir

#endif  // TINYMLIR_OPS_HPP
