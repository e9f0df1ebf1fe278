#include "core/targets/gpu/compile/gpu_matmul.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/compiler/passes/buffer_root.h"
#include "core/compiler/passes/linalg_point.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace tinymlir {
namespace {

using mlir::Value;

// The constants every kernel below builds: an index, and the zero of its element type.
Value IndexConstant(mlir::OpBuilder &b, mlir::Location loc, int64_t v) {
  return mlir::arith::ConstantIndexOp::create(b, loc, v).getResult();
}
Value ZeroOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Type elem) {
  return mlir::arith::ConstantOp::create(b, loc, elem, b.getZeroAttr(elem)).getResult();
}

// An elementwise linalg.generic after a matmul that reads C element by element (a bias, a
// residual, GELU, the attention's scale and mask; EpilogueAfter finds it): its body runs in
// the kernel, on the sum each thread has, instead of in a kernel of its own after it, and
// its result goes to its own output. `store_c` when C is read by anything else too, so the
// kernel still stores the plain sum there.
struct Epilogue {
  mlir::linalg::GenericOp op;
  bool store_c = true;
  mlir::AffineMap c_map;  // how the op reads C: a permutation of its loops (a transpose)
};

// Stores C's element at `at` (its indices): `sum`, or the epilogue's value of it.
void StoreResult(mlir::OpBuilder &b, mlir::Location loc, const Epilogue *epilogue, Value c,
                 Value sum, const std::vector<Value> &at) {
  if (!epilogue || epilogue->store_c) mlir::memref::StoreOp::create(b, loc, sum, c, at);
  if (!epilogue) return;
  mlir::linalg::GenericOp op = epilogue->op;
  // The op's loop indices at C's element `at`; C itself is the sum.
  std::vector<Value> point(at.size());
  for (size_t j = 0; j < at.size(); ++j) point[epilogue->c_map.getDimPosition(j)] = at[j];
  mlir::IRMapping given;
  for (mlir::OpOperand &operand : op->getOpOperands())
    if (operand.get() == c) given.map(op.getMatchingBlockArgument(&operand), sum);
  const mlir::IRMapping values = BodyAt(b, loc, op, point, given);
  mlir::OpOperand &out = *op.getDpsInitOperand(0);
  mlir::memref::StoreOp::create(
      b, loc, values.lookupOrDefault(op.getBlock()->getTerminator()->getOperand(0)), out.get(),
      IndicesAt(b, loc, op, out, point));
}

