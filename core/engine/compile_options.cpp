#include "core/engine/compile_options.h"

#include "core/support/host_cpu.h"

namespace tinymlir {

Status CheckCompileOptions(const CompileOptions &options) {
  if (options.target != Target::kCpu && options.target != Target::kGpu)
    return InvalidArgument("unknown target " + std::to_string(static_cast<int>(options.target)));
  if (options.opt_level < 0 || options.opt_level > 3)
    return InvalidArgument("opt_level must be 0..3, got " + std::to_string(options.opt_level));
  if (options.gpu_sm < 50 || options.gpu_sm > 199)
    return InvalidArgument("gpu_sm must name a compute capability from 50 (sm_50) to 199, got " +
                           std::to_string(options.gpu_sm));
  if (options.gpu_matmul_tile < 1 || options.gpu_matmul_tile > 32)
    return InvalidArgument("gpu_matmul_tile must be 1..32 (tile * tile threads per block), got " +
                           std::to_string(options.gpu_matmul_tile));
  return Status::Ok();
}

namespace {

const char *EmulationDescription(GpuEmulation emulation) {
  switch (emulation) {
    case GpuEmulation::kOff: return "";
    case GpuEmulation::kCheckRaces: return " emulated race-checked";
    case GpuEmulation::kUnchecked: return " emulated";
  }
  return "";
}

}  // namespace

std::string TargetDescription(const CompileOptions &options) {
  switch (options.target) {
    case Target::kCpu: return "cpu " + HostDescription();
    case Target::kGpu:
      return "gpu sm_" + std::to_string(options.gpu_sm) + " tile " +
             std::to_string(options.gpu_matmul_tile) + (options.gpu_cubin ? " cubin" : " ptx") +
             EmulationDescription(options.gpu_emulate) + " host " + HostDescription();
  }
  return "unknown";
}

}  // namespace tinymlir
