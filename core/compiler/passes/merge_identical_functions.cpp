#include "core/compiler/passes/merge_identical_functions.h"

#include <optional>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

namespace tinymlir {
namespace {

// What the pass merges: private functions with a body, and the device code's modules: named
// symbol tables nested in the module (a GPU kernel's gpu.module holds one kernel function,
// named alike in every module, and copies of the helpers it calls).
bool Mergeable(mlir::Operation *op) {
  if (auto fn = mlir::dyn_cast<mlir::func::FuncOp>(op)) return !fn.isExternal() && fn.isPrivate();
  // Whether the op is a symbol table is asked of libMLIR (getNearestSymbolTable): a trait
  // tested here, through op->hasTrait, would be resolved to a TypeID of this library's own
  // (it is built with hidden visibility) and never match.
  return !mlir::isa<mlir::ModuleOp>(op) && mlir::isa<mlir::SymbolOpInterface>(op) &&
         mlir::SymbolTable::getNearestSymbolTable(op) == op;
}

// The op's attributes but its name: what must also match for two bodies to merge (a
// function's type, linkage, `passthrough`, argument attributes).
mlir::DictionaryAttr AttributesButName(mlir::Operation *op) {
  llvm::SmallVector<mlir::NamedAttribute> kept;
  for (mlir::NamedAttribute attr : op->getAttrs())
    if (attr.getName() != mlir::SymbolTable::getSymbolAttrName()) kept.push_back(attr);
  return mlir::DictionaryAttr::get(op->getContext(), kept);
}

// A hash of what Same compares: each operation's name, attributes, and operand and result
// types, in order; not which values it uses, which the comparison checks.
llvm::hash_code StructureHash(mlir::Operation *symbol) {
  llvm::hash_code hash = llvm::hash_combine(symbol->getName(), AttributesButName(symbol));
  for (mlir::Region &region : symbol->getRegions())
    region.walk([&](mlir::Operation *op) {
      hash = llvm::hash_combine(hash, mlir::OperationEquivalence::computeHash(
                                          op, mlir::OperationEquivalence::ignoreHashValue,
                                          mlir::OperationEquivalence::ignoreHashValue,
                                          mlir::OperationEquivalence::IgnoreLocations));
    });
  return hash;
}

bool Same(mlir::Operation *a, mlir::Operation *b) {
  if (a->getName() != b->getName() || AttributesButName(a) != AttributesButName(b) ||
      a->getNumRegions() != b->getNumRegions())
    return false;
  for (unsigned i = 0; i < a->getNumRegions(); ++i)
    if (!mlir::OperationEquivalence::isRegionEquivalentTo(
            &a->getRegion(i), &b->getRegion(i), mlir::OperationEquivalence::IgnoreLocations))
      return false;
  return true;
}

class MergeIdenticalFunctionsPass
    : public mlir::PassWrapper<MergeIdenticalFunctionsPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MergeIdenticalFunctionsPass)

  llvm::StringRef getArgument() const override { return kMergeIdenticalFunctionsPassName; }
  llvm::StringRef getDescription() const override {
    return "Merge private functions, and device code modules, whose bodies are the same";
  }

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    // Symbols kept so far, by hash; a bucket holds the different bodies that share one.
    llvm::DenseMap<llvm::hash_code, std::vector<mlir::Operation *>> kept;
    llvm::DenseMap<mlir::StringAttr, mlir::StringAttr> replaced;  // erased name -> kept name
    std::vector<mlir::Operation *> erased;
    for (mlir::Operation &op : *module.getBody()) {
      if (!Mergeable(&op)) continue;
      std::vector<mlir::Operation *> &bucket = kept[StructureHash(&op)];
      auto same = llvm::find_if(bucket, [&](mlir::Operation *k) { return Same(k, &op); });
      if (same == bucket.end()) {
        bucket.push_back(&op);
        continue;
      }
      replaced[mlir::SymbolTable::getSymbolName(&op)] = mlir::SymbolTable::getSymbolName(*same);
      erased.push_back(&op);
    }
    if (replaced.empty()) return;
    // Every reference renamed in one walk, rather than one walk per erased symbol
    // (quadratic). A reference into a kernel module (@module::@kernel) keeps its nested part.
    mlir::AttrTypeReplacer references;
    references.addReplacement([&](mlir::SymbolRefAttr ref) -> std::optional<mlir::Attribute> {
      auto it = replaced.find(ref.getRootReference());
      if (it == replaced.end()) return std::nullopt;
      return mlir::SymbolRefAttr::get(it->second, ref.getNestedReferences());
    });
    for (mlir::Operation *op : erased) op->erase();
    references.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true, /*replaceLocs=*/false,
                                            /*replaceTypes=*/false);
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> CreateMergeIdenticalFunctionsPass() {
  return std::make_unique<MergeIdenticalFunctionsPass>();
}

}  // namespace tinymlir
