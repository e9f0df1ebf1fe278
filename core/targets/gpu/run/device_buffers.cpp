#include "core/targets/gpu/run/device_buffers.h"

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

#include "core/support/fork_safe_mutex.h"
#include "core/support/fork_safe_once.h"
#include "core/support/memory_size.h"
#include "core/targets/gpu/run/cuda_driver.h"
#include "core/targets/gpu/run/engine_counters.h"
#include "core/targets/gpu/run/recycled_blocks.h"

namespace tinymlir {
namespace gpu {
namespace {

struct Known {
  ForkSafeMutex mutex;
  std::map<uintptr_t, uint64_t> blocks;  // start -> bytes
  uint64_t bytes = 0;                    // their sum
};

// Never destroyed: a model may free its buffers from a global destructor at exit.
ForkSafeOnce<Known *> known;

Known &AllKnown() {
  return *known.Get([] { return new Known; });
}

struct Budget {
  uint64_t bytes = 0;
  Status status;
};

ForkSafeOnce<Budget> budget;

const Budget &ReadBudget() {
  return budget.Get([] {
    Budget b;
    const char *setting = std::getenv("TINYMLIR_GPU_MEMORY_BUDGET");
    if (setting && *setting && !ParseMemorySize(setting, &b.bytes))
      b.status = InvalidArgument("TINYMLIR_GPU_MEMORY_BUDGET is '" + std::string(setting) +
                                 "': it takes the most GPU memory tinymlir's buffers may hold, "
                                 "in bytes, with K, M, G or T for powers of 1024 (e.g. 2G); "
                                 "unset, the device's memory");
    return b;
  });
}

std::string Asked(uint64_t bytes, bool managed) {
  return std::to_string(bytes) + " bytes of GPU " + (managed ? "managed " : "") +
         "memory were asked for";
}

}  // namespace

Status MemoryBudget(uint64_t *bytes) {
  const Budget &b = ReadBudget();
  *bytes = b.bytes;
  return b.status;
}

uint64_t KnownBytes() {
  Known &k = AllKnown();
  std::lock_guard<ForkSafeMutex> lock(k.mutex);
  return k.bytes;
}

Status AllocateKnownBlock(uint64_t bytes, bool managed, void **out) {
  *out = nullptr;
  uint64_t limit = 0;
  TM_RETURN_IF_ERROR(MemoryBudget(&limit));
  Known &k = AllKnown();
  if (limit != 0) {
    const uint64_t held = KnownBytes();
    if (bytes > limit || held > limit - bytes)
      return OutOfMemory(Asked(bytes, managed) + ", but only " +
                         std::to_string(held > limit ? 0 : limit - held) + " of the " +
                         std::to_string(limit) +
                         " bytes of TINYMLIR_GPU_MEMORY_BUDGET are free");
  }
  if (managed) {
    Status status = ManagedAllocMakingRoom(bytes, out);
    if (!status.ok()) return Status(status.code(), Asked(bytes, true) + ": " + status.message());
  } else {
    TM_RETURN_IF_ERROR(MakeContextCurrent());
    const CudaDriver *d = nullptr;
    TM_RETURN_IF_ERROR(Driver(&d));
    CUdeviceptr ptr = 0;
    Count(EngineEvent::kAllocation);
    CUresult rc = d->cuMemAlloc(&ptr, static_cast<size_t>(bytes));
    if (rc == kCudaErrorOutOfMemory) {
      // The blocks program calls left idle are the engine's to give back.
      FreeIdle();
      rc = d->cuMemAlloc(&ptr, static_cast<size_t>(bytes));
    }
    if (rc != kCudaSuccess) {
      const Status failed = CudaCallFailed("cuMemAlloc", rc, /*say_free_memory=*/true);
      return Status(failed.code(), Asked(bytes, false) + ": " + failed.message());
    }
    *out = reinterpret_cast<void *>(static_cast<uintptr_t>(ptr));
  }
  try {
    std::lock_guard<ForkSafeMutex> lock(k.mutex);
    k.blocks.emplace(reinterpret_cast<uintptr_t>(*out), bytes);
    k.bytes += bytes;
  } catch (const std::bad_alloc &) {
    ManagedFree(*out);
    *out = nullptr;
    return OutOfMemory("no host memory to record a GPU block of " + std::to_string(bytes) +
                       " bytes");
  }
  return Status::Ok();
}

void FreeKnownBlock(void *block) {
  if (!block) return;
  Known &k = AllKnown();
  {
    std::lock_guard<ForkSafeMutex> lock(k.mutex);
    auto found = k.blocks.find(reinterpret_cast<uintptr_t>(block));
    if (found != k.blocks.end()) {
      k.bytes -= found->second;
      k.blocks.erase(found);
    }
  }
  ManagedFree(block);  // cuMemFree, for either kind
}

bool InKnownBlock(const void *p, uint64_t bytes) {
  if (!p) return false;
  const auto at = reinterpret_cast<uintptr_t>(p);
  Known &k = AllKnown();
  std::lock_guard<ForkSafeMutex> lock(k.mutex);
  auto after = k.blocks.upper_bound(at);
  if (after == k.blocks.begin()) return false;
  const auto &[start, size] = *std::prev(after);
  return at - start <= size && bytes <= size - (at - start);
}

}  // namespace gpu
}  // namespace tinymlir
