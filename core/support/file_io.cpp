#include "core/support/file_io.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace tinymlir {

bool ReadFull(int fd, size_t n, std::string *out) {
  out->resize(n);
  size_t done = 0;
  while (done < n) {
    ssize_t got = read(fd, &(*out)[done], n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<size_t>(got);
  }
  return true;
}

namespace {

// What is at `path` when it is something a program file must not replace (a device, a
// FIFO, a socket, a folder), e.g. "a character device"; "" when it is absent, a regular
// file or a symlink (rename replaces the link itself, never what it points to).
const char *IrreplaceableKind(const std::string &path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

// The temporary file's name beside `path`: the final name, cut where the suffix would make
// it longer than a file name may be, then ".tmp.PID.N" (no other process or thread uses it).
std::string TemporaryPath(const std::string &path) {
  static std::atomic<uint64_t> counter{0};
  const std::string suffix = ".tmp." + std::to_string(getpid()) + "." +
                             std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t room = NAME_MAX - suffix.size();
  return path.substr(0, base + std::min(path.size() - base, room)) + suffix;
}

}  // namespace

bool IsTemporaryName(const std::string &name, const std::string &final_suffix) {
  const size_t at = name.rfind(final_suffix + ".tmp.");
  return at != std::string::npos && at > 0;
}

Status WriteFileAtomically(const std::string &path, const std::string &bytes, mode_t mode,
                           int *error_number) {
  return WriteFileAtomically(path, {FilePiece{bytes.data(), bytes.size()}}, mode, error_number);
}

Status WriteFileAtomically(const std::string &path, const std::vector<FilePiece> &pieces,
                           mode_t mode, int *error_number) {
  uint64_t size = 0;
  for (const FilePiece &piece : pieces) size += piece.size;
  auto fail = [&](int error, const std::string &why) {
    if (error_number) *error_number = error;
    return IoError(path + ": cannot write: " + why);
  };
  if (const char *kind = IrreplaceableKind(path); *kind)
    return fail(EEXIST, std::string("it is ") + kind + "; only a regular file is replaced");
  // Writing past RLIMIT_FSIZE raises SIGXFSZ, which ends the process by default: the
  // caller's process, for a write it may not even know of (the disk cache). Refused here.
  struct rlimit limit;
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      size > limit.rlim_cur)
    return fail(EFBIG, std::to_string(size) +
                           " bytes are more than this process's file size limit (RLIMIT_FSIZE, "
                           "ulimit -f) of " +
                           std::to_string(limit.rlim_cur) + " bytes");
  const std::string temp = TemporaryPath(path);
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return fail(errno, std::strerror(errno));
  int error = 0;
  for (size_t i = 0; !error && i < pieces.size(); ++i) {
    const char *data = static_cast<const char *>(pieces[i].data);
    size_t done = 0;
    while (done < pieces[i].size) {
      ssize_t n = write(fd, data + done, pieces[i].size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n < 0 ? errno : ENOSPC;
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  if (close(fd) != 0 && !error) error = errno;
  if (!error && rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error) {
    unlink(temp.c_str());
    return fail(error, std::strerror(error));
  }
  return Status::Ok();
}

}  // namespace tinymlir
