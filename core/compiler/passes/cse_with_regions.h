// tm-cse: upstream's common subexpression elimination, with each operation's regions in the
// hash it looks equivalent operations up by.
//
// Why: compile time. CSE finds candidates by a hash of an operation's name, attributes,
// operands and result types, and compares a candidate's regions only when the hashes meet.
// Elementwise ops of one input differ only in their bodies (y_i = x * c_i: the builder puts
// the scalar c_i in the body, and CSE has already made their tensor.empty destinations one),
// so all of them hashed the same and each was compared with every other: the square of their
// number (2,000 such outputs: 1.9 s in each of the optimisation's two CSE runs, 11.5 times
// what 500 took). tm-cse gives each operation with regions a discardable attribute holding a
// hash of its regions' operations (names, attributes, types, and the values they capture
// from outside: a constant by its value, another value by identity), runs upstream's CSE
// (mlir::eliminateCommonSubExpressions), and removes the attributes again. Operations with
// equal regions get equal attributes, so CSE merges what it merged before, with one
// exception: two bodies that capture different non-constant values which this same run
// merges are left for the next run (the optimisation runs tm-cse twice). Those with
// different regions no longer meet.
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kCseWithRegionsPassName = "tm-cse";

// The attribute that carries the hash while CSE runs (never left in the IR).
inline constexpr const char *kRegionHashAttrName = "tm.region_hash";

// Not registered globally (see approximate_math.h); pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateCseWithRegionsPass();

}  // namespace tinymlir
