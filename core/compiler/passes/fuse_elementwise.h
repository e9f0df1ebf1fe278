// tm-fuse-elementwise-ops: MLIR's linalg-fuse-elementwise-ops with two differences.
//
// - Reshapes are never folded into (or out of) a linalg op that has reduction loops.
//   Upstream, folding a collapse_shape into a consumer expands that consumer's iteration
//   space, which turns a named linalg.matmul into a linalg.generic; the CPU target then can
//   no longer send it to BLAS (nor could a target that tiles matmuls find it). The rule is
//   that matmuls stay recognisable through fusion: this pass is how.
// - A fused body has at most kMaxFusedBodyOps ops. Each fusion clones both bodies, so
//   fusing a chain of n elementwise ops into one costs n^2 / 2 clones (and as many folds):
//   a chain of 20,000 took 162 s to compile, 4 s with the bound.
//
// Otherwise elementwise fusion (and reshape folding between elementwise ops) is upstream's.
#pragma once

#include <cstddef>
#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// A fusion that would make a body of more than this many ops is not made (see
// FuseIntoBoundedBody).
inline constexpr size_t kMaxFusedBodyOps = 256;

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kFuseElementwisePassName = "tm-fuse-elementwise-ops";

// The pass is not put in MLIR's global pass registry: that registry lives in libMLIR and
// outlives this library, so after an unload it would keep a pointer into code that is gone
// (and a reload would abort on the second registration). pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateFuseElementwisePass();

}  // namespace tinymlir
