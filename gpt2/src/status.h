// The GPT-2 application's errors are tinymlir's one Status (core/support/status.h). This
// layer is a client of the public C API, so it also speaks the C API's codes: a failed C call
// becomes a Status through FromC (its tm_last_error message included), and a code compares
// with a tm_status directly (the values are the same by construction).
#pragma once

#include "core/support/status.h"
#include "tinymlir/tinymlir.h"

namespace tinymlir {

inline bool operator==(StatusCode a, tm_status b) { return static_cast<int>(a) == static_cast<int>(b); }
inline bool operator!=(StatusCode a, tm_status b) { return !(a == b); }
inline bool operator==(tm_status a, StatusCode b) { return b == a; }
inline bool operator!=(tm_status a, StatusCode b) { return !(b == a); }

namespace gpt2 {

using ::tinymlir::Status;

// The result of a tinymlir C call, with the thread's last error as its message.
inline Status FromC(tm_status s) {
  return s == TM_OK ? Status() : Status(static_cast<StatusCode>(s), tm_last_error());
}

}  // namespace gpt2
}  // namespace tinymlir
