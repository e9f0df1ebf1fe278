#include "core/target/gpu/recycled_blocks.h"

#include <map>
#include <mutex>
#include <unordered_map>

#include "core/support/fork_safe_mutex.h"
#include "core/support/fork_safe_once.h"
#include "core/target/gpu/cuda_driver.h"

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

// Takes every idle block out of the pool (the caller holds the lock); the caller frees them
// once it has let go of the lock.
std::multimap<uint64_t, void *> TakeIdleLocked(Blocks &all) {
  std::multimap<uint64_t, void *> taken;
  taken.swap(all.idle);
  for (const auto &[bytes, block] : taken) all.sizes.erase(block);
  all.idle_bytes = 0;
  return taken;
}

void FreeAll(const std::multimap<uint64_t, void *> &blocks) {
  for (const auto &[bytes, block] : blocks) ManagedFree(block);
}

}  // namespace

// The driver is called without the lock held, here and below: an allocation or a free can
// take milliseconds (cuMemFree waits for the device), and other threads' calls must not
// queue behind it.
Status ManagedAllocMakingRoom(uint64_t bytes, void **out) {
  Status status = ManagedAlloc(bytes, out);
  if (status.code() != StatusCode::kOutOfMemory) return status;
  Blocks &all = All();
  std::multimap<uint64_t, void *> idle;
  {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    idle = TakeIdleLocked(all);
  }
  if (idle.empty()) return status;
  FreeAll(idle);
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

void FreeIdle() {
  Blocks &all = All();
  std::multimap<uint64_t, void *> idle;
  {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    idle = TakeIdleLocked(all);
  }
  FreeAll(idle);
}

uint64_t IdleBytes() {
  Blocks &all = All();
  std::lock_guard<ForkSafeMutex> lock(all.mutex);
  return all.idle_bytes;
}

}  // namespace gpu
}  // namespace tinymlir
