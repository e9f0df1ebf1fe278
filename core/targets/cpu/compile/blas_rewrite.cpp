#include "core/targets/cpu/compile/blas_rewrite.h"

#include <algorithm>
#include <string>

#include "core/compiler/builder/build_module.h"
#include "core/compiler/passes/runtime_calls.h"
#include "core/trace/dtype.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace tinymlir {
namespace {

using mlir::Location;
using mlir::Type;
using mlir::Value;

// Products with a half-precision or transposed matrix of at most this many rows go to
// tinymlir's GEMV kernels, each row summed as a decode step sums it (a prompt of up to 16
// tokens, or a batch of up to 16 sequences, gets its decode steps' bits).
constexpr int64_t kMaxKernelRows = 16;

// CBLAS transpose flags (cblas.h), as tm_rt_gemm and tm_rt_sgemm_half take them.
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

// The CPU target's kernels (core/targets/cpu/run/kernels.def): Kernel::name indexes kKernels.
enum class Kernel {
#define TM_RUNTIME_FUNCTION(name, parameters) name,
#include "core/targets/cpu/run/kernels.def"
#undef TM_RUNTIME_FUNCTION
};
#define TM_RUNTIME_FUNCTION(name, parameters) TM_RUNTIME_FUNCTION_ENTRY(name, parameters)
const RuntimeFunction kKernels[] = {
#include "core/targets/cpu/run/kernels.def"
};
#undef TM_RUNTIME_FUNCTION


// How BLAS can read a matrix operand (the last two dimensions of a memref): row-major
// (unit inner stride; the leading dimension is the row stride) or transposed (unit stride
// along the rows, as a transposed view of a row-major matrix; the leading dimension is the
// column stride). Strides and sizes must be static and fit BLAS's int.
enum class Layout { kUnsupported, kRowMajor, kTransposed };

// The layout of a memref's last two dimensions, with the leading dimension BLAS is given
// for it (the row stride of a row-major matrix, the column stride of a transposed one).
struct MatrixShape {
  Layout layout = Layout::kUnsupported;
  int64_t ld = 0;
};

MatrixShape DescribeLayout(mlir::MemRefType type) {
  llvm::SmallVector<int64_t> strides;
  int64_t offset;
  if (mlir::failed(type.getStridesAndOffset(strides, offset)) || strides.size() < 2) return {};
  for (int64_t s : strides)
    if (mlir::ShapedType::isDynamic(s) || s > INT32_MAX) return {};
  for (int64_t d : type.getShape())
    if (mlir::ShapedType::isDynamic(d) || d > INT32_MAX) return {};
  const size_t rank = strides.size();
  const int64_t rows = type.getShape()[rank - 2], cols = type.getShape()[rank - 1];
  // BLAS needs the leading dimension >= the extent it spans.
  if (strides[rank - 1] == 1 && strides[rank - 2] >= std::max<int64_t>(cols, 1))
    return {Layout::kRowMajor, strides[rank - 2]};
  if (strides[rank - 2] == 1 && strides[rank - 1] >= std::max<int64_t>(rows, 1))
    return {Layout::kTransposed, strides[rank - 1]};
  return {};
}

// A matrix operand as BLAS sees it: address of its first element and its row stride.
struct Matrix {
  Value ptr;           // !llvm.ptr
  Type elem;           // f32, f64, or (one operand of an f32 product) f16/bf16
  Layout layout = Layout::kRowMajor;
  int64_t ld = 0;      // the leading dimension (see Layout)
  Value batch_stride;  // index; only for 3-D operands
};

// --- Arguments read in place ------------------------------------------------------------
//
// The attention transposes its K and V cache rows, (L, h, hd) -> (h, hd, L) and (h, L, hd),
// before the batched products; bufferized, each is an allocation plus a copy of L x d
// floats, every decode step and every layer. When such a copy only feeds matmul operands,
// the matmuls can read the source through a transposed view instead (BLAS takes the
// leading dimension and the transpose flag), and the copy disappears. Half-precision
// weights are the same case: their widening copy to f32 would be a full f32 copy of the
// weight, written and read back on every call.

// The memref a view chain (expand/collapse_shape, subview, transpose, cast) starts from.
Value ViewRoot(Value v) {
  while (mlir::Operation *def = v.getDefiningOp()) {
    if (!mlir::isa<mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp,
                   mlir::memref::SubViewOp, mlir::memref::TransposeOp, mlir::memref::CastOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

// True when nothing in the function writes `buffer` or a view of it: every user is a view
// (checked recursively) or an op that only reads it (a linalg input, a load).
bool IsReadOnly(Value buffer) {
  for (mlir::OpOperand &use : buffer.getUses()) {
    mlir::Operation *user = use.getOwner();
    if (mlir::isa<mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp,
                  mlir::memref::SubViewOp, mlir::memref::TransposeOp, mlir::memref::CastOp>(user)) {
      if (!IsReadOnly(user->getResult(0))) return false;
    } else if (auto linalg_op = mlir::dyn_cast<mlir::linalg::LinalgOp>(user)) {
      if (linalg_op.isDpsInit(&use)) return false;
    } else if (!mlir::isa<mlir::memref::LoadOp>(user)) {
      return false;
    }
  }
  return true;
}

// A linalg op (linalg.transpose, or a linalg.generic after fusion) that copies its one
// input into its output through a permutation, possibly widening it from f16/bf16 to f32
// (the cast a matmul of an f32 and a half operand begins with): the input map a
// permutation, the output map the identity, the body yielding the input or its arith.extf.
struct SourceCopy {
  mlir::AffineMap map;   // the input map; null when the op is not such a copy
  bool widens = false;   // the body is an arith.extf from a half type to f32
};

SourceCopy MatchSourceCopy(mlir::linalg::LinalgOp op) {
  if (!mlir::isa<mlir::linalg::GenericOp, mlir::linalg::TransposeOp>(op.getOperation()) ||
      op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 || !op.hasPureBufferSemantics() ||
      op.getNumReductionLoops() != 0)
    return {};
  auto maps = op.getIndexingMapsArray();
  if (!maps[0].isPermutation() || !maps[1].isIdentity()) return {};
  mlir::Block *body = op.getBlock();
  auto yield = mlir::dyn_cast<mlir::linalg::YieldOp>(body->getTerminator());
  if (!yield || yield.getNumOperands() != 1) return {};
  Value yielded = yield.getOperand(0);
  if (body->getOperations().size() == 1 && yielded == body->getArgument(0)) return {maps[0], false};
  auto ext = yielded.getDefiningOp<mlir::arith::ExtFOp>();
  if (body->getOperations().size() == 2 && ext && ext.getIn() == body->getArgument(0) &&
      ext.getType().isF32() && (ext.getIn().getType().isF16() || ext.getIn().getType().isBF16()))
    return {maps[0], true};
  return {};
}

// Replaces copies of read-only arguments whose only readers are matmul operands with views
// of the arguments themselves. Two kinds:
// - permutation copies (the attention's K and V cache rows, transposed for the batched
//   products) become memref.transpose views, read by BLAS through its transpose flag and
//   leading dimension;
// - widening copies (a half-precision weight cast to f32 for its matmul) disappear into
//   the matmul, which linalg allows to take mixed element types: the CPU target's half
//   kernels (gemv_kernels.h, half_matmul.h) widen inside, so an f16 weight streams half
//   the bytes and the f32 copy of it is never made. These need plain linalg.matmul
//   readers (recreated with the half operand); a batched reader keeps the copy.
// Returns the number of copies removed.
int ReadSourcesInPlace(mlir::ModuleOp module, mlir::RewriterBase &rewriter) {
  // The copies are collected first: folding a widening copy replaces its matmul readers,
  // so no other op may be kept across iterations (an erased matmul in the list was a
  // use-after-free under AddressSanitizer).
  llvm::SmallVector<std::pair<mlir::linalg::LinalgOp, SourceCopy>> candidates;
  module.walk([&](mlir::linalg::LinalgOp op) {
    const SourceCopy match = MatchSourceCopy(op);
    if (match.map) candidates.push_back({op, match});
  });
  int removed = 0;
  for (auto [copy, match] : candidates) {
    Value source = copy.getDpsInputOperand(0)->get();
    Value dest = copy.getDpsInitOperand(0)->get();
    auto alloc = dest.getDefiningOp<mlir::memref::AllocOp>();
    if (!alloc || alloc->getBlock() != copy->getBlock()) continue;
    Value root = ViewRoot(source);
    if (!mlir::isa<mlir::BlockArgument>(root) || !IsReadOnly(root)) continue;
    bool only_matmul_reads = true, any_matmul = false;
    llvm::SmallVector<mlir::Operation *> deallocs, readers;
    for (mlir::OpOperand &use : dest.getUses()) {
      mlir::Operation *user = use.getOwner();
      if (user == copy) continue;
      const bool matmul = match.widens ? mlir::isa<mlir::linalg::MatmulOp>(user)
                                       : mlir::isa<mlir::linalg::MatmulOp,
                                                   mlir::linalg::BatchMatmulOp>(user);
      if (mlir::isa<mlir::memref::DeallocOp>(user)) {
        deallocs.push_back(user);
      } else if (matmul && !mlir::cast<mlir::linalg::LinalgOp>(user).isDpsInit(&use) &&
                 user->getBlock() == copy->getBlock() && copy->isBeforeInBlock(user)) {
        any_matmul = true;
        readers.push_back(user);
      } else {
        only_matmul_reads = false;
      }
    }
    if (!only_matmul_reads || !any_matmul) continue;
    rewriter.setInsertionPoint(copy);
    // memref.transpose puts source dimension perm(i) at position i: the inverse of the
    // generic's input map, which says where each output dimension reads from.
    // (The view's shape is the copy's: linalg's verifier ties the maps to the shapes.)
    Value view = match.map.isIdentity()
                     ? source
                     : Value(mlir::memref::TransposeOp::create(
                           rewriter, copy.getLoc(), source,
                           mlir::AffineMapAttr::get(mlir::inversePermutation(match.map))));
    rewriter.eraseOp(copy);
    for (mlir::Operation *d : deallocs) rewriter.eraseOp(d);
    if (match.widens) {
      // A matmul's body is built for its operands' element types: make new ones.
      for (mlir::Operation *reader : readers) {
        auto matmul = mlir::cast<mlir::linalg::MatmulOp>(reader);
        llvm::SmallVector<Value> inputs(matmul.getDpsInputs());
        for (Value &in : inputs)
          if (in == dest) in = view;
        rewriter.setInsertionPoint(matmul);
        mlir::linalg::MatmulOp::create(rewriter, matmul.getLoc(), mlir::ValueRange(inputs),
                                       mlir::ValueRange(matmul.getDpsInits()));
        rewriter.eraseOp(matmul);
      }
    } else {
      rewriter.replaceAllUsesWith(dest, view);  // the matmuls are the only users left
    }
    rewriter.eraseOp(alloc);
    ++removed;
  }
  return removed;
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
    auto type = mlir::cast<mlir::MemRefType>(memref.getType());
    auto meta = mlir::memref::ExtractStridedMetadataOp::create(b_, loc, memref);
    auto strides = meta.getStrides();
    Matrix m;
    m.elem = elem;
    m.ptr = Address(loc, meta.getBaseBuffer(), meta.getOffset(), elem);
    const MatrixShape shape = DescribeLayout(type);
    m.layout = shape.layout;
    m.ld = shape.ld;
    if (strides.size() == 3) m.batch_stride = strides[0];
    return m;
  }

  // Declares (once) and returns one of the kernels.
  mlir::func::FuncOp Declare(Kernel kernel) {
    return DeclareRuntimeFunction(module_, kKernels[static_cast<int>(kernel)]);
  }

  // The C API's dtype value of an element type (the kernels' `dtype` argument).
  static int64_t DtypeCode(Type t) { return t.isF16() ? 6 : t.isBF16() ? 7 : 1; }

  // Rows of A up to kMaxKernelRows go to the kernels when B is a half matrix (sgemm would
  // need it widened) or a transposed one, a weight stored output-major (the dot products,
  // four rows of A at a time: a batch's decode step gets each sequence's own bits); an f32
  // B that is not transposed goes to OpenBLAS's GEMM from two rows on, which beats the
  // kernels that scale B's rows.
  static int64_t MaxKernelRows(const Matrix &b) {
    return b.elem.isF32() && b.layout != Layout::kTransposed ? 1 : kMaxKernelRows;
  }

  // The two kinds of f32 product the GEMV kernels take: A's rows (an f32 A, not transposed,
  // at most MaxKernelRows of them) against B or B^T's rows; or any A's rows against one f32
  // column.
  static bool KernelTakesRowsOfA(int64_t m, int64_t n, const Matrix &a, const Matrix &b) {
    return a.layout != Layout::kTransposed && a.elem.isF32() && m <= MaxKernelRows(b) &&
           !(n == 1 && m > 1);
  }
  static bool KernelTakesColumn(int64_t n, const Matrix &a, const Matrix &b) {
    return n == 1 && a.layout != Layout::kTransposed && b.elem.isF32();
  }
  static bool KernelTakes(int64_t m, int64_t n, const Matrix &a, const Matrix &b) {
    return KernelTakesRowsOfA(m, n, a, b) || KernelTakesColumn(n, a, b);
  }

  // A batch of products: `count` of them, each element's operands their Matrix's
  // batch_stride apart.
  struct Batch {
    Value count;
  };

  // Products tinymlir's GEMV kernels (gemv_kernels.h) take, with an f32 result, f32 vectors
  // and an f32, f16 or bf16 matrix: rows of A against B and dot products with B^T's rows
  // (decode; and with a half matrix, prompts of at most kMaxKernelRows rows, each row summed
  // as it is alone, so a prompt's rows get their decode steps' bits), and A's rows against
  // a column. Returns false for what they do not cover. With a batch (attention's per-head
  // products in decode), one call of the kernels' batched form: the same arguments with the
  // count after the dtype and each operand's batch stride after it, the bits of one call
  // per element, the heads' rows of the K and V caches streamed in order over the pool.
  bool EmitKernelProduct(Location loc, int64_t m, int64_t n, int64_t k, const Matrix &a,
                         const Matrix &b, const Matrix &c, const Batch *batch = nullptr) {
    if (!KernelTakesRowsOfA(m, n, a, b) && !KernelTakesColumn(n, a, b)) return false;
    const bool tb = b.layout == Layout::kTransposed;
    llvm::SmallVector<Value> args;
    auto head = [&](Type matrix, std::initializer_list<int64_t> sizes) {
      args.push_back(I32(loc, DtypeCode(matrix)));
      if (batch) args.push_back(batch->count);
      for (int64_t size : sizes) args.push_back(I64(loc, size));
    };
    // An operand: its pointer, then `rest` (leading dimension, increment), then its batch
    // stride in a batched call.
    auto operand = [&](const Matrix &x, std::initializer_list<int64_t> rest) {
      args.push_back(x.ptr);
      for (int64_t v : rest) args.push_back(I64(loc, v));
      if (batch) args.push_back(ToI64(loc, x.batch_stride));
    };
    bool dots = true;
    if (!KernelTakesRowsOfA(m, n, a, b)) {  // c[i] = A row i . b, b strided by its ld
      head(a.elem, {m, k});
      operand(a, {a.ld});
      args.push_back(I64(loc, 1));  // one row of x
      operand(b, {0, tb ? 1 : b.ld});
      operand(c, {0, c.ld});
    } else if (!tb) {  // C rows += A rows B: rows of B scaled by each row of A
      dots = false;
      head(b.elem, {m, k, n});
      operand(a, {a.ld});
      operand(b, {b.ld});
      operand(c, {c.ld});
    } else {  // B^T stored row-major (n x k): C[i, j] = B^T row j . A row i
      head(b.elem, {n, k});
      operand(b, {b.ld});
      args.push_back(I64(loc, m));
      operand(a, {a.ld, 1});
      operand(c, {c.ld, 1});
    }
    const Kernel kernel = dots ? (batch ? Kernel::tm_rt_gemv_dots_batched : Kernel::tm_rt_gemv_dots)
                               : (batch ? Kernel::tm_rt_gemv_rows_batched : Kernel::tm_rt_gemv_rows);
    mlir::func::CallOp::create(b_, loc, Declare(kernel), mlir::ValueRange(args));
    return true;
  }

  // A product with one half-precision operand that the kernels above do not take (a
  // prompt longer than kMaxKernelRows): tm_rt_sgemm_half widens strips for sgemm.
  void EmitHalfGemm(Location loc, int64_t m, int64_t n, int64_t k, const Matrix &a,
                    const Matrix &b, const Matrix &c) {
    const bool half_b = b.elem != c.elem;
    const bool ta = a.layout == Layout::kTransposed, tb = b.layout == Layout::kTransposed;
    auto gemm = Declare(Kernel::tm_rt_sgemm_half);
    mlir::func::CallOp::create(
        b_, loc, gemm,
        mlir::ValueRange{I32(loc, DtypeCode(half_b ? b.elem : a.elem)), I32(loc, half_b ? 1 : 0),
                         I32(loc, ta ? kTrans : kNoTrans), I32(loc, tb ? kTrans : kNoTrans),
                         I64(loc, m), I64(loc, n), I64(loc, k), a.ptr, I64(loc, a.ld), b.ptr,
                         I64(loc, b.ld), c.ptr, I64(loc, c.ld)});
  }

  // C(m x n) += A(m x k) @ B(k x n): C row-major, A and B row-major or transposed views
  // (pointers already advanced to the batch element).
  void EmitProduct(Location loc, Type elem, int64_t m, int64_t n, int64_t k, const Matrix &a,
                   const Matrix &b, const Matrix &c) {
    if (elem.isF32() && EmitKernelProduct(loc, m, n, k, a, b, c)) return;
    if (a.elem != elem || b.elem != elem) {
      EmitHalfGemm(loc, m, n, k, a, b, c);
      return;
    }
    Value none = I64(loc, 0);
    EmitBlasProducts(loc, elem, I64(loc, 1), m, n, k, a, none, b, none, c, none);
  }

  // `batch` products C_i += A_i @ B_i through tm_rt_gemm (blas_products.h): OpenBLAS on
  // blocks of C fixed by the shapes, so the bits do not depend on the thread count. The
  // strides (i64 values, in elements) step from one batch element to the next.
  void EmitBlasProducts(Location loc, Type elem, Value batch, int64_t m, int64_t n, int64_t k,
                        const Matrix &a, Value stride_a, const Matrix &b, Value stride_b,
                        const Matrix &c, Value stride_c) {
    auto gemm = Declare(Kernel::tm_rt_gemm);
    const bool ta = a.layout == Layout::kTransposed, tb = b.layout == Layout::kTransposed;
    mlir::func::CallOp::create(
        b_, loc, gemm,
        mlir::ValueRange{I32(loc, elem.isF32() ? 1 : 2), batch, I32(loc, ta ? kTrans : kNoTrans),
                         I32(loc, tb ? kTrans : kNoTrans), I64(loc, m), I64(loc, n),
                         I64(loc, k), a.ptr, I64(loc, a.ld), stride_a, b.ptr, I64(loc, b.ld),
                         stride_b, c.ptr, I64(loc, c.ld), stride_c});
  }

  // --- q8_0 matrices read in place -------------------------------------------------------
  //
  // A product with a q8_0 operand is built as a dequantizing copy (a linalg.generic marked
  // kDequantizeQ8Attr, from the (rows, k / 32, 34) i8 blocks to an f32 matrix, transposed
  // when the product is x @ W^T) and an f32 linalg.matmul reading the copy. Where the
  // blocks are an unwritten argument, the product is handed to the q8_0 kernels
  // (core/targets/cpu/run/q8_0.h) with the blocks in place: the f32 copy, four times the
  // bytes, is never made. A matrix of rows of A (or W^T's transposed rows), up to
  // kMaxKernelRows of x, goes to the GEMV kernel (each output summed as a decode step sums
  // it); more, to sgemm on dequantized strips. Anything else keeps the copy (slower, same
  // values up to summation order).

  // The q8_0 blocks a dequantizing copy reads: their address and row stride in bytes, and
  // whether the copy transposes them (the right operand of x @ W^T).
  struct Blocks {
    Value ptr;
    int64_t row_bytes = 0;
    bool transposed = false;
  };

  static bool DescribeBlocks(mlir::linalg::GenericOp copy, int64_t *row_bytes,
                             bool *transposed) {
    if (!copy.hasPureBufferSemantics() || copy.getNumDpsInputs() != 3 ||
        copy.getNumDpsInits() != 1)
      return false;
    auto storage = mlir::dyn_cast<mlir::MemRefType>(copy.getDpsInputOperand(0)->get().getType());
    auto dest = mlir::dyn_cast<mlir::MemRefType>(copy.getDpsInitOperand(0)->get().getType());
    if (!storage || !dest || storage.getRank() != 3 || dest.getRank() != 2 ||
        !dest.getElementType().isF32() || !storage.getElementType().isInteger(8))
      return false;
    llvm::SmallVector<int64_t> strides;
    int64_t offset;
    if (mlir::failed(storage.getStridesAndOffset(strides, offset)) ||
        strides[2] != 1 || strides[1] != kQ8BlockBytes || mlir::ShapedType::isDynamic(strides[0]))
      return false;
    *row_bytes = strides[0];
    // The first input map's first result is the storage row: d0 as stored, d1 transposed.
    mlir::AffineMap map = copy.getIndexingMapsArray()[0];
    *transposed = map.getResult(0) == mlir::getAffineDimExpr(1, copy.getContext());
    return true;
  }

  // C(m x n) += A @ B with the q8_0 matrix in `q` (A's rows, or B^T's rows when q is
  // transposed) and the other operand `x` an f32 matrix as BLAS reads it.
  void EmitQuantizedProduct(Location loc, int64_t m, int64_t n, int64_t k, const Blocks &q,
                            const Matrix &x, const Matrix &c) {
    const bool tx = x.layout == Layout::kTransposed;
    const int64_t rows = q.transposed ? n : m;    // rows of the q8_0 matrix
    const int64_t vectors = q.transposed ? m : n;  // the f32 vectors dotted with them
    if (vectors <= kMaxKernelRows) {
      // Vector v of x: B's column v (q is A) or A's row v (q is B^T), elements apart by
      // `inc`, vectors by `ld`; C[i, v] (q is A) or C[v, i] at v * ldy + i * incy.
      const bool rows_of_x = q.transposed != tx;  // the vectors are x's stored rows
      auto dots = Declare(Kernel::tm_rt_gemv_dots_q8_0);
      mlir::func::CallOp::create(
          b_, loc, dots,
          mlir::ValueRange{I64(loc, rows), I64(loc, k), q.ptr, I64(loc, q.row_bytes),
                           I64(loc, vectors), x.ptr, I64(loc, rows_of_x ? x.ld : 1),
                           I64(loc, rows_of_x ? 1 : x.ld), c.ptr,
                           I64(loc, q.transposed ? c.ld : 1), I64(loc, q.transposed ? 1 : c.ld)});
      return;
    }
    auto gemm = Declare(Kernel::tm_rt_sgemm_q8_0);
    const Value trans_x = I32(loc, tx ? kTrans : kNoTrans);
    if (q.transposed)
      mlir::func::CallOp::create(
          b_, loc, gemm,
          mlir::ValueRange{I32(loc, 1), trans_x, I32(loc, kTrans), I64(loc, m), I64(loc, n),
                           I64(loc, k), x.ptr, I64(loc, x.ld), q.ptr, I64(loc, q.row_bytes),
                           c.ptr, I64(loc, c.ld)});
    else
      mlir::func::CallOp::create(
          b_, loc, gemm,
          mlir::ValueRange{I32(loc, 0), I32(loc, kNoTrans), trans_x, I64(loc, m), I64(loc, n),
                           I64(loc, k), q.ptr, I64(loc, q.row_bytes), x.ptr, I64(loc, x.ld),
                           c.ptr, I64(loc, c.ld)});
  }

  // Hands every product reading `copy`'s result to the q8_0 kernels when all its readers
  // are products that can take the blocks in place; then the copy goes. Returns the number
  // of products rewritten.
  int RewriteQuantizedCopy(mlir::linalg::GenericOp copy) {
    int64_t row_bytes = 0;
    bool transposed = false;
    if (!DescribeBlocks(copy, &row_bytes, &transposed)) return 0;
    Value storage = copy.getDpsInputOperand(0)->get();
    Value dest = copy.getDpsInitOperand(0)->get();
    auto alloc = dest.getDefiningOp<mlir::memref::AllocOp>();
    Value root = ViewRoot(storage);
    if (!alloc || alloc->getBlock() != copy->getBlock() ||
        !mlir::isa<mlir::BlockArgument>(root) || !IsReadOnly(root))
      return 0;
    // The operand the dequantized matrix must be: A as stored, B when transposed.
    const unsigned operand = transposed ? 1 : 0;
    llvm::SmallVector<mlir::Operation *> deallocs;
    llvm::SmallVector<mlir::linalg::MatmulOp> products;
    for (mlir::OpOperand &use : dest.getUses()) {
      mlir::Operation *user = use.getOwner();
      if (user == copy.getOperation()) continue;
      if (mlir::isa<mlir::memref::DeallocOp>(user)) {
        deallocs.push_back(user);
        continue;
      }
      auto matmul = mlir::dyn_cast<mlir::linalg::MatmulOp>(user);
      if (!matmul || matmul.hasUserDefinedMaps() || !matmul.hasPureBufferSemantics() ||
          use.getOperandNumber() != operand || matmul->getBlock() != copy->getBlock() ||
          !copy->isBeforeInBlock(matmul))
        return 0;
      auto x = mlir::cast<mlir::MemRefType>(matmul.getDpsInputOperand(1 - operand)->get().getType());
      auto c = mlir::cast<mlir::MemRefType>(matmul.getDpsInitOperand(0)->get().getType());
      if (!x.getElementType().isF32() || !c.getElementType().isF32() ||
          DescribeLayout(x).layout == Layout::kUnsupported ||
          DescribeLayout(c).layout != Layout::kRowMajor)
        return 0;
      products.push_back(matmul);
    }
    for (mlir::linalg::MatmulOp matmul : products) {
      Location loc = matmul.getLoc();
      b_.setInsertionPoint(matmul);
      Value xv = matmul.getDpsInputOperand(1 - operand)->get();
      Value cv = matmul.getDpsInitOperand(0)->get();
      auto tc = mlir::cast<mlir::MemRefType>(cv.getType());
      auto ta = mlir::cast<mlir::MemRefType>(matmul.getDpsInputOperand(0)->get().getType());
      const int64_t m = tc.getShape()[0], n = tc.getShape()[1], k = ta.getShape()[1];
      if (m > 0 && n > 0 && k > 0) {
        auto meta = mlir::memref::ExtractStridedMetadataOp::create(b_, loc, storage);
        Blocks q;
        q.ptr = Address(loc, meta.getBaseBuffer(), meta.getOffset(), b_.getI8Type());
        q.row_bytes = row_bytes;
        q.transposed = transposed;
        EmitQuantizedProduct(loc, m, n, k, q, Describe(loc, xv, b_.getF32Type()),
                             Describe(loc, cv, b_.getF32Type()));
      }
      b_.eraseOp(matmul);
    }
    b_.eraseOp(copy);
    for (mlir::Operation *d : deallocs) b_.eraseOp(d);
    b_.eraseOp(alloc);
    return static_cast<int>(products.size());
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
    auto half = [](Type t) { return t.isF16() || t.isBF16(); };
    const bool same = ta.getElementType() == elem && tb.getElementType() == elem;
    // An f32 product with one half-precision operand (a weight read in place, see
    // ReadSourcesInPlace); batched ones never get one.
    const bool one_half = !batched && elem.isF32() &&
                          ((half(ta.getElementType()) && tb.getElementType() == elem) ||
                           (half(tb.getElementType()) && ta.getElementType() == elem));
    if (!(elem.isF32() || elem.isF64()) || !(same || one_half)) return false;
    if (DescribeLayout(ta).layout == Layout::kUnsupported ||
        DescribeLayout(tb).layout == Layout::kUnsupported ||
        DescribeLayout(tc).layout != Layout::kRowMajor)
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
    Matrix ma = Describe(loc, a, ta.getElementType()), mb = Describe(loc, bm, tb.getElementType()),
           mc = Describe(loc, c, elem);
    if (!batched) {
      EmitProduct(loc, elem, m, n, k, ma, mb, mc);
    } else if (!(elem.isF32() && KernelTakes(m, n, ma, mb))) {
      // One call for the whole batch: its blocks spread over the pool together (attention's
      // per-head products are too small to split one at a time).
      EmitBlasProducts(loc, elem, I64(loc, tc.getShape()[0]), m, n, k, ma,
                       ToI64(loc, ma.batch_stride), mb, ToI64(loc, mb.batch_stride), mc,
                       ToI64(loc, mc.batch_stride));
    } else {  // batched products have no half operand: f32 throughout
      const Batch batch{I64(loc, tc.getShape()[0])};
      EmitKernelProduct(loc, m, n, k, ma, mb, mc, &batch);
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
  bool any = false;
  module.walk([&](mlir::linalg::LinalgOp op) {
    any |= mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(op.getOperation());
  });
  if (!any) return 0;
  module.getContext()
      ->loadDialect<mlir::LLVM::LLVMDialect, mlir::func::FuncDialect,
                    mlir::arith::ArithDialect, mlir::memref::MemRefDialect>();
  mlir::IRRewriter rewriter(module.getContext());
  ReadSourcesInPlace(module, rewriter);  // may replace matmuls: collect them after
  BlasEmitter emitter(module, rewriter);
  int rewritten = 0;
  llvm::SmallVector<mlir::linalg::GenericOp> dequantizing;
  module.walk([&](mlir::linalg::GenericOp op) {
    if (op->hasAttr(kDequantizeQ8Attr)) dequantizing.push_back(op);
  });
  for (auto copy : dequantizing) rewritten += emitter.RewriteQuantizedCopy(copy);
  llvm::SmallVector<mlir::linalg::LinalgOp> matmuls, batched;
  module.walk([&](mlir::linalg::MatmulOp op) {
    if (!op.hasUserDefinedMaps()) matmuls.push_back(op);
  });
  module.walk([&](mlir::linalg::BatchMatmulOp op) {
    if (!op.hasUserDefinedMaps()) batched.push_back(op);
  });
  for (auto op : matmuls) rewritten += emitter.Rewrite(op, false);
  for (auto op : batched) rewritten += emitter.Rewrite(op, true);
  return rewritten;
}

}  // namespace tinymlir
