#include "core/target/compile.h"

#include "core/target/cpu/cpu_compiler.h"

namespace tinymlir {

Status ReadCompileOptions(const tm_compile_options *in, CompileOptions *out) {
  CompileOptions o;
  if (in) {
    if (in->struct_size != sizeof(tm_compile_options))
      return InvalidArgument("tm_compile: options.struct_size is " +
                             std::to_string(in->struct_size) + ", expected " +
                             std::to_string(sizeof(tm_compile_options)) +
                             " (call tm_compile_options_init; header and library differ?)");
    if (in->target != TM_TARGET_CPU && in->target != TM_TARGET_GPU)
      return InvalidArgument("tm_compile: unknown target " +
                             std::to_string(static_cast<int>(in->target)));
    if (in->opt_level < 0 || in->opt_level > 3)
      return InvalidArgument("tm_compile: opt_level must be 0..3, got " +
                             std::to_string(in->opt_level));
    o.target = in->target;
    o.optimize = in->optimize != 0;
    o.use_blas = in->use_blas != 0;
    o.opt_level = in->opt_level;
  }
  *out = o;
  return Status::Ok();
}

Status Compile(const Graph &graph, const CompileOptions &options,
               std::unique_ptr<Program> *program) {
  if (!graph.ended())
    return InvalidArgument("tm_compile: trace '" + graph.name() +
                           "' has not ended (call tm_trace_end first)");
  switch (options.target) {
    case TM_TARGET_CPU: return CompileForCpu(graph, options, program);
    case TM_TARGET_GPU:
      return Unsupported("tm_compile: the GPU target is not available in this build");
  }
  return InvalidArgument("tm_compile: unknown target");
}

}  // namespace tinymlir
