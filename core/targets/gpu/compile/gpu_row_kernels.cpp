#include "core/targets/gpu/compile/gpu_row_kernels.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "core/compiler/passes/buffer_root.h"
#include "core/compiler/passes/linalg_point.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MathExtras.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tinymlir {
namespace {

using mlir::Value;

// What an op of a row kernel computes for its block's row.
enum class Kind {
  kColumns,    // every element of the row: loops rows..., columns, all parallel
  kRow,        // one element per row: loops rows..., all parallel (a reduction's fill)
  kReduction,  // the row combined into one element: loops rows..., columns (the reduction)
};

struct Phase {
  mutable mlir::linalg::LinalgOp op;  // a handle: its methods are not const
  Kind kind = Kind::kColumns;
  // For a reduction: the body's op that combines the value computed from the inputs with
  // the accumulator (the output's block argument), which it yields.
  mlir::Operation *combine = nullptr;
};

// The most ops one kernel takes: a bound that keeps the search linear in the program.
constexpr size_t kMaxOps = 32;
// Threads per block: the row's length rounded up to a power of two (the tree halves it),
// at least a warp, at most kMaxThreads (each thread then takes several elements).
constexpr int64_t kMinThreads = 32, kMaxThreads = 256;

// The combiner's identity: what a thread's partial starts from (a thread may have no element).
std::optional<mlir::TypedAttr> Identity(mlir::Operation *combine, mlir::Type type) {
  auto f = mlir::dyn_cast<mlir::FloatType>(type);
  if (!f || !(f.isF32() || f.isF64())) return std::nullopt;
  // Fast-math flags could make the identity poison (-inf under ninf).
  if (auto flags = mlir::dyn_cast<mlir::arith::ArithFastMathInterface>(combine);
      flags && flags.getFastMathFlagsAttr() &&
      flags.getFastMathFlagsAttr().getValue() != mlir::arith::FastMathFlags::none)
    return std::nullopt;
  const llvm::fltSemantics &semantics = f.getFloatSemantics();
  if (mlir::isa<mlir::arith::AddFOp>(combine))  // -0 + x is x for every x, -0 too
    return mlir::FloatAttr::get(f, llvm::APFloat::getZero(semantics, /*Negative=*/true));
  if (mlir::isa<mlir::arith::MaximumFOp>(combine))  // NaN-propagating: in any order
    return mlir::FloatAttr::get(f, llvm::APFloat::getInf(semantics, /*Negative=*/true));
  return std::nullopt;
}

// The op of a reduction's body that combines a value with the accumulator, when it is one
// the kernel can split into partials (Identity), the accumulator is used by it alone and it
// is what the body yields.
mlir::Operation *Combiner(mlir::linalg::LinalgOp op) {
  mlir::Block *body = op.getBlock();
  mlir::Operation *yield = body->getTerminator();
  if (yield->getNumOperands() != 1) return nullptr;
  mlir::Operation *combine = yield->getOperand(0).getDefiningOp();
  if (!combine || combine->getBlock() != body || combine->getNumOperands() != 2 ||
      !combine->getResult(0).hasOneUse())
    return nullptr;
  const Value accumulator = op.getMatchingBlockArgument(op.getDpsInitOperand(0));
  if (!accumulator.hasOneUse() ||
      (combine->getOperand(0) != accumulator && combine->getOperand(1) != accumulator))
    return nullptr;
  return Identity(combine, accumulator.getType()) ? combine : nullptr;
}

// Whether `op` can be part of a row kernel, whatever its rows: a linalg op on buffers of
// static shapes with one output, its loops all parallel but for a last reduction loop (with
// a combiner the kernel can split), its indexing maps made of loops and constants, and a
// body that computes values only.
std::optional<Phase> AsPhase(mlir::Operation *operation) {
  auto op = mlir::dyn_cast<mlir::linalg::LinalgOp>(operation);
  if (!op || !op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
      operation->getNumRegions() != 1)
    return std::nullopt;
  for (int64_t range : op.getStaticLoopRanges())
    if (mlir::ShapedType::isDynamic(range)) return std::nullopt;
  const auto iterators = op.getIteratorTypesArray();
  for (size_t i = 0; i + 1 < iterators.size(); ++i)
    if (iterators[i] != mlir::utils::IteratorType::parallel) return std::nullopt;
  for (mlir::OpOperand &operand : operation->getOpOperands()) {
    auto type = mlir::dyn_cast<mlir::MemRefType>(operand.get().getType());
    if (!type) continue;  // a fill's value
    if (!type.hasStaticShape()) return std::nullopt;
    for (mlir::AffineExpr e : op.getMatchingIndexingMap(&operand).getResults())
      if (!mlir::isa<mlir::AffineDimExpr, mlir::AffineConstantExpr>(e)) return std::nullopt;
  }
  for (mlir::Operation &inner : op.getBlock()->without_terminator())
    if (!mlir::isa<mlir::linalg::IndexOp>(inner) &&
        (inner.getNumRegions() != 0 || !mlir::isMemoryEffectFree(&inner)))
      return std::nullopt;
  Phase phase{op};
  if (!iterators.empty() && iterators.back() == mlir::utils::IteratorType::reduction) {
    phase.kind = Kind::kReduction;
    phase.combine = Combiner(op);
    if (!phase.combine) return std::nullopt;
  }
  return phase;
}

int64_t Product(llvm::ArrayRef<int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// Sets `phase.kind` for a kernel over rows x cols; false when the op is over other elements.
bool FitsRows(Phase &phase, int64_t rows, int64_t cols) {
  const auto ranges = phase.op.getStaticLoopRanges();
  const int64_t total = Product(ranges);
  const bool over_row = !ranges.empty() && ranges.back() == cols && total == rows * cols;
  if (phase.kind == Kind::kReduction) return over_row;
  if (over_row) {
    phase.kind = Kind::kColumns;
    return true;
  }
  phase.kind = Kind::kRow;
  return total == rows;
}

// Whether `memref` is its buffer reshaped: every view between them an expand_shape or
// collapse_shape of a row-major memref, so an element's row-major position in it is its
// position in the buffer.
bool ReshapedInPlace(Value memref) {
  while (true) {
    auto type = mlir::dyn_cast<mlir::MemRefType>(memref.getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity()) return false;
    if (auto expand = memref.getDefiningOp<mlir::memref::ExpandShapeOp>())
      memref = expand.getSrc();
    else if (auto collapse = memref.getDefiningOp<mlir::memref::CollapseShapeOp>())
      memref = collapse.getSrc();
    else
      return BufferRoot(memref) == memref;  // no other kind of view
  }
}

// Whether `operand` of `phase` touches only its block's row of the buffer: the buffer
// reshaped (ReshapedInPlace), read or written at the op's loops themselves (element
// row * cols + column, or element row of a one-per-row op), or at its row loops alone
// (element row: a reduction's output, or its result broadcast along the row).
bool TouchesItsRowOnly(const Phase &phase, mlir::OpOperand &operand) {
  if (!ReshapedInPlace(operand.get())) return false;
  const auto shape = mlir::cast<mlir::MemRefType>(operand.get().getType()).getShape();
  const auto ranges = phase.op.getStaticLoopRanges();
  const mlir::AffineMap map = phase.op.getMatchingIndexingMap(&operand);
  const size_t loops = ranges.size();
  // Which of the two an operand may be: an elementwise op's output through its row loops
  // alone would be one element written by every thread of the row, and a reduction's output
  // is one element per row (linalg would allow its map to use the reduction loop too).
  const bool output = phase.op.isDpsInit(&operand);
  const size_t row_loops = phase.kind == Kind::kRow ? loops : loops - 1;
  std::vector<size_t> allowed = {loops, row_loops};
  if (output && phase.kind == Kind::kColumns) allowed = {loops};
  if (output && phase.kind == Kind::kReduction) allowed = {row_loops};
  for (size_t used : allowed) {
    if (map.getNumResults() != used || shape.size() != used) continue;
    bool in_order = true;
    for (size_t i = 0; i < used && in_order; ++i)
      in_order =
          map.getResult(i) == mlir::getAffineDimExpr(i, map.getContext()) && shape[i] == ranges[i];
    if (in_order) return true;
  }
  return false;
}

// Whether every buffer the phases write is touched only at the block's row by all of them:
// then blocks (rows) need no order among themselves.
bool RowsIndependent(const std::vector<Phase> &phases) {
  std::vector<Value> written;
  for (const Phase &phase : phases) written.push_back(BufferRoot(phase.op.getDpsInits()[0]));
  for (const Phase &phase : phases) {
    const Value own_output = BufferRoot(phase.op.getDpsInits()[0]);
    for (mlir::OpOperand &operand : phase.op->getOpOperands()) {
      if (!mlir::isa<mlir::MemRefType>(operand.get().getType())) continue;
      const Value root = BufferRoot(operand.get());
      if (std::find(written.begin(), written.end(), root) != written.end() &&
          !TouchesItsRowOnly(phase, operand))
        return false;
      // A reduction that reads its own output as an input reads the running value at every
      // column, which the kernel only has at the end.
      if (phase.kind == Kind::kReduction && phase.op.isDpsInput(&operand) && root == own_output)
        return false;
    }
  }
  return true;
}

struct RowKernel {
  std::vector<Phase> phases;
  int64_t rows = 0, cols = 0;
};

// What may stand between the ops of a kernel: it moves no data (views, index arithmetic,
// constants) or only allocates. The kernel takes the place of the last op, after them.
bool MayStandBetween(mlir::Operation &op) {
  return mlir::isa<mlir::memref::AllocOp>(op) ||
         (op.getNumRegions() == 0 && mlir::isMemoryEffectFree(&op));
}

// The kernels among `run`, consecutive ops that each may be part of one (AsPhase): from
// each op on, the longest stretch over the rows x columns of the next reduction whose rows
// stay independent, when it holds a reduction.
void KernelsOfRun(std::vector<Phase> run, std::vector<RowKernel> *kernels) {
  size_t i = 0, first_reduction = 0;  // the first reduction at or after i (it only moves on)
  while (i < run.size()) {
    first_reduction = std::max(first_reduction, i);
    while (first_reduction < run.size() && run[first_reduction].kind != Kind::kReduction)
      ++first_reduction;
    if (first_reduction == run.size()) return;
    const auto ranges = run[first_reduction].op.getStaticLoopRanges();
    RowKernel kernel;
    kernel.cols = ranges.back();
    kernel.rows = Product(ranges) / std::max<int64_t>(kernel.cols, 1);
    if (kernel.cols < 2 || kernel.rows < 1 || kernel.rows > std::numeric_limits<int32_t>::max()) {
      i = first_reduction + 1;  // one thread per row is as good, or there is nothing to do
      continue;
    }
    size_t next = i;
    for (; next < run.size() && kernel.phases.size() < kMaxOps; ++next) {
      Phase phase = run[next];
      if (!FitsRows(phase, kernel.rows, kernel.cols)) break;
      kernel.phases.push_back(phase);
      if (!RowsIndependent(kernel.phases)) {
        kernel.phases.pop_back();
        break;
      }
    }
    const bool reduces = std::any_of(kernel.phases.begin(), kernel.phases.end(),
                                     [](const Phase &p) { return p.kind == Kind::kReduction; });
    if (reduces) {
      kernels->push_back(std::move(kernel));
      i = next;
    } else {
      ++i;
    }
  }
}

// The row kernels of `block`, in order.
std::vector<RowKernel> KernelsOfBlock(mlir::Block &block) {
  std::vector<RowKernel> kernels;
  std::vector<Phase> run;
  for (mlir::Operation &op : block) {
    if (std::optional<Phase> phase = AsPhase(&op)) {
      run.push_back(*phase);
    } else if (!MayStandBetween(op)) {
      KernelsOfRun(std::move(run), &kernels);
      run.clear();
    }
  }
  KernelsOfRun(std::move(run), &kernels);
  return kernels;
}

// Emits one row kernel: a block per row, the phases one after the other.
class KernelEmitter {
 public:
  KernelEmitter(mlir::OpBuilder &b, mlir::Location loc) : b_(b), loc_(loc) {}

  void Emit(const RowKernel &kernel) {
    const int64_t threads =
        std::clamp<int64_t>(llvm::PowerOf2Ceil(kernel.cols), kMinThreads, kMaxThreads);
    // One workgroup buffer of partials per element type, which the reductions take in turn:
    // a barrier stands between one's last read and the next one's first write. (One per
    // reduction could outgrow the 48 KB of static shared memory: 32 f64 reductions.)
    std::vector<mlir::Type> partials;
    for (const Phase &phase : kernel.phases) {
      if (phase.kind != Kind::kReduction) continue;
      const mlir::Type type = mlir::MemRefType::get(
          {threads}, phase.combine->getResult(0).getType(), mlir::MemRefLayoutAttrInterface(),
          mlir::gpu::AddressSpaceAttr::get(b_.getContext(), mlir::gpu::AddressSpace::Workgroup));
      if (std::find(partials.begin(), partials.end(), type) == partials.end())
        partials.push_back(type);
    }
    const Value one = Index(1);
    auto launch = mlir::gpu::LaunchOp::create(
        b_, loc_, Index(kernel.rows), one, one, Index(threads), one, one,
        /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr, mlir::ValueRange{},
        partials);
    mlir::OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&launch.getBody().front());
    row_ = launch.getBlockIds().x;
    thread_ = launch.getThreadIds().x;
    threads_ = threads;
    cols_ = kernel.cols;
    for (size_t i = 0; i < kernel.phases.size(); ++i) {
      if (i > 0) mlir::gpu::BarrierOp::create(b_, loc_);
      const Phase &phase = kernel.phases[i];
      if (phase.kind == Kind::kReduction)
        EmitReduction(phase, PartialsFor(launch, phase));
      else if (phase.kind == Kind::kColumns)
        EmitColumns(phase);
      else
        EmitRow(phase);
    }
    mlir::gpu::TerminatorOp::create(b_, loc_);
  }

 private:
  Value Index(int64_t v) { return mlir::arith::ConstantIndexOp::create(b_, loc_, v); }

  // The launch's workgroup buffer for the partials of `phase`'s element type.
  static Value PartialsFor(mlir::gpu::LaunchOp launch, const Phase &phase) {
    const mlir::Type elem = phase.combine->getResult(0).getType();
    for (mlir::BlockArgument buffer : launch.getWorkgroupAttributions())
      if (mlir::cast<mlir::MemRefType>(buffer.getType()).getElementType() == elem) return buffer;
    return {};  // unreachable: Emit makes one for each reduction's type
  }

  // The block's row as indices of `phase`'s row loops (row-major).
  std::vector<Value> RowIndices(const Phase &phase) {
    auto ranges = phase.op.getStaticLoopRanges();
    if (phase.kind != Kind::kRow) ranges.pop_back();
    std::vector<Value> indices(ranges.size());
    Value rest = row_;
    for (size_t i = ranges.size(); i-- > 0;) {
      if (ranges[i] == 1) {
        indices[i] = Index(0);
        continue;
      }
      const Value size = Index(ranges[i]);
      indices[i] = mlir::arith::RemUIOp::create(b_, loc_, rest, size);
      rest = mlir::arith::DivUIOp::create(b_, loc_, rest, size);
    }
    return indices;
  }

  void StoreYield(const Phase &phase, const std::vector<Value> &loops) {
    const mlir::IRMapping values = BodyAt(b_, loc_, phase.op, loops, {});
    const Value result =
        values.lookupOrDefault(phase.op.getBlock()->getTerminator()->getOperand(0));
    mlir::OpOperand &out = *phase.op.getDpsInitOperand(0);
    mlir::memref::StoreOp::create(b_, loc_, result, out.get(),
                                  IndicesAt(b_, loc_, phase.op, out, loops));
  }

  // Every element of the row: thread t takes columns t, t + threads, ...
  void EmitColumns(const Phase &phase) {
    std::vector<Value> loops = RowIndices(phase);
    auto columns = mlir::scf::ForOp::create(b_, loc_, thread_, Index(cols_), Index(threads_));
    mlir::OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(columns.getBody()->getTerminator());
    loops.push_back(columns.getInductionVar());
    StoreYield(phase, loops);
  }

  // One element per row, on thread 0.
  void EmitRow(const Phase &phase) {
    auto first = mlir::scf::IfOp::create(b_, loc_, IsThread(0), /*withElseRegion=*/false);
    mlir::OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(first.getThenRegion().front().getTerminator());
    StoreYield(phase, RowIndices(phase));
  }

  Value IsThread(int64_t t) {
    return mlir::arith::CmpIOp::create(b_, loc_, mlir::arith::CmpIPredicate::eq, thread_, Index(t));
  }

  // The phase's combiner applied to `value` and `accumulator`.
  Value Combine(const Phase &phase, Value value, Value accumulator) {
    const Value own_accumulator = phase.op.getMatchingBlockArgument(phase.op.getDpsInitOperand(0));
    mlir::IRMapping operands;
    for (Value operand : phase.combine->getOperands())
      operands.map(operand, operand == own_accumulator ? accumulator : value);
    return b_.clone(*phase.combine, operands)->getResult(0);
  }

  // The row combined: each thread's partial over its columns, the partials combined as a
  // tree in workgroup memory, the total combined by thread 0 with the output's old value.
  void EmitReduction(const Phase &phase, Value partials) {
    const Value accumulator = phase.op.getMatchingBlockArgument(phase.op.getDpsInitOperand(0));
    const Value identity =
        mlir::arith::ConstantOp::create(b_, loc_, *Identity(phase.combine, accumulator.getType()));
    std::vector<Value> rows = RowIndices(phase);
    auto columns = mlir::scf::ForOp::create(b_, loc_, thread_, Index(cols_), Index(threads_),
                                            mlir::ValueRange{identity});
    {
      // The body itself, with this thread's partial as its accumulator.
      mlir::OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(columns.getBody());
      std::vector<Value> loops = rows;
      loops.push_back(columns.getInductionVar());
      mlir::IRMapping given;
      given.map(accumulator, columns.getRegionIterArgs()[0]);
      const mlir::IRMapping values = BodyAt(b_, loc_, phase.op, loops, given);
      mlir::scf::YieldOp::create(
          b_, loc_, values.lookup(phase.op.getBlock()->getTerminator()->getOperand(0)));
    }
    mlir::memref::StoreOp::create(b_, loc_, columns.getResult(0), partials,
                                  mlir::ValueRange{thread_});
    mlir::gpu::BarrierOp::create(b_, loc_);
    for (int64_t half = threads_ / 2; half >= 1; half /= 2) {
      auto lower = mlir::scf::IfOp::create(
          b_, loc_,
          mlir::arith::CmpIOp::create(b_, loc_, mlir::arith::CmpIPredicate::ult, thread_,
                                      Index(half)),
          /*withElseRegion=*/false);
      {
        mlir::OpBuilder::InsertionGuard guard(b_);
        b_.setInsertionPoint(lower.getThenRegion().front().getTerminator());
        const Value other = mlir::arith::AddIOp::create(b_, loc_, thread_, Index(half));
        const Value mine =
            mlir::memref::LoadOp::create(b_, loc_, partials, mlir::ValueRange{thread_});
        const Value theirs =
            mlir::memref::LoadOp::create(b_, loc_, partials, mlir::ValueRange{other});
        mlir::memref::StoreOp::create(b_, loc_, Combine(phase, theirs, mine), partials,
                                      mlir::ValueRange{thread_});
      }
      mlir::gpu::BarrierOp::create(b_, loc_);
    }
    auto first = mlir::scf::IfOp::create(b_, loc_, IsThread(0), /*withElseRegion=*/false);
    mlir::OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(first.getThenRegion().front().getTerminator());
    mlir::OpOperand &out = *phase.op.getDpsInitOperand(0);
    const std::vector<Value> at = IndicesAt(b_, loc_, phase.op, out, rows);
    const Value total =
        mlir::memref::LoadOp::create(b_, loc_, partials, mlir::ValueRange{Index(0)});
    const Value old = mlir::memref::LoadOp::create(b_, loc_, out.get(), at);
    mlir::memref::StoreOp::create(b_, loc_, Combine(phase, total, old), out.get(), at);
  }

  mlir::OpBuilder &b_;
  mlir::Location loc_;
  Value row_, thread_;
  int64_t threads_ = 0, cols_ = 0;
};

}  // namespace

int RewriteRowsToGpuKernels(mlir::ModuleOp module) {
  module.getContext()
      ->loadDialect<mlir::gpu::GPUDialect, mlir::scf::SCFDialect, mlir::arith::ArithDialect,
                    mlir::memref::MemRefDialect>();
  // Every kernel is found before any is made: making one erases ops, and the blocks of
  // their bodies with them.
  std::vector<RowKernel> kernels;
  module.walk([&](mlir::Block *block) {
    for (RowKernel &kernel : KernelsOfBlock(*block)) kernels.push_back(std::move(kernel));
  });
  int made = 0;
  for (const RowKernel &kernel : kernels) {
    mlir::Operation *last = kernel.phases.back().op;
    mlir::OpBuilder b(last);
    KernelEmitter(b, last->getLoc()).Emit(kernel);
    for (auto phase = kernel.phases.rbegin(); phase != kernel.phases.rend(); ++phase)
      phase->op->erase();
    ++made;
  }
  return made;
}

}  // namespace tinymlir
