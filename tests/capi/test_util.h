// Shared helpers for the C API tests. Only the public header is used: these tests see the
// library exactly as a C caller does.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tinymlir/tinymlir.hpp"

namespace tmtest {

// RAII handles: the installed C++ wrapper's (tinymlir.hpp).
using Context = tinymlir::ContextHandle;
using Trace = tinymlir::TraceHandle;
using Program = tinymlir::ProgramHandle;

#define TM_ASSERT_OK(call)                                                             \
  do {                                                                                 \
    tm_status s_ = (call);                                                             \
    ASSERT_EQ(s_, TM_OK) << #call << " -> " << tm_status_string(s_) << ": "            \
                         << tm_last_error();                                           \
  } while (0)

// Asserts a failing call's status, and that it left a message behind.
#define TM_EXPECT_STATUS(call, status)                                                 \
  do {                                                                                 \
    tm_status s_ = (call);                                                             \
    EXPECT_EQ(s_, status) << #call << " -> " << tm_status_string(s_) << ": "           \
                          << tm_last_error();                                          \
    if (s_ != TM_OK) EXPECT_STRNE(tm_last_error(), "") << #call << " left no message"; \
  } while (0)

inline Context NewContext() {
  Context ctx;
  EXPECT_EQ(tm_context_create(ctx.out()), TM_OK) << tm_last_error();
  return ctx;
}

inline Trace NewTrace(tm_context *ctx, const char *name = "test") {
  Trace t;
  EXPECT_EQ(tm_trace_begin(ctx, name, t.out()), TM_OK) << tm_last_error();
  return t;
}

// ---- Tracing shorthands: a failed op records a test failure and yields a bad value ----

constexpr tm_value kBadValue = 0xffffffffu;

// Op(tm_op_add, trace, a, b) calls tm_op_add(trace, a, b, &out) and returns out.
template <typename F, typename... A>
tm_value Op(F fn, tm_trace *trace, A... args) {
  tm_value v = kBadValue;
  tm_status s = fn(trace, args..., &v);
  if (s != TM_OK) ADD_FAILURE() << "op failed: " << tm_status_string(s) << ": " << tm_last_error();
  return v;
}

inline tm_value Input(tm_trace *trace, tm_dtype dtype, const std::vector<int64_t> &shape) {
  return Op(tm_op_input, trace, dtype, static_cast<int32_t>(shape.size()), shape.data());
}

inline void End(tm_trace *trace, const std::vector<tm_value> &outputs) {
  tm_status s = tm_trace_end(trace, outputs.data(), static_cast<int32_t>(outputs.size()));
  if (s != TM_OK) ADD_FAILURE() << "tm_trace_end: " << tm_last_error();
}

inline tm_compile_options Options(int optimize = 1, int use_blas = 1, int opt_level = 3) {
  tm_compile_options o;
  tm_compile_options_init(&o);
  o.optimize = optimize;
  o.use_blas = use_blas;
  o.opt_level = opt_level;
  return o;
}

// ---- Host tensors -------------------------------------------------------------------------

template <typename T> constexpr tm_dtype DtypeOf();
template <> constexpr tm_dtype DtypeOf<float>() { return TM_F32; }
template <> constexpr tm_dtype DtypeOf<double>() { return TM_F64; }
template <> constexpr tm_dtype DtypeOf<int32_t>() { return TM_I32; }
template <> constexpr tm_dtype DtypeOf<int64_t>() { return TM_I64; }
template <> constexpr tm_dtype DtypeOf<uint8_t>() { return TM_BOOL; }  // one byte, 0 or 1

inline int64_t NumElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A C-contiguous host tensor that owns its data and shape; view() borrows both.
template <typename T>
struct Host {
  std::vector<int64_t> shape;
  std::vector<T> data;

  Host(std::vector<int64_t> s, std::vector<T> d) : shape(std::move(s)), data(std::move(d)) {
    EXPECT_EQ(static_cast<int64_t>(data.size()), NumElements(shape)) << "bad test data";
    data.resize(NumElements(shape));
  }
  Host(std::vector<int64_t> s, T fill) : shape(std::move(s)), data(NumElements(shape), fill) {}

  tm_tensor view(const int64_t *strides = nullptr) {
    return {data.data(), DtypeOf<T>(), static_cast<int32_t>(shape.size()), shape.data(),
            strides};
  }
  T &operator[](size_t i) { return data[i]; }
};

// A view of caller memory with an explicit shape/strides that must outlive the call.
template <typename T>
tm_tensor View(T *data, const std::vector<int64_t> &shape,
               const std::vector<int64_t> *strides = nullptr) {
  return {data, DtypeOf<T>(), static_cast<int32_t>(shape.size()), shape.data(),
          strides ? strides->data() : nullptr};
}
template <typename T>
tm_tensor View(T *, std::vector<int64_t> &&, const std::vector<int64_t> * = nullptr) = delete;

// ---- Files -------------------------------------------------------------------------------

inline std::string ReadFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void WriteFile(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// ---- Compile + invoke -------------------------------------------------------------------

// Compiles the (ended) trace in ctx and invokes it once. The program is handed to *keep
// when given (to read its IR or invoke it again), released otherwise.
inline tm_status CompileInvoke(tm_context *ctx, tm_trace *trace,
                               std::vector<tm_tensor> inputs, std::vector<tm_tensor> outputs,
                               const tm_compile_options *options = nullptr,
                               Program *keep = nullptr) {
  Program program;
  tm_status s = tm_compile(ctx, trace, options, program.out());
  if (s != TM_OK) return s;
  s = tm_invoke(program, inputs.data(), static_cast<int32_t>(inputs.size()), outputs.data(),
                static_cast<int32_t>(outputs.size()));
  if (keep) *keep = std::move(program);
  return s;
}

// ---- IR text ------------------------------------------------------------------------------

// The text of one stage ("" and a test failure when it cannot be had).
inline std::string StageText(tm_program *program, tm_stage stage) {
  char *text = nullptr;
  tm_status s = tm_program_ir(program, stage, &text);
  if (s != TM_OK) {
    ADD_FAILURE() << "tm_program_ir(" << stage << "): " << tm_last_error();
    return "";
  }
  std::string copy = text ? text : "";
  tm_free(text);
  return copy;
}

// Non-overlapping occurrences of needle in text.
inline int CountSubstr(const std::string &text, const std::string &needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

// ---- Numeric comparison -------------------------------------------------------------------

// |got - want| <= rel * |want| + abs, element by element; NaN must match NaN, and
// infinities must match exactly.
template <typename T>
::testing::AssertionResult AllClose(const std::vector<T> &got, const std::vector<double> &want,
                                    double rel, double abs = 0.0) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << " vs expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    double g = static_cast<double>(got[i]), w = want[i];
    bool ok = std::isnan(w)   ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::fabs(g - w) <= rel * std::fabs(w) + abs;
    if (!ok)
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g << ", expected " << w << " (rel " << rel
             << ", abs " << abs << ")";
  }
  return ::testing::AssertionSuccess();
}

// Deterministic pseudo-random values in [lo, hi) (an LCG: no dependence on <random>'s
// implementation-defined distributions).
inline std::vector<double> Pseudo(size_t n, double lo = -1.0, double hi = 1.0,
                                  uint32_t seed = 1) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double &x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return v;
}

template <typename T>
std::vector<T> Cast(const std::vector<double> &v) {
  return std::vector<T>(v.begin(), v.end());
}

// Reference values computed from the (rounded) inputs the kernel actually sees.
template <typename T>
std::vector<double> ToDouble(const std::vector<T> &v) {
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace tmtest
