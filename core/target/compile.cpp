#include "core/target/compile.h"

#include "core/target/cpu/cpu_compiler.h"
#include "core/target/cpu/native_object.h"

namespace tinymlir {

Status Compile(const Trace &trace, const CompileOptions &options,
               std::unique_ptr<Program> *program) {
  if (!trace.ended())
    return InvalidArgument("trace '" + trace.name() + "' has not ended");
  if (options.opt_level < 0 || options.opt_level > 3)
    return InvalidArgument("opt_level must be 0..3, got " + std::to_string(options.opt_level));
  switch (options.target) {
    case Target::kCpu: return CompileForCpu(trace, options, program);
    case Target::kGpu: return Unsupported("the GPU target is not available in this build");
  }
  return InvalidArgument("unknown target " + std::to_string(static_cast<int>(options.target)));
}

std::string TargetDescription(const CompileOptions &options) {
  switch (options.target) {
    case Target::kCpu: return "cpu " + HostDescription();
    case Target::kGpu: return "gpu";
  }
  return "unknown";
}

Status LinkCompiled(const CompileOptions &options, Program *program) {
  if (options.target != Target::kCpu)
    return Unsupported("only CPU programs can be read from the disk cache");
  return LoadNativeObject(program->object_code, program->stage(Stage::kLlvmIr),
                          options.opt_level, &program->code, &program->entry);
}

}  // namespace tinymlir
