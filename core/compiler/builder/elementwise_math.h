// Scalar arithmetic for the bodies of elementwise linalg.generic ops, in the operand's type:
// what the op table's lowering expressions (core/trace/unary_ops.def) are written in. Each
// method emits the arith/math op for a float operand and its integer form otherwise, so one
// expression serves every dtype the op's rule admits.
#pragma once

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

namespace tinymlir {

class ElementwiseMath {
 public:
  // `type` is the operand's element type (every value here has it).
  ElementwiseMath(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type)
      : b_(b), loc_(loc), type_(type), float_(mlir::isa<mlir::FloatType>(type)) {}

  mlir::Value Constant(double v) {
    if (float_) return mlir::arith::ConstantOp::create(b_, loc_, b_.getFloatAttr(type_, v));
    return mlir::arith::ConstantOp::create(b_, loc_,
                                           b_.getIntegerAttr(type_, static_cast<int64_t>(v)));
  }
  mlir::Value Add(mlir::Value a, mlir::Value c) {
    if (float_) return mlir::arith::AddFOp::create(b_, loc_, a, c);
    return mlir::arith::AddIOp::create(b_, loc_, a, c);
  }
  mlir::Value Sub(mlir::Value a, mlir::Value c) {
    if (float_) return mlir::arith::SubFOp::create(b_, loc_, a, c);
    return mlir::arith::SubIOp::create(b_, loc_, a, c);
  }
  mlir::Value Mul(mlir::Value a, mlir::Value c) {
    if (float_) return mlir::arith::MulFOp::create(b_, loc_, a, c);
    return mlir::arith::MulIOp::create(b_, loc_, a, c);
  }
  mlir::Value Div(mlir::Value a, mlir::Value c) {  // floats only (integers divide in f64)
    return mlir::arith::DivFOp::create(b_, loc_, a, c);
  }
  mlir::Value Neg(mlir::Value x) {
    if (float_) return mlir::arith::NegFOp::create(b_, loc_, x);
    return Sub(Constant(0), x);
  }
  mlir::Value Abs(mlir::Value x) {
    if (float_) return mlir::math::AbsFOp::create(b_, loc_, x);
    // max(x, -x): math.absi has no lowering in the LLVM pipeline.
    return mlir::arith::MaxSIOp::create(b_, loc_, x, Neg(x));
  }
  // Transcendental functions: floats only (the op table's kFloatResult rule).
  mlir::Value Exp(mlir::Value x) { return mlir::math::ExpOp::create(b_, loc_, x); }
  mlir::Value Log(mlir::Value x) { return mlir::math::LogOp::create(b_, loc_, x); }
  mlir::Value Tanh(mlir::Value x) { return mlir::math::TanhOp::create(b_, loc_, x); }
  mlir::Value Sqrt(mlir::Value x) { return mlir::math::SqrtOp::create(b_, loc_, x); }
  mlir::Value Erf(mlir::Value x) { return mlir::math::ErfOp::create(b_, loc_, x); }

 private:
  mlir::OpBuilder &b_;
  mlir::Location loc_;
  mlir::Type type_;
  bool float_;
};

}  // namespace tinymlir
