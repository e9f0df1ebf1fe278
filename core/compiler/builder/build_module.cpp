#include "core/compiler/builder/build_module.h"

#include <cstring>
#include <limits>

#include "core/compiler/builder/elementwise_math.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace tinymlir {
namespace {

using mlir::AffineMap;
using mlir::Location;
using mlir::OpBuilder;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;
using IteratorType = mlir::utils::IteratorType;

class ModuleBuilder {
 public:
  ModuleBuilder(const Trace &trace, const std::vector<bool> &live, mlir::MLIRContext &ctx)
      : graph_(trace), live_(live), ctx_(ctx), b_(&ctx), loc_(mlir::UnknownLoc::get(&ctx)) {}

  Status Build(mlir::OwningOpRef<mlir::ModuleOp> *out);

 private:
  Type ElementType(DType d) const;
  mlir::RankedTensorType TensorTypeOf(const TensorType &t) const;
  mlir::MemRefType MemRefTypeOf(const TensorType &t) const;

  Status Emit(ValueId id);
  Value Get(ValueId id);  // the tensor for a value (scalars materialise lazily)
  Value ScalarConstant(OpBuilder &b, DType dtype, double v) const;
  Value CastScalar(OpBuilder &b, Value x, DType from, DType to) const;
  Value SaturatingFloatToInt(OpBuilder &b, Value x, DType from, DType to) const;
  Value RoundToBF16(OpBuilder &b, Value x) const;
  Value Empty(const TensorType &t);
  Value Filled(const TensorType &t, double v);
  Value Collapse(Value v, const Shape &shape, const std::vector<bool> &keep);
  Value ReshapeTo(Value v, const Shape &from, const Shape &to);

  // The lowerings of ops.def's rows (its lowering column), and the constants'.
  Value LowerElementwise(const Node &n);
  Value LowerCast(const Node &n);
  Value LowerMatmul(const Node &n);
  Value LowerReduce(const Node &n);
  Value LowerArgMax(const Node &n);
  Value LowerReshape(const Node &n);
  Value LowerTranspose(const Node &n);
  Value LowerSlice(const Node &n);
  Value LowerConcat(const Node &n);
  Value LowerGather(const Node &n);
  Value LowerCausalMask(const Node &n);
  Value LowerExpanded(const Node &n);
  Value LowerDequantize(const Node &n);
  Value LowerConstant(const Node &n);
  Value ElementwiseBody(OpBuilder &b, const Node &n, llvm::SmallVector<Value> args) const;

