// A compiled program as bytes, for the disk cache: its signature (input and output types,
// gather checks, temporary memory), the text of its stages and its native object. Only
// what Program holds as data; the code is linked again from the object when read back.
#pragma once

#include <memory>
#include <string>

#include "core/engine/program.h"

namespace tinymlir {

std::string SerializeProgram(const Program &program);

// Fills `program`'s data from `bytes` (its entry and code stay empty). Fails, naming what
// is wrong, on bytes SerializeProgram did not write (truncated, or out of bounds).
Status DeserializeProgram(const std::string &bytes, Program *program);

}  // namespace tinymlir