// C (+)= A @ B for one matmul (batch = false: 2-D operands) or batch matmul (3-D).
// `initial`, when set, is the value every element of C holds (a fill just before): the kernel
// adds its sum to that instead of reading C.
void EmitTiledKernel(mlir::OpBuilder &b, mlir::Location loc, Value a, Value bm, Value c,
                     Value initial, const Epilogue *epilogue, bool batch, int64_t tile) {
  auto c_type = mlir::cast<mlir::MemRefType>(c.getType());
  auto a_type = mlir::cast<mlir::MemRefType>(a.getType());
  mlir::Type elem = c_type.getElementType();
  const int r = batch ? 1 : 0;  // index of the M dimension
  const int64_t m = c_type.getDimSize(r), n = c_type.getDimSize(r + 1);
  const int64_t k = a_type.getDimSize(r + 1), batches = batch ? c_type.getDimSize(0) : 1;
  auto index = [&](int64_t v) { return IndexConstant(b, loc, v); };
  const Value t = index(tile), one = index(1);
  auto ceil_div = [&](int64_t x) { return index((x + tile - 1) / tile); };

  auto shared = mlir::MemRefType::get(
      {tile, tile}, elem, mlir::MemRefLayoutAttrInterface(),
      mlir::gpu::AddressSpaceAttr::get(b.getContext(), mlir::gpu::AddressSpace::Workgroup));
  auto launch = mlir::gpu::LaunchOp::create(b, loc, ceil_div(n), ceil_div(m), index(batches), t,
                                            t, one, /*dynamicSharedMemorySize=*/nullptr,
                                            /*asyncTokenType=*/nullptr, mlir::ValueRange{},
                                            mlir::TypeRange{shared, shared});
  mlir::OpBuilder::InsertionGuard guard(b);
  mlir::Block &body = launch.getBody().front();
  b.setInsertionPointToStart(&body);
  Value tile_a = launch.getWorkgroupAttributions()[0];
  Value tile_b = launch.getWorkgroupAttributions()[1];
  const Value tx = launch.getThreadIds().x, ty = launch.getThreadIds().y;
  const Value z = launch.getBlockIds().z;
  const Value row = mlir::arith::AddIOp::create(
      b, loc, mlir::arith::MulIOp::create(b, loc, launch.getBlockIds().y, t), ty);
  const Value col = mlir::arith::AddIOp::create(
      b, loc, mlir::arith::MulIOp::create(b, loc, launch.getBlockIds().x, t), tx);
  const Value zero = ZeroOf(b, loc, elem);
  auto less = [&](Value x, int64_t bound) {
    return mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, x, index(bound))
        .getResult();
  };
  auto indices = [&](Value i, Value j) {
    return batch ? std::vector<Value>{z, i, j} : std::vector<Value>{i, j};
  };
  // matrix[i, j] where both are in bounds, else 0.
  auto load_or_zero = [&](Value matrix, Value i, int64_t rows, Value j, int64_t cols) {
    Value inside = mlir::arith::AndIOp::create(b, loc, less(i, rows), less(j, cols));
    auto if_op = mlir::scf::IfOp::create(b, loc, elem, inside, /*withElseRegion=*/true);
    {
      mlir::OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&if_op.getThenRegion().front());
      Value v = mlir::memref::LoadOp::create(b, loc, matrix, indices(i, j));
      mlir::scf::YieldOp::create(b, loc, v);
      b.setInsertionPointToStart(&if_op.getElseRegion().front());
      mlir::scf::YieldOp::create(b, loc, zero);
    }
    return if_op.getResult(0);
  };

  auto steps = mlir::scf::ForOp::create(b, loc, index(0), index(k), t, mlir::ValueRange{zero});
  {
    mlir::OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(steps.getBody());
    const Value k0 = steps.getInductionVar();
    const Value acc = steps.getRegionIterArgs()[0];
    Value a_col = mlir::arith::AddIOp::create(b, loc, k0, tx);
    Value b_row = mlir::arith::AddIOp::create(b, loc, k0, ty);
    mlir::memref::StoreOp::create(b, loc, load_or_zero(a, row, m, a_col, k), tile_a,
                                  mlir::ValueRange{ty, tx});
    mlir::memref::StoreOp::create(b, loc, load_or_zero(bm, b_row, k, col, n), tile_b,
                                  mlir::ValueRange{ty, tx});
    mlir::gpu::BarrierOp::create(b, loc);
    auto inner = mlir::scf::ForOp::create(b, loc, index(0), t, one, mlir::ValueRange{acc});
    {
      mlir::OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(inner.getBody());
      const Value kk = inner.getInductionVar();
      Value x = mlir::memref::LoadOp::create(b, loc, tile_a, mlir::ValueRange{ty, kk});
      Value y = mlir::memref::LoadOp::create(b, loc, tile_b, mlir::ValueRange{kk, tx});
      Value sum = mlir::arith::AddFOp::create(b, loc, inner.getRegionIterArgs()[0],
                                              mlir::arith::MulFOp::create(b, loc, x, y));
      mlir::scf::YieldOp::create(b, loc, sum);
    }
    mlir::gpu::BarrierOp::create(b, loc);
    mlir::scf::YieldOp::create(b, loc, inner.getResult(0));
  }
  Value inside = mlir::arith::AndIOp::create(b, loc, less(row, m), less(col, n));
  auto store = mlir::scf::IfOp::create(b, loc, mlir::TypeRange{}, inside, /*withElseRegion=*/false);
  {
    mlir::OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&store.getThenRegion().front());
    Value old = initial ? initial : mlir::memref::LoadOp::create(b, loc, c, indices(row, col));
    Value sum = mlir::arith::AddFOp::create(b, loc, old, steps.getResult(0));
    StoreResult(b, loc, epilogue, c, sum, indices(row, col));
  }
  mlir::gpu::TerminatorOp::create(b, loc);
}

