#include "core/targets/gpu/run/software_device/software_driver.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/support/fnv.h"
#include "core/support/memory_size.h"
#include "core/support/fork_safe_once.h"
#include "core/targets/gpu/run/software_device/device_memory.h"
#include "core/targets/gpu/run/software_device/device_queue.h"

namespace tinymlir {
namespace gpu {
namespace software {
namespace {

constexpr uint64_t kDefaultCapacity = 4ull << 30;
constexpr const char *kDeviceName = "tinymlir software GPU";

// cuda.h's values for what this file returns.
constexpr CUresult kSuccess = 0, kOutOfMemory = 2, kInvalidDevice = 101, kNoBinaryForGpu = 209,
                   kNotFound = 500, kLaunchFailed = 719, kNotSupported = 801;

// The device's limits (those of sm_90): a launch beyond them is CUDA_ERROR_INVALID_VALUE.
constexpr uint64_t kMaxThreadsPerBlock = 1024, kMaxBlockZ = 64, kMaxGridX = 2147483647,
                   kMaxGridYZ = 65535, kMaxSharedBytes = 48 * 1024;

// Stream and event handles are their queue ids past this, clear of CU_STREAM_LEGACY (0x1)
// and CU_STREAM_PER_THREAD (0x2).
constexpr uintptr_t kHandleBase = 0x100;

struct RegisteredKernel {
  KernelBody body;
  std::vector<uint32_t> param_bytes;
};
using ImageKey = std::pair<uint64_t, uint64_t>;  // FNV-1a hash and size of the image

// Kernel bodies by image and name. Each program that holds an image registers its bodies
// when it is loaded and withdraws them when it is unloaded; programs with equal images have
// equal kernels, so a launch takes the newest registration still there (looked up at each
// launch: the program that loaded a module first may be gone). Registration comes before
// the driver is chosen (a program's constructor), so this has a lock of its own. Never
// destroyed.
struct Registry {
  std::mutex mutex;
  std::map<ImageKey, std::map<std::string, std::vector<RegisteredKernel>>> images;

