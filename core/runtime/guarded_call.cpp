#include "core/runtime/guarded_call.h"

#include <unistd.h>

#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/recycled_temporaries.h"
#include "core/support/exit_drain.h"
#include "core/support/fork_safe_once.h"

namespace tinymlir {
namespace {

// A resource another runtime handed to the program, with the function that releases it.
struct Resource {
  void *handle;
  void (*release)(void *);
};

struct Guard {
  std::jmp_buf env;
  // malloc'd blocks the current call holds. Kept apart from `resources` so that the CPU
  // allocator's hot path (push, scan from the back, free) is what it was before runtimes
  // with release functions existed.
  std::vector<void *> live;
  std::vector<Resource> resources;  // released in reverse order on unwind
  size_t failed_bytes = 0;          // the allocation that failed, when `failure` is OK
  Status failure;                   // set by FailGuardedCall
};

thread_local Guard *current = nullptr;

[[noreturn]] void Unwind(Guard *guard, size_t bytes) {
  guard->failed_bytes = bytes;
  std::longjmp(guard->env, 1);
}

void *Track(void *block, size_t bytes) {
  Guard *guard = current;
  if (!guard) return block;
  if (!block) Unwind(guard, bytes);
  try {
    guard->live.push_back(block);
  } catch (const std::bad_alloc &) {
    FreeTemporary(block);
    Unwind(guard, bytes);
  }
  return block;
}

// setjmp's frame: nothing here has a destructor for longjmp to skip.
int RunEntry(Guard *guard, void (*entry)(void **), void **args) {
  if (setjmp(guard->env) != 0) return 1;
  entry(args);
  return 0;
}

}  // namespace

Status CallGuarded(void (*entry)(void **), void **args) {
  if (!EnterNativeCode()) return RuntimeError(ExitingMessage());
  struct Leave {
    ~Leave() { LeaveNativeCode(); }
  } leave;
  Guard guard;
  guard.live.reserve(16);
  Guard *outer = current;
  current = &guard;
  const int failed = RunEntry(&guard, entry, args);
  current = outer;
  if (!failed) return Status::Ok();
  // Last acquired first: a stream goes before the memory its work used.
  for (size_t i = guard.resources.size(); i-- > 0;)
    guard.resources[i].release(guard.resources[i].handle);
  for (void *block : guard.live) FreeTemporary(block);
  if (!guard.failure.ok()) return std::move(guard.failure);
  return OutOfMemory("the program's native code could not allocate " +
                     std::to_string(guard.failed_bytes) + " bytes of temporary memory");
}

bool InGuardedCall() { return current != nullptr; }

void FailGuardedCall(Status status) {
  Guard *guard = current;
  if (!guard) std::abort();  // a caller that did not check InGuardedCall(): a bug
  guard->failure = status.ok() ? RuntimeError("the program's native code failed without a "
                                              "reason (a runtime reported an OK status)")
                               : std::move(status);
  std::longjmp(guard->env, 1);
}

void TrackGuardedResource(void *resource, void (*release)(void *)) {
  Guard *guard = current;
  if (!guard) return;
  try {
    guard->resources.push_back(Resource{resource, release});
  } catch (const std::bad_alloc &) {
    release(resource);
    Unwind(guard, sizeof(Resource));
  }
}

void UntrackGuardedResource(void *resource) {
  Guard *guard = current;
  if (!guard) return;
  auto &resources = guard->resources;
  for (size_t i = resources.size(); i-- > 0;)
    if (resources[i].handle == resource) {
      resources.erase(resources.begin() + static_cast<std::ptrdiff_t>(i));  // keeps the order
      return;
    }
}

static ForkSafeOnce<uint64_t> physical_memory_bytes;

uint64_t PhysicalMemoryBytes() {
  return physical_memory_bytes.Get([] {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size)
                                 : UINT64_MAX;
  });
}

}  // namespace tinymlir

extern "C" {

// Large blocks are recycled between calls (recycled_temporaries.h).
void *tm_rt_malloc(size_t bytes) {
  return tinymlir::Track(tinymlir::AllocateTemporary(16, bytes, false), bytes);
}

void *tm_rt_aligned_alloc(size_t alignment, size_t bytes) {
  return tinymlir::Track(tinymlir::AllocateTemporary(alignment, bytes, false), bytes);
}

void *tm_rt_calloc(size_t count, size_t size) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, size, &bytes))  // fails, named as such
    return tinymlir::Track(nullptr, SIZE_MAX);
  return tinymlir::Track(tinymlir::AllocateTemporary(16, bytes, true), bytes);
}

void tm_rt_free(void *block) {
  if (!block) return;
  if (tinymlir::Guard *guard = tinymlir::current) {
    auto &live = guard->live;
    for (size_t i = live.size(); i-- > 0;)
      if (live[i] == block) {
        live[i] = live.back();
        live.pop_back();
        break;
      }
  }
  tinymlir::FreeTemporary(block);
}

}  // extern "C"
