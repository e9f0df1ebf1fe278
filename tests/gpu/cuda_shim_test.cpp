// The CUDA driver shim (core/targets/gpu/run/cuda_driver.h), the GPU runtime the generated host
// code calls (gpu_runtime.h) and the guarded call that turns their failures into a status
// (core/runtime/guarded_call.h). Most tests need no GPU: they check that a machine without a
// driver (or with the toolkit's stub driver: the gpu_shim_stub_driver test runs
// CudaStubDriver.* with a libcuda.so.1 that is the stub) gets clear statuses, never a crash,
// an abort or a line on stderr. The CudaDevice.* tests run where a GPU is present.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/runtime/guarded_call.h"
#include "core/runtime/recycled_temporaries.h"
#include "core/runtime/host_symbols.h"
#include "core/targets/gpu/run/cuda_driver.h"
#include "core/targets/gpu/run/gpu_runtime.h"
#include "core/targets/gpu/run/gpu_symbols.h"
#include "core/targets/gpu/run/software_device/software_driver.h"

namespace tinymlir {
namespace {

bool Contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

bool UsingStubDriver() { return std::getenv("TM_TEST_CUDA_STUB") != nullptr; }

// Whether the process can load a CUDA driver at all (checked without the shim).
bool DriverLibraryPresent() {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) return false;
  dlclose(library);
  return true;
}

// The driver's failure, or OK on a machine with a usable GPU.
Status DriverStatus() {
  const gpu::CudaDriver *driver = nullptr;
  return gpu::Driver(&driver);
}

// A small PTX kernel: out[i] = i * scale for i < n (checked with ptxas; JIT-compiled by the
// driver for whatever GPU is present).
const char kIotaPtx[] = R"(.version 7.0
.target sm_52
.address_size 64

.visible .entry iota_scale(
    .param .u64 iota_scale_out,
    .param .f32 iota_scale_scale,
    .param .u32 iota_scale_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [iota_scale_out];
    ld.param.f32 %f1, [iota_scale_scale];
    ld.param.u32 %r1, [iota_scale_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    cvt.rn.f32.u32 %f2, %r5;
    mul.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;
DONE:
    ret;
}
)";

// iota_scale's body for the software device (TINYMLIR_CUDA_DRIVER=software: the
// gpu_shim_software_device test runs CudaDevice.* on it), registered for kIotaPtx's bytes.
int IotaScaleOnTheCpu(void **params, const uint32_t grid[3], const uint32_t block[3], uint32_t) {
  float *out = *static_cast<float **>(params[0]);
  const float scale = *static_cast<float *>(params[1]);
  const uint32_t n = *static_cast<uint32_t *>(params[2]);
  for (uint32_t b = 0; b < grid[0]; ++b)
    for (uint32_t t = 0; t < block[0]; ++t)
      if (const uint32_t i = b * block[0] + t; i < n) out[i] = static_cast<float>(i) * scale;
  return 0;
}
const uint32_t kIotaParams[] = {8, 4, 4};
const gpu::software::KernelEntry kIotaKernel[] = {{"iota_scale", &IotaScaleOnTheCpu, kIotaParams, 3}};
const bool iota_registered = [] {
  gpu::software::RegisterKernels(kIotaPtx, sizeof kIotaPtx - 1, kIotaKernel, 1);
  return true;
}();

bool UsingSoftwareDevice() {
  const char *choice = std::getenv("TINYMLIR_CUDA_DRIVER");
  return choice && std::string(choice) == "software";
}

// ---------------------------------------------------------------------------------------
// The guarded call: FailGuardedCall and tracked resources (no GPU involved).

int released_count = 0;
std::vector<uintptr_t> released_order;
void CountRelease(void *resource) {
  ++released_count;
  released_order.push_back(reinterpret_cast<uintptr_t>(resource));
}

// Written by the entries below so that the test can see how far they got.
bool reached_end = false;
size_t mapped_inside = 0;  // malloc's mmapped bytes while the call held its blocks

constexpr size_t kBigBlock = 8 << 20;  // above malloc's mmap threshold: visible in mallinfo2

void AllocateTrackAndFail(void **) {
  void *kept[3];
  for (void *&block : kept) {
    block = tm_rt_malloc(kBigBlock);
    std::memset(block, 1, 64);
  }
  tm_rt_free(tm_rt_malloc(kBigBlock));  // freed by the program itself: not freed again
  tm_rt_free(kept[1]);
  TrackGuardedResource(reinterpret_cast<void *>(0x10), &CountRelease);
  TrackGuardedResource(reinterpret_cast<void *>(0x20), &CountRelease);
  TrackGuardedResource(reinterpret_cast<void *>(0x30), &CountRelease);
  UntrackGuardedResource(reinterpret_cast<void *>(0x20));  // released by the program
  mapped_inside = mallinfo2().hblkhd;
  // A message longer than any small-string buffer: under LeakSanitizer, the unwind must
  // leave no copy of it behind.
  FailGuardedCall(RuntimeError("the runtime gave up: " + std::string(200, 'x')));
  reached_end = true;
}

TEST(GuardedCall, FailGuardedCallUnwindsAndReleasesWhatTheCallHeld) {
  released_count = 0;
  released_order.clear();
  reached_end = false;
  const size_t mapped_before = mallinfo2().hblkhd;
  const size_t idle_before = IdleTemporaryBytes();
  EXPECT_FALSE(InGuardedCall());
  const Status status = CallGuarded(&AllocateTrackAndFail, nullptr);
  EXPECT_FALSE(InGuardedCall());
  EXPECT_EQ(status.code(), StatusCode::kRuntime);
  EXPECT_EQ(status.message(), "the runtime gave up: " + std::string(200, 'x'));
  EXPECT_FALSE(reached_end);
  // The two resources still held, last tracked first; the untracked one not at all.
  EXPECT_EQ(released_count, 2);
  EXPECT_EQ(released_order, (std::vector<uintptr_t>{0x30, 0x10}));
  // The two blocks still held were released: every one of the call's four blocks is idle
  // for the next call's allocations of its size (recycled_temporaries.h), and nothing else
  // stays mapped (malloc's own accounting, where it is malloc's: under AddressSanitizer its
  // allocator does the counting and LeakSanitizer checks this).
  EXPECT_EQ(IdleTemporaryBytes(), idle_before + 4 * kBigBlock);
  if (mapped_inside >= mapped_before + 2 * kBigBlock) {
    EXPECT_LE(mallinfo2().hblkhd, mapped_before + 4 * (kBigBlock + 4096));
  }
}

void FailWithOk(void **) { FailGuardedCall(Status::Ok()); }

TEST(GuardedCall, AnOkStatusDoesNotMakeAFailureASuccess) {
  const Status status = CallGuarded(&FailWithOk, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kRuntime);
  EXPECT_TRUE(Contains(status.message(), "without a reason")) << status.message();
}

void TrackAndReturn(void **args) {
  *static_cast<bool *>(args[0]) = InGuardedCall();
  TrackGuardedResource(reinterpret_cast<void *>(0x40), &CountRelease);
  void *block = tm_rt_malloc(100);
  tm_rt_free(block);
}

TEST(GuardedCall, ACallThatReturnsReleasesNothing) {
  released_count = 0;
  bool inside = false;
  void *args[] = {&inside};
  const Status status = CallGuarded(&TrackAndReturn, args);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(inside);
  EXPECT_EQ(released_count, 0);
}

void AllocateTooMuch(void **) {
  tm_rt_free(tm_rt_malloc(1000));
  void *block = tm_rt_malloc(static_cast<size_t>(1) << 62);
  reached_end = block != nullptr;
}

TEST(GuardedCall, AFailedAllocationIsStillOutOfMemoryNamingTheSize) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator dies on an impossible size instead of "
                  "returning NULL";
#endif
  reached_end = false;
  const Status status = CallGuarded(&AllocateTooMuch, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kOutOfMemory);
  EXPECT_TRUE(Contains(status.message(), std::to_string(static_cast<size_t>(1) << 62)))
      << status.message();
  EXPECT_FALSE(reached_end);
}

