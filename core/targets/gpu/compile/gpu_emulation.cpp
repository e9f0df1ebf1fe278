#include "core/targets/gpu/compile/gpu_emulation.h"

#include <array>
#include <string>
#include <vector>

#include "core/compiler/passes/buffer_root.h"
#include "core/compiler/passes/runtime_calls.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

namespace tinymlir {
namespace {

using mlir::Value;

bool ContainsBarrier(mlir::Operation *op) {
  return op->walk([](mlir::gpu::BarrierOp) { return mlir::WalkResult::interrupt(); })
      .wasInterrupted();
}

// The GPU operations a kernel may use: the ids and dimensions (mapped to the emulation's
// loop variables), barriers (phase boundaries) and the launch's terminator.
bool IsEmulatedGpuOp(mlir::Operation *op) {
  return mlir::isa<mlir::gpu::ThreadIdOp, mlir::gpu::BlockIdOp, mlir::gpu::BlockDimOp,
                   mlir::gpu::GridDimOp, mlir::gpu::BarrierOp, mlir::gpu::TerminatorOp>(op);
}

// A value that can be computed again wherever it is needed: a pure operation without
// regions (arithmetic, index computations, ids).
bool Recomputable(mlir::Operation *op) {
  return op && op->getNumRegions() == 0 && mlir::isMemoryEffectFree(op);
}

int DimensionIndex(mlir::gpu::Dimension d) {
  return d == mlir::gpu::Dimension::x ? 0 : d == mlir::gpu::Dimension::y ? 1 : 2;
}

// The race check's runtime functions (core/targets/gpu/run/emulation_functions.def).
enum class EmulationFunction {
#define TM_RUNTIME_FUNCTION(name, parameters) name,
#include "core/targets/gpu/run/emulation_functions.def"
#undef TM_RUNTIME_FUNCTION
};
#define TM_RUNTIME_FUNCTION(name, parameters) TM_RUNTIME_FUNCTION_ENTRY(name, parameters)
const RuntimeFunction kEmulationFunctions[] = {
#include "core/targets/gpu/run/emulation_functions.def"
};
#undef TM_RUNTIME_FUNCTION

// Emulates one gpu.launch, inserting the host loops before it (the caller erases it).
class LaunchEmulator {
 public:
  LaunchEmulator(mlir::gpu::LaunchOp launch, bool check_races)
      : check_races_(check_races),
        launch_(launch),
        module_(launch->getParentOfType<mlir::ModuleOp>()),
        b_(launch),
        loc_(launch.getLoc()) {}

