// Versioned structs (the C API's options and info structs): the first field is
// `uint32_t struct_size`, which the caller sets to the size of the layout its header has.
// The library reads and writes exactly that much, never its own size: an application built
// against an older header has a smaller struct, and the bytes behind it are its own.
// One reader and one writer, for every such struct of both C libraries (capi/, gpt2/).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/support/status.h"

namespace tinymlir {

// Reads a caller's options struct of type T into *out, which holds the defaults. Any
// struct_size from the first published layout up to `max_size` is accepted: fields an
// older caller lacks keep their defaults; a newer caller's extra bytes must be zero (their
// defaults), as Linux's copy_struct_from_user does. NULL keeps the defaults. `fn` names the
// C function in messages.
template <typename T>
Status ReadVersionedStruct(const char *fn, const T *in, size_t first_layout, size_t max_size,
                           T *out) {
  if (!in) return Status::Ok();
  const size_t size = in->struct_size;
  if (size < first_layout)
    return InvalidArgument(std::string(fn) + ": options.struct_size is " +
                           std::to_string(size) + ", smaller than the first published layout (" +
                           std::to_string(first_layout) +
                           " bytes); fill the options with their *_options_init function");
  if (size > max_size)
    return InvalidArgument(std::string(fn) + ": options.struct_size is " +
                           std::to_string(size) +
                           ", larger than any version of these options (TM_OPTIONS_MAX_STRUCT_SIZE, " +
                           std::to_string(max_size) +
                           " bytes); fill the options with their *_options_init function");
  const auto *bytes = reinterpret_cast<const unsigned char *>(in);
  for (size_t i = sizeof(T); i < size; ++i)
    if (bytes[i] != 0)
      return Unsupported(std::string(fn) + ": the options come from a newer header (struct_size " +
                         std::to_string(size) + ", this library knows " +
                         std::to_string(sizeof(T)) +
                         " bytes) and set a field this library does not have (byte " +
                         std::to_string(i) + ")");
  std::memcpy(out, in, std::min(size, sizeof(T)));
  out->struct_size = sizeof(T);
  return Status::Ok();
}

// Writes `value` (a complete struct of this library's layout) into the caller's struct,
// whose struct_size says how many bytes it has: at least `first_layout`, and never more
// than that many bytes are written (a newer, larger caller struct keeps its extra bytes,
// which this library does not know). `what` names the struct in messages.
template <typename T>
Status WriteVersionedStruct(const char *fn, const char *what, const T &value,
                            size_t first_layout, T *out) {
  if (!out) return InvalidArgument(std::string(fn) + ": " + what + " is NULL");
  const size_t size = out->struct_size;
  if (size < first_layout)
    return InvalidArgument(std::string(fn) + ": " + what + "->struct_size is " +
                           std::to_string(size) + ", smaller than the first published layout (" +
                           std::to_string(first_layout) + " bytes); set it to sizeof(*" + what +
                           ")");
  const uint32_t keep = out->struct_size;
  std::memcpy(out, &value, std::min(size, sizeof(T)));
  out->struct_size = keep;
  return Status::Ok();
}

// Fills the first `size` bytes of a caller's options struct with `defaults` (this library's
// layout, defaults filled in): bytes beyond this library's layout, a newer header's fields,
// are zeroed (their defaults); struct_size becomes `size`. Nothing beyond `size` is written,
// and nothing at all when `size` is outside [first_layout, max_size].
template <typename T>
Status InitVersionedStruct(const char *fn, const T &defaults, size_t first_layout,
                           size_t max_size, T *out, size_t size) {
  if (!out) return InvalidArgument(std::string(fn) + ": options is NULL");
  if (size < first_layout || size > max_size)
    return InvalidArgument(std::string(fn) + ": struct_size " + std::to_string(size) +
                           " is not the size of a layout of these options (" +
                           std::to_string(first_layout) + " to " + std::to_string(max_size) +
                           " bytes); pass sizeof the struct");
  auto *bytes = reinterpret_cast<unsigned char *>(out);
  std::memcpy(bytes, &defaults, std::min(size, sizeof(T)));
  if (size > sizeof(T)) std::memset(bytes + sizeof(T), 0, size - sizeof(T));
  out->struct_size = static_cast<uint32_t>(size);
  return Status::Ok();
}

}  // namespace tinymlir
