#include "core/cache/program_cache.h"

namespace tinymlir {
namespace {

uint64_t EstimatedBytes(const Program &program) {
  uint64_t bytes = ProgramCache::kProgramOverhead;
  for (const std::string &text : program.stages) bytes += text.size();
  return bytes;
}

}  // namespace

Status ProgramCache::GetOrCompile(const Trace &trace, const CompileOptions &options,
                                  std::shared_ptr<Program> *out, bool *hit) {
  std::string key = trace.Fingerprint();
  const int32_t opts[] = {static_cast<int32_t>(options.target), options.optimize,
                          options.use_blas, options.opt_level};
  key.append(reinterpret_cast<const char *>(opts), sizeof opts);

  std::promise<Result> promise;
  std::shared_future<Result> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = programs_.find(key); it != programs_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      *out = it->second.program;
      *hit = true;
      return Status::Ok();
    }
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      ++hits_;
      pending = it->second;
    } else {
      ++misses_;
      in_flight_.emplace(key, promise.get_future().share());
    }
  }
  if (pending.valid()) {  // another thread is compiling this program: wait for it
    const Result &result = pending.get();
    if (!result.first.ok()) return result.first;
    *out = result.second;
    *hit = true;
    return Status::Ok();
  }

  std::unique_ptr<Program> compiled;
  Status status;
  try {
    status = Compile(trace, options, &compiled);
  } catch (...) {
    // Waiters must not wait forever: hand them the failure, then let it propagate.
    promise.set_value({RuntimeError("compilation failed with an exception"), nullptr});
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.erase(key);
    throw;
  }
  std::shared_ptr<Program> program(std::move(compiled));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.erase(key);
    if (status.ok()) InsertLocked(key, program);
  }
  promise.set_value({status, program});
  if (!status.ok()) return status;
  *out = std::move(program);
  *hit = false;
  return Status::Ok();
}

void ProgramCache::InsertLocked(const std::string &key, std::shared_ptr<Program> program) {
  const uint64_t bytes = EstimatedBytes(*program);
  lru_.push_front(key);
  programs_.emplace(key, Entry{std::move(program), bytes, lru_.begin()});
  bytes_ += bytes;
  EvictLocked();
}

void ProgramCache::EvictLocked() {
  // The most recent program stays even when it alone exceeds the budget: the caller is
  // about to use it.
  while (bytes_ > budget_ && programs_.size() > 1) {
    auto it = programs_.find(lru_.back());
    bytes_ -= it->second.bytes;
    programs_.erase(it);
    lru_.pop_back();
    ++evictions_;
  }
}

void ProgramCache::SetBudget(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  budget_ = bytes;
  EvictLocked();
}

CacheStats ProgramCache::Stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return {hits_, misses_, programs_.size(), evictions_, bytes_, budget_};
}

}  // namespace tinymlir