// calloc (which LLVM makes of malloc and a zero fill): zeroed, tracked, and a count times
// size that overflows is out of memory, not a small block.
void CallocZeroesThenOverflows(void **args) {
  auto *block = static_cast<int *>(tm_rt_calloc(1000, sizeof(int)));
  int sum = 0;
  for (int i = 0; i < 1000; ++i) sum += block[i];
  *static_cast<int *>(args[0]) = sum;
  tm_rt_free(block);
  block = static_cast<int *>(tm_rt_calloc(static_cast<size_t>(1) << 62, 8));
  reached_end = block != nullptr;
}

TEST(GuardedCall, CallocZeroesAndAnOverflowingSizeIsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's calloc reports the overflow and dies";
#endif
  reached_end = false;
  int sum = -1;
  void *args[] = {&sum};
  const Status status = CallGuarded(&CallocZeroesThenOverflows, args);
  EXPECT_EQ(sum, 0);
  EXPECT_EQ(status.code(), StatusCode::kOutOfMemory) << status.message();
  EXPECT_TRUE(Contains(status.message(), std::to_string(SIZE_MAX))) << status.message();
  EXPECT_FALSE(reached_end);
}

TEST(GuardedCall, OutsideACallTrackingDoesNothing) {
  released_count = 0;
  TrackGuardedResource(reinterpret_cast<void *>(0x50), &CountRelease);
  UntrackGuardedResource(reinterpret_cast<void *>(0x50));
  EXPECT_EQ(released_count, 0);
  void *block = tm_rt_malloc(10);
  EXPECT_NE(block, nullptr);
  tm_rt_free(block);
}

