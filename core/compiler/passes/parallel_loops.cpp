#include "core/compiler/passes/parallel_loops.h"

#include <string>

#include "core/compiler/passes/loop_nest_inputs.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

namespace tinymlir {
namespace {

using mlir::OpBuilder;
using mlir::Type;
using mlir::Value;

// The runtime entry (core/runtime/parallel_for.h).
constexpr const char *kParallelFor = "tm_rt_parallel_for";

// A static integer bound, or -1.
int64_t Constant(Value v) {
  if (auto c = v.getDefiningOp<mlir::arith::ConstantIndexOp>()) return c.value();
  return -1;
}

// Iterations of the loop nest under (and including) `op`, when every trip count is static:
// the largest nest among the ops of each body; -1 when some bound is not a constant.
int64_t Iterations(mlir::Operation *op) {
  int64_t trips = 1;
  if (auto par = mlir::dyn_cast<mlir::scf::ParallelOp>(op)) {
    for (auto [lb, ub, step] : llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
      const int64_t l = Constant(lb), u = Constant(ub), s = Constant(step);
      if (l < 0 || u < 0 || s <= 0) return -1;
      trips *= (u - l + s - 1) / s;
    }
  } else if (auto loop = mlir::dyn_cast<mlir::scf::ForOp>(op)) {
    const int64_t l = Constant(loop.getLowerBound()), u = Constant(loop.getUpperBound()),
                  s = Constant(loop.getStep());
    if (l < 0 || u < 0 || s <= 0) return -1;
    trips = (u - l + s - 1) / s;
  }
  int64_t inner = 1;
  for (mlir::Region &region : op->getRegions())
    for (mlir::Operation &child : region.getOps()) {
      if (!mlir::isa<mlir::scf::ParallelOp, mlir::scf::ForOp>(child)) continue;
      const int64_t n = Iterations(&child);
      if (n < 0) return -1;
      inner = std::max(inner, n);
    }
  return trips * inner;
}

// Whether the loop body only computes and reads and writes memory: no allocation (the
// guarded allocator unwinds only the calling thread), no calls, nothing else with effects
// the outlined copy could not have on another thread.
bool OnlyComputes(mlir::scf::ParallelOp loop) {
  bool ok = true;
  loop.getBody()->walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::memref::AllocOp, mlir::memref::AllocaOp, mlir::memref::DeallocOp,
                  mlir::memref::CopyOp, mlir::func::CallOp, mlir::LLVM::CallOp>(op))
      ok = false;
    else if (!mlir::isa<mlir::arith::ArithDialect, mlir::math::MathDialect,
                        mlir::memref::MemRefDialect, mlir::scf::SCFDialect>(op->getDialect()) &&
             op->getName().getDialectNamespace() != "affine")
      ok = false;
  });
  return ok;
}

// A value captured by the outlined function, and how it travels as an i64 word.
enum class Word { kIndex, kInteger, kFloat, kMemref };

bool Capturable(Value v, Word *word) {
  Type t = v.getType();
  if (t.isIndex()) return *word = Word::kIndex, true;
  if (auto i = mlir::dyn_cast<mlir::IntegerType>(t)) return *word = Word::kInteger, i.getWidth() <= 64;
  if (mlir::isa<mlir::FloatType>(t)) {
    *word = Word::kFloat;
    return t.getIntOrFloatBitWidth() <= 64;
  }
  if (auto m = mlir::dyn_cast<mlir::MemRefType>(t)) {
    *word = Word::kMemref;
    llvm::SmallVector<int64_t> strides;
    int64_t offset;
    if (!m.hasStaticShape() || mlir::failed(m.getStridesAndOffset(strides, offset)) ||
        mlir::ShapedType::isDynamic(offset) || m.getMemorySpace())
      return false;
    for (int64_t s : strides)
      if (mlir::ShapedType::isDynamic(s)) return false;
    return true;
  }
  return false;
}

