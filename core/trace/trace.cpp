#include "core/trace/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/trace/ops.h"
#include "core/trace/unary_ops.h"

namespace tinymlir {

int64_t TensorType::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::string TensorType::ToString() const {
  return std::string(DtypeName(dtype)) + ShapeToString(shape);
}

const char *OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kInput: return "input";
    case OpKind::kScalar: return "scalar";
    case OpKind::kConstant: return "constant";
    default: break;
  }
  if (const OpRow *row = FindOp(kind)) return row->name.c_str();
  if (const UnaryOp *unary = FindUnaryOp(kind)) return unary->name;
  return "unknown";
}

bool IsElementwise(OpKind kind) {
  switch (kind) {
#define TM_OP(Name, C_ENUMERATOR, c_value, signature, doc, rule, lowering, bound) \
    case OpKind::k##Name: return std::strcmp(#lowering, "Elementwise") == 0 || \
                                 std::strcmp(#lowering, "Cast") == 0;
#include "core/trace/ops.def"
#undef TM_OP
    default: return FindUnaryOp(kind) != nullptr;
  }
}

namespace {

Status CheckShape(const char *op, const Shape &shape) {
  if (shape.size() > kMaxRank)
    return ShapeError(std::string(op) + ": rank " + std::to_string(shape.size()) +
                      " exceeds the maximum of " + std::to_string(kMaxRank));
  for (int64_t d : shape)
    if (d < 0)
      return ShapeError(std::string(op) + ": negative dimension in shape " +
                        ShapeToString(shape));
  return Trace::CheckSize(op, shape);
}

// Whether a scalar value can be represented in an integer dtype (floats always can).
bool ScalarFits(double v, DType dtype) {
  if (dtype == DType::kI32) return v >= -2147483648.0 && v <= 2147483647.0;
  if (dtype == DType::kI64) return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  return true;
}

}  // namespace

Status Trace::CheckSize(const char *op, const Shape &shape) {
  // Every byte count derived from a shape (elements x 8) must fit int64: no later product
  // can overflow then.
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > INT64_MAX / 8)
      return ShapeError(std::string(op) + ": shape " + ShapeToString(shape) +
                        " has too many elements (more than 2^60: its bytes would pass 2^63)");
  return Status::Ok();
}

Status Trace::CheckScalarFits(const char *op, ValueId v, DType dtype) const {
  const Node &n = nodes_[v];
  if (n.kind == OpKind::kScalar && !ScalarFits(n.scalar, dtype))
    return OutOfRange(std::string(op) + ": scalar " + std::to_string(n.scalar) +
                      " does not fit " + DtypeName(dtype));
  return Status::Ok();
}

Status Trace::CheckArithmetic(const char *op, DType dtype) {
  if (!IsHalf(dtype)) return Status::Ok();
  return DtypeError(std::string(op) + ": " + DtypeName(dtype) +
                    " is a storage type; arithmetic on it is not supported (cast to f32 first)");
}

Status Trace::CheckNotQuantized(const char *op, ValueId v) const {
  const TensorType &t = nodes_[v].type;
  if (!IsQuantized(t.dtype)) return Status::Ok();
  return DtypeError(std::string(op) + ": " + t.ToString() +
                    " is block-quantized storage; it can be cast to a float type "
                    "(tm_op_cast), gathered by rows (tm_op_gather) or multiplied "
                    "(tm_op_matmul), nothing else (cast to f32 first)");
}

bool Trace::IsTransposedQuantized(ValueId v) const {
  return IsQuantized(nodes_[v].type.dtype) && nodes_[v].kind == OpKind::kTranspose;
}

ValueId Trace::Add(Node node) {
  nodes_.push_back(std::move(node));
  return static_cast<ValueId>(nodes_.size() - 1);
}

Status Trace::Record(const char *op, Node node, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  for (ValueId v : node.operands) TM_RETURN_IF_ERROR(CheckValue(op, v));
  TM_RETURN_IF_ERROR(CheckSize(op, node.type.shape));
  *out = Add(std::move(node));
  return Status::Ok();
}

