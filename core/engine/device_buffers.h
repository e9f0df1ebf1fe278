// Device buffers (tm_device_buffer): memory on a target's buffer device
// (Target::BufferDevice) that programs read and write in place. The engine keeps every live
// buffer by address, so that Invoke can tell where a tensor lies: a tensor in a buffer the
// host cannot read must be for a program on that buffer's device, lie wholly inside the
// buffer, and need no host work (no strided or aliased copy, no index or bool check on the
// host); anything else is refused with a message naming the tensor, before the call.
//
// The functions that move bytes check ranges against the buffer and leave the rest to the
// device, which orders them with the calls (core/runtime/device.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/contract/target.h"
#include "core/support/status.h"

namespace tinymlir {

class Device;

struct DeviceBuffer {
  const Device *device = nullptr;
  uint8_t *data = nullptr;
  uint64_t bytes = 0;
};

// `bytes` (> 0) zero bytes on `target`'s buffer device, recorded.
Status CreateDeviceBuffer(TargetKind target, uint64_t bytes, DeviceBuffer *out);
// Forgets and frees a buffer (after the work asked of it).
void DestroyDeviceBuffer(const DeviceBuffer &buffer);

// Host bytes into, out of (waiting for the work before), within and between buffers, and a
// fill. Offsets and sizes are checked here.
Status WriteDeviceBuffer(const DeviceBuffer &dst, uint64_t offset,
                         const void *src, uint64_t bytes);
Status ReadDeviceBuffer(const DeviceBuffer &src, uint64_t offset, void *dst,
                        uint64_t bytes);
Status CopyDeviceBuffer(const DeviceBuffer &dst, uint64_t dst_offset,
                        const DeviceBuffer &src, uint64_t src_offset, uint64_t bytes);
Status FillDeviceBuffer(const DeviceBuffer &dst, uint64_t offset, uint8_t value,
                        uint64_t bytes);

// Where [p, p + bytes) lies: in no buffer (*in = false), or inside `*found` (*in = true).
// Fails when the range starts inside a buffer and runs past its end. Cheap when there are
// no buffers (one atomic load).
Status FindDeviceBuffer(const void *p, uint64_t bytes, bool *in, DeviceBuffer *found);

}  // namespace tinymlir