  Status Run() {
    if (launch_.getAsyncToken() || !launch_.getAsyncDependencies().empty())
      return Unsupported("an asynchronous gpu.launch");
    if (launch_.hasClusterSize()) return Unsupported("a gpu.launch with clusters");
    if (!launch_.getPrivateAttributions().empty())
      return Unsupported("private memory attributions");
    if (!launch_.getBody().hasOneBlock())
      return Unsupported("a kernel body of more than one block");
    std::string unknown;
    launch_.getBody().walk([&](mlir::Operation *op) {
      if (mlir::isa<mlir::gpu::GPUDialect>(op->getDialect()) && !IsEmulatedGpuOp(op) &&
          unknown.empty())
        unknown = op->getName().getStringRef().str();
    });
    if (!unknown.empty()) return Unsupported("the operation " + unknown);

    zero_ = mlir::arith::ConstantIndexOp::create(b_, loc_, 0);
    one_ = mlir::arith::ConstantIndexOp::create(b_, loc_, 1);
    block_size_ = {launch_.getBlockSizeX(), launch_.getBlockSizeY(), launch_.getBlockSizeZ()};
    const std::array<Value, 3> grid = {launch_.getGridSizeX(), launch_.getGridSizeY(),
                                       launch_.getGridSizeZ()};
    grid_size_ = grid;
    // Per-launch buffers are allocated before the block loops and freed after them.
    allocations_ = b_.saveInsertionPoint();
    for (Value attribution : launch_.getWorkgroupAttributions()) {
      auto type = mlir::cast<mlir::MemRefType>(attribution.getType());
      auto host = mlir::MemRefType::get(type.getShape(), type.getElementType(), type.getLayout());
      const Value buffer = Allocate(host, {});
      uniform_.map(attribution, buffer);
      shared_buffers_.insert(buffer);
    }
    const mlir::gpu::KernelDim3 grid_args = launch_.getGridSize();
    const mlir::gpu::KernelDim3 block_args = launch_.getBlockSize();
    uniform_.map(grid_args.x, grid[0]);
    uniform_.map(grid_args.y, grid[1]);
    uniform_.map(grid_args.z, grid[2]);
    uniform_.map(block_args.x, block_size_[0]);
    uniform_.map(block_args.y, block_size_[1]);
    uniform_.map(block_args.z, block_size_[2]);

    if (check_races_)
      Call(EmulationFunction::tm_rt_gpu_emulation_launch_begin,
           {grid[0], grid[1], grid[2], block_size_[0], block_size_[1], block_size_[2]});
    std::array<Value, 3> block_ids;
    for (int d = 2; d >= 0; --d) block_ids[d] = OpenLoop(zero_, grid[d], one_);
    outer_loop_ = block_ids[2].getParentBlock()->getParentOp();
    allocations_ =
        mlir::OpBuilder::InsertPoint(outer_loop_->getBlock(), mlir::Block::iterator(outer_loop_));
    block_linear_ = Linear(block_ids, grid);
    const mlir::gpu::KernelDim3 ids = launch_.getBlockIds();
    uniform_.map(ids.x, block_ids[0]);
    uniform_.map(ids.y, block_ids[1]);
    uniform_.map(ids.z, block_ids[2]);
    block_ids_ = block_ids;

    mlir::Block &body = launch_.getBody().front();
    std::vector<mlir::Operation *> ops;
    for (mlir::Operation &op : body.without_terminator()) ops.push_back(&op);
    TM_RETURN_IF_ERROR(EmitPhases(&body, ops));

    // After the outermost block loop: free what was allocated before it.
    b_.setInsertionPoint(launch_);
    if (check_races_) Call(EmulationFunction::tm_rt_gpu_emulation_launch_end, {});
    for (Value buffer : buffers_) mlir::memref::DeallocOp::create(b_, loc_, buffer);
    return Status::Ok();
  }

 private:
  static Status Unsupported(const std::string &what) {
    return CompileError("GPU emulation: " + what + " is not emulated");
  }

  // An scf.for from lb to ub; the builder moves into its body. Returns the induction value.
  Value OpenLoop(Value lb, Value ub, Value step) {
    auto loop = mlir::scf::ForOp::create(b_, loc_, lb, ub, step);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    return loop.getInductionVar();
  }

  Value Allocate(mlir::MemRefType type, mlir::ValueRange sizes) {
    mlir::OpBuilder::InsertionGuard guard(b_);
    b_.restoreInsertionPoint(allocations_);
    Value buffer = mlir::memref::AllocOp::create(b_, loc_, type, sizes);
    buffers_.push_back(buffer);
    return buffer;
  }

  // A call of `function`, each index argument cast to the integer its parameter is.
  void Call(EmulationFunction function, mlir::ValueRange arguments) {
    mlir::func::FuncOp f =
        DeclareRuntimeFunction(module_, kEmulationFunctions[static_cast<int>(function)]);
    llvm::SmallVector<Value> cast;
    for (auto [value, type] : llvm::zip_equal(arguments, f.getArgumentTypes()))
      cast.push_back(value.getType() == type
                         ? value
                         : mlir::arith::IndexCastOp::create(b_, loc_, type, value).getResult());
    mlir::func::CallOp::create(b_, loc_, f, cast);
  }

