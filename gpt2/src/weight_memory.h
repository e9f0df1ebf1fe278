// Host memory for a model's weights: anonymous mappings, 2 MB-aligned and asked of the
// kernel as transparent huge pages (madvise MADV_HUGEPAGE; THP's "madvise" mode, Debian's
// default, backs only the mappings that ask). A decode step streams every weight once, and
// the read kernels stream huge pages markedly faster than 4 KB pages: the TLB walks are the
// difference. A model's tensors share one mapping (HostArena), back to back: only its last
// partial 2 MB is in 4 KB pages (one mapping per tensor would leave every matrix under
// 2 MB, and every tail, in 4 KB pages). Where the kernel refuses (THP "never",
// no THP), the memory is used in 4 KB pages and the model's load report says why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpt2/src/status.h"

namespace tinymlir::gpt2 {

// Bytes in host memory: a mapping of its own (Allocate) or a part of one it shares with
// other arrays (HostArena::Take); the mapping goes when the last array using it does.
class HostArray {
 public:
  HostArray() = default;
  HostArray(HostArray &&other) noexcept { *this = std::move(other); }
  HostArray &operator=(HostArray &&other) noexcept {
    mapping_ = std::move(other.mapping_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    return *this;
  }
  HostArray(const HostArray &) = delete;
  HostArray &operator=(const HostArray &) = delete;

  // `bytes` of zeroed memory in a mapping of its own (any previous contents released). Zero
  // bytes is empty, with no mapping. TM_ERROR_OUT_OF_MEMORY when the mapping cannot be made.
  Status Allocate(size_t bytes);

  void *data() { return data_; }
  const void *data() const { return data_; }
  template <typename T>
  T *as() {
    return static_cast<T *>(data_);
  }
  template <typename T>
  const T *as() const {
    return static_cast<const T *>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  friend class HostArena;
  struct Mapping;
  std::shared_ptr<Mapping> mapping_;  // unmapped with the last array that uses it
  void *data_ = nullptr;
  size_t bytes_ = 0;
};

// One mapping carved into HostArrays in order: the tensors of a model back to back, so that
// every whole 2 MB of them is a huge page, and no tensor's tail costs a page of its own.
// Allocate it for the sum of Space() of the tensors to come, then Take each.
class HostArena {
 public:
  // The room a tensor of `bytes` takes: rounded up to 64, so every tensor starts on a
  // cache line.
  static size_t Space(size_t bytes);
  Status Allocate(size_t bytes);
  // The next `bytes` of the mapping, zeroed; an internal error past what was allocated.
  Status Take(size_t bytes, HostArray *out);

 private:
  HostArray whole_;
  size_t used_ = 0;
};

// The machine's THP mode ("always", "madvise", "never", or "unavailable"), read once.
const std::string &TransparentHugePageMode();

// Bytes of the ranges (start, length) backed by huge pages now, from /proc/self/smaps: the
// AnonHugePages of each mapping that meets one of them, each mapping counted once; 0 where
// it cannot be read.
uint64_t HugePageBytes(const std::vector<std::pair<const void *, size_t>> &ranges);

}  // namespace tinymlir::gpt2
