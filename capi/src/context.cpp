// Contexts: the reference-counted owners of the program cache.
#include <algorithm>
#include <cstring>

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

TM_API tm_status tm_cache_get_info(tm_context *ctx, tm_cache_info *info) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_get_info: ctx is NULL");
  if (!info) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_get_info: info is NULL");
  constexpr uint32_t kFirstLayout = 56;
  if (info->struct_size < kFirstLayout)
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_cache_get_info: info->struct_size is " + std::to_string(info->struct_size) +
                    ", smaller than the first published layout (56 bytes)");
  tinymlir::CacheStats stats = ctx->cache.Stats();
  tm_cache_info current;
  current.struct_size = info->struct_size;
  current.hits = stats.hits;
  current.misses = stats.misses;
  current.entries = stats.entries;
  current.evictions = stats.evictions;
  current.bytes = stats.bytes;
  current.budget_bytes = stats.budget;
  std::memcpy(info, &current, std::min<size_t>(info->struct_size, sizeof current));
  return TM_OK;
}

TM_API tm_status tm_cache_set_budget(tm_context *ctx, uint64_t bytes) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_set_budget: ctx is NULL");
  return Guard("tm_cache_set_budget", [&] {
    ctx->cache.SetBudget(bytes);
    return tinymlir::Status::Ok();
  });
}

}  // extern "C"
