// The software CUDA device (core/targets/gpu/run/software_device/software_driver.h), through the
// driver table the shim loads for TINYMLIR_CUDA_DRIVER=software: the rules a GPU enforces,
// each broken on purpose and seen to fail as it fails on hardware, and the counters. CTest
// runs these with TINYMLIR_CUDA_DRIVER=software and TINYMLIR_SOFTWARE_GPU_MEMORY=64M.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/support/memory_size.h"
#include "core/targets/gpu/run/cuda_driver.h"
#include "core/targets/gpu/run/software_device/software_driver.h"

namespace tinymlir {
namespace gpu {
namespace {

constexpr CUresult kInvalidValue = 1, kOutOfMemory = 2, kNoBinaryForGpu = 209,
                   kInvalidHandle = 400, kIllegalState = 401, kNotFound = 500,
                   kLaunchFailed = 719, kCaptureUnsupported = 900, kCaptureInvalidated = 901,
                   kCaptureIsolation = 905, kCaptureImplicit = 906;
constexpr int kCaptureRelaxed = 2;
constexpr uint64_t kCapacity = 64ull << 20;

// A module image: PTX text as the GPU compile emits it (never JIT-compiled here; the device
// looks its kernels' CPU bodies up by these bytes).
const char kScalePtx[] = ".version 8.0\n.target sm_90\n.visible .entry scale(...)\n";

// scale(float *data, float factor, uint32_t n): data[i] *= factor, a thread per element.
int ScaleBody(void **params, const uint32_t grid[3], const uint32_t block[3], uint32_t) {
  float *data = *static_cast<float **>(params[0]);
  const float factor = *static_cast<float *>(params[1]);
  const uint32_t n = *static_cast<uint32_t *>(params[2]);
  for (uint32_t b = 0; b < grid[0]; ++b)
    for (uint32_t t = 0; t < block[0]; ++t)
      if (const uint32_t i = b * block[0] + t; i < n) data[i] *= factor;
  return 0;
}

// fail(): a kernel that faults.
int FailBody(void **, const uint32_t *, const uint32_t *, uint32_t) { return 1; }

const uint32_t kScaleParams[] = {8, 4, 4};
const software::KernelEntry kKernels[] = {{"scale", &ScaleBody, kScaleParams, 3},
                                          {"fail", &FailBody, nullptr, 0}};

class SoftwareDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status status = Driver(&d_);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(d_->library, "software");
    software::RegisterKernels(kScalePtx, sizeof kScalePtx - 1, kKernels, 2);
    ASSERT_EQ(d_->cuStreamCreate(&stream_, kCuStreamNonBlocking), 0);
    software::ResetDeviceCounters();
  }
  void TearDown() override {
    // Leaves the device as found: no work, no sticky error, no memory.
    ASSERT_EQ(d_->cuDevicePrimaryCtxReset(0), 0);
    EXPECT_EQ(software::DeviceCountersNow().bytes_in_use, 0u);
  }

  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(d_->cuMemAlloc(&p, bytes), 0);
    return p;
  }
  CUfunction Kernel(const char *name) {
    CUmodule module = nullptr;
    EXPECT_EQ(d_->cuModuleLoadDataEx(&module, kScalePtx, 0, nullptr, nullptr), 0);
    CUfunction f = nullptr;
    EXPECT_EQ(d_->cuModuleGetFunction(&f, module, name), 0);
    return f;
  }
  CUresult LaunchScale(CUfunction f, CUdeviceptr data, float factor, uint32_t n, CUstream s) {
    void *params[] = {&data, &factor, &n};
    return d_->cuLaunchKernel(f, (n + 63) / 64, 1, 1, 64, 1, 1, 0, s, params, nullptr);
  }
  static CUdeviceptr Host(const void *p) { return reinterpret_cast<uintptr_t>(p); }

  const CudaDriver *d_ = nullptr;
  CUstream stream_ = nullptr;
};

TEST_F(SoftwareDevice, DescribesItself) {
  EXPECT_EQ(DeviceDescription(), "tinymlir software GPU (sm_90), CUDA driver 13.0");
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(d_->cuMemGetInfo(&free_bytes, &total), 0);
  EXPECT_EQ(total, kCapacity);
  EXPECT_EQ(free_bytes, kCapacity);
}

