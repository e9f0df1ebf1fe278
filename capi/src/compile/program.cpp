// Compilation: tm_compile_options_init and tm_compile (libtinymlir.so only; what the
// runtime library also has is in program_run.cpp).
#include <cstdlib>
#include <cstring>
#include <vector>

#include "capi/src/compile/handles.h"
#include "capi/src/run/errors.h"
#include "core/engine/targets.h"

using tm_capi::Fail;
using tm_capi::Guard;

namespace tm_capi {
namespace {

// The fields of tm_compile_options that are a target's own options, by the option's name in
// that target's schema (Target::options()): a compile reads those of its target.
struct TargetField {
  const char *name;
  int32_t tm_compile_options::*field;
};
constexpr TargetField kTargetFields[] = {
    {"use_blas", &tm_compile_options::use_blas},
    {"gpu_sm", &tm_compile_options::gpu_sm},
    {"gpu_matmul_tile", &tm_compile_options::gpu_matmul_tile},
    {"gpu_cubin", &tm_compile_options::gpu_cubin},
};

// The option `name` of whichever target has it, or NULL.
const tinymlir::OptionField *FindOption(const tinymlir::Target &target, const char *name) {
  for (const tinymlir::OptionField &f : target.options())
    if (std::strcmp(f.name, name) == 0) return &f;
  return nullptr;
}

}  // namespace

// This library's defaults, in its own layout: the common ones, each target field its
// target's default.
tm_compile_options DefaultCompileOptions() {
  tm_compile_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.target = TM_TARGET_CPU;
  o.optimize = 1;
  o.opt_level = 3;
  for (const TargetField &f : kTargetFields)
    for (const tinymlir::Target *target : tinymlir::AllTargets())
      if (const tinymlir::OptionField *option = FindOption(*target, f.name))
        o.*f.field = option->default_value;
  return o;
}

tinymlir::Status ReadCompileOptions(const tm_compile_options *in, tinymlir::CompileOptions *out) {
  tm_compile_options o = DefaultCompileOptions();
  TM_RETURN_IF_ERROR(ReadOptions("tm_compile", in, TM_COMPILE_OPTIONS_SIZE_V1, &o));
  if (!tinymlir::IsTargetKind(o.target)) {
    std::string targets;
    for (const tinymlir::Target *t : tinymlir::AllTargets())
      targets += (targets.empty() ? "" : ", ") + std::to_string(static_cast<int>(t->kind())) +
                 " (" + t->name() + ")";
    return tinymlir::InvalidArgument("target must be one of " + targets + ", got " +
                                     std::to_string(o.target));
  }
  // Values are checked, and the environment applied, by the program cache
  // (tinymlir::CompleteCompileOptions): here they are only carried over.
  out->target = static_cast<tinymlir::TargetKind>(o.target);
  out->optimize = o.optimize != 0;
  out->opt_level = o.opt_level;
  const tinymlir::Target &target = tinymlir::TargetOf(out->target);
  for (const TargetField &f : kTargetFields)
    if (FindOption(target, f.name)) out->SetOption(f.name, o.*f.field);
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
