// The recycling of large temporaries between program calls (core/runtime/recycled_temporaries.h):
// a freed block comes back for the next allocation of its size, zeroed when asked, aligned as
// asked; small blocks and blocks past the idle limit go back to the C library.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
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

}  // namespace
}  // namespace tinymlir
