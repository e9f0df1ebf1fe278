// tm-unshare-destinations: the tensors that ops write their results into (a linalg op's
// `outs`), where CSE made several ops share one, are split before bufferization.
//
// - A linalg.fill with several users (CSE merges the identical zero fills that two
//   reductions or two matmuls start from) is cloned, with its tensor.empty, just before
//   each user after the first. Every user writes into the fill, so bufferization could give
//   it to one of them only; each other one got a buffer of its own and a copy of the filled
//   one (3 copies per layer and token in GPT-2's decode, 1 in its head; on the GPU, a kernel
//   launch each). A fill of its own is as cheap as that copy, needs no source, and, placed
//   just before its user, is folded into it on the GPU (a matmul kernel starts from it, a
//   reduction's zeroing fuses with its loop).
//
// - A tensor.empty with many users (every elementwise result of one shape in the program,
//   after CSE) serves groups of kUsersPerEmpty users in program order, a clone each.
//   One-shot bufferization checks each in-place write against every value that may share
//   its buffer, and the users of one empty form one such set: a program of n such ops cost
//   it about n^3 (500 reductions with their elementwise ops took 28 s; a whole model traced
//   at once, minutes). Bounded groups keep it linear, and keep what the sharing gives:
//   ops close together reuse a dead result's buffer (one empty per user instead doubled
//   the temporaries of GPT-2's 256-token prefill, 3.3 to 7.3 MB).
#pragma once

#include <cstddef>
#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kUnshareDestinationsPassName = "tm-unshare-destinations";

// The users one tensor.empty serves at most.
inline constexpr size_t kUsersPerEmpty = 16;

// Not put in MLIR's global pass registry (see fuse_elementwise.h); pipelines.cpp adds it by
// name.
std::unique_ptr<mlir::Pass> CreateUnshareDestinationsPass();

}  // namespace tinymlir
