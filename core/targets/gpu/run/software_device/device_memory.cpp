#include "core/targets/gpu/run/software_device/device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

namespace tinymlir {
namespace gpu {
namespace software {
namespace {

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

uint64_t PageBytes() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

// The largest block below `p` in `blocks` that contains [p, p + bytes).
bool InBlock(const std::map<uintptr_t, uint64_t> &blocks, uintptr_t p, uint64_t bytes) {
  auto it = blocks.upper_bound(p);
  if (it == blocks.begin()) return false;
  --it;
  return p - it->first <= it->second && bytes <= it->second - (p - it->first);
}

}  // namespace

DeviceMemory::~DeviceMemory() {
  FreeAll();
  if (base_) munmap(reinterpret_cast<void *>(base_), capacity_);
}

bool DeviceMemory::Reserve(uint64_t capacity) {
  capacity = RoundUp(capacity, PageBytes());
  void *range = mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
  if (range == MAP_FAILED) return false;
  base_ = reinterpret_cast<uintptr_t>(range);
  capacity_ = capacity;
  free_.clear();
  free_.emplace(0, capacity);
  return true;
}

bool DeviceMemory::Carve(uint64_t bytes, uint64_t *offset) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    *offset = it->first;
    const uint64_t rest = it->second - bytes;
    free_.erase(it);
    if (rest) free_.emplace(*offset + bytes, rest);
    return true;
  }
  return false;
}

void DeviceMemory::Release(uint64_t offset, uint64_t bytes) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += bytes;
      return;
    }
  }
  free_.emplace(offset, bytes);
}

bool DeviceMemory::Allocate(uint64_t bytes, uintptr_t *out) {
  const uint64_t rounded = RoundUp(bytes, kAlignment);
  if (rounded < bytes || capacity_ - used_ < rounded) return false;
  uint64_t offset = 0;
  if (!Carve(rounded, &offset)) return false;
  *out = base_ + offset;
  device_.emplace(*out, rounded);
  used_ += rounded;
  return true;
}

bool DeviceMemory::AllocateManaged(uint64_t bytes, uintptr_t *out) {
  const uint64_t rounded = RoundUp(bytes, PageBytes());
  if (rounded < bytes || capacity_ - used_ < rounded) return false;
  void *block = nullptr;
  if (posix_memalign(&block, PageBytes(), rounded) != 0) return false;
  *out = reinterpret_cast<uintptr_t>(block);
  managed_.emplace(*out, rounded);
  used_ += rounded;
  return true;
}

bool DeviceMemory::Free(uintptr_t p) {
  if (auto it = device_.find(p); it != device_.end()) {
    // Whole pages inside the block go back to the system (they read as zeros if reused).
    const uint64_t first = RoundUp(p, PageBytes()), end = (p + it->second) / PageBytes() *
                                                          PageBytes();
    if (end > first) madvise(reinterpret_cast<void *>(first), end - first, MADV_DONTNEED);
    Release(p - base_, it->second);
    used_ -= it->second;
    device_.erase(it);
    return true;
  }
  if (auto it = managed_.find(p); it != managed_.end()) {
    std::free(reinterpret_cast<void *>(p));
    used_ -= it->second;
    managed_.erase(it);
    return true;
  }
  return false;
}

void DeviceMemory::FreeAll() {
  while (!device_.empty()) Free(device_.begin()->first);
  while (!managed_.empty()) Free(managed_.begin()->first);
}

bool DeviceMemory::InDeviceBlock(uintptr_t p, uint64_t bytes) const {
  return InBlock(device_, p, bytes);
}

bool DeviceMemory::InManagedBlock(uintptr_t p, uint64_t bytes) const {
  return InBlock(managed_, p, bytes);
}

DeviceMemory::Open::Open(const DeviceMemory &memory) : memory_(memory) {
  if (memory_.base_)
    mprotect(reinterpret_cast<void *>(memory_.base_), memory_.capacity_, PROT_READ | PROT_WRITE);
}

DeviceMemory::Open::~Open() {
  if (memory_.base_) mprotect(reinterpret_cast<void *>(memory_.base_), memory_.capacity_, PROT_NONE);
}

}  // namespace software
}  // namespace gpu
}  // namespace tinymlir
