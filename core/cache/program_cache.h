// The specialisation cache of a context: (trace fingerprint, options) -> Program.
//
// The key is the trace's canonical fingerprint (ops, dtypes, shapes, constants), so the
// same function traced again with other weight *values* hits (weights are inputs) and a new
// shape misses. Entries are kept until the context is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/engine/program.h"
#include "core/target/compile.h"

namespace tinymlir {

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t entries = 0;
};

class ProgramCache {
 public:
  ProgramCache() = default;
  ProgramCache(const ProgramCache &) = delete;
  ProgramCache &operator=(const ProgramCache &) = delete;

  // Returns the cached program for (trace, options), compiling it on a miss; *hit tells
  // which. Compilation runs outside the lock, so different programs compile concurrently.
  Status GetOrCompile(const Trace &trace, const CompileOptions &options,
                      std::shared_ptr<Program> *out, bool *hit);

  CacheStats Stats();

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Program>> programs_;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace tinymlir