  // The newest body of `name` in `image`; false if there is none.
  bool Find(const ImageKey &image, const std::string &name, RegisteredKernel *out) {
    std::lock_guard<std::mutex> lock(mutex);
    auto kernels = images.find(image);
    if (kernels == images.end()) return false;
    auto found = kernels->second.find(name);
    if (found == kernels->second.end() || found->second.empty()) return false;
    *out = found->second.back();
    return true;
  }
};
ForkSafeOnce<Registry *> registry;

Registry &Kernels() {
  return *registry.Get([] { return new Registry; });
}

ImageKey KeyOf(const void *image, uint64_t bytes) {
  return {Fnv1a64(static_cast<const char *>(image), bytes), bytes};
}

struct Module {
  ImageKey image;
};
struct Function {
  const Module *module;
  std::string name;
};
struct GraphExec {
  std::vector<Task> tasks;
};

// The device. Never destroyed: host objects may call the driver from their destructors at
// exit.
struct Device {
  std::mutex mutex;
  DeviceMemory memory;
  DeviceQueue queue;
  std::map<const void *, std::unique_ptr<Module>> modules;
  std::map<const void *, std::unique_ptr<Function>> functions;
  std::map<const void *, std::unique_ptr<Graph>> graphs;
  std::map<const void *, std::unique_ptr<GraphExec>> execs;
  DeviceCounters counters;
};
ForkSafeOnce<Device *> device;

Device &TheDevice() {
  return *device.Get([] { return new Device; });
}

using Lock = std::lock_guard<std::mutex>;

// --- handles ---

bool StreamOf(Device &d, CUstream handle, DeviceQueue::StreamId *id) {
  const auto value = reinterpret_cast<uintptr_t>(handle);
  if (value == 0 || value == 0x1) {
    *id = DeviceQueue::kLegacyStream;
    return true;
  }
  if (value < kHandleBase) return false;
  *id = value - kHandleBase;
  return d.queue.HasStream(*id);
}

bool EventOf(Device &d, CUevent handle, DeviceQueue::EventId *id) {
  const auto value = reinterpret_cast<uintptr_t>(handle);
  if (value < kHandleBase) return false;
  *id = value - kHandleBase;
  return d.queue.HasEvent(*id);
}

template <typename Handle>
Handle HandleOf(uint64_t id) {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(id) + kHandleBase);
}

void *PointerOf(CUdeviceptr p) { return reinterpret_cast<void *>(static_cast<uintptr_t>(p)); }

// Queues `task`, counting it unless it is only being captured.
CUresult Queue(Device &d, DeviceQueue::StreamId stream, Task task) {
  const WorkCounts counts = task.counts;
  const bool capturing = d.queue.IsCapturing(stream);
  const int rc = d.queue.Enqueue(stream, std::move(task));
  if (rc == 0 && !capturing) {
    d.counters.kernel_launches += counts.kernels;
    d.counters.bytes_to_device += counts.bytes_to_device;
    d.counters.bytes_from_device += counts.bytes_from_device;
  }
  return rc;
}

// --- device and context ---

CUresult Init(unsigned) { return kSuccess; }
CUresult DriverGetVersion(int *version) {
  if (!version) return kErrorInvalidValue;
  *version = 13000;
  return kSuccess;
}
// Unnamed here: the shim names errors from its own table.
CUresult GetErrorName(CUresult, const char **name) {
  if (name) *name = nullptr;
  return kErrorInvalidValue;
}
CUresult DeviceGetCount(int *count) {
  if (!count) return kErrorInvalidValue;
  *count = 1;
  return kSuccess;
}
CUresult DeviceGet(CUdevice *device, int ordinal) {
  if (!device) return kErrorInvalidValue;
  if (ordinal != 0) return kInvalidDevice;
  *device = 0;
  return kSuccess;
}
CUresult DeviceGetName(char *name, int length, CUdevice device) {
  if (device != 0) return kInvalidDevice;
  if (!name || length < 1) return kErrorInvalidValue;
  std::strncpy(name, kDeviceName, static_cast<size_t>(length) - 1);
  name[length - 1] = '\0';
  return kSuccess;
}
CUresult DeviceGetAttribute(int *value, int attribute, CUdevice device) {
  if (device != 0) return kInvalidDevice;
  if (!value) return kErrorInvalidValue;
  switch (attribute) {
    case kCuDeviceAttributeComputeCapabilityMajor: *value = 9; return kSuccess;
    case kCuDeviceAttributeComputeCapabilityMinor: *value = 0; return kSuccess;
    default: return kErrorInvalidValue;
  }
}
CUresult PrimaryCtxRetain(CUcontext *context, CUdevice device) {
  if (device != 0) return kInvalidDevice;
  if (!context) return kErrorInvalidValue;
  static char primary;
  *context = reinterpret_cast<CUcontext>(&primary);
  return kSuccess;
}
CUresult CtxSetCurrent(CUcontext) { return kSuccess; }
CUresult CtxSynchronize() {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (const int rc = d.queue.CheckNotCapturing()) return rc;
  ++d.counters.host_syncs;
  return d.queue.SynchronizeAll();
}
CUresult PrimaryCtxReset(CUdevice device) {
  if (device != 0) return kInvalidDevice;
  Device &d = TheDevice();
  Lock lock(d.mutex);
  d.queue.Reset();
  d.memory.FreeAll();
  d.graphs.clear();
  d.execs.clear();
  return kSuccess;
}

// --- memory ---

CUresult MemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (!free_bytes || !total_bytes) return kErrorInvalidValue;
  *free_bytes = d.memory.capacity() - d.memory.used();
  *total_bytes = d.memory.capacity();
  return kSuccess;
}

template <bool kManaged>
CUresult Allocate(CUdeviceptr *ptr, size_t bytes) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (!ptr || bytes == 0) return kErrorInvalidValue;
  *ptr = 0;
  if (const int rc = d.queue.CheckNotCapturing()) return rc;
  if (const int rc = d.queue.sticky_error()) return rc;
  uintptr_t block = 0;
  if (!(kManaged ? d.memory.AllocateManaged(bytes, &block) : d.memory.Allocate(bytes, &block)))
    return kOutOfMemory;
  ++d.counters.allocations;
  d.counters.bytes_in_use = d.memory.used();
  *ptr = block;
  return kSuccess;
}
CUresult MemAlloc(CUdeviceptr *ptr, size_t bytes) { return Allocate<false>(ptr, bytes); }
CUresult MemAllocManaged(CUdeviceptr *ptr, size_t bytes, unsigned flags) {
  if (flags != kCuMemAttachGlobal && flags != 0x2 /* CU_MEM_ATTACH_HOST */)
    return kErrorInvalidValue;
  return Allocate<true>(ptr, bytes);
}
CUresult MemFree(CUdeviceptr ptr) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (const int rc = d.queue.CheckNotCapturing()) return rc;
  if (ptr == 0) return kSuccess;
  // A free waits for the work that may still use the block.
  const int rc = d.queue.SynchronizeAll();
  if (!d.memory.Free(ptr)) return kErrorInvalidValue;
  d.counters.bytes_in_use = d.memory.used();
  return rc;
}
CUresult PointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (!data || attribute != kCuPointerAttributeIsManaged) return kErrorInvalidValue;
  const bool managed = d.memory.InManagedBlock(ptr, 1);
  if (!managed && !d.memory.InDeviceBlock(ptr, 1)) return kErrorInvalidValue;
  *static_cast<unsigned *>(data) = managed ? 1 : 0;
  return kSuccess;
}
CUresult MemPrefetchAsync(CUdeviceptr ptr, size_t bytes, CUdevice device, CUstream stream) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (device != 0 && device != -1 /* CU_DEVICE_CPU */) return kInvalidDevice;
  if (!d.memory.InManagedBlock(ptr, bytes)) return kErrorInvalidValue;
  return Queue(d, id, Task{[] { return 0; }, {}});
}

