// tm_device_buffer_*: the C face of the engine's device buffers (core/engine/device_buffers.h).
// Built into both libtinymlir.so and libtinymlir_runtime.so.
#include <memory>
#include <string>

#include "capi/src/run/errors.h"
#include "core/engine/device_buffers.h"
#include "core/engine/targets.h"

struct tm_device_buffer {
  tinymlir::DeviceBuffer buffer;
  tm_target target;
};

using tm_capi::Fail;
using tm_capi::Guard;

namespace {

tm_status NullBuffer(const char *fn, const char *which) {
  return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + which + " is NULL");
}

tm_status NullHost(const char *fn, const char *which, size_t bytes) {
  return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + which + " is NULL but bytes is " +
                                             std::to_string(bytes));
}

}  // namespace

extern "C" {

TM_API tm_status tm_device_buffer_create(tm_target target, size_t bytes,
                                         tm_device_buffer **out) {
  constexpr const char *fn = "tm_device_buffer_create";
  if (!out) return NullBuffer(fn, "out");
  *out = nullptr;
  if (!tinymlir::IsTargetKind(target))
    return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": no target " +
                                               std::to_string(static_cast<int>(target)) +
                                               " in this library");
  if (bytes == 0) return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": bytes is 0");
  return Guard(fn, [&] {
    auto handle = std::make_unique<tm_device_buffer>();
    handle->target = target;
    TM_RETURN_IF_ERROR(tinymlir::CreateDeviceBuffer(static_cast<tinymlir::TargetKind>(target),
                                                    bytes, &handle->buffer));
    *out = handle.release();
    return tinymlir::Status::Ok();
  });
}

TM_API void tm_device_buffer_destroy(tm_device_buffer *buffer) {
  if (!buffer) return;
  tinymlir::DestroyDeviceBuffer(buffer->buffer);
  delete buffer;
}

TM_API void *tm_device_buffer_data(const tm_device_buffer *buffer) {
  return buffer ? buffer->buffer.data : nullptr;
}

TM_API size_t tm_device_buffer_size(const tm_device_buffer *buffer) {
  return buffer ? static_cast<size_t>(buffer->buffer.bytes) : 0;
}

TM_API tm_target tm_device_buffer_target(const tm_device_buffer *buffer) {
  return buffer ? buffer->target : TM_TARGET_CPU;
}

TM_API tm_status tm_device_buffer_write(tm_device_buffer *buffer, size_t offset, const void *src,
                                        size_t bytes) {
  constexpr const char *fn = "tm_device_buffer_write";
  if (!buffer) return NullBuffer(fn, "buffer");
  if (!src && bytes > 0) return NullHost(fn, "src", bytes);
  return Guard(fn, [&] { return tinymlir::WriteDeviceBuffer(buffer->buffer, offset, src, bytes); });
}

TM_API tm_status tm_device_buffer_read(const tm_device_buffer *buffer, size_t offset, void *dst,
                                       size_t bytes) {
  constexpr const char *fn = "tm_device_buffer_read";
  if (!buffer) return NullBuffer(fn, "buffer");
  if (!dst && bytes > 0) return NullHost(fn, "dst", bytes);
  return Guard(fn, [&] { return tinymlir::ReadDeviceBuffer(buffer->buffer, offset, dst, bytes); });
}

TM_API tm_status tm_device_buffer_copy(tm_device_buffer *dst, size_t dst_offset,
                                       const tm_device_buffer *src, size_t src_offset,
                                       size_t bytes) {
  constexpr const char *fn = "tm_device_buffer_copy";
  if (!dst) return NullBuffer(fn, "dst");
  if (!src) return NullBuffer(fn, "src");
  return Guard(fn, [&] {
    return tinymlir::CopyDeviceBuffer(dst->buffer, dst_offset, src->buffer, src_offset, bytes);
  });
}

TM_API tm_status tm_device_buffer_fill(tm_device_buffer *buffer, size_t offset, uint8_t value,
                                       size_t bytes) {
  constexpr const char *fn = "tm_device_buffer_fill";
  if (!buffer) return NullBuffer(fn, "buffer");
  return Guard(fn, [&] { return tinymlir::FillDeviceBuffer(buffer->buffer, offset, value, bytes); });
}

}  // extern "C"