  // x + X * (y + Y * z) of ids (x, y, z) in sizes (X, Y, Z).
  Value Linear(const std::array<Value, 3> &ids, const std::array<Value, 3> &sizes) {
    auto mul = [&](Value a, Value c) { return mlir::arith::MulIOp::create(b_, loc_, a, c); };
    auto add = [&](Value a, Value c) { return mlir::arith::AddIOp::create(b_, loc_, a, c); };
    return add(ids[0], mul(sizes[0], add(ids[1], mul(sizes[1], ids[2]))));
  }

  // Bytes of one element, 0 for types the race check leaves alone.
  static int64_t ElementBytes(mlir::Type type) {
    if (type.isIndex()) return 8;
    if (type.isIntOrFloat()) return (type.getIntOrFloatBitWidth() + 7) / 8;
    return 0;
  }

  // Before every load and store of `copy` (a kernel operation cloned into a phase) of the
  // launch's buffers or of workgroup memory: the race check's call with the element's address.
  void CheckAccesses(mlir::Operation *copy) {
    copy->walk([&](mlir::Operation *op) {
      Value memref;
      mlir::ValueRange indices;
      int32_t write = 0;
      if (auto load = mlir::dyn_cast<mlir::memref::LoadOp>(op)) {
        memref = load.getMemRef();
        indices = load.getIndices();
      } else if (auto store = mlir::dyn_cast<mlir::memref::StoreOp>(op)) {
        memref = store.getMemRef();
        indices = store.getIndices();
        write = 1;
      } else {
        return;
      }
      Value root = BufferRoot(memref);
      // The emulation's own per-thread buffers, and memory the kernel allocates itself
      // (private to a thread), are not shared.
      if (own_buffers_.contains(root) ||
          outer_loop_->isAncestor(root.getParentBlock()->getParentOp()))
        return;
      auto type = mlir::cast<mlir::MemRefType>(memref.getType());
      const int64_t bytes = ElementBytes(type.getElementType());
      if (bytes == 0) return;
      mlir::OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPoint(op);
      auto meta = mlir::memref::ExtractStridedMetadataOp::create(b_, loc_, memref);
      Value element = meta.getOffset();
      for (size_t i = 0; i < indices.size(); ++i)
        element = mlir::arith::AddIOp::create(
            b_, loc_, element,
            mlir::arith::MulIOp::create(b_, loc_, indices[i], meta.getStrides()[i]));
      Value base = mlir::memref::ExtractAlignedPointerAsIndexOp::create(b_, loc_, memref);
      Value address = mlir::arith::AddIOp::create(
          b_, loc_, base,
          mlir::arith::MulIOp::create(b_, loc_, element,
                                      mlir::arith::ConstantIndexOp::create(b_, loc_, bytes)));
      const bool workgroup = shared_buffers_.contains(root);
      Value kind = mlir::arith::ConstantIntOp::create(b_, loc_, write | (workgroup ? 2 : 0), 32);
      Call(EmulationFunction::tm_rt_gpu_emulation_access,
           {address, thread_linear_, block_linear_, kind});
    });
  }

  // A buffer holding one value of `type` per thread of a block, indexed (z, y, x).
  Value PerThreadBuffer(mlir::Type type) {
    const int64_t dynamic = mlir::ShapedType::kDynamic;
    const Value buffer = Allocate(mlir::MemRefType::get({dynamic, dynamic, dynamic}, type),
                                  {block_size_[2], block_size_[1], block_size_[0]});
    own_buffers_.insert(buffer);
    return buffer;
  }

  mlir::ValueRange ThreadIndices() { return thread_indices_; }

