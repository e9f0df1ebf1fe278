#include "core/targets/gpu/run/emulation_runtime.h"

#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/runtime/guarded_call.h"

namespace tinymlir {
namespace {

// One access: who, and how many barriers its block had passed.
struct Access {
  int64_t thread = -1;  // -1: none
  int64_t block = 0;
  int64_t phase = 0;
};

struct Element {
  Access write;
  Access reads[2];  // by distinct threads
};

struct LaunchState {
  int64_t grid[3] = {1, 1, 1};
  int64_t block_size[3] = {1, 1, 1};
  int64_t phase = 0;
  std::unordered_map<int64_t, Element> elements;  // by address
};

// The calling thread's launch under way; released by the guarded call if it unwinds.
thread_local LaunchState *current_launch = nullptr;

void Release(void *state) {
  if (current_launch == state) current_launch = nullptr;
  delete static_cast<LaunchState *>(state);
}

bool SameThread(const Access &a, const Access &b) {
  return a.thread == b.thread && a.block == b.block;
}

bool Races(const Access &earlier, const Access &now) {
  return earlier.thread >= 0 && !SameThread(earlier, now) &&
         (earlier.block != now.block || earlier.phase == now.phase);
}

std::string Coordinates(int64_t linear, const int64_t size[3]) {
  const int64_t x = linear % size[0], y = linear / size[0] % size[1];
  const int64_t z = linear / (size[0] * size[1]);
  return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
}

// The race's status, built in a frame of its own: FailGuardedCall's longjmp must not skip
// the destructors of the strings that make the message.
Status RaceStatus(const LaunchState &s, int64_t address, const Access &earlier,
                  bool earlier_wrote, const Access &now, bool now_writes) {
  char where[32];
  std::snprintf(where, sizeof where, "%#llx", static_cast<unsigned long long>(address));
  auto who = [&](const Access &a) {
    return "thread " + Coordinates(a.thread, s.block_size) + " of block " +
           Coordinates(a.block, s.grid);
  };
  return RuntimeError(
      "GPU emulation found a race in a kernel: " + who(now) + (now_writes ? " writes" : " reads") +
      " the element at " + where + " that " + who(earlier) + (earlier_wrote ? " wrote" : " read") +
      (earlier.block == now.block ? " with no barrier between them"
                                  : " (blocks do not synchronise within a launch)"));
}

[[noreturn]] void ReportRace(const LaunchState &s, int64_t address, const Access &earlier,
                             bool earlier_wrote, const Access &now, bool now_writes) {
  Status status = RaceStatus(s, address, earlier, earlier_wrote, now, now_writes);
  FailGuardedCall(std::move(status));  // leaves `status` moved from: nothing to free
}

}  // namespace
}  // namespace tinymlir

using tinymlir::current_launch;

void tm_rt_gpu_emulation_launch_begin(int64_t grid_x, int64_t grid_y, int64_t grid_z,
                                      int64_t block_x, int64_t block_y, int64_t block_z) {
  if (current_launch) tinymlir::Release(current_launch);  // a launch that never ended
  auto *s = new tinymlir::LaunchState;
  const int64_t grid[3] = {grid_x, grid_y, grid_z}, block[3] = {block_x, block_y, block_z};
  for (int d = 0; d < 3; ++d) {
    s->grid[d] = grid[d] > 0 ? grid[d] : 1;
    s->block_size[d] = block[d] > 0 ? block[d] : 1;
  }
  current_launch = s;
  tinymlir::TrackGuardedResource(s, &tinymlir::Release);
}

void tm_rt_gpu_emulation_barrier() {
  if (current_launch) ++current_launch->phase;
}

void tm_rt_gpu_emulation_access(int64_t address, int64_t thread, int64_t block, int32_t kind) {
  tinymlir::LaunchState *s = current_launch;
  if (!s) return;
  const bool write = (kind & 1) != 0, workgroup = (kind & 2) != 0;
  const tinymlir::Access now{thread, block, s->phase};
  // Elements are told apart by their address: a kernel accesses a buffer's elements whole.
  tinymlir::Element &e = s->elements[address];
  // Another block's workgroup memory at the same host address is not this block's.
  if (workgroup && ((e.write.thread >= 0 && e.write.block != block) ||
                    (e.reads[0].thread >= 0 && e.reads[0].block != block)))
    e = tinymlir::Element{};
  if (tinymlir::Races(e.write, now)) tinymlir::ReportRace(*s, address, e.write, true, now, write);
  if (write) {
    for (const tinymlir::Access &read : e.reads)
      if (tinymlir::Races(read, now)) tinymlir::ReportRace(*s, address, read, false, now, true);
    e.write = now;
    e.reads[0] = e.reads[1] = tinymlir::Access{};
    return;
  }
  // Keep the last two reads by distinct threads: a later write by a third thread races with
  // at least one of them if it races with any read of the same phase.
  if (tinymlir::SameThread(e.reads[0], now)) {
    e.reads[0] = now;
  } else {
    e.reads[1] = e.reads[0];
    e.reads[0] = now;
  }
}

void tm_rt_gpu_emulation_launch_end() {
  if (!current_launch) return;
  tinymlir::LaunchState *s = current_launch;
  tinymlir::UntrackGuardedResource(s);
  tinymlir::Release(s);
}
