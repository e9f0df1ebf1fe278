// The specialisation cache of a context: (trace fingerprint, options) -> Program.
//
// The key is the trace's canonical fingerprint (ops, dtypes, shapes, constant hashes), so
// the same function traced again with other weight *values* hits (weights are inputs) and a
// new shape misses. The cache is bounded: each program is charged an estimate of the memory
// it keeps (its linked code, object, stage texts and constants), and
// when the total passes the budget the least recently used programs are dropped (programs
// callers still hold stay alive until released). Two threads asking for the same new program
// compile it once: the second waits for the first (single flight). Behind the memory
// cache sits the disk cache (disk_cache.h): a program missing from memory is read from
// disk when a valid entry exists, and written there after it is compiled.
#pragma once

#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/driver/disk_cache.h"
#include "core/engine/program.h"
#include "core/support/fork_safe_mutex.h"
#include "core/driver/compile.h"

namespace tinymlir {

struct CacheStats {
  uint64_t hits = 0;       // lookups that found the program (or waited for another's compile)
  uint64_t misses = 0;     // lookups that compiled
  uint64_t entries = 0;    // programs cached now
  uint64_t evictions = 0;  // programs dropped to stay within the budget
  uint64_t bytes = 0;      // estimated memory of the cached programs
  uint64_t budget = 0;     // the bound on `bytes`
  DiskCacheStats disk;
};

class ProgramCache {
 public:
  static constexpr uint64_t kDefaultBudget = 512ull << 20;
  // What a cached program costs beyond its texts, its object, its key and manifest and its
  // mapped code: the program's own bookkeeping (types, entry, the cache's entry and LRU
  // node) and the allocator's rounding. Measured 5-8 KB (heap in use per cached program
  // minus those sizes, 100-200 distinct elementwise and matmul programs); rounded up so the
  // estimate stays an upper bound. (It was 2 MB while each program held an LLVM JIT.)
  static constexpr uint64_t kProgramOverhead = 16ull << 10;

  ProgramCache() = default;
  ProgramCache(const ProgramCache &) = delete;
  ProgramCache &operator=(const ProgramCache &) = delete;

  // Returns the cached program for (trace, options), compiling it on a miss; *hit tells
  // which. Different programs compile concurrently; equal ones once.
  Status GetOrCompile(const Trace &trace, const CompileOptions &options,
                      std::shared_ptr<Program> *out, bool *hit);

  // Sets the budget (bytes) and evicts down to it at once.
  void SetBudget(uint64_t bytes);

  CacheStats Stats();

  // The disk cache behind this one: `directory` ("" = off), bounded by `limit` bytes.
  void ConfigureDisk(const std::string &directory, uint64_t limit);

 private:
  using Result = std::pair<Status, std::shared_ptr<Program>>;
  struct Entry {
    std::shared_ptr<Program> program;
    uint64_t bytes;
    std::list<std::string>::iterator lru;  // position in lru_ (front = most recent)
  };

  // Reads the program from disk, or compiles it and writes it there.
  // `fingerprint` is trace.Fingerprint(), computed once by GetOrCompile.
  Status LoadOrCompile(const Trace &trace, const std::string &fingerprint,
                       const CompileOptions &options, std::unique_ptr<Program> *out);
  void InsertLocked(const std::string &key, std::shared_ptr<Program> program);
  void EvictLocked();

  ForkSafeMutex mutex_;  // never left locked in a forked child
  std::unordered_map<std::string, Entry> programs_;
  std::list<std::string> lru_;
  // Compiles under way, with the process that started each (its ForkGeneration()): in a
  // forked child, one the parent's thread was doing never ends, so it is done again there.
  struct InFlight {
    std::shared_future<Result> result;
    uint64_t process;
  };
  std::unordered_map<std::string, InFlight> in_flight_;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0, bytes_ = 0;
  uint64_t budget_ = kDefaultBudget;
  DiskCache disk_;
};

}  // namespace tinymlir
