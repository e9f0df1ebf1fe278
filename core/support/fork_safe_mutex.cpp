#include "core/support/fork_safe_mutex.h"

#include <pthread.h>

#include <atomic>
#include <new>

#include "core/support/fork_safe_once.h"

namespace tinymlir {

// Every ForkSafeMutex of this library, oldest first, and the fork handlers over them.
class ForkSafeMutexes {
 public:
  // Never destroyed: a mutex that is a static of the library may outlive any other static.
  // The handlers are registered once; glibc drops them when the library is unloaded.
  static ForkSafeMutexes &Get();

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
  // The list's own lock is held from before fork() to after it, so no mutex is made or
  // destroyed in between.
  static void BeforeFork() {
    ForkSafeMutexes &all = Get();
    all.list_mutex_.lock();
    for (ForkSafeMutex *m = all.first_; m; m = m->next_) m->mutex_.lock();
  }
  static void AfterFork() {
    ForkSafeMutexes &all = Get();
    for (ForkSafeMutex *m = all.last_; m; m = m->previous_) m->mutex_.unlock();
    all.list_mutex_.unlock();
  }
  static void AfterForkInChild() {
    Get().generation_.fetch_add(1, std::memory_order_relaxed);
    AfterFork();
  }

  std::mutex list_mutex_;
  std::atomic<uint64_t> generation_{0};
  ForkSafeMutex *first_ = nullptr;
  ForkSafeMutex *last_ = nullptr;
};

alignas(ForkSafeMutexes) static unsigned char all_storage[sizeof(ForkSafeMutexes)];
static ForkSafeOnce<ForkSafeMutexes *> all;

ForkSafeMutexes &ForkSafeMutexes::Get() {
  return *all.Get([] {
    auto *made = new (all_storage) ForkSafeMutexes();
    pthread_atfork(&ForkSafeMutexes::BeforeFork, &ForkSafeMutexes::AfterFork,
                   &ForkSafeMutexes::AfterForkInChild);
    return made;
  });
}

ForkSafeMutex::ForkSafeMutex() { ForkSafeMutexes::Get().Add(this); }

uint64_t ForkGeneration() { return ForkSafeMutexes::Get().Generation(); }

ForkSafeMutex::~ForkSafeMutex() { ForkSafeMutexes::Get().Remove(this); }

}  // namespace tinymlir