  // Runs `ops` (one block's operations, without its terminator) for every thread, phase by
  // phase: a phase ends at a barrier, and at an scf.for holding one (emulated as a loop
  // around its body's phases).
  Status EmitPhases(mlir::Block *level, const std::vector<mlir::Operation *> &ops) {
    std::vector<mlir::Operation *> phase;
    for (mlir::Operation *op : ops) {
      if (mlir::isa<mlir::gpu::BarrierOp>(op)) {
        TM_RETURN_IF_ERROR(EmitPhase(level, phase));
        phase.clear();
        if (check_races_) Call(EmulationFunction::tm_rt_gpu_emulation_barrier, {});
        continue;
      }
      if (!ContainsBarrier(op)) {
        phase.push_back(op);
        continue;
      }
      TM_RETURN_IF_ERROR(EmitPhase(level, phase));
      phase.clear();
      auto loop = mlir::dyn_cast<mlir::scf::ForOp>(op);
      if (!loop) return Unsupported("a gpu.barrier inside " + op->getName().getStringRef().str());
      TM_RETURN_IF_ERROR(EmitBarrierLoop(loop));
    }
    return EmitPhase(level, phase);
  }

  // Loops over the block's threads; the builder moves into the innermost body.
  // Returns the loops' outermost operation.
  mlir::Operation *OpenThreadLoops() {
    mlir::Operation *outer = nullptr;
    std::array<Value, 3> t;
    for (int d = 2; d >= 0; --d) {
      t[d] = OpenLoop(zero_, block_size_[d], one_);
      if (!outer) outer = t[d].getParentBlock()->getParentOp();
    }
    thread_ids_ = t;
    thread_indices_ = {t[2], t[1], t[0]};
    thread_linear_ = Linear(t, block_size_);
    phase_map_ = mlir::IRMapping();
    return outer;
  }

  void CloseThreadLoops(mlir::Operation *outer) { b_.setInsertionPointAfter(outer); }

  Status EmitPhase(mlir::Block *level, const std::vector<mlir::Operation *> &ops) {
    if (ops.empty()) return Status::Ok();
    mlir::Operation *loops = OpenThreadLoops();
    llvm::DenseSet<mlir::Operation *> in_phase(ops.begin(), ops.end());
    for (mlir::Operation *op : ops) {
      TM_RETURN_IF_ERROR(Clone(op));
      // Results used after this phase are kept for the thread; constants and ids, and
      // values a buffer cannot hold (memrefs: views of buffers), are computed again where
      // they are used.
      if (Recomputable(op) && op->getNumOperands() == 0) continue;
      for (Value result : op->getResults()) {
        if (!UsedOutside(result, level, in_phase)) continue;
        if (!mlir::MemRefType::isValidElementType(result.getType())) {
          if (Recomputable(op)) continue;
          return Unsupported("a value of type " + TypeName(result.getType()) +
                             " carried across a barrier");
        }
        auto found = kept_.find(result);
        if (found == kept_.end())
          found = kept_.try_emplace(result, PerThreadBuffer(result.getType())).first;
        mlir::memref::StoreOp::create(b_, loc_, phase_map_.lookup(result), found->second,
                                      ThreadIndices());
      }
    }
    CloseThreadLoops(loops);
    return Status::Ok();
  }

  // Whether `value` (defined by an operation of the phase, in `level`) is used by an
  // operation of `level` outside the phase (or by its terminator).
  static bool UsedOutside(Value value, mlir::Block *level,
                          const llvm::DenseSet<mlir::Operation *> &in_phase) {
    for (mlir::Operation *user : value.getUsers()) {
      mlir::Operation *at_level = level->findAncestorOpInBlock(*user);
      if (!at_level || !in_phase.contains(at_level)) return true;
    }
    return false;
  }

  static std::string TypeName(mlir::Type type) {
    std::string text;
    llvm::raw_string_ostream os(text);
    type.print(os);
    return text;
  }

