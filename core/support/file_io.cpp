#include "core/support/file_io.h"

#include <fcntl.h>
#include <unistd.h>

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

Status WriteFileAtomically(const std::string &path, const std::string &bytes, mode_t mode) {
  // A name no other process (pid) or thread (counter) uses.
  static std::atomic<uint64_t> counter{0};
  const std::string temp = path + ".tmp." + std::to_string(getpid()) + "." +
                           std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return IoError(path + ": cannot write: " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  int error = done == bytes.size() ? 0 : errno;
  if (close(fd) != 0 && !error) error = errno;
  if (!error && rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error) {
    unlink(temp.c_str());
    return IoError(path + ": cannot write: " + std::strerror(error ? error : EIO));
  }
  return Status::Ok();
}

}  // namespace tinymlir
