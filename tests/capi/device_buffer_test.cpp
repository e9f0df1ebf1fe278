// Device buffers (tm_device_buffer_*), against host loops in double precision:
// - on the CPU target, where a buffer is host memory: bytes in, out, copied and filled, a
//   program reading and writing buffers in place, and every argument and range checked;
// - on the GPU target (the software CUDA device: CTest runs DeviceBufferGpu.* as
//   capi_device_buffers_software_gpu; without a driver they skip): programs chained through
//   buffers without the host waiting (the engine's counters), every tensor tm_invoke cannot
//   take in device memory refused by name, buffers of two devices kept apart;
// - within TINYMLIR_GPU_MEMORY_BUDGET (DeviceBufferBudget.*, its own CTest entry): the
//   engine's out-of-memory message.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace tmtest {
namespace {

// RAII for a tm_device_buffer.
struct Buffer {
  tm_device_buffer *b = nullptr;
  ~Buffer() { tm_device_buffer_destroy(b); }
  float *floats(size_t at = 0) const {
    return static_cast<float *>(tm_device_buffer_data(b)) + at;
  }
};

bool Contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

// y = x * 3 + 1 over n floats.
Program AffineProgram(tm_context *ctx, tm_target target, int64_t n) {
  Trace t = NewTrace(ctx, "affine");
  const tm_value x = Input(t.get(), TM_F32, {n});
  const tm_value three = Op(tm_op_scalar, t.get(), TM_F32, 3.0);
  const tm_value one = Op(tm_op_scalar, t.get(), TM_F32, 1.0);
  const tm_value y = Op(tm_op_add, t.get(), Op(tm_op_mul, t.get(), x, three), one);
  End(t.get(), {y});
  tm_compile_options o = Options();
  o.target = target;
  Program p;
  EXPECT_EQ(tm_compile(ctx, t.get(), &o, p.out()), TM_OK) << tm_last_error();
  return p;
}

tm_device_counters CountersNow(tm_target target) {
  tm_device_counters c = {};
  c.struct_size = sizeof c;
  EXPECT_EQ(tm_target_get_device_counters(target, &c), TM_OK) << tm_last_error();
  return c;
}

TEST(DeviceBuffer, ACpuBufferStartsAtZeroAndTakesBytesInOutCopiedAndFilled) {
  Buffer a, b;
  TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_CPU, 64, &a.b));
  TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_CPU, 64, &b.b));
  EXPECT_EQ(tm_device_buffer_size(a.b), 64u);
  EXPECT_EQ(tm_device_buffer_target(a.b), TM_TARGET_CPU);
  ASSERT_NE(tm_device_buffer_data(a.b), nullptr);
  std::vector<uint8_t> bytes(64, 0xff);
  TM_ASSERT_OK(tm_device_buffer_read(a.b, 0, bytes.data(), 64));
  EXPECT_EQ(bytes, std::vector<uint8_t>(64, 0));
  const uint8_t word[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  TM_ASSERT_OK(tm_device_buffer_write(a.b, 8, word, 8));
  TM_ASSERT_OK(tm_device_buffer_fill(a.b, 20, 0x5a, 4));
  TM_ASSERT_OK(tm_device_buffer_copy(b.b, 32, a.b, 8, 16));
  TM_ASSERT_OK(tm_device_buffer_read(b.b, 0, bytes.data(), 64));
  std::vector<uint8_t> want(64, 0);
  for (int i = 0; i < 8; ++i) want[32 + i] = word[i];
  for (int i = 12; i < 16; ++i) want[32 + i] = 0x5a;
  EXPECT_EQ(bytes, want);
}

