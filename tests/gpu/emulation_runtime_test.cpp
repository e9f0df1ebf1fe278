// GPU emulation's race check (core/targets/gpu/run/emulation_runtime.h), called as an emulated
// kernel calls it, inside a guarded call: each kind of race fails the call naming both
// threads, and each kind of ordered access passes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/guarded_call.h"
#include "core/targets/gpu/run/emulation_runtime.h"

namespace tinymlir {
namespace {

constexpr int32_t kLoad = 0, kStore = 1, kWorkgroup = 2;

struct Access {
  int64_t address, thread, block;
  int32_t kind;
  bool barrier_before = false;
};

// One launch of a 4 x 1 x 1 grid of 8 x 2 x 1 blocks making `accesses` in order.
void RunLaunch(void **args) {
  const auto &accesses = *static_cast<const std::vector<Access> *>(args[0]);
  tm_rt_gpu_emulation_launch_begin(4, 1, 1, 8, 2, 1);
  for (const Access &a : accesses) {
    if (a.barrier_before) tm_rt_gpu_emulation_barrier();
    tm_rt_gpu_emulation_access(a.address, a.thread, a.block, a.kind);
  }
  tm_rt_gpu_emulation_launch_end();
}

Status Launch(std::vector<Access> accesses) {
  void *args[] = {&accesses};
  return CallGuarded(&RunLaunch, args);
}

bool Contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(GpuEmulationRaceCheck, TwoThreadsWritingOneElementWithoutABarrierRace) {
  const Status s = Launch({{0x1000, 3, 0, kStore}, {0x1000, 9, 0, kStore}});
  EXPECT_EQ(s.code(), StatusCode::kRuntime);
  // Thread 9 of an 8 x 2 block is (1, 1, 0).
  EXPECT_TRUE(Contains(s.message(),
                       "thread (1, 1, 0) of block (0, 0, 0) writes the element at "
                       "0x1000 that thread (3, 0, 0) of block (0, 0, 0) wrote with "
                       "no barrier between them"))
      << s.message();
}

TEST(GpuEmulationRaceCheck, AReadOfAnotherThreadsWriteWithoutABarrierRaces) {
  const Status s = Launch({{0x40, 1, 2, kStore | kWorkgroup}, {0x40, 0, 2, kLoad | kWorkgroup}});
  EXPECT_EQ(s.code(), StatusCode::kRuntime);
  EXPECT_TRUE(Contains(s.message(),
                       "reads the element at 0x40 that thread (1, 0, 0) of block "
                       "(2, 0, 0) wrote"))
      << s.message();
}

TEST(GpuEmulationRaceCheck, AWriteOverAnotherThreadsReadWithoutABarrierRaces) {
  // Two readers, then a third thread writes: the tiled matmul without its second barrier.
  const Status s = Launch({{0x80, 0, 0, kLoad}, {0x80, 1, 0, kLoad}, {0x80, 2, 0, kStore}});
  EXPECT_EQ(s.code(), StatusCode::kRuntime);
  EXPECT_TRUE(Contains(s.message(), "writes the element at 0x80 that thread (1, 0, 0)"))
      << s.message();
}

TEST(GpuEmulationRaceCheck, BlocksNeverSynchroniseOnTheLaunchsBuffers) {
  const Status s = Launch({{0x100, 0, 0, kStore}, {0x100, 0, 1, kLoad, /*barrier_before=*/true}});
  EXPECT_EQ(s.code(), StatusCode::kRuntime);
  EXPECT_TRUE(Contains(s.message(), "blocks do not synchronise within a launch")) << s.message();
}

TEST(GpuEmulationRaceCheck, OrderedAccessesPass) {
  EXPECT_TRUE(Launch({
                         // One thread, any order.
                         {0x10, 5, 0, kStore},
                         {0x10, 5, 0, kLoad},
                         {0x10, 5, 0, kStore},
                         // Many threads reading.
                         {0x20, 0, 0, kLoad},
                         {0x20, 1, 0, kLoad},
                         {0x20, 0, 3, kLoad},
                         // Written, then read by another thread after a barrier, then
                         // written by a third after another.
                         {0x30, 0, 1, kStore | kWorkgroup},
                         {0x30, 1, 1, kLoad | kWorkgroup, true},
                         {0x30, 2, 1, kStore | kWorkgroup, true},
                         // Workgroup memory at the same host address in the next block is
                         // that block's own.
                         {0x30, 7, 2, kStore | kWorkgroup},
                     })
                  .ok());
}

TEST(GpuEmulationRaceCheck, EachLaunchStartsAfresh) {
  EXPECT_TRUE(Launch({{0x1000, 3, 0, kStore}}).ok());
  EXPECT_TRUE(Launch({{0x1000, 4, 0, kStore}}).ok());
}

}  // namespace
}  // namespace tinymlir
