// tm-unshare-tensors: tensors that many ops share, where CSE or the trace made them one
// value, are split before bufferization: the tensors ops write their results into (a linalg
// op's `outs`), and read-only tensors many ops read.
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
//   after CSE) serves groups of kUsersPerTensor users in program order, a clone each.
//   One-shot bufferization checks each in-place write against every value that may share
//   its buffer, and the users of one empty form one such set: a program of n such ops cost
//   it about n^3 (500 reductions with their elementwise ops took 28 s; a whole model traced
//   at once, minutes). Bounded groups keep it linear, and keep what the sharing gives:
//   ops close together reuse a dead result's buffer (one empty per user instead doubled
//   the temporaries of GPT-2's 256-token prefill, 3.3 to 7.3 MB).
//
// - A read-only tensor with many readers (an input's bufferization.to_tensor, a tensor
//   constant: a weight that every step of an unrolled recurrence reads) serves groups of
//   kUsersPerTensor readers the same way. One-shot bufferization, for each operand it
//   analyses, gathers every use of every value that may share the operand's buffer, so n
//   readers of one tensor cost it n^2 (an unrolled recurrence of 1,000 steps reading three
//   inputs at each: 4.4 s of 15.8 s to compile). An input's to_tensor is `restrict`, which
//   promises that no other to_tensor reads its buffer; the clones break the letter of that
//   promise but not what it protects: the analysis needs every access to a buffer in one
//   place only to see writes, and an input is not `writable` (a write to it, or to anything
//   sharing its buffer, is made to a copy), nor does the caller's memory change during the
//   call (inputs that overlap an output are copied first). Each clone bufferizes to the
//   same function argument, each constant's to the same global.
#pragma once

#include <cstddef>
#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kUnshareTensorsPassName = "tm-unshare-tensors";

// The users one tensor.empty, input or constant serves at most.
inline constexpr size_t kUsersPerTensor = 16;

// Not put in MLIR's global pass registry (see fuse_elementwise.h); pipelines.cpp adds it by
// name.
std::unique_ptr<mlir::Pass> CreateUnshareTensorsPass();

}  // namespace tinymlir
