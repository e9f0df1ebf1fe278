// Program files and their native objects on arbitrary bytes: the entry decoder and program
// reader (core/engine/program_file.h) and the ELF linker (core/engine/elf_object.h), which
// tm_program_load and the disk cache run on files. Malformed input must be refused with a
// status and a short message, never crash, never write outside the linker's own mapping
// (AddressSanitizer watches), never loop. Nothing linked is executed: external symbols
// resolve to the address of a byte the target owns.
#include <cstdint>
#include <memory>
#include <string>

#include "core/engine/program_file.h"
#include "core/engine/elf_object.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

char external_symbol;

void CheckRefusal(const tinymlir::Status &s) {
  FUZZ_CHECK(!s.ok(), "expected a failure");
  FUZZ_CHECK(!s.message().empty() && s.message().size() < 4096, s.message());
  FUZZ_CHECK(tinymlir::fuzz::IsValidUtf8(s.message()), s.message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string bytes(reinterpret_cast<const char *>(data), size);

  // As an ELF object.
  std::unique_ptr<tinymlir::ElfImage> image;
  tinymlir::Status s = tinymlir::LoadElfObject(
      bytes, [](const std::string &) -> void * { return &external_symbol; }, &image);
  if (s.ok()) {
    FUZZ_CHECK(image != nullptr && image->mapped_bytes() > 0, "linked nothing");
  } else {
    FUZZ_CHECK(image == nullptr, "a failed link produced an image");
    CheckRefusal(s);
  }

  // As a program file, and its payload as a program.
  std::string manifest, key, payload;
  s = tinymlir::DecodeEntry(bytes, &manifest, &key, &payload);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == tinymlir::StatusCode::kIo, s.message());
    CheckRefusal(s);
  }
  tinymlir::CompiledProgram program;
  s = tinymlir::DeserializeProgram(s.ok() ? payload : bytes, &program);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == tinymlir::StatusCode::kIo, s.message());
    CheckRefusal(s);
  } else {
    FUZZ_CHECK(!program.object_code.empty(), "a program without an object was accepted");
  }
  return 0;
}
