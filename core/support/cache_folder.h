// The folder tinymlir keeps what it prepares between processes in: compiled programs (the
// disk cache, core/driver/disk_cache.h) and converted model weights (gpt2's prepared
// weights, in its "weights" subfolder). $TINYMLIR_CACHE_DIR ("off" or "0": none), else
// $XDG_CACHE_HOME/tinymlir, else ~/.cache/tinymlir.
#pragma once

#include <string>

#include "core/support/status.h"

namespace tinymlir {

// The folder the environment names ("" when there is none, or it is turned off).
std::string CacheFolderFromEnvironment();

// Creates `folder` (and its parents) 0700 if missing, and checks it is safe to keep code or
// data in: a folder, owned by this user, not writable by others (what is read back from it
// is trusted). Fails with TM_ERROR_IO naming the folder and the problem.
Status PrepareCacheFolder(const std::string &folder);

}  // namespace tinymlir
