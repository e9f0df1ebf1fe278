// tm-merge-identical-functions: private functions with the same body become one.
//
// Why: compile time. The loop nests a program's function leaves (outline_loop_nests.h) and
// the parallel loops' bodies (parallel_loops.h) are outlined one function per nest, and a
// model repeats itself: GPT-2 kjv-tiny's block traced 12 times as one program left 429 nest
// functions, of which 34 were different. Everything the buffers' addresses could tell them
// apart by is an argument, so identical nests have identical bodies, and LLVM optimised and
// compiled each copy again: its loop vectoriser and unroller and instruction selection are
// most of a large program's compile time (48 blocks: 33.5 s, 2.7 s merged).
//
// Why here and not LLVM's MergeFunctions: by LLVM IR, MLIR has already lowered every copy
// (scf-to-cf and the rest), and each GPU kernel is a module of its own, compiled to PTX
// before the host's LLVM IR exists.
//
// The same holds for the GPU target's kernels, each outlined into a gpu.module of its own:
// identical modules merge, and a launch of the one erased launches the one kept.
//
// Two functions (or modules) merge when their types, their attributes (the name aside) and
// their bodies are the same, operation for operation, attributes (constants) included;
// locations are ignored. The callers of the one erased call the one kept: every reference
// by name (func.call, func.constant, gpu.launch_func) is rewritten in a single walk of the
// module. Public functions and declarations are left alone.
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kMergeIdenticalFunctionsPassName = "tm-merge-identical-functions";

// Not registered globally (see approximate_math.h); pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateMergeIdenticalFunctionsPass();

}  // namespace tinymlir
