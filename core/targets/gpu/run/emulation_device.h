// The GPU target's second device: the host, running a GPU program whose kernels the
// compiler turned into host loops (TINYMLIR_GPU_EMULATE, core/targets/gpu/compile/
// gpu_emulation.h), on the caller's buffers (a HostDevice). Its symbol table adds the race
// check's functions (emulation_functions.def) to the host's.
#pragma once

#include "core/runtime/host_device.h"

namespace tinymlir {

class GpuEmulationDevice final : public HostDevice {
 public:
  constexpr GpuEmulationDevice() = default;
  const char *name() const override { return "gpu-emulation"; }
  const SymbolTable &symbols() const override;
};

extern const GpuEmulationDevice kGpuEmulationDevice;

}  // namespace tinymlir
