// The functions the host code of a GPU program calls: those MLIR's gpu-to-llvm lowering
// emits (the signatures of MLIR 22's CUDA runtime wrappers, which this replaces so that
// neither library links MLIR's runtime or CUDA), and the allocator its host code uses
// instead of malloc, so that every buffer it makes is reachable from the device.
//
// The generated code checks no result. So a failure never returns to it:
// - inside a program's call (CallGuarded, core/runtime/guarded_call.h) it waits for the
//   device to finish the call's work, then unwinds that call with a Status naming the CUDA
//   call and the driver's error name; what the call still held (managed memory, device
//   memory, streams, events) is released;
// - outside one (the module loads that the host object's global constructors run when it
//   is linked) it is recorded as the last module load error, and the function returns NULL;
//   the program's first mgpuModuleGetFunction on that NULL module then unwinds with it.
// Nothing is printed and nothing aborts.
//
// Each function makes device 0's primary context current on its thread first
// (core/targets/gpu/run/cuda_driver.h): the engine may run a program on any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/support/status.h"

extern "C" {

// Modules: `data` is a cubin or fatbin of `size` bytes (mgpuModuleLoad) or NUL-terminated PTX
// that the driver compiles (mgpuModuleLoadJIT, at optimisation level `optLevel`, 0-4). Loaded
// once per process per content, whichever program asks; unloading is a no-op (see the .cpp).
void *mgpuModuleLoad(void *data, size_t size);
void *mgpuModuleLoadJIT(void *data, int optLevel);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);

// Streams: every "new" stream is the engine's one (cuda_driver.h), so that a program's
// launches queue behind the copies of its tensors and every call before; destroying it does
// nothing, and waiting for it waits for all of the engine's work. Events (no timing), one
// driver object each.
void *mgpuStreamCreate(void);
void mgpuStreamDestroy(void *stream);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamWaitEvent(void *stream, void *event);
void *mgpuEventCreate(void);
void mgpuEventDestroy(void *event);
void mgpuEventSynchronize(void *event);
void mgpuEventRecord(void *event, void *stream);

// cuLaunchKernel; `paramsCount` is unused (the driver reads the kernel's own signature).
void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                      intptr_t blockX, intptr_t blockY, intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount);

// Device memory (managed when isHostShared). Zero bytes is NULL.
void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream);
void mgpuMemset32(void *dst, unsigned int value, size_t count, void *stream);
void mgpuMemset16(void *dst, unsigned short value, size_t count, void *stream);

// Only device 0 exists for tinymlir; another ordinal is an error.
void mgpuSetDefaultDevice(int32_t device);

// malloc / aligned_alloc / calloc / free of a GPU program's host code: CUDA managed memory, so a
// temporary the host code makes can be passed to a kernel; blocks are recycled between calls
// (core/targets/gpu/run/recycled_blocks.h). Zero bytes is NULL. Within a DeferredFrees scope,
// free only hands the block to the scope.
void *tm_rt_gpu_malloc(size_t bytes);
void *tm_rt_gpu_aligned_alloc(size_t alignment, size_t bytes);
void *tm_rt_gpu_calloc(size_t count, size_t size);
void tm_rt_gpu_free(void *block);

}  // extern "C"

namespace tinymlir {
namespace gpu {

// The last failure of a GPU runtime function called outside a program (in practice a module
// load run by a host object's constructor): OK when there has been none. It is never cleared,
// since a program whose module failed may run any time later. The compiler may consult it
// right after linking a GPU program to report a module that did not load at compile time.
Status LastModuleLoadError();

// The managed blocks of one GPU program call: the managed copies of the caller's tensors
// (Add) and the blocks the program frees (tm_rt_gpu_free on this thread while the scope
// lives). When the scope ends they are recycled (recycled_blocks.h) once the device has done
// the work queued so far (RecycleAfterQueuedWork), without the host waiting: a program's
// launches are queued on the engine's stream and not waited for, so a block it frees may
// still be in use by a queued kernel; and cuMemFree would wait for the whole device at every
// free. Scopes nest (the innermost one collects).
class DeferredFrees {
 public:
  DeferredFrees();
  ~DeferredFrees();
  DeferredFrees(const DeferredFrees &) = delete;
  DeferredFrees &operator=(const DeferredFrees &) = delete;

  // Takes `block` (from AllocateRecycled) for the end of the scope; when the list cannot grow,
  // frees it at once and says so.
  Status Add(void *block);

  // Takes `block` for the end of the innermost scope on this thread; false (and nothing
  // taken) when there is none, or when the list cannot grow.
  static bool Defer(void *block);

  // The caller has waited for the device since the call: the scope need not wait again.
  void DeviceWaitedFor() { device_waited_for_ = true; }

 private:
  bool Keep(void *block);  // false when the list cannot grow

  DeferredFrees *outer_;
  std::vector<void *> blocks_;
  bool device_waited_for_ = false;
};

}  // namespace gpu
}  // namespace tinymlir
