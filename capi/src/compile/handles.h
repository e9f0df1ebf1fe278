// The C handles, one scheme for every object: each tm_* struct is defined here and holds
// (or shares) the core object it stands for. The shims in this folder are the only code
// that converts between C and C++.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "capi/src/run/program_handle.h"
#include "core/driver/program_cache.h"
#include "core/trace/trace.h"
#include "tinymlir/tinymlir.h"

// Reference-counted: models built on a context keep it alive (tm_context_retain).
struct tm_context {
  std::atomic<int> refs{1};
  tinymlir::ProgramCache cache;
};

// `tag` (1..4095, from a process-wide counter) is part of every tm_value this trace hands
// out, so a value from another trace is refused rather than read as one of this trace's.
struct tm_trace {
  explicit tm_trace(std::string name) : trace(std::move(name)), tag(NextTag()) {}
  tinymlir::Trace trace;
  const uint32_t tag;

 private:
  static uint32_t NextTag() {
    static std::atomic<uint32_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) % 4095 + 1;
  }
};

// tm_program: capi/src/run/program_handle.h (the runtime library has it too).
