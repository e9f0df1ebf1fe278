// The recycling of large temporaries between program calls (core/runtime/recycled_temporaries.h):
// a freed block comes back for the next allocation of its size, zeroed when asked, aligned as
// asked; small blocks and blocks past the idle limit go back to the C library.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "core/runtime/guarded_call.h"
#include "core/runtime/recycled_temporaries.h"

namespace tinymlir {
namespace {

TEST(RecycledTemporaries, AFreedLargeBlockServesTheNextAllocationOfItsSize) {
  const size_t bytes = kMinRecycledBytes * 3 + 40;
  void *a = AllocateTemporary(16, bytes, false);
  ASSERT_NE(a, nullptr);
  std::memset(a, 0x5a, bytes);
  const size_t idle_before = IdleTemporaryBytes();
  FreeTemporary(a);
  EXPECT_EQ(IdleTemporaryBytes(), idle_before + bytes);
  void *b = AllocateTemporary(16, bytes, false);
  EXPECT_EQ(b, a) << "the idle block of the same size was not reused";
  EXPECT_EQ(IdleTemporaryBytes(), idle_before);
  // Another size does not take it.
  FreeTemporary(b);
  void *c = AllocateTemporary(16, bytes + 64, false);
  EXPECT_NE(c, a);
  FreeTemporary(c);
}

TEST(RecycledTemporaries, ZeroedAndAlignedRequestsAreHonouredOnReuse) {
  const size_t bytes = kMinRecycledBytes * 2;
  auto *a = static_cast<unsigned char *>(AllocateTemporary(16, bytes, false));
  ASSERT_NE(a, nullptr);
  std::memset(a, 0xff, bytes);
  FreeTemporary(a);
  auto *z = static_cast<unsigned char *>(AllocateTemporary(16, bytes, true));
  ASSERT_EQ(z, a);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(z[i], 0) << "byte " << i << " of a zeroed block";
  FreeTemporary(z);
  // A stricter alignment than the idle block's is a new block, aligned.
  void *aligned = AllocateTemporary(4096, bytes, false);
  ASSERT_NE(aligned, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(aligned) % 4096, 0u);
  FreeTemporary(aligned);
  void *again = AllocateTemporary(4096, bytes, false);
  EXPECT_EQ(again, aligned);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again) % 4096, 0u);
  FreeTemporary(again);
}

TEST(RecycledTemporaries, SmallBlocksAndBlocksPastTheIdleLimitGoBack) {
  const size_t before = IdleTemporaryBytes();
  void *small = AllocateTemporary(16, kMinRecycledBytes - 1, false);
  FreeTemporary(small);
  EXPECT_EQ(IdleTemporaryBytes(), before);
  // More than the limit in blocks of one size: what does not fit is freed.
  const size_t bytes = kMaxIdleBytes / 4 + kMinRecycledBytes;
  std::vector<void *> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(AllocateTemporary(16, bytes, false));
  for (void *b : blocks) FreeTemporary(b);
  EXPECT_LE(IdleTemporaryBytes(), kMaxIdleBytes);
  EXPECT_GE(IdleTemporaryBytes(), 3 * bytes - kMaxIdleBytes / 4);
}

// Through the C entry points generated code calls: tm_rt_malloc / tm_rt_free recycle.
TEST(RecycledTemporaries, TheRuntimeAllocatorRecycles) {
  const size_t bytes = kMinRecycledBytes + 4096;
  void *a = tm_rt_malloc(bytes);
  ASSERT_NE(a, nullptr);
  tm_rt_free(a);
  void *b = tm_rt_malloc(bytes);
  EXPECT_EQ(a, b);
  tm_rt_free(b);
  void *z = tm_rt_calloc(bytes / 4, 4);
  EXPECT_EQ(z, a);
  EXPECT_EQ(static_cast<unsigned char *>(z)[bytes - 1], 0);
  tm_rt_free(z);
}

// Pool workers and concurrent invokes allocate and free at once: no block is handed to two
// threads at a time (each thread's pattern survives its own use), and every block comes back.
// Run under ThreadSanitizer by scripts/test.sh --tsan (the name matches its filter).
TEST(RecycledTemporaries, ConcurrentAllocationsNeverShareABlock) {
  constexpr int kThreads = 4, kRounds = 200;
  const size_t sizes[] = {kMinRecycledBytes, kMinRecycledBytes + 4096, 2 * kMinRecycledBytes};
  std::atomic<int> damaged{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const unsigned char mark = static_cast<unsigned char>(0x10 + t);
      for (int r = 0; r < kRounds; ++r) {
        const size_t bytes = sizes[(r + t) % 3];
        auto *block = static_cast<unsigned char *>(AllocateTemporary(64, bytes, r % 2 == 0));
        if (!block) {
          ++failed;
          return;
        }
        if (r % 2 == 0 && (block[0] != 0 || block[bytes - 1] != 0)) ++damaged;
        std::memset(block, mark, bytes);
        std::this_thread::yield();
        for (size_t i = 0; i < bytes; i += 4096)
          if (block[i] != mark) {
            ++damaged;
            break;
          }
        FreeTemporary(block);
      }
    });
  for (std::thread &t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(damaged.load(), 0) << "a block was written by two threads, or not zeroed";
  EXPECT_LE(IdleTemporaryBytes(), kMaxIdleBytes);
}

}  // namespace
}  // namespace tinymlir
