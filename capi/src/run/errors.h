// Failure reporting of the shims: a failed status becomes the C return value plus the
// calling thread's tm_last_error() message; C++ exceptions never leave the library.
#pragma once

#include <new>
#include <string>

#include "capi/src/run/convert.h"

namespace tm_capi {

// Records the failure for tm_last_error and returns its code (TM_OK passes through).
// With `fn`, the message is prefixed by the C function's name.
tm_status Report(const tinymlir::Status &status, const char *fn = nullptr);
tm_status Fail(tm_status code, const std::string &message);

// Runs `body` (returning tinymlir::Status), mapping C++ exceptions to statuses. With `fn`,
// messages from the core are prefixed by the C function's name.
template <typename F>
tm_status Guard(const char *fn, F &&body) {
  try {
    return Report(body(), fn);
  } catch (const std::bad_alloc &) {
    return Fail(TM_ERROR_OUT_OF_MEMORY, std::string(fn ? fn : "tinymlir") + ": out of memory");
  } catch (const std::exception &e) {
    return Fail(TM_ERROR_RUNTIME, std::string(fn ? fn : "tinymlir") + ": internal error: " + e.what());
  } catch (...) {
    return Fail(TM_ERROR_RUNTIME, std::string(fn ? fn : "tinymlir") + ": internal error");
  }
}

}  // namespace tm_capi