// The sum of a(k) * b(k) over k = first, first + stride, ... below `k`, in that order (0
// when there is none), for the dot products of EmitDotKernel. The loop
// is unrolled kDotUnroll times, the loads of each step emitted before its products: a GPU
// issues a warp's instructions in order, so a product waiting for its load would otherwise
// keep the next load from leaving, and a decode step's products would run at one memory
// latency per step instead of at the memory's bandwidth (measured on an H200: the one-row
// kernel took 146 us for GPT-2's 3072 x 768 weights, its time growing with K whatever N).
constexpr int64_t kDotUnroll = 4;

Value EmitStridedDot(mlir::OpBuilder &b, mlir::Location loc, Value first, int64_t stride, int64_t k,
                     mlir::Type elem, llvm::function_ref<Value(Value)> load_a,
                     llvm::function_ref<Value(Value)> load_b) {
  auto index = [&](int64_t v) { return IndexConstant(b, loc, v); };
  const Value zero = ZeroOf(b, loc, elem);
  const int64_t step = stride * kDotUnroll, unrolled_end = k / step * step;
  // The unrolled steps: every k they reach is below unrolled_end (first < stride).
  auto unrolled = mlir::scf::ForOp::create(b, loc, index(0), index(unrolled_end), index(step),
                                           mlir::ValueRange{zero});
  {
    mlir::OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(unrolled.getBody());
    const Value base = mlir::arith::AddIOp::create(b, loc, unrolled.getInductionVar(), first);
    std::vector<Value> xs, ys;
    for (int64_t u = 0; u < kDotUnroll; ++u) {
      const Value kk = mlir::arith::AddIOp::create(b, loc, base, index(u * stride));
      xs.push_back(load_a(kk));
      ys.push_back(load_b(kk));
    }
    Value sum = unrolled.getRegionIterArgs()[0];
    for (int64_t u = 0; u < kDotUnroll; ++u)
      sum = mlir::arith::AddFOp::create(b, loc, sum,
                                        mlir::arith::MulFOp::create(b, loc, xs[u], ys[u]));
    mlir::scf::YieldOp::create(b, loc, sum);
  }
  // The rest, one at a time.
  auto rest = mlir::scf::ForOp::create(
      b, loc, mlir::arith::AddIOp::create(b, loc, index(unrolled_end), first), index(k),
      index(stride), mlir::ValueRange{unrolled.getResult(0)});
  {
    mlir::OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(rest.getBody());
    const Value kk = rest.getInductionVar();
    Value sum =
        mlir::arith::AddFOp::create(b, loc, rest.getRegionIterArgs()[0],
                                    mlir::arith::MulFOp::create(b, loc, load_a(kk), load_b(kk)));
    mlir::scf::YieldOp::create(b, loc, sum);
  }
  return rest.getResult(0);
}

// The sum, in order, of the `splits` partial sums of one element in workgroup memory
// `partials`: at [0 .. splits) x [element] (`element_major`: [element] x [0 .. splits)).
Value SumPartials(mlir::OpBuilder &b, mlir::Location loc, Value partials, Value element,
                  int64_t splits, bool element_major, mlir::Type elem) {
  auto index = [&](int64_t v) { return IndexConstant(b, loc, v); };
  const Value zero = ZeroOf(b, loc, elem);
  auto total =
      mlir::scf::ForOp::create(b, loc, index(0), index(splits), index(1), mlir::ValueRange{zero});
  mlir::OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(total.getBody());
  const Value i = total.getInductionVar();
  Value part = mlir::memref::LoadOp::create(
      b, loc, partials,
      element_major ? mlir::ValueRange{element, i} : mlir::ValueRange{i, element});
  mlir::scf::YieldOp::create(
      b, loc,
      mlir::ValueRange{
          mlir::arith::AddFOp::create(b, loc, total.getRegionIterArgs()[0], part).getResult()});
  return total.getResult(0);
}

