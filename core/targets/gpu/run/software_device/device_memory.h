// The software CUDA device's memory: one reserved range of the address space, apart from
// everything the host allocates, that the host cannot touch. The range is PROT_NONE except
// while the device runs queued work (DeviceMemory::Open), so host code that reads or writes
// a device pointer faults here as it does on a GPU, instead of quietly seeing the data.
//
// Capacity is what the allocator hands out, never more: an allocation that does not fit is
// CUDA_ERROR_OUT_OF_MEMORY. The range is reserved without backing (MAP_NORESERVE); pages are
// committed when first written and given back when their block is freed.
//
// Managed memory (cuMemAllocManaged) is ordinary host memory, reachable by both sides, kept
// in a table of its own; it counts against the same capacity.
//
// Not thread-safe: the driver holds its lock around every call (software_driver.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace tinymlir {
namespace gpu {
namespace software {

class DeviceMemory {
 public:
  // Every block starts at a multiple of this (cuMemAlloc promises 256 bytes).
  static constexpr uint64_t kAlignment = 256;

  ~DeviceMemory();

  // Reserves `capacity` bytes of address space; false if the system refuses.
  bool Reserve(uint64_t capacity);

  // A device block of `bytes` (> 0), or false when no free range is that large.
  bool Allocate(uint64_t bytes, uintptr_t *out);
  // A managed block of `bytes` (> 0), or false when it does not fit the capacity.
  bool AllocateManaged(uint64_t bytes, uintptr_t *out);
  // Frees a block from either; false if `p` starts none.
  bool Free(uintptr_t p);
  // Frees every block (a context reset).
  void FreeAll();

  // Whether [p, p + bytes) lies in one device block / one managed block.
  bool InDeviceBlock(uintptr_t p, uint64_t bytes) const;
  bool InManagedBlock(uintptr_t p, uint64_t bytes) const;
  // Whether `p` is in the device range at all (allocated or not).
  bool InDeviceRange(uintptr_t p) const { return p >= base_ && p < base_ + capacity_; }

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }

  // Makes the device range readable and writable for the device's work, and closes it
  // again when it goes out of scope.
  class Open {
   public:
    explicit Open(const DeviceMemory &memory);
    ~Open();
    Open(const Open &) = delete;
    Open &operator=(const Open &) = delete;

   private:
    const DeviceMemory &memory_;
  };

 private:
  // A block of `bytes` from the free ranges, first fit; false if none is large enough.
  bool Carve(uint64_t bytes, uint64_t *offset);
  // Returns [offset, offset + bytes) to the free ranges, merging neighbours.
  void Release(uint64_t offset, uint64_t bytes);

  uintptr_t base_ = 0;
  uint64_t capacity_ = 0;
  uint64_t used_ = 0;                        // device and managed bytes handed out
  std::map<uint64_t, uint64_t> free_;        // offset -> bytes, disjoint and not adjacent
  std::map<uintptr_t, uint64_t> device_;     // block start -> bytes (rounded)
  std::map<uintptr_t, uint64_t> managed_;    // block start -> bytes
};

}  // namespace software
}  // namespace gpu
}  // namespace tinymlir