  // Clones `op` into the current thread loop, its operands (and the values its regions use
  // from outside) first made available there.
  Status Clone(mlir::Operation *op) {
    llvm::SetVector<Value> used;
    for (Value v : op->getOperands()) used.insert(v);
    mlir::getUsedValuesDefinedAbove(op->getRegions(), used);
    for (Value v : used) TM_RETURN_IF_ERROR(Resolve(v));
    if (Value id = IdValue(op)) {
      phase_map_.map(op->getResult(0), id);
      return Status::Ok();
    }
    mlir::Operation *copy = b_.clone(*op, phase_map_);
    // Ids and dimensions read inside the copy's regions become the emulation's values.
    std::vector<mlir::Operation *> ids;
    copy->walk([&](mlir::Operation *inner) {
      if (inner != copy && IdValue(inner)) ids.push_back(inner);
    });
    for (mlir::Operation *inner : ids) {
      inner->getResult(0).replaceAllUsesWith(IdValue(inner));
      inner->erase();
    }
    if (check_races_) CheckAccesses(copy);
    return Status::Ok();
  }

  // The emulation's value of a gpu.thread_id, block_id, block_dim or grid_dim; null for any
  // other operation.
  Value IdValue(mlir::Operation *op) {
    if (auto o = mlir::dyn_cast<mlir::gpu::ThreadIdOp>(op))
      return thread_ids_[DimensionIndex(o.getDimension())];
    if (auto o = mlir::dyn_cast<mlir::gpu::BlockIdOp>(op))
      return block_ids_[DimensionIndex(o.getDimension())];
    if (auto o = mlir::dyn_cast<mlir::gpu::BlockDimOp>(op))
      return block_size_[DimensionIndex(o.getDimension())];
    if (auto o = mlir::dyn_cast<mlir::gpu::GridDimOp>(op))
      return grid_size_[DimensionIndex(o.getDimension())];
    return Value();
  }

  // Makes `value` available to the current phase as the current thread sees it (mapped in
  // phase_map_, unless it is the host's own value, defined before the launch).
  Status Resolve(Value value) {
    if (phase_map_.contains(value)) return Status::Ok();
    if (Value v = uniform_.lookupOrNull(value)) {
      phase_map_.map(value, v);
      return Status::Ok();
    }
    const mlir::gpu::KernelDim3 threads = launch_.getThreadIds();
    const Value ids[3] = {threads.x, threads.y, threads.z};
    for (int d = 0; d < 3; ++d)
      if (value == ids[d]) {
        phase_map_.map(value, thread_ids_[d]);
        return Status::Ok();
      }
    if (!launch_.getBody().isAncestor(value.getParentRegion())) return Status::Ok();
    if (auto found = kept_.find(value); found != kept_.end()) {
      phase_map_.map(value, mlir::memref::LoadOp::create(b_, loc_, found->second, ThreadIndices()));
      return Status::Ok();
    }
    mlir::Operation *op = value.getDefiningOp();
    if (!Recomputable(op))
      return Unsupported("a value carried across a barrier, neither kept nor recomputable");
    return Clone(op);
  }

  // A value every thread of the block has alike (a loop bound around a barrier), computed
  // on the host before the thread loops.
  Status ResolveUniform(Value value, Value *out) {
    if (Value v = uniform_.lookupOrNull(value)) return *out = v, Status::Ok();
    if (!launch_.getBody().isAncestor(value.getParentRegion())) return *out = value, Status::Ok();
    mlir::Operation *op = value.getDefiningOp();
    if (!Recomputable(op) || mlir::isa<mlir::gpu::ThreadIdOp>(op))
      return Unsupported("an scf.for around a barrier whose bounds differ between threads");
    if (Value id = IdValue(op)) return *out = id, Status::Ok();  // a block's id or a size
    Value ignored;
    for (Value operand : op->getOperands()) TM_RETURN_IF_ERROR(ResolveUniform(operand, &ignored));
    b_.clone(*op, uniform_);
    *out = uniform_.lookup(value);
    return Status::Ok();
  }

