#include "core/engine/device_buffers.h"

#include <atomic>
#include <iterator>
#include <map>
#include <mutex>

#include "core/engine/targets.h"
#include "core/runtime/device.h"
#include "core/support/fork_safe_mutex.h"
#include "core/support/fork_safe_once.h"

namespace tinymlir {
namespace {

struct Buffers {
  ForkSafeMutex mutex;
  std::map<uintptr_t, DeviceBuffer> by_start;
  std::atomic<size_t> count{0};
};

// Never destroyed: a buffer may be freed from a global destructor at exit.
ForkSafeOnce<Buffers *> buffers;

Buffers &All() {
  return *buffers.Get([] { return new Buffers; });
}

// Checks that [offset, offset + bytes) lies within `buffer`.
Status CheckRange(const char *which, const DeviceBuffer &buffer,
                  uint64_t offset, uint64_t bytes) {
  if (offset <= buffer.bytes && bytes <= buffer.bytes - offset) return Status::Ok();
  return OutOfRange("bytes [" + std::to_string(offset) + ", " +
                    std::to_string(offset) + " + " + std::to_string(bytes) + ") of " + which +
                    " lie outside it: the buffer has " + std::to_string(buffer.bytes) + " bytes");
}

}  // namespace

Status CreateDeviceBuffer(TargetKind target, uint64_t bytes, DeviceBuffer *out) {
  *out = {};
  const Device &device = TargetOf(target).BufferDevice();
  void *data = nullptr;
  TM_RETURN_IF_ERROR(device.AllocateBuffer(bytes, &data));
  const DeviceBuffer buffer{&device, static_cast<uint8_t *>(data), bytes};
  Buffers &all = All();
  try {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    all.by_start.emplace(reinterpret_cast<uintptr_t>(data), buffer);
    all.count.store(all.by_start.size(), std::memory_order_release);
  } catch (const std::bad_alloc &) {
    device.FreeBuffer(data);
    return OutOfMemory("no host memory to record a device buffer");
  }
  *out = buffer;
  return Status::Ok();
}

void DestroyDeviceBuffer(const DeviceBuffer &buffer) {
  if (!buffer.data) return;
  Buffers &all = All();
  {
    std::lock_guard<ForkSafeMutex> lock(all.mutex);
    all.by_start.erase(reinterpret_cast<uintptr_t>(buffer.data));
    all.count.store(all.by_start.size(), std::memory_order_release);
  }
  buffer.device->FreeBuffer(buffer.data);
}

Status WriteDeviceBuffer(const DeviceBuffer &dst, uint64_t offset,
                         const void *src, uint64_t bytes) {
  TM_RETURN_IF_ERROR(CheckRange("the buffer", dst, offset, bytes));
  return dst.device->WriteBuffer(dst.data + offset, src, bytes);
}

Status ReadDeviceBuffer(const DeviceBuffer &src, uint64_t offset, void *dst,
                        uint64_t bytes) {
  TM_RETURN_IF_ERROR(CheckRange("the buffer", src, offset, bytes));
  return src.device->ReadBuffer(dst, src.data + offset, bytes);
}

Status CopyDeviceBuffer(const DeviceBuffer &dst, uint64_t dst_offset,
                        const DeviceBuffer &src, uint64_t src_offset, uint64_t bytes) {
  TM_RETURN_IF_ERROR(CheckRange("dst", dst, dst_offset, bytes));
  TM_RETURN_IF_ERROR(CheckRange("src", src, src_offset, bytes));
  if (dst.device != src.device)
    return InvalidArgument(std::string("dst is on the ") + dst.device->name() +
                           " device and src on the " + src.device->name() +
                           " device; copy through host memory (tm_device_buffer_read, then "
                           "tm_device_buffer_write)");
  if (dst.data == src.data && bytes > 0 && dst_offset < src_offset + bytes &&
      src_offset < dst_offset + bytes)
    return InvalidArgument("the ranges overlap (bytes " +
                           std::to_string(src_offset) + " and " + std::to_string(dst_offset) +
                           ", " + std::to_string(bytes) + " long, of one buffer)");
  return dst.device->CopyBuffer(dst.data + dst_offset, src.data + src_offset, bytes);
}

Status FillDeviceBuffer(const DeviceBuffer &dst, uint64_t offset, uint8_t value,
                        uint64_t bytes) {
  TM_RETURN_IF_ERROR(CheckRange("the buffer", dst, offset, bytes));
  return dst.device->FillBuffer(dst.data + offset, value, bytes);
}

Status FindDeviceBuffer(const void *p, uint64_t bytes, bool *in, DeviceBuffer *found) {
  *in = false;
  Buffers &all = All();
  if (all.count.load(std::memory_order_acquire) == 0 || !p) return Status::Ok();
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<ForkSafeMutex> lock(all.mutex);
  auto after = all.by_start.upper_bound(at);
  if (after == all.by_start.begin()) return Status::Ok();
  const DeviceBuffer &buffer = std::prev(after)->second;
  const uint64_t offset = at - reinterpret_cast<uintptr_t>(buffer.data);
  if (offset >= buffer.bytes && !(offset == buffer.bytes && bytes == 0)) return Status::Ok();
  if (bytes > buffer.bytes - offset)
    return OutOfRange("its " + std::to_string(bytes) + " bytes start at byte " +
                      std::to_string(offset) + " of a device buffer of " +
                      std::to_string(buffer.bytes) + " bytes and run past its end");
  *in = true;
  *found = buffer;
  return Status::Ok();
}

}  // namespace tinymlir