  const Trace &graph_;
  const std::vector<bool> &live_;
  mlir::MLIRContext &ctx_;
  mutable OpBuilder b_;  // type getters are non-const
  Location loc_;
  std::vector<Value> values_;  // per trace value, once emitted
};

Type ModuleBuilder::ElementType(DType d) const {
  switch (d) {
    case DType::kF32: return b_.getF32Type();
    case DType::kF64: return b_.getF64Type();
    case DType::kI32: return b_.getI32Type();
    case DType::kI64: return b_.getI64Type();
    case DType::kBool: return b_.getI1Type();
    case DType::kF16: return b_.getF16Type();
    case DType::kBF16: return b_.getBF16Type();
    case DType::kQ8_0: return b_.getI8Type();  // the bytes of its blocks
  }
  return {};
}

// A q8_0 tensor (..., k) is held as its bytes, (..., k / 32, 34) i8: the blocks, each a
// binary16 scale (bytes 0 and 1, little-endian) then 32 int8 values.
Shape StorageShape(const TensorType &t) {
  if (!IsQuantized(t.dtype)) return t.shape;
  Shape s = t.shape;
  s.back() /= kQ8BlockElements;
  s.push_back(kQ8BlockBytes);
  return s;
}

mlir::RankedTensorType ModuleBuilder::TensorTypeOf(const TensorType &t) const {
  return mlir::RankedTensorType::get(StorageShape(t), ElementType(t.dtype));
}

mlir::MemRefType ModuleBuilder::MemRefTypeOf(const TensorType &t) const {
  return mlir::MemRefType::get(StorageShape(t), ElementType(t.dtype));
}

Value ModuleBuilder::ScalarConstant(OpBuilder &b, DType dtype, double v) const {
  Type et = ElementType(dtype);
  if (IsFloat(dtype)) return mlir::arith::ConstantOp::create(b, loc_, b.getFloatAttr(et, v));
  return mlir::arith::ConstantOp::create(b, loc_,
                                         b.getIntegerAttr(et, static_cast<int64_t>(v)));
}

Value ModuleBuilder::Empty(const TensorType &t) {
  return mlir::tensor::EmptyOp::create(b_, loc_, StorageShape(t), ElementType(t.dtype));
}

Value ModuleBuilder::Filled(const TensorType &t, double v) {
  Value c = ScalarConstant(b_, t.dtype, v);
  return mlir::linalg::FillOp::create(b_, loc_, ValueRange{c}, ValueRange{Empty(t)})
      .getResult(0);
}

// Drops the dims of `v` whose keep[] is false (all of size 1): unit dims are grouped with
// a neighbouring kept dim, so the result is a plain collapse_shape.
Value ModuleBuilder::Collapse(Value v, const Shape &shape, const std::vector<bool> &keep) {
  llvm::SmallVector<mlir::ReassociationIndices> groups;
  mlir::ReassociationIndices current;
  Shape result;
  for (size_t i = 0; i < shape.size(); ++i) {
    current.push_back(static_cast<int64_t>(i));
    if (keep[i]) {
      groups.push_back(current);
      current.clear();
      result.push_back(shape[i]);
    }
  }
  if (result.size() == shape.size()) return v;
  if (!current.empty() && !groups.empty()) groups.back().append(current.begin(), current.end());
  auto type = mlir::RankedTensorType::get(
      result, mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType());
  return mlir::tensor::CollapseShapeOp::create(b_, loc_, type, v, groups);
}

// A reshape as collapse-to-1-D then expand; both are views after bufferization.
Value ModuleBuilder::ReshapeTo(Value v, const Shape &from, const Shape &to) {
  Type et = mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
  int64_t n = 1;
  for (int64_t d : from) n *= d;
  auto all = [](size_t rank) {
    mlir::ReassociationIndices g;
    for (size_t i = 0; i < rank; ++i) g.push_back(static_cast<int64_t>(i));
    return llvm::SmallVector<mlir::ReassociationIndices>{g};
  };
  Value flat = v;
  Shape flat_shape = {n};
  if (from.empty() || to.empty()) {
    // Rank 0 <-> all-ones shape: an empty reassociation, no 1-D step.
    auto type = mlir::RankedTensorType::get(to, et);
    if (from.empty())
      return mlir::tensor::ExpandShapeOp::create(b_, loc_, type, v,
                                                 llvm::ArrayRef<mlir::ReassociationIndices>{});
    return mlir::tensor::CollapseShapeOp::create(b_, loc_, type, v,
                                                 llvm::ArrayRef<mlir::ReassociationIndices>{});
  }
  if (from.size() != 1)
    flat = mlir::tensor::CollapseShapeOp::create(
        b_, loc_, mlir::RankedTensorType::get(flat_shape, et), v, all(from.size()));
  if (to.size() == 1) return flat;
  return mlir::tensor::ExpandShapeOp::create(b_, loc_, mlir::RankedTensorType::get(to, et), flat,
                                             all(to.size()));
}

Value ModuleBuilder::Get(ValueId id) {
  if (!values_[id]) {
    // Only scalars reach here unmaterialised: a rank-0 constant tensor.
    const Node &n = graph_.node(id);
    auto type = TensorTypeOf(n.type);
    mlir::Attribute attr;
    // The element C++ type must match the tensor's (a double for f32 would be misread).
    if (IsFloat(n.type.dtype))  // rounded to the element type by its semantics
      attr = mlir::DenseElementsAttr::get(
          type, llvm::ArrayRef<mlir::Attribute>{b_.getFloatAttr(type.getElementType(), n.scalar)});
    else if (n.type.dtype == DType::kBool) attr = mlir::DenseElementsAttr::get(type, n.scalar != 0.0);
    else
      attr = mlir::DenseElementsAttr::get(
          type, llvm::APInt(ElementType(n.type.dtype).getIntOrFloatBitWidth(),
                            static_cast<uint64_t>(static_cast<int64_t>(n.scalar)), true));
    values_[id] = mlir::arith::ConstantOp::create(b_, loc_, mlir::cast<mlir::TypedAttr>(attr));
  }
  return values_[id];
}

// One element converted between the non-half dtypes (floats to ints truncate toward zero and
// saturate, NaN to 0; to bool is "!= 0").
Value ModuleBuilder::CastScalar(OpBuilder &b, Value x, DType from, DType to) const {
  namespace arith = mlir::arith;
  Type et = ElementType(to);
  const bool f = IsFloat(from), boolean = from == DType::kBool;
  if (from == to) return x;
  if (to == DType::kBool) {  // x != 0
    if (f) return arith::CmpFOp::create(b, loc_, arith::CmpFPredicate::UNE, x,
                                        ScalarConstant(b, from, 0.0));
    return arith::CmpIOp::create(b, loc_, arith::CmpIPredicate::ne, x,
                                 ScalarConstant(b, from, 0.0));
  }
  if (IsFloat(to)) {
    if (f) return DtypeSize(to) > DtypeSize(from) ? Value(arith::ExtFOp::create(b, loc_, et, x))
                                                  : Value(arith::TruncFOp::create(b, loc_, et, x));
    if (boolean) return arith::UIToFPOp::create(b, loc_, et, x);
    return arith::SIToFPOp::create(b, loc_, et, x);
  }
  if (f) return SaturatingFloatToInt(b, x, from, to);
  if (boolean) return arith::ExtUIOp::create(b, loc_, et, x);
  if (DtypeSize(to) > DtypeSize(from)) return arith::ExtSIOp::create(b, loc_, et, x);
  return arith::TruncIOp::create(b, loc_, et, x);
}

// A float (f32 or f64) to i32 or i64, truncated toward zero, saturating: NaN gives 0, values
// beyond the type's range its minimum or maximum. arith.fptosi of a value out of range is
// poison, which constant folding turned into whatever bytes it found (a cast of a NaN or
// 1e10 constant gave a different garbage integer on every run) and the CPU into INT_MIN; so
// fptosi only ever sees values in range. The bounds -2^(n-1) and 2^(n-1) are exact in f32.
Value ModuleBuilder::SaturatingFloatToInt(OpBuilder &b, Value x, DType from, DType to) const {
  namespace arith = mlir::arith;
  const double limit = DtypeSize(to) == 8 ? 0x1p63 : 0x1p31;  // 2^(n-1)
  Value is_nan = arith::CmpFOp::create(b, loc_, arith::CmpFPredicate::UNO, x, x);
  Value too_big =
      arith::CmpFOp::create(b, loc_, arith::CmpFPredicate::OGE, x, ScalarConstant(b, from, limit));
  Value too_small = arith::CmpFOp::create(b, loc_, arith::CmpFPredicate::OLT, x,
                                          ScalarConstant(b, from, -limit));
  Value outside = arith::OrIOp::create(b, loc_, is_nan,
                                       arith::OrIOp::create(b, loc_, too_big, too_small));
  Value in_range = arith::SelectOp::create(b, loc_, outside, ScalarConstant(b, from, 0.0), x);
  Value r = arith::FPToSIOp::create(b, loc_, ElementType(to), in_range);
  const int64_t max = DtypeSize(to) == 8 ? INT64_MAX : INT32_MAX;
  const int64_t min = DtypeSize(to) == 8 ? INT64_MIN : INT32_MIN;
  Type et = ElementType(to);
  auto int_constant = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc_, b.getIntegerAttr(et, v));
  };
  r = arith::SelectOp::create(b, loc_, too_big, int_constant(max), r);
  return arith::SelectOp::create(b, loc_, too_small, int_constant(min), r);
}

