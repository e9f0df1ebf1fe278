#include "core/trace/composites.h"

#include <cmath>

#include "core/trace/ops.h"

namespace tinymlir {
namespace {

// Mean and variance of integers are computed in f64, as NumPy's; bools are rejected like
// every other reduction's.
Status ToFloat(Trace &g, const char *op, ValueId x, ValueId *out) {
  DType d = g.node(x).type.dtype;
  if (d == DType::kBool)
    return DtypeError(std::string(op) + ": not defined for bool operand " +
                      g.node(x).type.ToString());
  if (IsFloat(d)) {
    TM_RETURN_IF_ERROR(Trace::CheckArithmetic(op, d));
    *out = x;
    return Status::Ok();
  }
  return g.Cast(op, x, DType::kF64, out);
}

// A binary op of the table (ops.def), through its rule.
Status Record(Trace &g, OpKind kind, const char *op, ValueId a, ValueId b, ValueId *out) {
  return RecordOp(g, OpCall{kind, op, {a, b}, {}}, out);
}

Status Scalar(Trace &g, ValueId like, double v, ValueId *out) {
  return g.Scalar("scalar", g.node(like).type.dtype, v, out);
}

}  // namespace

Status ReduceMean(Trace &g, const char *op, ValueId x, int32_t axis, bool keepdims,
                  ValueId *out) {
  TM_RETURN_IF_ERROR(g.CheckOpen(op));
  TM_RETURN_IF_ERROR(g.CheckValue(op, x));
  int ax;
  TM_RETURN_IF_ERROR(Trace::NormalizeAxis(op, axis, g.node(x).type.rank(), &ax));
  ValueId xf, sum, count;
  TM_RETURN_IF_ERROR(ToFloat(g, op, x, &xf));
  TM_RETURN_IF_ERROR(g.Reduce(OpKind::kReduceSum, op, xf, ax, keepdims, &sum));
  TM_RETURN_IF_ERROR(Scalar(g, xf, static_cast<double>(g.node(x).type.shape[ax]), &count));
  return Record(g, OpKind::kDiv, op, sum, count, out);
}

Status ReduceVar(Trace &g, const char *op, ValueId x, int32_t axis, bool keepdims,
                 ValueId *out) {
  TM_RETURN_IF_ERROR(g.CheckOpen(op));
  // Two passes, mean((x - mean(x))^2): the numerically sound form.
  TM_RETURN_IF_ERROR(g.CheckValue(op, x));
  ValueId xf, mean, d, d2;
  TM_RETURN_IF_ERROR(ToFloat(g, op, x, &xf));
  TM_RETURN_IF_ERROR(ReduceMean(g, op, xf, axis, true, &mean));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kSub, op, xf, mean, &d));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, d, d, &d2));
  return ReduceMean(g, op, d2, axis, keepdims, out);
}

Status Softmax(Trace &g, const char *op, ValueId x, int32_t axis, ValueId *out) {
  TM_RETURN_IF_ERROR(g.CheckOpen(op));
  TM_RETURN_IF_ERROR(g.CheckValue(op, x));
  if (!IsFloat(g.node(x).type.dtype))
    return DtypeError(std::string(op) + ": needs a float operand, got " +
                      g.node(x).type.ToString());
  // Checked here, not left to the ops it is made of: an empty operand makes none.
  TM_RETURN_IF_ERROR(Trace::CheckArithmetic(op, g.node(x).type.dtype));
  int ax;
  TM_RETURN_IF_ERROR(Trace::NormalizeAxis(op, axis, g.node(x).type.rank(), &ax));
  if (g.node(x).type.NumElements() == 0) {  // nothing to normalise: the result is x's (empty) shape
    *out = x;
    return Status::Ok();
  }
  ValueId max, same, diff, zero, shifted, e, sum;
  TM_RETURN_IF_ERROR(g.Reduce(OpKind::kReduceMax, op, x, axis, true, &max));
  // x - max, but 0 where x == max: a row of -inf (or one holding +inf) would otherwise
  // give inf - inf = NaN. An all -inf row thus becomes uniform, the limit of a constant row.
  TM_RETURN_IF_ERROR(Record(g, OpKind::kEqual, op, x, max, &same));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kSub, op, x, max, &diff));
  TM_RETURN_IF_ERROR(Scalar(g, x, 0.0, &zero));
  TM_RETURN_IF_ERROR(g.Where(op, same, zero, diff, &shifted));
  TM_RETURN_IF_ERROR(g.Unary(OpKind::kExp, op, shifted, &e));
  TM_RETURN_IF_ERROR(g.Reduce(OpKind::kReduceSum, op, e, axis, true, &sum));
  return Record(g, OpKind::kDiv, op, e, sum, out);
}

