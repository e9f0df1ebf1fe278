// A mutex that fork() never leaves locked in the child.
//
// A child made by fork() in a multithreaded process has only the forking thread: a lock
// another thread held at that moment stays locked there forever, and what it guarded may be
// half-updated. Processes fork while tinymlir is in use on other threads: Python's
// multiprocessing (fork is its default start method on Linux before Python 3.14), servers
// that fork workers. So every ForkSafeMutex is taken before fork() (one pthread_atfork
// handler takes them all, in the order they were made), and released after it, in the
// parent and in the child: what they guard is whole in the child, and unlocked.
//
// The order matters: a thread that holds one may take only ones made after it (a program
// cache's lock, then its disk cache's, a member made after it), or fork() could deadlock.
#pragma once

#include <cstdint>
#include <mutex>

namespace tinymlir {

class ForkSafeMutex {
 public:
  ForkSafeMutex();
  ~ForkSafeMutex();
  ForkSafeMutex(const ForkSafeMutex &) = delete;
  ForkSafeMutex &operator=(const ForkSafeMutex &) = delete;

  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }
  bool try_lock() { return mutex_.try_lock(); }

 private:
  friend class ForkSafeMutexes;
  std::mutex mutex_;
  ForkSafeMutex *previous_ = nullptr;  // in the list of every ForkSafeMutex, oldest first
  ForkSafeMutex *next_ = nullptr;
};

// How many forks lie between the process that loaded this library and this one: 0 there,
// 1 in its child, 2 in a grandchild. Unlike a pid, never that of another process.
uint64_t ForkGeneration();

}  // namespace tinymlir