// ---------------------------------------------------------------------------------------
// The symbol tables.

TEST(GpuSymbols, GpuProgramsGetTheGpuRuntimeOverTheHostTable) {
  const auto &cpu = HostSymbols();
  const auto &gpu_table = GpuRuntimeSymbols();
  EXPECT_EQ(gpu_table.at("malloc"), reinterpret_cast<void *>(&tm_rt_gpu_malloc));
  EXPECT_EQ(gpu_table.at("aligned_alloc"), reinterpret_cast<void *>(&tm_rt_gpu_aligned_alloc));
  EXPECT_EQ(gpu_table.at("calloc"), reinterpret_cast<void *>(&tm_rt_gpu_calloc));
  EXPECT_EQ(gpu_table.at("free"), reinterpret_cast<void *>(&tm_rt_gpu_free));
  for (const char *name :
       {"mgpuModuleLoad", "mgpuModuleLoadJIT", "mgpuModuleUnload", "mgpuModuleGetFunction",
        "mgpuStreamCreate", "mgpuStreamDestroy", "mgpuStreamSynchronize", "mgpuStreamWaitEvent",
        "mgpuEventCreate", "mgpuEventDestroy", "mgpuEventSynchronize", "mgpuEventRecord",
        "mgpuLaunchKernel", "mgpuMemAlloc", "mgpuMemFree", "mgpuMemcpy", "mgpuMemset32",
        "mgpuMemset16", "mgpuSetDefaultDevice"}) {
    ASSERT_TRUE(gpu_table.count(name)) << name;
    EXPECT_NE(gpu_table.at(name), nullptr) << name;
    EXPECT_EQ(cpu.count(name), 0u) << name;
  }
  // Everything else is the host table's (libm, memcpy).
  for (const auto &[name, address] : cpu)
    if (name != "malloc" && name != "aligned_alloc" && name != "calloc" && name != "free")
      EXPECT_EQ(gpu_table.at(name), address) << name;
  // Host devices resolve to the guarded allocator.
  EXPECT_EQ(cpu.at("malloc"), reinterpret_cast<void *>(&tm_rt_malloc));
  EXPECT_EQ(cpu.at("calloc"), reinterpret_cast<void *>(&tm_rt_calloc));
  EXPECT_EQ(cpu.at("free"), reinterpret_cast<void *>(&tm_rt_free));
}

// ---------------------------------------------------------------------------------------
// Without a driver: this machine, or any without libcuda.so.1 on the library path.

