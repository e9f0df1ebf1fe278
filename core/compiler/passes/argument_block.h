// tm-argument-block: a function with arguments gets an entry block of its own, which only
// branches to the block that was its entry.
//
// Why: compile time. convert-func-to-llvm converts each memref argument by inserting the ops
// that rebuild its descriptor at the top of the entry block, and the conversion asks for the
// order of operations in that block as it goes. MLIR numbers a block's operations with gaps
// between them, and repeated insertions at the top use the gaps up, so nearly every one made
// it renumber the whole block: the cost of the block's length for each argument. A traced
// program's function is one long block with an argument per input: an unrolled recurrence of
// 2,000 steps with an input per step spent 9.0 s in convert-func-to-llvm, 3.1 times what
// 1,000 steps took (mlir-opt on the same IR: 6.9 s, 1.8 s with the block of its own). In a
// block of their own, the conversions renumber only each other.
//
// The branch is an llvm.br, legal whether or not control flow is already lowered; LLVM's
// optimisation merges the two blocks again. Run just before convert-func-to-llvm.
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kArgumentBlockPassName = "tm-argument-block";

// Not registered globally (see approximate_math.h); pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateArgumentBlockPass();

}  // namespace tinymlir