// f32 -> bf16, rounded to nearest even in integer arithmetic (LLVM would call
// __truncsfbf2, which the runtime symbol table does not have): bits + 0x7fff + (bit 16), top half kept;
// a NaN stays a quiet NaN of its sign.
Value ModuleBuilder::RoundToBF16(OpBuilder &b, Value x) const {
  namespace arith = mlir::arith;
  Type i32 = b.getI32Type(), i16 = b.getIntegerType(16);
  auto c = [&](int64_t v) { return arith::ConstantOp::create(b, loc_, b.getIntegerAttr(i32, v)); };
  Value bits = arith::BitcastOp::create(b, loc_, i32, x);
  Value lsb = arith::AndIOp::create(b, loc_, arith::ShRUIOp::create(b, loc_, bits, c(16)), c(1));
  Value rounded = arith::AddIOp::create(b, loc_, bits,
                                        arith::AddIOp::create(b, loc_, lsb, c(0x7fff)));
  Value is_nan = arith::CmpFOp::create(b, loc_, arith::CmpFPredicate::UNO, x, x);
  Value quiet = arith::OrIOp::create(b, loc_, bits, c(0x00400000));
  Value chosen = arith::SelectOp::create(b, loc_, is_nan, quiet, rounded);
  Value top = arith::TruncIOp::create(b, loc_, i16, arith::ShRUIOp::create(b, loc_, chosen, c(16)));
  return arith::BitcastOp::create(b, loc_, b.getBF16Type(), top);
}