TEST(CudaNoDriver, DriverIsUnsupportedAndNamesTheLibrary) {
  if (UsingStubDriver() || DriverLibraryPresent())
    GTEST_SKIP() << "a CUDA driver library is present";
  const Status status = DriverStatus();
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message().rfind("no CUDA driver", 0), 0u) << status.message();
  EXPECT_TRUE(Contains(status.message(), "libcuda.so.1")) << status.message();
  // Said once, not "libcuda.so.1: libcuda.so.1: ...".
  EXPECT_FALSE(Contains(status.message(), "libcuda.so.1: libcuda.so.1")) << status.message();
  // The result is kept: the same status again, and the description says the same.
  EXPECT_EQ(DriverStatus().message(), status.message());
  EXPECT_EQ(gpu::DeviceDescription(), status.message());
  EXPECT_EQ(gpu::MakeContextCurrent().message(), status.message());
  void *block = reinterpret_cast<void *>(1);
  EXPECT_EQ(gpu::ManagedAlloc(16, &block).code(), StatusCode::kUnsupported);
  EXPECT_EQ(block, nullptr);
  gpu::ManagedFree(nullptr);
  EXPECT_EQ(gpu::Synchronize().code(), StatusCode::kUnsupported);
  int major = 1, minor = 1;
  EXPECT_EQ(gpu::ComputeCapability(&major, &minor).code(), StatusCode::kUnsupported);
  EXPECT_EQ(major, 0);
}