TEST_F(SoftwareDevice, TheHostCannotReadDeviceMemory) {
  const CUdeviceptr p = Alloc(4096);
  EXPECT_DEATH((void)*reinterpret_cast<volatile int *>(static_cast<uintptr_t>(p)), "");
  // Managed memory is the host's to read.
  CUdeviceptr managed = 0;
  ASSERT_EQ(d_->cuMemAllocManaged(&managed, 4096, kCuMemAttachGlobal), 0);
  *reinterpret_cast<int *>(static_cast<uintptr_t>(managed)) = 7;
  unsigned is_managed = 2;
  ASSERT_EQ(d_->cuPointerGetAttribute(&is_managed, kCuPointerAttributeIsManaged, managed), 0);
  EXPECT_EQ(is_managed, 1u);
  ASSERT_EQ(d_->cuPointerGetAttribute(&is_managed, kCuPointerAttributeIsManaged, p), 0);
  EXPECT_EQ(is_managed, 0u);
  int host = 0;
  EXPECT_EQ(d_->cuPointerGetAttribute(&is_managed, kCuPointerAttributeIsManaged, Host(&host)),
            kInvalidValue);
}

// As the driver documents for pageable host memory: a copy from it takes the bytes when it
// is queued (the caller may reuse its buffer at once), a copy into it returns only once done.
// Between device and managed memory, a copy completes when the host waits, not before.
TEST_F(SoftwareDevice, CopiesCompleteWhenTheHostWaitsAndNotBefore) {
  std::vector<float> in(1000), out(1000, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  const std::vector<float> sent = in;
  const CUdeviceptr p = Alloc(in.size() * 4);
  CUdeviceptr managed = 0;
  ASSERT_EQ(d_->cuMemAllocManaged(&managed, in.size() * 4, kCuMemAttachGlobal), 0);
  const auto *staged = reinterpret_cast<const float *>(static_cast<uintptr_t>(managed));
  ASSERT_EQ(d_->cuMemcpyAsync(p, Host(in.data()), in.size() * 4, stream_), 0);
  in.assign(in.size(), 7.0f);  // after the call: not what the device gets
  ASSERT_EQ(d_->cuMemcpyAsync(managed, p, in.size() * 4, stream_), 0);
  EXPECT_NE(staged[5], 5.0f);  // queued, not done
  ASSERT_EQ(d_->cuStreamSynchronize(stream_), 0);
  EXPECT_EQ(std::vector<float>(staged, staged + sent.size()), sent);
  ASSERT_EQ(d_->cuMemcpyAsync(Host(out.data()), p, out.size() * 4, stream_), 0);
  EXPECT_EQ(out, sent);  // into host memory: done when the call returns
  const software::DeviceCounters c = software::DeviceCountersNow();
  EXPECT_EQ(c.bytes_to_device, 4000u);
  EXPECT_EQ(c.bytes_from_device, 8000u);
  EXPECT_EQ(c.host_syncs, 2u);  // the stream's, and the copy into host memory's
  EXPECT_EQ(c.allocations, 2u);
  ASSERT_EQ(d_->cuMemFree(managed), 0);
}

TEST_F(SoftwareDevice, ACopyMustStayInsideOneAllocation) {
  std::vector<float> host(300);
  const CUdeviceptr p = Alloc(1024);
  EXPECT_EQ(d_->cuMemcpyAsync(p, Host(host.data()), 1200, stream_), kInvalidValue);
  EXPECT_EQ(d_->cuMemcpyAsync(p + 1024, Host(host.data()), 4, stream_), kInvalidValue);
  EXPECT_EQ(d_->cuMemsetD32Async(p + 2, 0, 4, stream_), kInvalidValue);  // misaligned
  EXPECT_EQ(d_->cuMemsetD32Async(p, 0, 257, stream_), kInvalidValue);
  EXPECT_EQ(d_->cuMemcpyAsync(p, Host(host.data()), 1024, reinterpret_cast<CUstream>(0x999)),
            kInvalidHandle);
  EXPECT_EQ(d_->cuMemFree(p + 256), kInvalidValue);
}

// Streams are ordered only by what the code says: without the event, the second stream's
// read runs before the first stream's write.
TEST_F(SoftwareDevice, StreamsAreOrderedOnlyByEvents) {
  CUstream second = nullptr;
  CUevent written = nullptr;
  ASSERT_EQ(d_->cuStreamCreate(&second, kCuStreamNonBlocking), 0);
  ASSERT_EQ(d_->cuEventCreate(&written, kCuEventDisableTiming), 0);
  const float value = 5.0f;
  for (const bool wait : {false, true}) {
    float out = -1.0f;
    const CUdeviceptr p = Alloc(4);
    ASSERT_EQ(d_->cuMemsetD32Async(p, 0, 1, stream_), 0);
    ASSERT_EQ(d_->cuStreamSynchronize(stream_), 0);
    ASSERT_EQ(d_->cuMemcpyAsync(p, Host(&value), 4, stream_), 0);
    ASSERT_EQ(d_->cuEventRecord(written, stream_), 0);
    if (wait) ASSERT_EQ(d_->cuStreamWaitEvent(second, written, 0), 0);
    ASSERT_EQ(d_->cuMemcpyAsync(Host(&out), p, 4, second), 0);
    ASSERT_EQ(d_->cuCtxSynchronize(), 0);
    EXPECT_EQ(out, wait ? 5.0f : 0.0f) << (wait ? "with" : "without") << " the event";
    ASSERT_EQ(d_->cuMemFree(p), 0);
  }
}

TEST_F(SoftwareDevice, AKernelRunsItsCpuBodyWithTheParametersOfItsLaunch) {
  const CUfunction scale = Kernel("scale");
  std::vector<float> data(1000, 2.0f);
  const CUdeviceptr p = Alloc(data.size() * 4);
  ASSERT_EQ(d_->cuMemcpyAsync(p, Host(data.data()), data.size() * 4, stream_), 0);
  float factor = 3.0f;
  uint32_t n = 999;
  void *params[] = {const_cast<CUdeviceptr *>(&p), &factor, &n};
  ASSERT_EQ(d_->cuLaunchKernel(scale, 16, 1, 1, 64, 1, 1, 0, stream_, params, nullptr), 0);
  factor = 100.0f;  // the launch copied its parameters
  ASSERT_EQ(d_->cuMemcpyAsync(Host(data.data()), p, data.size() * 4, stream_), 0);
  ASSERT_EQ(d_->cuStreamSynchronize(stream_), 0);
  EXPECT_EQ(data[0], 6.0f);
  EXPECT_EQ(data[998], 6.0f);
  EXPECT_EQ(data[999], 2.0f);  // n = 999
  EXPECT_EQ(software::DeviceCountersNow().kernel_launches, 1u);
}

TEST_F(SoftwareDevice, ALaunchBeyondTheLimitsOrWithoutAKernelIsRefused) {
  const CUfunction scale = Kernel("scale");
  const CUdeviceptr p = Alloc(64);
  float factor = 1.0f;
  uint32_t n = 16;
  void *params[] = {const_cast<CUdeviceptr *>(&p), &factor, &n};
  EXPECT_EQ(d_->cuLaunchKernel(scale, 1, 1, 1, 2048, 1, 1, 0, stream_, params, nullptr),
            kInvalidValue);
  EXPECT_EQ(d_->cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 64 * 1024, stream_, params, nullptr),
            kInvalidValue);
  EXPECT_EQ(d_->cuLaunchKernel(scale, 0, 1, 1, 64, 1, 1, 0, stream_, params, nullptr),
            kInvalidValue);
  EXPECT_EQ(d_->cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, stream_, nullptr, nullptr),
            kInvalidValue);
  EXPECT_EQ(d_->cuLaunchKernel(reinterpret_cast<CUfunction>(&factor), 1, 1, 1, 64, 1, 1, 0,
                               stream_, params, nullptr),
            kInvalidHandle);
  // None of these is sticky.
  EXPECT_EQ(d_->cuCtxSynchronize(), 0);
  EXPECT_EQ(software::DeviceCountersNow().kernel_launches, 0u);
}

