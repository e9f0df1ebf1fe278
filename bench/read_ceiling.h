// The read ceiling of the benchmarks: how fast this machine's cores can read memory, the
// bound of a decode step (which reads its weights once and writes almost nothing). Shared by
// gpt2_bench (the ceiling of the decode table and of each side-by-side decode) and
// q8_gemv_bandwidth (the ceiling next to each GEMV kernel), so that both compare against the
// same loop over the same kind of memory.
//
//   HugeBuffer  a buffer in 2 MB pages (2 MB aligned, madvise(MADV_HUGEPAGE), every byte
//               written before use), as the model's weights are held: a read over 4 KB
//               pages pays more TLB misses than the decode kernels do;
//   ReadStreams the read kernel: four contiguous parts of [p, p + n) summed in lockstep,
//               one 64-byte vector at a time, each part into its own named accumulator.
//
// Header-only, for single-file programs (its functions are static).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace tm_bench {

typedef float V16 __attribute__((vector_size(64)));  // GCC/Clang vector extension

constexpr size_t kHugePage = size_t{2} << 20;

// The read kernel. Four named accumulators, not an array: at -O2 GCC keeps an array of
// vector accumulators on the stack, and the loop then runs at the speed of its loads and
// stores to it. Measured on the 2-vCPU Zen 5 VM (AVX-512), 512 MB in huge pages: 40-42 GB/s
// with one thread and with two (2026-12-04), where gpt2_bench's earlier kernel (eight
// 32-byte accumulators in an array, software prefetch, 4 KB pages) read 29-30 GB/s in the
// same minutes, and the decode kernels outran it; one, eight or sixteen parts read 37-40
// GB/s (q8_gemv_bandwidth's measurements). Within a benchmark run the samples moved between
// 40 and 52 GB/s. A decode can still read faster than a sample taken before it (the VM's
// bandwidth moves between seconds; kjv-tiny's weights sit in the L3 cache): the bench then
// prints a fraction above 100%. Built for AVX-512 (one zmm per vector), AVX2 (two ymm) and
// baseline x86-64, picked at run time.
__attribute__((target_clones("avx512f", "avx2", "default")))
static float ReadStreams(const V16 *p, size_t n) {
  constexpr size_t kStreams = 4;
  const size_t per = n / kStreams;
  V16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  const V16 *p1 = p + per, *p2 = p + 2 * per, *p3 = p + 3 * per;
  for (size_t i = 0; i < per; ++i) {
    a0 += p[i];
    a1 += p1[i];
    a2 += p2[i];
    a3 += p3[i];
  }
  for (size_t i = kStreams * per; i < n; ++i) a0 += p[i];
  const V16 t = (a0 + a1) + (a2 + a3);
  return t[0] + t[15];
}

// A buffer of whole 2 MB pages: its own mapping, 2 MB aligned, transparent huge pages asked
// for (MADV_HUGEPAGE: this VM's setting is "madvise", as the library's weights ask), every
// float set to `value` (the writes fault the pages in; an untouched page would read as the
// shared zero page and flatter the ceiling).
class HugeBuffer {
 public:
  HugeBuffer(size_t bytes, float value) {
    size_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void *raw = mmap(nullptr, size_ + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return;
    // Keep the 2 MB aligned middle, unmap the ends.
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t tail = start + size_ + kHugePage - (aligned + size_);
    if (tail > 0) munmap(reinterpret_cast<void *>(aligned + size_), tail);
    data_ = reinterpret_cast<V16 *>(aligned);
    madvise(data_, size_, MADV_HUGEPAGE);
    float *f = reinterpret_cast<float *>(data_);
    for (size_t i = 0; i < size_ / sizeof(float); ++i) f[i] = value;
  }
  ~HugeBuffer() {
    if (data_) munmap(data_, size_);
  }
  HugeBuffer(const HugeBuffer &) = delete;
  HugeBuffer &operator=(const HugeBuffer &) = delete;

  bool ok() const { return data_ != nullptr; }
  V16 *data() const { return data_; }
  size_t bytes() const { return size_; }
  size_t count() const { return size_ / sizeof(V16); }

  // Bytes of the buffer the kernel backs with huge pages (AnonHugePages of its mapping in
  // /proc/self/smaps; -1 if not found): what the ceiling really read from.
  long HugePageBytes() const {
    std::ifstream in("/proc/self/smaps");
    std::string line;
    bool inside = false;
    while (std::getline(in, line)) {
      unsigned long lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > 8) {
        inside = lo <= reinterpret_cast<uintptr_t>(data_) && reinterpret_cast<uintptr_t>(data_) < hi;
        continue;
      }
      if (inside && line.compare(0, 14, "AnonHugePages:") == 0)
        return std::atol(line.c_str() + 14) * 1024L;
    }
    return -1;
  }

 private:
  V16 *data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tm_bench
