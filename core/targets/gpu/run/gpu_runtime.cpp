#include "core/targets/gpu/run/gpu_runtime.h"

#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <utility>

#include "core/runtime/guarded_call.h"
#include "core/support/fnv.h"
#include "core/support/fork_safe_once.h"
#include "core/targets/gpu/run/cuda_driver.h"
#include "core/targets/gpu/run/engine_counters.h"
#include "core/targets/gpu/run/recycled_blocks.h"

// Every extern "C" function below has the same shape: the work is done by a function that
// returns a Status (and so destroys everything it built before returning), and the only
// object left in the extern "C" frame when Report unwinds is that Status, moved from. That
// is what FailGuardedCall's longjmp requires (core/runtime/guarded_call.h).

namespace tinymlir {
namespace gpu {
namespace {

// Process-lifetime state is allocated once and never destroyed: host objects call into this
// file from their global destructors at exit, when a static's destructor may have run.
struct LoadError {
  std::mutex mutex;
  Status last;
};

ForkSafeOnce<LoadError *> last_error;

LoadError &LastError() {
  return *last_error.Get([] { return new LoadError; });
}

void RecordLoadError(Status status) {
  LoadError &error = LastError();
  std::lock_guard<std::mutex> lock(error.mutex);
  error.last = std::move(status);
}

// A failed `status` ends the program's call, or, outside one, is recorded; an OK one does
// nothing (so every mgpu* function just reports what its driver call returned). The device
// first finishes what was queued: the call's kernels must not be running when the guard
// frees the memory they use (errors ignored: after a kernel fault the context reports that
// fault).
void Report(Status status) {
  if (status.ok()) return;
  if (InGuardedCall()) {
    const CudaDriver *d = nullptr;
    if (Driver(&d).ok()) (void)d->cuCtxSynchronize();
    FailGuardedCall(std::move(status));
  }
  RecordLoadError(std::move(status));
}

// `cause` with `what` in front, keeping its code.
Status Because(const std::string &what, const Status &cause) {
  return Status(cause.code(), what + ": " + cause.message());
}

// The driver, with the primary context current on this thread.
Status Ready(const CudaDriver **d) {
  *d = nullptr;
  TM_RETURN_IF_ERROR(MakeContextCurrent());
  return Driver(d);
}

// The same for one driver call, whose name a failure starts with.
Status ReadyFor(const char *call, const CudaDriver **d) {
  Status status = Ready(d);
  return status.ok() ? status : Because(call, status);
}

// `call` is a plain string, made a std::string only on failure: these run per launch.
Status Check(CUresult rc, const char *call) {
  return rc == kCudaSuccess ? Status::Ok() : CudaCallFailed(call, rc);
}

CUdeviceptr Address(const void *p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// --- modules ---

// Loaded modules by content. The host object of every linked copy of a program (the
// compiler's, a program file's, a second context's) loads the same bytes from its
// constructor; they share one CUmodule. The key is the FNV-1a hash and the size of the image
// and how it was loaded; a collision would need two different images of our own compiler's
// with equal length and hash.
struct ModuleKey {
  uint64_t hash;
  uint64_t size;
  int opt_level;  // -1 for a binary image
  bool operator<(const ModuleKey &o) const {
    return std::tie(hash, size, opt_level) < std::tie(o.hash, o.size, o.opt_level);
  }
};

struct Modules {
  std::mutex mutex;  // held while loading, so each image is loaded once
  std::map<ModuleKey, CUmodule> loaded;
};

ForkSafeOnce<Modules *> loaded_modules;

Modules &LoadedModules() {
  return *loaded_modules.Get([] { return new Modules; });
}

Status LoadModule(const void *data, size_t size, int opt_level, void **out) {
  *out = nullptr;
  const std::string what = std::string("the GPU module (") + (opt_level < 0 ? "binary" : "PTX") +
                           ", " + std::to_string(size) + " bytes) could not be loaded";
  if (!data || size == 0) return InvalidArgument(what + ": the image is empty");
  const CudaDriver *d = nullptr;
  Status ready = Ready(&d);
  if (!ready.ok()) return Because(what, ready);
  const ModuleKey key{Fnv1a64(static_cast<const char *>(data), size), size, opt_level};
  Modules &modules = LoadedModules();
  std::lock_guard<std::mutex> lock(modules.mutex);
  auto found = modules.loaded.find(key);
  if (found != modules.loaded.end()) {
    *out = found->second;
    return Status::Ok();
  }
  // The JIT's error log says which PTX line it refused; a binary's names the architecture.
  char log[4096] = {};
  CUjit_option options[] = {kCuJitErrorLogBuffer, kCuJitErrorLogBufferSizeBytes,
                            kCuJitOptimizationLevel};
  void *values[] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof(log) - 1)),
                    reinterpret_cast<void *>(static_cast<uintptr_t>(opt_level))};
  CUmodule module = nullptr;
  const CUresult rc = d->cuModuleLoadDataEx(&module, data, opt_level < 0 ? 2 : 3, options, values);
  if (rc != kCudaSuccess) {
    std::string message = what + ": " + CudaCallFailed("cuModuleLoadDataEx", rc).message();
    if (log[0]) message += ": " + std::string(log);
    return Status(rc == kCudaErrorOutOfMemory ? StatusCode::kOutOfMemory : StatusCode::kRuntime,
                  std::move(message));
  }
  modules.loaded.emplace(key, module);
  *out = module;
  return Status::Ok();
}

// Called before every launch: the message is built only on failure.
Status GetFunction(void *module, const char *name, void **out) {
  *out = nullptr;
  const auto what = [name] {
    return std::string("cannot launch GPU kernel '") + (name ? name : "(null)") + "'";
  };
  if (!module) {
    const Status recorded = LastModuleLoadError();
    if (!recorded.ok()) return Because(what(), recorded);
    return RuntimeError(what() +
                        ": its module was never loaded (the program's GPU module "
                        "constructor did not run)");
  }
  if (!name) return InvalidArgument(what() + ": no kernel name");
  const CudaDriver *d = nullptr;
  Status ready = Ready(&d);
  if (!ready.ok()) return Because(what(), ready);
  CUfunction function = nullptr;
  const CUresult rc = d->cuModuleGetFunction(&function, static_cast<CUmodule>(module), name);
  if (rc != kCudaSuccess) return Because(what(), CudaCallFailed("cuModuleGetFunction", rc));
  *out = function;
  return Status::Ok();
}

// --- streams and events ---

// The release function of an unwinding call (errors ignored: nobody is left to tell).
void ReleaseEvent(void *event) {
  const CudaDriver *d = nullptr;
  if (Ready(&d).ok()) (void)d->cuEventDestroy(static_cast<CUevent>(event));
}

Status CreateStream(void **out) {
  *out = nullptr;
  CUstream stream = nullptr;
  Status status = EngineStream(&stream);
  if (!status.ok()) return Because("the engine's stream", status);
  *out = stream;
  return Status::Ok();
}

Status CreateEvent(void **out) {
  *out = nullptr;
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(ReadyFor("cuEventCreate", &d));
  CUevent event = nullptr;
  TM_RETURN_IF_ERROR(Check(d->cuEventCreate(&event, kCuEventDisableTiming), "cuEventCreate"));
  TrackGuardedResource(event, &ReleaseEvent);
  *out = event;
  return Status::Ok();
}

Status DestroyEvent(void *event) {
  UntrackGuardedResource(event);
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(ReadyFor("cuEventDestroy", &d));
  return Check(d->cuEventDestroy(static_cast<CUevent>(event)), "cuEventDestroy");
}

// --- launches ---

Status Launch(void *function, const intptr_t grid[3], const intptr_t block[3], int32_t smem,
              void *stream, void **params, void **extra) {
  const auto describe = [&] {
    return "cuLaunchKernel(grid " + std::to_string(grid[0]) + "x" + std::to_string(grid[1]) + "x" +
           std::to_string(grid[2]) + ", block " + std::to_string(block[0]) + "x" +
           std::to_string(block[1]) + "x" + std::to_string(block[2]) + ", " + std::to_string(smem) +
           " bytes of shared memory)";
  };
  if (!function) return InvalidArgument(describe() + ": no kernel");
  for (int i = 0; i < 3; ++i)
    if (grid[i] < 1 || block[i] < 1 || grid[i] > UINT32_MAX || block[i] > UINT32_MAX)
      return InvalidArgument(describe() + ": a dimension is out of range");
  if (smem < 0) return InvalidArgument(describe() + ": negative shared memory");
  const CudaDriver *d = nullptr;
  Status ready = Ready(&d);
  if (!ready.ok()) return Because(describe(), ready);
  const CUresult rc =
      d->cuLaunchKernel(static_cast<CUfunction>(function), static_cast<unsigned>(grid[0]),
                        static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]),
                        static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]),
                        static_cast<unsigned>(block[2]), static_cast<unsigned>(smem),
                        static_cast<CUstream>(stream), params, extra);
  if (rc != kCudaSuccess) return CudaCallFailed(describe(), rc);
  Count(EngineEvent::kKernelLaunch);
  return Status::Ok();
}

