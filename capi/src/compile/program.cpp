// Compilation: tm_compile_options_init and tm_compile (libtinymlir.so only; what the
// runtime library also has is in program_run.cpp).
#include <cstdlib>
#include <cstring>
#include <vector>

#include "capi/src/run/errors.h"
#include "capi/src/compile/handles.h"

using tm_capi::Fail;
using tm_capi::Guard;

namespace tm_capi {

// This library's defaults, in its own layout.
tm_compile_options DefaultCompileOptions() {
  tm_compile_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.target = TM_TARGET_CPU;
  o.optimize = 1;
  o.use_blas = 1;
  o.opt_level = 3;
  o.gpu_sm = 90;
  o.gpu_matmul_tile = 16;
  o.gpu_cubin = 0;
  return o;
}

tinymlir::Status ReadCompileOptions(const tm_compile_options *in, tinymlir::CompileOptions *out) {
  tm_compile_options o = DefaultCompileOptions();
  TM_RETURN_IF_ERROR(ReadOptions("tm_compile", in, TM_COMPILE_OPTIONS_SIZE_V1, &o));
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

TM_API tm_status tm_compile_options_init_size(tm_compile_options *options, size_t struct_size) {
  return tm_capi::Report(tinymlir::InitVersionedStruct(
      "tm_compile_options_init_size", tm_capi::DefaultCompileOptions(),
      TM_COMPILE_OPTIONS_SIZE_V1, TM_OPTIONS_MAX_STRUCT_SIZE, options, struct_size));
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