Status Trace::CheckOpen(const char *op) const {
  if (ended_)
    return InvalidArgument(std::string(op) + ": trace '" + name_ +
                           "' has already ended; no op can be added");
  // Margin for the few nodes a composite or a promotion adds after this check.
  if (nodes_.size() + 64 >= kMaxTraceValues)
    return InvalidArgument(std::string(op) + ": trace '" + name_ + "' holds " +
                           std::to_string(nodes_.size()) + " values, the most a trace may hold");
  return Status::Ok();
}

Status Trace::CheckValue(const char *op, ValueId v) const {
  if (v == kForeignValue)
    return InvalidArgument(std::string(op) + ": a value that does not come from trace '" +
                           name_ + "' (from another trace, or never returned by one)");
  if (!Has(v))
    return InvalidArgument(std::string(op) + ": value %" + std::to_string(v) +
                           " does not belong to trace '" + name_ + "' (it has " +
                           std::to_string(nodes_.size()) + " values)");
  return Status::Ok();
}

Status Trace::CheckEntryCount(const char *op, ValueId x, const char *what, int64_t n) const {
  TM_RETURN_IF_ERROR(CheckValue(op, x));
  const TensorType &t = nodes_[x].type;
  if (n != t.rank())
    return InvalidArgument(std::string(op) + ": " + what + " " + std::to_string(n) +
                           " entries, " + t.ToString() + " has rank " +
                           std::to_string(t.rank()));
  return Status::Ok();
}

Status Trace::NormalizeAxis(const char *op, int32_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank || rank == 0)
    return OutOfRange(std::string(op) + ": axis " + std::to_string(axis) +
                      " is out of range for rank " + std::to_string(rank));
  *out = axis < 0 ? axis + rank : axis;
  return Status::Ok();
}

ValueId Trace::Convert(ValueId v, DType dtype) {
  const Node &n = nodes_[v];
  if (n.type.dtype == dtype) return v;
  if (n.kind == OpKind::kScalar) {
    // Converted as a cast converts (a narrower float rounds, so that widening it again
    // gives the narrow value, not the original). A scalar as made keeps its value whatever
    // its dtype says, as a Python float does, until an op converts it.
    Node s = n;
    s.type.dtype = dtype;
    if (IsInteger(dtype)) s.scalar = static_cast<double>(static_cast<int64_t>(n.scalar));
    if (dtype == DType::kBool) s.scalar = n.scalar != 0.0 ? 1.0 : 0.0;
    s.scalar = RoundToFloatDtype(s.scalar, dtype);
    return Add(std::move(s));
  }
  Node c;
  c.kind = OpKind::kCast;
  c.type = {dtype, n.type.shape};
  c.operands = {v};
  c.weak = n.weak;
  return Add(std::move(c));
}

Status Trace::BroadcastShapes(const char *op, const Shape &a, const Shape &b,
                              Shape *out) const {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return ShapeError(std::string(op) + ": shapes " + ShapeToString(a) + " and " +
                        ShapeToString(b) + " do not broadcast (dimension " +
                        std::to_string(i) + ": " + std::to_string(da) + " vs " +
                        std::to_string(db) + ")");
    result[i] = da == 1 ? db : da;
  }
  *out = std::move(result);
  return Status::Ok();
}

Status Trace::Input(const char *op, DType dtype, const Shape &shape, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  if (!IsValidDtype(dtype))
    return DtypeError(std::string(op) + ": unknown dtype " + std::to_string(static_cast<int>(dtype)));
  TM_RETURN_IF_ERROR(CheckShape(op, shape));
  if (!TensorType{dtype, shape}.StoresWholeBlocks())
    return ShapeError(std::string(op) + ": a q8_0 tensor holds blocks of " +
                      std::to_string(kQ8BlockElements) +
                      " elements along its last axis, so it needs rank 1 to " +
                      std::to_string(kMaxRank - 1) + " and a last dimension that is a "
                      "multiple of " + std::to_string(kQ8BlockElements) + "; got shape " +
                      ShapeToString(shape));
  Node n;
  n.kind = OpKind::kInput;
  n.type = {dtype, shape};
  n.input_index = static_cast<int32_t>(inputs_.size());
  *out = Add(std::move(n));
  inputs_.push_back(*out);
  return Status::Ok();
}

