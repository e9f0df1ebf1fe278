// tm-outline-loop-nests: each loop nest left in a program's function becomes a function of
// its own, called once, never inlined.
//
// Why: compile time. A traced program is one function, and without this its every loop nest
// (a linalg op each) sits in it: thousands of them in a whole model traced at once. Passes
// that walk a function's blocks or dominator tree then cost the square of the function's
// size or more: MLIR's scf-to-cf, and LLVM's loop passes and instruction selection. A
// 48-layer GPT-2 traced as one program took 249 s in LLVM's optimisation alone, 16 times
// what 12 layers took. Each nest in its own function, they are linear in the program's size.
//
// Run after tm-parallelize-loops (which outlines the large parallel nests for the worker
// pool) on the public functions' top-level scf.parallel and scf.for ops without results.
// What a nest uses from outside becomes an argument of its function (buffers, scalars),
// except arith.constant ops, which are cloned in so that bounds stay constants (LLVM cannot
// vectorise a loop whose bounds it does not know). The functions are `noinline` (LLVM's
// inliner would put them back) and internal, so that LLVM drops the arguments a function
// does not read: most of each buffer's descriptor, all but its aligned pointer (500 inputs
// to one elementwise op compiled in 11.3 s with the descriptors passed whole, 1.8 s
// without). A call costs a few nanoseconds per nest and invoke.
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kOutlineLoopNestsPassName = "tm-outline-loop-nests";

// The outlined functions' names: this prefix and a number.
inline constexpr const char *kOutlinedLoopNestPrefix = "__tm_loop_nest_";

// Not registered globally (see approximate_math.h); pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateOutlineLoopNestsPass();

}  // namespace tinymlir
