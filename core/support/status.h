// The one error type of tinymlir's C++ (core, the C shims in capi/, the GPT-2 application
// in gpt2/): a code plus a message that names what was wrong. Messages describe the
// problem, not the caller's entry point: a front end (the C API in capi/) adds the name of
// the function the user called.
#pragma once

#include <string>
#include <utility>

namespace tinymlir {

// The kinds of failure. The values equal the C API's tm_status codes, so capi/ converts
// with a cast; core itself never depends on that header.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kShape = 2,
  kDtype = 3,
  kOutOfRange = 4,
  kCompile = 5,
  kRuntime = 6,
  kUnsupported = 7,
  kIo = 8,
  kOutOfMemory = 9,
  kBusy = 10,
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status ShapeError(std::string m) { return {StatusCode::kShape, std::move(m)}; }
inline Status DtypeError(std::string m) { return {StatusCode::kDtype, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status CompileError(std::string m) { return {StatusCode::kCompile, std::move(m)}; }
inline Status RuntimeError(std::string m) { return {StatusCode::kRuntime, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status OutOfMemory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }
inline Status Busy(std::string m) { return {StatusCode::kBusy, std::move(m)}; }

}  // namespace tinymlir

// Returns early from the enclosing function when `expr` is a failed Status.
#define TM_RETURN_IF_ERROR(expr)                       \
  do {                                                 \
    ::tinymlir::Status tm_status_tmp_ = (expr);        \
    if (!tm_status_tmp_.ok()) return tm_status_tmp_;   \
  } while (0)