Status Trace::Scalar(const char *op, DType dtype, double value, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  if (!IsValidDtype(dtype))
    return DtypeError(std::string(op) + ": unknown dtype " + std::to_string(static_cast<int>(dtype)));
  if (IsQuantized(dtype))
    return DtypeError(std::string(op) + ": a scalar cannot be q8_0 (block-quantized storage)");
  if (IsInteger(dtype) && !(std::isfinite(value) && ScalarFits(value, dtype)))
    return OutOfRange(std::string(op) + ": " + std::to_string(value) + " does not fit " +
                      DtypeName(dtype));
  Node n;
  n.kind = OpKind::kScalar;
  n.type = {dtype, {}};
  n.scalar = IsInteger(dtype) ? static_cast<double>(static_cast<int64_t>(value))
             : dtype == DType::kBool ? (value != 0.0 ? 1.0 : 0.0)
                                : value;
  n.weak = true;
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::CheckConstantDtype(const char *op, DType dtype) {
  if (!IsValidDtype(dtype))
    return DtypeError(std::string(op) + ": unknown dtype " +
                      std::to_string(static_cast<int>(dtype)));
  if (IsQuantized(dtype))
    return DtypeError(std::string(op) + ": q8_0 constants are not supported; pass quantized "
                      "weights as program inputs");
  return Status::Ok();
}

Status Trace::Constant(const char *op, DType dtype, const Shape &shape,
                       std::vector<uint8_t> data, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckConstantDtype(op, dtype));
  TM_RETURN_IF_ERROR(CheckShape(op, shape));
  Node n;
  n.kind = OpKind::kConstant;
  n.type = {dtype, shape};
  if (data.size() != static_cast<size_t>(n.type.NumElements()) * DtypeSize(dtype))
    return ShapeError(std::string(op) + ": data size does not match " + n.type.ToString());
  n.data = std::move(data);
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Binary(OpKind kind, BinaryRule rule, const char *op, ValueId a, ValueId b,
                     ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckValue(op, a));
  TM_RETURN_IF_ERROR(CheckValue(op, b));
  TM_RETURN_IF_ERROR(CheckNotQuantized(op, a));
  TM_RETURN_IF_ERROR(CheckNotQuantized(op, b));
  const Node &na = nodes_[a], &nb = nodes_[b];
  Shape shape;
  TM_RETURN_IF_ERROR(BroadcastShapes(op, na.type.shape, nb.type.shape, &shape));
  TM_RETURN_IF_ERROR(CheckSize(op, shape));

  DType dtype;
  if (na.weak && !nb.weak) dtype = PromoteWithWeakScalar(nb.type.dtype, na.type.dtype);
  else if (nb.weak && !na.weak) dtype = PromoteWithWeakScalar(na.type.dtype, nb.type.dtype);
  else dtype = PromoteTypes(na.type.dtype, nb.type.dtype);
  bool weak = na.weak && nb.weak;

  // True division, as NumPy's: integers and bools divide in f64.
  if (rule == BinaryRule::kDivision && !IsFloat(dtype)) dtype = DType::kF64;
  // Other arithmetic on bools is not defined (NumPy rejects bool - bool; bool ** bool
  // would need int8, which tinymlir does not have); comparisons, max/min, + and * are.
  if (dtype == DType::kBool && rule == BinaryRule::kArithmetic)
    return DtypeError(std::string(op) + ": not defined for bool operands " +
                      na.type.ToString() + " and " + nb.type.ToString());
  TM_RETURN_IF_ERROR(CheckArithmetic(op, dtype));
  TM_RETURN_IF_ERROR(CheckScalarFits(op, a, dtype));
  TM_RETURN_IF_ERROR(CheckScalarFits(op, b, dtype));

  ValueId ca = Convert(a, dtype), cb = Convert(b, dtype);
  Node n;
  n.kind = kind;
  n.type = {rule == BinaryRule::kComparison ? DType::kBool : dtype, shape};
  n.operands = {ca, cb};
  n.weak = weak;
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Where(const char *op, ValueId cond, ValueId a, ValueId b, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckValue(op, cond));
  TM_RETURN_IF_ERROR(CheckValue(op, a));
  TM_RETURN_IF_ERROR(CheckValue(op, b));
  TM_RETURN_IF_ERROR(CheckNotQuantized(op, a));
  TM_RETURN_IF_ERROR(CheckNotQuantized(op, b));
  if (nodes_[cond].type.dtype != DType::kBool)
    return DtypeError(std::string(op) + ": condition must be bool, got " +
                      nodes_[cond].type.ToString());
  Shape ab, shape;
  TM_RETURN_IF_ERROR(BroadcastShapes(op, nodes_[a].type.shape, nodes_[b].type.shape, &ab));
  TM_RETURN_IF_ERROR(BroadcastShapes(op, nodes_[cond].type.shape, ab, &shape));
  TM_RETURN_IF_ERROR(CheckSize(op, shape));
  const Node &na = nodes_[a], &nb = nodes_[b];
  DType dtype;
  if (na.weak && !nb.weak) dtype = PromoteWithWeakScalar(nb.type.dtype, na.type.dtype);
  else if (nb.weak && !na.weak) dtype = PromoteWithWeakScalar(na.type.dtype, nb.type.dtype);
  else dtype = PromoteTypes(na.type.dtype, nb.type.dtype);
  TM_RETURN_IF_ERROR(CheckScalarFits(op, a, dtype));
  TM_RETURN_IF_ERROR(CheckScalarFits(op, b, dtype));
  Node n;
  n.kind = OpKind::kWhere;
  n.type = {dtype, shape};
  n.operands = {cond, Convert(a, dtype), Convert(b, dtype)};
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Unary(OpKind kind, const char *op, ValueId x, ValueId *out) {
  const UnaryOp *unary = FindUnaryOp(kind);
  if (!unary) return InvalidArgument(std::string(op) + ": " + OpKindName(kind) + " is not a unary op");
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckValue(op, x));
  TM_RETURN_IF_ERROR(CheckNotQuantized(op, x));
  DType dtype = nodes_[x].type.dtype;
  if (dtype == DType::kBool)
    return DtypeError(std::string(op) + ": not defined for bool operand " +
                      nodes_[x].type.ToString());
  if (unary->rule == UnaryRule::kFloatResult && !IsFloat(dtype)) dtype = DType::kF64;
  TM_RETURN_IF_ERROR(CheckArithmetic(op, dtype));
  ValueId cx = Convert(x, dtype);
  Node n;
  n.kind = kind;
  n.type = {dtype, nodes_[x].type.shape};
  n.operands = {cx};
  n.weak = nodes_[x].weak;
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Cast(const char *op, ValueId x, DType dtype, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckValue(op, x));
  if (!IsValidDtype(dtype))
    return DtypeError(std::string(op) + ": unknown dtype " +
                      std::to_string(static_cast<int>(dtype)));
  if (IsQuantized(dtype) && nodes_[x].type.dtype != dtype)
    return DtypeError(std::string(op) + ": cannot cast " + nodes_[x].type.ToString() +
                      " to q8_0: quantize outside the program (tm_quantize_q8_0) and pass "
                      "the blocks as an input");
  if (IsQuantized(nodes_[x].type.dtype) && nodes_[x].type.dtype != dtype && !IsFloat(dtype))
    return DtypeError(std::string(op) + ": " + nodes_[x].type.ToString() +
                      " dequantizes to a float type (f32, f64, f16, bf16), not " +
                      DtypeName(dtype));
  if (IsTransposedQuantized(x))
    return DtypeError(std::string(op) + ": " + nodes_[x].type.ToString() +
                      " is a transposed q8_0 view, which only a matmul's right operand may "
                      "be; cast before transposing");
  if (nodes_[x].type.dtype == dtype) {
    *out = x;
    if (nodes_[x].weak) {  // an explicit cast fixes the dtype, even to the same one
      Node strong = nodes_[x];
      strong.weak = false;
      *out = Add(std::move(strong));
    }
    return Status::Ok();
  }
  TM_RETURN_IF_ERROR(CheckScalarFits(op, x, dtype));
  *out = Convert(x, dtype);
  nodes_[*out].weak = false;  // an explicit cast fixes the dtype
  return Status::Ok();
}

