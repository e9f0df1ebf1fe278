// Compilation and invocation: tm_compile, the tm_program_* accessors and tm_invoke.
#include <cstdlib>
#include <cstring>

#include "capi/src/handles.h"
#include "core/target/compile.h"

using tm_capi::Fail;
using tm_capi::Guard;

namespace {

tm_status TypeOf(const tinymlir::Program *p, int32_t i, bool input, tm_dtype *dtype, int32_t *rank,
                 int64_t *shape) {
  const char *fn = input ? "tm_program_input_type" : "tm_program_output_type";
  if (!p) return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": program is NULL");
  const auto &types = input ? p->inputs : p->outputs;
  if (i < 0 || i >= static_cast<int32_t>(types.size()))
    return Fail(TM_ERROR_OUT_OF_RANGE, std::string(fn) + ": index " + std::to_string(i) +
                                           " is outside 0.." +
                                           std::to_string(static_cast<int>(types.size()) - 1));
  const tinymlir::TensorType &t = types[i];
  if (dtype) *dtype = t.dtype;
  if (rank) *rank = t.rank();
  if (shape) std::copy(t.shape.begin(), t.shape.end(), shape);
  return TM_OK;
}

}  // namespace

extern "C" {

TM_API void tm_compile_options_init(tm_compile_options *options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->target = TM_TARGET_CPU;
  options->optimize = 1;
  options->use_blas = 1;
  options->opt_level = 3;
}

TM_API tm_status tm_compile(tm_context *ctx, const tm_trace *trace,
                            const tm_compile_options *options, tm_program **out) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_compile: ctx is NULL");
  if (!trace) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_compile: trace is NULL");
  if (!out) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_compile: out is NULL");
  return Guard([&] {
    tinymlir::CompileOptions o;
    TM_RETURN_IF_ERROR(tinymlir::ReadCompileOptions(options, &o));
    tinymlir::Program *program = nullptr;
    TM_RETURN_IF_ERROR(ctx->cache.GetOrCompile(trace->graph, o, &program));
    *out = ToHandle(program);
    return tinymlir::Status::Ok();
  });
}

TM_API void tm_program_retain(tm_program *program) {
  if (program) ToProgram(program)->Retain();
}

TM_API void tm_program_release(tm_program *program) { tinymlir::ReleaseProgram(ToProgram(program)); }

TM_API int32_t tm_program_num_inputs(const tm_program *program) {
  return program ? static_cast<int32_t>(ToProgram(program)->inputs.size()) : 0;
}

TM_API int32_t tm_program_num_outputs(const tm_program *program) {
  return program ? static_cast<int32_t>(ToProgram(program)->outputs.size()) : 0;
}

TM_API tm_status tm_program_input_type(const tm_program *program, int32_t i, tm_dtype *dtype,
                                       int32_t *rank, int64_t *shape) {
  return TypeOf(ToProgram(program), i, true, dtype, rank, shape);
}

TM_API tm_status tm_program_output_type(const tm_program *program, int32_t i, tm_dtype *dtype,
                                        int32_t *rank, int64_t *shape) {
  return TypeOf(ToProgram(program), i, false, dtype, rank, shape);
}

TM_API tm_status tm_program_ir(tm_program *program, tm_stage stage, char **text) {
  if (!program) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_ir: program is NULL");
  if (!text) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_ir: text is NULL");
  return Guard([&] {
    std::string s;
    TM_RETURN_IF_ERROR(ToProgram(program)->StageText(stage, &s));
    char *copy = static_cast<char *>(std::malloc(s.size() + 1));
    if (!copy) return tinymlir::Status(TM_ERROR_OUT_OF_MEMORY, "tm_program_ir: out of memory");
    std::memcpy(copy, s.c_str(), s.size() + 1);
    *text = copy;
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_invoke(tm_program *program, const tm_tensor *inputs, int32_t n_inputs,
                           const tm_tensor *outputs, int32_t n_outputs) {
  if (!program) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_invoke: program is NULL");
  return Guard([&] { return ToProgram(program)->Invoke(inputs, n_inputs, outputs, n_outputs); });
}

}  // extern "C"
