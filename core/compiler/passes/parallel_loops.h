// tm-parallelize-loops: the CPU target's elementwise and reduction loops on every core.
//
// After convert-linalg-to-parallel-loops, each linalg op that is not a BLAS call is an
// scf.parallel over its parallel dimensions (its reductions are scf.for loops inside). This
// pass outlines each such loop nest that is big enough into a function over a range of its
// outermost dimension, `void f(i64 begin, i64 end, ptr captures)`, and replaces it with a
// call to the runtime's tm_rt_parallel_for (core/runtime/parallel_for.h), which hands out
// ranges to the worker pool. Every iteration of the outer dimension computes its own outputs
// with its reductions inside, so the results do not depend on how the range is split: they
// are bit-identical for any thread count.
//
// The values the loop uses from outside (buffers, scalars) are stored as 64-bit words in a
// stack array whose address the function receives; buffers must have static shapes and
// strides (every buffer of a traced program has), which the function rebuilds its memref
// descriptors from. Loops that allocate, call functions or capture anything else stay
// serial.
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kParallelizeLoopsPassName = "tm-parallelize-loops";

// Loops with fewer innermost iterations than this (all dimensions, reductions included)
// stay on the calling thread: handing out a range costs a few microseconds.
inline constexpr long kMinParallelIterations = 1 << 15;

// Not registered globally (see approximate_math.h); pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateParallelizeLoopsPass();

}  // namespace tinymlir
