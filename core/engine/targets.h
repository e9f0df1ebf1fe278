// The target registry: every target of core/contract/targets.def, by kind or by name, with
// its devices, and what the layers above ask of them (the compile driver completes and keys
// options through it, the loader binds programs to devices, the C API answers
// tm_target_info and reaches device memory through it). Nothing outside a target's folder
// asks which target a program is for: it asks here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/contract/compile_options.h"
#include "core/contract/target.h"
#include "core/support/environment.h"
#include "core/support/status.h"

namespace tinymlir {

class Device;

struct TargetList {
  const Target *const *first;
  size_t count;
  const Target *const *begin() const { return first; }
  const Target *const *end() const { return first + count; }
  size_t size() const { return count; }
};
TargetList AllTargets();

// The target of `kind`, which must be a TargetKind of targets.def (IsTargetKind).
const Target &TargetOf(TargetKind kind);
bool IsTargetKind(int value);
// The target named `name`, or NULL.
const Target *FindTarget(const std::string &name);
// The device named `name` (Device::name()), of any target, or NULL.
const Device *FindDevice(const std::string &name);
// Every device's name, and the names of the functions its code may call (its symbol table:
// what the compiler checks a program's calls against).
std::vector<std::string> AllDeviceNames();
std::vector<std::string> DeviceNamesOf(TargetKind target);
std::vector<std::string> DeviceSymbolNames(const std::string &device);
// Whether the engine's linker resolves `symbol` for code on the device named `device`.
bool DeviceLinks(const char *symbol, const char *device);

// Checks `options` against its target's schema and completes it, as every compile sees it:
// the common fields in range; each target option a caller set known to the target and in
// range; the environment's options (TINYMLIR_GPU_EMULATE, ...) set from it; every other
// field its default; the target's options in its schema's order. A failure names the field.
Status CompleteCompileOptions(CompileOptions *options);

// The first environment setting the library cannot take (core/support/environment.h's and
// the targets' own), as a message naming the variable; empty when all are fine.
const std::string &SettingsError();

// Every environment variable the library reads: core/support/environment.h's, then each
// target option set from one (which changes compiled code).
std::vector<EnvironmentVariable> AllEnvironmentVariables();

// Memory a target's first device keeps across calls (tm_process_managed_alloc's), and its
// release and move to the device (Device::Allocate, Free, Prefetch).
Status AllocateOnDevice(TargetKind target, uint64_t bytes, void **out);
void FreeOnDevice(TargetKind target, void *block);
Status PrefetchOnDevice(TargetKind target, const void *block, uint64_t bytes);

// The runtime kernels' timing (core/runtime/kernel_times.h), for tm_process_kernel_times:
// turned on (counters reset) or off, and read as calls and seconds of the matrix-vector
// kernels, the BLAS products and the waits for the worker pool.
struct KernelTimeTotals {
  uint64_t gemv_calls = 0, blas_calls = 0, pool_waits = 0;
  double gemv_seconds = 0, blas_seconds = 0, pool_wait_seconds = 0;
};
void EnableKernelTiming(bool on);
KernelTimeTotals ReadKernelTimeTotals();

}  // namespace tinymlir
