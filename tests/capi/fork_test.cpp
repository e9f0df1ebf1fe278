// fork() while other threads use the library: the child has only the forking thread, so
// nothing it needs may wait for a thread that was not copied (docs/ARCHITECTURE.md, "fork()").
//
// Not in the AddressSanitizer suite (tests/CMakeLists.txt): GCC 12's ASan allocator takes no
// lock across fork() (glibc's malloc does), so a child forked while another thread refills a
// size class hangs inside ASan's allocator, whatever the library does.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "cache_test_util.h"

namespace tmtest {
namespace {

// In a child forked from this process: alarm `seconds` (a hang ends as SIGALRM), run
// `body`, and _exit with the status it returns (only the forking thread is copied: a normal
// exit would run destructors over other threads' state).
template <typename Body>
pid_t ForkChild(unsigned seconds, Body body) {
  const pid_t child = fork();
  if (child == 0) {
    alarm(seconds);
    _exit(body());
  }
  return child;
}

// How a child ended: "exit 0", "exit 1", "signal 14".
std::string Ending(pid_t child) {
  int status = 0;
  if (waitpid(child, &status, 0) != child) return "not waited for";
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

// A child forked while another thread compiles a program compiles it itself: the parent's
// compile never finishes there (its thread was not copied), so waiting for it, as a second
// caller in the parent does, would wait forever.
TEST(Cache, AForkedChildCompilesWhatTheParentHadInFlight) {
  Context ctx = NewContext();
  TM_ASSERT_OK(tm_cache_set_dir(ctx, nullptr, 0));  // a compile, not a quick disk read
  // A first compile, so that the library's one-time set-up (function statics, which a
  // fork during their first use would also leave half-done) is over.
  Trace first = TraceScaled(ctx, {1, 2}, "first");
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, first, nullptr, p.out()));
  // Two equal traces of 80 ops: a compile long enough for the fork to fall inside it.
  auto slow = [&] {
    Trace t = NewTrace(ctx, "in_flight");
    tm_value v = Input(t, TM_F32, {3, 4});
    tm_value w = Input(t, TM_F32, {4, 4});
    for (int i = 0; i < 40; ++i) v = Op(tm_op_tanh, t, Op(tm_op_matmul, t, v, w));
    End(t, {v});
    return t;
  };
  Trace parents = slow(), childs = slow();
  std::thread compiling([&] {
    Program p;
    EXPECT_EQ(tm_compile(ctx, parents, nullptr, p.out()), TM_OK) << tm_last_error();
  });
  while (CacheStats(ctx).misses == 1) std::this_thread::yield();  // in flight now
  constexpr int kEndedBeforeTheFork = 77;
  const pid_t child = ForkChild(30, [&] {
    // The child's cache is the parent's at the fork: holding only `first` means the second
    // compile was still in flight then (asked in the parent, the answer could change
    // before the fork).
    uint64_t entries = 0;
    if (tm_cache_stats(ctx, nullptr, nullptr, &entries) != TM_OK) return 2;
    if (entries != 1) return kEndedBeforeTheFork;
    Host<float> x({3, 4}, 0.5f), w({4, 4}, 0.5f), y({3, 4}, 0.0f);
    double want = 0.5;  // every element: tanh(4 * 0.5 * previous), 40 times
    for (int i = 0; i < 40; ++i) want = std::tanh(2.0 * want);
    Program p;
    const bool ok =
        CompileInvoke(ctx, childs, {x.view(), w.view()}, {y.view()}, nullptr, &p) == TM_OK &&
        tm_program_cache_hit(p) == 0 && std::fabs(y[11] - want) <= 1e-5;
    return ok ? 0 : 1;
  });
  compiling.join();
  const std::string ending = Ending(child);
  if (ending == "exit " + std::to_string(kEndedBeforeTheFork))
    GTEST_SKIP() << "the compile ended before the fork: nothing to test";
  EXPECT_EQ(ending, "exit 0");
}

// Children forked while other threads use the cache (each lookup takes its lock) find it
// unlocked: a lock held by another thread at the fork would stay locked in the child.
TEST(Cache, ForkedChildrenNeverInheritALockedCache) {
  Context ctx = NewContext();
  Trace warm = TraceScaled(ctx, {2, 2}, "warm");
  Program first;
  TM_ASSERT_OK(tm_compile(ctx, warm, nullptr, first.out()));
  std::atomic<bool> stop{false};
  std::vector<std::thread> lookups;
  for (int i = 0; i < 3; ++i)
    lookups.emplace_back([&] {
      Trace mine = TraceScaled(ctx, {2, 2}, "warm");
      while (!stop.load()) {
        Program p;
        EXPECT_EQ(tm_compile(ctx, mine, nullptr, p.out()), TM_OK) << tm_last_error();
      }
    });
  int hung = 0, failed = 0;
  for (int i = 0; i < 200; ++i) {
    const pid_t child = ForkChild(10, [&] {
      Program p;
      return tm_compile(ctx, warm, nullptr, p.out()) == TM_OK ? 0 : 1;
    });
    const std::string ending = Ending(child);
    hung += ending == "signal 14";
    failed += ending != "exit 0" && ending != "signal 14";
  }
  stop = true;
  for (std::thread &t : lookups) t.join();
  EXPECT_EQ(hung, 0) << "children that waited for a lock held at the fork";
  EXPECT_EQ(failed, 0);
}

}  // namespace
}  // namespace tmtest
