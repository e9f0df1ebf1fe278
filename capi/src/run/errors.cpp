// Errors, versions and library-owned memory.
#include "capi/src/run/errors.h"

#include <cstdlib>
#include <string>

#include "core/support/last_error.h"

namespace tm_capi {

tm_status Report(const tinymlir::Status &status, const char *fn) {
  if (status.ok()) return TM_OK;
  tinymlir::SetLastError(fn ? std::string(fn) + ": " + status.message() : status.message());
  return ToC(status.code());
}

tm_status Fail(tm_status code, const std::string &message) {
  tinymlir::SetLastError(message);
  return code;
}

}  // namespace tm_capi

extern "C" {

TM_API const char *tm_last_error(void) { return tinymlir::LastError(); }

TM_API const char *tm_status_string(tm_status status) {
  switch (status) {
    case TM_OK: return "TM_OK";
    case TM_ERROR_INVALID_ARGUMENT: return "TM_ERROR_INVALID_ARGUMENT";
    case TM_ERROR_SHAPE: return "TM_ERROR_SHAPE";
    case TM_ERROR_DTYPE: return "TM_ERROR_DTYPE";
    case TM_ERROR_OUT_OF_RANGE: return "TM_ERROR_OUT_OF_RANGE";
    case TM_ERROR_COMPILE: return "TM_ERROR_COMPILE";
    case TM_ERROR_RUNTIME: return "TM_ERROR_RUNTIME";
    case TM_ERROR_UNSUPPORTED: return "TM_ERROR_UNSUPPORTED";
    case TM_ERROR_IO: return "TM_ERROR_IO";
    case TM_ERROR_OUT_OF_MEMORY: return "TM_ERROR_OUT_OF_MEMORY";
    case TM_ERROR_BUSY: return "TM_ERROR_BUSY";
  }
  return "TM_ERROR_UNKNOWN";
}

TM_API const char *tm_version(void) { return TM_VERSION_STRING; }

TM_API uint32_t tm_api_version(void) { return TM_API_VERSION; }

TM_API void tm_free(void *ptr) { std::free(ptr); }

}  // extern "C"
