#include "core/compiler/passes/free_buffers.h"

#include <algorithm>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tinymlir {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

uint64_t BufferBytes(mlir::Value buffer) {
  auto type = mlir::cast<mlir::MemRefType>(buffer.getType());
  if (!type.hasStaticShape()) return UINT64_MAX;
  const uint64_t elem = (type.getElementTypeBitWidth() + 7) / 8;
  const uint64_t n = static_cast<uint64_t>(type.getNumElements());
  return n != 0 && elem > UINT64_MAX / n ? UINT64_MAX : n * elem;
}

// The last operation of `block` (by `position`) that uses `buffer` or a value derived from
// it, or `buffer`'s allocation when nothing uses it. Null, with an error emitted, when a use
// is outside the block or is its terminator (the buffer escapes).
mlir::Operation *LastUse(mlir::Operation *alloc, mlir::Block &block,
                         const llvm::DenseMap<mlir::Operation *, size_t> &position) {
  mlir::Operation *last = alloc;
  llvm::SmallVector<mlir::Value> work{alloc->getResult(0)};
  llvm::DenseSet<mlir::Value> seen{alloc->getResult(0)};
  while (!work.empty()) {
    mlir::Value value = work.pop_back_val();
    for (mlir::Operation *user : value.getUsers()) {
      mlir::Operation *at = block.findAncestorOpInBlock(*user);
      if (!at || at == block.getTerminator()) {
        user->emitError(std::string(kFreeBuffersPassName) +
                        ": a buffer the program allocates reaches this operation, outside "
                        "the straight-line code it can free buffers in");
        return nullptr;
      }
      if (position.lookup(at) > position.lookup(last)) last = at;
      for (mlir::Value result : user->getResults())
        if (seen.insert(result).second) work.push_back(result);
    }
  }
  return last;
}

mlir::LogicalResult FreeBuffersIn(mlir::func::FuncOp function) {
  if (function.isExternal()) return mlir::success();
  mlir::LogicalResult result = mlir::success();
  function.walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::memref::DeallocOp>(op) ||
        (mlir::isa<mlir::memref::AllocOp>(op) && op->getBlock() != &function.getBody().front())) {
      op->emitError(std::string(kFreeBuffersPassName) +
                    ": only allocations at the top of a one-block function are expected");
      result = mlir::failure();
    }
  });
  if (mlir::failed(result)) return result;
  if (!function.getBody().hasOneBlock()) {
    function.emitError(std::string(kFreeBuffersPassName) + ": a one-block function is expected");
    return mlir::failure();
  }
  mlir::Block &block = function.getBody().front();
  // Positions are numbered once: inserting into the block invalidates its own order, and
  // asking for it again after each insertion would cost the block's length per buffer.
  llvm::DenseMap<mlir::Operation *, size_t> position;
  for (mlir::Operation &op : block) position.try_emplace(&op, position.size());
  std::vector<std::pair<mlir::memref::AllocOp, mlir::Operation *>> frees;
  for (mlir::Operation &op : block)
    if (auto alloc = mlir::dyn_cast<mlir::memref::AllocOp>(op)) {
      mlir::Operation *last = LastUse(alloc, block, position);
      if (!last) return mlir::failure();
      frees.emplace_back(alloc, last);
    }
  for (auto [alloc, last] : frees) {
    mlir::OpBuilder b(last->getContext());
    if (BufferBytes(alloc.getResult()) >= kLargeBufferBytes)
      b.setInsertionPoint(block.getTerminator());
    else
      b.setInsertionPointAfter(last);
    mlir::memref::DeallocOp::create(b, alloc.getLoc(), alloc.getResult());
  }
  return mlir::success();
}

class FreeBuffersPass
    : public mlir::PassWrapper<FreeBuffersPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FreeBuffersPass)

  llvm::StringRef getArgument() const override { return kFreeBuffersPassName; }
  llvm::StringRef getDescription() const override {
    return "Every buffer is freed right after its last use (a large one at the end)";
  }
  void runOnOperation() override {
    for (auto function : getOperation().getOps<mlir::func::FuncOp>())
      if (mlir::failed(FreeBuffersIn(function))) return signalPassFailure();
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateFreeBuffersPass() { return std::make_unique<FreeBuffersPass>(); }

uint64_t PeakTemporaryBytes(mlir::ModuleOp module, bool frees_take_effect) {
  uint64_t live = 0, peak = 0;
  llvm::DenseMap<mlir::Value, uint64_t> allocated;
  module.walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::memref::AllocOp, mlir::memref::AllocaOp>(op)) {
      const uint64_t bytes = BufferBytes(op->getResult(0));
      allocated[op->getResult(0)] = bytes;
      live = SaturatingAdd(live, bytes);
      peak = std::max(peak, live);
    } else if (auto dealloc = mlir::dyn_cast<mlir::memref::DeallocOp>(op)) {
      auto it = allocated.find(dealloc.getMemref());
      // A saturated count stays saturated: what it stood for is unknown.
      if (frees_take_effect && it != allocated.end() && live != UINT64_MAX) live -= it->second;
    }
  });
  return peak;
}

}  // namespace tinymlir