// --- memory ---

Status DeviceAlloc(uint64_t bytes, bool managed, void **out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  const auto what = [bytes] {
    return "the program could not allocate " + std::to_string(bytes) + " bytes of GPU memory";
  };
  if (managed) {
    Status status = ManagedAlloc(bytes, out);
    if (!status.ok()) return Because(what(), status);
  } else {
    const CudaDriver *d = nullptr;
    Status ready = Ready(&d);
    if (!ready.ok()) return Because(what(), ready);
    CUdeviceptr ptr = 0;
    Count(EngineEvent::kAllocation);
    const CUresult rc = d->cuMemAlloc(&ptr, static_cast<size_t>(bytes));
    if (rc != kCudaSuccess)
      return Because(what(), CudaCallFailed("cuMemAlloc", rc, /*say_free_memory=*/true));
    *out = reinterpret_cast<void *>(static_cast<uintptr_t>(ptr));
  }
  // cuMemFree releases both kinds.
  TrackGuardedResource(*out, &ManagedFree);
  return Status::Ok();
}

Status DeviceFree(void *ptr) {
  if (!ptr) return Status::Ok();
  UntrackGuardedResource(ptr);
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(ReadyFor("cuMemFree", &d));
  return Check(d->cuMemFree(Address(ptr)), "cuMemFree");
}

