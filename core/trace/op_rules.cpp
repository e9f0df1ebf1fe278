// The rules of ops.def's rows: each checks a call's shapes, dtypes and attributes and
// records it (RecordOp has checked the counts against the signature). Most are the Trace's
// own recording functions (trace.h) or a composite's expansion (composites.h) over the
// call's parts.
#include <climits>
#include <string>

#include "core/trace/composites.h"
#include "core/trace/ops.h"

namespace tinymlir {
namespace {

// Integer attribute i as an int32 (an axis), or OutOfRange naming it.
Status Int32Attribute(const OpCall &call, size_t i, const char *what, int32_t *out) {
  const int64_t v = call.ints[i];
  if (v < INT32_MIN || v > INT32_MAX)
    return OutOfRange(std::string(call.op) + ": " + what + " " + std::to_string(v) +
                      " is out of range");
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

// Integer attribute i as a dtype; an unknown value stays unknown, for the op to name.
DType DtypeAttribute(const OpCall &call, size_t i) {
  const int64_t v = call.ints[i];
  return static_cast<DType>(v < 0 || v > INT32_MAX ? -1 : static_cast<int>(v));
}

Status BinaryWith(BinaryRule rule, Trace &g, const OpCall &call, ValueId *out) {
  return g.Binary(call.kind, rule, call.op, call.values[0], call.values[1], out);
}

}  // namespace

Status RuleArithmetic(Trace &g, const OpCall &call, ValueId *out) {
  return BinaryWith(BinaryRule::kArithmetic, g, call, out);
}

Status RuleNumberArithmetic(Trace &g, const OpCall &call, ValueId *out) {
  return BinaryWith(BinaryRule::kNumberArithmetic, g, call, out);
}

Status RuleDivision(Trace &g, const OpCall &call, ValueId *out) {
  return BinaryWith(BinaryRule::kDivision, g, call, out);
}

Status RuleComparison(Trace &g, const OpCall &call, ValueId *out) {
  return BinaryWith(BinaryRule::kComparison, g, call, out);
}

Status RuleSelect(Trace &g, const OpCall &call, ValueId *out) {
  return g.Where(call.op, call.values[0], call.values[1], call.values[2], out);
}

Status RuleCast(Trace &g, const OpCall &call, ValueId *out) {
  return g.Cast(call.op, call.values[0], DtypeAttribute(call, 0), out);
}

Status RuleMatmul(Trace &g, const OpCall &call, ValueId *out) {
  return g.Matmul(call.op, call.values[0], call.values[1], out);
}

Status RuleReduce(Trace &g, const OpCall &call, ValueId *out) {
  int32_t axis;
  TM_RETURN_IF_ERROR(Int32Attribute(call, 0, "axis", &axis));
  return g.Reduce(call.kind, call.op, call.values[0], axis, call.ints[1] != 0, out);
}

Status RuleMean(Trace &g, const OpCall &call, ValueId *out) {
  int32_t axis;
  TM_RETURN_IF_ERROR(Int32Attribute(call, 0, "axis", &axis));
  return ReduceMean(g, call.op, call.values[0], axis, call.ints[1] != 0, out);
}

Status RuleVariance(Trace &g, const OpCall &call, ValueId *out) {
  int32_t axis;
  TM_RETURN_IF_ERROR(Int32Attribute(call, 0, "axis", &axis));
  return ReduceVar(g, call.op, call.values[0], axis, call.ints[1] != 0, out);
}

Status RuleReshape(Trace &g, const OpCall &call, ValueId *out) {
  return g.Reshape(call.op, call.values[0], Shape(call.ints.begin(), call.ints.end()), out);
}

// An empty perm reverses the axes.
Status RuleTranspose(Trace &g, const OpCall &call, ValueId *out) {
  const ValueId x = call.values[0];
  TM_RETURN_IF_ERROR(g.CheckValue(call.op, x));
  std::vector<int64_t> perm = call.ints;
  if (perm.empty())
    for (int i = g.node(x).type.rank(); i-- > 0;) perm.push_back(i);
  return g.Transpose(call.op, x, perm, out);
}

// The lists begin and end, each half of the integers.
Status RuleSlice(Trace &g, const OpCall &call, ValueId *out) {
  const size_t half = call.ints.size() / 2;
  return g.Slice(call.op, call.values[0], Shape(call.ints.begin(), call.ints.begin() + half),
                 Shape(call.ints.begin() + half, call.ints.end()), out);
}

Status RuleConcat(Trace &g, const OpCall &call, ValueId *out) {
  int32_t axis;
  TM_RETURN_IF_ERROR(Int32Attribute(call, 0, "axis", &axis));
  return g.Concat(call.op, call.values, axis, out);
}

Status RuleGather(Trace &g, const OpCall &call, ValueId *out) {
  return g.Gather(call.op, call.values[0], call.values[1], out);
}

Status RuleSoftmax(Trace &g, const OpCall &call, ValueId *out) {
  int32_t axis;
  TM_RETURN_IF_ERROR(Int32Attribute(call, 0, "axis", &axis));
  return Softmax(g, call.op, call.values[0], axis, out);
}

Status RuleLayerNorm(Trace &g, const OpCall &call, ValueId *out) {
  return LayerNorm(g, call.op, call.values[0], call.values[1], call.values[2], call.real, out);
}

Status RuleGelu(Trace &g, const OpCall &call, ValueId *out) {
  return GeluTanh(g, call.op, call.values[0], out);
}

// A (rows, cols) lower-triangular pattern from its attributes rows, cols, offset, dtype.
Status RuleTriangle(Trace &g, const OpCall &call, ValueId *out) {
  return g.TriangularMask(call.kind, call.op, call.ints[0], call.ints[1], call.ints[2],
                          DtypeAttribute(call, 3), out);
}

// NumPy's argmax: an i64 index per row of the axis, over a number or bool dtype; an empty
// axis has no maximum (unless the result is empty too).
Status RuleIndexOfMaximum(Trace &g, const OpCall &call, ValueId *out) {
  int32_t axis;
  TM_RETURN_IF_ERROR(Int32Attribute(call, 0, "axis", &axis));
  const ValueId x = call.values[0];
  TM_RETURN_IF_ERROR(g.CheckValue(call.op, x));
  TM_RETURN_IF_ERROR(g.CheckNotQuantized(call.op, x));
  const TensorType &t = g.node(x).type;
  TM_RETURN_IF_ERROR(Trace::CheckArithmetic(call.op, t.dtype));
  int ax;
  TM_RETURN_IF_ERROR(Trace::NormalizeAxis(call.op, axis, t.rank(), &ax));
  const bool keepdims = call.ints[1] != 0;
  Shape shape = t.shape;
  if (keepdims) shape[ax] = 1;
  else shape.erase(shape.begin() + ax);
  if (t.shape[ax] == 0 && TensorType{DType::kI64, shape}.NumElements() > 0)
    return ShapeError(std::string(call.op) + ": axis " + std::to_string(ax) + " of " +
                      t.ToString() + " is empty, and the index of a maximum over no elements "
                      "is undefined");
  Node n;
  n.kind = call.kind;
  n.type = {DType::kI64, shape};
  n.operands = {x};
  n.ints = {ax, keepdims ? 1 : 0};
  return g.Record(call.op, std::move(n), out);
}

}  // namespace tinymlir