// Where one side of a copy is: device memory (inside a block, or an invalid address in the
// device range), managed memory, or the host's own.
enum class Side { kDevice, kManaged, kHost, kInvalid };
Side SideOf(const Device &d, CUdeviceptr p, size_t bytes) {
  if (d.memory.InDeviceRange(p)) return d.memory.InDeviceBlock(p, bytes) ? Side::kDevice
                                                                         : Side::kInvalid;
  if (d.memory.InManagedBlock(p, bytes)) return Side::kManaged;
  return p ? Side::kHost : Side::kInvalid;
}

// As the driver does with pageable host memory: a copy from it takes the bytes before the
// call returns (the caller may then reuse its buffer), and a copy into it returns only once
// the copy is done (the work before it in the stream has run). Managed memory is ordered by
// the stream like device memory.
CUresult MemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (bytes == 0) return kSuccess;
  const Side to = SideOf(d, dst, bytes), from = SideOf(d, src, bytes);
  if (to == Side::kInvalid || from == Side::kInvalid) return kErrorInvalidValue;
  WorkCounts counts;
  if (to == Side::kDevice && from != Side::kDevice) counts.bytes_to_device = bytes;
  if (from == Side::kDevice && to != Side::kDevice) counts.bytes_from_device = bytes;
  const bool capturing = d.queue.IsCapturing(id);
  if (from == Side::kHost && !capturing) {
    auto taken = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char *>(PointerOf(src)),
        static_cast<const unsigned char *>(PointerOf(src)) + bytes);
    return Queue(d, id, Task{[dst, taken] {
                               std::memcpy(PointerOf(dst), taken->data(), taken->size());
                               return 0;
                             },
                             counts});
  }
  const CUresult rc = Queue(d, id, Task{[dst, src, bytes] {
                                          std::memmove(PointerOf(dst), PointerOf(src), bytes);
                                          return 0;
                                        },
                                        counts});
  if (rc != kSuccess || to != Side::kHost || capturing) return rc;
  ++d.counters.host_syncs;
  return d.queue.SynchronizeStream(id);
}