TEST(DeviceBuffer, ArgumentsAndRangesAreCheckedAndNamed) {
  tm_device_buffer *none = reinterpret_cast<tm_device_buffer *>(1);
  TM_EXPECT_STATUS(tm_device_buffer_create(TM_TARGET_CPU, 0, &none), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
  EXPECT_TRUE(Contains(tm_last_error(), "bytes is 0")) << tm_last_error();
  TM_EXPECT_STATUS(tm_device_buffer_create(TM_TARGET_CPU, 8, nullptr), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_device_buffer_create(static_cast<tm_target>(99), 8, &none),
                   TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(tm_last_error(), "no target 99")) << tm_last_error();

  Buffer a;
  TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_CPU, 64, &a.b));
  uint8_t bytes[16] = {};
  TM_EXPECT_STATUS(tm_device_buffer_write(a.b, 60, bytes, 8), TM_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(tm_last_error(), "tm_device_buffer_write: bytes [60, 60 + 8)"))
      << tm_last_error();
  EXPECT_TRUE(Contains(tm_last_error(), "the buffer has 64 bytes")) << tm_last_error();
  TM_EXPECT_STATUS(tm_device_buffer_read(a.b, SIZE_MAX, bytes, 2), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_device_buffer_fill(a.b, 1, 0, 64), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_device_buffer_copy(a.b, 0, a.b, 57, 8), TM_ERROR_OUT_OF_RANGE);
  TM_EXPECT_STATUS(tm_device_buffer_copy(a.b, 0, a.b, 4, 8), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(tm_last_error(), "overlap")) << tm_last_error();
  TM_EXPECT_STATUS(tm_device_buffer_write(a.b, 0, nullptr, 4), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_device_buffer_read(a.b, 0, nullptr, 4), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_device_buffer_write(nullptr, 0, bytes, 4), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_device_buffer_copy(nullptr, 0, a.b, 0, 4), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_device_buffer_fill(nullptr, 0, 0, 4), TM_ERROR_INVALID_ARGUMENT);
  // Zero bytes anywhere up to the end, and NULL host memory with them, are fine.
  TM_ASSERT_OK(tm_device_buffer_write(a.b, 64, nullptr, 0));
  TM_ASSERT_OK(tm_device_buffer_read(a.b, 0, nullptr, 0));
  tm_device_buffer_destroy(nullptr);
  EXPECT_EQ(tm_device_buffer_data(nullptr), nullptr);
  EXPECT_EQ(tm_device_buffer_size(nullptr), 0u);
}

// y = 3 x + 1 read from and written to buffers at offsets, against a double loop (exact:
// 3 x + 1 of these x is exact in f32).
void AProgramRunsOnBuffersInPlace(tm_target target) {
  constexpr int64_t n = 1000;
  Context ctx = NewContext();
  Program p = AffineProgram(ctx.get(), target, n);
  ASSERT_NE(p.get(), nullptr);
  Buffer x, y;
  TM_ASSERT_OK(tm_device_buffer_create(target, (n + 16) * sizeof(float), &x.b));
  TM_ASSERT_OK(tm_device_buffer_create(target, (n + 16) * sizeof(float), &y.b));
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
  TM_ASSERT_OK(tm_device_buffer_write(x.b, 16 * sizeof(float), host.data(), n * sizeof(float)));
  const int64_t shape[] = {n};
  const tm_tensor in = {{x.floats(16)}, TM_F32, 1, shape, nullptr};
  const tm_tensor out = {{y.floats(8)}, TM_F32, 1, shape, nullptr};
  TM_ASSERT_OK(tm_invoke(p.get(), &in, 1, &out, 1));
  std::vector<float> result(n + 16, -1.0f);
  TM_ASSERT_OK(tm_device_buffer_read(y.b, 0, result.data(), (n + 16) * sizeof(float)));
  for (int64_t i = 0; i < 8; ++i) ASSERT_EQ(result[i], 0.0f) << i;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(result[8 + i], static_cast<float>(3.0 * host[i] + 1.0)) << i;
  for (int64_t i = n + 8; i < n + 16; ++i) ASSERT_EQ(result[i], 0.0f) << i;
}

TEST(DeviceBuffer, ACpuProgramRunsOnBuffersInPlace) { AProgramRunsOnBuffersInPlace(TM_TARGET_CPU); }

