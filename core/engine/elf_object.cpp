#include "core/engine/elf_object.h"

#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tinymlir {
namespace {

size_t AlignUp(size_t v, size_t a) { return a > 1 ? (v + a - 1) / a * a : v; }

Status Malformed(const std::string &what) {
  return IoError("the native object is malformed: " + what);
}

bool FitsInt32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

// The 14-byte stub that reaches any address: jmp *0(%rip); .quad target.
constexpr size_t kStubBytes = 16;
void WriteStub(uint8_t *at, uint64_t target) {
  static const uint8_t kJump[6] = {0xff, 0x25, 0, 0, 0, 0};
  std::memcpy(at, kJump, sizeof kJump);
  std::memcpy(at + 6, &target, sizeof target);
}

}  // namespace

ElfImage::~ElfImage() {
  for (void (*f)() : finalizers_) f();
  if (base_) munmap(base_, size_);
}

void *ElfImage::Symbol(const std::string &name) const {
  auto it = symbols_.find(name);
  return it == symbols_.end() ? nullptr : it->second;
}

Status LoadElfObject(const std::string &object,
                     const std::function<void *(const std::string &)> &resolve,
                     std::unique_ptr<ElfImage> *out) {
  const auto *bytes = reinterpret_cast<const uint8_t *>(object.data());
  const size_t n = object.size();
  Elf64_Ehdr eh;
  if (n < sizeof eh) return Malformed("shorter than an ELF header");
  std::memcpy(&eh, bytes, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return Malformed("no ELF magic");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_type != ET_REL)
    return Malformed("not a 64-bit little-endian relocatable object");
  if (eh.e_machine != EM_X86_64)
    return Unsupported("the native object is for ELF machine " + std::to_string(eh.e_machine) +
                       "; this runtime links x86-64 objects only");
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > n ||
      eh.e_shnum > (n - eh.e_shoff) / sizeof(Elf64_Shdr) || eh.e_shnum == 0)
    return Malformed("section headers out of bounds");
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  std::memcpy(sections.data(), bytes + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  for (const Elf64_Shdr &s : sections)
    if (s.sh_type != SHT_NOBITS && (s.sh_offset > n || s.sh_size > n - s.sh_offset))
      return Malformed("a section lies outside the object");

  // The symbol table and its names.
  const Elf64_Shdr *symtab = nullptr;
  for (const Elf64_Shdr &s : sections)
    if (s.sh_type == SHT_SYMTAB) symtab = &s;
  if (!symtab || symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_link >= sections.size())
    return Malformed("no usable symbol table");
  const Elf64_Shdr &strtab = sections[symtab->sh_link];
  // (Section bounds were checked for every type but NOBITS: the names must be real bytes.)
  if (strtab.sh_type != SHT_STRTAB) return Malformed("the symbol names are not a string table");
  const size_t n_symbols = symtab->sh_size / sizeof(Elf64_Sym);
  if (n_symbols == 0) return Malformed("an empty symbol table");
  std::vector<Elf64_Sym> symbols(n_symbols);
  std::memcpy(symbols.data(), bytes + symtab->sh_offset, n_symbols * sizeof(Elf64_Sym));
  auto name_of = [&](uint32_t offset) -> std::string {
    if (offset >= strtab.sh_size) return std::string();
    const char *start = reinterpret_cast<const char *>(bytes + strtab.sh_offset + offset);
    return std::string(start, strnlen(start, strtab.sh_size - offset));
  };

  // Layout: executable sections (then the stubs) in one region, the rest (then the GOT)
  // in another, each starting on a page.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<size_t> placed(sections.size(), SIZE_MAX);
  size_t text = 0, data = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    const Elf64_Shdr &s = sections[i];
    if (!(s.sh_flags & SHF_ALLOC) || s.sh_size == 0) continue;
    if (s.sh_flags & SHF_TLS) return Unsupported("the native object uses thread-local storage");
    // Bounds that keep the layout arithmetic far from overflow: file sections are bounded
    // by the object's size already; .bss and alignment are not.
    if (s.sh_addralign > page) return Malformed("a section aligned to more than a page");
    if (s.sh_size > (1ull << 30)) return Malformed("a section larger than 1 GiB");
    size_t &cursor = (s.sh_flags & SHF_EXECINSTR) ? text : data;
    cursor = AlignUp(cursor, s.sh_addralign);
    placed[i] = cursor;
    cursor += s.sh_size;
  }
  // One stub and one GOT slot per symbol at most (only the ones used are filled).
  const size_t stubs = AlignUp(text, kStubBytes), got = AlignUp(data, 8);
  const size_t text_bytes = AlignUp(stubs + n_symbols * kStubBytes, page);
  const size_t data_bytes = AlignUp(got + n_symbols * 8, page);
  const size_t total = text_bytes + data_bytes;

  std::unique_ptr<ElfImage> image(new ElfImage());
  void *base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    return OutOfMemory("cannot map " + std::to_string(total) + " bytes for the native code");
  image->base_ = base;
  image->size_ = total;
  auto *mem = static_cast<uint8_t *>(base);
  auto address_of_section = [&](size_t i) -> uint8_t * {
    const bool exec = sections[i].sh_flags & SHF_EXECINSTR;
    return mem + (exec ? 0 : text_bytes) + placed[i];
  };
  for (size_t i = 0; i < sections.size(); ++i)
    if (placed[i] != SIZE_MAX && sections[i].sh_type != SHT_NOBITS)
      std::memcpy(address_of_section(i), bytes + sections[i].sh_offset, sections[i].sh_size);

  // Symbol addresses. The GOT's base is _GLOBAL_OFFSET_TABLE_ (large-code-model objects,
  // which LLVM's JIT target machines make, address constants relative to it).
  const uint64_t got_base = reinterpret_cast<uint64_t>(mem + text_bytes + got);
  std::vector<uint64_t> address(n_symbols, 0);
  std::vector<bool> external(n_symbols, false);
  for (size_t k = 1; k < n_symbols; ++k) {
    const Elf64_Sym &sym = symbols[k];
    const std::string name = name_of(sym.st_name);
    if (sym.st_shndx == SHN_UNDEF) {
      if (name.empty()) continue;
      if (name == "_GLOBAL_OFFSET_TABLE_") {
        address[k] = got_base;
        continue;
      }
      void *target = resolve(name);
      if (!target)
        return CompileError("the native object needs '" + name +
                            "', which this library does not provide");
      address[k] = reinterpret_cast<uint64_t>(target);
      external[k] = true;
    } else if (sym.st_shndx == SHN_ABS) {
      address[k] = sym.st_value;
    } else if (sym.st_shndx == SHN_COMMON) {
      return Unsupported("the native object has a common symbol ('" + name + "')");
    } else if (sym.st_shndx < sections.size() && placed[sym.st_shndx] != SIZE_MAX) {
      address[k] = reinterpret_cast<uint64_t>(address_of_section(sym.st_shndx)) + sym.st_value;
      if (ELF64_ST_BIND(sym.st_info) != STB_LOCAL && !name.empty())
        image->symbols_[name] = reinterpret_cast<void *>(address[k]);
      if (ELF64_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_size > 0 && !name.empty())
        image->functions_.push_back(
            {name, reinterpret_cast<const void *>(address[k]), static_cast<size_t>(sym.st_size)});
    }
  }

  // Stubs and GOT slots, made on first use.
  std::vector<uint64_t> stub(n_symbols, 0), slot(n_symbols, 0);
  auto stub_for = [&](size_t k) {
    if (!stub[k]) {
      uint8_t *at = mem + stubs + k * kStubBytes;
      WriteStub(at, address[k]);
      stub[k] = reinterpret_cast<uint64_t>(at);
    }
    return stub[k];
  };
  auto slot_for = [&](size_t k) {
    if (!slot[k]) {
      uint8_t *at = mem + text_bytes + got + k * 8;
      std::memcpy(at, &address[k], 8);
      slot[k] = reinterpret_cast<uint64_t>(at);
    }
    return slot[k];
  };

  for (const Elf64_Shdr &rs : sections) {
    if (rs.sh_type == SHT_REL) return Unsupported("the native object has REL relocations");
    if (rs.sh_type != SHT_RELA) continue;
    if (rs.sh_info >= sections.size() || placed[rs.sh_info] == SIZE_MAX) continue;
    if (rs.sh_entsize != sizeof(Elf64_Rela)) return Malformed("relocation entry size");
    const Elf64_Shdr &target_section = sections[rs.sh_info];
    uint8_t *section_base = address_of_section(rs.sh_info);
    const size_t count = rs.sh_size / sizeof(Elf64_Rela);
    for (size_t r = 0; r < count; ++r) {
      Elf64_Rela rela;
      std::memcpy(&rela, bytes + rs.sh_offset + r * sizeof rela, sizeof rela);
      const uint32_t type = ELF64_R_TYPE(rela.r_info);
      const size_t k = ELF64_R_SYM(rela.r_info);
      if (k >= n_symbols) return Malformed("relocation against symbol " + std::to_string(k));
      const bool wide = type == R_X86_64_64 || type == R_X86_64_PC64 || type == R_X86_64_GOT64 ||
                        type == R_X86_64_GOTOFF64 || type == R_X86_64_GOTPC64 ||
                        type == R_X86_64_GOTPCREL64 || type == R_X86_64_PLTOFF64;
      const size_t width = wide ? 8 : 4;
      if (rela.r_offset > target_section.sh_size || width > target_section.sh_size - rela.r_offset)
        return Malformed("relocation outside its section");
      uint8_t *where = section_base + rela.r_offset;
      const int64_t place = static_cast<int64_t>(reinterpret_cast<uint64_t>(where));
      const int64_t addend = rela.r_addend;
      int64_t value = 0;
      switch (type) {
        case R_X86_64_NONE: continue;
        case R_X86_64_64: {
          const uint64_t v = address[k] + static_cast<uint64_t>(addend);
          std::memcpy(where, &v, 8);
          continue;
        }
        case R_X86_64_PC64:
        case R_X86_64_GOT64:
        case R_X86_64_GOTOFF64:
        case R_X86_64_GOTPC64:
        case R_X86_64_GOTPCREL64:
        case R_X86_64_PLTOFF64: {
          // The large code model's 64-bit forms: nothing is out of range.
          const int64_t got_address = static_cast<int64_t>(got_base);
          int64_t v = 0;
          if (type == R_X86_64_PC64) v = static_cast<int64_t>(address[k]) + addend - place;
          if (type == R_X86_64_GOT64)
            v = static_cast<int64_t>(slot_for(k)) - got_address + addend;
          if (type == R_X86_64_GOTOFF64) v = static_cast<int64_t>(address[k]) + addend - got_address;
          if (type == R_X86_64_GOTPC64) v = got_address + addend - place;
          if (type == R_X86_64_GOTPCREL64) v = static_cast<int64_t>(slot_for(k)) + addend - place;
          if (type == R_X86_64_PLTOFF64)
            v = static_cast<int64_t>(external[k] ? stub_for(k) : address[k]) + addend - got_address;
          std::memcpy(where, &v, 8);
          continue;
        }
        case R_X86_64_GOTPC32:
          value = static_cast<int64_t>(got_base) + addend - place;
          break;
        case R_X86_64_PC32:
        case R_X86_64_PLT32: {
          int64_t target = static_cast<int64_t>(address[k]);
          // An external function may be anywhere: call it through a stub in the mapping.
          if (external[k] && !FitsInt32(target + addend - place))
            target = static_cast<int64_t>(stub_for(k));
          value = target + addend - place;
          break;
        }
        case R_X86_64_GOTPCREL:
        case R_X86_64_GOTPCRELX:
        case R_X86_64_REX_GOTPCRELX:
          value = static_cast<int64_t>(slot_for(k)) + addend - place;
          break;
        case R_X86_64_32:
        case R_X86_64_32S: {
          value = static_cast<int64_t>(address[k]) + addend;
          const bool fits = type == R_X86_64_32 ? value >= 0 && value <= UINT32_MAX
                                                : FitsInt32(value);
          if (!fits)
            return Unsupported("the native object uses 32-bit absolute addresses (compile it "
                               "position-independent)");
          const uint32_t v = static_cast<uint32_t>(value);
          std::memcpy(where, &v, 4);
          continue;
        }
        default:
          return Unsupported("the native object has relocation type " + std::to_string(type) +
                             ", which this linker does not handle");
      }
      if (!FitsInt32(value))
        return CompileError("a relocation in the native object does not reach its target");
      const int32_t v = static_cast<int32_t>(value);
      std::memcpy(where, &v, 4);
    }
  }

  if (mprotect(base, text_bytes, PROT_READ | PROT_EXEC) != 0)
    return RuntimeError("cannot make the native code executable");
  // Constructors and destructors: arrays of function pointers, relocated above, that must
  // point into the code.
  std::vector<void (*)()> initializers, finalizers;
  for (size_t i = 0; i < sections.size(); ++i) {
    const Elf64_Shdr &s = sections[i];
    if ((s.sh_type != SHT_INIT_ARRAY && s.sh_type != SHT_FINI_ARRAY) || placed[i] == SIZE_MAX)
      continue;
    if (s.sh_size % sizeof(uint64_t) != 0) return Malformed("a constructor array of odd size");
    for (size_t at = 0; at < s.sh_size; at += sizeof(uint64_t)) {
      uint64_t target;
      std::memcpy(&target, address_of_section(i) + at, sizeof target);
      if (target < reinterpret_cast<uint64_t>(mem) ||
          target >= reinterpret_cast<uint64_t>(mem) + text_bytes)
        return Malformed("a constructor or destructor outside the code");
      auto f = reinterpret_cast<void (*)()>(target);
      (s.sh_type == SHT_INIT_ARRAY ? initializers : finalizers).push_back(f);
    }
  }
  // Registered only now: an object refused above never runs its destructors.
  image->finalizers_.assign(finalizers.rbegin(), finalizers.rend());
  for (void (*f)() : initializers) f();
  *out = std::move(image);
  return Status::Ok();
}

}  // namespace tinymlir
