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


const char *LastError() noexcept { return last_error.c_str(); }

}  // namespace tinymlir
