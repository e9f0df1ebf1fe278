#include "core/targets/gpu/run/recycled_blocks.h"

#include <map>
#include <mutex>
#include <unordered_map>

#include "core/support/fork_safe_mutex.h"
#include "core/support/fork_safe_once.h"
#include "core/targets/gpu/run/cuda_driver.h"

namespace tinymlir {
namespace gpu {
namespace {

struct Blocks {
  ForkSafeMutex mutex;
  std::unordered_map<void *, uint64_t> sizes;  // every block AllocateRecycled handed out
  std::multimap<uint64_t, void *> idle;        // size -> block, for reuse
  uint64_t idle_bytes = 0;
};

// Never destroyed: host objects free memory from their global destructors at exit.
ForkSafeOnce<Blocks *> blocks;

Blocks &All() {
  return *blocks.Get([] { return new Blocks; });
}

// Gives every idle block back to the driver; false when there was none. The blocks are
// taken out of the pool under the lock and freed after it: the driver is never called with
// the lock held (an allocation or a free can take milliseconds, cuMemFree waits for the
// device, and other threads' calls must not queue behind it).
bool FreeIdleBlocks(Blocks &all) {
  std::multimap<uint64_t, void *> idle;
  {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    idle.swap(all.idle);
    for (const auto &[bytes, block] : idle) all.sizes.erase(block);
    all.idle_bytes = 0;
  }
  for (const auto &[bytes, block] : idle) ManagedFree(block);
  return !idle.empty();
}

}  // namespace

Status ManagedAllocMakingRoom(uint64_t bytes, void **out) {
  Status status = ManagedAlloc(bytes, out);
  if (status.code() != StatusCode::kOutOfMemory || !FreeIdleBlocks(All())) return status;
  return ManagedAlloc(bytes, out);
}

Status AllocateRecycled(uint64_t bytes, void **out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  Blocks &all = All();
  {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    if (auto found = all.idle.find(bytes); found != all.idle.end()) {
      *out = found->second;
      all.idle_bytes -= bytes;
      all.idle.erase(found);
      return Status::Ok();
    }
  }
  TM_RETURN_IF_ERROR(ManagedAllocMakingRoom(bytes, out));
  try {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    all.sizes.emplace(*out, bytes);
  } catch (const std::bad_alloc &) {
    ManagedFree(*out);
    *out = nullptr;
    return OutOfMemory("no host memory to record a GPU block of " + std::to_string(bytes) +
                       " bytes");
  }
  return Status::Ok();
}

void Recycle(void *block) {
  if (!block) return;
  Blocks &all = All();
  {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    auto size = all.sizes.find(block);
    if (size != all.sizes.end() && all.idle_bytes + size->second <= kMaxIdleBytes) {
      try {
        all.idle.emplace(size->second, block);
        all.idle_bytes += size->second;
        return;
      } catch (const std::bad_alloc &) {
      }
    }
    if (size != all.sizes.end()) all.sizes.erase(size);
  }
  ManagedFree(block);
}

void FreeRecycled(void *block) {
  if (!block) return;
  Blocks &all = All();
  {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    all.sizes.erase(block);
  }
  ManagedFree(block);
}

void FreeIdle() { FreeIdleBlocks(All()); }

uint64_t IdleBytes() {
  Blocks &all = All();
  std::lock_guard<ForkSafeMutex> lock(all.mutex);
  return all.idle_bytes;
}

}  // namespace gpu
}  // namespace tinymlir
