#include "core/targets/gpu/run/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/targets/gpu/run/engine_counters.h"
#include "core/targets/gpu/run/software_device/software_driver.h"

namespace tinymlir {
namespace gpu {
namespace {

constexpr const char *kLibrary = "libcuda.so.1";
constexpr const char *kSoftware = "software";

// TINYMLIR_CUDA_DRIVER, or the system's driver when it is unset or empty.
std::string ChosenDriver() {
  const char *choice = std::getenv("TINYMLIR_CUDA_DRIVER");
  return choice && *choice ? choice : kLibrary;
}

// Names of the errors a driver may return, for when it cannot name them itself (the stub
// library) and for codes newer than the driver. From cuda.h's cudaError_enum.
const char *KnownErrorName(CUresult error) {
  switch (error) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 4: return "CUDA_ERROR_DEINITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 36: return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
    case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 102: return "CUDA_ERROR_DEVICE_NOT_LICENSED";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 201: return "CUDA_ERROR_INVALID_CONTEXT";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 221: return "CUDA_ERROR_JIT_COMPILER_NOT_FOUND";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 223: return "CUDA_ERROR_JIT_COMPILATION_DISABLED";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 401: return "CUDA_ERROR_ILLEGAL_STATE";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 600: return "CUDA_ERROR_NOT_READY";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case 702: return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case 709: return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
    case 710: return "CUDA_ERROR_ASSERT";
    case 714: return "CUDA_ERROR_HARDWARE_STACK_ERROR";
    case 715: return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
    case 716: return "CUDA_ERROR_MISALIGNED_ADDRESS";
    case 717: return "CUDA_ERROR_INVALID_ADDRESS_SPACE";
    case 718: return "CUDA_ERROR_INVALID_PC";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    case 800: return "CUDA_ERROR_NOT_PERMITTED";
    case 801: return "CUDA_ERROR_NOT_SUPPORTED";
    case 802: return "CUDA_ERROR_SYSTEM_NOT_READY";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case 900: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case 901: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    case 902: return "CUDA_ERROR_STREAM_CAPTURE_MERGE";
    case 903: return "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED";
    case 904: return "CUDA_ERROR_STREAM_CAPTURE_UNJOINED";
    case 905: return "CUDA_ERROR_STREAM_CAPTURE_ISOLATION";
    case 906: return "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT";
    case 907: return "CUDA_ERROR_CAPTURED_EVENT";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return nullptr;
  }
}

// The driver as loaded, or why it could not be. Never destroyed: generated code may call the
// GPU runtime from global destructors at exit, after this file's statics would be gone.
struct Loaded {
  CudaDriver driver{};
  Status status;
  bool symbols_resolved = false;  // cuGetErrorName may be called
};

// dlsym into a typed function pointer; false (and a message) when the driver lacks it.
template <typename Fn>
bool Resolve(void *library, const char *name, Fn *out, Status *status) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
  if (*out) return true;
  *status = Unsupported("no CUDA driver: " + ChosenDriver() + " has no " + name +
                        " (the driver is older than this program needs)");
  return false;
}

// The same for a function the driver may lack (null then).
template <typename Fn>
void ResolveOptional(void *library, const char *name, Fn *out) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
}

