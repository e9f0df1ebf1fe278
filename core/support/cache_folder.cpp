#include "core/support/cache_folder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tinymlir {

std::string CacheFolderFromEnvironment() {
  if (const char *dir = std::getenv("TINYMLIR_CACHE_DIR"); dir && *dir) {
    const std::string value = dir;
    return value == "off" || value == "0" ? std::string() : value;
  }
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/tinymlir";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/tinymlir";
  return std::string();
}

Status PrepareCacheFolder(const std::string &folder) {
  if (folder.empty()) return IoError("no cache folder");
  for (size_t at = 1; at <= folder.size(); ++at) {
    if (at < folder.size() && folder[at] != '/') continue;
    const std::string prefix = folder.substr(0, at);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      return IoError(prefix + ": cannot create: " + std::strerror(errno));
  }
  struct stat st;
  if (stat(folder.c_str(), &st) != 0)
    return IoError(folder + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return IoError(folder + ": not a folder");
  if (st.st_uid != geteuid())
    return IoError(folder + ": owned by user " + std::to_string(st.st_uid) + ", not this user (" +
                   std::to_string(geteuid()) + ")");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return IoError(folder + ": others may write to it (mode " +
                   [&] {
                     char b[8];
                     std::snprintf(b, sizeof b, "%o", st.st_mode & 0777);
                     return std::string(b);
                   }() + ")");
  return Status::Ok();
}

}  // namespace tinymlir