// A q8_0 operand is dequantized inside the product (the CPU target's kernels read its
// blocks in place), so its blocks must run along the contraction axis: the left operand as
// stored (m, k), the right one as the transposed view of an (n, k) matrix, x @ W^T.
Status Trace::CheckQuantizedMatmul(const char *op, ValueId a, ValueId b) const {
  const TensorType &ta = nodes_[a].type, &tb = nodes_[b].type;
  const bool qa = IsQuantized(ta.dtype), qb = IsQuantized(tb.dtype);
  if (!qa && !qb) return Status::Ok();
  auto operands = [&] { return ta.ToString() + " @ " + tb.ToString(); };
  if (qa && qb)
    return DtypeError(std::string(op) + ": both operands are q8_0 (" + operands() +
                      "); one must be f32");
  const TensorType &other = qa ? tb : ta;
  if (other.dtype != DType::kF32)
    return DtypeError(std::string(op) + ": a q8_0 matrix multiplies an f32 operand, got " +
                      operands());
  if ((qa ? ta : tb).rank() != 2)
    return ShapeError(std::string(op) + ": a q8_0 operand must be a matrix (rank 2), got " +
                      operands());
  if (qa && IsTransposedQuantized(a))
    return DtypeError(std::string(op) + ": the left operand of " + operands() +
                      " is a transposed q8_0 view, whose blocks run along its columns, not "
                      "along the contraction axis; only the right operand may be one");
  if (qb && !IsTransposedQuantized(b))
    return DtypeError(std::string(op) + ": a q8_0 right operand must be the transposed view "
                      "of an (n, k) q8_0 matrix (tm_op_transpose), so that its blocks run "
                      "along the contraction axis; got " + operands());
  return Status::Ok();
}