Status ResolveAll(void *library, CudaDriver *d) {
  ResolveOptional(library, "cuStreamQuery", &d->cuStreamQuery);
  ResolveOptional(library, "cuEventQuery", &d->cuEventQuery);
  ResolveOptional(library, "cuStreamBeginCapture_v2", &d->cuStreamBeginCapture);
  ResolveOptional(library, "cuStreamEndCapture", &d->cuStreamEndCapture);
  ResolveOptional(library, "cuStreamIsCapturing", &d->cuStreamIsCapturing);
  ResolveOptional(library, "cuGraphInstantiateWithFlags", &d->cuGraphInstantiateWithFlags);
  ResolveOptional(library, "cuGraphLaunch", &d->cuGraphLaunch);
  ResolveOptional(library, "cuGraphExecDestroy", &d->cuGraphExecDestroy);
  ResolveOptional(library, "cuGraphDestroy", &d->cuGraphDestroy);
  ResolveOptional(library, "cuDevicePrimaryCtxReset_v2", &d->cuDevicePrimaryCtxReset);
  Status status;
  // The first one missing ends the search; its name is the message.
  if (!Resolve(library, "cuInit", &d->cuInit, &status) ||
      !Resolve(library, "cuDriverGetVersion", &d->cuDriverGetVersion, &status) ||
      !Resolve(library, "cuGetErrorName", &d->cuGetErrorName, &status) ||
      !Resolve(library, "cuDeviceGetCount", &d->cuDeviceGetCount, &status) ||
      !Resolve(library, "cuDeviceGet", &d->cuDeviceGet, &status) ||
      !Resolve(library, "cuDeviceGetName", &d->cuDeviceGetName, &status) ||
      !Resolve(library, "cuDeviceGetAttribute", &d->cuDeviceGetAttribute, &status) ||
      !Resolve(library, "cuDevicePrimaryCtxRetain", &d->cuDevicePrimaryCtxRetain, &status) ||
      !Resolve(library, "cuCtxSetCurrent", &d->cuCtxSetCurrent, &status) ||
      !Resolve(library, "cuCtxSynchronize", &d->cuCtxSynchronize, &status) ||
      !Resolve(library, "cuMemGetInfo_v2", &d->cuMemGetInfo, &status) ||
      !Resolve(library, "cuMemAlloc_v2", &d->cuMemAlloc, &status) ||
      !Resolve(library, "cuMemAllocManaged", &d->cuMemAllocManaged, &status) ||
      !Resolve(library, "cuMemFree_v2", &d->cuMemFree, &status) ||
      !Resolve(library, "cuMemPrefetchAsync", &d->cuMemPrefetchAsync, &status) ||
      !Resolve(library, "cuPointerGetAttribute", &d->cuPointerGetAttribute, &status) ||
      !Resolve(library, "cuMemcpyAsync", &d->cuMemcpyAsync, &status) ||
      !Resolve(library, "cuMemsetD32Async", &d->cuMemsetD32Async, &status) ||
      !Resolve(library, "cuMemsetD16Async", &d->cuMemsetD16Async, &status) ||
      !Resolve(library, "cuMemsetD8Async", &d->cuMemsetD8Async, &status) ||
      !Resolve(library, "cuModuleLoadDataEx", &d->cuModuleLoadDataEx, &status) ||
      !Resolve(library, "cuModuleGetFunction", &d->cuModuleGetFunction, &status) ||
      !Resolve(library, "cuModuleUnload", &d->cuModuleUnload, &status) ||
      !Resolve(library, "cuLaunchKernel", &d->cuLaunchKernel, &status) ||
      !Resolve(library, "cuStreamCreate", &d->cuStreamCreate, &status) ||
      !Resolve(library, "cuStreamDestroy_v2", &d->cuStreamDestroy, &status) ||
      !Resolve(library, "cuStreamSynchronize", &d->cuStreamSynchronize, &status) ||
      !Resolve(library, "cuStreamWaitEvent", &d->cuStreamWaitEvent, &status) ||
      !Resolve(library, "cuEventCreate", &d->cuEventCreate, &status) ||
      !Resolve(library, "cuEventDestroy_v2", &d->cuEventDestroy, &status) ||
      !Resolve(library, "cuEventRecord", &d->cuEventRecord, &status) ||
      !Resolve(library, "cuEventSynchronize", &d->cuEventSynchronize, &status))
    return status;
  return Status::Ok();
}

std::string NameWith(const CudaDriver *d, CUresult error) {
  const char *name = nullptr;
  if (d && d->cuGetErrorName(error, &name) != kCudaSuccess) name = nullptr;
  if (!name) name = KnownErrorName(error);
  return std::string(name ? name : "CUDA error") + " (" + std::to_string(error) + ")";
}

// Fills `d`'s functions from the driver TINYMLIR_CUDA_DRIVER chooses.
Status LoadFunctions(CudaDriver *d) {
  d->library = ChosenDriver();
  if (d->library == kSoftware) return software::InstallSoftwareDriver(d);
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace, where they could
  // satisfy (or clash with) another library's lookups.
  void *library = dlopen(d->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = dlerror();
    std::string reason = why ? why : "cannot be loaded";
    // dlerror usually names the file first; do not say it twice.
    if (reason.compare(0, d->library.size(), d->library) != 0) reason = d->library + ": " + reason;
    if (d->library != kLibrary)
      reason += " (TINYMLIR_CUDA_DRIVER names it; \"software\" is the CPU-backed device, "
                "unset is the system's driver)";
    return Unsupported("no CUDA driver: " + reason);
  }
  // The library is never closed, even when it turns out unusable: a driver that was
  // initialised may have started threads, and one dlopen per process is the whole cost.
  return ResolveAll(library, d);
}