  // An scf.for holding a barrier: a host loop (its bounds are uniform) around its body's
  // phases; its loop-carried values are kept per thread.
  Status EmitBarrierLoop(mlir::scf::ForOp loop) {
    Value bounds[3];
    const Value original[3] = {loop.getLowerBound(), loop.getUpperBound(), loop.getStep()};
    for (int i = 0; i < 3; ++i) TM_RETURN_IF_ERROR(ResolveUniform(original[i], &bounds[i]));
    std::vector<Value> carried;
    for (Value arg : loop.getRegionIterArgs()) {
      if (!mlir::MemRefType::isValidElementType(arg.getType()))
        return Unsupported("a loop-carried value of type " + TypeName(arg.getType()));
      carried.push_back(PerThreadBuffer(arg.getType()));
    }
    TM_RETURN_IF_ERROR(EmitStores(loop.getInitArgs(), carried));

    auto host = mlir::scf::ForOp::create(b_, loc_, bounds[0], bounds[1], bounds[2]);
    b_.setInsertionPoint(host.getBody()->getTerminator());
    uniform_.map(loop.getInductionVar(), host.getInductionVar());
    for (size_t i = 0; i < carried.size(); ++i) kept_[loop.getRegionIterArgs()[i]] = carried[i];
    std::vector<mlir::Operation *> ops;
    for (mlir::Operation &op : loop.getBody()->without_terminator()) ops.push_back(&op);
    TM_RETURN_IF_ERROR(EmitPhases(loop.getBody(), ops));
    auto yield = mlir::cast<mlir::scf::YieldOp>(loop.getBody()->getTerminator());
    TM_RETURN_IF_ERROR(EmitStores(yield.getOperands(), carried));
    b_.setInsertionPointAfter(host);
    for (size_t i = 0; i < carried.size(); ++i) kept_[loop.getResult(i)] = carried[i];
    return Status::Ok();
  }

  // For every thread: buffers[i][thread] = values[i].
  Status EmitStores(mlir::ValueRange values, const std::vector<Value> &buffers) {
    if (values.empty()) return Status::Ok();
    mlir::Operation *loops = OpenThreadLoops();
    for (size_t i = 0; i < buffers.size(); ++i) {
      TM_RETURN_IF_ERROR(Resolve(values[i]));
      mlir::memref::StoreOp::create(b_, loc_, phase_map_.lookupOrDefault(values[i]), buffers[i],
                                    ThreadIndices());
    }
    CloseThreadLoops(loops);
    return Status::Ok();
  }

  const bool check_races_;
  mlir::gpu::LaunchOp launch_;
  mlir::ModuleOp module_;
  mlir::OpBuilder b_;
  mlir::Location loc_;
  Value zero_, one_;
  std::array<Value, 3> block_size_, grid_size_, block_ids_, thread_ids_;
  std::vector<Value> thread_indices_;
  Value thread_linear_, block_linear_;
  mlir::Operation *outer_loop_ = nullptr;  // the outermost block loop
  llvm::DenseSet<Value> own_buffers_;      // the emulation's per-thread buffers
  llvm::DenseSet<Value> shared_buffers_;   // workgroup memory
  mlir::OpBuilder::InsertPoint allocations_;
  std::vector<Value> buffers_;
  // Values alike for every thread of a block (block ids, dimensions, workgroup buffers,
  // the induction variables of loops around barriers, their host copies of constants).
  mlir::IRMapping uniform_;
  // Values of the kernel kept per thread across phases, and their buffers.
  llvm::DenseMap<Value, Value> kept_;
  // The current phase's values (for the current thread).
  mlir::IRMapping phase_map_;
};

}  // namespace

Status EmulateGpuLaunches(mlir::ModuleOp module, bool check_races) {
  std::vector<mlir::gpu::LaunchOp> launches;
  module.walk([&](mlir::gpu::LaunchOp op) { launches.push_back(op); });
  for (mlir::gpu::LaunchOp launch : launches) {
    TM_RETURN_IF_ERROR(LaunchEmulator(launch, check_races).Run());
    launch->erase();
  }
  return Status::Ok();
}

}  // namespace tinymlir