// C (+)= A @ B as one dot product of length K per element of C, when A (and C) have one
// row or B (and C) one column; the tiled kernel would leave all but one row (or column) of
// each block's threads idle. Each element's dot product is split among `splits` threads
// (EmitStridedDot), whose partial sums meet in workgroup memory at one barrier; the first of
// them adds them in order to C's element. The two layouts differ in which thread dimension
// runs along C's elements, so that each warp reads consecutive memory (coalesced):
//   - one row (a decode step's projections and attention): thread x along C's columns, 32
//     per block, so a warp reads 32 consecutive elements of a row of B; 32 slices of K on
//     thread y. GPT-2's widths make few blocks (24 for 768 columns), so each has many slices
//     of K: the loads in flight, not the blocks, keep the memory busy.
//   - one column (GPT-2's logits: the embedding matrix times the last hidden state, 50,257
//     rows of 768): a warp per row of A, its 32 lanes on thread x along the row, 8 rows per
//     block (a decode step's logits took 301 us on an H200 in the tiled kernel, 65 us here).
// A batch matmul puts the batch on the grid's z dimension. Up to kDotKernelRows rows of A
// (a batch's decode step, a short prompt) take the one-row layout with a block row per row
// of A on the grid's y dimension: each element of C is summed exactly as with one row, so a
// batch's sequences and a short prompt's rows get their decode steps' bits.
constexpr int64_t kDotKernelRows = 16;
struct DotLayout {
  bool one_row;                // else one column
  int64_t elements_per_block;  // of C, along thread x (one row) or y (one column)
  int64_t splits;              // threads per element's dot product, along the other
};
constexpr DotLayout kOneRowLayout = {true, 32, 32};
constexpr DotLayout kOneColumnLayout = {false, 8, 32};

void EmitDotKernel(mlir::OpBuilder &b, mlir::Location loc, Value a, Value bm, Value c,
                   Value initial, const Epilogue *epilogue, bool batch, const DotLayout &layout,
                   int64_t rows = 1) {
  auto c_type = mlir::cast<mlir::MemRefType>(c.getType());
  auto a_type = mlir::cast<mlir::MemRefType>(a.getType());
  mlir::Type elem = c_type.getElementType();
  const int r = batch ? 1 : 0;  // index of the M dimension
  const int64_t elements = c_type.getDimSize(layout.one_row ? r + 1 : r);
  const int64_t k = a_type.getDimSize(r + 1), batches = batch ? c_type.getDimSize(0) : 1;
  auto index = [&](int64_t v) { return IndexConstant(b, loc, v); };
  const Value zero_index = index(0), one = index(1);
  const int64_t block_x = layout.one_row ? layout.elements_per_block : layout.splits;
  const int64_t block_y = layout.one_row ? layout.splits : layout.elements_per_block;

  auto partials_type = mlir::MemRefType::get(
      {block_y, block_x}, elem, mlir::MemRefLayoutAttrInterface(),
      mlir::gpu::AddressSpaceAttr::get(b.getContext(), mlir::gpu::AddressSpace::Workgroup));
  auto launch = mlir::gpu::LaunchOp::create(
      b, loc, index((elements + layout.elements_per_block - 1) / layout.elements_per_block),
      index(rows), index(batches), index(block_x), index(block_y), one,
      /*dynamicSharedMemorySize=*/nullptr,
      /*asyncTokenType=*/nullptr, mlir::ValueRange{}, mlir::TypeRange{partials_type});
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value partials = launch.getWorkgroupAttributions()[0];
  const Value tx = launch.getThreadIds().x, ty = launch.getThreadIds().y;
  const Value z = launch.getBlockIds().z;
  const Value row = layout.one_row ? launch.getBlockIds().y : zero_index;  // of A and C
  const Value along = layout.one_row ? tx : ty, split = layout.one_row ? ty : tx;
  const Value element = mlir::arith::AddIOp::create(
      b, loc,
      mlir::arith::MulIOp::create(b, loc, launch.getBlockIds().x, index(layout.elements_per_block)),
      along);
  const Value zero = ZeroOf(b, loc, elem);
  const Value in_range = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult,
                                                     element, index(elements));
  auto indices = [&](Value i, Value j) {
    return batch ? std::vector<Value>{z, i, j} : std::vector<Value>{i, j};
  };
  // C's element, and A's and B's at k of its dot product.
  const std::vector<Value> c_at =
      layout.one_row ? indices(row, element) : indices(element, zero_index);
  auto load_a = [&](Value kk) {
    return mlir::memref::LoadOp::create(b, loc, a, indices(layout.one_row ? row : element, kk));
  };
  auto load_b = [&](Value kk) {
    return mlir::memref::LoadOp::create(b, loc, bm,
                                        indices(kk, layout.one_row ? element : zero_index));
  };

  // This thread's part of the dot product (0 for an element past the end).
  auto part = mlir::scf::IfOp::create(b, loc, elem, in_range, /*withElseRegion=*/true);
  {
    mlir::OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&part.getThenRegion().front());
    mlir::scf::YieldOp::create(
        b, loc, EmitStridedDot(b, loc, split, layout.splits, k, elem, load_a, load_b));
    b.setInsertionPointToStart(&part.getElseRegion().front());
    mlir::scf::YieldOp::create(b, loc, zero);
  }
  mlir::memref::StoreOp::create(b, loc, part.getResult(0), partials, mlir::ValueRange{ty, tx});
  mlir::gpu::BarrierOp::create(b, loc);

  Value first_split =
      mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, split, zero_index);
  Value adds = mlir::arith::AndIOp::create(b, loc, first_split, in_range);
  auto store = mlir::scf::IfOp::create(b, loc, mlir::TypeRange{}, adds, /*withElseRegion=*/false);
  {
    mlir::OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&store.getThenRegion().front());
    const Value total = SumPartials(b, loc, partials, along, layout.splits,
                                    /*element_major=*/!layout.one_row, elem);
    Value old = initial ? initial : mlir::memref::LoadOp::create(b, loc, c, c_at);
    StoreResult(b, loc, epilogue, c, mlir::arith::AddFOp::create(b, loc, old, total), c_at);
  }
  mlir::gpu::TerminatorOp::create(b, loc);
}

