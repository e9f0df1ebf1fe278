#include "core/support/exit_drain.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/support/at_unload.h"
#include "core/support/fork_safe_once.h"

namespace tinymlir {
namespace {

std::atomic<long> inside{0};  // entries under way, all threads
std::atomic<bool> closed{false};
thread_local long own = 0;  // this thread's entries

// A forked child has only the thread that forked: the others' entries are not under way
// there, and waiting for them at its exit would never end. Registered when the library
// loads, not at first use, which could miss a fork another thread had under way (see
// ForkSafeMutexes).
void ForgetOtherThreads() { inside.store(own); }
[[maybe_unused]] const int fork_handler_registered =
    pthread_atfork(nullptr, nullptr, ForgetOtherThreads);

ForkSafeOnce<bool> registered;

void RegisterOnce() {
  registered.Get([] {
    AtUnloadOrExit([](void *) { DrainNativeCode(); });
    return true;
  });
}

}  // namespace

bool EnterNativeCode() {
  RegisterOnce();
  // Counted in before looking at `closed` (both sequentially consistent, as DrainNativeCode's
  // store and load): either the drain sees this entry or this entry sees the drain.
  inside.fetch_add(1);
  if (closed.load()) {
    inside.fetch_sub(1);
    return false;
  }
  ++own;
  return true;
}

void LeaveNativeCode() {
  --own;
  inside.fetch_sub(1);
}

const char *ExitingMessage() {
  return "the process is exiting (exit() has begun): no program starts any more";
}

void DrainNativeCode() {
  closed.store(true);
  while (inside.load() > own) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace tinymlir
