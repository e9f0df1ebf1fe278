// A value made on first use, once per process, that fork() never leaves half made.
//
// A function-local static is made under a guard (__cxa_guard_acquire): in a child forked
// while another thread was making it, the guard stays taken and the child's first use
// waits forever (forks 0-600 us into the library's first compile hung 29 children of 100).
// std::call_once is pthread_once on glibc, which a child whose fork interrupted it runs
// again. So the library's one-time set-up (settings read from the environment, the host
// CPU's description, paths, the worker pool) is made through ForkSafeOnce, a namespace-scope
// object (constant-initialised: no guard of its own), and never through a function-local
// static with a dynamic initialiser.
//
// A fork handler is never registered in make(): glibc runs fork handlers without its handler
// lock and, in the child, skips those registered after the fork began, so a handler another
// thread registered at first use could miss a fork under way. They are registered when the
// library loads (a namespace-scope `const int ... = pthread_atfork(...)`), and a value made
// later knows a fork from ForkGeneration().
#pragma once

#include <mutex>
#include <optional>
#include <utility>

namespace tinymlir {

template <typename T>
class ForkSafeOnce {
 public:
  constexpr ForkSafeOnce() = default;
  ForkSafeOnce(const ForkSafeOnce &) = delete;
  ForkSafeOnce &operator=(const ForkSafeOnce &) = delete;

  // The value, made by make() (which returns a T) on the first call in this process.
  template <typename Make>
  T &Get(Make &&make) {
    std::call_once(once_, [&] { value_.emplace(Made<Make>{make}); });
    return *value_;
  }

 private:
  // Converts to the T that make() returns, so that emplace makes it in place (a T that
  // cannot be moved, such as the worker pool, is made where it lives).
  template <typename Make>
  struct Made {
    Make &make;
    operator T() const { return make(); }
  };

  std::once_flag once_;
  std::optional<T> value_;
};

}  // namespace tinymlir
