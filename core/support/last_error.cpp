#include "core/support/last_error.h"

namespace tinymlir {
namespace {
thread_local std::string last_error;
}

void SetLastError(const std::string &message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    last_error.clear();
  }
}

void SetLastError(const char *message) noexcept { SetLastError(std::string(message ? message : "")); }

const char *LastError() noexcept { return last_error.c_str(); }

}  // namespace tinymlir