template <typename T>
CUresult MemsetAsync(CUdeviceptr dst, T value, size_t count, CUstream stream) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (count == 0) return kSuccess;
  if (dst % sizeof(T) != 0 || count > SIZE_MAX / sizeof(T)) return kErrorInvalidValue;
  const Side to = SideOf(d, dst, count * sizeof(T));
  if (to != Side::kDevice && to != Side::kManaged) return kErrorInvalidValue;
  return Queue(d, id, Task{[dst, value, count] {
                             T *out = static_cast<T *>(PointerOf(dst));
                             for (size_t i = 0; i < count; ++i) out[i] = value;
                             return 0;
                           },
                           {}});
}
CUresult MemsetD32Async(CUdeviceptr dst, unsigned value, size_t count, CUstream stream) {
  return MemsetAsync<uint32_t>(dst, value, count, stream);
}
CUresult MemsetD16Async(CUdeviceptr dst, unsigned short value, size_t count, CUstream stream) {
  return MemsetAsync<uint16_t>(dst, value, count, stream);
}
CUresult MemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) {
  return MemsetAsync<uint8_t>(dst, value, count, stream);
}

// --- modules and kernels ---

// The bytes of a module image: an ELF cubin's up to the end of its section or program
// header table, whichever is last; PTX text's up to its NUL.
size_t ImageBytes(const void *image) {
  const auto *bytes = static_cast<const unsigned char *>(image);
  if (std::memcmp(bytes, "\x7f" "ELF", 4) != 0) return std::strlen(static_cast<const char *>(image));
  uint64_t phoff, shoff;
  uint16_t phentsize, phnum, shentsize, shnum;
  std::memcpy(&phoff, bytes + 0x20, 8);
  std::memcpy(&shoff, bytes + 0x28, 8);
  std::memcpy(&phentsize, bytes + 0x36, 2);
  std::memcpy(&phnum, bytes + 0x38, 2);
  std::memcpy(&shentsize, bytes + 0x3a, 2);
  std::memcpy(&shnum, bytes + 0x3c, 2);
  const uint64_t end = std::max(phoff + uint64_t{phentsize} * phnum,
                                shoff + uint64_t{shentsize} * shnum);
  return static_cast<size_t>(end);
}

// Writes `message` to the caller's JIT error log, when it gave one.
void WriteLog(unsigned num_options, const CUjit_option *options, void **values,
              const std::string &message) {
  char *log = nullptr;
  size_t size = 0;
  for (unsigned i = 0; i < num_options; ++i) {
    if (options[i] == kCuJitErrorLogBuffer) log = static_cast<char *>(values[i]);
    if (options[i] == kCuJitErrorLogBufferSizeBytes)
      size = static_cast<size_t>(reinterpret_cast<uintptr_t>(values[i]));
  }
  if (!log || size == 0) return;
  std::strncpy(log, message.c_str(), size - 1);
  log[size - 1] = '\0';
}

CUresult ModuleLoadDataEx(CUmodule *module, const void *image, unsigned num_options,
                          CUjit_option *options, void **values) {
  if (!module || !image || (num_options && (!options || !values))) return kErrorInvalidValue;
  *module = nullptr;
  const size_t size = ImageBytes(image);
  const ImageKey key = KeyOf(image, size);
  bool known = false;
  {
    Registry &registry = Kernels();
    Lock lock(registry.mutex);
    auto found = registry.images.find(key);
    if (found != registry.images.end())
      for (const auto &[name, bodies] : found->second) known |= !bodies.empty();
  }
  if (!known) {
    WriteLog(num_options, options, values,
             "the software GPU has no CPU kernel bodies for this module (" +
                 std::to_string(size) +
                 " bytes): it runs programs compiled with their kernels' CPU bodies");
    return kNoBinaryForGpu;
  }
  Device &d = TheDevice();
  Lock lock(d.mutex);
  auto loaded = std::make_unique<Module>(Module{key});
  *module = reinterpret_cast<CUmodule>(loaded.get());
  d.modules.emplace(loaded.get(), std::move(loaded));
  return kSuccess;
}

