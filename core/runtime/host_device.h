// A device whose code runs on the calling thread, on host memory: the caller's buffers are
// used in place, nothing is staged or copied, and a call is refused before it runs when its
// temporaries could not fit in the machine's memory. The CPU target's device is one; so is
// the host running a GPU program's kernels as loops. A subclass gives its name and symbols.
#pragma once

#include "core/runtime/device.h"

namespace tinymlir {

class HostDevice : public Device {
 public:
  Status Stage(uint64_t temporary_bytes, CallBuffer *inputs, size_t n_inputs,
               CallBuffer *outputs, size_t n_outputs,
               std::unique_ptr<DeviceCall> *call) const override;
  Status Launch(Entry entry, void **args) const override;
  Status Finish(DeviceCall *call, const CallBuffer *caller_outputs,
                size_t n_outputs) const override;
  Status Allocate(uint64_t bytes, void **out) const override;
  void Free(void *block) const override;
  Status Prefetch(const void *block, uint64_t bytes) const override;
  Status AllocateBuffer(uint64_t bytes, void **out) const override;
  void FreeBuffer(void *buffer) const override;
  Status WriteBuffer(void *dst, const void *host_src, uint64_t bytes) const override;
  Status ReadBuffer(void *host_dst, const void *src, uint64_t bytes) const override;
  Status CopyBuffer(void *dst, const void *src, uint64_t bytes) const override;
  Status FillBuffer(void *dst, uint8_t value, uint64_t bytes) const override;
  bool host_memory() const override { return true; }

 protected:
  constexpr HostDevice() = default;
  ~HostDevice() = default;
};

}  // namespace tinymlir