// v as an i64 word (the caller's side).
Value Encode(OpBuilder &b, mlir::Location loc, Value v, Word word) {
  Type i64 = b.getI64Type();
  switch (word) {
    case Word::kIndex: return mlir::arith::IndexCastOp::create(b, loc, i64, v);
    case Word::kInteger:
      if (v.getType().getIntOrFloatBitWidth() == 64) return v;
      return mlir::arith::ExtUIOp::create(b, loc, i64, v);
    case Word::kFloat: {
      const unsigned bits = v.getType().getIntOrFloatBitWidth();
      Value raw = mlir::arith::BitcastOp::create(b, loc, b.getIntegerType(bits), v);
      return bits == 64 ? raw : Value(mlir::arith::ExtUIOp::create(b, loc, i64, raw));
    }
    case Word::kMemref: {
      Value base = mlir::memref::ExtractAlignedPointerAsIndexOp::create(b, loc, v);
      return mlir::arith::IndexCastOp::create(b, loc, i64, base);
    }
  }
  return {};
}

// The value of type `type` an i64 word stands for (the outlined function's side). A memref
// is rebuilt as its LLVM descriptor (both pointers the aligned base; offset, sizes and
// strides from the static type), cast to the memref type; the memref-to-LLVM conversion
// folds the cast away.
Value Decode(OpBuilder &b, mlir::Location loc, Value word64, Type type, Word kind) {
  switch (kind) {
    case Word::kIndex: return mlir::arith::IndexCastOp::create(b, loc, type, word64);
    case Word::kInteger:
      if (type.getIntOrFloatBitWidth() == 64) return word64;
      return mlir::arith::TruncIOp::create(b, loc, type, word64);
    case Word::kFloat: {
      const unsigned bits = type.getIntOrFloatBitWidth();
      Value raw = bits == 64 ? word64
                             : Value(mlir::arith::TruncIOp::create(b, loc, b.getIntegerType(bits),
                                                                   word64));
      return mlir::arith::BitcastOp::create(b, loc, type, raw);
    }
    case Word::kMemref: {
      auto memref = mlir::cast<mlir::MemRefType>(type);
      llvm::SmallVector<int64_t> strides;
      int64_t offset;
      (void)memref.getStridesAndOffset(strides, offset);
      mlir::MLIRContext *ctx = b.getContext();
      Type ptr = mlir::LLVM::LLVMPointerType::get(ctx), i64 = b.getI64Type();
      const int64_t rank = memref.getRank();
      llvm::SmallVector<Type> fields = {ptr, ptr, i64};
      if (rank > 0) {
        fields.push_back(mlir::LLVM::LLVMArrayType::get(i64, static_cast<unsigned>(rank)));
        fields.push_back(mlir::LLVM::LLVMArrayType::get(i64, static_cast<unsigned>(rank)));
      }
      auto desc_type = mlir::LLVM::LLVMStructType::getLiteral(ctx, fields);
      Value base = mlir::LLVM::IntToPtrOp::create(b, loc, ptr, word64);
      auto i64c = [&](int64_t v) {
        return mlir::LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
      };
      Value desc = mlir::LLVM::UndefOp::create(b, loc, desc_type);
      desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, base, llvm::ArrayRef<int64_t>{0});
      desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, base, llvm::ArrayRef<int64_t>{1});
      desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, i64c(offset), llvm::ArrayRef<int64_t>{2});
      for (int64_t d = 0; d < rank; ++d) {
        desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, i64c(memref.getShape()[d]),
                                                 llvm::ArrayRef<int64_t>{3, d});
        desc = mlir::LLVM::InsertValueOp::create(b, loc, desc, i64c(strides[d]),
                                                 llvm::ArrayRef<int64_t>{4, d});
      }
      return mlir::UnrealizedConversionCastOp::create(b, loc, type, desc).getResult(0);
    }
  }
  return {};
}

