#include "core/cache/program_cache.h"

namespace tinymlir {

Status ProgramCache::GetOrCompile(const Trace &trace, const CompileOptions &options,
                                  std::shared_ptr<Program> *out, bool *hit) {
  std::string key = trace.Fingerprint();
  const int32_t opts[] = {static_cast<int32_t>(options.target), options.optimize,
                          options.use_blas, options.opt_level};
  key.append(reinterpret_cast<const char *>(opts), sizeof opts);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(key);
    if (it != programs_.end()) {
      ++hits_;
      *out = it->second;
      *hit = true;
      return Status::Ok();
    }
  }
  std::unique_ptr<Program> compiled;
  TM_RETURN_IF_ERROR(Compile(trace, options, &compiled));
  std::lock_guard<std::mutex> lock(mutex_);
  ++misses_;
  // If another thread compiled the same program meanwhile, share theirs and drop ours.
  auto it = programs_.emplace(key, std::shared_ptr<Program>(std::move(compiled))).first;
  *out = it->second;
  *hit = false;
  return Status::Ok();
}

CacheStats ProgramCache::Stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return {hits_, misses_, programs_.size()};
}

}  // namespace tinymlir
