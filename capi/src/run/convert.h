// C <-> C++ conversions of the shims: statuses, dtypes, targets, stages, tensors, and the
// versioned options structs. Enum values are equal on both sides (checked below); values
// from C are range-checked before the cast.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include "core/engine/program.h"
#include "core/support/status.h"
#include "core/support/versioned_struct.h"
#include "core/contract/compile_options.h"
#include "core/trace/dtype.h"
#include "tinymlir/tinymlir.h"

namespace tm_capi {

static_assert(static_cast<int>(tinymlir::StatusCode::kBusy) == TM_ERROR_BUSY);
static_assert(static_cast<int>(tinymlir::StatusCode::kOutOfMemory) == TM_ERROR_OUT_OF_MEMORY);
static_assert(static_cast<int>(tinymlir::DType::kBool) == TM_BOOL);
static_assert(static_cast<int>(tinymlir::DType::kF32) == TM_F32);
static_assert(static_cast<int>(tinymlir::DType::kBF16) == TM_BF16);
#define TM_TARGET(Name, C_ENUMERATOR, c_value, name)                       \
  static_assert(static_cast<int>(tinymlir::TargetKind::k##Name) == C_ENUMERATOR, \
                "tinymlir.h's " #C_ENUMERATOR " differs from core/contract/targets.def");
#include "core/contract/targets.def"
#undef TM_TARGET
static_assert(static_cast<int>(tinymlir::Stage::kAssembly) == TM_STAGE_ASSEMBLY);
static_assert(sizeof(tm_tensor) == sizeof(tinymlir::TensorView));

inline tm_status ToC(tinymlir::StatusCode code) { return static_cast<tm_status>(code); }
inline tm_dtype ToC(tinymlir::DType d) { return static_cast<tm_dtype>(d); }

// Unknown dtypes stay unknown values: the core checks and names them.
inline tinymlir::DType ToCore(tm_dtype d) { return static_cast<tinymlir::DType>(d); }
inline tinymlir::Stage ToCore(tm_stage s) { return static_cast<tinymlir::Stage>(s); }

inline tinymlir::TensorView ToCore(const tm_tensor &t) {
  return {t.data, ToCore(t.dtype), t.rank, t.shape, t.strides};
}

// Reads a caller's versioned options struct (core/support/versioned_struct.h).
template <typename T>
tinymlir::Status ReadOptions(const char *fn, const T *in, size_t first_layout, T *out) {
  return tinymlir::ReadVersionedStruct(fn, in, first_layout, TM_OPTIONS_MAX_STRUCT_SIZE, out);
}

// Text back to the caller, the C API's one way (snprintf-style): *len = the bytes `text`
// needs without the NUL; min(capacity, *len + 1) bytes, NUL-terminated, written to buf.
inline tinymlir::Status CheckTextBuffer(const char *fn, const char *buf, size_t capacity,
                                        const size_t *len) {
  if (!len) return tinymlir::InvalidArgument(std::string(fn) + ": len is NULL");
  if (!buf && capacity > 0)
    return tinymlir::InvalidArgument(std::string(fn) + ": buf is NULL with capacity " +
                                     std::to_string(capacity));
  return tinymlir::Status::Ok();
}
inline void CopyText(const std::string &text, char *buf, size_t capacity, size_t *len) {
  *len = text.size();
  if (capacity == 0) return;
  const size_t n = std::min(capacity - 1, text.size());
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

// Reads tm_compile_options into the core's CompileOptions (range checks in the core).
tinymlir::Status ReadCompileOptions(const tm_compile_options *in, tinymlir::CompileOptions *out);

}  // namespace tm_capi
