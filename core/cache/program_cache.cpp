#include "core/cache/program_cache.h"

namespace tinymlir {

void ReleaseProgram(Program *program) {
  if (program && program->Release()) delete program;
}

ProgramCache::~ProgramCache() {
  for (auto &entry : programs_) ReleaseProgram(entry.second);
}

Status ProgramCache::GetOrCompile(const Graph &graph, const CompileOptions &options,
                                  Program **out) {
  std::string key = graph.Fingerprint();
  const int32_t opts[] = {options.target, options.optimize, options.use_blas,
                          options.opt_level};
  key.append(reinterpret_cast<const char *>(opts), sizeof opts);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(key);
    if (it != programs_.end()) {
      ++hits_;
      it->second->Retain();
      *out = it->second;
      return Status::Ok();
    }
  }
  std::unique_ptr<Program> compiled;
  TM_RETURN_IF_ERROR(Compile(graph, options, &compiled));
  std::lock_guard<std::mutex> lock(mutex_);
  ++misses_;
  auto [it, inserted] = programs_.emplace(key, compiled.get());
  if (inserted) compiled.release();  // the cache's reference
  // Else another thread compiled the same program meanwhile: share theirs, drop ours.
  it->second->Retain();
  *out = it->second;
  return Status::Ok();
}

void ProgramCache::Stats(uint64_t *hits, uint64_t *misses, uint64_t *entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (hits) *hits = hits_;
  if (misses) *misses = misses_;
  if (entries) *entries = programs_.size();
}

}  // namespace tinymlir
