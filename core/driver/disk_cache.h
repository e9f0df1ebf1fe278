// The disk cache: compiled programs kept in a directory across processes, so a second
// process with the same program reads native code instead of running the pipelines.
//
// An entry is one file named by a hash of its key; it holds a readable manifest (the key's
// parts), the full key (compared on every load: a hash collision is a miss, never the
// wrong program), the payload (core/engine/program_file.h) and a checksum over all of it.
// Writes go to a temporary file renamed into place, so a reader never sees a torn entry;
// an entry that fails its checksum or does not parse is counted, removed and rebuilt.
// The directory is bounded: past the limit, the least recently used entries (by mtime,
// refreshed on every hit) are removed.
//
// Loading native code from disk is running it. The directory is created owner-only
// (0700) and refused, disabling the disk cache with a message, when another user owns it
// or others may write to it; entries owned by another user are refused too. The checksum
// catches corruption, not tampering: whoever can write the directory can run code in
// every process that uses it.
//
// Nothing here fails a compile: any problem degrades to compiling, with a message in the
// stats. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "core/support/fork_safe_mutex.h"

namespace tinymlir {

struct DiskCacheStats {
  bool enabled = false;   // a usable directory is configured
  std::string directory;  // as configured ("" = off)
  std::string message;    // why it is off, or the last problem met ("" = none)
  uint64_t hits = 0;       // entries loaded
  uint64_t misses = 0;     // lookups that found no usable entry
  uint64_t writes = 0;     // entries written
  uint64_t corrupt = 0;    // entries refused (checksum, truncated, malformed) and removed
  uint64_t evictions = 0;  // entries removed to stay within the limit
  uint64_t bytes = 0;      // bytes of entries in the directory, as last counted
  uint64_t limit = 0;      // the bound on `bytes`
};

class DiskCache {
 public:
  static constexpr uint64_t kDefaultLimit = 1ull << 30;

  // $TINYMLIR_CACHE_DIR ("off" or "0": no disk cache), else $XDG_CACHE_HOME/tinymlir, else
  // $HOME/.cache/tinymlir; "" when none of them is set.
  static std::string DirectoryFromEnvironment();

  DiskCache();  // uses DirectoryFromEnvironment() and kDefaultLimit
  DiskCache(const DiskCache &) = delete;
  DiskCache &operator=(const DiskCache &) = delete;

  // Uses `directory` ("" = off) bounded by `limit` bytes (0 = kDefaultLimit). The directory
  // is checked (and created) on first use. With TINYMLIR_EXPLAIN_CACHE=1 in the environment,
  // every miss sets the message to why: which lines of the manifest (version, target,
  // options, trace, program, input and output types) differ from the nearest entry's.
  void Configure(const std::string &directory, uint64_t limit);

  // The payload stored under `key`, if a valid entry exists. `manifest` is the manifest
  // Store would write for this key: with explaining on, a miss is explained against it.
  // A payload returned is then either used (Accept: a hit) or not (Discard).
  bool Load(const std::string &key, const std::string &manifest, std::string *payload);
  void Accept();

  // Stores `payload` under `key`; `manifest` is text for people (the key's parts).
  void Store(const std::string &key, const std::string &manifest, const std::string &payload);

  // The entry under `key` loaded but could not be used (`why`): count it and remove it.
  void Discard(const std::string &key, const std::string &why);

  DiskCacheStats Stats();

 private:
  bool ReadyLocked();
  // Finds the entry whose manifest shares the most lines with `manifest` and says which
  // lines differ (TINYMLIR_EXPLAIN_CACHE).
  std::string ExplainMissLocked(const std::string &manifest);
  std::string PathLocked(const std::string &key) const;
  void EvictLocked();

  ForkSafeMutex mutex_;  // never left locked in a forked child
  DiskCacheStats stats_;
  bool checked_ = false;   // the directory was checked (ready_ tells the outcome)
  bool ready_ = false;
  bool writable_ = true;
  bool explain_ = false;  // TINYMLIR_EXPLAIN_CACHE is set (and not "0")
};

}  // namespace tinymlir