TEST(DeviceBuffer, ATensorRunningPastItsBufferIsRefusedBeforeTheCall) {
  Context ctx = NewContext();
  Program p = AffineProgram(ctx.get(), TM_TARGET_CPU, 64);
  Buffer x;
  TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_CPU, 64 * sizeof(float), &x.b));
  std::vector<float> y(64);
  const int64_t shape[] = {64};
  const tm_tensor in = {{x.floats(1)}, TM_F32, 1, shape, nullptr};
  const tm_tensor out = {{y.data()}, TM_F32, 1, shape, nullptr};
  TM_EXPECT_STATUS(tm_invoke(p.get(), &in, 1, &out, 1), TM_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(tm_last_error(), "input 0: its 256 bytes start at byte 4 of a device "
                                        "buffer of 256 bytes and run past its end"))
      << tm_last_error();
}

// ---- The GPU target, on the software CUDA device ----

class DeviceBufferGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tm_target_check(TM_TARGET_GPU) != TM_OK)
      GTEST_SKIP() << "no GPU here (" << tm_last_error()
                   << "); CTest runs these on the software device";
  }
};

TEST_F(DeviceBufferGpu, AProgramRunsOnBuffersInPlace) { AProgramRunsOnBuffersInPlace(TM_TARGET_GPU); }

// Two programs chained through device buffers: neither call waits for the device, and the
// read waits once; bytes cross only in the write and the read.
TEST_F(DeviceBufferGpu, ProgramsChainThroughBuffersWithoutTheHostWaiting) {
  constexpr int64_t n = 4096;
  Context ctx = NewContext();
  Program p = AffineProgram(ctx.get(), TM_TARGET_GPU, n);
  Buffer x, y, z;
  for (Buffer *b : {&x, &y, &z})
    TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_GPU, n * sizeof(float), &b->b));
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 13) - 6.0f;
  const int64_t shape[] = {n};
  const tm_tensor tx = {{x.floats()}, TM_F32, 1, shape, nullptr};
  const tm_tensor ty = {{y.floats()}, TM_F32, 1, shape, nullptr};
  const tm_tensor tz = {{z.floats()}, TM_F32, 1, shape, nullptr};
  TM_ASSERT_OK(tm_invoke(p.get(), &tx, 1, &ty, 1));  // compiles and warms the pool first
  const tm_device_counters before = CountersNow(TM_TARGET_GPU);
  TM_ASSERT_OK(tm_device_buffer_write(x.b, 0, host.data(), n * sizeof(float)));
  TM_ASSERT_OK(tm_invoke(p.get(), &tx, 1, &ty, 1));
  TM_ASSERT_OK(tm_invoke(p.get(), &ty, 1, &tz, 1));
  const tm_device_counters queued = CountersNow(TM_TARGET_GPU);
  EXPECT_EQ(queued.host_syncs, before.host_syncs);
  EXPECT_EQ(queued.allocations, before.allocations);
  EXPECT_GE(queued.kernel_launches, before.kernel_launches + 2);
  std::vector<float> result(n);
  TM_ASSERT_OK(tm_device_buffer_read(z.b, 0, result.data(), n * sizeof(float)));
  const tm_device_counters after = CountersNow(TM_TARGET_GPU);
  EXPECT_EQ(after.host_syncs, before.host_syncs + 1);
  EXPECT_EQ(after.bytes_to_device - before.bytes_to_device, n * sizeof(float));
  EXPECT_EQ(after.bytes_from_device - before.bytes_from_device, n * sizeof(float));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(result[i], static_cast<float>(3.0 * (3.0 * host[i] + 1.0) + 1.0)) << i;
}

