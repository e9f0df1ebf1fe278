#include "core/engine/perf_map.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "core/engine/elf_object.h"
#include "core/support/environment.h"

namespace tinymlir {
namespace {

// perf's convention for this process: /tmp/perf-<pid>.map.
std::string PerfMapPath() { return "/tmp/perf-" + std::to_string(getpid()) + ".map"; }

}  // namespace

void AddToPerfMap(const std::string &program_name, const ElfImage &image) {
  if (!PerfMapSetting() || image.functions().empty()) return;
  std::string lines;
  for (const ElfImage::Function &f : image.functions()) {
    char place[48];
    std::snprintf(place, sizeof place, "%llx %zx ",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(f.address)),
                  f.bytes);
    lines += place + std::string("tinymlir:") + program_name + ":" + f.name + "\n";
  }
  // One append per program: two threads linking at once cannot interleave their lines.
  const int fd = open(PerfMapPath().c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < lines.size()) {
    const ssize_t n = write(fd, lines.data() + done, lines.size() - done);
    if (n <= 0) break;  // a partial map names less; the program runs the same
    done += static_cast<size_t>(n);
  }
  close(fd);
}

}  // namespace tinymlir
