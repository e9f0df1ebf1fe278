#include "core/targets/gpu/run/recycled_blocks.h"

#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

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
  // Groups of blocks in the order their events were recorded on the engine's stream, each
  // idle once its event has passed (and so every event before it).
  std::deque<std::pair<CUevent, std::vector<void *>>> pending;
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

// Makes `block` idle (it must be one of AllocateRecycled's), or frees it when the idle
// blocks are at their limit or it is not one.
void MakeIdle(Blocks &all, void *block) {
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

// Moves the groups whose events have passed to the idle blocks; with `wait`, waits for the
// engine's stream first, so that every group has. The driver is asked outside the lock.
void HarvestPending(Blocks &all, bool wait) {
  const CudaDriver *d = nullptr;
  if (!Driver(&d).ok()) return;
  if (wait) (void)Synchronize();
  for (;;) {
    std::pair<CUevent, std::vector<void *>> group;
    {
      std::lock_guard<ForkSafeMutex> lock(all.mutex);
      if (all.pending.empty()) return;
      group.first = all.pending.front().first;
    }
    if (!wait && d->cuEventQuery(group.first) != kCudaSuccess) return;
    {
      std::lock_guard<ForkSafeMutex> lock(all.mutex);
      if (all.pending.empty() || all.pending.front().first != group.first) continue;
      group = std::move(all.pending.front());
      all.pending.pop_front();
    }
    (void)d->cuEventDestroy(group.first);
    for (void *block : group.second) MakeIdle(all, block);
  }
}

// The idle block of exactly `bytes`, taken; null when there is none.
void *TakeIdle(Blocks &all, uint64_t bytes) {
  std::lock_guard<ForkSafeMutex> lock(all.mutex);
  auto found = all.idle.find(bytes);
  if (found == all.idle.end()) return nullptr;
  void *block = found->second;
  all.idle_bytes -= bytes;
  all.idle.erase(found);
  return block;
}

}  // namespace

Status ManagedAllocMakingRoom(uint64_t bytes, void **out) {
  Status status = ManagedAlloc(bytes, out);
  if (status.code() != StatusCode::kOutOfMemory) return status;
  HarvestPending(All(), /*wait=*/true);
  if (!FreeIdleBlocks(All())) return status;
  return ManagedAlloc(bytes, out);
}

Status AllocateRecycled(uint64_t bytes, void **out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  Blocks &all = All();
  if ((*out = TakeIdle(all, bytes))) return Status::Ok();
  HarvestPending(all, /*wait=*/false);
  if ((*out = TakeIdle(all, bytes))) return Status::Ok();
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
  if (block) MakeIdle(All(), block);
}

void RecycleAfterQueuedWork(const std::vector<void *> &blocks) {
  if (blocks.empty()) return;
  Blocks &all = All();
  const CudaDriver *d = nullptr;
  CUstream stream = nullptr;
  CUevent event = nullptr;
  if (Driver(&d).ok() && d->cuEventQuery && EngineStream(&stream).ok() &&
      d->cuEventCreate(&event, kCuEventDisableTiming) == kCudaSuccess) {
    if (d->cuEventRecord(event, stream) == kCudaSuccess) {
      try {
        std::lock_guard<ForkSafeMutex> lock(all.mutex);
        all.pending.emplace_back(event, blocks);
        return;
      } catch (const std::bad_alloc &) {
      }
    }
    (void)d->cuEventDestroy(event);
  }
  (void)Synchronize();
  for (void *block : blocks) MakeIdle(all, block);
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
  HarvestPending(All(), /*wait=*/true);
  FreeIdleBlocks(All());
}

uint64_t IdleBytes() {
  Blocks &all = All();
  std::lock_guard<ForkSafeMutex> lock(all.mutex);
  return all.idle_bytes;
}

}  // namespace gpu
}  // namespace tinymlir