// What tm_invoke cannot take in device memory, each refused naming the tensor.
TEST_F(DeviceBufferGpu, TensorsThatNeedTheHostAreRefusedByName) {
  Context ctx = NewContext();
  Buffer g, c;
  TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_GPU, 4096, &g.b));
  TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_CPU, 4096, &c.b));
  std::vector<float> host(64);
  const int64_t shape[] = {64};

  // A CPU program reading a GPU buffer.
  Program cpu = AffineProgram(ctx.get(), TM_TARGET_CPU, 64);
  const tm_tensor in_gpu = {{g.floats()}, TM_F32, 1, shape, nullptr};
  const tm_tensor out_host = {{host.data()}, TM_F32, 1, shape, nullptr};
  TM_EXPECT_STATUS(tm_invoke(cpu.get(), &in_gpu, 1, &out_host, 1), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(tm_last_error(), "input 0 lies in a device buffer of the gpu device, but "
                                        "the program runs on the cpu device"))
      << tm_last_error();

  // A GPU program: a strided tensor, and one overlapping the output.
  Program gpu = AffineProgram(ctx.get(), TM_TARGET_GPU, 64);
  const int64_t every_other[] = {2};
  const tm_tensor strided = {{g.floats()}, TM_F32, 1, shape, every_other};
  TM_EXPECT_STATUS(tm_invoke(gpu.get(), &strided, 1, &out_host, 1), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(tm_last_error(), "input 0 lies in device memory and is strided"))
      << tm_last_error();
  const tm_tensor out_gpu = {{g.floats(32)}, TM_F32, 1, shape, nullptr};
  TM_EXPECT_STATUS(tm_invoke(gpu.get(), &in_gpu, 1, &out_gpu, 1), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(tm_last_error(), "input 0 lies in device memory, where the host cannot "
                                        "copy it apart"))
      << tm_last_error();

  // Gather indices, which tm_invoke checks on the host.
  Trace t = NewTrace(ctx.get(), "gather");
  const tm_value table = Input(t.get(), TM_F32, {8, 4});
  const tm_value ids = Input(t.get(), TM_I32, {3});
  End(t.get(), {Op(tm_op_gather, t.get(), table, ids)});
  tm_compile_options o = Options();
  o.target = TM_TARGET_GPU;
  Program gather;
  TM_ASSERT_OK(tm_compile(ctx.get(), t.get(), &o, gather.out()));
  const int64_t table_shape[] = {8, 4}, ids_shape[] = {3}, rows_shape[] = {3, 4};
  std::vector<float> rows(12);
  const tm_tensor gather_in[] = {{{g.floats()}, TM_F32, 2, table_shape, nullptr},
                                 {{g.floats(64)}, TM_I32, 1, ids_shape, nullptr}};
  const tm_tensor gather_out = {{rows.data()}, TM_F32, 2, rows_shape, nullptr};
  TM_EXPECT_STATUS(tm_invoke(gather.get(), gather_in, 2, &gather_out, 1),
                   TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(tm_last_error(), "input 1 lies in device memory, where the host cannot "
                                        "check its gather indices"))
      << tm_last_error();

  // A GPU program on a CPU buffer: host memory, which it stages like any other.
  const tm_tensor in_cpu = {{c.floats()}, TM_F32, 1, shape, nullptr};
  TM_ASSERT_OK(tm_invoke(gpu.get(), &in_cpu, 1, &out_host, 1));
  for (float v : host) ASSERT_EQ(v, 1.0f);

  // Bytes between the devices go through the host.
  TM_EXPECT_STATUS(tm_device_buffer_copy(c.b, 0, g.b, 0, 16), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(tm_last_error(), "dst is on the cpu device and src on the gpu device"))
      << tm_last_error();
}

// TINYMLIR_GPU_MEMORY_BUDGET=1M (CTest: capi_device_buffers_budget).
TEST(DeviceBufferBudget, ABufferPastTheBudgetIsOutOfMemoryNamingTheBytes) {
  const char *budget = std::getenv("TINYMLIR_GPU_MEMORY_BUDGET");
  if (!budget || std::strcmp(budget, "1M") != 0 || tm_target_check(TM_TARGET_GPU) != TM_OK)
    GTEST_SKIP() << "CTest runs this with TINYMLIR_GPU_MEMORY_BUDGET=1M on the software device";
  Buffer half, more;
  TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_GPU, 512 << 10, &half.b));
  TM_EXPECT_STATUS(tm_device_buffer_create(TM_TARGET_GPU, 768 << 10, &more.b),
                   TM_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(more.b, nullptr);
  EXPECT_TRUE(Contains(tm_last_error(),
                       "tm_device_buffer_create: 786432 bytes of GPU memory were asked for, but "
                       "only 524288 of the 1048576 bytes of TINYMLIR_GPU_MEMORY_BUDGET are free"))
      << tm_last_error();
  tm_device_buffer_destroy(half.b);
  half.b = nullptr;
  TM_ASSERT_OK(tm_device_buffer_create(TM_TARGET_GPU, 768 << 10, &more.b));
}

}  // namespace
}  // namespace tmtest