CUresult ModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (!function || !name) return kErrorInvalidValue;
  auto found = d.modules.find(module);
  if (found == d.modules.end()) return kErrorInvalidHandle;
  RegisteredKernel kernel;
  if (!Kernels().Find(found->second->image, name, &kernel)) return kNotFound;
  auto made = std::make_unique<Function>(Function{found->second.get(), name});
  *function = reinterpret_cast<CUfunction>(made.get());
  d.functions.emplace(made.get(), std::move(made));
  return kSuccess;
}

CUresult ModuleUnload(CUmodule module) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  auto found = d.modules.find(module);
  if (found == d.modules.end()) return kErrorInvalidHandle;
  for (auto it = d.functions.begin(); it != d.functions.end();)
    it = it->second->module == found->second.get() ? d.functions.erase(it) : std::next(it);
  d.modules.erase(found);
  return kSuccess;
}

CUresult LaunchKernel(CUfunction f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                      unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                      CUstream stream, void **params, void **extra) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (const int rc = d.queue.sticky_error()) return rc;
  auto known = d.functions.find(reinterpret_cast<const Function *>(f));
  if (known == d.functions.end()) return kErrorInvalidHandle;
  const Function *function = known->second.get();
  RegisteredKernel kernel;
  if (!Kernels().Find(function->module->image, function->name, &kernel)) return kNoBinaryForGpu;
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (extra) return kNotSupported;
  const uint64_t threads = uint64_t{block_x} * block_y * block_z;
  if (grid_x == 0 || grid_y == 0 || grid_z == 0 || threads == 0 || threads > kMaxThreadsPerBlock ||
      block_z > kMaxBlockZ || grid_x > kMaxGridX || grid_y > kMaxGridYZ || grid_z > kMaxGridYZ ||
      shared_bytes > kMaxSharedBytes)
    return kErrorInvalidValue;
  const std::vector<uint32_t> &sizes = kernel.param_bytes;
  if (!sizes.empty() && !params) return kErrorInvalidValue;
  // The parameters are copied now, as the driver does: the caller's array is gone by the
  // time the kernel runs.
  std::vector<size_t> offsets;
  size_t total = 0;
  for (uint32_t bytes : sizes) {
    offsets.push_back(total);
    total += (bytes + 7) / 8 * 8;
  }
  auto storage = std::make_shared<std::vector<uint64_t>>(total / 8);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!params[i]) return kErrorInvalidValue;
    std::memcpy(reinterpret_cast<char *>(storage->data()) + offsets[i], params[i], sizes[i]);
  }
  const KernelBody body = kernel.body;
  const uint32_t grid[3] = {grid_x, grid_y, grid_z}, block[3] = {block_x, block_y, block_z};
  Task task{[body, storage, offsets, grid0 = grid[0], grid1 = grid[1], grid2 = grid[2],
             block0 = block[0], block1 = block[1], block2 = block[2], shared_bytes] {
              std::vector<void *> pointers;
              for (size_t offset : offsets)
                pointers.push_back(reinterpret_cast<char *>(storage->data()) + offset);
              const uint32_t g[3] = {grid0, grid1, grid2}, b[3] = {block0, block1, block2};
              return body(pointers.data(), g, b, shared_bytes) == 0 ? 0 : kLaunchFailed;
            },
            WorkCounts{1, 0, 0}};
  return Queue(d, id, std::move(task));
}

// --- streams and events ---

