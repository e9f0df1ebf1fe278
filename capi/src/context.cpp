// Contexts: the owners of the program cache.
#include "capi/src/handles.h"

using tm_capi::Fail;
using tm_capi::Guard;

extern "C" {

TM_API tm_status tm_context_create(tm_context **out) {
  if (!out) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_context_create: out is NULL");
  return Guard([&] {
    *out = new tm_context();
    return tinymlir::Status::Ok();
  });
}

TM_API void tm_context_destroy(tm_context *ctx) { delete ctx; }

TM_API tm_status tm_cache_stats(tm_context *ctx, uint64_t *hits, uint64_t *misses,
                                uint64_t *entries) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_stats: ctx is NULL");
  ctx->cache.Stats(hits, misses, entries);
  return TM_OK;
}

}  // extern "C"
