#include "core/runtime/host_device.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/runtime/guarded_call.h"

namespace tinymlir {

Status HostDevice::Stage(uint64_t temporary_bytes, CallBuffer *, size_t, CallBuffer *, size_t,
                         std::unique_ptr<DeviceCall> *) const {
  // What malloc would refuse inside the code is refused here, before it runs.
  if (temporary_bytes > PhysicalMemoryBytes())
    return OutOfMemory("the program needs " + std::to_string(temporary_bytes) +
                       " bytes of temporary memory, more than this machine's " +
                       std::to_string(PhysicalMemoryBytes()));
  return Status::Ok();
}

Status HostDevice::Launch(Entry entry, void **args) const { return CallGuarded(entry, args); }

Status HostDevice::Finish(DeviceCall *, const CallBuffer *, size_t) const { return Status::Ok(); }

Status HostDevice::Allocate(uint64_t bytes, void **out) const {
  const uint64_t rounded = (bytes + 63) / 64 * 64;
  *out = bytes == 0 ? nullptr : std::aligned_alloc(64, rounded);
  if (bytes != 0 && !*out) return OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes");
  return Status::Ok();
}

void HostDevice::Free(void *block) const { std::free(block); }

Status HostDevice::Prefetch(const void *, uint64_t) const { return Status::Ok(); }

// The host runs a call before Invoke returns, so a buffer's functions act at once.
Status HostDevice::AllocateBuffer(uint64_t bytes, void **out) const {
  *out = nullptr;
  if (bytes > PhysicalMemoryBytes())
    return OutOfMemory(std::to_string(bytes) + " bytes of memory were asked for, more than this "
                       "machine's " + std::to_string(PhysicalMemoryBytes()));
  TM_RETURN_IF_ERROR(Allocate(bytes, out));
  if (*out) std::memset(*out, 0, bytes);
  return Status::Ok();
}

void HostDevice::FreeBuffer(void *buffer) const { Free(buffer); }

Status HostDevice::WriteBuffer(void *dst, const void *host_src, uint64_t bytes) const {
  if (bytes) std::memcpy(dst, host_src, bytes);
  return Status::Ok();
}

Status HostDevice::ReadBuffer(void *host_dst, const void *src, uint64_t bytes) const {
  if (bytes) std::memcpy(host_dst, src, bytes);
  return Status::Ok();
}

Status HostDevice::CopyBuffer(void *dst, const void *src, uint64_t bytes) const {
  if (bytes) std::memmove(dst, src, bytes);
  return Status::Ok();
}

Status HostDevice::FillBuffer(void *dst, uint8_t value, uint64_t bytes) const {
  if (bytes) std::memset(dst, value, bytes);
  return Status::Ok();
}

}  // namespace tinymlir
