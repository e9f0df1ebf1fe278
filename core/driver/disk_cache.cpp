#include "core/driver/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "core/support/cache_folder.h"
#include "core/engine/program_file.h"
#include "core/support/file_io.h"
#include "core/support/fnv.h"

namespace tinymlir {
namespace {

constexpr const char *kSuffix = ".tmc";
// Larger files are not entries of ours (a program's object and texts are far smaller).
constexpr uint64_t kMaxEntryBytes = 1ull << 30;
constexpr time_t kStaleTemporarySeconds = 600;

std::string Errno(const std::string &what) { return what + ": " + std::strerror(errno); }

// Creates `path` and its missing parents, owner-only.
bool MakeDirectories(const std::string &path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

bool IsEntryName(const std::string &name) {
  return name.size() > 4 && name[0] != '.' && name.compare(name.size() - 4, 4, kSuffix) == 0;
}

}  // namespace

std::string DiskCache::DirectoryFromEnvironment() { return CacheFolderFromEnvironment(); }

DiskCache::DiskCache() { Configure(DirectoryFromEnvironment(), 0); }

void DiskCache::Configure(const std::string &directory, uint64_t limit) {
  std::lock_guard<ForkSafeMutex> lock(mutex_);
  stats_.directory = directory;
  while (stats_.directory.size() > 1 && stats_.directory.back() == '/') stats_.directory.pop_back();
  stats_.limit = limit ? limit : kDefaultLimit;
  stats_.enabled = false;
  stats_.message = directory.empty() ? "the disk cache is off" : "";
  checked_ = false;
  ready_ = false;
  writable_ = true;
  const char *explain = std::getenv("TINYMLIR_EXPLAIN_CACHE");
  explain_ = explain && *explain && std::string(explain) != "0";
}

bool DiskCache::ReadyLocked() {
  if (checked_) return ready_;
  checked_ = true;
  ready_ = false;
  const std::string &dir = stats_.directory;
  if (dir.empty()) return false;
  // The default directory is made in a home that exists, never with it: a service
  // account's HOME (/nonexistent) must not be created, least of all by root.
  struct stat st;
  if (const char *home = std::getenv("HOME"); home && *home &&
                                              dir == std::string(home) + "/.cache/tinymlir" &&
                                              (stat(home, &st) != 0 || !S_ISDIR(st.st_mode))) {
    stats_.message = "the disk cache is off: HOME (" + std::string(home) +
                     ") is not an existing folder; set TINYMLIR_CACHE_DIR";
    return false;
  }
  if (!MakeDirectories(dir)) {
    stats_.message = Errno("cannot create the cache directory " + dir);
    return false;
  }
  if (stat(dir.c_str(), &st) != 0) {
    stats_.message = Errno("cannot read the cache directory " + dir);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    stats_.message = "the cache path " + dir + " is not a directory";
    return false;
  }
  // Loading an entry runs its code: refuse a directory someone else controls.
  if (st.st_uid != geteuid()) {
    stats_.message = "refusing the cache directory " + dir + ": owned by uid " +
                     std::to_string(st.st_uid) + ", not this user (" +
                     std::to_string(geteuid()) + ")";
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    stats_.message = "refusing the cache directory " + dir +
                     ": writable by group or others (chmod 700 it)";
    return false;
  }
  // Count what is there, for the limit, and remove the temporary files of writers that
  // died (killed while writing an entry): nothing else ever would. A writer takes
  // milliseconds, so one older than kStaleTemporarySeconds is not being written.
  stats_.bytes = 0;
  if (DIR *d = opendir(dir.c_str())) {
    const time_t now = time(nullptr);
    while (struct dirent *e = readdir(d)) {
      struct stat es;
      if (IsTemporaryName(e->d_name, kSuffix)) {
        if (fstatat(dirfd(d), e->d_name, &es, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(es.st_mode) &&
            now - es.st_mtime > kStaleTemporarySeconds)
          unlinkat(dirfd(d), e->d_name, 0);
        continue;
      }
      if (!IsEntryName(e->d_name)) continue;
      if (fstatat(dirfd(d), e->d_name, &es, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(es.st_mode))
        stats_.bytes += static_cast<uint64_t>(es.st_size);
    }
    closedir(d);
  }
  ready_ = true;
  stats_.enabled = true;
  return true;
}

std::string DiskCache::PathLocked(const std::string &key) const {
  return stats_.directory + "/" + Hex64(Fnv1a64(key)) + Hex64(Fnv1a64(key, 0x84222325cbf29ce4ull)) +
         kSuffix;
}

bool DiskCache::Load(const std::string &key, const std::string &manifest, std::string *payload) {
  std::lock_guard<ForkSafeMutex> lock(mutex_);
  if (!ReadyLocked()) return false;
  const std::string path = PathLocked(key);
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    ++stats_.misses;
    if (explain_) stats_.message = ExplainMissLocked(manifest);
    return false;
  }
  struct stat st;
  std::string bytes;
  bool read_ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (read_ok && st.st_uid != geteuid()) {
    close(fd);
    stats_.message = "refused the entry " + path + ": owned by another user";
    ++stats_.misses;
    return false;
  }
  read_ok = read_ok && static_cast<uint64_t>(st.st_size) <= kMaxEntryBytes &&
            ReadFull(fd, static_cast<size_t>(st.st_size), &bytes);
  // Reading it makes it the most recently used.
  if (read_ok) futimens(fd, nullptr);
  close(fd);

  std::string stored_manifest, stored_key;
  const bool valid =
      read_ok && DecodeEntry(bytes, &stored_manifest, &stored_key, payload).ok();
  if (!valid) {
    ++stats_.corrupt;
    ++stats_.misses;
    stats_.message = "removed a corrupt entry " + path;
    if (unlink(path.c_str()) == 0 && read_ok)
      stats_.bytes -= std::min<uint64_t>(stats_.bytes, static_cast<uint64_t>(st.st_size));
    return false;
  }
  if (stored_key != key) {  // another key with the same hash: not ours
    ++stats_.misses;
    if (explain_) stats_.message = ExplainMissLocked(manifest);
    return false;
  }
  return true;  // a hit once the caller could use it (Accept), else Discard
}

std::string DiskCache::ExplainMissLocked(const std::string &manifest) {
  auto lines = [](const std::string &text) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
      out.push_back(text.substr(start, nl - start));
    if (start < text.size()) out.push_back(text.substr(start));
    return out;
  };
  const std::vector<std::string> ours = lines(manifest);
  const std::string what = ours.size() > 4 ? ours[4] : "a program";
  std::vector<std::string> best;
  size_t best_score = 0;
  DIR *d = opendir(stats_.directory.c_str());
  if (!d) return "disk cache miss for " + what + ": the directory cannot be read";
  while (struct dirent *e = readdir(d)) {
    if (!IsEntryName(e->d_name)) continue;
    // Only the magic and the manifest are read.
    int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    std::string head;
    struct stat st;
    uint64_t length = 0;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
              ReadFull(fd, std::min<size_t>(kEntryHeadBytes, static_cast<size_t>(st.st_size)), &head) &&
              ManifestLength(head, &length);
    std::string theirs_text;
    ok = ok && length <= 1 << 20 && ReadFull(fd, static_cast<size_t>(length), &theirs_text);
    close(fd);
    if (!ok) continue;
    std::vector<std::string> theirs = lines(theirs_text);
    size_t score = 0;
    for (size_t i = 0; i < ours.size() && i < theirs.size(); ++i) score += ours[i] == theirs[i];
    if (score > best_score) {
      best_score = score;
      best = std::move(theirs);
    }
  }
  closedir(d);
  if (best.empty()) return "disk cache miss for " + what + ": the cache holds no entry";
  std::string why;
  for (size_t i = 0; i < ours.size() || i < best.size(); ++i) {
    const std::string here = i < ours.size() ? ours[i] : "", there = i < best.size() ? best[i] : "";
    if (here != there) why += (why.empty() ? "" : "; ") + here + " (nearest entry: " + there + ")";
  }
  if (why.empty()) why = "an entry with the same manifest but another key (a hash collision)";
  return "disk cache miss for " + what + ": " + why;
}

void DiskCache::Accept() {
  std::lock_guard<ForkSafeMutex> lock(mutex_);
  ++stats_.hits;
}

void DiskCache::Discard(const std::string &key, const std::string &why) {
  std::lock_guard<ForkSafeMutex> lock(mutex_);
  if (!ready_) return;
  const std::string path = PathLocked(key);
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && unlink(path.c_str()) == 0)
    stats_.bytes -= std::min<uint64_t>(stats_.bytes, static_cast<uint64_t>(st.st_size));
  ++stats_.corrupt;
  ++stats_.misses;
  stats_.message = "removed an unusable entry " + path + ": " + why;
}

void DiskCache::Store(const std::string &key, const std::string &manifest,
                      const std::string &payload) {
  std::lock_guard<ForkSafeMutex> lock(mutex_);
  if (!ReadyLocked() || !writable_) return;
  const std::string bytes = EncodeEntry(manifest, key, payload);
  if (bytes.size() > kMaxEntryBytes) return;

  int error = 0;
  const Status written = WriteFileAtomically(PathLocked(key), bytes, 0600, &error);
  if (!written.ok()) {
    // A directory that refuses writes (read-only, not ours to write) is not tried again;
    // other failures (a full disk, no descriptors left, a file size limit) may pass.
    const bool refused = error == EROFS || error == EACCES || error == EPERM;
    if (refused) writable_ = false;
    stats_.message = written.message() + (refused ? "; compiled programs are not saved"
                                                  : "; this program is not saved");
    return;
  }
  ++stats_.writes;
  stats_.bytes += bytes.size();
  if (stats_.bytes > stats_.limit) EvictLocked();
}

void DiskCache::EvictLocked() {
  struct File {
    std::string name;
    struct timespec mtime;
    uint64_t size;
  };
  std::vector<File> files;
  uint64_t total = 0;
  DIR *d = opendir(stats_.directory.c_str());
  if (!d) return;
  while (struct dirent *e = readdir(d)) {
    if (!IsEntryName(e->d_name)) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    files.push_back({e->d_name, st.st_mtim, static_cast<uint64_t>(st.st_size)});
    total += static_cast<uint64_t>(st.st_size);
  }
  closedir(d);
  std::sort(files.begin(), files.end(), [](const File &a, const File &b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec
                                            : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  // Oldest first; the newest entry (the one just written) stays even when it alone is
  // over the limit.
  for (size_t i = 0; i + 1 < files.size() && total > stats_.limit; ++i) {
    if (unlink((stats_.directory + "/" + files[i].name).c_str()) != 0) continue;
    total -= files[i].size;
    ++stats_.evictions;
  }
  stats_.bytes = total;
}

DiskCacheStats DiskCache::Stats() {
  std::lock_guard<ForkSafeMutex> lock(mutex_);
  ReadyLocked();  // so that `enabled` and `message` say how the directory is
  return stats_;
}

}  // namespace tinymlir
