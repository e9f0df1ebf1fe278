// The GPT-2 library's error type: a tm_status plus a message naming what was wrong. This
// layer is a client of the public C API, so its codes are the C API's own; a failed C call
// becomes a Status through FromC (its tm_last_error message included).
#pragma once

#include <string>
#include <utility>

#include "tinymlir/tinymlir.h"

namespace tinymlir::gpt2 {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(tm_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == TM_OK; }
  tm_status code() const { return code_; }
  const std::string &message() const { return message_; }

 private:
  tm_status code_ = TM_OK;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {TM_ERROR_INVALID_ARGUMENT, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {TM_ERROR_OUT_OF_RANGE, std::move(m)}; }
inline Status Unsupported(std::string m) { return {TM_ERROR_UNSUPPORTED, std::move(m)}; }
inline Status IoError(std::string m) { return {TM_ERROR_IO, std::move(m)}; }
inline Status Busy(std::string m) { return {TM_ERROR_BUSY, std::move(m)}; }
inline Status RuntimeError(std::string m) { return {TM_ERROR_RUNTIME, std::move(m)}; }

// The result of a tinymlir C call, with the thread's last error as its message.
inline Status FromC(tm_status s) { return s == TM_OK ? Status() : Status(s, tm_last_error()); }

}  // namespace tinymlir::gpt2

// Returns early from the enclosing function when `expr` is a failed Status.
#define TM_RETURN_IF_ERROR(expr)                       \
  do {                                                 \
    ::tinymlir::gpt2::Status tm_status_tmp_ = (expr);  \
    if (!tm_status_tmp_.ok()) return tm_status_tmp_;   \
  } while (0)
