// The GPU target's row step: a reduction along the last axis and the ops around it that work
// row by row (layer norm: two sums, the centring, the squares, the normalisation; softmax: a
// max, the exponentials, a sum, the division; the fills that start each reduction) become
// one kernel (a gpu.launch, outlined later with the rest) with one block per row.
//
// Without it, each op is a kernel of its own, and a reduction gives each row to one thread,
// which reads the row's elements one after the other: a decode step's layer norm is one
// thread reading 768 elements three times over, with four more launches around it.
//
// In the kernel, the ops run one after the other, a gpu.barrier between each two. The
// threads of a block stride over its row (thread t takes elements t, t + threads, ..., so a
// warp's reads are coalesced). An elementwise op over the row computes its elements so; an
// op over one element per row (a reduction's fill) runs on thread 0; a reduction combines
// each thread's elements into a partial (starting from the combiner's identity), the
// partials meet in workgroup memory as a tree (threads / 2, threads / 4, ... adding, a barrier
// after each step), and thread 0 combines the total with the output's old value. The
// combiner must be associative and commutative: the sums and maxima tinymlir traces
// (arith.addf, arith.maximumf; f32, f64). The sum's order changes: within 1e-5 relative of a
// double loop in the tests.
//
// Which ops join: consecutive linalg ops of one block (only views, allocations and pure
// operations between them) over the same rows x columns, with at least one reduction.
// Blocks run in any order, so every buffer that the kernel writes must be read and written
// only at its own row by every op of the kernel: through the op's loops themselves (an
// element of the rows x columns), or through its row loops alone (a reduction's output, or
// its result broadcast along the row), in a buffer that is the allocation reshaped, nothing
// else. Buffers the kernel only reads may be read in any way (the layer norm's weights along
// the columns, a mask).
#pragma once

namespace mlir {
class ModuleOp;
}

namespace tinymlir {

// Returns the number of row kernels made.
int RewriteRowsToGpuKernels(mlir::ModuleOp module);

}  // namespace tinymlir
