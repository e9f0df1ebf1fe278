#include "core/engine/device.h"

namespace tinymlir {

// Each in its own file (cpu_device.cpp, gpu_device.cpp).
const Device &CpuDeviceInstance();
const Device &GpuDeviceInstance();

const Device &DeviceOf(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: break;
    case DeviceKind::kGpu: return GpuDeviceInstance();
  }
  return CpuDeviceInstance();
}

const char *DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kGpu: return "gpu";
  }
  return "unknown";
}

}  // namespace tinymlir
