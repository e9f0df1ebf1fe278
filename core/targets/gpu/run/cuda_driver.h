// The CUDA driver, found at run time: libcuda.so.1 is dlopen'ed once per process and the few
// driver functions the GPU target needs are looked up by name. Nothing here needs a CUDA
// header or library to build, so every machine builds and tests the same code, and a process
// without a GPU pays one failed dlopen (the result, success or not, is kept).
//
// Device 0 only, through its primary context (the one the CUDA runtime and other libraries
// in the process share), retained once and kept for the life of the process, and one
// stream of the engine's on it: every program's launches, the tensors' copies and the
// device buffers' copies and fills go on that stream, so they run in the order they were
// asked for without the host waiting between them.
//
// Every failure is a Status: Unsupported when this process cannot use a GPU at all (no
// driver library, a driver without a function we need, cuInit failing, no device), a
// RuntimeError (OutOfMemory for CUDA_ERROR_OUT_OF_MEMORY) when a call fails; messages name
// the call and the driver's error name. Nothing is printed; nothing aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/support/status.h"

namespace tinymlir {
namespace gpu {

// The driver API's types, as the driver ABI defines them (cuda.h), declared here instead of
// included: the handles are opaque pointers, the device an ordinal, device memory a 64-bit
// address.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;
using CUjit_option = int;

// The constants we pass or test (values from cuda.h, stable across driver versions).
inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorOutOfMemory = 2;
inline constexpr unsigned kCuMemAttachGlobal = 0x1;               // CU_MEM_ATTACH_GLOBAL
inline constexpr unsigned kCuStreamNonBlocking = 0x1;             // CU_STREAM_NON_BLOCKING
inline constexpr unsigned kCuEventDisableTiming = 0x2;            // CU_EVENT_DISABLE_TIMING
inline constexpr CUjit_option kCuJitErrorLogBuffer = 5;           // CU_JIT_ERROR_LOG_BUFFER
inline constexpr CUjit_option kCuJitErrorLogBufferSizeBytes = 6;  // ..._SIZE_BYTES
inline constexpr CUjit_option kCuJitOptimizationLevel = 7;        // CU_JIT_OPTIMIZATION_LEVEL
inline constexpr int kCuPointerAttributeIsManaged = 8;  // CU_POINTER_ATTRIBUTE_IS_MANAGED
inline constexpr int kCuStreamCaptureModeGlobal = 0;        // CU_STREAM_CAPTURE_MODE_GLOBAL
inline constexpr int kCuDeviceAttributeComputeCapabilityMajor = 75;
inline constexpr int kCuDeviceAttributeComputeCapabilityMinor = 76;

// The driver functions we call, resolved by the names libcuda.so.1 exports (the _v2 names
// where cuda.h maps the plain name to one), and what was found out about device 0.
struct CudaDriver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *context, CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);  // _v2
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);             // _v2
  CUresult (*cuMemAllocManaged)(CUdeviceptr *ptr, size_t bytes, unsigned flags);
  CUresult (*cuMemFree)(CUdeviceptr ptr);  // _v2
  // The first version's signature (a device ordinal), which every driver since CUDA 8
  // exports; cuda.h 13 maps the name to _v2, which takes a CUmemLocation.
  CUresult (*cuMemPrefetchAsync)(CUdeviceptr ptr, size_t bytes, CUdevice device, CUstream stream);
  CUresult (*cuPointerGetAttribute)(void *data, int attribute, CUdeviceptr ptr);
  CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr dst, unsigned value, size_t count, CUstream stream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr dst, unsigned short value, size_t count,
                               CUstream stream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count,
                              CUstream stream);
  CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image, unsigned num_options,
                                 CUjit_option *options, void **option_values);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module, const char *name);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z,
                             unsigned shared_bytes, CUstream stream, void **params, void **extra);
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream stream);  // _v2
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventCreate)(CUevent *event, unsigned flags);
  CUresult (*cuEventDestroy)(CUevent event);  // _v2
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  // Stream capture and graphs. Optional: null when the driver lacks them (older drivers and
  // the tests' fake one); whoever uses them checks.
  CUresult (*cuStreamQuery)(CUstream stream);
  CUresult (*cuEventQuery)(CUevent event);
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode);  // _v2
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph *graph);
  CUresult (*cuStreamIsCapturing)(CUstream stream, int *status);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *exec, CUgraph graph,
                                          unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  CUresult (*cuDevicePrimaryCtxReset)(CUdevice device);  // _v2

  CUdevice device = 0;          // ordinal 0
  CUcontext context = nullptr;  // its primary context, retained for the process
  CUstream stream = nullptr;    // the engine's stream (non-blocking), kept for the process
  int driver_version = 0;       // cuDriverGetVersion: 1000 * major + 10 * minor
  int compute_major = 0;        // compute capability, e.g. 9.0 on an H100/H200 (sm_90)
  int compute_minor = 0;
  std::string device_name;  // e.g. "NVIDIA H200"
  std::string library;      // what was loaded: "libcuda.so.1", a path, or "software"
};

