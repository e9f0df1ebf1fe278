/* The ops of tm_op, one per row of tinymlir's op table: generated from
 * core/trace/ops.def by scripts/generate-ops-header.py; DO NOT EDIT. Included by
 * <tinymlir/tinymlir.h>, which says how tm_op takes each op's parameters. Each
 * enumerator's comment is the op's signature, then what it computes. Values are fixed
 * forever; new ops are appended. */
#ifndef TINYMLIR_OPS_H
#define TINYMLIR_OPS_H

typedef TM_ENUM(tm_op_kind) {
  TM_OP_ADD = 0,
    /* add(a, b): a + b, elementwise with NumPy broadcasting and promotion (bools: or) */
  TM_OP_SUB = 1,
    /* sub(a, b): a - b, elementwise (not for bools) */
  TM_OP_MUL = 2,
    /* mul(a, b): a * b, elementwise (bools: and) */
  TM_OP_DIV = 3,
    /* div(a, b): a / b, elementwise; integers and bools divide in f64, as NumPy's true
     * division */
  TM_OP_POW = 4,
    /* pow(a, b): a ** b, elementwise; integers with a negative exponent give 1 / a^n
     * truncated */
  TM_OP_MAXIMUM = 5,
    /* maximum(a, b): the larger of a and b; NaN propagates */
  TM_OP_MINIMUM = 6,
    /* minimum(a, b): the smaller of a and b; NaN propagates */
  TM_OP_LESS = 7,
    /* less(a, b): a < b, a bool tensor */
  TM_OP_GREATER = 8,
    /* greater(a, b): a > b, a bool tensor */
  TM_OP_EQUAL = 9,
    /* equal(a, b): a == b, a bool tensor */
  TM_OP_WHERE = 10,
    /* where(condition, a, b): a where the bool condition holds, else b; the three broadcast
     * together */
  TM_OP_CAST = 11,
    /* cast(x, dtype: dtype): x converted to dtype (floats to integers truncate and saturate,
     * NaN to 0) */
  TM_OP_MATMUL = 12,
    /* matmul(a, b): the matrix product, (..., m, k) @ (..., k, n) or (..., m, k) @ (k, n) */
  TM_OP_REDUCE_SUM = 13,
    /* reduce_sum(x, axis: int, keepdims: bool = 0): the sum along axis (0 over an empty one) */
  TM_OP_REDUCE_MAX = 14,
    /* reduce_max(x, axis: int, keepdims: bool = 0): the maximum along axis */
  TM_OP_REDUCE_MEAN = 15,
    /* reduce_mean(x, axis: int, keepdims: bool = 0): the mean along axis, in a float dtype */
  TM_OP_REDUCE_VAR = 16,
    /* reduce_var(x, axis: int, keepdims: bool = 0): the population variance along axis, in a
     * float dtype */
  TM_OP_RESHAPE = 17,
    /* reshape(x, shape: ints): x with the same elements in `shape` (one entry may be -1) */
  TM_OP_TRANSPOSE = 18,
    /* transpose(x, perm: ints = ()): x's axes permuted by perm (an empty perm reverses them) */
  TM_OP_SLICE = 19,
    /* slice(x, begin: ints, end: ints): x[begin:end], unit steps */
  TM_OP_CONCAT = 20,
    /* concat(xs: values, axis: int = 0): the values joined along axis; dtypes are promoted */
  TM_OP_GATHER = 21,
    /* gather(table, indices): rows of table: out[i..., :] = table[indices[i...], :] */
  TM_OP_SOFTMAX = 22,
    /* softmax(x, axis: int = -1): exp(x - max) / sum along axis, stable for infinite entries */
  TM_OP_LAYER_NORM = 23,
    /* layer_norm(x, gamma, beta, eps: real = 1e-05): (x - mean) / sqrt(var + eps) * gamma +
     * beta over the last axis */
  TM_OP_GELU_TANH = 24,
    /* gelu_tanh(x): GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
     * x^3))) */
  TM_OP_CAUSAL_MASK = 25,
    /* causal_mask(rows: int, cols: int, offset: int = 0, dtype: dtype = f32): a (rows, cols)
     * additive mask: 0 where col <= row + offset, the lowest finite value elsewhere */
  TM_OP_ARGMAX = 26
    /* argmax(x, axis: int = -1, keepdims: bool = 0): the index (i64) of the largest element
     * along axis: the first of equal ones, the first NaN if there is one */
} tm_op_kind;

#endif  /* TINYMLIR_OPS_H */