Value ModuleBuilder::ElementwiseBody(OpBuilder &b, const Node &n,
                                     llvm::SmallVector<Value> a) const {
  namespace arith = mlir::arith;
  namespace math = mlir::math;
  DType operand = graph_.node(n.operands.back()).type.dtype;
  bool f = IsFloat(operand), boolean = operand == DType::kBool;
  switch (n.kind) {
    case OpKind::kAdd:
      if (f) return arith::AddFOp::create(b, loc_, a[0], a[1]);
      if (boolean) return arith::OrIOp::create(b, loc_, a[0], a[1]);
      return arith::AddIOp::create(b, loc_, a[0], a[1]);
    case OpKind::kSub:
      if (f) return arith::SubFOp::create(b, loc_, a[0], a[1]);
      return arith::SubIOp::create(b, loc_, a[0], a[1]);
    case OpKind::kMul:
      if (f) return arith::MulFOp::create(b, loc_, a[0], a[1]);
      if (boolean) return arith::AndIOp::create(b, loc_, a[0], a[1]);
      return arith::MulIOp::create(b, loc_, a[0], a[1]);
    case OpKind::kDiv: return arith::DivFOp::create(b, loc_, a[0], a[1]);
    case OpKind::kPow: {
      if (f) return math::PowFOp::create(b, loc_, a[0], a[1]);
      // Integers: a negative exponent gives 1 / x^n truncated toward zero, i.e. 1 for
      // x = 1, +-1 for x = -1 and 0 for every other x (0 included), as tinymlir.h states;
      // math.ipowi leaves that case to its lowering.
      Type t = a[0].getType();
      auto c = [&](int64_t v) { return arith::ConstantOp::create(b, loc_, b.getIntegerAttr(t, v)); };
      Value zero = c(0), one = c(1), minus_one = c(-1);
      Value positive_power = math::IPowIOp::create(b, loc_, a[0], a[1]);
      Value odd = arith::CmpIOp::create(b, loc_, arith::CmpIPredicate::ne,
                                        arith::AndIOp::create(b, loc_, a[1], one), zero);
      Value of_minus_one = arith::SelectOp::create(b, loc_, odd, minus_one, one);
      Value is_one = arith::CmpIOp::create(b, loc_, arith::CmpIPredicate::eq, a[0], one);
      Value is_minus_one = arith::CmpIOp::create(b, loc_, arith::CmpIPredicate::eq, a[0], minus_one);
      Value reciprocal = arith::SelectOp::create(
          b, loc_, is_one, one, arith::SelectOp::create(b, loc_, is_minus_one, of_minus_one, zero));
      Value negative = arith::CmpIOp::create(b, loc_, arith::CmpIPredicate::slt, a[1], zero);
      return arith::SelectOp::create(b, loc_, negative, reciprocal, positive_power);
    }
    case OpKind::kMaximum:
      if (f) return arith::MaximumFOp::create(b, loc_, a[0], a[1]);
      if (boolean) return arith::OrIOp::create(b, loc_, a[0], a[1]);
      return arith::MaxSIOp::create(b, loc_, a[0], a[1]);
    case OpKind::kMinimum:
      if (f) return arith::MinimumFOp::create(b, loc_, a[0], a[1]);
      if (boolean) return arith::AndIOp::create(b, loc_, a[0], a[1]);
      return arith::MinSIOp::create(b, loc_, a[0], a[1]);
    case OpKind::kLess:
      if (f) return arith::CmpFOp::create(b, loc_, arith::CmpFPredicate::OLT, a[0], a[1]);
      return arith::CmpIOp::create(
          b, loc_, boolean ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt, a[0], a[1]);
    case OpKind::kGreater:
      if (f) return arith::CmpFOp::create(b, loc_, arith::CmpFPredicate::OGT, a[0], a[1]);
      return arith::CmpIOp::create(
          b, loc_, boolean ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt, a[0], a[1]);
    case OpKind::kEqual:
      if (f) return arith::CmpFOp::create(b, loc_, arith::CmpFPredicate::OEQ, a[0], a[1]);
      return arith::CmpIOp::create(b, loc_, arith::CmpIPredicate::eq, a[0], a[1]);
    case OpKind::kWhere: return arith::SelectOp::create(b, loc_, a[0], a[1], a[2]);
    // The unary ops: each entry's lowering expression (core/trace/unary_ops.def).
#define TM_UNARY_OP(Name, C_ENUMERATOR, c_value, name, rule, ulps_f32, ulps_f64, domain, \
                    reference, lowering)                                                 \
    case OpKind::k##Name: {                                                              \
      ElementwiseMath m(b, loc_, a[0].getType());                                        \
      const Value x = a[0];                                                              \
      return lowering;                                                                   \
    }
#include "core/trace/unary_ops.def"
#undef TM_UNARY_OP
    case OpKind::kCast: {
      DType to = n.type.dtype;
      Value x = a[0];
      // Half precision converts through f32: widening is exact, and LLVM lowers f32 <->
      // f16 inline (F16C), where f64 or integers <-> f16 and any truncation to bf16 would
      // be calls into a compiler runtime the runtime symbol table does not have.
      if (IsHalf(operand)) {
        x = arith::ExtFOp::create(b, loc_, b.getF32Type(), x);
        operand = DType::kF32;
        if (to == DType::kF32) return x;
      }
      if (IsHalf(to)) {
        if (operand != DType::kF32) x = CastScalar(b, x, operand, DType::kF32);
        if (to == DType::kF16) return arith::TruncFOp::create(b, loc_, b.getF16Type(), x);
        return RoundToBF16(b, x);
      }
      return CastScalar(b, x, operand, to);
    }
    default: break;
  }
  return {};
}

Value ModuleBuilder::LowerElementwise(const Node &n) {
  const Shape &out_shape = n.type.shape;
  size_t rank = out_shape.size();
  llvm::SmallVector<Value> inputs;
  llvm::SmallVector<AffineMap> maps;
  // Per operand: its position among the generic's inputs, or -1 for an inlined scalar.
  std::vector<int> slot;
  for (ValueId op : n.operands) {
    const Node &on = graph_.node(op);
    if (on.kind == OpKind::kScalar) {
      slot.push_back(-1);
      continue;
    }
    const Shape &s = on.type.shape;
    size_t offset = rank - s.size();
    std::vector<bool> keep(s.size());
    llvm::SmallVector<mlir::AffineExpr> exprs;
    for (size_t j = 0; j < s.size(); ++j) {
      keep[j] = !(s[j] == 1 && out_shape[j + offset] != 1);  // broadcast dims are dropped
      if (keep[j]) exprs.push_back(b_.getAffineDimExpr(static_cast<unsigned>(j + offset)));
    }
    slot.push_back(static_cast<int>(inputs.size()));
    inputs.push_back(Collapse(Get(op), s, keep));
    maps.push_back(AffineMap::get(static_cast<unsigned>(rank), 0, exprs, &ctx_));
  }
  maps.push_back(b_.getMultiDimIdentityMap(static_cast<unsigned>(rank)));
  llvm::SmallVector<IteratorType> iters(rank, IteratorType::parallel);
  auto generic = mlir::linalg::GenericOp::create(
      b_, loc_, mlir::TypeRange{TensorTypeOf(n.type)}, inputs, ValueRange{Empty(n.type)}, maps,
      iters, [&](OpBuilder &b, Location, ValueRange args) {
        llvm::SmallVector<Value> a;
        for (size_t i = 0; i < n.operands.size(); ++i) {
          const Node &on = graph_.node(n.operands[i]);
          a.push_back(slot[i] < 0 ? ScalarConstant(b, on.type.dtype, on.scalar)
                                  : args[slot[i]]);
        }
        mlir::linalg::YieldOp::create(b, loc_, ElementwiseBody(b, n, a));
      });
  return generic.getResult(0);
}

