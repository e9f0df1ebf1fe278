// File reads and writes shared by the disk cache and program files: whole reads and writes
// that retry on EINTR, and writes that never leave a partial file at the final path.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/support/status.h"

namespace tinymlir {

// Reads exactly n bytes from fd into *out; false on an error or an early end.
bool ReadFull(int fd, size_t n, std::string *out);

// Writes `bytes` to a new temporary file beside `path` (created with `mode`, never through
// a symlink) and renames it over `path`: readers see the old file or the new one, never
// part of one. A symlink at `path` is replaced, never followed; a device, FIFO, socket or
// folder there is left alone (an error), and so is a write beyond RLIMIT_FSIZE (which
// would raise SIGXFSZ and end the process). Fails with TM_ERROR_IO naming the path and the
// reason; *error_number (if given) gets the errno value.
Status WriteFileAtomically(const std::string &path, const std::string &bytes, mode_t mode,
                           int *error_number = nullptr);

// The same for a file made of pieces, written in order (a large file is not copied into one
// string first).
struct FilePiece {
  const void *data;
  size_t size;
};
Status WriteFileAtomically(const std::string &path, const std::vector<FilePiece> &pieces,
                           mode_t mode, int *error_number = nullptr);

// Whether `name` is one of WriteFileAtomically's temporary files for a final name ending in
// `final_suffix` (".tmc": "<name>.tmc.tmp.PID.N"); one left by a process that died while
// writing stays until someone removes it.
bool IsTemporaryName(const std::string &name, const std::string &final_suffix);

}  // namespace tinymlir