// The buffers `op` (and what it holds) uses, as BufferRoot gives them.
std::vector<Value> BuffersUsed(mlir::Operation *op) {
  std::vector<Value> buffers;
  op->walk([&](mlir::Operation *inner) {
    for (Value operand : inner->getOperands())
      if (mlir::isa<mlir::MemRefType>(operand.getType())) buffers.push_back(BufferRoot(operand));
  });
  return buffers;
}

bool Uses(const std::vector<Value> &buffers, Value root) {
  return std::find(buffers.begin(), buffers.end(), root) != buffers.end();
}

// How far from a product its fill, its epilogue and the copies it reads are looked for, in
// ops: a bound that keeps the rewrite linear in the program.
constexpr int kSearchedOps = 64;

// The linalg.fill of all of C before `matmul` with nothing between them that touches C's
// buffer, if there is one: the kernel starts from its value instead of reading C, so the
// fill (a launch of its own) can go; the kernel writes every element of C. Bufferization
// often puts the zeroing of one product's C before another product (CSE hoists the fills).
mlir::linalg::FillOp FillBefore(mlir::Operation *matmul, Value c) {
  const Value root = BufferRoot(c);
  int searched = 0;
  for (mlir::Operation *op = matmul->getPrevNode(); op && searched < kSearchedOps;
       op = op->getPrevNode(), ++searched) {
    if (auto fill = mlir::dyn_cast<mlir::linalg::FillOp>(op);
        fill && fill.hasPureBufferSemantics() && fill.getDpsInits()[0] == c)
      return fill;
    if (Uses(BuffersUsed(op), root)) return {};
  }
  return {};
}

