// The GPU target's matmul step: every linalg.matmul / linalg.batch_matmul on f32 or f64
// memrefs becomes a tiled shared-memory kernel (a gpu.launch, outlined later with the rest).
//
// One block computes a tile x tile block of C with tile x tile threads, one output element
// each. For every step of `tile` along K, each thread stages one element of A's tile and
// one of B's into workgroup (shared) memory (zero outside the matrix, so sizes that are not
// multiples of the tile need no special case), the block meets at a gpu.barrier, every
// thread accumulates its row of the A tile times its column of the B tile from shared
// memory, and meets again before the tiles are overwritten. Each element of A and B is
// read from global memory K/tile times fewer than by the naive loop nest. A batch matmul
// puts the batch on the grid's z dimension. linalg.matmul accumulates into C, so the kernel
// adds its sum to C's element; or, when a linalg.fill of C comes before it with nothing
// between them that touches C (bufferization's zeroing of a fresh C), to the fill's value,
// and the fill goes (one launch less).
//
// The ops around a product that only move data or touch each element once join its kernel:
//   - the epilogue: the first op after the product that uses C, when it is an elementwise
//     linalg.generic reading C at one element per element (a bias, a residual, GELU, the
//     attention's scale and mask, or a transpose: the heads merged back into rows). The
//     thread that has an element's sum computes the op's body on it and stores the result,
//     so the op is no launch of its own and C need not be stored and read back;
//   - a transposed copy made for the product to read (the attention's q and v heads split
//     out of rows), when it keeps rows contiguous: the kernel reads the original through a
//     memref.transpose view, and the copy goes.
// GPT-2's decode step: 31 launches per layer before, 22 after (kjv-tiny: 132 launches per
// token, 96 after).
//
// A product with one row of A (a decode step's projections and attention) is a matrix-vector
// kernel instead: the tiled one would leave all but one row of each block's threads idle.
// Blocks of 32 x 32 threads compute 32 outputs each, every thread a 32nd of each dot product
// (K strided by 32, coalesced reads of B's rows, four loads in flight), the partial sums
// added in order after one barrier. A product with one column of B (GPT-2's logits: the
// embedding matrix times the hidden state) is a row-dot kernel: a warp per row of A, its
// lanes strided along the row (coalesced), the lanes' sums added in order after one barrier.
// On an H200, a GPT-2 124M decode step's products took 3.4 ms of kernel time before these
// (the K loop waited for each load; the logits used the tiled kernel).
//
// Matmuls with user-defined indexing maps or other element types are left alone and become
// plain parallel loops like any other linalg op.
#pragma once

#include <cstdint>

namespace mlir {
class ModuleOp;
}

namespace tinymlir {

// Returns the number of matmuls rewritten.
int RewriteMatmulsToGpuKernels(mlir::ModuleOp module, int64_t tile);

}  // namespace tinymlir
