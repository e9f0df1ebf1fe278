#include "core/compiler/codegen/entry_parts.h"

#include <string>
#include <vector>

#include "core/contract/compiled_program.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"

namespace tinymlir {
namespace {

// A call the register allocator must keep values alive across: any but an intrinsic's
// (lifetime markers and the like lower to no call, or to one whose cost LLVM knows).
bool IsCall(const llvm::Instruction &inst) {
  return llvm::isa<llvm::CallBase>(inst) && !llvm::isa<llvm::IntrinsicInst>(inst);
}

// Cuts `block` before the instruction after every kCallsPerPart-th call, and returns the
// runs that may become parts: all but the first (which stays the block) and the last (which
// holds its terminator). None when the block makes at most kCallsPerPart * 2 calls.
std::vector<llvm::BasicBlock *> CutIntoRuns(llvm::BasicBlock &block) {
  int calls = 0;
  std::vector<llvm::Instruction *> cuts;
  for (llvm::Instruction &inst : block) {
    if (!IsCall(inst) || ++calls % kCallsPerPart != 0) continue;
    llvm::Instruction *next = inst.getNextNode();
    if (next && !next->isTerminator()) cuts.push_back(next);
  }
  if (calls <= kCallsPerPart * 2) return {};
  std::vector<llvm::BasicBlock *> runs;
  llvm::BasicBlock *run = &block;
  for (llvm::Instruction *cut : cuts) {
    run = run->splitBasicBlock(cut);
    runs.push_back(run);
  }
  if (!runs.empty()) runs.pop_back();  // the terminator's run
  return runs;
}

}  // namespace

void SplitEntryIntoParts(llvm::Module &module) {
  llvm::Function *entry = module.getFunction(kPackedEntryName);
  if (!entry || entry->isDeclaration()) return;
  std::vector<llvm::BasicBlock *> blocks;
  for (llvm::BasicBlock &block : *entry) blocks.push_back(&block);
  std::vector<llvm::BasicBlock *> runs;
  for (llvm::BasicBlock *block : blocks)
    for (llvm::BasicBlock *run : CutIntoRuns(*block)) runs.push_back(run);
  if (runs.empty()) return;
  // One analysis of the entry serves every extraction (CodeExtractor keeps it valid).
  const llvm::CodeExtractorAnalysisCache analysis(*entry);
  int parts = 0;
  for (llvm::BasicBlock *run : runs) {
    // Aggregated arguments: one structure of what the run uses and defines. No stack
    // allocation may move into a part (isEligible refuses the run).
    llvm::CodeExtractor extractor({run}, /*DT=*/nullptr, /*AggregateArgs=*/true,
                                  /*BFI=*/nullptr, /*BPI=*/nullptr, /*AC=*/nullptr,
                                  /*AllowVarArgs=*/false, /*AllowAlloca=*/false,
                                  /*AllocationBlock=*/nullptr, kEntryPartSuffix);
    if (!extractor.isEligible()) continue;
    llvm::Function *part = extractor.extractCodeRegion(analysis);
    if (!part) continue;
    part->setLinkage(llvm::GlobalValue::InternalLinkage);
    part->addFnAttr(llvm::Attribute::NoInline);
    part->setName(std::string(kPackedEntryName) + "_" + kEntryPartSuffix + "_" +
                  std::to_string(parts++));
  }
}

}  // namespace tinymlir
