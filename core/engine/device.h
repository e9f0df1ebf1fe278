// The device seam: where a program's code runs. Every program is bound to one Device when
// the engine's linker links it (program_loader.h), from the kind its compiler recorded;
// from then on Invoke asks the device to stage the call's tensors, launch the code and
// finish, and nothing else in the engine asks which target a program is for. A new target
// (or a faster GPU runtime) is one more implementation of this interface.
//
//   cpu_device.cpp  the caller's buffers are used in place; the code runs on this thread
//   gpu_device.cpp  tensors staged in CUDA managed memory, copied by the copy engine;
//                   the host code launches the kernels and the call waits for them
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/support/status.h"

namespace tinymlir {

// Values are stored in program files and disk cache entries: append only.
enum class DeviceKind : int { kCpu = 0, kGpu = 1 };
inline constexpr int kNumDeviceKinds = 2;

// One of a call's tensors as contiguous bytes: `data` is where the code reads or writes it.
struct CallBuffer {
  uint8_t *data;
  uint64_t bytes;
};

// What a device keeps for one call between Stage and Finish (its copies of the tensors).
class DeviceCall {
 public:
  virtual ~DeviceCall() = default;
};

class Device {
 public:
  using Entry = void (*)(void **);
  using SymbolTable = std::unordered_map<std::string, void *>;

  virtual DeviceKind kind() const = 0;
  virtual const char *name() const = 0;  // "cpu", "gpu": in messages

  // The runtime functions this device's generated code may call, by name: what the
  // engine's linker resolves and the compiler checks calls against.
  virtual const SymbolTable &symbols() const = 0;

  // Makes one call's tensors reachable by the code: a device may replace any `data` by
  // its own copy (inputs copied in). `temporary_bytes` is what the code allocates besides;
  // a call that cannot fit is refused here (TM_ERROR_OUT_OF_MEMORY naming the sizes). What
  // the device made is kept in *call until Finish, or freed when *call is destroyed.
  virtual Status Stage(uint64_t temporary_bytes, CallBuffer *inputs, size_t n_inputs,
                       CallBuffer *outputs, size_t n_outputs,
                       std::unique_ptr<DeviceCall> *call) const = 0;

  // Runs the linked entry with its packed arguments (see kPackedEntryName).
  virtual Status Launch(Entry entry, void **args) const = 0;

  // Waits for the call's work and brings the staged outputs back to `caller_outputs` (the
  // buffers as they were before Stage). `call` is what Stage made (NULL if nothing).
  virtual Status Finish(DeviceCall *call, const CallBuffer *caller_outputs,
                        size_t n_outputs) const = 0;

  // Memory this device's code reads in place across calls (model weights), and its release.
  virtual Status Allocate(uint64_t bytes, void **out) const = 0;
  virtual void Free(void *block) const = 0;

 protected:
  // Devices are process-wide constants (DeviceOf), never deleted: constant-initialised, with
  // no guard taken on first use and nothing run at exit, while programs may still run.
  constexpr Device() = default;
  ~Device() = default;
};

// The device of each kind (process-wide, never destroyed).
const Device &DeviceOf(DeviceKind kind);

// The name DeviceKind `kind` has in program files and messages ("cpu", "gpu").
const char *DeviceKindName(DeviceKind kind);

}  // namespace tinymlir
