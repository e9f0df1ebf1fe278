// The GPU device (NVIDIA, through the CUDA driver found at run time). A call's tensor in
// memory the engine handed out (a device buffer, a tm_process_managed_alloc block:
// device_buffers.h) is used in place; any other is host memory, copied into a managed block
// before the call and out of it after. Everything goes on the engine's one stream: the
// copies in, the program's launches, the copies out. The host waits only for outputs it
// must read (copied out), never between calls; the blocks of a call are recycled once the
// device has passed its work (gpu::DeferredFrees). The program's host code launches the
// kernels.
#include <string>
#include <vector>

#include "core/contract/target.h"
#include "core/runtime/device.h"
#include "core/targets/gpu/run/cuda_driver.h"
#include "core/targets/gpu/run/device_buffers.h"
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
// kernel to use them would fault them back one at a time. `released` recycles the blocks
// once the device has passed the call's work.
class GpuCall final : public DeviceCall {
 public:
  gpu::DeferredFrees released;
  std::vector<const uint8_t *> staged_outputs;  // output i's staged block, NULL if in place
};

// Bytes a buffer needs staged: none when it is in memory the engine handed out.
uint64_t StagedBytes(const CallBuffer &b) {
  return b.bytes == 0 || gpu::InKnownBlock(b.data, b.bytes) ? 0 : b.bytes;
}

// Checks that what the call needs in all fits the memory budget, when there is one (the
// driver's own out-of-memory error names the sizes otherwise: the engine asks no driver
// how much is free on a call's path).
Status CheckBudget(uint64_t bytes) {
  uint64_t budget = 0;
  TM_RETURN_IF_ERROR(gpu::MemoryBudget(&budget));
  if (budget == 0) return Status::Ok();
  const uint64_t held = gpu::KnownBytes();
  const uint64_t free_bytes = held > budget ? 0 : budget - held;
  if (bytes > free_bytes)
    return OutOfMemory("the program needs " + std::to_string(bytes) +
                       " bytes of GPU memory (its tensors and temporaries), but only " +
                       std::to_string(free_bytes) + " of the " + std::to_string(budget) +
                       " bytes of TINYMLIR_GPU_MEMORY_BUDGET are free");
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
    // Which tensors are staged: a look-up among the blocks the engine handed out.
    std::vector<bool> staged(n_inputs + n_outputs);
    uint64_t bytes = temporary_bytes;
    for (size_t i = 0; i < n_inputs + n_outputs; ++i) {
      const uint64_t b = StagedBytes(i < n_inputs ? inputs[i] : outputs[i - n_inputs]);
      staged[i] = b != 0;
      bytes += b;
    }
    TM_RETURN_IF_ERROR(CheckBudget(bytes));
    auto call = std::make_unique<GpuCall>();
    GpuCall *c = call.get();
    *out = std::move(call);  // from here on, what is staged is released with *out
    // Queued on the engine's stream, ahead of the program's launches: no wait.
    for (size_t i = 0; i < n_inputs; ++i)
      if (staged[i]) TM_RETURN_IF_ERROR(StageBuffer(c, &inputs[i], /*copy_in=*/true));
    c->staged_outputs.assign(n_outputs, nullptr);
    for (size_t i = 0; i < n_outputs; ++i)
      if (staged[n_inputs + i]) {
        TM_RETURN_IF_ERROR(StageBuffer(c, &outputs[i], /*copy_in=*/false));
        c->staged_outputs[i] = outputs[i].data;
      }
    return Status::Ok();
  }

  Status Launch(Entry entry, void **args) const override { return CallGuarded(entry, args); }

  Status Finish(DeviceCall *call, const CallBuffer *caller_outputs,
                size_t n_outputs) const override {
    auto *c = static_cast<GpuCall *>(call);
    if (!c) return Status::Ok();
    // Results copied out by the copy engine, which reads the staged blocks where they are,
    // and waited for: the only wait of a call, and only of one with outputs in host memory.
    // A kernel's asynchronous failure shows at the first wait after it.
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
    *out = nullptr;
    if (bytes == 0) return Status::Ok();
    return gpu::AllocateKnownBlock(bytes, /*managed=*/true, out);
  }
  void Free(void *block) const override { gpu::FreeKnownBlock(block); }
  Status Prefetch(const void *block, uint64_t bytes) const override {
    return gpu::PrefetchToDevice(block, bytes);
  }

  Status AllocateBuffer(uint64_t bytes, void **out) const override {
    *out = nullptr;
    if (bytes == 0) return Status::Ok();
    TM_RETURN_IF_ERROR(gpu::AllocateKnownBlock(bytes, /*managed=*/false, out));
    Status zeroed = gpu::QueueFill(*out, 0, bytes);
    if (!zeroed.ok()) {
      gpu::FreeKnownBlock(*out);
      *out = nullptr;
    }
    return zeroed;
  }
  void FreeBuffer(void *buffer) const override {
    if (!buffer) return;
    // Work queued on it finishes first (errors ignored: the memory is released regardless).
    (void)gpu::Synchronize();
    gpu::FreeKnownBlock(buffer);
  }
  Status WriteBuffer(void *dst, const void *host_src, uint64_t bytes) const override {
    TM_RETURN_IF_ERROR(gpu::QueueCopy(dst, host_src, bytes));
    gpu::CountBytesToDevice(bytes);
    return Status::Ok();
  }
  Status ReadBuffer(void *host_dst, const void *src, uint64_t bytes) const override {
    if (bytes == 0) return Status::Ok();
    TM_RETURN_IF_ERROR(gpu::QueueCopy(host_dst, src, bytes));
    gpu::CountBytesFromDevice(bytes);
    return gpu::Synchronize();
  }
  Status CopyBuffer(void *dst, const void *src, uint64_t bytes) const override {
    return gpu::QueueCopy(dst, src, bytes);
  }
  Status FillBuffer(void *dst, uint8_t value, uint64_t bytes) const override {
    return gpu::QueueFill(dst, value, bytes);
  }
};

const GpuDevice kGpuDevice;
const Device *const kGpuDevices[] = {&kGpuDevice, &kGpuEmulationDevice};

}  // namespace

DeviceList GpuDevices() { return {kGpuDevices, 2}; }

}  // namespace tinymlir
