// tinymlir.hpp — a header-only C++ convenience layer over the C API (<tinymlir/tinymlir.h>):
// RAII handles and a tracer (<tinymlir/gpt2.hpp> adds the model's handle). It adds no behaviour: every call is
// the C call it wraps, with the same ownership and error rules; nothing here throws.
//
//   tinymlir::ContextHandle ctx;
//   tm_context_create(ctx.out());
//   tinymlir::Tracer tr(ctx, "affine");
//   tm_value x = tr.input(TM_F32, {2, 4}), b = tr.input(TM_F32, {4});
//   tr.end({tr.mul(tr.add(x, b), tr.scalar(0.5))});
//   tinymlir::ProgramHandle program;
//   if (tr.compile(ctx, nullptr, &program) != TM_OK) puts(tr.error().c_str());
#ifndef TINYMLIR_TINYMLIR_HPP
#define TINYMLIR_TINYMLIR_HPP

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tinymlir/ops.hpp"
#include "tinymlir/tinymlir.h"

namespace tinymlir {

// Owns one reference to a C object and drops it with `Release` (which accepts NULL).
template <typename T, void (*Release)(T *)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T *p) : p_(p) {}
  Handle(Handle &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Handle &operator=(Handle &&o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  ~Handle() { Release(p_); }

  T *get() const { return p_; }
  operator T *() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  // Releases what is held and returns the slot for a C function's out parameter.
  T **out() {
    reset();
    return &p_;
  }
  T *release() { return std::exchange(p_, nullptr); }
  void reset() { Release(std::exchange(p_, nullptr)); }

 private:
  T *p_ = nullptr;
};

using ContextHandle = Handle<tm_context, tm_context_release>;

// A stage's text (tm_program_ir_text, asked for its size, then for the text).
inline tm_status ProgramIr(tm_program *program, tm_stage stage, std::string *out) {
  size_t n = 0;
  if (tm_status s = tm_program_ir_text(program, stage, nullptr, 0, &n); s != TM_OK) return s;
  std::string text(n + 1, '\0');
  if (tm_status s = tm_program_ir_text(program, stage, &text[0], text.size(), &n); s != TM_OK)
    return s;
  text.resize(n);
  *out = std::move(text);
  return TM_OK;
}
using TraceHandle = Handle<tm_trace, tm_trace_destroy>;
using ProgramHandle = Handle<tm_program, tm_program_release>;

// Records a trace op by op. The first failing call is remembered (status() and error(),
// the tm_last_error message of that moment); later calls are skipped and return 0, so a
// whole program can be written without checking each op, then checked once. Every op of
// the table is a method (<tinymlir/ops.hpp>, made from the ops' signatures: tr.add(a, b),
// tr.reduce_sum(x, -1), tr.slice(x, {0, 1}, {2, 3}), ...), and op() records any by kind.
class Tracer : public OpMethods<Tracer> {
 public:
  Tracer(tm_context *ctx, const char *name) { Check(tm_trace_begin(ctx, name, trace_.out())); }

  bool ok() const { return status_ == TM_OK; }
  tm_status status() const { return status_; }
  const std::string &error() const { return error_; }
  tm_trace *get() const { return trace_.get(); }

  tm_value input(tm_dtype dtype, const std::vector<int64_t> &shape) {
    return Op([&](tm_value *v) {
      return tm_op_input(trace_, dtype, static_cast<int32_t>(shape.size()), shape.data(), v);
    });
  }
  tm_value scalar(double value, tm_dtype dtype = TM_F32) {
    return Op([&](tm_value *v) { return tm_op_scalar(trace_, dtype, value, v); });
  }
  tm_value constant(const tm_tensor &data) {
    return Op([&](tm_value *v) { return tm_op_constant(trace_, &data, v); });
  }

  // Any op of the table by kind (tm_op): its values, its int, bool and dtype attributes then
  // its lists, and its real attribute.
  tm_value op(tm_op_kind kind, const std::vector<tm_value> &operands,
              const std::vector<int64_t> &ints = {}, double real = 0.0) {
    return Op([&](tm_value *v) {
      return tm_op(trace_, kind, operands.data(), static_cast<int32_t>(operands.size()),
                   ints.data(), static_cast<int32_t>(ints.size()), real, v);
    });
  }

  tm_value neg(tm_value x) { return unary(TM_UNARY_NEG, x); }
  tm_value exp(tm_value x) { return unary(TM_UNARY_EXP, x); }
  tm_value log(tm_value x) { return unary(TM_UNARY_LOG, x); }
  tm_value tanh(tm_value x) { return unary(TM_UNARY_TANH, x); }
  tm_value sqrt(tm_value x) { return unary(TM_UNARY_SQRT, x); }
  tm_value rsqrt(tm_value x) { return unary(TM_UNARY_RSQRT, x); }
  tm_value erf(tm_value x) { return unary(TM_UNARY_ERF, x); }
  tm_value abs(tm_value x) { return unary(TM_UNARY_ABS, x); }
  // Any unary op by kind (TM_UNARY_SIGMOID, ...): tm_op_unary.
  tm_value unary(tm_unary_op op, tm_value x) {
    return Op([&](tm_value *v) { return tm_op_unary(trace_, op, x, v); });
  }

  // Ends the trace with these outputs.
  tm_status end(const std::vector<tm_value> &outputs) {
    if (ok()) Check(tm_trace_end(trace_, outputs.data(), static_cast<int32_t>(outputs.size())));
    return status_;
  }

  // Compiles the ended trace (options may be NULL); the first failure so far, if any, is
  // returned instead.
  tm_status compile(tm_context *ctx, const tm_compile_options *options, ProgramHandle *out) {
    if (ok()) Check(tm_compile(ctx, trace_, options, out->out()));
    return status_;
  }

  // Remembers a failure found before any C call (OpMethods: lists of unequal length), as
  // TM_ERROR_INVALID_ARGUMENT; returns 0 for the value.
  tm_value Refuse(const char *message) {
    Fail(TM_ERROR_INVALID_ARGUMENT, message);
    return 0;
  }

 private:
  void Check(tm_status s) {
    if (s != TM_OK) Fail(s, tm_last_error());
  }
  void Fail(tm_status s, const char *message) {
    if (!ok()) return;
    status_ = s;
    error_ = message;
  }
  template <typename F>
  tm_value Op(F &&record) {
    tm_value v = 0;
    if (ok()) Check(record(&v));
    return ok() ? v : 0;
  }

  TraceHandle trace_;
  tm_status status_ = TM_OK;
  std::string error_;
};

}  // namespace tinymlir

#endif  // TINYMLIR_TINYMLIR_HPP