TEST(CudaNoDriver, ErrorNamesComeFromOurTableWithoutADriver) {
  EXPECT_EQ(gpu::CudaErrorName(100), "CUDA_ERROR_NO_DEVICE (100)");
  EXPECT_EQ(gpu::CudaErrorName(34), "CUDA_ERROR_STUB_LIBRARY (34)");
  EXPECT_EQ(gpu::CudaErrorName(123456), "CUDA error (123456)");
  const Status oom = gpu::CudaCallFailed("cuMemAlloc(64 bytes)", 2);
  EXPECT_EQ(oom.code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(oom.message(), "cuMemAlloc(64 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
  EXPECT_EQ(gpu::CudaCallFailed("cuLaunchKernel", 719).code(), StatusCode::kRuntime);
}

// The host object's constructor loads the module outside any call; the failure is kept and
// the program's first kernel lookup, inside the call, unwinds with it.
void LookUpKernelOfUnloadedModule(void **) {
  (void)mgpuModuleGetFunction(nullptr, "k");
  reached_end = true;
}

// Also valid with the stub driver (its failure is a different one, the same way).
void CheckModuleLoadFailureReachesTheCall() {
  const Status driver = DriverStatus();
  if (driver.ok()) GTEST_SKIP() << "a GPU is present: " << gpu::DeviceDescription();
  std::vector<char> ptx(kIotaPtx, kIotaPtx + sizeof(kIotaPtx));
  EXPECT_EQ(mgpuModuleLoadJIT(ptx.data(), 2), nullptr);
  const Status recorded = gpu::LastModuleLoadError();
  EXPECT_EQ(recorded.code(), driver.code());
  EXPECT_TRUE(Contains(recorded.message(), "the GPU module (PTX, " +
                                               std::to_string(std::strlen(kIotaPtx)) +
                                               " bytes) could not be loaded"))
      << recorded.message();
  EXPECT_TRUE(Contains(recorded.message(), driver.message())) << recorded.message();

  reached_end = false;
  const Status status = CallGuarded(&LookUpKernelOfUnloadedModule, nullptr);
  EXPECT_FALSE(reached_end);
  EXPECT_EQ(status.code(), driver.code());
  EXPECT_TRUE(Contains(status.message(), "cannot launch GPU kernel 'k'")) << status.message();
  EXPECT_TRUE(Contains(status.message(), driver.message())) << status.message();
  // Unloading what never loaded is harmless.
  mgpuModuleUnload(nullptr);
}

TEST(CudaNoDriver, ModuleLoadFailureIsTheStatusOfTheFirstLaunch) {
  CheckModuleLoadFailureReachesTheCall();
}

void AllocateHostAndManaged(void **) {
  void *host = tm_rt_malloc(4096);  // the CPU allocator's block: freed by the unwind too
  std::memset(host, 0, 4096);
  (void)tm_rt_gpu_malloc(1024);
  reached_end = true;
}

void CheckManagedAllocationUnwinds() {
  const Status driver = DriverStatus();
  if (driver.ok()) GTEST_SKIP() << "a GPU is present: " << gpu::DeviceDescription();
  reached_end = false;
  const Status status = CallGuarded(&AllocateHostAndManaged, nullptr);
  EXPECT_FALSE(reached_end);
  EXPECT_EQ(status.code(), driver.code());
  EXPECT_TRUE(
      Contains(status.message(), "the program could not allocate 1024 bytes of GPU managed memory"))
      << status.message();
  EXPECT_TRUE(Contains(status.message(), driver.message())) << status.message();
  // Outside a call the allocator returns NULL (and records why) instead of unwinding.
  EXPECT_EQ(tm_rt_gpu_malloc(64), nullptr);
  EXPECT_EQ(tm_rt_gpu_aligned_alloc(64, 64), nullptr);
  EXPECT_EQ(tm_rt_gpu_malloc(0), nullptr);  // zero bytes: NULL, not a failure
  tm_rt_gpu_free(nullptr);
}

TEST(CudaNoDriver, ManagedAllocationInsideACallUnwindsWithTheReason) {
  CheckManagedAllocationUnwinds();
}

// Every mgpu* function fails the same way without a driver, and none crashes.
void CallEveryRuntimeFunction(void **args) {
  const int which = *static_cast<int *>(args[0]);
  int word = 0;
  switch (which) {
    case 0: mgpuModuleLoad(&word, sizeof(word)); break;
    case 1: mgpuStreamCreate(); break;
    case 2: tm_rt_gpu_malloc(64); break;  // (mgpuStreamDestroy does nothing: the stream is kept)
    case 3: mgpuStreamSynchronize(nullptr); break;
    case 4: mgpuStreamWaitEvent(nullptr, nullptr); break;
    case 5: mgpuEventCreate(); break;
    case 6: mgpuEventDestroy(nullptr); break;
    case 7: mgpuEventSynchronize(nullptr); break;
    case 8: mgpuEventRecord(nullptr, nullptr); break;
    case 9: mgpuLaunchKernel(&word, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0); break;
    case 10: mgpuMemAlloc(64, nullptr, false); break;
    case 11: mgpuMemAlloc(64, nullptr, true); break;
    case 12: mgpuMemFree(&word, nullptr); break;
    case 13: mgpuMemcpy(&word, &word, sizeof(word), nullptr); break;
    case 14: mgpuMemset32(&word, 0, 1, nullptr); break;
    case 15: mgpuMemset16(&word, 0, 1, nullptr); break;
    case 16: tm_rt_gpu_aligned_alloc(256, 64); break;
    case 17: mgpuModuleGetFunction(&word, "k"); break;
    case 18: tm_rt_gpu_calloc(16, 4); break;
  }
  reached_end = true;
}

TEST(CudaNoDriver, EveryRuntimeFunctionUnwindsWithTheDriversStatus) {
  const Status driver = DriverStatus();
  if (driver.ok()) GTEST_SKIP() << "a GPU is present: " << gpu::DeviceDescription();
  for (int which = 0; which <= 18; ++which) {
    reached_end = false;
    void *args[] = {&which};
    const Status status = CallGuarded(&CallEveryRuntimeFunction, args);
    EXPECT_FALSE(reached_end) << which;
    EXPECT_EQ(status.code(), driver.code()) << which << ": " << status.message();
    EXPECT_TRUE(Contains(status.message(), driver.message())) << which << ": " << status.message();
  }
}

void ChooseDevice7(void **) {
  mgpuSetDefaultDevice(7);
  reached_end = true;
}

TEST(CudaNoDriver, OnlyDeviceZeroExists) {
  mgpuSetDefaultDevice(0);  // needs no driver
  reached_end = false;
  const Status status = CallGuarded(&ChooseDevice7, nullptr);
  EXPECT_FALSE(reached_end);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(Contains(status.message(), "device 7")) << status.message();
}

// ---------------------------------------------------------------------------------------
// With the CUDA toolkit's stub libcuda.so (the gpu_shim_stub_driver test): the library loads,
// every call answers CUDA_ERROR_STUB_LIBRARY, cuGetErrorName included.

TEST(CudaStubDriver, DriverNamesTheStubsError) {
  if (!UsingStubDriver()) GTEST_SKIP() << "run by gpu_shim_stub_driver with the stub driver";
  const Status status = DriverStatus();
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message(), "no CUDA device: cuInit(0) failed: CUDA_ERROR_STUB_LIBRARY (34)");
  EXPECT_EQ(gpu::DeviceDescription(), status.message());
}

TEST(CudaStubDriver, ModuleLoadFailureIsTheStatusOfTheFirstLaunch) {
  if (!UsingStubDriver()) GTEST_SKIP() << "run by gpu_shim_stub_driver with the stub driver";
  CheckModuleLoadFailureReachesTheCall();
}

TEST(CudaStubDriver, ManagedAllocationInsideACallUnwindsWithTheReason) {
  if (!UsingStubDriver()) GTEST_SKIP() << "run by gpu_shim_stub_driver with the stub driver";
  CheckManagedAllocationUnwinds();
}

// ---------------------------------------------------------------------------------------
// With a GPU.

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status status = DriverStatus();
    if (!status.ok()) GTEST_SKIP() << "no GPU: " << status.message();
  }
};