// Whether `op`, the first op after `matmul` to use C, can be its epilogue: it is
// elementwise over C's elements (all loops parallel, as many as C has dimensions, C read and
// the output written through permutations of them: a transpose, such as the attention's
// heads merged back into rows, is an epilogue too), reads C, and its body computes values
// only. Each thread reads the other inputs at its own element (through their maps: a
// broadcast bias, the mask) and writes the output's element, while other threads still read
// A and B and, without a fill, their own element of C: so the output is C itself (through
// C's own indices) or a buffer the product does not read, and no input is read through
// another element of a buffer the kernel writes.
std::optional<Epilogue> AsEpilogue(mlir::linalg::GenericOp op, mlir::Operation *matmul,
                                   mlir::linalg::FillOp fill, Value a, Value bm, Value c) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1) return std::nullopt;
  auto c_type = mlir::cast<mlir::MemRefType>(c.getType());
  const Value out = op.getDpsInits()[0];
  const mlir::AffineMap out_map = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (op.getNumLoops() != static_cast<unsigned>(c_type.getRank()) ||
      op.getNumParallelLoops() != op.getNumLoops() || !mlir::isa<mlir::MemRefType>(out.getType()) ||
      !out_map.isPermutation())
    return std::nullopt;
  for (mlir::Operation &inner : op.getRegion().front().without_terminator())
    if (mlir::isa<mlir::linalg::IndexOp>(inner) || inner.getNumRegions() != 0 ||
        !mlir::isMemoryEffectFree(&inner))
      return std::nullopt;
  const Value out_root = BufferRoot(out), c_root = BufferRoot(c);
  if (out != c && (out_root == BufferRoot(a) || out_root == BufferRoot(bm) || out_root == c_root))
    return std::nullopt;
  mlir::AffineMap c_map;
  for (mlir::OpOperand *input : op.getDpsInputOperands()) {
    const mlir::AffineMap map = op.getMatchingIndexingMap(input);
    if (input->get() == c) {
      if (!map.isPermutation() || (c_map && map != c_map)) return std::nullopt;
      c_map = map;
      continue;
    }
    for (mlir::AffineExpr e : map.getResults())
      if (!mlir::isa<mlir::AffineDimExpr, mlir::AffineConstantExpr>(e)) return std::nullopt;
    const Value root = BufferRoot(input->get());
    const bool own_element = input->get() == out && map == out_map;
    if (!own_element && (root == out_root || root == c_root)) return std::nullopt;
  }
  if (!c_map || (out == c && out_map != c_map)) return std::nullopt;
  // Into C itself, the result is all C holds. Elsewhere, C is still stored unless it is an
  // allocation of its own that nothing but the fill, the product, this op and its
  // deallocation uses.
  bool c_dead_after = c.getDefiningOp<mlir::memref::AllocOp>() != nullptr;
  for (mlir::Operation *user : c.getUsers())
    if (user != matmul && user != op && user != fill.getOperation() &&
        !mlir::isa<mlir::memref::DeallocOp>(user))
      c_dead_after = false;
  return Epilogue{op, out != c && !c_dead_after, c_map};
}

// The epilogue of `matmul`: the first op after it that uses C, if that can be one
// (AsEpilogue), and runs as well at the product's place, before the ops between them. Those
// touch none of its buffers, and its operands are defined before the product (or are new
// buffers, allocated there instead). Bufferization keeps the trace's order, where a
// product's consumer need not come right after it. The search stops after kSearchedOps ops.
std::optional<Epilogue> EpilogueAfter(mlir::Operation *matmul, mlir::linalg::FillOp fill, Value a,
                                      Value bm, Value c) {
  const Value c_root = BufferRoot(c);
  std::vector<Value> between;  // the buffers the ops between use
  int searched = 0;
  for (mlir::Operation *op = matmul->getNextNode(); op && searched < kSearchedOps;
       op = op->getNextNode(), ++searched) {
    std::vector<Value> used = BuffersUsed(op);
    if (!Uses(used, c_root)) {
      between.insert(between.end(), used.begin(), used.end());
      continue;
    }
    auto generic = mlir::dyn_cast<mlir::linalg::GenericOp>(op);
    if (!generic) return std::nullopt;
    for (Value root : used)
      if (Uses(between, root)) return std::nullopt;
    // Operands defined after the product: only new buffers (an allocation of a static
    // shape), which move before it.
    std::vector<mlir::Operation *> allocations;
    for (Value operand : generic->getOperands())
      if (mlir::Operation *def = operand.getDefiningOp();
          def && def->getBlock() == matmul->getBlock() && !def->isBeforeInBlock(matmul)) {
        if (!mlir::isa<mlir::memref::AllocOp>(def) || def->getNumOperands() != 0)
          return std::nullopt;
        allocations.push_back(def);
      }
    std::optional<Epilogue> epilogue = AsEpilogue(generic, matmul, fill, a, bm, c);
    if (epilogue)
      for (mlir::Operation *allocation : allocations) allocation->moveBefore(matmul);
    return epilogue;
  }
  return std::nullopt;
}