CUresult StreamCreate(CUstream *stream, unsigned flags) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (!stream || (flags & ~kCuStreamNonBlocking)) return kErrorInvalidValue;
  *stream = HandleOf<CUstream>(d.queue.CreateStream((flags & kCuStreamNonBlocking) == 0));
  return kSuccess;
}
CUresult StreamDestroy(CUstream stream) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id) || id == DeviceQueue::kLegacyStream) return kErrorInvalidHandle;
  return d.queue.DestroyStream(id);
}
CUresult StreamSynchronize(CUstream stream) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (const int rc = d.queue.CheckNotCapturing()) return rc;
  if (d.queue.IsCapturing(id)) return kErrorCaptureUnsupported;  // relaxed mode: still no
  ++d.counters.host_syncs;
  return d.queue.SynchronizeStream(id);
}
CUresult StreamQuery(CUstream stream) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (d.queue.IsCapturing(id)) return kErrorCaptureUnsupported;
  // The work runs now: a query never reports CUDA_ERROR_NOT_READY, so polling ends.
  ++d.counters.host_syncs;
  return d.queue.SynchronizeStream(id);
}
CUresult StreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId s = 0;
  DeviceQueue::EventId e = 0;
  if (!StreamOf(d, stream, &s) || !EventOf(d, event, &e)) return kErrorInvalidHandle;
  if (flags != 0) return kErrorInvalidValue;
  return d.queue.WaitEvent(s, e);
}
CUresult EventCreate(CUevent *event, unsigned flags) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (!event || (flags & ~0x7u)) return kErrorInvalidValue;
  *event = HandleOf<CUevent>(d.queue.CreateEvent());
  return kSuccess;
}
CUresult EventDestroy(CUevent event) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::EventId id = 0;
  if (!EventOf(d, event, &id)) return kErrorInvalidHandle;
  d.queue.DestroyEvent(id);
  return kSuccess;
}
CUresult EventRecord(CUevent event, CUstream stream) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId s = 0;
  DeviceQueue::EventId e = 0;
  if (!StreamOf(d, stream, &s) || !EventOf(d, event, &e)) return kErrorInvalidHandle;
  return d.queue.RecordEvent(e, s);
}
CUresult EventSynchronize(CUevent event) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::EventId id = 0;
  if (!EventOf(d, event, &id)) return kErrorInvalidHandle;
  if (const int rc = d.queue.CheckNotCapturing()) return rc;
  ++d.counters.host_syncs;
  return d.queue.SynchronizeEvent(id);
}
CUresult EventQuery(CUevent event) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::EventId id = 0;
  if (!EventOf(d, event, &id)) return kErrorInvalidHandle;
  ++d.counters.host_syncs;
  return d.queue.SynchronizeEvent(id);
}

// --- capture and graphs ---