TEST_F(CudaDevice, DescribesDeviceZero) {
  const gpu::CudaDriver *driver = nullptr;
  ASSERT_TRUE(gpu::Driver(&driver).ok());
  EXPECT_FALSE(driver->device_name.empty());
  EXPECT_GE(driver->driver_version, 11000);
  int major = 0, minor = 0;
  ASSERT_TRUE(gpu::ComputeCapability(&major, &minor).ok());
  EXPECT_GE(major, 5);
  const std::string description = gpu::DeviceDescription();
  EXPECT_TRUE(Contains(description, driver->device_name)) << description;
  EXPECT_TRUE(Contains(description, "sm_" + std::to_string(major) + std::to_string(minor)))
      << description;
  EXPECT_TRUE(gpu::Synchronize().ok());
}

TEST_F(CudaDevice, ManagedMemoryIsHostReachable) {
  void *block = nullptr;
  ASSERT_TRUE(gpu::ManagedAlloc(1 << 20, &block).ok());
  ASSERT_NE(block, nullptr);
  std::memset(block, 7, 1 << 20);
  EXPECT_EQ(static_cast<unsigned char *>(block)[12345], 7);
  gpu::ManagedFree(block);
  void *none = reinterpret_cast<void *>(1);
  ASSERT_TRUE(gpu::ManagedAlloc(0, &none).ok());
  EXPECT_EQ(none, nullptr);
}

// A block the host wrote moves to the device and stays host-reachable. (Whether host memory
// is refused depends on the system: with HMM the driver may take it; the fake driver's test
// checks the refusal's message.)
TEST_F(CudaDevice, ManagedMemoryIsPrefetchedToTheDevice) {
  void *block = nullptr;
  ASSERT_TRUE(gpu::ManagedAlloc(1 << 20, &block).ok());
  std::memset(block, 7, 1 << 20);
  const Status moved = gpu::PrefetchToDevice(block, 1 << 20);
  EXPECT_TRUE(moved.ok()) << moved.message();
  EXPECT_EQ(static_cast<unsigned char *>(block)[12345], 7);
  gpu::ManagedFree(block);
}

TEST_F(CudaDevice, ModulesAreLoadedOncePerContent) {
  std::vector<char> a(kIotaPtx, kIotaPtx + sizeof(kIotaPtx));
  std::vector<char> b = a;  // the same bytes at another address
  void *first = mgpuModuleLoadJIT(a.data(), 2);
  ASSERT_NE(first, nullptr) << gpu::LastModuleLoadError().message();
  EXPECT_EQ(mgpuModuleLoadJIT(b.data(), 2), first);
  mgpuModuleUnload(first);  // a no-op: still usable
  EXPECT_EQ(mgpuModuleLoadJIT(a.data(), 2), first);
}

struct IotaRun {
  void *module;
  uint32_t n;
  float scale;
  std::vector<float> *out;
  intptr_t block_x;  // threads per block
};