Value ModuleBuilder::LowerMatmul(const Node &n) {
  Value a = Get(n.operands[0]), b = Get(n.operands[1]);
  Value init = Filled(n.type, 0.0);
  if (n.type.rank() == 2)
    return mlir::linalg::MatmulOp::create(b_, loc_, ValueRange{a, b}, ValueRange{init})
        .getResult(0);
  return mlir::linalg::BatchMatmulOp::create(b_, loc_, ValueRange{a, b}, ValueRange{init})
      .getResult(0);
}

Value ModuleBuilder::LowerReduce(const Node &n) {
  const TensorType &in = graph_.node(n.operands[0]).type;
  int64_t axis = n.ints[0];
  bool keepdims = n.ints[1] != 0;
  TensorType reduced{n.type.dtype, in.shape};
  reduced.shape.erase(reduced.shape.begin() + axis);
  bool is_max = n.kind == OpKind::kReduceMax;
  bool f = IsFloat(n.type.dtype);
  double identity = 0.0;
  if (is_max)
    identity = f ? -std::numeric_limits<double>::infinity()
                 : static_cast<double>(n.type.dtype == DType::kI32
                                           ? std::numeric_limits<int32_t>::min()
                                           : std::numeric_limits<int64_t>::min());
  Value init = Filled(reduced, identity);
  auto reduce = mlir::linalg::ReduceOp::create(
      b_, loc_, ValueRange{Get(n.operands[0])}, ValueRange{init},
      llvm::ArrayRef<int64_t>{axis}, [&](OpBuilder &b, Location, ValueRange args) {
        Value r;
        if (is_max)
          r = f ? Value(mlir::arith::MaximumFOp::create(b, loc_, args[0], args[1]))
                : Value(mlir::arith::MaxSIOp::create(b, loc_, args[0], args[1]));
        else
          r = f ? Value(mlir::arith::AddFOp::create(b, loc_, args[0], args[1]))
                : Value(mlir::arith::AddIOp::create(b, loc_, args[0], args[1]));
        mlir::linalg::YieldOp::create(b, loc_, r);
      });
  Value result = reduce.getResult(0);
  if (!keepdims) return result;
  return ReshapeTo(result, reduced.shape, n.type.shape);
}

// One linalg.generic reducing the axis into two results, the largest value so far and its
// index: an element replaces them when it is larger, or a NaN where the value is not (so
// the first NaN stays); equal ones never do (so the first stays). The value starts at the
// dtype's lowest (floats: -inf; bools compare unsigned), the index at 0, which a row of
// lowest values keeps.
Value ModuleBuilder::LowerArgMax(const Node &n) {
  const TensorType &in = graph_.node(n.operands[0]).type;
  const int64_t axis = n.ints[0], rank = in.rank();
  TensorType reduced{DType::kI64, in.shape};
  reduced.shape.erase(reduced.shape.begin() + axis);
  const bool f = IsFloat(in.dtype);
  double lowest = 0.0;
  if (f) lowest = -std::numeric_limits<double>::infinity();
  else if (in.dtype == DType::kI32) lowest = std::numeric_limits<int32_t>::min();
  else if (in.dtype == DType::kI64) lowest = static_cast<double>(std::numeric_limits<int64_t>::min());
  Value best = Filled(TensorType{in.dtype, reduced.shape}, lowest);
  Value index = Filled(reduced, 0.0);
  llvm::SmallVector<mlir::AffineExpr> kept;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) kept.push_back(b_.getAffineDimExpr(static_cast<unsigned>(d)));
  const AffineMap out_map = AffineMap::get(static_cast<unsigned>(rank), 0, kept, &ctx_);
  llvm::SmallVector<AffineMap> maps = {b_.getMultiDimIdentityMap(static_cast<unsigned>(rank)),
                                       out_map, out_map};
  llvm::SmallVector<IteratorType> iters(rank, IteratorType::parallel);
  iters[axis] = IteratorType::reduction;
  auto generic = mlir::linalg::GenericOp::create(
      b_, loc_, mlir::TypeRange{best.getType(), index.getType()},
      ValueRange{Get(n.operands[0])}, ValueRange{best, index}, maps, iters,
      [&](OpBuilder &b, Location, ValueRange args) {
        using mlir::arith::CmpFPredicate;
        using mlir::arith::CmpIPredicate;
        Value take;
        if (f) {
          Value larger = mlir::arith::CmpFOp::create(b, loc_, CmpFPredicate::OGT, args[0], args[1]);
          Value nan = mlir::arith::CmpFOp::create(b, loc_, CmpFPredicate::UNO, args[0], args[0]);
          Value best_nan = mlir::arith::CmpFOp::create(b, loc_, CmpFPredicate::UNO, args[1], args[1]);
          Value true_value = mlir::arith::ConstantIntOp::create(b, loc_, 1, 1);
          Value best_number = mlir::arith::XOrIOp::create(b, loc_, best_nan, true_value);
          Value first_nan = mlir::arith::AndIOp::create(b, loc_, nan, best_number);
          take = mlir::arith::OrIOp::create(b, loc_, larger, first_nan);
        } else {
          take = mlir::arith::CmpIOp::create(
              b, loc_, in.dtype == DType::kBool ? CmpIPredicate::ugt : CmpIPredicate::sgt,
              args[0], args[1]);
        }
        Value at = mlir::linalg::IndexOp::create(b, loc_, static_cast<uint64_t>(axis));
        Value at_i64 = mlir::arith::IndexCastOp::create(b, loc_, b.getI64Type(), at);
        mlir::linalg::YieldOp::create(
            b, loc_,
            ValueRange{mlir::arith::SelectOp::create(b, loc_, take, args[0], args[1]),
                       mlir::arith::SelectOp::create(b, loc_, take, at_i64, args[2])});
      });
  Value result = generic.getResult(1);
  if (n.ints[1] == 0) return result;
  return ReshapeTo(result, reduced.shape, n.type.shape);
}

