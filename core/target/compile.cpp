#include "core/target/compile.h"

#include "core/target/native_compiler.h"
#include "core/engine/program_loader.h"
#include "core/target/cpu/native_object.h"

namespace tinymlir {

Status Compile(const Trace &trace, const CompileOptions &options,
               std::unique_ptr<Program> *program) {
  if (!trace.ended())
    return InvalidArgument("trace '" + trace.name() + "' has not ended");
  if (options.opt_level < 0 || options.opt_level > 3)
    return InvalidArgument("opt_level must be 0..3, got " + std::to_string(options.opt_level));
  if (options.gpu_sm < 50 || options.gpu_sm > 199)
    return InvalidArgument("gpu_sm must name a compute capability from 50 (sm_50) to 199, got " +
                           std::to_string(options.gpu_sm));
  if (options.gpu_matmul_tile < 1 || options.gpu_matmul_tile > 32)
    return InvalidArgument("gpu_matmul_tile must be 1..32 (tile * tile threads per block), got " +
                           std::to_string(options.gpu_matmul_tile));
  switch (options.target) {
    case Target::kCpu:
    case Target::kGpu: return CompileNative(trace, options, program);
  }
  return InvalidArgument("unknown target " + std::to_string(static_cast<int>(options.target)));
}

std::string TargetDescription(const CompileOptions &options) {
  switch (options.target) {
    case Target::kCpu: return "cpu " + HostDescription();
    case Target::kGpu:
      return "gpu sm_" + std::to_string(options.gpu_sm) + " tile " +
             std::to_string(options.gpu_matmul_tile) + (options.gpu_cubin ? " cubin" : " ptx") +
             " host " + HostDescription();
  }
  return "unknown";
}

Status LinkCompiled(const CompileOptions &options, Program *program) {
  if (program->gpu != (options.target == Target::kGpu))
    return IoError("the disk cache entry is for another target");
  if (program->gpu) return LinkProgramObject(program);
  return LoadNativeObject(program->object_code, program->stage(Stage::kLlvmIr),
                          options.opt_level, &program->code, &program->entry);
}

}  // namespace tinymlir