Status LayerNorm(Trace &g, const char *op, ValueId x, ValueId gamma, ValueId beta, double eps,
                 ValueId *out) {
  TM_RETURN_IF_ERROR(g.CheckOpen(op));
  TM_RETURN_IF_ERROR(g.CheckValue(op, x));
  TM_RETURN_IF_ERROR(g.CheckValue(op, gamma));
  TM_RETURN_IF_ERROR(g.CheckValue(op, beta));
  if (!IsFloat(g.node(x).type.dtype))
    return DtypeError(std::string(op) + ": needs a float operand, got " +
                      g.node(x).type.ToString());
  // Checked here, not left to the ops it is made of: an empty operand makes none.
  TM_RETURN_IF_ERROR(Trace::CheckArithmetic(op, g.node(x).type.dtype));
  if (g.node(x).type.rank() == 0)
    return ShapeError(std::string(op) + ": needs rank >= 1, got " + g.node(x).type.ToString());
  if (!(eps >= 0.0))
    return InvalidArgument(std::string(op) + ": eps must be >= 0, got " + std::to_string(eps));
  ValueId mean, d, d2, var, eps_v, var_eps, inv, normed, scaled;
  TM_RETURN_IF_ERROR(ReduceMean(g, op, x, -1, true, &mean));          // (..., 1)
  TM_RETURN_IF_ERROR(Record(g, OpKind::kSub, op, x, mean, &d));         // (..., n)
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, d, d, &d2));
  TM_RETURN_IF_ERROR(ReduceMean(g, op, d2, -1, true, &var));          // (..., 1)
  TM_RETURN_IF_ERROR(Scalar(g, x, eps, &eps_v));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kAdd, op, var, eps_v, &var_eps));
  TM_RETURN_IF_ERROR(g.Unary(OpKind::kRsqrt, op, var_eps, &inv));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, d, inv, &normed));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, normed, gamma, &scaled));
  return Record(g, OpKind::kAdd, op, scaled, beta, out);
}

Status GeluTanh(Trace &g, const char *op, ValueId x, ValueId *out) {
  TM_RETURN_IF_ERROR(g.CheckOpen(op));
  TM_RETURN_IF_ERROR(g.CheckValue(op, x));
  if (!IsFloat(g.node(x).type.dtype))
    return DtypeError(std::string(op) + ": needs a float operand, got " +
                      g.node(x).type.ToString());
  // Checked here, not left to the ops it is made of: an empty operand makes none.
  TM_RETURN_IF_ERROR(Trace::CheckArithmetic(op, g.node(x).type.dtype));
  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
  ValueId x2, x3, c1, t1, inner, c2, arg, th, one, onep, half, hx;
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, x, x, &x2));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, x2, x, &x3));
  TM_RETURN_IF_ERROR(Scalar(g, x, 0.044715, &c1));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, x3, c1, &t1));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kAdd, op, x, t1, &inner));
  TM_RETURN_IF_ERROR(Scalar(g, x, std::sqrt(2.0 / M_PI), &c2));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, inner, c2, &arg));
  TM_RETURN_IF_ERROR(g.Unary(OpKind::kTanh, op, arg, &th));
  TM_RETURN_IF_ERROR(Scalar(g, x, 1.0, &one));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kAdd, op, th, one, &onep));
  TM_RETURN_IF_ERROR(Scalar(g, x, 0.5, &half));
  TM_RETURN_IF_ERROR(Record(g, OpKind::kMul, op, x, half, &hx));
  return Record(g, OpKind::kMul, op, hx, onep, out);
}

}  // namespace tinymlir
