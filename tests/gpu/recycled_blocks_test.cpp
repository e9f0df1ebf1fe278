// Managed blocks recycled between GPU program calls (core/targets/gpu/run/recycled_blocks.h), and
// the call scope that hands them back once the device is done (gpu::DeferredFrees), against
// the fake CUDA driver (tests/gpu/fake_cuda_driver.cpp) with a device of 400 MiB: CTest runs
// them as gpu_shim_fake_driver; elsewhere they skip.
#include "core/targets/gpu/run/recycled_blocks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/targets/gpu/run/cuda_driver.h"
#include "core/targets/gpu/run/gpu_runtime.h"

namespace tinymlir {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string DriverLog() {
  std::ifstream in(std::getenv("FAKE_CUDA_LOG"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int Count(const std::string &text, const std::string &line) {
  int n = 0;
  for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
  return n;
}

class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::getenv("FAKE_CUDA_LOG") || !std::getenv("FAKE_CUDA_DEVICE_BYTES"))
      GTEST_SKIP() << "runs against the fake CUDA driver (CTest: gpu_shim_fake_driver)";
    gpu::FreeIdle();  // each test starts with no idle block
  }
};

TEST_F(FakeDriver, ABlockOfTheSameSizeComesBackAndAnotherSizeIsNew) {
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_TRUE(gpu::AllocateRecycled(3 * 4096 + 8, &a).ok());
  gpu::Recycle(a);
  EXPECT_EQ(gpu::IdleBytes(), 3 * 4096 + 8u);
  ASSERT_TRUE(gpu::AllocateRecycled(3 * 4096 + 16, &b).ok());
  EXPECT_NE(b, a);
  ASSERT_TRUE(gpu::AllocateRecycled(3 * 4096 + 8, &c).ok());
  EXPECT_EQ(c, a);
  EXPECT_EQ(gpu::IdleBytes(), 0u);
  gpu::FreeRecycled(b);
  gpu::FreeRecycled(c);
  EXPECT_EQ(gpu::IdleBytes(), 0u);
  void *none = &a;
  ASSERT_TRUE(gpu::AllocateRecycled(0, &none).ok());
  EXPECT_EQ(none, nullptr);
  gpu::Recycle(nullptr);
}

// The pool's lock is not held across the driver's calls: a new block on one thread does
// not wait for another thread's allocation. The fake driver holds each allocation until two
// are inside it at once; were the second kept out by the pool's lock, the first would give
// up waiting ("alloc waited alone") after 20 s.
TEST_F(FakeDriver, AllocationsOnTwoThreadsDoNotWaitForEachOther) {
  void *a = nullptr, *b = nullptr;
  const size_t before = DriverLog().size();
  ASSERT_EQ(setenv("FAKE_CUDA_ALLOC_MEETS", "2", 1), 0);
  std::thread other([&] { EXPECT_TRUE(gpu::AllocateRecycled(2 * kMiB, &b).ok()); });
  EXPECT_TRUE(gpu::AllocateRecycled(1 * kMiB, &a).ok());
  other.join();
  unsetenv("FAKE_CUDA_ALLOC_MEETS");
  const std::string log = DriverLog().substr(before);
  EXPECT_EQ(Count(log, "allocs met"), 1) << log;
  EXPECT_EQ(Count(log, "alloc waited alone"), 0) << "the allocations ran one after the other";
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  gpu::Recycle(a);
  gpu::Recycle(b);
  EXPECT_EQ(gpu::IdleBytes(), 3 * kMiB);
}

TEST_F(FakeDriver, AtMostTheLimitStaysIdleAndTheRestGoesBackToTheDriver) {
  void *a = nullptr, *b = nullptr;
  ASSERT_TRUE(gpu::AllocateRecycled(150 * kMiB, &a).ok());
  ASSERT_TRUE(gpu::AllocateRecycled(150 * kMiB, &b).ok());
  gpu::Recycle(a);
  gpu::Recycle(b);  // 300 MiB would be over the 256 MiB limit: freed
  EXPECT_EQ(gpu::IdleBytes(), 150 * kMiB);
  static_assert(gpu::kMaxIdleBytes == 256 * kMiB);
  const size_t before = DriverLog().size();
  ASSERT_TRUE(gpu::AllocateRecycled(150 * kMiB, &a).ok());
  ASSERT_TRUE(gpu::AllocateRecycled(150 * kMiB, &b).ok());
  EXPECT_EQ(Count(DriverLog().substr(before), "alloc "), 1);  // one idle, one new
  gpu::FreeRecycled(a);
  gpu::FreeRecycled(b);
}

TEST_F(FakeDriver, OutOfMemoryGivesTheIdleBlocksBackAndTriesAgain) {
  void *idle = nullptr, *big = nullptr;
  ASSERT_TRUE(gpu::AllocateRecycled(150 * kMiB, &idle).ok());
  gpu::Recycle(idle);
  const size_t before = DriverLog().size();
  ASSERT_TRUE(gpu::AllocateRecycled(300 * kMiB, &big).ok());  // 450 MiB of 400 at first
  EXPECT_EQ(Count(DriverLog().substr(before), "out of memory"), 1);
  EXPECT_EQ(gpu::IdleBytes(), 0u);
  void *more = nullptr;
  const Status none = gpu::AllocateRecycled(300 * kMiB, &more);  // nothing idle to give back
  EXPECT_EQ(none.code(), StatusCode::kOutOfMemory) << none.message();
  EXPECT_EQ(more, nullptr);
  gpu::FreeRecycled(big);
}

// tm_process_managed_alloc's path: new managed memory, the idle blocks given back when it does not fit.
TEST_F(FakeDriver, ANewManagedBlockMakesRoomFromTheIdleOnes) {
  void *idle = nullptr, *big = nullptr;
  ASSERT_TRUE(gpu::AllocateRecycled(150 * kMiB, &idle).ok());
  gpu::Recycle(idle);
  ASSERT_TRUE(gpu::ManagedAllocMakingRoom(300 * kMiB, &big).ok());
  EXPECT_EQ(gpu::IdleBytes(), 0u);
  gpu::ManagedFree(big);
}

// A call's blocks wait for an event recorded after its work, without the host waiting; a
// later allocation takes them once the event has passed.
TEST_F(FakeDriver, AProgramsFreeIsRecycledOnlyOnceTheDeviceHasPassedItsCall) {
  void *block = nullptr;
  size_t before = DriverLog().size();
  {
    gpu::DeferredFrees call;
    block = tm_rt_gpu_malloc(5000);
    ASSERT_NE(block, nullptr);
    tm_rt_gpu_free(block);
    EXPECT_EQ(gpu::IdleBytes(), 0u);  // a queued kernel may still use it
  }
  EXPECT_EQ(Count(DriverLog().substr(before), "wait"), 0);  // the call's end waits for nothing
  EXPECT_EQ(gpu::IdleBytes(), 0u);                           // still waiting for its event
  before = DriverLog().size();
  void *again = tm_rt_gpu_malloc(5000);  // the event has passed (nothing is queued)
  EXPECT_EQ(Count(DriverLog().substr(before), "query event"), 1);
  EXPECT_EQ(again, block);
  tm_rt_gpu_free(again);  // outside a call: back to the driver at once
  EXPECT_EQ(gpu::IdleBytes(), 0u);
}

// Out of device memory, the engine gives back the blocks still waiting for their event too.
TEST_F(FakeDriver, FreeingTheIdleBlocksTakesThoseWaitingForTheirEvent) {
  {
    gpu::DeferredFrees call;
    void *block = tm_rt_gpu_malloc(7000);
    ASSERT_NE(block, nullptr);
    tm_rt_gpu_free(block);
  }
  const size_t before = DriverLog().size();
  gpu::FreeIdle();
  EXPECT_EQ(Count(DriverLog().substr(before), "wait stream"), 1);
  EXPECT_EQ(gpu::IdleBytes(), 0u);
  void *fresh = tm_rt_gpu_malloc(7000);  // a new block: the old one went back to the driver
  EXPECT_EQ(Count(DriverLog().substr(before), "alloc 7000"), 1);
  tm_rt_gpu_free(fresh);
}

// A call that waited for the device (its outputs were copied back) recycles at once.
TEST_F(FakeDriver, ACallThatWaitedRecyclesItsBlocksAtOnce) {
  {
    gpu::DeferredFrees call;
    void *block = tm_rt_gpu_malloc(6000);
    ASSERT_NE(block, nullptr);
    tm_rt_gpu_free(block);
    call.DeviceWaitedFor();
  }
  EXPECT_EQ(gpu::IdleBytes(), 6000u);
  gpu::FreeIdle();
}

}  // namespace
}  // namespace tinymlir
