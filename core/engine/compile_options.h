// What a program is compiled for: the target and the options of one tm_compile. They live
// in the engine, the base that both the compile driver (core/driver) and the compiler
// library (core/compiler) link: the driver checks and keys them, the compiler compiles by
// them, and a program file names them.
#pragma once

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

// Checks the options (a known target, opt level 0..3, a GPU chip and tile in range): what
// Compile checks first, and the program cache before it looks anything up, so a call with
// bad options neither counts as a lookup nor reaches the compiler.
Status CheckCompileOptions(const CompileOptions &options);

// What native code for options.target depends on besides the program: for the CPU, the
// host's CPU and features (core/support/host_cpu.h); for the GPU, the chip and the device
// code format (and the host, which runs the launching code). Part of the disk cache's key.
std::string TargetDescription(const CompileOptions &options);

}  // namespace tinymlir
