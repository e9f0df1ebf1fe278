// The specialisation cache of a context: (trace fingerprint, options) -> Program.
//
// The key is the trace's canonical fingerprint (ops, dtypes, shapes, constants), so the
// same function traced again with other weight *values* hits (weights are inputs) and a new
// shape misses. Entries are kept until the context is destroyed: the seed chapter keeps the
// cache intentionally small, with no eviction policy.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/engine/program.h"
#include "core/target/compile.h"

namespace tinymlir {

// Drops one reference to a program, deleting it with the last.
void ReleaseProgram(Program *program);

class ProgramCache {
 public:
  ProgramCache() = default;
  ProgramCache(const ProgramCache &) = delete;
  ProgramCache &operator=(const ProgramCache &) = delete;
  ~ProgramCache();

  // Returns, in *out, a new reference (for the caller to release) to the cached program for
  // (graph, options), compiling it on a miss. Compilation runs outside the lock, so
  // different programs compile concurrently.
  Status GetOrCompile(const Graph &graph, const CompileOptions &options, Program **out);

  void Stats(uint64_t *hits, uint64_t *misses, uint64_t *entries);

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, Program *> programs_;  // each holds one reference
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace tinymlir
