#include "core/engine/program_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include "core/engine/elf_object.h"
#include "core/engine/perf_map.h"
#include "core/engine/program_file.h"
#include "core/engine/targets.h"
#include "core/runtime/device.h"
#include "core/support/file_io.h"

#ifndef TINYMLIR_VERSION_STRING
#error "TINYMLIR_VERSION_STRING must be defined by the build"
#endif

namespace tinymlir {
namespace {

// Program files are small (an object and its texts); larger files are refused unread.
constexpr uint64_t kMaxProgramFileBytes = 1ull << 30;

class ElfCode : public CompiledCode {
 public:
  explicit ElfCode(std::unique_ptr<ElfImage> image) : image_(std::move(image)) {}
  uint64_t mapped_bytes() const override { return image_->mapped_bytes(); }

 private:
  std::unique_ptr<ElfImage> image_;
};

// The manifest line that starts with `prefix`, without it ("" when absent).
std::string ManifestLine(const std::string &manifest, const std::string &prefix) {
  std::istringstream lines(manifest);
  for (std::string line; std::getline(lines, line);)
    if (line.compare(0, prefix.size(), prefix) == 0) return line.substr(prefix.size());
  return std::string();
}

// The program's version and target (the manifest's "target " line, as Target::Describe
// wrote it) against this library and this machine.
Status CheckHost(const std::string &manifest) {
  const std::string version = ManifestLine(manifest, "tinymlir ");
  const std::string ours = TINYMLIR_VERSION_STRING;
  if (version.compare(0, ours.size() + 1, ours + " ") != 0)
    return Unsupported("the program was compiled by tinymlir " +
                       version.substr(0, version.find(' ')) + "; this is tinymlir " + ours);
  const std::string description = ManifestLine(manifest, "target ");
  const Target *target = FindTarget(description.substr(0, description.find(' ')));
  if (!target)
    return Unsupported("the program is for an unknown target ('" +
                       description.substr(0, description.find(' ')) + "')");
  return target->CheckRunsHere(description);
}

}  // namespace

Status LinkProgramObject(Program *program, const std::string &name) {
  const Device *device = FindDevice(program->device);
  if (!device) return IoError("the program runs on an unknown device ('" + program->device + "')");
  const Device::SymbolTable &symbols = device->symbols();
  std::unique_ptr<ElfImage> image;
  TM_RETURN_IF_ERROR(LoadElfObject(
      program->object_code,
      [&symbols](const std::string &name) -> void * {
        auto it = symbols.find(name);
        return it == symbols.end() ? nullptr : it->second;
      },
      &image));
  program->entry = reinterpret_cast<Program::Entry>(image->Symbol(kPackedEntryName));
  if (!program->entry)
    return IoError(std::string("the native object has no ") + kPackedEntryName);
  AddToPerfMap(name, *image);
  program->code = std::make_unique<ElfCode>(std::move(image));
  program->bound_device = device;
  return Status::Ok();
}

Status WriteProgramFile(const Program &program, const std::string &path) {
  if (program.object_code.empty() || program.manifest.empty())
    return Unsupported("the program has no native object to export");
  const std::string bytes =
      EncodeEntry(program.manifest, program.cache_key, SerializeProgram(program));
  return WriteFileAtomically(path, bytes, 0644);
}

Status ReadProgramFile(const std::string &path, std::unique_ptr<Program> *out) {
  // As for a compile: no code is chosen for a CPU described wrongly, and no setting is
  // silently ignored.
  if (!SettingsError().empty()) return InvalidArgument(SettingsError());
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  std::string bytes;
  Status status;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = IoError(path + ": not a regular file");
  } else if (static_cast<uint64_t>(st.st_size) > kMaxProgramFileBytes) {
    status = IoError(path + ": " + std::to_string(st.st_size) + " bytes, more than a program "
                     "file may have (" + std::to_string(kMaxProgramFileBytes) + ")");
  } else {
    if (!ReadFull(fd, static_cast<size_t>(st.st_size), &bytes))
      status = IoError(path + ": cannot read: " + std::strerror(errno));
  }
  close(fd);
  TM_RETURN_IF_ERROR(status);

  std::string manifest, key, payload;
  status = DecodeEntry(bytes, &manifest, &key, &payload);
  if (!status.ok()) return IoError(path + ": " + status.message());
  TM_RETURN_IF_ERROR(CheckHost(manifest));
  auto program = std::make_unique<Program>();
  status = DeserializeProgram(payload, program.get());
  if (!status.ok()) return IoError(path + ": " + status.message());
  status = LinkProgramObject(program.get(), ManifestLine(manifest, "trace "));
  if (!status.ok()) return {status.code(), path + ": " + status.message()};
  program->cache_key = std::move(key);
  program->manifest = std::move(manifest);
  *out = std::move(program);
  return Status::Ok();
}

}  // namespace tinymlir
