#include "core/support/build_id.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstring>

#include "core/support/fork_safe_once.h"

namespace tinymlir {
namespace {

struct Search {
  uintptr_t base;      // load address of the object that holds this code
  std::string id_hex;  // what was found
};

// The GNU build ID among the notes in the `size` bytes at `notes`, as hex; false when there
// is none. Offsets, not pointers, so that no sum can leave the segment.
bool FindBuildId(const char *notes, size_t size, std::string *hex) {
  size_t at = 0;
  while (size - at >= sizeof(ElfW(Nhdr))) {
    ElfW(Nhdr) note;
    std::memcpy(&note, notes + at, sizeof note);
    const size_t name = at + sizeof note;
    const size_t desc = name + ((static_cast<size_t>(note.n_namesz) + 3) & ~size_t{3});
    const size_t next = desc + ((static_cast<size_t>(note.n_descsz) + 3) & ~size_t{3});
    if (next > size) return false;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        std::memcmp(notes + name, "GNU", 4) == 0) {
      static const char kHex[] = "0123456789abcdef";
      for (uint32_t k = 0; k < note.n_descsz; ++k) {
        const auto byte = static_cast<unsigned char>(notes[desc + k]);
        *hex += kHex[byte >> 4];
        *hex += kHex[byte & 15];
      }
      return true;
    }
    at = next;
  }
  return false;
}

int VisitObject(struct dl_phdr_info *info, size_t, void *data) {
  auto *search = static_cast<Search *>(data);
  if (info->dlpi_addr != search->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const char *notes = reinterpret_cast<const char *>(info->dlpi_addr + segment.p_vaddr);
    if (FindBuildId(notes, segment.p_memsz, &search->id_hex)) return 1;
  }
  return 1;
}

}  // namespace

static ForkSafeOnce<std::string> library_build_id;

const std::string &LibraryBuildId() {
  return library_build_id.Get([] {
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
  });
}

// Found as the library loads: dl_iterate_phdr takes the loader's write lock, which glibc
// (2.36) does not reset in a forked child, so a fork while another thread searched left the
// child's first search, at its first compile, waiting forever.
[[maybe_unused]] static const std::string &library_build_id_at_load = LibraryBuildId();

}  // namespace tinymlir