Status Initialise(Loaded *loaded) {
  CudaDriver *d = &loaded->driver;
  TM_RETURN_IF_ERROR(LoadFunctions(d));
  loaded->symbols_resolved = true;

  CUresult rc = d->cuInit(0);
  if (rc != kCudaSuccess)
    return Unsupported("no CUDA device: cuInit(0) failed: " + NameWith(d, rc));
  int count = 0;
  if ((rc = d->cuDeviceGetCount(&count)) != kCudaSuccess)
    return CudaCallFailed("cuDeviceGetCount", rc);
  if (count < 1) return Unsupported("no CUDA device: the driver reports none");
  if ((rc = d->cuDeviceGet(&d->device, 0)) != kCudaSuccess)
    return CudaCallFailed("cuDeviceGet(0)", rc);
  char name[256] = {};
  if ((rc = d->cuDeviceGetName(name, sizeof(name) - 1, d->device)) != kCudaSuccess)
    return CudaCallFailed("cuDeviceGetName", rc);
  d->device_name = name;
  if ((rc = d->cuDeviceGetAttribute(&d->compute_major, kCuDeviceAttributeComputeCapabilityMajor,
                                    d->device)) != kCudaSuccess ||
      (rc = d->cuDeviceGetAttribute(&d->compute_minor, kCuDeviceAttributeComputeCapabilityMinor,
                                    d->device)) != kCudaSuccess)
    return CudaCallFailed("cuDeviceGetAttribute(compute capability)", rc);
  if ((rc = d->cuDriverGetVersion(&d->driver_version)) != kCudaSuccess)
    return CudaCallFailed("cuDriverGetVersion", rc);
  // The primary context is shared with every other CUDA user in the process (the runtime
  // API, cuBLAS, PyTorch). It is retained once and never released: programs and their
  // modules live until exit, and the driver tears the context down with the process.
  if ((rc = d->cuDevicePrimaryCtxRetain(&d->context, d->device)) != kCudaSuccess)
    return CudaCallFailed("cuDevicePrimaryCtxRetain(device 0)", rc);
  // The engine's stream, kept as long as the context. Non-blocking: work other libraries
  // queue on the context's legacy stream does not order with it.
  if ((rc = d->cuCtxSetCurrent(d->context)) != kCudaSuccess)
    return CudaCallFailed("cuCtxSetCurrent(primary context)", rc);
  if ((rc = d->cuStreamCreate(&d->stream, kCuStreamNonBlocking)) != kCudaSuccess)
    return CudaCallFailed("cuStreamCreate(the engine's stream)", rc);
  return Status::Ok();
}

const Loaded &Load() {
  static Loaded *loaded = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    auto *l = new Loaded;
    l->status = Initialise(l);
    loaded = l;
  });
  return *loaded;
}

}  // namespace

Status Driver(const CudaDriver **out) {
  const Loaded &loaded = Load();
  *out = loaded.status.ok() ? &loaded.driver : nullptr;
  return loaded.status;
}

std::string CudaErrorName(CUresult error) {
  const Loaded &loaded = Load();
  return NameWith(loaded.symbols_resolved ? &loaded.driver : nullptr, error);
}

Status CudaCallFailed(const std::string &call, CUresult error, bool say_free_memory) {
  std::string message = call + " failed: " + CudaErrorName(error);
  if (error != kCudaErrorOutOfMemory) return RuntimeError(std::move(message));
  const CudaDriver *d = nullptr;
  size_t free_bytes = 0, total = 0;
  if (say_free_memory && Driver(&d).ok() && d->cuMemGetInfo(&free_bytes, &total) == kCudaSuccess)
    message += " (" + std::to_string(free_bytes) + " of the device's " + std::to_string(total) +
               " bytes are free)";
  return OutOfMemory(std::move(message));
}

Status MakeContextCurrent() {
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(Driver(&d));
  const CUresult rc = d->cuCtxSetCurrent(d->context);
  if (rc != kCudaSuccess) return CudaCallFailed("cuCtxSetCurrent(primary context)", rc);
  return Status::Ok();
}