// Which driver is loaded is read once from TINYMLIR_CUDA_DRIVER: unset or empty, the system's
// libcuda.so.1; "software", the project's own CPU-backed device
// (core/targets/gpu/run/software_device/software_driver.h); anything else, the path of a
// driver library to dlopen instead.
//
// The driver, loaded and initialised on first use (thread-safe; later calls return the kept
// result, so a process without CUDA tries once). *out stays valid for the process.
Status Driver(const CudaDriver **out);

// "CUDA_ERROR_NO_DEVICE (100)": the driver's name for `error` (a table of our own when the
// driver cannot name it: the toolkit's stub library answers every call, cuGetErrorName
// included, with CUDA_ERROR_STUB_LIBRARY).
std::string CudaErrorName(CUresult error);

// The status of a failed driver call: "<call> failed: <name> (<code>)"; OutOfMemory for
// CUDA_ERROR_OUT_OF_MEMORY, RuntimeError for anything else. An allocation's failure says how
// much memory the device has free (`say_free_memory`: cuMemGetInfo, on this path only).
Status CudaCallFailed(const std::string &call, CUresult error, bool say_free_memory = false);

// Makes device 0's primary context current on the calling thread. Every thread must, before
// any driver call that uses a context; the driver keeps it per thread, so this is cheap.
Status MakeContextCurrent();

// Managed (unified) memory, reachable from host and device (CU_MEM_ATTACH_GLOBAL). Zero
// bytes is *out = nullptr and OK, like a malloc that returns NULL for zero.
Status ManagedAlloc(uint64_t bytes, void **out);

// Frees a block from ManagedAlloc or cuMemAlloc (NULL is a no-op). Errors are ignored: this is
// also the release function of an unwinding call, after a failure that may have left the
// context unusable, when there is nobody left to tell.
void ManagedFree(void *block);

// The engine's stream (CudaDriver::stream), with the primary context current.
Status EngineStream(CUstream *out);

// Moves `bytes` of managed memory from `block` to the device now, and waits until they are
// there (cuMemPrefetchAsync on the engine's stream, then a wait for it): after the host wrote
// a block, its pages would otherwise move a fault at a time inside the first kernel that
// reads them. Zero bytes is a no-op.
Status PrefetchToDevice(const void *block, uint64_t bytes);

// The same move, queued on the engine's stream, ahead of the kernels queued after it.
Status QueuePrefetchToDevice(const void *block, uint64_t bytes);

// Queues a copy of `bytes` from `src` to `dst` on the engine's stream, by the device's copy
// engine (cuMemcpyAsync; unified addressing tells host from device memory). A managed
// block's pages stay where they are, where a copy by the host would move them to the host.
// From host memory, the bytes are taken before the call returns (the driver stages pageable
// memory); into host memory, they are there once Synchronize() returns.
Status QueueCopy(void *dst, const void *src, uint64_t bytes);

// Queues `bytes` of `value` at `dst` (device or managed memory) on the engine's stream.
Status QueueFill(void *dst, unsigned char value, uint64_t bytes);

// Waits for everything queued on the engine's stream (cuStreamSynchronize); a kernel's
// asynchronous failure surfaces here. Counted as a host sync.
Status Synchronize();

// Device 0's compute capability (9.0 -> 9, 0), for choosing the code's target (sm_90).
Status ComputeCapability(int *major, int *minor);

// "NVIDIA H200 (sm_90), CUDA driver 13.0", or the message saying why there is none.
std::string DeviceDescription();

}  // namespace gpu
}  // namespace tinymlir