Status Trace::Matmul(const char *op, ValueId a, ValueId b, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckValue(op, a));
  TM_RETURN_IF_ERROR(CheckValue(op, b));
  Shape sa = nodes_[a].type.shape, sb = nodes_[b].type.shape;
  auto shapes = [&] { return ShapeToString(sa) + " @ " + ShapeToString(sb); };
  if (sa.size() < 2 || sb.size() < 2)
    return ShapeError(std::string(op) + ": operands must have rank >= 2, got " + shapes());
  if (sa.back() != sb[sb.size() - 2])
    return ShapeError(std::string(op) + ": inner dimensions differ in " + shapes() + " (" +
                      std::to_string(sa.back()) + " vs " + std::to_string(sb[sb.size() - 2]) +
                      ")");
  if (sb.size() > 2 && !std::equal(sa.begin(), sa.end() - 2, sb.begin(), sb.end() - 2))
    return ShapeError(std::string(op) + ": batch dimensions differ in " + shapes());
  TM_RETURN_IF_ERROR(CheckQuantizedMatmul(op, a, b));
  DType dtype = PromoteTypes(nodes_[a].type.dtype, nodes_[b].type.dtype);
  if (dtype == DType::kBool)
    return DtypeError(std::string(op) + ": not defined for bool operands");
  TM_RETURN_IF_ERROR(CheckArithmetic(op, dtype));
  ValueId ca = Convert(a, dtype), cb = Convert(b, dtype);

  Shape result(sa.begin(), sa.end() - 1);
  result.push_back(sb.back());
  TM_RETURN_IF_ERROR(CheckSize(op, result));
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();

  auto record = [&](ValueId x, ValueId y, Shape shape) {
    Node node;
    node.kind = OpKind::kMatmul;
    node.type = {dtype, std::move(shape)};
    node.operands = {x, y};
    return Add(std::move(node));
  };
  if (sa.size() == 2 && sb.size() == 2) {
    *out = record(ca, cb, result);
  } else if (sb.size() == 2) {
    // (..., m, k) @ (k, n): fold the leading dims into the rows of one GEMM.
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < sa.size(); ++i) rows *= sa[i];
    ValueId a2, y;
    TM_RETURN_IF_ERROR(Reshape(op, ca, {rows, k}, &a2));
    y = record(a2, cb, {rows, n});
    TM_RETURN_IF_ERROR(Reshape(op, y, result, out));
  } else if (sa.size() == 3) {
    *out = record(ca, cb, result);
  } else {
    // (b1, ..., m, k) @ (b1, ..., k, n): one batch dimension.
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < sa.size(); ++i) batch *= sa[i];
    ValueId a3, b3, y;
    TM_RETURN_IF_ERROR(Reshape(op, ca, {batch, m, k}, &a3));
    TM_RETURN_IF_ERROR(Reshape(op, cb, {batch, k, n}, &b3));
    y = record(a3, b3, {batch, m, n});
    TM_RETURN_IF_ERROR(Reshape(op, y, result, out));
  }
  return Status::Ok();
}

