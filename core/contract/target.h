// A target, as the library's layers without a compiler see it (the driver, the engine's
// loader, the C API, bundles, the CLI through the C API): its name, its compile options'
// schema, what its compiler takes (ggml's supports_op), what its code depends on, whether it
// can run here, and its devices. Each target's run side defines one
// (core/targets/<name>/run); the registry (core/engine/targets.h) finds it by kind or name.
// Nothing else in the library asks which target a program is for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/contract/compile_options.h"
#include "core/support/status.h"
#include "core/trace/trace.h"

namespace tinymlir {

class Device;  // core/runtime/device.h: where a program's code runs

struct DeviceList {
  const Device *const *first;
  size_t count;
  const Device *const *begin() const { return first; }
  const Device *const *end() const { return first + count; }
};

// What an application asks of a target to lay its data out for it (tm_target_info).
struct TargetTraits {
  // Programs read and write host memory in place (the caller's buffers); otherwise each
  // call's tensors are copied to the device's memory and back, except those already there.
  bool host_memory;
  // The dtypes (bit 1 << DType) a matmul's right operand may be stored in and read as is.
  uint32_t weight_dtypes;
  // Matrix-vector products read a weight stored transposed, (n, k), at the best speed (each
  // output a dot product along a stored row); otherwise stored as (k, n).
  bool weights_transposed;
};

// What the engine has asked of a target's device since the process started (a GPU's
// launches, host waits, driver allocations and copies; all zero where programs run on the
// caller's buffers). Counters only grow: two readings' difference is what the work between
// them cost.
struct DeviceCounters {
  uint64_t graph_launches = 0;
  uint64_t kernel_launches = 0;
  uint64_t host_syncs = 0;
  uint64_t allocations = 0;
  uint64_t bytes_to_device = 0;
  uint64_t bytes_from_device = 0;
};

class Target {
 public:
  virtual TargetKind kind() const = 0;
  const char *name() const { return TargetKindName(kind()); }

  // Its own compile options (beyond CommonOptionFields), in the order they are encoded.
  virtual OptionFieldList options() const = 0;

  // Whether its compiler takes `trace`: OK, or TM_ERROR_UNSUPPORTED naming what it cannot
  // take and what to do instead. Asked before the caches and the compiler.
  virtual Status Supports(const Trace &trace, const CompileOptions &options) const = 0;

  // What native code compiled with `options` depends on besides the program: the target's
  // name, then its own words (a chip, the host CPU that runs the launching code). Part of
  // the disk cache's key and of a program file's manifest.
  virtual std::string Describe(const CompileOptions &options) const = 0;

  // Whether a program compiled for `description` (what Describe gave) runs in this process:
  // TM_ERROR_UNSUPPORTED naming what differs (another architecture, a CPU feature missing).
  virtual Status CheckRunsHere(const std::string &description) const = 0;

  // Whether its programs can run here now: OK, or a message saying what is missing and how
  // to get it. Cheap, and asked before anything compiles.
  virtual Status CheckAvailable() const = 0;

  virtual TargetTraits traits() const = 0;

  // Its devices; a program names the one it runs on (CompiledProgram::device).
  virtual DeviceList devices() const = 0;

  // What its engine has asked of its device so far.
  virtual DeviceCounters Counters() const { return {}; }

  // The device its buffers (tm_device_buffer) live on: the one its programs, compiled as
  // the environment says now, run on.
  virtual const Device &BufferDevice() const { return **devices().first; }

 protected:
  // Targets are process-wide constants, never deleted (as devices: see device.h).
  constexpr Target() = default;
  ~Target() = default;
};

}  // namespace tinymlir
