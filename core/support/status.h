// The error type of the C++ core: a tm_status code plus a message that names what was
// wrong. The C API turns a failed Status into its return value and tm_last_error().
#pragma once

#include <string>
#include <utility>

#include "tinymlir/tinymlir.h"

namespace tinymlir {

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
inline Status ShapeError(std::string m) { return {TM_ERROR_SHAPE, std::move(m)}; }
inline Status DtypeError(std::string m) { return {TM_ERROR_DTYPE, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {TM_ERROR_OUT_OF_RANGE, std::move(m)}; }
inline Status CompileError(std::string m) { return {TM_ERROR_COMPILE, std::move(m)}; }
inline Status RuntimeError(std::string m) { return {TM_ERROR_RUNTIME, std::move(m)}; }
inline Status Unsupported(std::string m) { return {TM_ERROR_UNSUPPORTED, std::move(m)}; }
inline Status IoError(std::string m) { return {TM_ERROR_IO, std::move(m)}; }

}  // namespace tinymlir

// Returns early from the enclosing function when `expr` is a failed Status.
#define TM_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::tinymlir::Status tm_status_tmp_ = (expr);   \
    if (!tm_status_tmp_.ok()) return tm_status_tmp_; \
  } while (0)
