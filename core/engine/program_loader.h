// Program files: a compiled program as one self-contained file (tm_program_export) that
// either library loads (tm_program_load) with the ELF linker of elf_object.h, without
// LLVM. The file is a disk cache entry (core/engine/program_file.h): manifest, key, the
// program's signature, stage texts and native object, and a checksum.
#pragma once

#include <memory>
#include <string>

#include "core/engine/program.h"

namespace tinymlir {

// Links program->object_code into this process with the ELF linker, resolving its external
// symbols from the runtime's table (the GPU table for a GPU program), running its
// constructors, and sets program->entry and program->code. `name` (the trace's) names its
// functions for profilers (perf_map.h).
Status LinkProgramObject(Program *program, const std::string &name);

// Writes `program` to `path` (atomically: a temporary file renamed into place).
Status WriteProgramFile(const Program &program, const std::string &path);

// Reads, checks and links a program file. Fails with TM_ERROR_IO for a missing, malformed
// or corrupted file, TM_ERROR_UNSUPPORTED when it was compiled by another tinymlir version
// or for a CPU this one is not (another architecture, or an instruction set extension this
// CPU lacks: each is named).
Status ReadProgramFile(const std::string &path, std::unique_ptr<Program> *out);

}  // namespace tinymlir
