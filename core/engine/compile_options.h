// What a program is compiled for: the target and the options of one tm_compile. They live
// in the engine, the base that both the compile driver (core/driver) and the compiler
// library (core/compiler) link: the driver checks and keys them, the compiler compiles by
// them, and a program file names them.
#pragma once

#include <cstddef>
#include <string>

#include "core/engine/device.h"
#include "core/support/environment.h"
#include "core/support/status.h"

namespace tinymlir {

enum class Target : int { kCpu = 0, kGpu = 1 };  // values equal the C API's tm_target

struct CompileOptions {
  Target target = Target::kCpu;
  bool optimize = true;
  bool use_blas = true;
  int opt_level = 3;
  // GPU target: compute capability (90 = sm_90), the matmul kernel's tile edge, and
  // whether device code is embedded as cubin (assembled by ptxas at compile time) rather
  // than PTX (assembled by the driver when the program is linked).
  int gpu_sm = 90;
  int gpu_matmul_tile = 16;
  bool gpu_cubin = false;
  // GPU target: run the kernels on the host instead (core/compiler/passes/gpu_emulation.h),
  // from TINYMLIR_GPU_EMULATE; the program is then a CPU program.
  GpuEmulation gpu_emulate = GpuEmulation::kOff;
};

// The device a program compiled with `options` runs on: the GPU's, unless its kernels are
// emulated on the host (then it is a CPU program).
inline DeviceKind RunsOn(const CompileOptions &options) {
  return options.target == Target::kGpu && options.gpu_emulate == GpuEmulation::kOff
             ? DeviceKind::kGpu
             : DeviceKind::kCpu;
}

// Every field of CompileOptions, once: its name (in cache keys, manifests, the compiler
// process's messages and error messages), its valid range as integers, a second valid value,
// and how it reads and writes. Checking, encoding and decoding go through this table, so a field added to
// the struct but not here is in no key, and a test that walks the table
// (tests/capi/cache_key_test.cpp) finds each field's effect on the caches.
struct CompileOptionField {
  const char *name;
  int min, max;
  const char *range;     // the range in words, for messages
  bool from_environment;  // set by the driver from a variable (TINYMLIR_GPU_EMULATE), not by callers
  int other;              // a valid value other than the default, which compiles: for tests
  int (*get)(const CompileOptions &);
  void (*set)(CompileOptions *, int);
};
struct CompileOptionFieldList {
  const CompileOptionField *first;
  size_t count;
  const CompileOptionField *begin() const { return first; }
  const CompileOptionField *end() const { return first + count; }
  size_t size() const { return count; }
};
CompileOptionFieldList CompileOptionFields();

// Checks every field against its range: what the program cache does before it looks
// anything up (a call with bad options is no lookup and reaches no compiler).
Status CheckCompileOptions(const CompileOptions &options);

// Every field as "name=value", space-separated, in the table's order: the options' one
// encoding, in memory cache keys, disk cache keys and manifests, and compile requests.
std::string EncodeCompileOptions(const CompileOptions &options);
// The inverse, every field required and checked.
Status DecodeCompileOptions(const std::string &text, CompileOptions *options);

// The options a compile runs with: the caller's, plus what the environment decides
// (TINYMLIR_GPU_EMULATE for the GPU target). The program cache applies it once.
CompileOptions WithEnvironment(CompileOptions options);

// What native code for options.target depends on besides the program: for the CPU, the
// host's CPU and features (core/support/host_cpu.h); for the GPU, the chip and the device
// code format (and the host, which runs the launching code). Part of the disk cache's key.
std::string TargetDescription(const CompileOptions &options);

}  // namespace tinymlir