TEST_F(SoftwareDevice, AModuleWithoutCpuBodiesIsNoBinaryForTheGpu) {
  const char ptx[] = ".version 8.0\n.target sm_90\n.visible .entry other()\n";
  char log[256] = {};
  CUjit_option options[] = {kCuJitErrorLogBuffer, kCuJitErrorLogBufferSizeBytes};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t{sizeof log})};
  CUmodule module = nullptr;
  EXPECT_EQ(d_->cuModuleLoadDataEx(&module, ptx, 2, options, values), kNoBinaryForGpu);
  EXPECT_EQ(module, nullptr);
  EXPECT_NE(std::string(log).find("no CPU kernel bodies"), std::string::npos) << log;
  ASSERT_EQ(d_->cuModuleLoadDataEx(&module, kScalePtx, 0, nullptr, nullptr), 0);
  CUfunction f = nullptr;
  EXPECT_EQ(d_->cuModuleGetFunction(&f, module, "other"), kNotFound);
}

// A kernel that fails fails the context, as a fault does on a GPU: every call then returns
// CUDA_ERROR_LAUNCH_FAILED until the primary context is reset.
TEST_F(SoftwareDevice, AFailedKernelIsStickyUntilTheContextIsReset) {
  const CUfunction fail = Kernel("fail");
  ASSERT_EQ(d_->cuLaunchKernel(fail, 1, 1, 1, 1, 1, 1, 0, stream_, nullptr, nullptr), 0);
  EXPECT_EQ(d_->cuStreamSynchronize(stream_), kLaunchFailed);
  CUdeviceptr p = 0;
  EXPECT_EQ(d_->cuMemAlloc(&p, 64), kLaunchFailed);
  EXPECT_EQ(d_->cuCtxSynchronize(), kLaunchFailed);
  EXPECT_EQ(CudaErrorName(kLaunchFailed), "CUDA_ERROR_LAUNCH_FAILED (719)");
  ASSERT_EQ(d_->cuDevicePrimaryCtxReset(0), 0);
  EXPECT_EQ(d_->cuCtxSynchronize(), 0);
  EXPECT_EQ(d_->cuMemAlloc(&p, 64), 0);
}

