// Contexts: the reference-counted owners of the program cache.
#include <algorithm>
#include <cstring>

#include "capi/src/run/errors.h"
#include "capi/src/compile/handles.h"

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

TM_API void tm_context_release(tm_context *ctx) {
  if (ctx && ctx->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete ctx;
}

TM_API void tm_context_destroy(tm_context *ctx) { tm_context_release(ctx); }

TM_API tm_status tm_cache_stats(tm_context *ctx, uint64_t *hits, uint64_t *misses,
                                uint64_t *entries) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_stats: ctx is NULL");
  tm_cache_info info;
  info.struct_size = TM_CACHE_INFO_SIZE_V1;
  if (tm_status s = tm_cache_get_info(ctx, &info); s != TM_OK) return s;
  if (hits) *hits = info.hits;
  if (misses) *misses = info.misses;
  if (entries) *entries = info.entries;
  return TM_OK;
}

TM_API tm_status tm_cache_get_info(tm_context *ctx, tm_cache_info *info) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_get_info: ctx is NULL");
  tinymlir::CacheStats stats = ctx->cache.Stats();
  tm_cache_info current;
  current.hits = stats.hits;
  current.misses = stats.misses;
  current.entries = stats.entries;
  current.evictions = stats.evictions;
  current.bytes = stats.bytes;
  current.budget_bytes = stats.budget;
  // Every disk field is 0 while the disk cache is off (the header's promise: a caller
  // tells "off" from "on and empty" by the limit).
  if (!stats.disk.enabled) stats.disk = tinymlir::DiskCacheStats();
  current.disk_hits = stats.disk.hits;
  current.disk_misses = stats.disk.misses;
  current.disk_writes = stats.disk.writes;
  current.disk_corrupt = stats.disk.corrupt;
  current.disk_evictions = stats.disk.evictions;
  current.disk_bytes = stats.disk.bytes;
  current.disk_limit_bytes = stats.disk.limit;
  return tm_capi::Report(tinymlir::WriteVersionedStruct("tm_cache_get_info", "info", current,
                                                        TM_CACHE_INFO_SIZE_V1, info));
}

TM_API tm_status tm_cache_set_budget(tm_context *ctx, uint64_t bytes) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_set_budget: ctx is NULL");
  return Guard("tm_cache_set_budget", [&] {
    ctx->cache.SetBudget(bytes);
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_cache_set_dir(tm_context *ctx, const char *dir, uint64_t limit_bytes) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_set_dir: ctx is NULL");
  return Guard("tm_cache_set_dir", [&] {
    std::string directory = !dir ? std::string()
                            : *dir ? std::string(dir)
                                   : tinymlir::DiskCache::DirectoryFromEnvironment();
    ctx->cache.ConfigureDisk(directory, limit_bytes);
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_cache_disk_message(tm_context *ctx, char *buf, size_t capacity,
                                       size_t *len) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_cache_disk_message: ctx is NULL");
  if (tm_status s = tm_capi::Report(
          tm_capi::CheckTextBuffer("tm_cache_disk_message", buf, capacity, len));
      s != TM_OK)
    return s;
  return Guard("tm_cache_disk_message", [&] {
    tinymlir::DiskCacheStats disk = ctx->cache.Stats().disk;
    std::string text = disk.enabled ? disk.directory + ": on" : std::string();
    if (!disk.message.empty()) text += (text.empty() ? "" : "; ") + disk.message;
    tm_capi::CopyText(text, buf, capacity, len);
    return tinymlir::Status::Ok();
  });
}

}  // extern "C"
