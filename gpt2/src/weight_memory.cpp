#include "gpt2/src/weight_memory.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

namespace tinymlir::gpt2 {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

struct HostArray::Mapping {
  void *start = nullptr;  // what munmap takes: [start, start + bytes)
  size_t bytes = 0;
  ~Mapping() {
    if (start) munmap(start, bytes);
  }
};

Status HostArray::Allocate(size_t bytes) {
  *this = HostArray();
  if (bytes == 0) return Status::Ok();
  // A tensor smaller than a huge page (a bias, a layer norm's gain) gets ordinary pages: a
  // huge page each would cost 2 MB apiece (GPT-2 124M's 148 tensors: 250 MB more).
  const bool huge = bytes >= kHugePage;
  const size_t align = huge ? kHugePage : 4096;
  // Rounded up to whole pages, plus one huge page to align the start: the kernel can then
  // back every 2 MB with one page (MAP_NORESERVE: untouched rounding costs nothing).
  const size_t rounded = (bytes + align - 1) / align * align;
  const size_t extra = huge ? kHugePage : 0;
  if (rounded < bytes || rounded + extra < rounded)
    return OutOfMemory("a weight of " + std::to_string(bytes) + " bytes does not fit in memory");
  void *map = mmap(nullptr, rounded + extra, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED)
    return OutOfMemory("cannot map " + std::to_string(bytes) + " bytes for a weight: " +
                       std::strerror(errno));
  mapping_ = std::make_shared<Mapping>();
  mapping_->start = map;
  mapping_->bytes = rounded + extra;
  data_ = reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(map) + align - 1) / align * align);
  bytes_ = bytes;
  // Huge pages for the whole 2 MB spans only: a huge page at the tail would make its unused
  // part resident too. Where the kernel refuses, 4 KB pages (the load report counts them).
  if (huge) (void)madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return Status::Ok();
}

size_t HostArena::Space(size_t bytes) { return (bytes + 63) / 64 * 64; }

Status HostArena::Allocate(size_t bytes) {
  used_ = 0;
  return whole_.Allocate(bytes);
}

Status HostArena::Take(size_t bytes, HostArray *out) {
  const size_t space = Space(bytes);
  if (space < bytes || space > whole_.bytes() - used_)
    return Status(StatusCode::kRuntime, "HostArena::Take: " + std::to_string(bytes) +
                                            " bytes past the " + std::to_string(whole_.bytes()) +
                                            " allocated");
  HostArray part;
  part.mapping_ = whole_.mapping_;
  part.data_ = bytes ? static_cast<char *>(whole_.data_) + used_ : nullptr;
  part.bytes_ = bytes;
  used_ += space;
  *out = std::move(part);
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

uint64_t HugePageBytes(const std::vector<std::pair<const void *, size_t>> &ranges) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return 0;
  uint64_t total = 0;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long start = 0, end = 0;
    // A mapping's first line, "start-end perms ..."; its fields ("Name: value") follow.
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2) {
      inside = false;
      for (const auto &[data, bytes] : ranges) {
        const uintptr_t lo = reinterpret_cast<uintptr_t>(data), hi = lo + bytes;
        inside = inside || (start < hi && end > lo);
      }
      continue;
    }
    unsigned long kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %lu kB", &kb) == 1) total += kb << 10;
  }
  return total;
}

}  // namespace tinymlir::gpt2
