// Host memory for a model's weights: one anonymous mapping per tensor, 2 MB-aligned and
// asked of the kernel as transparent huge pages (madvise MADV_HUGEPAGE; THP's "madvise"
// mode, Debian's default, backs only the mappings that ask). A decode step streams every
// weight once, and the read kernels reach about 68 GB/s over huge pages where 4 KB pages
// give about 50 GB/s (2026-12-04, Zen 4, 2 vCPUs): the TLB walks are the difference.
// Where the kernel refuses (THP "never", no THP), the memory is used in 4 KB pages and
// WeightMemoryReport says why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpt2/src/status.h"

namespace tinymlir::gpt2 {

class HostArray {
 public:
  HostArray() = default;
  ~HostArray();
  HostArray(HostArray &&other) noexcept;
  HostArray &operator=(HostArray &&other) noexcept;
  HostArray(const HostArray &) = delete;
  HostArray &operator=(const HostArray &) = delete;

  // `bytes` of zeroed memory (any previous contents released). Zero bytes is empty, with
  // no mapping. TM_ERROR_OUT_OF_MEMORY when the mapping cannot be made.
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
  // Whether the kernel accepted MADV_HUGEPAGE for this mapping.
  bool huge_pages_asked() const { return huge_; }

 private:
  void Release();
  void *mapping_ = nullptr;  // what munmap takes: [mapping_, mapping_ + mapped_)
  size_t mapped_ = 0;
  void *data_ = nullptr;  // 2 MB-aligned start
  size_t bytes_ = 0;
  bool huge_ = false;
};

// The machine's THP mode ("always", "madvise", "never", or "unavailable"), read once.
const std::string &TransparentHugePageMode();

// Bytes of [data, data + bytes) backed by huge pages now (from /proc/self/smaps: the
// AnonHugePages of the mappings inside the range); 0 where it cannot be read.
uint64_t HugePageBytes(const void *data, size_t bytes);

}  // namespace tinymlir::gpt2