CUresult StreamBeginCapture(CUstream stream, int mode) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  return d.queue.BeginCapture(id, mode);
}
CUresult StreamEndCapture(CUstream stream, CUgraph *graph) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (!graph) return kErrorInvalidValue;
  *graph = nullptr;
  std::unique_ptr<Graph> captured;
  const int rc = d.queue.EndCapture(id, &captured);
  if (rc) return rc;
  *graph = reinterpret_cast<CUgraph>(captured.get());
  d.graphs.emplace(captured.get(), std::move(captured));
  return kSuccess;
}
CUresult StreamIsCapturing(CUstream stream, int *status) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceQueue::StreamId id = 0;
  if (!StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (!status) return kErrorInvalidValue;
  *status = d.queue.IsCapturing(id) ? 1 : 0;  // CU_STREAM_CAPTURE_STATUS_ACTIVE / _NONE
  return kSuccess;
}
CUresult GraphInstantiate(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  if (!exec || flags != 0) return kErrorInvalidValue;
  auto found = d.graphs.find(graph);
  if (found == d.graphs.end()) return kErrorInvalidHandle;
  auto instance = std::make_unique<GraphExec>(GraphExec{found->second->tasks});
  *exec = reinterpret_cast<CUgraphExec>(instance.get());
  d.execs.emplace(instance.get(), std::move(instance));
  return kSuccess;
}
CUresult GraphLaunch(CUgraphExec exec, CUstream stream) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  auto found = d.execs.find(exec);
  DeviceQueue::StreamId id = 0;
  if (found == d.execs.end() || !StreamOf(d, stream, &id)) return kErrorInvalidHandle;
  if (const int rc = d.queue.sticky_error()) return rc;
  // The launch runs the graph as it is now; its tasks are shared, not copied, per launch.
  auto tasks = std::make_shared<std::vector<Task>>(found->second->tasks);
  WorkCounts counts;
  for (const Task &task : *tasks) {
    counts.kernels += task.counts.kernels;
    counts.bytes_to_device += task.counts.bytes_to_device;
    counts.bytes_from_device += task.counts.bytes_from_device;
  }
  const bool capturing = d.queue.IsCapturing(id);
  const CUresult rc = Queue(d, id, Task{[tasks] {
                                          for (const Task &task : *tasks)
                                            if (const int rc = task.run()) return rc;
                                          return 0;
                                        },
                                        counts});
  if (rc == 0 && !capturing) ++d.counters.graph_launches;
  return rc;
}
CUresult GraphExecDestroy(CUgraphExec exec) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  return d.execs.erase(exec) ? kSuccess : kErrorInvalidHandle;
}
CUresult GraphDestroy(CUgraph graph) {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  return d.graphs.erase(graph) ? kSuccess : kErrorInvalidHandle;
}

}  // namespace

Status InstallSoftwareDriver(CudaDriver *driver) {
  uint64_t capacity = kDefaultCapacity;
  const char *setting = std::getenv("TINYMLIR_SOFTWARE_GPU_MEMORY");
  if (setting && *setting && !ParseMemorySize(setting, &capacity))
    return InvalidArgument("TINYMLIR_SOFTWARE_GPU_MEMORY is '" + std::string(setting) +
                           "': it takes the software GPU's memory in bytes, with K, M, G or T "
                           "for powers of 1024 (e.g. 64M); unset, 4G");
  Device &d = TheDevice();
  {
    Lock lock(d.mutex);
    if (d.memory.capacity() == 0 && !d.memory.Reserve(capacity))
      return Unsupported("the software GPU could not reserve " + std::to_string(capacity) +
                         " bytes of address space for its memory (TINYMLIR_SOFTWARE_GPU_MEMORY)");
    d.queue.with_device_memory_open = [&d](const std::function<void()> &run) {
      DeviceMemory::Open open(d.memory);
      run();
    };
  }
  CudaDriver &c = *driver;
  c.cuInit = &Init;
  c.cuDriverGetVersion = &DriverGetVersion;
  c.cuGetErrorName = &GetErrorName;
  c.cuDeviceGetCount = &DeviceGetCount;
  c.cuDeviceGet = &DeviceGet;
  c.cuDeviceGetName = &DeviceGetName;
  c.cuDeviceGetAttribute = &DeviceGetAttribute;
  c.cuDevicePrimaryCtxRetain = &PrimaryCtxRetain;
  c.cuCtxSetCurrent = &CtxSetCurrent;
  c.cuCtxSynchronize = &CtxSynchronize;
  c.cuMemGetInfo = &MemGetInfo;
  c.cuMemAlloc = &MemAlloc;
  c.cuMemAllocManaged = &MemAllocManaged;
  c.cuMemFree = &MemFree;
  c.cuMemPrefetchAsync = &MemPrefetchAsync;
  c.cuPointerGetAttribute = &PointerGetAttribute;
  c.cuMemcpyAsync = &MemcpyAsync;
  c.cuMemsetD32Async = &MemsetD32Async;
  c.cuMemsetD16Async = &MemsetD16Async;
  c.cuMemsetD8Async = &MemsetD8Async;
  c.cuModuleLoadDataEx = &ModuleLoadDataEx;
  c.cuModuleGetFunction = &ModuleGetFunction;
  c.cuModuleUnload = &ModuleUnload;
  c.cuLaunchKernel = &LaunchKernel;
  c.cuStreamCreate = &StreamCreate;
  c.cuStreamDestroy = &StreamDestroy;
  c.cuStreamSynchronize = &StreamSynchronize;
  c.cuStreamWaitEvent = &StreamWaitEvent;
  c.cuEventCreate = &EventCreate;
  c.cuEventDestroy = &EventDestroy;
  c.cuEventRecord = &EventRecord;
  c.cuEventSynchronize = &EventSynchronize;
  c.cuStreamQuery = &StreamQuery;
  c.cuEventQuery = &EventQuery;
  c.cuStreamBeginCapture = &StreamBeginCapture;
  c.cuStreamEndCapture = &StreamEndCapture;
  c.cuStreamIsCapturing = &StreamIsCapturing;
  c.cuGraphInstantiateWithFlags = &GraphInstantiate;
  c.cuGraphLaunch = &GraphLaunch;
  c.cuGraphExecDestroy = &GraphExecDestroy;
  c.cuGraphDestroy = &GraphDestroy;
  c.cuDevicePrimaryCtxReset = &PrimaryCtxReset;
  return Status::Ok();
}