Value ModuleBuilder::LowerTranspose(const Node &n) {
  // A transposed q8_0 matrix is its storage read the other way round by the dequantizing
  // cast a matmul puts on it (LowerDequantize): no op of its own.
  if (IsQuantized(n.type.dtype)) return Get(n.operands[0]);
  // A generic with a permuted input map, so that fusion can fold it into its consumer.
  size_t rank = n.ints.size();
  llvm::SmallVector<mlir::AffineExpr> exprs(rank);
  for (size_t i = 0; i < rank; ++i)
    exprs[n.ints[i]] = b_.getAffineDimExpr(static_cast<unsigned>(i));
  llvm::SmallVector<AffineMap> maps = {
      AffineMap::get(static_cast<unsigned>(rank), 0, exprs, &ctx_),
      b_.getMultiDimIdentityMap(static_cast<unsigned>(rank))};
  llvm::SmallVector<IteratorType> iters(rank, IteratorType::parallel);
  return mlir::linalg::GenericOp::create(
             b_, loc_, mlir::TypeRange{TensorTypeOf(n.type)}, ValueRange{Get(n.operands[0])},
             ValueRange{Empty(n.type)}, maps, iters,
             [&](OpBuilder &b, Location, ValueRange args) {
               mlir::linalg::YieldOp::create(b, loc_, args[0]);
             })
      .getResult(0);
}

Value ModuleBuilder::LowerSlice(const Node &n) {
  llvm::SmallVector<mlir::OpFoldResult> offsets, sizes, strides;
  for (int i = 0; i < n.type.rank(); ++i) {
    offsets.push_back(b_.getIndexAttr(n.ints[i]));
    sizes.push_back(b_.getIndexAttr(n.type.shape[i]));
    strides.push_back(b_.getIndexAttr(1));
  }
  return mlir::tensor::ExtractSliceOp::create(b_, loc_, TensorTypeOf(n.type),
                                              Get(n.operands[0]), offsets, sizes, strides);
}

Value ModuleBuilder::LowerConcat(const Node &n) {
  int64_t axis = n.ints[0];
  Value dest = Empty(n.type);
  int64_t at = 0;
  for (ValueId op : n.operands) {
    const Shape &s = graph_.node(op).type.shape;
    if (graph_.node(op).type.NumElements() == 0) continue;  // contributes nothing
    llvm::SmallVector<mlir::OpFoldResult> offsets, sizes, strides;
    for (size_t i = 0; i < s.size(); ++i) {
      offsets.push_back(b_.getIndexAttr(static_cast<int64_t>(i) == axis ? at : 0));
      sizes.push_back(b_.getIndexAttr(s[i]));
      strides.push_back(b_.getIndexAttr(1));
    }
    dest = mlir::tensor::InsertSliceOp::create(b_, loc_, Get(op), dest, offsets, sizes, strides);
    at += s[axis];
  }
  return dest;
}

Value ModuleBuilder::LowerGather(const Node &n) {
  const TensorType &table = graph_.node(n.operands[0]).type;
  const TensorType &indices = graph_.node(n.operands[1]).type;
  Value table_v = Get(n.operands[0]);
  // A q8_0 table's rows are gathered as bytes: one more dimension than the logical rank.
  unsigned rank = static_cast<unsigned>(StorageShape(n.type).size());
  unsigned index_rank = static_cast<unsigned>(indices.rank());
  llvm::SmallVector<mlir::AffineExpr> exprs;
  for (unsigned i = 0; i < index_rank; ++i) exprs.push_back(b_.getAffineDimExpr(i));
  llvm::SmallVector<AffineMap> maps = {AffineMap::get(rank, 0, exprs, &ctx_),
                                       b_.getMultiDimIdentityMap(rank)};
  llvm::SmallVector<IteratorType> iters(rank, IteratorType::parallel);
  return mlir::linalg::GenericOp::create(
             b_, loc_, mlir::TypeRange{TensorTypeOf(n.type)}, ValueRange{Get(n.operands[1])},
             ValueRange{Empty(n.type)}, maps, iters,
             [&](OpBuilder &b, Location, ValueRange args) {
               // Clamp into the table: input indices were range-checked by tm_invoke, and
               // computed ones must still never read outside it.
               Value row = mlir::arith::IndexCastOp::create(b, loc_, b.getIndexType(), args[0]);
               Value zero = mlir::arith::ConstantIndexOp::create(b, loc_, 0);
               Value last = mlir::arith::ConstantIndexOp::create(b, loc_, table.shape[0] - 1);
               row = mlir::arith::MaxSIOp::create(b, loc_, row, zero);
               row = mlir::arith::MinSIOp::create(b, loc_, row, last);
               llvm::SmallVector<Value> coords = {row};
               for (unsigned i = index_rank; i < rank; ++i)
                 coords.push_back(mlir::linalg::IndexOp::create(b, loc_, i));
               Value v = mlir::tensor::ExtractOp::create(b, loc_, table_v, coords);
               mlir::linalg::YieldOp::create(b, loc_, v);
             })
      .getResult(0);
}

