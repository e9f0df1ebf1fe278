#include "gpt2/src/weight_memory.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <utility>

namespace tinymlir::gpt2 {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

HostArray::~HostArray() { Release(); }

HostArray::HostArray(HostArray &&other) noexcept { *this = std::move(other); }

HostArray &HostArray::operator=(HostArray &&other) noexcept {
  if (this != &other) {
    Release();
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    huge_ = std::exchange(other.huge_, false);
  }
  return *this;
}

void HostArray::Release() {
  if (mapping_) munmap(mapping_, mapped_);
  mapping_ = data_ = nullptr;
  mapped_ = bytes_ = 0;
  huge_ = false;
}

Status HostArray::Allocate(size_t bytes) {
  Release();
  if (bytes == 0) return Status::Ok();
  // A tensor smaller than a huge page (a bias, a layer norm's gain) gets ordinary pages: a
  // huge page each would cost 2 MB apiece (GPT-2 124M's 148 tensors: 250 MB more).
  const bool huge = bytes >= kHugePage;
  const size_t align = huge ? kHugePage : 4096;
  // Rounded up to whole pages, plus one huge page to align the start: the kernel can then
  // back every 2 MB of a large tensor with one page (MAP_NORESERVE: untouched rounding costs
  // nothing).
  const size_t rounded = (bytes + align - 1) / align * align;
  const size_t extra = huge ? kHugePage : 0;
  if (rounded < bytes || rounded + extra < rounded)
    return OutOfMemory("a weight of " + std::to_string(bytes) + " bytes does not fit in memory");
  void *map = mmap(nullptr, rounded + extra, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED)
    return OutOfMemory("cannot map " + std::to_string(bytes) + " bytes for a weight: " +
                       std::strerror(errno));
  mapping_ = map;
  mapped_ = rounded + extra;
  data_ = reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(map) + align - 1) / align * align);
  bytes_ = bytes;
  // Huge pages for the whole 2 MB spans only: a huge page at the tail would make its unused
  // part resident too (48 of GPT-2 124M's matrices end inside one: 45 MB).
  huge_ = huge && madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE) == 0;
  return Status::Ok();
}

const std::string &TransparentHugePageMode() {
  static std::once_flag once;
  static std::string *mode = nullptr;
  std::call_once(once, [] {
    std::string text;
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::getline(in, text);
    const size_t open = text.find('['), close = text.find(']');
    mode = new std::string(open != std::string::npos && close > open
                               ? text.substr(open + 1, close - open - 1)
                               : std::string("unavailable"));
  });
  return *mode;
}

uint64_t HugePageBytes(const void *data, size_t bytes) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return 0;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(data), hi = lo + bytes;
  uint64_t total = 0;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long start = 0, end = 0;
    // A mapping's first line, "start-end perms ..."; its fields ("Name: value") follow.
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2) {
      inside = start < hi && end > lo;
      continue;
    }
    unsigned long kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %lu kB", &kb) == 1) total += kb << 10;
  }
  return total;
}

}  // namespace tinymlir::gpt2
