// The C handles and the helpers every shim uses to turn tinymlir::Status into tm_status +
// tm_last_error, and to keep C++ exceptions (allocation failure) inside the library.
#pragma once

#include <new>
#include <string>

#include "core/cache/program_cache.h"
#include "core/graph/graph.h"
#include "tinymlir/tinymlir.h"

struct tm_context {
  tinymlir::ProgramCache cache;
};

struct tm_trace {
  explicit tm_trace(std::string name) : graph(std::move(name)) {}
  tinymlir::Graph graph;
};

// tm_program is tinymlir::Program; the C struct is never defined.
inline tinymlir::Program *ToProgram(tm_program *p) { return reinterpret_cast<tinymlir::Program *>(p); }
inline const tinymlir::Program *ToProgram(const tm_program *p) {
  return reinterpret_cast<const tinymlir::Program *>(p);
}
inline tm_program *ToHandle(tinymlir::Program *p) { return reinterpret_cast<tm_program *>(p); }

namespace tm_capi {

// Records the failure for tm_last_error and returns its code (TM_OK passes through).
tm_status Report(const tinymlir::Status &status);
tm_status Fail(tm_status code, const std::string &message);

// Runs `body` (returning tinymlir::Status), mapping C++ exceptions to statuses.
template <typename F>
tm_status Guard(F &&body) {
  try {
    return Report(body());
  } catch (const std::bad_alloc &) {
    return Fail(TM_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception &e) {
    return Fail(TM_ERROR_RUNTIME, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(TM_ERROR_RUNTIME, "internal error: unknown exception");
  }
}

}  // namespace tm_capi
