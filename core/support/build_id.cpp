#include "core/support/build_id.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace tinymlir {
namespace {

struct Search {
  uintptr_t base;      // load address of the object that holds this code
  std::string id_hex;  // what was found
};

// The GNU build ID among the notes in [p, end), as hex; false when there is none.
bool FindBuildId(const char *p, const char *end, std::string *hex) {
  while (p + sizeof(ElfW(Nhdr)) <= end) {
    ElfW(Nhdr) note;
    std::memcpy(&note, p, sizeof note);
    const char *name = p + sizeof note;
    const char *desc = name + ((note.n_namesz + 3) & ~3u);
    const char *next = desc + ((note.n_descsz + 3) & ~3u);
    if (next > end || next < p) return false;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
      static const char kHex[] = "0123456789abcdef";
      for (uint32_t k = 0; k < note.n_descsz; ++k) {
        const auto byte = static_cast<unsigned char>(desc[k]);
        *hex += kHex[byte >> 4];
        *hex += kHex[byte & 15];
      }
      return true;
    }
    p = next;
  }
  return false;
}

int VisitObject(struct dl_phdr_info *info, size_t, void *data) {
  auto *search = static_cast<Search *>(data);
  if (info->dlpi_addr != search->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const char *p = reinterpret_cast<const char *>(info->dlpi_addr + segment.p_vaddr);
    if (FindBuildId(p, p + segment.p_memsz, &search->id_hex)) return 1;
  }
  return 1;
}

}  // namespace

const std::string &LibraryBuildId() {
  static const std::string id = [] {
    Dl_info self;
    if (!dladdr(reinterpret_cast<void *>(&VisitObject), &self)) return std::string();
    Search search{reinterpret_cast<uintptr_t>(self.dli_fbase), ""};
    // For a PIE or shared object dlpi_addr is the load base; for a non-PIE executable it is
    // 0 while dli_fbase is the mapping's start: try both.
    dl_iterate_phdr(VisitObject, &search);
    if (search.id_hex.empty()) {
      search.base = 0;
      dl_iterate_phdr(VisitObject, &search);
    }
    return search.id_hex;
  }();
  return id;
}

std::string BuildIdOfFile(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string();
  auto read_at = [fd](uint64_t offset, size_t n, void *out) {
    return pread(fd, out, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n);
  };
  std::string id;
  ElfW(Ehdr) header;
  if (read_at(0, sizeof header, &header) && std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 &&
      header.e_ident[EI_CLASS] == ELFCLASS64 && header.e_phentsize == sizeof(ElfW(Phdr)) &&
      header.e_phnum < 256) {
    std::vector<ElfW(Phdr)> segments(header.e_phnum);
    if (read_at(header.e_phoff, segments.size() * sizeof(ElfW(Phdr)), segments.data())) {
      for (const ElfW(Phdr) &segment : segments) {
        if (segment.p_type != PT_NOTE || segment.p_filesz > (1u << 16)) continue;
        std::vector<char> notes(segment.p_filesz);
        if (read_at(segment.p_offset, notes.size(), notes.data()) &&
            FindBuildId(notes.data(), notes.data() + notes.size(), &id))
          break;
      }
    }
  }
  close(fd);
  return id;
}

}  // namespace tinymlir