Status HostAlloc(size_t alignment, size_t bytes, void **out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  const auto what = [bytes] {
    return "the program could not allocate " + std::to_string(bytes) +
           " bytes of GPU managed memory";
  };
  Status status = AllocateRecycled(bytes, out);
  if (!status.ok()) return Because(what(), status);
  // The driver aligns managed memory for any type (in practice to pages); an alignment
  // beyond what it gave is refused rather than silently violated.
  if (alignment > 1 && reinterpret_cast<uintptr_t>(*out) % alignment != 0) {
    FreeRecycled(*out);
    *out = nullptr;
    return Unsupported(what() + ": the driver's block is not aligned to " +
                       std::to_string(alignment) + " bytes");
  }
  TrackGuardedResource(*out, &FreeRecycled);
  return Status::Ok();
}

// A driver call with nothing to track: the context made current, then `body(driver)`.
template <typename Body>
Status Call(const char *call, Body body) {
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(ReadyFor(call, &d));
  return Check(body(*d), call);
}

}  // namespace

Status LastModuleLoadError() {
  LoadError &error = LastError();
  std::lock_guard<std::mutex> lock(error.mutex);
  return error.last;
}

namespace {
thread_local DeferredFrees *innermost_deferred_frees = nullptr;
}  // namespace

DeferredFrees::DeferredFrees() : outer_(innermost_deferred_frees) {
  innermost_deferred_frees = this;
}