// Whether `op` writes every element of `buffer` without reading it first: a fill, or an
// elementwise op into it (identity map, every loop parallel) that reads neither the
// buffer's old values nor any view of it.
bool OverwritesWhole(mlir::Operation *op, Value buffer) {
  if (auto fill = mlir::dyn_cast<mlir::linalg::FillOp>(op))
    return fill.hasPureBufferSemantics() && fill.getDpsInits()[0] == buffer;
  auto generic = mlir::dyn_cast<mlir::linalg::GenericOp>(op);
  if (!generic || !generic.hasPureBufferSemantics() || generic.getNumDpsInits() != 1 ||
      generic.getDpsInits()[0] != buffer ||
      !generic.getMatchingIndexingMap(generic.getDpsInitOperand(0)).isIdentity() ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !generic.getMatchingBlockArgument(generic.getDpsInitOperand(0)).use_empty())
    return false;
  for (Value input : generic.getDpsInputs())
    if (mlir::isa<mlir::MemRefType>(input.getType()) && BufferRoot(input) == BufferRoot(buffer)) return false;
  return true;
}

// The ops that use `buffer`, directly or through views of it (the views left out), as the
// ops of `block` they are in: the host op around a kernel that uses it, say.
std::vector<mlir::Operation *> UsersInBlock(Value buffer, mlir::Block *block) {
  std::vector<mlir::Operation *> users;
  std::vector<Value> views = {buffer};
  while (!views.empty()) {
    const Value view = views.back();
    views.pop_back();
    for (mlir::Operation *user : view.getUsers()) {
      if (auto like = mlir::dyn_cast<mlir::ViewLikeOpInterface>(user);
          (like && like.getViewSource() == view) || mlir::isa<mlir::memref::TransposeOp>(user)) {
        views.push_back(user->getResult(0));
        continue;
      }
      users.push_back(block->findAncestorOpInBlock(*user));
    }
  }
  return users;
}

// `operand` of `matmul`, or a view that reads its data in place: when the operand is a new
// buffer that a permuted copy of another fills for this product (a linalg.generic whose body
// yields its input, read through a permutation; the attention's heads split out of q and
// v), the product reads the other buffer through a memref.transpose view and the copy goes
// (a launch less, and its traffic). Only when the permutation keeps the last dimension
// last: rows stay contiguous, so the kernels' reads stay coalesced (the keys, transposed,
// keep their copy). The copy is the buffer's last use before the product, at most
// kSearchedOps ops before it, and nothing between them touches the buffer copied.
// Bufferization reuses dead buffers: uses before the copy are an earlier life of this one,
// which the copy overwrote; a later life must begin by writing it whole.
Value ReadInPlace(mlir::Operation *matmul, Value operand) {
  auto allocation = operand.getDefiningOp<mlir::memref::AllocOp>();
  if (!allocation) return operand;
  mlir::linalg::GenericOp copy;
  int searched = 0;
  for (mlir::Operation *op = matmul->getPrevNode(); op && !copy; op = op->getPrevNode()) {
    if (++searched > kSearchedOps) return operand;
    if (!Uses(BuffersUsed(op), operand)) continue;
    copy = mlir::dyn_cast<mlir::linalg::GenericOp>(op);
    if (!copy) return operand;
  }
  if (!copy || !copy.hasPureBufferSemantics() || copy.getNumDpsInputs() != 1 ||
      copy.getNumDpsInits() != 1 || copy.getDpsInits()[0] != operand ||
      copy.getNumParallelLoops() != copy.getNumLoops())
    return operand;
  mlir::Block &body = copy.getRegion().front();
  if (body.getOperations().size() != 1 ||
      body.getTerminator()->getOperands() != mlir::ValueRange{body.getArgument(0)})
    return operand;
  const mlir::AffineMap in_map = copy.getMatchingIndexingMap(copy.getDpsInputOperand(0));
  const unsigned rank = in_map.getNumResults();
  if (!copy.getMatchingIndexingMap(copy.getDpsInitOperand(0)).isIdentity() ||
      !in_map.isPermutation() || rank == 0 || in_map.getDimPosition(rank - 1) != rank - 1)
    return operand;
  const Value source = copy.getDpsInputs()[0], root = BufferRoot(source);
  for (mlir::Operation *op = copy->getNextNode(); op != matmul; op = op->getNextNode())
    if (Uses(BuffersUsed(op), root)) return operand;
  mlir::Operation *next_use = nullptr;  // the buffer's first use after the product
  for (mlir::Operation *user : UsersInBlock(operand, matmul->getBlock())) {
    if (!user) return operand;
    if (user == matmul || mlir::isa<mlir::memref::DeallocOp>(user) ||
        !matmul->isBeforeInBlock(user))
      continue;
    if (!next_use || user->isBeforeInBlock(next_use)) next_use = user;
  }
  if (next_use && !OverwritesWhole(next_use, operand)) return operand;
  // The copy's element [d] is source[in_map(d)]; a transpose's element [i] is
  // source[j] with j's dimension perm(i) = i: perm is in_map's inverse.
  mlir::OpBuilder b(matmul);
  Value view = mlir::memref::TransposeOp::create(
      b, copy.getLoc(), source, mlir::AffineMapAttr::get(mlir::inversePermutation(in_map)));
  copy->erase();
  return view;
}

