// The CPU device: a program's code runs on the calling thread (its kernels on the worker
// pool) directly on the caller's buffers. Nothing is staged or copied.
#include <cstdlib>
#include <string>

#include "core/engine/device.h"
#include "core/runtime/cpu/runtime_symbols.h"
#include "core/runtime/guarded_call.h"

namespace tinymlir {
namespace {

class CpuDevice final : public Device {
 public:
  constexpr CpuDevice() = default;
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  const char *name() const override { return "cpu"; }
  const SymbolTable &symbols() const override { return RuntimeSymbols(); }

  Status Stage(uint64_t temporary_bytes, CallBuffer *, size_t, CallBuffer *, size_t,
               std::unique_ptr<DeviceCall> *) const override {
    // What malloc would refuse inside the code is refused here, before it runs.
    if (temporary_bytes > PhysicalMemoryBytes())
      return OutOfMemory("the program needs " + std::to_string(temporary_bytes) +
                         " bytes of temporary memory, more than this machine's " +
                         std::to_string(PhysicalMemoryBytes()));
    return Status::Ok();
  }

  Status Launch(Entry entry, void **args) const override { return CallGuarded(entry, args); }

  Status Finish(DeviceCall *, const CallBuffer *, size_t) const override {
    return Status::Ok();
  }

  Status Allocate(uint64_t bytes, void **out) const override {
    const uint64_t rounded = (bytes + 63) / 64 * 64;
    *out = bytes == 0 ? nullptr : std::aligned_alloc(64, rounded);
    if (bytes != 0 && !*out)
      return OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes");
    return Status::Ok();
  }
  void Free(void *block) const override { std::free(block); }
};

const CpuDevice kCpuDevice;

}  // namespace

const Device &CpuDeviceInstance() { return kCpuDevice; }

}  // namespace tinymlir
