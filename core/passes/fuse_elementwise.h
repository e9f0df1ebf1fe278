// tm-fuse-elementwise-ops: MLIR's linalg-fuse-elementwise-ops with one difference —
// reshapes are never folded into (or out of) a linalg op that has reduction loops.
//
// Upstream, folding a collapse_shape into a consumer expands that consumer's iteration
// space, which turns a named linalg.matmul into a linalg.generic; the CPU target then can
// no longer send it to BLAS (nor could a target that tiles matmuls find it). The rule is
// that matmuls stay recognisable through fusion: this pass is how. Elementwise
// fusion itself (and reshape folding between elementwise ops) is unchanged.
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kFuseElementwisePassName = "tm-fuse-elementwise-ops";

// The pass is not put in MLIR's global pass registry: that registry lives in libMLIR and
// outlives this library, so after an unload it would keep a pointer into code that is gone
// (and a reload would abort on the second registration). pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateFuseElementwisePass();

}  // namespace tinymlir
