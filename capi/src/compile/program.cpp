// Compilation: tm_compile_options_init and tm_compile (libtinymlir.so only; what the
// runtime library also has is in program_run.cpp).
#include <cstdlib>
#include <cstring>
#include <vector>

#include "capi/src/run/errors.h"
#include "capi/src/compile/handles.h"

using tm_capi::Fail;
using tm_capi::Guard;

namespace {

// The first published layout of tm_compile_options (all of today's fields).
constexpr size_t kCompileOptionsFirstLayout = 20;

}  // namespace

namespace tm_capi {

tinymlir::Status ReadCompileOptions(const tm_compile_options *in, tinymlir::CompileOptions *out) {
  tm_compile_options o;
  tm_compile_options_init(&o);
  TM_RETURN_IF_ERROR(ReadOptions("tm_compile", in, kCompileOptionsFirstLayout, &o));
  // Values are checked, and the environment applied, by the program cache (core/engine/
  // compile_options.h): here they are only carried over.
  out->target = static_cast<tinymlir::Target>(o.target);
  out->optimize = o.optimize != 0;
  out->use_blas = o.use_blas != 0;
  out->opt_level = o.opt_level;
  out->gpu_sm = o.gpu_sm;
  out->gpu_matmul_tile = o.gpu_matmul_tile;
  out->gpu_cubin = o.gpu_cubin != 0;
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
  options->gpu_sm = 90;
  options->gpu_matmul_tile = 16;
  options->gpu_cubin = 0;
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

}  // extern "C"
