// The software CUDA device: a CUDA driver implemented on the CPU, chosen with
// TINYMLIR_CUDA_DRIVER=software (cuda_driver.h), so the GPU target's host code, runtime and
// driver calls run unchanged on a machine without a GPU, and break where hardware would:
//   - device memory is apart from host memory and inaccessible to the host
//     (device_memory.h); copies check that their device side lies in one allocation;
//   - copies, memsets and kernels complete in stream order, when the host waits
//     (device_queue.h); stream capture records, graphs replay, and what capture forbids fails;
//   - the device has a capacity, TINYMLIR_SOFTWARE_GPU_MEMORY (a size such as 64M or 4G;
//     default 4G), and an allocation beyond it is CUDA_ERROR_OUT_OF_MEMORY;
//   - a kernel runs its body compiled for the CPU, registered for its module's image
//     (RegisterKernels); an image with no bodies is CUDA_ERROR_NO_BINARY_FOR_GPU, and a body
//     that fails is CUDA_ERROR_LAUNCH_FAILED, sticky until the primary context is reset.
// It counts what it is asked (DeviceCounters), which is how tests see the syncs, launches,
// allocations and bytes a piece of work costs.
//
// The device reports itself as "tinymlir software GPU", compute capability 9.0 (the GPU
// target's default chip), driver 13.0. Every entry point takes one process-wide lock; a
// kernel runs on the thread that waits for it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/support/status.h"
#include "core/targets/gpu/run/cuda_driver.h"

namespace tinymlir {
namespace gpu {
namespace software {

// Fills `driver`'s functions with the software device's. Fails naming the variable when
// TINYMLIR_SOFTWARE_GPU_MEMORY is not a size, or when its range cannot be reserved.
Status InstallSoftwareDriver(CudaDriver *driver);


// A kernel's body for the CPU: runs the whole grid (every block, every thread) with the
// launch's parameters, as cuLaunchKernel passes them. Returns 0, or non-zero when the kernel
// failed (the launch then fails the context as a faulting kernel does). Never unwinds.
using KernelBody = int (*)(void **params, const uint32_t grid[3], const uint32_t block[3],
                           uint32_t dynamic_shared_bytes);

struct KernelEntry {
  const char *name;             // the .entry name cuModuleGetFunction asks for
  KernelBody body;
  const uint32_t *param_bytes;  // each parameter's size, as cuLaunchKernel copies them
  uint32_t param_count;
};

// Registers the CPU bodies of the kernels in the module image `image` (its bytes: the PTX
// text without its terminating NUL, or a cubin): cuModuleLoadDataEx of an equal image then
// finds them. The body a launch runs is the newest registration of its kernel's name still
// registered. The entries' arrays are copied.
void RegisterKernels(const void *image, size_t image_bytes, const KernelEntry *kernels,
                     size_t count);
// The same for one kernel of the image whose FNV-1a hash (core/support/fnv.h) and size are
// given, as a GPU program registers its kernels when it is loaded
// (tm_rt_gpu_software_register_kernel); WithdrawKernel takes that registration back.
void RegisterKernel(uint64_t image_hash, uint64_t image_bytes, const KernelEntry &kernel);
void WithdrawKernel(uint64_t image_hash, uint64_t image_bytes, const char *name, KernelBody body);

// What the device has been asked since the process started (or ResetDeviceCounters).
struct DeviceCounters {
  uint64_t graph_launches = 0;
  uint64_t kernel_launches = 0;  // each kernel of a launched graph counts too
  uint64_t host_syncs = 0;       // context, stream and event synchronisations and queries
  uint64_t allocations = 0;      // cuMemAlloc and cuMemAllocManaged
  uint64_t bytes_to_device = 0;  // copies from host memory into device memory
  uint64_t bytes_from_device = 0;
  uint64_t bytes_in_use = 0;     // device and managed memory allocated now
};
DeviceCounters DeviceCountersNow();
void ResetDeviceCounters();

}  // namespace software
}  // namespace gpu
}  // namespace tinymlir

// What a GPU program compiled with its kernels' CPU bodies (the gpu_cpu_bodies option, set by
// TINYMLIR_CUDA_DRIVER=software) calls from its constructor, for each kernel, before it loads
// its modules, and from its destructor: RegisterKernel and WithdrawKernel, the parameters'
// sizes given as one byte each.
extern "C" {
void tm_rt_gpu_software_register_kernel(uint64_t image_hash, uint64_t image_bytes,
                                        const char *name, void *body, const char *param_bytes,
                                        uint64_t param_count);
void tm_rt_gpu_software_withdraw_kernel(uint64_t image_hash, uint64_t image_bytes,
                                        const char *name, void *body);
}