Status ManagedAlloc(uint64_t bytes, void **out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  TM_RETURN_IF_ERROR(MakeContextCurrent());
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(Driver(&d));
  CUdeviceptr ptr = 0;
  Count(EngineEvent::kAllocation);
  const CUresult rc = d->cuMemAllocManaged(&ptr, static_cast<size_t>(bytes), kCuMemAttachGlobal);
  if (rc != kCudaSuccess)
    return CudaCallFailed("cuMemAllocManaged(" + std::to_string(bytes) + " bytes)", rc,
                          /*say_free_memory=*/true);
  *out = reinterpret_cast<void *>(static_cast<uintptr_t>(ptr));
  return Status::Ok();
}

void ManagedFree(void *block) {
  if (!block) return;
  const CudaDriver *d = nullptr;
  if (!MakeContextCurrent().ok() || !Driver(&d).ok()) return;
  (void)d->cuMemFree(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(block)));
}

Status EngineStream(CUstream *out) {
  *out = nullptr;
  TM_RETURN_IF_ERROR(MakeContextCurrent());
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(Driver(&d));
  *out = d->stream;
  return Status::Ok();
}

namespace {

CUdeviceptr Address(const void *p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// A call on the engine's stream: `body(driver, stream)`, its failure named `call`.
template <typename Body>
Status OnEngineStream(const char *call, uint64_t bytes, Body body) {
  CUstream stream = nullptr;
  TM_RETURN_IF_ERROR(EngineStream(&stream));
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(Driver(&d));
  const CUresult rc = body(*d, stream);
  if (rc != kCudaSuccess)
    return CudaCallFailed(std::string(call) + "(" + std::to_string(bytes) + " bytes)", rc);
  return Status::Ok();
}

}  // namespace

Status QueuePrefetchToDevice(const void *block, uint64_t bytes) {
  if (bytes == 0) return Status::Ok();
  return OnEngineStream("cuMemPrefetchAsync", bytes, [&](const CudaDriver &d, CUstream s) {
    return d.cuMemPrefetchAsync(Address(block), static_cast<size_t>(bytes), d.device, s);
  });
}

Status QueueCopy(void *dst, const void *src, uint64_t bytes) {
  if (bytes == 0) return Status::Ok();
  return OnEngineStream("cuMemcpyAsync", bytes, [&](const CudaDriver &d, CUstream s) {
    return d.cuMemcpyAsync(Address(dst), Address(src), static_cast<size_t>(bytes), s);
  });
}

Status QueueFill(void *dst, unsigned char value, uint64_t bytes) {
  if (bytes == 0) return Status::Ok();
  return OnEngineStream("cuMemsetD8Async", bytes, [&](const CudaDriver &d, CUstream s) {
    return d.cuMemsetD8Async(Address(dst), value, static_cast<size_t>(bytes), s);
  });
}

Status PrefetchToDevice(const void *block, uint64_t bytes) {
  if (bytes == 0) return Status::Ok();
  TM_RETURN_IF_ERROR(QueuePrefetchToDevice(block, bytes));
  return Synchronize();
}

Status Synchronize() {
  CUstream stream = nullptr;
  TM_RETURN_IF_ERROR(EngineStream(&stream));
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(Driver(&d));
  Count(EngineEvent::kHostSync);
  const CUresult rc = d->cuStreamSynchronize(stream);
  if (rc != kCudaSuccess) return CudaCallFailed("cuStreamSynchronize(the engine's stream)", rc);
  return Status::Ok();
}

Status ComputeCapability(int *major, int *minor) {
  *major = *minor = 0;
  const CudaDriver *d = nullptr;
  TM_RETURN_IF_ERROR(Driver(&d));
  *major = d->compute_major;
  *minor = d->compute_minor;
  return Status::Ok();
}

std::string DeviceDescription() {
  const CudaDriver *d = nullptr;
  const Status status = Driver(&d);
  if (!status.ok()) return status.message();
  return d->device_name + " (sm_" + std::to_string(d->compute_major) +
         std::to_string(d->compute_minor) + "), CUDA driver " +
         std::to_string(d->driver_version / 1000) + "." +
         std::to_string(d->driver_version % 1000 / 10);
}

}  // namespace gpu
}  // namespace tinymlir
