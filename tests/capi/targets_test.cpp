// The targets as the C API lists them (tm_target_count, tm_target_get_info,
// tm_target_from_name, tm_target_check): every target by value and by name, clear refusals of
// targets that are not there, and what the CPU and GPU targets tell an application.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>

#include "tinymlir/tinymlir.h"

namespace {

tm_target_info Info(tm_target target) {
  tm_target_info info;
  info.struct_size = sizeof info;
  EXPECT_EQ(tm_target_get_info(target, &info), TM_OK) << tm_last_error();
  return info;
}

TEST(Targets, EachTargetHasANameThatFindsIt) {
  const int32_t count = tm_target_count();
  ASSERT_GE(count, 2);
  std::set<std::string> names;
  for (int32_t i = 0; i < count; ++i) {
    const tm_target_info info = Info(static_cast<tm_target>(i));
    ASSERT_NE(info.name, nullptr);
    EXPECT_TRUE(names.insert(info.name).second) << info.name << " twice";
    tm_target found = static_cast<tm_target>(-1);
    ASSERT_EQ(tm_target_from_name(info.name, &found), TM_OK) << tm_last_error();
    EXPECT_EQ(found, i) << info.name;
  }
  EXPECT_TRUE(names.count("cpu") && names.count("gpu"));
  EXPECT_STREQ(Info(TM_TARGET_CPU).name, "cpu");
  EXPECT_STREQ(Info(TM_TARGET_GPU).name, "gpu");
}

TEST(Targets, WhatIsNotThereIsRefusedNamingWhatIs) {
  tm_target_info info;
  info.struct_size = sizeof info;
  EXPECT_EQ(tm_target_get_info(static_cast<tm_target>(tm_target_count()), &info),
            TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("0 (cpu), 1 (gpu)"), std::string::npos)
      << tm_last_error();
  EXPECT_EQ(tm_target_get_info(static_cast<tm_target>(-1), &info), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_target_get_info(TM_TARGET_CPU, nullptr), TM_ERROR_INVALID_ARGUMENT);
  tm_target t;
  EXPECT_EQ(tm_target_from_name("tpu", &t), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("no target named 'tpu' (there are 'cpu', 'gpu'"),
            std::string::npos)
      << tm_last_error();
  EXPECT_EQ(tm_target_from_name("CPU", &t), TM_ERROR_INVALID_ARGUMENT);  // names are exact
  EXPECT_EQ(tm_target_from_name(nullptr, &t), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_target_from_name("cpu", nullptr), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_target_check(static_cast<tm_target>(99)), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("no target 99"), std::string::npos)
      << tm_last_error();
}

TEST(Targets, TheirInfoSaysHowToLayWeightsOut) {
  const tm_target_info cpu = Info(TM_TARGET_CPU);
  EXPECT_EQ(cpu.host_memory, 1);
  EXPECT_EQ(cpu.weights_transposed, 1);
  for (tm_dtype d : {TM_F32, TM_F16, TM_BF16, TM_Q8_0})
    EXPECT_TRUE(cpu.weight_dtypes >> d & 1u) << "cpu reads dtype " << d;
  EXPECT_FALSE(cpu.weight_dtypes >> TM_I32 & 1u);
  const tm_target_info gpu = Info(TM_TARGET_GPU);
  EXPECT_EQ(gpu.host_memory, 0);
  EXPECT_EQ(gpu.weights_transposed, 0);
  EXPECT_EQ(gpu.weight_dtypes, (1u << TM_F32) | (1u << TM_F16) | (1u << TM_BF16));
}

TEST(Targets, TheCpuIsAlwaysThere) { EXPECT_EQ(tm_target_check(TM_TARGET_CPU), TM_OK); }

// The CPU's programs run on the caller's buffers: nothing is asked of a device, however much
// runs. (The GPU's counters are checked on the software device: tests/cli/software_gpu.py.)
TEST(Targets, DeviceCountersAreZeroForTheCpuAndCheckTheirArguments) {
  tm_context *ctx = nullptr;
  ASSERT_EQ(tm_context_create(&ctx), TM_OK);
  tm_trace *trace = nullptr;
  const int64_t shape[1] = {4};
  tm_value x, y;
  ASSERT_EQ(tm_trace_begin(ctx, "counted", &trace), TM_OK);
  ASSERT_EQ(tm_op_input(trace, TM_F32, 1, shape, &x), TM_OK);
  ASSERT_EQ(tm_op_neg(trace, x, &y), TM_OK);
  ASSERT_EQ(tm_trace_end(trace, &y, 1), TM_OK);
  tm_program *program = nullptr;
  ASSERT_EQ(tm_compile(ctx, trace, nullptr, &program), TM_OK) << tm_last_error();
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  tm_tensor a = {in, TM_F32, 1, shape, nullptr}, b = {out, TM_F32, 1, shape, nullptr};
  ASSERT_EQ(tm_invoke(program, &a, 1, &b, 1), TM_OK) << tm_last_error();
  EXPECT_EQ(out[3], -4.0f);
  tm_device_counters c;
  c.struct_size = sizeof c;
  c.kernel_launches = 99;
  ASSERT_EQ(tm_target_get_device_counters(TM_TARGET_CPU, &c), TM_OK) << tm_last_error();
  EXPECT_EQ(c.struct_size, sizeof c);
  for (uint64_t v : {c.graph_launches, c.kernel_launches, c.host_syncs, c.allocations,
                     c.bytes_to_device, c.bytes_from_device})
    EXPECT_EQ(v, 0u);
  EXPECT_EQ(tm_target_get_device_counters(TM_TARGET_CPU, nullptr), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_target_get_device_counters(static_cast<tm_target>(7), &c),
            TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("tm_target_get_device_counters: no target 7"),
            std::string::npos)
      << tm_last_error();
  c.struct_size = TM_DEVICE_COUNTERS_SIZE_V1 - 1;
  EXPECT_EQ(tm_target_get_device_counters(TM_TARGET_GPU, &c), TM_ERROR_INVALID_ARGUMENT);
  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
}

// Without a CUDA driver (this machine, unless one is installed) the GPU target says so at
// once; with one, or with its kernels emulated on the host, it is there.
TEST(Targets, AGpuWithoutADriverIsRefusedAtOnceSayingWhy) {
  const auto start = std::chrono::steady_clock::now();
  const tm_status s = tm_target_check(TM_TARGET_GPU);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (s == TM_OK) {
    GTEST_SKIP() << "a CUDA driver and a GPU are here (or TINYMLIR_GPU_EMULATE is set)";
  }
  EXPECT_EQ(s, TM_ERROR_UNSUPPORTED) << tm_last_error();
  EXPECT_NE(std::string(tm_last_error()).find("CUDA"), std::string::npos) << tm_last_error();
  EXPECT_LT(seconds, 1.0);
}

}  // namespace
