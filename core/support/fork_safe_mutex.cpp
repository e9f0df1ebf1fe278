#include "core/support/fork_safe_mutex.h"

#include <pthread.h>

#include <atomic>

namespace tinymlir {

// Every ForkSafeMutex of this library, oldest first, and the fork handlers over them.
class ForkSafeMutexes {
 public:
  // The one list. Constant-initialised (no constructor runs), so it exists before any mutex
  // is made, and never destroyed (its destructor is trivial): a mutex that is a static of the
  // library may outlive any other static.
  static ForkSafeMutexes all;

  constexpr ForkSafeMutexes() = default;

  void Add(ForkSafeMutex *m) {
    std::lock_guard<std::mutex> lock(list_mutex_);
    m->previous_ = last_;
    (last_ ? last_->next_ : first_) = m;
    last_ = m;
  }

  uint64_t Generation() const { return generation_.load(std::memory_order_relaxed); }

  void Remove(ForkSafeMutex *m) {
    std::lock_guard<std::mutex> lock(list_mutex_);
    (m->previous_ ? m->previous_->next_ : first_) = m->next_;
    (m->next_ ? m->next_->previous_ : last_) = m->previous_;
  }

 private:
  static const int handlers_registered_;

  // The list's own lock is held from before fork() to after it, so no mutex is made or
  // destroyed in between.
  static void BeforeFork() {
    all.list_mutex_.lock();
    for (ForkSafeMutex *m = all.first_; m; m = m->next_) m->mutex_.lock();
  }
  static void AfterFork() {
    for (ForkSafeMutex *m = all.last_; m; m = m->previous_) m->mutex_.unlock();
    all.list_mutex_.unlock();
  }
  static void AfterForkInChild() {
    all.generation_.fetch_add(1, std::memory_order_relaxed);
    AfterFork();
  }

  std::mutex list_mutex_;
  std::atomic<uint64_t> generation_{0};
  ForkSafeMutex *first_ = nullptr;
  ForkSafeMutex *last_ = nullptr;
};

ForkSafeMutexes ForkSafeMutexes::all;

// The handlers are registered when the library loads, before any thread can use it. Not at
// first use: glibc runs fork handlers without its handler lock and skips, in the child, the
// ones registered after the fork began, so a thread that registered them (and then took a
// mutex) during another thread's fork() would leave that mutex locked in the child.
const int ForkSafeMutexes::handlers_registered_ =
    pthread_atfork(&BeforeFork, &AfterFork, &AfterForkInChild);

ForkSafeMutex::ForkSafeMutex() { ForkSafeMutexes::all.Add(this); }

uint64_t ForkGeneration() { return ForkSafeMutexes::all.Generation(); }

ForkSafeMutex::~ForkSafeMutex() { ForkSafeMutexes::all.Remove(this); }

}  // namespace tinymlir