// A cast from q8_0: element (..., j) = d * q, d the binary16 scale of j's block, q its
// int8; then to the target float type (d * q is exact in f32: an 11-bit significand times
// a 7-bit integer). The operand may be a transposed view of a q8_0 matrix (a matmul's
// right operand, x @ W^T): then element (j, i) reads row i of the storage.
Value ModuleBuilder::LowerDequantize(const Node &n) {
  namespace arith = mlir::arith;
  const Node &operand = graph_.node(n.operands[0]);
  const bool transposed = operand.kind == OpKind::kTranspose;
  const unsigned rank = static_cast<unsigned>(n.type.rank());
  // The element index along the blocks, and the storage indices before the blocks.
  mlir::AffineExpr along = b_.getAffineDimExpr(transposed ? 0 : rank - 1);
  llvm::SmallVector<mlir::AffineExpr> prefix;
  if (transposed) prefix.push_back(b_.getAffineDimExpr(1));
  else
    for (unsigned i = 0; i + 1 < rank; ++i) prefix.push_back(b_.getAffineDimExpr(i));
  auto map = [&](mlir::AffineExpr byte) {
    llvm::SmallVector<mlir::AffineExpr> exprs(prefix);
    exprs.push_back(along.floorDiv(kQ8BlockElements));
    exprs.push_back(byte);
    return AffineMap::get(rank, 0, exprs, &ctx_);
  };
  Value storage = Get(n.operands[0]);
  llvm::SmallVector<AffineMap> maps = {map(along % kQ8BlockElements + 2),
                                       map(b_.getAffineConstantExpr(0)),
                                       map(b_.getAffineConstantExpr(1)),
                                       b_.getMultiDimIdentityMap(rank)};
  llvm::SmallVector<IteratorType> iters(rank, IteratorType::parallel);
  auto generic = mlir::linalg::GenericOp::create(
      b_, loc_, mlir::TypeRange{TensorTypeOf(n.type)}, ValueRange{storage, storage, storage},
      ValueRange{Empty(n.type)}, maps, iters,
      [&](OpBuilder &b, Location, ValueRange args) {
        Type i16 = b.getI16Type();
        Value q = arith::SIToFPOp::create(b, loc_, b.getF32Type(), args[0]);
        Value lo = arith::ExtUIOp::create(b, loc_, i16, args[1]);
        Value hi = arith::ExtUIOp::create(b, loc_, i16, args[2]);
        Value eight = arith::ConstantOp::create(b, loc_, b.getIntegerAttr(i16, 8));
        Value bits = arith::OrIOp::create(b, loc_, arith::ShLIOp::create(b, loc_, hi, eight), lo);
        Value half = arith::BitcastOp::create(b, loc_, b.getF16Type(), bits);
        Value scale = arith::ExtFOp::create(b, loc_, b.getF32Type(), half);
        Value x = arith::MulFOp::create(b, loc_, scale, q);
        const DType to = n.type.dtype;
        if (to == DType::kF16) x = arith::TruncFOp::create(b, loc_, b.getF16Type(), x);
        else if (to == DType::kBF16) x = RoundToBF16(b, x);
        else if (to != DType::kF32) x = CastScalar(b, x, DType::kF32, to);
        mlir::linalg::YieldOp::create(b, loc_, x);
      });
  generic->setAttr(kDequantizeQ8Attr, b_.getUnitAttr());
  return generic.getResult(0);
}

Value ModuleBuilder::LowerCausalMask(const Node &n) {
  int64_t offset = n.ints[0];
  double lowest = n.type.dtype == DType::kF32 ? -std::numeric_limits<float>::max()
                                         : -std::numeric_limits<double>::max();
  llvm::SmallVector<AffineMap> maps = {b_.getMultiDimIdentityMap(2)};
  llvm::SmallVector<IteratorType> iters(2, IteratorType::parallel);
  return mlir::linalg::GenericOp::create(
             b_, loc_, mlir::TypeRange{TensorTypeOf(n.type)}, ValueRange{},
             ValueRange{Empty(n.type)}, maps, iters,
             [&](OpBuilder &b, Location, ValueRange) {
               Value row = mlir::linalg::IndexOp::create(b, loc_, 0);
               Value col = mlir::linalg::IndexOp::create(b, loc_, 1);
               Value limit = mlir::arith::AddIOp::create(
                   b, loc_, row, mlir::arith::ConstantIndexOp::create(b, loc_, offset));
               Value visible = mlir::arith::CmpIOp::create(
                   b, loc_, mlir::arith::CmpIPredicate::sle, col, limit);
               Value v = mlir::arith::SelectOp::create(
                   b, loc_, visible, ScalarConstant(b, n.type.dtype, 0.0),
                   ScalarConstant(b, n.type.dtype, lowest));
               mlir::linalg::YieldOp::create(b, loc_, v);
             })
      .getResult(0);
}

