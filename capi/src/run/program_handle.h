// The program handle, apart from the other handles (handles.h) because the runtime library
// (libtinymlir_runtime.so, no compiler) has programs but no contexts or traces.
#pragma once

#include <atomic>
#include <memory>

#include "core/engine/program.h"
#include "tinymlir/tinymlir.h"

// One handle per tm_compile (or tm_program_load) call, sharing the program with the cache
// and other handles; it remembers whether its lookup hit the cache.
struct tm_program {
  std::atomic<int> refs{1};
  std::shared_ptr<tinymlir::Program> impl;
  bool cache_hit = false;
};
