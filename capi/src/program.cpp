// Compilation and invocation: tm_compile, the tm_program_* accessors and tm_invoke.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "capi/src/errors.h"
#include "capi/src/handles.h"

using tm_capi::Fail;
using tm_capi::Guard;

namespace {

// The first published layout of tm_compile_options (all of today's fields).
constexpr size_t kCompileOptionsFirstLayout = 20;

tm_status TypeOf(const tm_program *p, int32_t i, bool input, tm_dtype *dtype, int32_t *rank,
                 int64_t *shape) {
  const char *fn = input ? "tm_program_input_type" : "tm_program_output_type";
  if (!p) return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": program is NULL");
  const auto &types = input ? p->impl->inputs : p->impl->outputs;
  if (i < 0 || i >= static_cast<int32_t>(types.size()))
    return Fail(TM_ERROR_OUT_OF_RANGE, std::string(fn) + ": index " + std::to_string(i) +
                                           " is out of range: the program has " +
                                           std::to_string(types.size()) +
                                           (input ? " inputs" : " outputs"));
  const tinymlir::TensorType &t = types[i];
  if (dtype) *dtype = tm_capi::ToC(t.dtype);
  if (rank) *rank = t.rank();
  if (shape) std::copy(t.shape.begin(), t.shape.end(), shape);
  return TM_OK;
}

}  // namespace

namespace tm_capi {

tinymlir::Status ReadCompileOptions(const tm_compile_options *in, tinymlir::CompileOptions *out) {
  tm_compile_options o;
  tm_compile_options_init(&o);
  TM_RETURN_IF_ERROR(ReadOptions("tm_compile", in, kCompileOptionsFirstLayout, &o));
  if (o.target != TM_TARGET_CPU && o.target != TM_TARGET_GPU)
    return tinymlir::InvalidArgument("tm_compile: unknown target " +
                                     std::to_string(static_cast<int>(o.target)));
  out->target = static_cast<tinymlir::Target>(o.target);
  out->optimize = o.optimize != 0;
  out->use_blas = o.use_blas != 0;
  out->opt_level = o.opt_level;
  return tinymlir::Status::Ok();
}

}  // namespace tm_capi

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
  tinymlir::CompileOptions o;
  if (tm_status s = tm_capi::Report(tm_capi::ReadCompileOptions(options, &o)); s != TM_OK)
    return s;
  return Guard("tm_compile", [&] {
    auto handle = std::make_unique<tm_program>();
    TM_RETURN_IF_ERROR(ctx->cache.GetOrCompile(trace->trace, o, &handle->impl, &handle->cache_hit));
    *out = handle.release();
    return tinymlir::Status::Ok();
  });
}

static_assert(TM_NUM_COMPILE_PHASES == tinymlir::kNumCompilePhases,
              "tm_compile_phase and tinymlir::CompilePhase must list the same phases");

TM_API double tm_program_phase_seconds(const tm_program *program, tm_compile_phase phase) {
  const int index = static_cast<int>(phase);
  if (!program || !program->impl || index < 0 || index >= tinymlir::kNumCompilePhases) return -1.0;
  return program->impl->phase_seconds[index];
}

TM_API int32_t tm_program_from_disk_cache(const tm_program *program) {
  return program && program->impl && program->impl->read_from_disk ? 1 : 0;
}

TM_API int32_t tm_program_cache_hit(const tm_program *program) {
  return program && program->cache_hit ? 1 : 0;
}

TM_API uint64_t tm_program_temporary_bytes(const tm_program *program) {
  return program ? program->impl->temporary_bytes : 0;
}

TM_API void tm_program_retain(tm_program *program) {
  if (program) program->refs.fetch_add(1, std::memory_order_relaxed);
}

TM_API void tm_program_release(tm_program *program) {
  if (program && program->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete program;
}

TM_API int32_t tm_program_num_inputs(const tm_program *program) {
  return program ? static_cast<int32_t>(program->impl->inputs.size()) : 0;
}

TM_API int32_t tm_program_num_outputs(const tm_program *program) {
  return program ? static_cast<int32_t>(program->impl->outputs.size()) : 0;
}

TM_API tm_status tm_program_input_type(const tm_program *program, int32_t i, tm_dtype *dtype,
                                       int32_t *rank, int64_t *shape) {
  return TypeOf(program, i, true, dtype, rank, shape);
}

TM_API tm_status tm_program_output_type(const tm_program *program, int32_t i, tm_dtype *dtype,
                                        int32_t *rank, int64_t *shape) {
  return TypeOf(program, i, false, dtype, rank, shape);
}

TM_API tm_status tm_program_ir(tm_program *program, tm_stage stage, char **text) {
  if (!program) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_ir: program is NULL");
  if (!text) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_program_ir: text is NULL");
  return Guard("tm_program_ir", [&] {
    std::string s;
    TM_RETURN_IF_ERROR(program->impl->StageText(tm_capi::ToCore(stage), &s));
    char *copy = static_cast<char *>(std::malloc(s.size() + 1));
    if (!copy) return tinymlir::OutOfMemory("cannot allocate the stage text");
    std::memcpy(copy, s.c_str(), s.size() + 1);
    *text = copy;
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_invoke(tm_program *program, const tm_tensor *inputs, int32_t n_inputs,
                           const tm_tensor *outputs, int32_t n_outputs) {
  if (!program) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_invoke: program is NULL");
  if ((n_inputs > 0 && !inputs) || (n_outputs > 0 && !outputs))
    return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_invoke: NULL tensor array");
  if (n_inputs < 0 || n_outputs < 0)
    return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_invoke: negative tensor count");
  return Guard("tm_invoke", [&] {
    // Most programs take a handful of tensors: convert on the stack.
    constexpr int kOnStack = 32;
    tinymlir::TensorView stack[kOnStack];
    std::vector<tinymlir::TensorView> heap;
    tinymlir::TensorView *views = stack;
    const int total = n_inputs + n_outputs;
    if (total > kOnStack) {
      heap.resize(total);
      views = heap.data();
    }
    for (int i = 0; i < n_inputs; ++i) views[i] = tm_capi::ToCore(inputs[i]);
    for (int i = 0; i < n_outputs; ++i) views[n_inputs + i] = tm_capi::ToCore(outputs[i]);
    return program->impl->Invoke(views, n_inputs, views + n_inputs, n_outputs);
  });
}

}  // extern "C"
