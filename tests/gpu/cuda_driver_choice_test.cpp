// TINYMLIR_CUDA_DRIVER chooses the driver the shim loads (core/targets/gpu/run/cuda_driver.h).
// The choice is read once per process, so CTest runs each case in a process of its own with
// its variables set (tests/CMakeLists.txt); none of them skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/targets/gpu/run/cuda_driver.h"

namespace tinymlir {
namespace gpu {
namespace {

bool Contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::string Setting(const char *name) {
  const char *value = std::getenv(name);
  return value ? value : "";
}

// TINYMLIR_CUDA_DRIVER=/no/such/libcuda.so.1
TEST(DriverChoice, AMissingLibraryIsUnsupportedNamingItAndTheVariable) {
  const CudaDriver *d = nullptr;
  const Status status = Driver(&d);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message().rfind("no CUDA driver: " + Setting("TINYMLIR_CUDA_DRIVER"), 0), 0u)
      << status.message();
  EXPECT_TRUE(Contains(status.message(), "TINYMLIR_CUDA_DRIVER names it")) << status.message();
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(DeviceDescription(), status.message());
}

// TINYMLIR_CUDA_DRIVER=software, TINYMLIR_SOFTWARE_GPU_MEMORY=lots
TEST(DriverChoice, ASoftwareMemoryThatIsNotASizeIsRefusedNamingTheVariable) {
  const CudaDriver *d = nullptr;
  const Status status = Driver(&d);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "TINYMLIR_SOFTWARE_GPU_MEMORY is 'lots': it takes the software GPU's memory in "
            "bytes, with K, M, G or T for powers of 1024 (e.g. 64M); unset, 4G");
}

// TINYMLIR_CUDA_DRIVER=<the tests' fake libcuda.so.1, by path>
TEST(DriverChoice, APathLoadsThatLibrary) {
  const CudaDriver *d = nullptr;
  const Status status = Driver(&d);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(d->library, Setting("TINYMLIR_CUDA_DRIVER"));
  EXPECT_EQ(d->device_name, "Fake CUDA device (no GPU)");
  // The fake driver has no graphs: those functions are optional and absent.
  EXPECT_EQ(d->cuGraphLaunch, nullptr);
}

// TINYMLIR_CUDA_DRIVER=software
TEST(DriverChoice, SoftwareIsTheCpuBackedDevice) {
  const CudaDriver *d = nullptr;
  const Status status = Driver(&d);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(d->library, "software");
  EXPECT_NE(d->cuGraphLaunch, nullptr);
  EXPECT_EQ(DeviceDescription(), "tinymlir software GPU (sm_90), CUDA driver 13.0");
}

}  // namespace
}  // namespace gpu
}  // namespace tinymlir
