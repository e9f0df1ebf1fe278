// The runtime side of tm-parallelize-loops (core/compiler/passes/parallel_loops.h): a compiled
// program's elementwise and reduction loops, outlined into functions over a range of their
// outer dimension, run on the worker pool. Called from generated code, so C linkage.
#pragma once

#include <cstdint>

extern "C" {

// Runs body(lo, hi, captures) over pieces [lo, hi) that together cover [begin, end) once,
// on the pool's threads. The pieces' boundaries do not matter to the results: each outer
// iteration computes its own outputs.
void tm_rt_parallel_for(int64_t begin, int64_t end,
                        void (*body)(int64_t, int64_t, void *), void *captures);

}  // extern "C"
