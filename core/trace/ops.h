// The ops of ops.def as the trace and the C API use them: each row's kind, C value, name,
// signature (parsed into parameters), rule and error bound, and one way to record any of
// them (RecordOp). The elementwise unary ops are unary_ops.h's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/support/status.h"
#include "core/trace/trace.h"

namespace tinymlir {

// How far a target's result may be from the exact value of the op on its (rounded)
// operands, in the result's dtype (tests/backend_ops holds every target to it):
enum class OpBound {
  kExact,        // the exact value (data movement, comparisons, selection, max/min)
  kOneRounding,  // the exact value rounded once (+ - * /, conversions)
  kLibm,         // within a few units of the last place (pow, as libm's)
  kSummation,    // a sum of n products in any order: gamma_n times the sum of |terms|
  kComposite,    // several roundings and a summation (softmax, layer norm, variance)
};

// One parameter of a signature (ops.def says how they are written).
struct OpParameter {
  enum Kind { kValue, kValues, kInt, kBool, kDtype, kInts, kReal };
  std::string name;
  Kind kind;
  std::string default_text;  // after `=`, empty when none
};

// A call of an op: the values, the int/bool/dtype attributes then the lists, as tm_op takes
// them (ops.def), and the real attribute. `op` names the call in messages.
struct OpCall {
  OpKind kind;
  const char *op;
  std::vector<ValueId> values;
  std::vector<int64_t> ints;
  double real = 0.0;
};

using OpRule = Status (*)(Trace &trace, const OpCall &call, ValueId *out);

struct OpRow {
  OpKind kind;
  int c_value;  // the C API's tm_op_kind
  const char *signature;
  const char *doc;
  OpRule rule;
  bool expanded;  // recorded as the primitives it is made of
  OpBound bound;
  // Parsed from the signature.
  std::string name;
  std::vector<OpParameter> parameters;
  size_t value_parameters, scalar_attributes, list_attributes;
  bool variadic;  // its values are one `values` parameter
  bool has_real;
};

// Every row, in the table's order (which is the order of their C values).
const std::vector<OpRow> &OpRows();
// The row of `kind`, or NULL (the unary ops, inputs, scalars and constants have none).
const OpRow *FindOp(OpKind kind);
// The row with the C API value `c_value`, or NULL.
const OpRow *FindOpByC(int c_value);

// Checks a call's counts against the row's signature (the values, and the attributes:
// every int, bool and dtype, then the lists, all as long), then records it through the
// row's rule. Fails naming `call.op` and what the signature wants.
Status RecordOp(Trace &trace, const OpCall &call, ValueId *out);

}  // namespace tinymlir