Status Trace::Reduce(OpKind kind, const char *op, ValueId x, int32_t axis, bool keepdims,
                     ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckValue(op, x));
  TM_RETURN_IF_ERROR(CheckNotQuantized(op, x));
  const TensorType &t = nodes_[x].type;
  int ax;
  TM_RETURN_IF_ERROR(NormalizeAxis(op, axis, t.rank(), &ax));
  if (t.dtype == DType::kBool)
    return DtypeError(std::string(op) + ": not defined for bool operand " + t.ToString());
  TM_RETURN_IF_ERROR(CheckArithmetic(op, t.dtype));
  Shape shape = t.shape;
  if (keepdims) shape[ax] = 1;
  else shape.erase(shape.begin() + ax);
  // As NumPy: a maximum over no elements has no value (a sum over none is 0).
  if (kind == OpKind::kReduceMax && t.shape[ax] == 0 && TensorType{t.dtype, shape}.NumElements() > 0)
    return ShapeError(std::string(op) + ": axis " + std::to_string(ax) + " of " + t.ToString() +
                      " is empty, and a maximum over no elements is undefined");
  Node n;
  n.kind = kind;
  n.type = {t.dtype, shape};
  n.operands = {x};
  n.ints = {ax, keepdims ? 1 : 0};
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Reshape(const char *op, ValueId x, const Shape &requested, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckValue(op, x));
  TM_RETURN_IF_ERROR(CheckNotQuantized(op, x));
  const TensorType &t = nodes_[x].type;
  if (requested.size() > kMaxRank)
    return ShapeError(std::string(op) + ": rank " + std::to_string(requested.size()) +
                      " exceeds the maximum of " + std::to_string(kMaxRank));
  Shape shape = requested;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0)
        return ShapeError(std::string(op) + ": more than one -1 in " + ShapeToString(shape));
      inferred = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return ShapeError(std::string(op) + ": negative dimension in " + ShapeToString(shape));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      return ShapeError(std::string(op) + ": shape " + ShapeToString(requested) +
                        " has too many elements");
    }
  }
  int64_t total = t.NumElements();
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return ShapeError(std::string(op) + ": cannot reshape " + ShapeToString(t.shape) +
                        " (" + std::to_string(total) + " elements) to " +
                        ShapeToString(requested));
    shape[inferred] = total / known;
  }
  if (TensorType{t.dtype, shape}.NumElements() != total)
    return ShapeError(std::string(op) + ": cannot reshape " + ShapeToString(t.shape) + " (" +
                      std::to_string(total) + " elements) to " + ShapeToString(requested));
  if (shape == t.shape) {
    *out = x;
    return Status::Ok();
  }
  Node n;
  n.kind = OpKind::kReshape;
  n.type = {t.dtype, shape};
  n.operands = {x};
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Transpose(const char *op, ValueId x, const std::vector<int64_t> &perm,
                        ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckEntryCount(op, x, "perm has", static_cast<int64_t>(perm.size())));
  const TensorType &t = nodes_[x].type;
  // Negative entries count from the end, as NumPy's (and as reduction axes).
  std::vector<int64_t> axes(perm);
  std::vector<bool> seen(t.rank(), false);
  Shape shape(t.rank());
  for (int i = 0; i < t.rank(); ++i) {
    int64_t p = axes[i] < 0 && axes[i] >= -t.rank() ? axes[i] + t.rank() : axes[i];
    if (p < 0 || p >= t.rank() || seen[p])
      return OutOfRange(std::string(op) + ": perm is not a permutation of the " +
                        std::to_string(t.rank()) + " axes of " + t.ToString());
    seen[p] = true;
    axes[i] = p;
    shape[i] = t.shape[p];
  }
  bool identity = true;
  for (int i = 0; i < t.rank(); ++i) identity &= axes[i] == i;
  if (IsQuantized(t.dtype) && !identity && (t.rank() != 2 || IsTransposedQuantized(x)))
    return DtypeError(std::string(op) + ": " + t.ToString() +
                      " is q8_0: only a q8_0 matrix (rank 2, as stored) can be transposed, "
                      "into the view a matmul takes as its right operand");
  if (identity) {
    *out = x;
    return Status::Ok();
  }
  Node n;
  n.kind = OpKind::kTranspose;
  n.type = {t.dtype, shape};
  n.operands = {x};
  n.ints = std::move(axes);
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Slice(const char *op, ValueId x, const Shape &begin, const Shape &end,
                    ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  if (begin.size() != end.size())
    return InvalidArgument(std::string(op) + ": begin and end have " +
                           std::to_string(begin.size()) + " and " +
                           std::to_string(end.size()) + " entries");
  TM_RETURN_IF_ERROR(
      CheckEntryCount(op, x, "begin and end have", static_cast<int64_t>(begin.size())));
  TM_RETURN_IF_ERROR(CheckNotQuantized(op, x));
  const TensorType &t = nodes_[x].type;
  Shape shape(t.rank());
  for (int i = 0; i < t.rank(); ++i) {
    if (begin[i] < 0 || begin[i] > end[i] || end[i] > t.shape[i])
      return OutOfRange(std::string(op) + ": slice [" + std::to_string(begin[i]) + ":" +
                        std::to_string(end[i]) + "] is out of range for dimension " +
                        std::to_string(i) + " of " + t.ToString());
    shape[i] = end[i] - begin[i];
  }
  if (shape == t.shape) {
    *out = x;
    return Status::Ok();
  }
  Node n;
  n.kind = OpKind::kSlice;
  n.type = {t.dtype, shape};
  n.operands = {x};
  n.ints = begin;
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Concat(const char *op, const std::vector<ValueId> &xs, int32_t axis,
                     ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  if (xs.empty()) return InvalidArgument(std::string(op) + ": needs at least one value");
  for (ValueId v : xs) TM_RETURN_IF_ERROR(CheckValue(op, v));
  for (ValueId v : xs) TM_RETURN_IF_ERROR(CheckNotQuantized(op, v));
  const TensorType &first = nodes_[xs[0]].type;
  int ax;
  TM_RETURN_IF_ERROR(NormalizeAxis(op, axis, first.rank(), &ax));
  Shape shape = first.shape;
  DType dtype = first.dtype;
  shape[ax] = 0;
  for (ValueId v : xs) {
    const TensorType &t = nodes_[v].type;
    bool agree = t.rank() == first.rank();
    for (int i = 0; agree && i < t.rank(); ++i) agree = i == ax || t.shape[i] == first.shape[i];
    if (!agree)
      return ShapeError(std::string(op) + ": shapes " + ShapeToString(first.shape) + " and " +
                        ShapeToString(t.shape) + " differ outside axis " +
                        std::to_string(ax));
    if (__builtin_add_overflow(shape[ax], t.shape[ax], &shape[ax]))
      return ShapeError(std::string(op) + ": the result would have more than 2^63 elements "
                        "along axis " + std::to_string(ax));
    dtype = PromoteTypes(dtype, t.dtype);
  }
  TM_RETURN_IF_ERROR(CheckSize(op, shape));
  if (xs.size() == 1) {
    *out = xs[0];
    return Status::Ok();
  }
  Node n;
  n.kind = OpKind::kConcat;
  n.type = {dtype, shape};
  for (ValueId v : xs) n.operands.push_back(Convert(v, dtype));
  n.ints = {ax};
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::Gather(const char *op, ValueId table, ValueId indices, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  TM_RETURN_IF_ERROR(CheckValue(op, table));
  TM_RETURN_IF_ERROR(CheckValue(op, indices));
  const TensorType &tt = nodes_[table].type, &it = nodes_[indices].type;
  if (!IsInteger(it.dtype))
    return DtypeError(std::string(op) + ": indices must be i32 or i64, got " + it.ToString() +
                      " (table " + tt.ToString() + ")");
  if (IsQuantized(tt.dtype) && (tt.rank() < 2 || IsTransposedQuantized(table)))
    return ShapeError(std::string(op) + ": a q8_0 table is gathered by whole rows of blocks: "
                      "it must be stored (not a transposed view) with rank >= 2, got " +
                      tt.ToString());
  // A table with no rows can only be indexed by no indices (the result is then empty).
  if (tt.rank() == 0 || (tt.shape[0] == 0 && it.NumElements() > 0))
    return ShapeError(std::string(op) + ": table must have rank >= 1 and at least one row, got " +
                      tt.ToString() + " for indices " + it.ToString());
  Shape shape = it.shape;
  shape.insert(shape.end(), tt.shape.begin() + 1, tt.shape.end());
  if (shape.size() > kMaxRank)
    return ShapeError(std::string(op) + ": result rank " + std::to_string(shape.size()) +
                      " exceeds the maximum of " + std::to_string(kMaxRank));
  TM_RETURN_IF_ERROR(CheckSize(op, shape));
  Node n;
  n.kind = OpKind::kGather;
  n.type = {tt.dtype, shape};
  n.operands = {table, indices};
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::TriangularMask(OpKind kind, const char *op, int64_t rows, int64_t cols,
                             int64_t offset, DType dtype, ValueId *out) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  if (rows < 0 || cols < 0)
    return ShapeError(std::string(op) + ": negative size (" + std::to_string(rows) + ", " +
                      std::to_string(cols) + ")");
  if (!IsValidDtype(dtype) || !IsFloat(dtype) || IsHalf(dtype))
    return DtypeError(std::string(op) + ": dtype must be f32 or f64");
  TM_RETURN_IF_ERROR(CheckSize(op, {rows, cols}));
  Node n;
  n.kind = kind;
  n.type = {dtype, {rows, cols}};
  // Offsets beyond [-rows, cols] change nothing (all hidden / all visible); clamping keeps
  // row + offset from overflowing in the generated code and makes equal masks equal.
  n.ints = {std::clamp(offset, -rows, cols)};
  *out = Add(std::move(n));
  return Status::Ok();
}

Status Trace::End(const char *op, const std::vector<ValueId> &outputs) {
  TM_RETURN_IF_ERROR(CheckOpen(op));
  if (outputs.empty())
    return InvalidArgument(std::string(op) + ": a program needs at least one output");
  for (ValueId v : outputs) TM_RETURN_IF_ERROR(CheckValue(op, v));
  for (ValueId v : outputs)
    if (IsQuantized(nodes_[v].type.dtype))
      return DtypeError(std::string(op) + ": an output cannot be " + nodes_[v].type.ToString() +
                        "; q8_0 is an input storage type (cast the output to a float type)");
  outputs_ = outputs;
  ended_ = true;
  return Status::Ok();
}

std::vector<bool> Trace::Live() const {
  std::vector<bool> live(nodes_.size(), false);
  for (ValueId o : outputs_) live[o] = true;
  for (size_t i = nodes_.size(); i-- > 0;)
    if (live[i])
      for (ValueId op : nodes_[i].operands) live[op] = true;
  return live;
}

std::string Trace::Fingerprint() const {
  // Binary, length-prefixed fields: unambiguous and cheap to compare.
  std::string s;
  auto put = [&s](const void *p, size_t n) { s.append(static_cast<const char *>(p), n); };
  auto put64 = [&](int64_t v) { put(&v, sizeof v); };
  put64(static_cast<int64_t>(nodes_.size()));
  for (const Node &n : nodes_) {
    put64(static_cast<int64_t>(n.kind));
    put64(static_cast<int64_t>(n.type.dtype));
    put64(n.type.rank());
    for (int64_t d : n.type.shape) put64(d);
    put64(static_cast<int64_t>(n.operands.size()));
    for (ValueId v : n.operands) put64(v);
    put64(static_cast<int64_t>(n.ints.size()));
    for (int64_t v : n.ints) put64(v);
    put(&n.scalar, sizeof n.scalar);
    put64(n.weak);
    put64(n.input_index);
    // A constant enters the key as its size and a 128-bit hash, not its bytes: a key the
    // size of a large constant would be kept (and compared) for the life of the cache.
    put64(static_cast<int64_t>(n.data.size()));
    if (!n.data.empty()) {
      uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
      for (uint8_t byte : n.data) {
        h1 = (h1 ^ byte) * 0x100000001b3ull;
        h2 = (h2 ^ byte) * 0x00000100000001b3ull + 0x9e3779b97f4a7c15ull;
      }
      put64(static_cast<int64_t>(h1));
      put64(static_cast<int64_t>(h2));
    }
  }
  put64(static_cast<int64_t>(outputs_.size()));
  for (ValueId v : outputs_) put64(v);
  return s;
}

}  // namespace tinymlir