// Erases `buffer`'s allocation and deallocations when nothing else uses it any more.
void EraseIfUnused(Value buffer) {
  auto allocation = buffer.getDefiningOp<mlir::memref::AllocOp>();
  if (!allocation) return;
  for (mlir::Operation *user : allocation->getUsers())
    if (!mlir::isa<mlir::memref::DeallocOp>(user)) return;
  for (mlir::Operation *user : llvm::make_early_inc_range(allocation->getUsers())) user->erase();
  allocation->erase();
}

bool Supported(mlir::linalg::LinalgOp op) {
  for (Value v : op->getOperands()) {
    auto type = mlir::dyn_cast<mlir::MemRefType>(v.getType());
    if (!type || !type.hasStaticShape() || !(type.getElementType().isF32() || type.getElementType().isF64()))
      return false;
    if (type.getElementType() != mlir::cast<mlir::MemRefType>(op->getOperand(0).getType()).getElementType())
      return false;
  }
  return true;
}

}  // namespace

int RewriteMatmulsToGpuKernels(mlir::ModuleOp module, int64_t tile) {
  // The dialects of the kernel, which the traced module did not need.
  module.getContext()->loadDialect<mlir::gpu::GPUDialect, mlir::scf::SCFDialect,
                                   mlir::arith::ArithDialect, mlir::memref::MemRefDialect>();
  std::vector<mlir::Operation *> matmuls;
  module.walk([&](mlir::linalg::MatmulOp op) {
    if (!op.hasUserDefinedMaps() && Supported(op)) matmuls.push_back(op);
  });
  module.walk([&](mlir::linalg::BatchMatmulOp op) {
    if (!op.hasUserDefinedMaps() && Supported(op)) matmuls.push_back(op);
  });
  for (mlir::Operation *op : matmuls) {
    mlir::OpBuilder b(op);
    auto linalg = mlir::cast<mlir::linalg::LinalgOp>(op);
    const Value a_copy = linalg.getDpsInputs()[0], b_copy = linalg.getDpsInputs()[1];
    const Value a = ReadInPlace(op, a_copy);
    const Value bm = b_copy == a_copy ? a : ReadInPlace(op, b_copy);
    const Value c = linalg.getDpsInits()[0];
    const bool batch = mlir::isa<mlir::linalg::BatchMatmulOp>(op);
    const int64_t rows = mlir::cast<mlir::MemRefType>(c.getType()).getDimSize(batch ? 1 : 0);
    mlir::linalg::FillOp fill = FillBefore(op, c);
    const Value initial = fill ? fill.getDpsInputs()[0] : Value();
    const std::optional<Epilogue> epilogue = EpilogueAfter(op, fill, a, bm, c);
    const Epilogue *after = epilogue ? &*epilogue : nullptr;
    const int64_t columns = mlir::cast<mlir::MemRefType>(c.getType()).getDimSize(batch ? 2 : 1);
    if (rows == 1)
      EmitDotKernel(b, op->getLoc(), a, bm, c, initial, after, batch, kOneRowLayout);
    else if (columns == 1)
      EmitDotKernel(b, op->getLoc(), a, bm, c, initial, after, batch, kOneColumnLayout);
    else if (rows <= kDotKernelRows)
      EmitDotKernel(b, op->getLoc(), a, bm, c, initial, after, batch, kOneRowLayout, rows);
    else
      EmitTiledKernel(b, op->getLoc(), a, bm, c, initial, after, batch, tile);
    op->erase();
    if (fill) fill->erase();
    if (epilogue) epilogue->op->erase();
    if (a != a_copy) EraseIfUnused(a_copy);
    if (bm != b_copy && b_copy != a_copy) EraseIfUnused(b_copy);
  }
  return static_cast<int>(matmuls.size());
}

}  // namespace tinymlir