void RegisterKernels(const void *image, size_t image_bytes, const KernelEntry *kernels,
                     size_t count) {
  const ImageKey key = KeyOf(image, image_bytes);
  for (size_t i = 0; i < count; ++i)
    RegisterKernel(key.first, key.second, kernels[i]);
}

void RegisterKernel(uint64_t image_hash, uint64_t image_bytes, const KernelEntry &kernel) {
  Registry &registry = Kernels();
  Lock lock(registry.mutex);
  registry.images[{image_hash, image_bytes}][kernel.name].push_back(RegisteredKernel{
      kernel.body,
      std::vector<uint32_t>(kernel.param_bytes, kernel.param_bytes + kernel.param_count)});
}

void WithdrawKernel(uint64_t image_hash, uint64_t image_bytes, const char *name, KernelBody body) {
  Registry &registry = Kernels();
  Lock lock(registry.mutex);
  auto image = registry.images.find({image_hash, image_bytes});
  if (image == registry.images.end()) return;
  auto kernels = image->second.find(name);
  if (kernels == image->second.end()) return;
  std::vector<RegisteredKernel> &bodies = kernels->second;
  for (auto it = bodies.rbegin(); it != bodies.rend(); ++it)
    if (it->body == body) {
      bodies.erase(std::next(it).base());
      return;
    }
}

DeviceCounters DeviceCountersNow() {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  DeviceCounters counters = d.counters;
  counters.bytes_in_use = d.memory.used();
  return counters;
}

void ResetDeviceCounters() {
  Device &d = TheDevice();
  Lock lock(d.mutex);
  d.counters = DeviceCounters{};
}

}  // namespace software
}  // namespace gpu
}  // namespace tinymlir

extern "C" {

void tm_rt_gpu_software_register_kernel(uint64_t image_hash, uint64_t image_bytes,
                                        const char *name, void *body, const char *param_bytes,
                                        uint64_t param_count) {
  std::vector<uint32_t> sizes(param_bytes, param_bytes + param_count);
  const tinymlir::gpu::software::KernelEntry entry{
      name, reinterpret_cast<tinymlir::gpu::software::KernelBody>(body), sizes.data(),
      static_cast<uint32_t>(sizes.size())};
  tinymlir::gpu::software::RegisterKernel(image_hash, image_bytes, entry);
}

void tm_rt_gpu_software_withdraw_kernel(uint64_t image_hash, uint64_t image_bytes,
                                        const char *name, void *body) {
  tinymlir::gpu::software::WithdrawKernel(
      image_hash, image_bytes, name, reinterpret_cast<tinymlir::gpu::software::KernelBody>(body));
}

}  // extern "C"
