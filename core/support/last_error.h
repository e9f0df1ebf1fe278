// The calling thread's last error message (the C API's tm_last_error): set by the C shims
// of both libraries (capi/) and by the GPT-2 application (gpt2/), which live in the same
// library but share no other code, read by tm_last_error. Each library has its own.
#pragma once

#include <string>

namespace tinymlir {

// Replaces the calling thread's message. Never throws: out of memory leaves it empty (an
// empty message beats none at all).
void SetLastError(const std::string &message) noexcept;

// The calling thread's message ("" if none yet); valid until the thread's next SetLastError.
const char *LastError() noexcept;

}  // namespace tinymlir