// What a GPU program's host code does: look up the kernel, make a stream and a buffer the
// device can reach, launch, wait, read, release.
void RunIota(void **args) {
  IotaRun *run = static_cast<IotaRun *>(args[0]);
  void *function = mgpuModuleGetFunction(run->module, "iota_scale");
  void *stream = mgpuStreamCreate();
  void *event = mgpuEventCreate();
  float *out = static_cast<float *>(tm_rt_gpu_aligned_alloc(64, run->n * sizeof(float)));
  mgpuMemset32(out, 0xffffffffu, run->n, stream);
  void *device = mgpuMemAlloc(run->n * sizeof(float), stream, false);
  uint32_t n = run->n;
  float scale = run->scale;
  void *params[] = {&device, &scale, &n};
  const intptr_t grid = (static_cast<intptr_t>(n) + run->block_x - 1) / run->block_x;
  mgpuLaunchKernel(function, grid, 1, 1, run->block_x, 1, 1, 0, stream, params, nullptr, 3);
  mgpuEventRecord(event, stream);
  mgpuStreamWaitEvent(stream, event);
  mgpuMemcpy(out, device, n * sizeof(float), stream);
  mgpuStreamSynchronize(stream);
  mgpuEventSynchronize(event);
  run->out->assign(out, out + n);
  mgpuMemFree(device, stream);
  tm_rt_gpu_free(out);
  mgpuEventDestroy(event);
  mgpuStreamDestroy(stream);
}

TEST_F(CudaDevice, AKernelRunsUnderTheGuard) {
  std::vector<char> ptx(kIotaPtx, kIotaPtx + sizeof(kIotaPtx));
  std::vector<float> out;
  IotaRun run{mgpuModuleLoadJIT(ptx.data(), 2), 1000, 0.5f, &out, 128};
  ASSERT_NE(run.module, nullptr) << gpu::LastModuleLoadError().message();
  void *args[] = {&run};
  const Status status = CallGuarded(&RunIota, args);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(out.size(), 1000u);
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(out[i], 0.5f * static_cast<float>(i)) << i;
}

TEST_F(CudaDevice, ABadLaunchUnwindsNamingTheCallAndTheError) {
  std::vector<char> ptx(kIotaPtx, kIotaPtx + sizeof(kIotaPtx));
  std::vector<float> out;
  // 4096 threads per block: more than any GPU has.
  IotaRun run{mgpuModuleLoadJIT(ptx.data(), 2), 1000, 0.5f, &out, 4096};
  ASSERT_NE(run.module, nullptr) << gpu::LastModuleLoadError().message();
  void *args[] = {&run};
  const Status status = CallGuarded(&RunIota, args);
  EXPECT_EQ(status.code(), StatusCode::kRuntime);
  EXPECT_TRUE(Contains(status.message(), "cuLaunchKernel(grid 1x1x1, block 4096x1x1"))
      << status.message();
  EXPECT_TRUE(Contains(status.message(), "CUDA_ERROR_INVALID_VALUE")) << status.message();
  EXPECT_TRUE(out.empty());
  // The context is still usable (an invalid launch is not a sticky error).
  EXPECT_TRUE(gpu::Synchronize().ok());
}

void LookUpMissingKernel(void **args) {
  mgpuModuleGetFunction(args[0], "no_such_kernel");
  reached_end = true;
}

TEST_F(CudaDevice, AMissingKernelIsNotFound) {
  std::vector<char> ptx(kIotaPtx, kIotaPtx + sizeof(kIotaPtx));
  void *module = mgpuModuleLoadJIT(ptx.data(), 2);
  ASSERT_NE(module, nullptr) << gpu::LastModuleLoadError().message();
  reached_end = false;
  void *args[] = {module};
  const Status status = CallGuarded(&LookUpMissingKernel, args);
  EXPECT_FALSE(reached_end);
  EXPECT_TRUE(Contains(status.message(), "'no_such_kernel'")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "CUDA_ERROR_NOT_FOUND")) << status.message();
}

TEST_F(CudaDevice, BadPtxIsRecordedWithTheJitLog) {
  std::string ptx = ".version 7.0\n.target sm_52\n.address_size 64\nthis is not ptx\n";
  EXPECT_EQ(mgpuModuleLoadJIT(ptx.data(), 2), nullptr);
  const Status recorded = gpu::LastModuleLoadError();
  EXPECT_EQ(recorded.code(), StatusCode::kRuntime);
  // The software device has no CPU bodies for it: the JIT log says so.
  const std::string expected = UsingSoftwareDevice()
                                   ? "CUDA_ERROR_NO_BINARY_FOR_GPU (209): the software GPU has "
                                     "no CPU kernel bodies for this module"
                                   : "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX";
  EXPECT_TRUE(Contains(recorded.message(), expected)) << recorded.message();
}

}  // namespace
}  // namespace tinymlir
