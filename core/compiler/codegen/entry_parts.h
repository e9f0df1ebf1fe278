// Splitting the packed entry's long blocks into functions of a bounded number of calls.
//
// Why: code generation time. A traced program's function is one block, a call per loop
// nest, BLAS product, allocation and free, and every value it keeps across calls (the
// argument array, the buffers a recurrence reads at every step, a temporary used again much
// later) is live over all of them. Register allocation splits and spills such values around
// each call that clobbers registers, at a cost that grows with the number of calls they span:
// an unrolled recurrence of 2,000 steps (12,000 calls) took 18.5 s to generate code for, 4.4
// times what 1,000 steps took, two thirds of it in the greedy register allocator.
//
// After SplitEntryIntoParts, each run of kCallsPerPart calls of such a block is a function of
// its own (LLVM's CodeExtractor), internal and `noinline`, which takes what it uses from before
// and gives back what it defines for later in one structure whose address is its only argument
// (so that no function's argument list grows with the program either). The entry keeps one
// call per part, so both it and every part span a bounded number of calls. A run that holds a
// stack allocation stays in place (its address must outlive the run), as does each block's
// first run (the function's allocations) and its last (its terminator). Blocks of at most
// kCallsPerPart * 2 calls, every GPT-2 program's, are left as they are.
//
// This file knows LLVM but not MLIR. Part of the compiler library.
#pragma once

namespace llvm {
class Module;
}

namespace tinymlir {

// Calls per part: enough that the extra call and the structure's stores and loads are
// nothing next to the work of 64 calls, few enough that no part is long.
inline constexpr int kCallsPerPart = 64;

// The parts' names: the entry's name, then this suffix and a number.
inline constexpr const char *kEntryPartSuffix = "part";

// Splits every block of the packed entry (kPackedEntryName) that makes more than
// kCallsPerPart * 2 calls. Call after OptimizeModule and SinkArgumentLoads, just before
// code generation: nothing may inline the parts back.
void SplitEntryIntoParts(llvm::Module &module);

}  // namespace tinymlir
