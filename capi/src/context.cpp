// Contexts: the reference-counted owners of the program cache.
#include "capi/src/errors.h"
#include "capi/src/handles.h"

using tm_capi::Fail;
using tm_capi::Guard;

extern "C" {

TM_API tm_status tm_context_create(tm_context **out) {
  if (!out) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_context_create: out is NULL");
  return Guard("tm_context_create", [&] {
    *out = new tm_context();
    return tinymlir::Status::Ok();
  });
}

TM_API void tm_context_retain(tm_context *ctx) {
  if (ctx) ctx->refs.fetch_add(1, std::memory_order_relaxed);
}

TM_API void tm_context_destroy(tm_context *ctx) {
  if (ctx && ctx->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete ctx;
}

TM_API tm_status tm_cache_stats(tm_context *ctx, uint64_t *hits, uint64_t *misses,
                                uint64_t *entries) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_stats: ctx is NULL");
  tinymlir::CacheStats stats = ctx->cache.Stats();
  if (hits) *hits = stats.hits;
  if (misses) *misses = stats.misses;
  if (entries) *entries = stats.entries;
  return TM_OK;
}

}  // extern "C"
