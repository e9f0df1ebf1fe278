// tm-fuse-elementwise-ops: MLIR's linalg-fuse-elementwise-ops with one difference —
// reshapes are never folded into (or out of) a linalg op that has reduction loops.
//
// Upstream, folding a collapse_shape into a consumer expands that consumer's iteration
// space, which turns a named linalg.matmul into a linalg.generic; the CPU target then can
// no longer send it to BLAS (nor could a target that tiles matmuls find it). The rule is
// that matmuls stay recognisable through fusion: this pass is how. Elementwise
// fusion itself (and reshape folding between elementwise ops) is unchanged.
#pragma once

namespace tinymlir {

// Registers the pass under its pipeline name; idempotent.
void RegisterFuseElementwisePass();

}  // namespace tinymlir
