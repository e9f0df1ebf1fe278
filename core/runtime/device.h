// The device seam: where a program's code runs. Every program is bound to one Device when
// the engine's linker links it (core/engine/program_loader.h), by the device name its
// compiler recorded; from then on Invoke asks the device to stage the call's tensors, launch
// the code and finish, and nothing else in the engine asks which target a program is for.
// Each target's run side (core/targets/<name>/run) implements its devices; its Target
// (core/contract/target.h) lists them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/support/status.h"

namespace tinymlir {

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

  // Its name in programs, program files and messages ("cpu", "gpu", ...): unique in the
  // library.
  virtual const char *name() const = 0;

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
  // Moves `bytes` of a block from Allocate, from `block` on, to where the code reads it.
  virtual Status Prefetch(const void *block, uint64_t bytes) const = 0;

  // Buffers (tm_device_buffer): memory the code reads and writes in place, which the host
  // reaches only through these functions. They are ordered with the device's calls: a write,
  // copy or fill asked for after a call happens after it, without the host waiting; a read
  // waits for everything asked for before it. A buffer's bytes start at zero. The device
  // checks nothing the caller checked (ranges lie inside buffers from AllocateBuffer).
  virtual Status AllocateBuffer(uint64_t bytes, void **out) const = 0;
  virtual void FreeBuffer(void *buffer) const = 0;
  virtual Status WriteBuffer(void *dst, const void *host_src, uint64_t bytes) const = 0;
  virtual Status ReadBuffer(void *host_dst, const void *src, uint64_t bytes) const = 0;
  virtual Status CopyBuffer(void *dst, const void *src, uint64_t bytes) const = 0;
  virtual Status FillBuffer(void *dst, uint8_t value, uint64_t bytes) const = 0;
  // Whether the host can read this device's buffers in place (its code runs on the host).
  virtual bool host_memory() const { return false; }

 protected:
  // Devices are process-wide constants (their Target lists them), never deleted:
  // constant-initialised, with no guard taken on first use and nothing run at exit, while
  // programs may still run.
  constexpr Device() = default;
  ~Device() = default;
};

}  // namespace tinymlir
