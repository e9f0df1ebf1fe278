// The GPU device (NVIDIA, through the CUDA driver found at run time). The caller's buffers
// are ordinary host memory, which a kernel cannot read, so every input is copied into
// managed memory before the call and every output copied back after it; a tensor already
// in managed memory (tm_process_managed_alloc: weights kept on the device across calls) is used in
// place. The copies, and the blocks the program frees, are recycled once the device is done
// with the call (gpu::DeferredFrees). The program's host code launches the kernels.
#include <string>
#include <vector>

#include "core/contract/target.h"
#include "core/runtime/device.h"
#include "core/targets/gpu/run/cuda_driver.h"
#include "core/targets/gpu/run/emulation_device.h"
#include "core/targets/gpu/run/engine_counters.h"
#include "core/targets/gpu/run/gpu_runtime.h"
#include "core/targets/gpu/run/gpu_symbols.h"
#include "core/targets/gpu/run/recycled_blocks.h"
#include "core/runtime/guarded_call.h"

namespace tinymlir {
namespace {

// The staged copies of one call. The host never touches them (nor copies results out of
// them: Finish uses the copy engine too): their pages would move to the host, and the next
// kernel to use them would fault them back one at a time, which slows a decode step
// noticeably. A failure before Finish leaves copies
// queued: `released` waits for the device before it recycles the blocks, so nothing is still
// copying when the call returns.
class GpuCall final : public DeviceCall {
 public:
  gpu::DeferredFrees released;
  std::vector<const uint8_t *> staged_outputs;  // output i's staged block, NULL if in place
};

// Bytes a buffer needs staged: none when it is in managed memory already.
uint64_t StagedBytes(const CallBuffer &b) {
  return b.bytes == 0 || gpu::IsManaged(b.data) ? 0 : b.bytes;
}

// Checks that the device can hold `bytes` more (what the call needs in all), counting the
// idle recycled blocks as free.
Status CheckRoom(uint64_t bytes) {
  uint64_t free_bytes = 0;
  TM_RETURN_IF_ERROR(gpu::FreeDeviceBytes(&free_bytes));
  free_bytes += gpu::IdleBytes();
  if (bytes > free_bytes)
    return OutOfMemory("the program needs " + std::to_string(bytes) +
                       " bytes of GPU memory (its tensors and temporaries), the device has " +
                       std::to_string(free_bytes) + " free");
  return Status::Ok();
}

// Replaces b's data by a managed block on the device: the caller's contents copied in by the
// copy engine when `copy_in`, else the block moved there. Both are queued.
Status StageBuffer(GpuCall *call, CallBuffer *b, bool copy_in) {
  void *block = nullptr;
  TM_RETURN_IF_ERROR(gpu::AllocateRecycled(b->bytes, &block));
  TM_RETURN_IF_ERROR(call->released.Add(block));
  TM_RETURN_IF_ERROR(copy_in ? gpu::QueueCopy(block, b->data, b->bytes)
                             : gpu::QueuePrefetchToDevice(block, b->bytes));
  if (copy_in) gpu::CountBytesToDevice(b->bytes);
  b->data = static_cast<uint8_t *>(block);
  return Status::Ok();
}

class GpuDevice final : public Device {
 public:
  constexpr GpuDevice() = default;
  const char *name() const override { return "gpu"; }
  const SymbolTable &symbols() const override { return GpuRuntimeSymbols(); }

  Status Stage(uint64_t temporary_bytes, CallBuffer *inputs, size_t n_inputs,
               CallBuffer *outputs, size_t n_outputs,
               std::unique_ptr<DeviceCall> *out) const override {
    TM_RETURN_IF_ERROR(gpu::MakeContextCurrent());
    // Which tensors are staged (each a question to the driver), asked once per tensor.
    std::vector<bool> staged(n_inputs + n_outputs);
    uint64_t bytes = temporary_bytes;
    for (size_t i = 0; i < n_inputs + n_outputs; ++i) {
      const uint64_t b = StagedBytes(i < n_inputs ? inputs[i] : outputs[i - n_inputs]);
      staged[i] = b != 0;
      bytes += b;
    }
    TM_RETURN_IF_ERROR(CheckRoom(bytes));
    auto call = std::make_unique<GpuCall>();
    GpuCall *c = call.get();
    *out = std::move(call);  // from here on, what is staged is released with *out
    bool queued = false;
    for (size_t i = 0; i < n_inputs; ++i)
      if (staged[i]) {
        TM_RETURN_IF_ERROR(StageBuffer(c, &inputs[i], /*copy_in=*/true));
        queued = true;
      }
    c->staged_outputs.assign(n_outputs, nullptr);
    for (size_t i = 0; i < n_outputs; ++i)
      if (staged[n_inputs + i]) {
        TM_RETURN_IF_ERROR(StageBuffer(c, &outputs[i], /*copy_in=*/false));
        c->staged_outputs[i] = outputs[i].data;
        queued = true;
      }
    return queued ? gpu::Synchronize() : Status::Ok();
  }

  Status Launch(Entry entry, void **args) const override { return CallGuarded(entry, args); }

  Status Finish(DeviceCall *call, const CallBuffer *caller_outputs,
                size_t n_outputs) const override {
    TM_RETURN_IF_ERROR(gpu::Synchronize());  // a kernel's asynchronous failure shows here
    auto *c = static_cast<GpuCall *>(call);
    if (!c) return Status::Ok();
    // Results copied out by the copy engine, which reads the staged blocks where they are.
    bool copied = false;
    for (size_t i = 0; i < n_outputs && i < c->staged_outputs.size(); ++i)
      if (c->staged_outputs[i]) {
        TM_RETURN_IF_ERROR(gpu::QueueCopy(caller_outputs[i].data, c->staged_outputs[i],
                                          caller_outputs[i].bytes));
        gpu::CountBytesFromDevice(caller_outputs[i].bytes);
        copied = true;
      }
    if (copied) TM_RETURN_IF_ERROR(gpu::Synchronize());
    c->released.DeviceWaitedFor();
    return Status::Ok();
  }

  Status Allocate(uint64_t bytes, void **out) const override {
    return gpu::ManagedAllocMakingRoom(bytes, out);
  }
  void Free(void *block) const override { gpu::ManagedFree(block); }
  Status Prefetch(const void *block, uint64_t bytes) const override {
    return gpu::PrefetchToDevice(block, bytes);
  }
};

const GpuDevice kGpuDevice;
const Device *const kGpuDevices[] = {&kGpuDevice, &kGpuEmulationDevice};

}  // namespace

DeviceList GpuDevices() { return {kGpuDevices, 2}; }

}  // namespace tinymlir
