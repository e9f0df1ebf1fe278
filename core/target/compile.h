// Compilation entry point: a trace and options in, a linked Program out, for any target.
// No LLVM here: the options are checked, the compiler compiles (in its own process,
// compiler_process.h, or with TINYMLIR_COMPILE_IN_PROCESS=1 in this one,
// compiler_library.h) and the engine's ELF linker links.
#pragma once

#include <memory>
#include <string>

#include "core/engine/program.h"
#include "core/support/environment.h"
#include "core/trace/trace.h"

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
  // GPU target: run the kernels on the host instead (core/passes/gpu_emulation.h), from
  // TINYMLIR_GPU_EMULATE; the program is then a CPU program.
  GpuEmulation gpu_emulate = GpuEmulation::kOff;
};

// Whether a program compiled with `options` runs on the GPU (and so has device code and
// uses managed memory).
inline bool RunsOnGpu(const CompileOptions &options) {
  return options.target == Target::kGpu && options.gpu_emulate == GpuEmulation::kOff;
}

// Checks the options (a known target, opt level 0..3, a GPU chip and tile in range): what
// Compile checks first, and the program cache before it looks anything up, so a call with
// bad options neither counts as a lookup nor reaches the compiler.
Status CheckCompileOptions(const CompileOptions &options);

// Compiles `trace` (which must have ended) for options.target and links it. Fails with a
// message naming what was wrong: an unknown target or opt level, a compiler that cannot be
// started or loaded, a compiler process that died, or MLIR/LLVM's diagnostics.
Status Compile(const Trace &trace, const CompileOptions &options,
               std::unique_ptr<Program> *program);

// What native code for options.target depends on besides the program: for the CPU, the
// host's CPU and features (core/support/host_cpu.h); for the GPU, the chip and the device
// code format (and the host, which runs the launching code). Part of the disk cache's key.
std::string TargetDescription(const CompileOptions &options);

// Links a program read back from the disk cache (its data and object filled in) for
// options.target, setting its entry and code.
Status LinkCompiled(const CompileOptions &options, Program *program);

}  // namespace tinymlir
