#include "core/runtime/recycled_temporaries.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/support/fork_safe_mutex.h"
#include "core/support/fork_safe_once.h"

namespace tinymlir {
namespace {

struct Block {
  size_t bytes;
  size_t alignment;
  bool idle;
};

// Made on first use and never destroyed: programs may run while the process exits.
struct Recycler {
  ForkSafeMutex mutex;
  std::unordered_map<void *, Block> blocks;  // every recycled block, live or idle
  std::vector<void *> idle;
  size_t idle_bytes = 0;
};

ForkSafeOnce<Recycler *> recycler;

Recycler &Get() {
  return *recycler.Get([] { return new Recycler(); });
}

// Takes an idle block of exactly `bytes` with at least `alignment`, or NULL.
void *TakeIdle(Recycler &r, size_t alignment, size_t bytes) {
  for (size_t i = r.idle.size(); i-- > 0;) {
    Block &b = r.blocks[r.idle[i]];
    if (b.bytes != bytes || b.alignment < alignment) continue;
    void *block = r.idle[i];
    r.idle[i] = r.idle.back();
    r.idle.pop_back();
    b.idle = false;
    r.idle_bytes -= bytes;
    return block;
  }
  return nullptr;
}

void FreeIdleLocked(Recycler &r) {
  for (void *block : r.idle) {
    r.blocks.erase(block);
    std::free(block);
  }
  r.idle.clear();
  r.idle_bytes = 0;
}

}  // namespace

void *AllocateTemporary(size_t alignment, size_t bytes, bool zeroed) {
  alignment = std::max<size_t>(alignment, 16);
  if (bytes < kMinRecycledBytes) {
    if (zeroed) return std::calloc(1, bytes);
    return alignment == 16 ? std::malloc(bytes) : std::aligned_alloc(alignment, bytes);
  }
  Recycler &r = Get();
  void *block = nullptr;
  {
    std::lock_guard<ForkSafeMutex> lock(r.mutex);
    block = TakeIdle(r, alignment, bytes);
  }
  if (block) {
    if (zeroed) std::memset(block, 0, bytes);
    return block;
  }
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded < bytes) return nullptr;
  // calloc's block is zeroed already (a fresh mapping lazily, not page by page here).
  bool needs_zeroing = zeroed && alignment != 16;
  block = zeroed && alignment == 16 ? std::calloc(1, rounded) : std::aligned_alloc(alignment, rounded);
  if (!block) {  // out of memory: the idle blocks first, then once more
    {
      std::lock_guard<ForkSafeMutex> lock(r.mutex);
      FreeIdleLocked(r);
    }
    block = std::aligned_alloc(alignment, rounded);
    if (!block) return nullptr;
    needs_zeroing = zeroed;
  }
  if (needs_zeroing) std::memset(block, 0, bytes);
  try {
    std::lock_guard<ForkSafeMutex> lock(r.mutex);
    r.blocks.emplace(block, Block{bytes, alignment, false});
  } catch (...) {  // no room to record it: an ordinary block, freed by FreeTemporary
  }
  return block;
}

void FreeTemporary(void *block) {
  if (!block) return;
  Recycler *r = &Get();
  {
    std::lock_guard<ForkSafeMutex> lock(r->mutex);
    auto it = r->blocks.find(block);
    if (it != r->blocks.end() && !it->second.idle) {
      if (r->idle_bytes + it->second.bytes <= kMaxIdleBytes) {
        try {
          r->idle.push_back(block);
          it->second.idle = true;
          r->idle_bytes += it->second.bytes;
          return;
        } catch (...) {
        }
      }
      r->blocks.erase(it);
    }
  }
  std::free(block);
}

size_t IdleTemporaryBytes() {
  Recycler &r = Get();
  std::lock_guard<ForkSafeMutex> lock(r.mutex);
  return r.idle_bytes;
}

}  // namespace tinymlir