DeferredFrees::~DeferredFrees() {
  innermost_deferred_frees = outer_;
  if (blocks_.empty()) return;
  if (device_waited_for_) {
    for (void *block : blocks_) Recycle(block);
    return;
  }
  // Idle once the device has done the call's work; the host goes on meanwhile.
  RecycleAfterQueuedWork(blocks_);
}

bool DeferredFrees::Keep(void *block) {
  try {
    blocks_.push_back(block);
  } catch (const std::bad_alloc &) {
    return false;
  }
  return true;
}

Status DeferredFrees::Add(void *block) {
  if (Keep(block)) return Status::Ok();
  FreeRecycled(block);
  return OutOfMemory("no host memory to keep a GPU block until the call ends");
}

bool DeferredFrees::Defer(void *block) {
  DeferredFrees *scope = innermost_deferred_frees;
  return scope && scope->Keep(block);
}

}  // namespace gpu
}  // namespace tinymlir

using tinymlir::Status;
namespace gpu = tinymlir::gpu;

extern "C" {

void *mgpuModuleLoad(void *data, size_t size) {
  void *module = nullptr;
  Status status = gpu::LoadModule(data, size, -1, &module);
  gpu::Report(std::move(status));
  return module;
}

void *mgpuModuleLoadJIT(void *data, int optLevel) {
  const int level = optLevel < 0 ? 0 : optLevel > 4 ? 4 : optLevel;
  void *module = nullptr;
  Status status = gpu::LoadModule(data, data ? std::strlen(static_cast<const char *>(data)) : 0,
                                  level, &module);
  gpu::Report(std::move(status));
  return module;
}

// A no-op. Modules are shared by content between every linked copy of a program (see
// ModuleKey), so one copy's destructor must not unload what another still launches, and the
// host object's destructors run at exit, when the driver may already be shutting down. A
// module lives as long as the process; the driver frees it with the primary context.
void mgpuModuleUnload(void *) {}

void *mgpuModuleGetFunction(void *module, const char *name) {
  void *function = nullptr;
  Status status = gpu::GetFunction(module, name, &function);
  gpu::Report(std::move(status));
  return function;
}

void *mgpuStreamCreate(void) {
  void *stream = nullptr;
  Status status = gpu::CreateStream(&stream);
  gpu::Report(std::move(status));
  return stream;
}

// The engine's stream lives as long as the context.
void mgpuStreamDestroy(void *) {}

void mgpuStreamSynchronize(void *stream) {
  gpu::Count(gpu::EngineEvent::kHostSync);
  Status status = gpu::Call("cuStreamSynchronize", [&](const gpu::CudaDriver &d) {
    return d.cuStreamSynchronize(static_cast<gpu::CUstream>(stream));
  });
  gpu::Report(std::move(status));
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  Status status = gpu::Call("cuStreamWaitEvent", [&](const gpu::CudaDriver &d) {
    return d.cuStreamWaitEvent(static_cast<gpu::CUstream>(stream), static_cast<gpu::CUevent>(event),
                               0);
  });
  gpu::Report(std::move(status));
}

void *mgpuEventCreate(void) {
  void *event = nullptr;
  Status status = gpu::CreateEvent(&event);
  gpu::Report(std::move(status));
  return event;
}

void mgpuEventDestroy(void *event) {
  Status status = gpu::DestroyEvent(event);
  gpu::Report(std::move(status));
}

void mgpuEventSynchronize(void *event) {
  gpu::Count(gpu::EngineEvent::kHostSync);
  Status status = gpu::Call("cuEventSynchronize", [&](const gpu::CudaDriver &d) {
    return d.cuEventSynchronize(static_cast<gpu::CUevent>(event));
  });
  gpu::Report(std::move(status));
}

void mgpuEventRecord(void *event, void *stream) {
  Status status = gpu::Call("cuEventRecord", [&](const gpu::CudaDriver &d) {
    return d.cuEventRecord(static_cast<gpu::CUevent>(event), static_cast<gpu::CUstream>(stream));
  });
  gpu::Report(std::move(status));
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                      intptr_t blockX, intptr_t blockY, intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t /*paramsCount*/) {
  const intptr_t grid[3] = {gridX, gridY, gridZ};
  const intptr_t block[3] = {blockX, blockY, blockZ};
  Status status = gpu::Launch(function, grid, block, smem, stream, params, extra);
  gpu::Report(std::move(status));
}

void *mgpuMemAlloc(uint64_t sizeBytes, void * /*stream*/, bool isHostShared) {
  void *ptr = nullptr;
  Status status = gpu::DeviceAlloc(sizeBytes, isHostShared, &ptr);
  gpu::Report(std::move(status));
  return ptr;
}

void mgpuMemFree(void *ptr, void * /*stream*/) {
  Status status = gpu::DeviceFree(ptr);
  gpu::Report(std::move(status));
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream) {
  Status status = gpu::Call("cuMemcpyAsync", [&](const gpu::CudaDriver &d) {
    return d.cuMemcpyAsync(gpu::Address(dst), gpu::Address(src), sizeBytes,
                           static_cast<gpu::CUstream>(stream));
  });
  gpu::Report(std::move(status));
}

void mgpuMemset32(void *dst, unsigned int value, size_t count, void *stream) {
  Status status = gpu::Call("cuMemsetD32Async", [&](const gpu::CudaDriver &d) {
    return d.cuMemsetD32Async(gpu::Address(dst), value, count, static_cast<gpu::CUstream>(stream));
  });
  gpu::Report(std::move(status));
}

void mgpuMemset16(void *dst, unsigned short value, size_t count, void *stream) {
  Status status = gpu::Call("cuMemsetD16Async", [&](const gpu::CudaDriver &d) {
    return d.cuMemsetD16Async(gpu::Address(dst), value, count, static_cast<gpu::CUstream>(stream));
  });
  gpu::Report(std::move(status));
}

void mgpuSetDefaultDevice(int32_t device) {
  if (device == 0) return;
  Status status = tinymlir::Unsupported("GPU device " + std::to_string(device) +
                                        " was asked for; tinymlir uses device 0 only");
  gpu::Report(std::move(status));
}

void *tm_rt_gpu_malloc(size_t bytes) {
  void *block = nullptr;
  Status status = gpu::HostAlloc(1, bytes, &block);
  gpu::Report(std::move(status));
  return block;
}

void *tm_rt_gpu_aligned_alloc(size_t alignment, size_t bytes) {
  void *block = nullptr;
  Status status = gpu::HostAlloc(alignment, bytes, &block);
  gpu::Report(std::move(status));
  return block;
}

void *tm_rt_gpu_calloc(size_t count, size_t size) {
  size_t bytes = 0;
  void *block = nullptr;
  Status status = __builtin_mul_overflow(count, size, &bytes)
                      ? tinymlir::OutOfMemory("the program asked for " + std::to_string(count) +
                                              " x " + std::to_string(size) +
                                              " bytes of GPU managed memory, more than exist")
                      : gpu::HostAlloc(1, bytes, &block);
  gpu::Report(std::move(status));
  if (block) std::memset(block, 0, bytes);  // managed memory is host-reachable
  return block;
}

void tm_rt_gpu_free(void *block) {
  if (!block) return;
  tinymlir::UntrackGuardedResource(block);
  // Outside a call, or when the list cannot grow, freed at once: cuMemFree waits for the
  // device first.
  if (!gpu::DeferredFrees::Defer(block)) gpu::FreeRecycled(block);
}

}  // extern "C"