Value ModuleBuilder::LowerCast(const Node &n) {
  if (IsQuantized(graph_.node(n.operands[0]).type.dtype)) return LowerDequantize(n);
  return LowerElementwise(n);
}

Value ModuleBuilder::LowerReshape(const Node &n) {
  return ReshapeTo(Get(n.operands[0]), graph_.node(n.operands[0]).type.shape, n.type.shape);
}

// A composite is recorded as its primitives (ops.def): none is a node.
Value ModuleBuilder::LowerExpanded(const Node &) { return Value(); }

Value ModuleBuilder::LowerConstant(const Node &n) {
  auto type = TensorTypeOf(n.type);
  mlir::DenseElementsAttr attr;
  if (n.type.dtype == DType::kBool) {
    llvm::SmallVector<bool> bits(n.data.begin(), n.data.end());
    for (auto &&bit : bits) bit = bit != 0;
    attr = mlir::DenseElementsAttr::get(type, llvm::ArrayRef<bool>(bits));
  } else {
    attr = mlir::DenseElementsAttr::getFromRawBuffer(
        type, llvm::ArrayRef<char>(reinterpret_cast<const char *>(n.data.data()), n.data.size()));
  }
  return mlir::arith::ConstantOp::create(b_, loc_, attr);
}

Status ModuleBuilder::Emit(ValueId id) {
  const Node &n = graph_.node(id);
  if (n.kind == OpKind::kInput || n.kind == OpKind::kScalar)
    return Status::Ok();  // bound before / materialised on demand
  // A result with no elements needs no computation, whatever its operands; emitting it as
  // an empty tensor also keeps ops such as a slice starting at the end of an axis or a
  // concat of empty operands away from the verifiers' bounds checks.
  if (n.type.NumElements() == 0) {
    values_[id] = Empty(n.type);
    return Status::Ok();
  }
  Value v;
  switch (n.kind) {
    case OpKind::kInput:
    case OpKind::kScalar: return Status::Ok();
    case OpKind::kConstant: v = LowerConstant(n); break;
#define TM_OP(Name, C_ENUMERATOR, c_value, signature, doc, rule, lowering, bound) \
    case OpKind::k##Name: v = Lower##lowering(n); break;
#include "core/trace/ops.def"
#undef TM_OP
    default: v = LowerElementwise(n);  // the unary ops
  }
  if (!v) return CompileError(std::string("internal: no lowering for op ") + OpKindName(n.kind));
  values_[id] = v;
  return Status::Ok();
}

Status ModuleBuilder::Build(mlir::OwningOpRef<mlir::ModuleOp> *out) {
  ctx_.loadDialect<mlir::arith::ArithDialect, mlir::bufferization::BufferizationDialect,
                   mlir::func::FuncDialect, mlir::linalg::LinalgDialect,
                   mlir::math::MathDialect, mlir::memref::MemRefDialect,
                   mlir::tensor::TensorDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc_);
  b_.setInsertionPointToEnd(module->getBody());

  llvm::SmallVector<Type> arg_types;
  for (ValueId in : graph_.inputs()) arg_types.push_back(MemRefTypeOf(graph_.node(in).type));
  for (ValueId o : graph_.outputs()) arg_types.push_back(MemRefTypeOf(graph_.node(o).type));
  auto func = mlir::func::FuncOp::create(b_, loc_, kKernelName,
                                         b_.getFunctionType(arg_types, {}));
  func->setAttr("llvm.emit_c_interface", b_.getUnitAttr());
  mlir::Block *entry = func.addEntryBlock();
  b_.setInsertionPointToStart(entry);

  values_.assign(graph_.size(), Value());
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    ValueId in = graph_.inputs()[i];
    values_[in] = mlir::bufferization::ToTensorOp::create(
        b_, loc_, TensorTypeOf(graph_.node(in).type), entry->getArgument(i),
        /*restrict=*/true, /*writable=*/false);
  }

  for (size_t i = 0; i < graph_.size(); ++i)
    if (live_[i]) TM_RETURN_IF_ERROR(Emit(static_cast<ValueId>(i)));

  size_t n_in = graph_.inputs().size();
  for (size_t i = 0; i < graph_.outputs().size(); ++i) {
    Value result = Get(graph_.outputs()[i]);
    mlir::bufferization::MaterializeInDestinationOp::create(
        b_, loc_, Type(), result, entry->getArgument(n_in + i), /*restrict=*/true,
        /*writable=*/true);
  }
  mlir::func::ReturnOp::create(b_, loc_);
  *out = std::move(module);
  return Status::Ok();
}

}  // namespace

Status BuildModule(const Trace &trace, const std::vector<bool> &live, mlir::MLIRContext &context,
                   mlir::OwningOpRef<mlir::ModuleOp> *module) {
  return ModuleBuilder(trace, live, context).Build(module);
}

}  // namespace tinymlir
