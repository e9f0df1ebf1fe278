#include "core/passes/blas_rewrite.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace tinymlir {
namespace {

using mlir::Location;
using mlir::Type;
using mlir::Value;

// CBLAS enum values (cblas.h): fixed by the CBLAS standard.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

// A matrix operand as BLAS sees it: address of its first element and its row stride.
struct Matrix {
  Value ptr;       // !llvm.ptr
  Value row_stride;    // index: the leading dimension
  Value batch_stride;  // index; only for 3-D operands
};

bool HasUnitInnerStride(mlir::MemRefType type) {
  llvm::SmallVector<int64_t> strides;
  int64_t offset;
  if (mlir::failed(type.getStridesAndOffset(strides, offset))) return false;
  if (strides.empty() || strides.back() != 1) return false;
  // Leading dimensions must fit BLAS's int.
  for (int64_t s : strides)
    if (mlir::ShapedType::isDynamic(s) || s > INT32_MAX) return false;
  for (int64_t d : type.getShape())
    if (mlir::ShapedType::isDynamic(d) || d > INT32_MAX) return false;
  return true;
}

class BlasEmitter {
 public:
  BlasEmitter(mlir::ModuleOp module, mlir::RewriterBase &rewriter)
      : module_(module), b_(rewriter) {}

  Value I32(Location loc, int64_t v) {
    return mlir::arith::ConstantIntOp::create(b_, loc, v, 32);
  }
  Value I64(Location loc, int64_t v) {
    return mlir::arith::ConstantIntOp::create(b_, loc, v, 64);
  }
  Value ToI32(Location loc, Value index) {
    return mlir::arith::IndexCastOp::create(b_, loc, b_.getI32Type(), index);
  }
  Value ToI64(Location loc, Value index) {
    return mlir::arith::IndexCastOp::create(b_, loc, b_.getI64Type(), index);
  }

  // Pointer to element `offset` (index) of the buffer behind `memref`.
  Value Address(Location loc, Value memref, Value offset, Type elem) {
    auto ptr_type = mlir::LLVM::LLVMPointerType::get(b_.getContext());
    Value base = mlir::memref::ExtractAlignedPointerAsIndexOp::create(b_, loc, memref);
    Value base_i64 = mlir::arith::IndexCastOp::create(b_, loc, b_.getI64Type(), base);
    Value ptr = mlir::LLVM::IntToPtrOp::create(b_, loc, ptr_type, base_i64);
    Value off_i64 = mlir::arith::IndexCastOp::create(b_, loc, b_.getI64Type(), offset);
    return mlir::LLVM::GEPOp::create(b_, loc, ptr_type, elem, ptr, mlir::ValueRange{off_i64});
  }

  Matrix Describe(Location loc, Value memref, Type elem) {
    auto meta = mlir::memref::ExtractStridedMetadataOp::create(b_, loc, memref);
    auto strides = meta.getStrides();
    size_t rank = strides.size();
    Matrix m;
    m.ptr = Address(loc, meta.getBaseBuffer(), meta.getOffset(), elem);
    m.row_stride = strides[rank - 2];
    if (rank == 3) m.batch_stride = strides[0];
    return m;
  }

  Value Advance(Location loc, Value ptr, Value index, Value stride, Type elem) {
    auto ptr_type = mlir::LLVM::LLVMPointerType::get(b_.getContext());
    Value step = mlir::arith::MulIOp::create(b_, loc, index, stride);
    Value step_i64 = mlir::arith::IndexCastOp::create(b_, loc, b_.getI64Type(), step);
    return mlir::LLVM::GEPOp::create(b_, loc, ptr_type, elem, ptr, mlir::ValueRange{step_i64});
  }

  // Declares (once) and returns a CBLAS function with the given argument types.
  mlir::func::FuncOp Declare(llvm::StringRef name, llvm::ArrayRef<Type> args) {
    if (auto f = module_.lookupSymbol<mlir::func::FuncOp>(name)) return f;
    mlir::OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(module_.getBody());
    auto f = mlir::func::FuncOp::create(b_, module_.getLoc(), name,
                                        b_.getFunctionType(args, {}));
    f.setPrivate();
    return f;
  }

