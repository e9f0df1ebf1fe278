// The elementwise unary ops of unary_ops.def, as the trace uses them: their names, C API
// values and dtype rules. (The builder reads the lowering expressions and the fuzzer the
// reference expressions from the same file.)
#pragma once

#include <cstddef>

#include "core/trace/trace.h"

namespace tinymlir {

enum class UnaryRule {
  kKeepsNumber,  // an integer operand keeps its dtype (neg, abs)
  kFloatResult,  // an integer operand computes in f64, as NumPy's transcendental functions
};

struct UnaryOp {
  OpKind kind;
  int c_value;  // the C API's tm_unary_op
  const char *name;
  UnaryRule rule;
};

// Every unary op, in the table's order (which is the order of their C values).
struct UnaryOpList {
  const UnaryOp *first;
  size_t count;
  const UnaryOp *begin() const { return first; }
  const UnaryOp *end() const { return first + count; }
  size_t size() const { return count; }
};
UnaryOpList UnaryOps();

// The unary op of `kind`, or NULL when `kind` is not one.
const UnaryOp *FindUnaryOp(OpKind kind);
// The unary op with the C API value `c_value`, or NULL.
const UnaryOp *FindUnaryOpByC(int c_value);

}  // namespace tinymlir