TEST_F(SoftwareDevice, MemoryHasACapacity) {
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(d_->cuMemAlloc(&a, 48 << 20), 0);
  EXPECT_EQ(d_->cuMemAlloc(&b, 32 << 20), kOutOfMemory);
  EXPECT_EQ(b, 0u);
  EXPECT_EQ(d_->cuMemAllocManaged(&b, 32 << 20, kCuMemAttachGlobal), kOutOfMemory);
  ASSERT_EQ(d_->cuMemFree(a), 0);
  ASSERT_EQ(d_->cuMemAlloc(&b, 32 << 20), 0);
  EXPECT_EQ(software::DeviceCountersNow().bytes_in_use, 32u << 20);
  EXPECT_EQ(d_->cuMemAlloc(&a, 0), kInvalidValue);
  // Freed blocks merge: the whole capacity is one block again.
  ASSERT_EQ(d_->cuMemFree(b), 0);
  ASSERT_EQ(d_->cuMemAlloc(&a, kCapacity), 0);
  // Through the shim: the status names the call and the error.
  EXPECT_EQ(CudaCallFailed("cuMemAlloc", kOutOfMemory).code(), StatusCode::kOutOfMemory);
}

// A captured stream's work is recorded, not run; the graph replays it at each launch, and
// only launches count.
TEST_F(SoftwareDevice, ACapturedGraphReplaysItsWork) {
  const CUfunction scale = Kernel("scale");
  float value = 1.0f, out = 0.0f;
  const CUdeviceptr p = Alloc(4);
  ASSERT_EQ(d_->cuMemcpyAsync(p, Host(&value), 4, stream_), 0);
  ASSERT_EQ(d_->cuStreamSynchronize(stream_), 0);
  software::ResetDeviceCounters();
  ASSERT_EQ(d_->cuStreamBeginCapture(stream_, kCuStreamCaptureModeGlobal), 0);
  int capturing = 0;
  ASSERT_EQ(d_->cuStreamIsCapturing(stream_, &capturing), 0);
  EXPECT_EQ(capturing, 1);
  ASSERT_EQ(LaunchScale(scale, p, 2.0f, 1, stream_), 0);
  ASSERT_EQ(d_->cuMemcpyAsync(Host(&out), p, 4, stream_), 0);
  CUgraph graph = nullptr;
  ASSERT_EQ(d_->cuStreamEndCapture(stream_, &graph), 0);
  EXPECT_EQ(software::DeviceCountersNow().kernel_launches, 0u);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(d_->cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
  ASSERT_EQ(d_->cuCtxSynchronize(), 0);
  EXPECT_EQ(out, 0.0f);  // nothing ran during the capture
  for (float expected : {2.0f, 4.0f, 8.0f}) {
    ASSERT_EQ(d_->cuGraphLaunch(exec, stream_), 0);
    ASSERT_EQ(d_->cuStreamSynchronize(stream_), 0);
    EXPECT_EQ(out, expected);
  }
  const software::DeviceCounters c = software::DeviceCountersNow();
  EXPECT_EQ(c.graph_launches, 3u);
  EXPECT_EQ(c.kernel_launches, 3u);
  EXPECT_EQ(c.bytes_from_device, 12u);
  EXPECT_EQ(c.host_syncs, 4u);
  EXPECT_EQ(d_->cuGraphExecDestroy(exec), 0);
  EXPECT_EQ(d_->cuGraphDestroy(graph), 0);
  EXPECT_EQ(d_->cuGraphLaunch(exec, stream_), kInvalidHandle);
}

// What capture forbids fails and invalidates the capture, so that ending it fails too.
TEST_F(SoftwareDevice, WhatCaptureForbidsFailsAndInvalidatesTheCapture) {
  CUdeviceptr p = 0;
  const auto expect_invalidated = [&](const char *what) {
    CUgraph graph = reinterpret_cast<CUgraph>(1);
    EXPECT_EQ(d_->cuStreamEndCapture(stream_, &graph), kCaptureInvalidated) << what;
    EXPECT_EQ(graph, nullptr) << what;
  };
  ASSERT_EQ(d_->cuStreamBeginCapture(stream_, kCuStreamCaptureModeGlobal), 0);
  EXPECT_EQ(d_->cuMemAlloc(&p, 64), kCaptureUnsupported);
  expect_invalidated("an allocation");

  ASSERT_EQ(d_->cuStreamBeginCapture(stream_, kCuStreamCaptureModeGlobal), 0);
  EXPECT_EQ(d_->cuCtxSynchronize(), kCaptureUnsupported);
  expect_invalidated("a context synchronisation");

  ASSERT_EQ(d_->cuStreamBeginCapture(stream_, kCaptureRelaxed), 0);
  EXPECT_EQ(d_->cuStreamSynchronize(stream_), kCaptureUnsupported);
  EXPECT_EQ(d_->cuStreamQuery(stream_), kCaptureUnsupported);
  CUgraph graph = nullptr;
  EXPECT_EQ(d_->cuStreamEndCapture(stream_, &graph), 0) << "relaxed mode allows the rest";

  CUevent outside = nullptr;
  ASSERT_EQ(d_->cuEventCreate(&outside, 0), 0);
  ASSERT_EQ(d_->cuEventRecord(outside, stream_), 0);
  ASSERT_EQ(d_->cuStreamBeginCapture(stream_, kCuStreamCaptureModeGlobal), 0);
  EXPECT_EQ(d_->cuStreamWaitEvent(stream_, outside, 0), kCaptureIsolation);
  expect_invalidated("a wait for an event from outside the capture");

  // A blocking stream under capture: the legacy stream's implicit wait for it is an error.
  CUstream blocking = nullptr;
  ASSERT_EQ(d_->cuStreamCreate(&blocking, 0), 0);
  ASSERT_EQ(d_->cuStreamBeginCapture(blocking, kCuStreamCaptureModeGlobal), 0);
  float host = 0.0f;
  CUdeviceptr q = 0;
  ASSERT_EQ(d_->cuMemAllocManaged(&q, 4, kCuMemAttachGlobal), kCaptureUnsupported);
  EXPECT_EQ(d_->cuMemcpyAsync(Host(&host), Host(&host), 4, nullptr), kCaptureImplicit);
  EXPECT_EQ(d_->cuStreamEndCapture(blocking, &graph), kCaptureInvalidated);

  // The legacy stream cannot be captured; a capture cannot begin twice or end unbegun.
  EXPECT_EQ(d_->cuStreamBeginCapture(nullptr, kCuStreamCaptureModeGlobal), kCaptureUnsupported);
  ASSERT_EQ(d_->cuStreamBeginCapture(stream_, kCuStreamCaptureModeGlobal), 0);
  EXPECT_EQ(d_->cuStreamBeginCapture(stream_, kCuStreamCaptureModeGlobal), kIllegalState);
  ASSERT_EQ(d_->cuStreamEndCapture(stream_, &graph), 0);
  EXPECT_EQ(d_->cuStreamEndCapture(stream_, &graph), kIllegalState);
}

TEST(SoftwareDeviceMemorySize, TakesBytesWithPowerOf1024Suffixes) {
  uint64_t bytes = 0;
  EXPECT_TRUE(ParseMemorySize("64M", &bytes));
  EXPECT_EQ(bytes, 64ull << 20);
  EXPECT_TRUE(ParseMemorySize("4G", &bytes));
  EXPECT_EQ(bytes, 4ull << 30);
  EXPECT_TRUE(ParseMemorySize("1000", &bytes));
  EXPECT_EQ(bytes, 1000u);
  for (const char *bad : {"", "0", "-1", "64MB", "64m", "M", "1.5G", "99999999999999999999",
                          "20000000T"})
    EXPECT_FALSE(ParseMemorySize(bad, &bytes)) << bad;
}

}  // namespace
}  // namespace gpu
}  // namespace tinymlir
