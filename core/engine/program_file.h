// A compiled program as bytes, for the disk cache: its signature (input and output types,
// gather checks, temporary memory), the text of its stages and its native object. Only
// what Program holds as data; the code is linked again from the object when read back.
#pragma once

#include <memory>
#include <string>

#include "core/contract/compiled_program.h"
#include "core/support/status.h"

namespace tinymlir {

std::string SerializeProgram(const CompiledProgram &program);

// One file of the disk cache or of tm_program_export: a magic number, the manifest (text),
// the key, the payload (SerializeProgram) and a checksum over everything before it.
std::string EncodeEntry(const std::string &manifest, const std::string &key,
                        const std::string &payload);
// Fails (naming what) on a wrong magic number, a checksum mismatch or a truncation.
Status DecodeEntry(const std::string &bytes, std::string *manifest, std::string *key,
                   std::string *payload);
// Only the manifest: for reading many entries' manifests cheaply (the first bytes of the
// file suffice); false when `head` does not start like an entry.
bool ManifestLength(const std::string &head, uint64_t *length);
inline constexpr size_t kEntryHeadBytes = 16;  // magic + manifest length

// Fills `program`'s data from `bytes` (its entry and code stay empty). Fails, naming what
// is wrong, on bytes SerializeProgram did not write (truncated, or out of bounds).
Status DeserializeProgram(const std::string &bytes, CompiledProgram *program);

}  // namespace tinymlir