  // C(m x n) += A(m x k) @ B(k x n), all row-major with the given leading dimensions
  // (index values).
  void EmitProduct(Location loc, Type elem, int64_t m, int64_t n, int64_t k, Value a,
                   Value lda, Value b, Value ldb, Value c, Value ldc) {
    bool f32 = elem.isF32();
    Type i32 = b_.getI32Type(), i64 = b_.getI64Type();
    Type ptr = mlir::LLVM::LLVMPointerType::get(b_.getContext());
    if (f32 && (m == 1 || n == 1)) {
      // Decode-shaped f32 products: tinymlir's bandwidth-bound kernels (gemv_kernels.h).
      if (m == 1) {
        auto row = Declare("tm_rt_sgemv_row", {i64, i64, ptr, ptr, i64, ptr});
        mlir::func::CallOp::create(b_, loc, row,
                                   mlir::ValueRange{I64(loc, k), I64(loc, n), a, b,
                                                    ToI64(loc, ldb), c});
      } else {
        auto col = Declare("tm_rt_sgemv_col", {i64, i64, ptr, i64, ptr, i64, ptr, i64});
        mlir::func::CallOp::create(b_, loc, col,
                                   mlir::ValueRange{I64(loc, m), I64(loc, k), a, ToI64(loc, lda),
                                                    b, ToI64(loc, ldb), c, ToI64(loc, ldc)});
      }
      return;
    }
    Value one = mlir::arith::ConstantOp::create(b_, loc, b_.getFloatAttr(elem, 1.0));
    if (m == 1 || n == 1) {
      // y = alpha * op(M) x + beta * y
      auto gemv = Declare(f32 ? "cblas_sgemv" : "cblas_dgemv",
                          {i32, i32, i32, i32, elem, ptr, i32, ptr, i32, elem, ptr, i32});
      llvm::SmallVector<Value> args;
      if (m == 1)  // row vector: c = B^T a, B is (k x n)
        args = {I32(loc, kRowMajor), I32(loc, kTrans), I32(loc, k), I32(loc, n), one, b,
                ToI32(loc, ldb), a, I32(loc, 1), one, c, I32(loc, 1)};
      else  // column vector: c = A b, b strided by ldb, c by ldc
        args = {I32(loc, kRowMajor), I32(loc, kNoTrans), I32(loc, m), I32(loc, k), one, a,
                ToI32(loc, lda), b, ToI32(loc, ldb), one, c, ToI32(loc, ldc)};
      mlir::func::CallOp::create(b_, loc, gemv, args);
      return;
    }
    auto gemm = Declare(f32 ? "cblas_sgemm" : "cblas_dgemm",
                        {i32, i32, i32, i32, i32, i32, elem, ptr, i32, ptr, i32, elem, ptr, i32});
    mlir::func::CallOp::create(
        b_, loc, gemm,
        mlir::ValueRange{I32(loc, kRowMajor), I32(loc, kNoTrans), I32(loc, kNoTrans),
                         I32(loc, m), I32(loc, n), I32(loc, k), one, a, ToI32(loc, lda), b,
                         ToI32(loc, ldb), one, c, ToI32(loc, ldc)});
  }

  bool Rewrite(mlir::linalg::LinalgOp op, bool batched) {
    if (!op.hasPureBufferSemantics()) return false;
    Value a = op.getDpsInputOperand(0)->get(), bm = op.getDpsInputOperand(1)->get();
    Value c = op.getDpsInitOperand(0)->get();
    auto ta = mlir::dyn_cast<mlir::MemRefType>(a.getType());
    auto tb = mlir::dyn_cast<mlir::MemRefType>(bm.getType());
    auto tc = mlir::dyn_cast<mlir::MemRefType>(c.getType());
    if (!ta || !tb || !tc) return false;
    Type elem = tc.getElementType();
    if (!(elem.isF32() || elem.isF64()) || ta.getElementType() != elem ||
        tb.getElementType() != elem)
      return false;
    if (!HasUnitInnerStride(ta) || !HasUnitInnerStride(tb) || !HasUnitInnerStride(tc))
      return false;

    Location loc = op.getLoc();
    b_.setInsertionPoint(op);
    size_t r = batched ? 1 : 0;
    int64_t m = ta.getShape()[r], k = ta.getShape()[r + 1], n = tb.getShape()[r + 1];
    if (m == 0 || n == 0 || k == 0 || (batched && tc.getShape()[0] == 0)) {
      // Nothing to accumulate (C already holds its initial value), and BLAS would reject
      // the zero leading dimensions, printing to stderr.
      b_.eraseOp(op);
      return true;
    }
    Matrix ma = Describe(loc, a, elem), mb = Describe(loc, bm, elem), mc = Describe(loc, c, elem);
    if (!batched) {
      EmitProduct(loc, elem, m, n, k, ma.ptr, ma.row_stride, mb.ptr, mb.row_stride, mc.ptr,
                  mc.row_stride);
    } else {
      Value zero = mlir::arith::ConstantIndexOp::create(b_, loc, 0);
      Value step = mlir::arith::ConstantIndexOp::create(b_, loc, 1);
      Value count = mlir::arith::ConstantIndexOp::create(b_, loc, tc.getShape()[0]);
      auto loop = mlir::scf::ForOp::create(b_, loc, zero, count, step);
      mlir::OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(loop.getBody());
      Value i = loop.getInductionVar();
      EmitProduct(loc, elem, m, n, k, Advance(loc, ma.ptr, i, ma.batch_stride, elem),
                  ma.row_stride, Advance(loc, mb.ptr, i, mb.batch_stride, elem), mb.row_stride,
                  Advance(loc, mc.ptr, i, mc.batch_stride, elem), mc.row_stride);
    }
    b_.eraseOp(op);
    return true;
  }

 private:
  mlir::ModuleOp module_;
  mlir::RewriterBase &b_;
};

}  // namespace

int RewriteMatmulsToBlas(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::linalg::LinalgOp> matmuls, batched;
  module.walk([&](mlir::linalg::MatmulOp op) {
    if (!op.hasUserDefinedMaps()) matmuls.push_back(op);
  });
  module.walk([&](mlir::linalg::BatchMatmulOp op) {
    if (!op.hasUserDefinedMaps()) batched.push_back(op);
  });
  if (matmuls.empty() && batched.empty()) return 0;
  module.getContext()
      ->loadDialect<mlir::LLVM::LLVMDialect, mlir::scf::SCFDialect, mlir::func::FuncDialect,
                    mlir::arith::ArithDialect, mlir::memref::MemRefDialect>();
  mlir::IRRewriter rewriter(module.getContext());
  BlasEmitter emitter(module, rewriter);
  int rewritten = 0;
  for (auto op : matmuls) rewritten += emitter.Rewrite(op, false);
  for (auto op : batched) rewritten += emitter.Rewrite(op, true);
  return rewritten;
}

}  // namespace tinymlir