class ParallelizeLoopsPass
    : public mlir::PassWrapper<ParallelizeLoopsPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ParallelizeLoopsPass)

  llvm::StringRef getArgument() const override { return kParallelizeLoopsPassName; }
  llvm::StringRef getDescription() const override {
    return "Outline large scf.parallel loops into functions run by tm_rt_parallel_for";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    registry.insert<mlir::arith::ArithDialect, mlir::func::FuncDialect,
                    mlir::LLVM::LLVMDialect, mlir::memref::MemRefDialect,
                    mlir::scf::SCFDialect>();
  }

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    llvm::SmallVector<mlir::scf::ParallelOp> loops;
    for (auto func : module.getOps<mlir::func::FuncOp>())
      if (!func.isExternal())
        for (auto loop : func.getBody().getOps<mlir::scf::ParallelOp>()) loops.push_back(loop);
    int count = 0;
    for (mlir::scf::ParallelOp loop : loops)
      if (Outline(module, loop, count)) ++count;
  }

 private:
  bool Outline(mlir::ModuleOp module, mlir::scf::ParallelOp loop, int index) {
    if (loop.getNumResults() != 0 || Constant(loop.getStep()[0]) != 1) return false;
    const int64_t first = Constant(loop.getUpperBound()[0]) - Constant(loop.getLowerBound()[0]);
    const int64_t iterations = Iterations(loop);
    if (first < 2 || iterations < kMinParallelIterations || !OnlyComputes(loop)) return false;

    // What the loop uses from outside (see loop_nest_inputs.h): constants are cloned, the
    // rest captured.
    const LoopNestInputs inputs = InputsOf(loop);
    llvm::SmallVector<Value> captured;
    llvm::SmallVector<Word> words;
    for (Value v : inputs.values) {
      Word word;
      if (!Capturable(v, &word)) return false;
      captured.push_back(v);
      words.push_back(word);
    }

    mlir::MLIRContext *ctx = module.getContext();
    mlir::Location loc = loop.getLoc();
    Type i64 = IntegerType(ctx), ptr = mlir::LLVM::LLVMPointerType::get(ctx);
    auto body_type = mlir::FunctionType::get(ctx, {i64, i64, ptr}, {});

    // The outlined function: the loop over [begin, end) of its first dimension.
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    const std::string name = "__tm_parallel_" + std::to_string(index);
    auto fn = mlir::func::FuncOp::create(b, loc, name, body_type);
    fn.setPrivate();
    mlir::Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    mlir::IRMapping map;
    CloneConstants(b, inputs.constants, map);
    Value captures = entry->getArgument(2);
    for (size_t i = 0; i < captured.size(); ++i) {
      Value at = mlir::LLVM::GEPOp::create(b, loc, ptr, i64, captures,
                                           llvm::ArrayRef<mlir::LLVM::GEPArg>{static_cast<int32_t>(i)});
      Value word = mlir::LLVM::LoadOp::create(b, loc, i64, at);
      map.map(captured[i], Decode(b, loc, word, captured[i].getType(), words[i]));
    }
    Value begin_index =
        mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), entry->getArgument(0));
    Value end_index =
        mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), entry->getArgument(1));
    auto copy = mlir::cast<mlir::scf::ParallelOp>(b.clone(*loop, map));
    copy.getLowerBoundMutable()[0].set(begin_index);
    copy.getUpperBoundMutable()[0].set(end_index);
    mlir::func::ReturnOp::create(b, loc);

    // The caller: the captures in a stack array, then the runtime call.
    auto runtime = module.lookupSymbol<mlir::func::FuncOp>(kParallelFor);
    if (!runtime) {
      b.setInsertionPointToStart(module.getBody());
      runtime = mlir::func::FuncOp::create(
          b, loc, kParallelFor, mlir::FunctionType::get(ctx, {i64, i64, body_type, ptr}, {}));
      runtime.setPrivate();
    }
    b.setInsertionPoint(loop);
    Value count = mlir::LLVM::ConstantOp::create(
        b, loc, i64, b.getI64IntegerAttr(std::max<int64_t>(1, static_cast<int64_t>(captured.size()))));
    Value array = mlir::LLVM::AllocaOp::create(b, loc, ptr, i64, count);
    for (size_t i = 0; i < captured.size(); ++i) {
      Value at = mlir::LLVM::GEPOp::create(b, loc, ptr, i64, array,
                                           llvm::ArrayRef<mlir::LLVM::GEPArg>{static_cast<int32_t>(i)});
      mlir::LLVM::StoreOp::create(b, loc, Encode(b, loc, captured[i], words[i]), at);
    }
    Value body = mlir::func::ConstantOp::create(b, loc, body_type,
                                                mlir::FlatSymbolRefAttr::get(ctx, name));
    Value begin = mlir::arith::IndexCastOp::create(b, loc, i64, loop.getLowerBound()[0]);
    Value end = mlir::arith::IndexCastOp::create(b, loc, i64, loop.getUpperBound()[0]);
    mlir::func::CallOp::create(b, loc, runtime, mlir::ValueRange{begin, end, body, array});
    loop.erase();
    return true;
  }

  static Type IntegerType(mlir::MLIRContext *ctx) { return mlir::IntegerType::get(ctx, 64); }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateParallelizeLoopsPass() {
  return std::make_unique<ParallelizeLoopsPass>();
}

}  // namespace tinymlir
