// tm-one-fill-per-use: a linalg.fill with several users (CSE merges the identical zero fills
// that two reductions or two matmuls start from) is cloned, with its tensor.empty, just
// before each user after the first.
//
// Every user of the shared fill writes into it, so bufferization can give it to one of them
// only; each other one got a buffer of its own and a copy of the filled one (3 copies per
// layer and token in GPT-2's decode, 1 in its head; on the GPU, a kernel launch each). A
// fill of its own is as cheap as that copy, needs no source, and, placed just before its
// user, is folded into it on the GPU (a matmul kernel starts from it, a reduction's zeroing
// fuses with its loop).
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kOneFillPerUsePassName = "tm-one-fill-per-use";

// Not put in MLIR's global pass registry (see fuse_elementwise.h); pipelines.cpp adds it by
// name.
std::unique_ptr<mlir::Pass> CreateOneFillPerUsePass();

}  // namespace tinymlir
