// Compilation entry point: a graph and options in, a Program out, for any target.
#pragma once

#include <memory>

#include "core/engine/program.h"
#include "core/graph/graph.h"

namespace tinymlir {

struct CompileOptions {
  tm_target target = TM_TARGET_CPU;
  bool optimize = true;
  bool use_blas = true;
  int opt_level = 3;
};

// Validates the public options struct (struct_size, target, opt level) into CompileOptions.
Status ReadCompileOptions(const tm_compile_options *in, CompileOptions *out);

Status Compile(const Graph &graph, const CompileOptions &options,
               std::unique_ptr<Program> *program);

}  // namespace tinymlir
