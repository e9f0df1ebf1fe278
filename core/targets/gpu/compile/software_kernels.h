// The kernels' CPU bodies, for the software CUDA device (core/targets/gpu/run/software_device):
// with the gpu_cpu_bodies option (TINYMLIR_CUDA_DRIVER=software), each outlined kernel is also
// compiled for the host, so that the program's host code, launches and driver calls run
// unchanged and only the kernels run on the CPU.
//
//   1. AddCpuKernelBodies, after outlining: for each gpu.func, a host function taking the
//      kernel's arguments and the launch's grid and block sizes, whose body is a gpu.launch
//      holding a copy of the kernel's, which the emulation then turns into host loops
//      (gpu_emulation.h, without the race check: a body must never unwind), its buffers on the
//      stack. Functions the kernel calls are copied to the host.
//   2. AddCpuKernelRegistration, after the lowering to LLVM (the modules are gpu.binary ops
//      holding their PTX): for each body, an entry with the software device's signature
//      (KernelBody: the launch's parameter array, grid, block, shared bytes) that loads each
//      parameter as the kernel's lowered signature has it; and a constructor that registers
//      every entry under its module image's FNV-1a hash and size before the modules are
//      loaded (tm_rt_gpu_software_register_kernel), with a destructor that withdraws them.
#pragma once

#include <string>
#include <vector>

#include "core/support/status.h"

namespace mlir {
class ModuleOp;
}

namespace tinymlir {

struct CpuKernelBody {
  std::string gpu_module;  // the kernel's gpu.module (and so its gpu.binary)
  std::string kernel;      // the gpu.func's name
  std::string function;    // the host function running it
};

Status AddCpuKernelBodies(mlir::ModuleOp module, std::vector<CpuKernelBody> *bodies);
Status AddCpuKernelRegistration(mlir::ModuleOp module, const std::vector<CpuKernelBody> &bodies);

}  // namespace tinymlir
