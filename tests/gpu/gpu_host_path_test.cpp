// The GPU target's host side against a CUDA driver without a GPU (fake_cuda_driver.cpp, put
// first on the library path by CTest): module loading, kernel lookup, the launches' dimensions
// and arguments, managed memory for the program's buffers, the invoke's staging of the
// caller's tensors, and GPT-2's weights uploaded once. Kernels do not run there, so values
// are not checked here (GPU emulation and scripts/gpu-check.sh do that); what is checked is
// what a real driver would only show by faulting: every pointer a kernel gets is device-
// reachable, every kernel asked for exists, every launch fits the device.
#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tinymlir/gpt2.h"

namespace tmtest {
namespace {

std::string DriverLog() {
  const char *path = std::getenv("FAKE_CUDA_LOG");
  return path ? ReadFile(path) : "";
}

// The log's lines since `from` (a length of the log read earlier).
struct LogSince {
  explicit LogSince(size_t from) : text(DriverLog().substr(from)) {}
  int Launches() const { return CountSubstr(text, "launch "); }
  bool Clean() const { return text.find("violation") == std::string::npos; }
  std::string text;
};

TEST(GpuHostPath, TheFakeDriverIsTheOneLoaded) {
  ASSERT_NE(std::getenv("FAKE_CUDA_LOG"), nullptr) << "run under CTest";
  void *block = nullptr;
  TM_ASSERT_OK(tm_managed_alloc(4096, &block));
  tm_managed_free(block);
}

struct Case {
  const char *name;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<tm_dtype> dtypes;
  tm_value (*build)(tm_trace *, const std::vector<tm_value> &);
};

const Case kCases[] = {
    {"elementwise", {{5, 7}, {7}}, {TM_F32, TM_F32},
     [](tm_trace *t, const std::vector<tm_value> &v) {
       return Op(tm_op_tanh, t, Op(tm_op_mul, t, v[0], v[1]));
     }},
    {"reduction", {{6, 33}}, {TM_F32},
     [](tm_trace *t, const std::vector<tm_value> &v) { return Op(tm_op_reduce_sum, t, v[0], 1, 0); }},
    {"softmax_layer_norm_gelu", {{4, 50}, {50}, {50}}, {TM_F32, TM_F32, TM_F32},
     [](tm_trace *t, const std::vector<tm_value> &v) {
       return Op(tm_op_gelu_tanh, t,
                 Op(tm_op_layer_norm, t, Op(tm_op_softmax, t, v[0], -1), v[1], v[2], 1e-5));
     }},
    {"matmul", {{37, 19}, {19, 23}}, {TM_F32, TM_F32},
     [](tm_trace *t, const std::vector<tm_value> &v) { return Op(tm_op_matmul, t, v[0], v[1]); }},
    {"batch_matmul_f64", {{3, 5, 17}, {3, 17, 9}}, {TM_F64, TM_F64},
     [](tm_trace *t, const std::vector<tm_value> &v) { return Op(tm_op_matmul, t, v[0], v[1]); }},
    {"constant_tensor", {{3, 4}}, {TM_F32},
     [](tm_trace *t, const std::vector<tm_value> &v) {
       static const float kTable[4] = {1, 2, 3, 4};
       static const int64_t kShape[1] = {4};
       const tm_tensor table = {const_cast<float *>(kTable), TM_F32, 1, kShape, nullptr};
       return Op(tm_op_mul, t, v[0], Op(tm_op_constant, t, &table));
     }},
    {"gather", {{9, 8}, {4}}, {TM_F32, TM_I32},
     [](tm_trace *t, const std::vector<tm_value> &v) { return Op(tm_op_gather, t, v[0], v[1]); }},
};

// Every op kind, as PTX and as cubin: invoked on the caller's host arrays, each launches its
// kernels with device-reachable arguments only.
TEST(GpuHostPath, EveryOpKindLaunchesItsKernelsOnDeviceMemoryOnly) {
  for (int cubin : {0, 1}) {
    for (const Case &c : kCases) {
      SCOPED_TRACE(std::string(c.name) + (cubin ? " (cubin)" : " (PTX)"));
      Context ctx = NewContext();
      Trace t = NewTrace(ctx, c.name);
      std::vector<tm_value> in;
      std::vector<std::vector<char>> data;
      std::vector<tm_tensor> inputs;
      for (size_t i = 0; i < c.shapes.size(); ++i) {
        in.push_back(Input(t, c.dtypes[i], c.shapes[i]));
        const size_t bytes = NumElements(c.shapes[i]) * (c.dtypes[i] == TM_F64 ? 8 : 4);
        data.emplace_back(bytes, 0);  // zeros: valid gather indices too
        inputs.push_back({data.back().data(), c.dtypes[i], static_cast<int32_t>(c.shapes[i].size()),
                          c.shapes[i].data(), nullptr});
      }
      End(t, {c.build(t, in)});
      tm_compile_options o = Options();
      o.target = TM_TARGET_GPU;
      o.gpu_cubin = cubin;
      Program p;
      TM_ASSERT_OK(tm_compile(ctx, t, &o, p.out()));
      tm_dtype dtype;
      int32_t rank = 0;
      std::vector<int64_t> shape(TM_MAX_RANK);
      TM_ASSERT_OK(tm_program_output_type(p, 0, &dtype, &rank, shape.data()));
      shape.resize(rank);
      std::vector<char> out(NumElements(shape) * (dtype == TM_F64 ? 8 : 4));
      tm_tensor output = {out.data(), dtype, rank, shape.data(), nullptr};
      const size_t before = DriverLog().size();
      TM_ASSERT_OK(tm_invoke(p, inputs.data(), static_cast<int32_t>(inputs.size()), &output, 1));
      const LogSince log(before);
      EXPECT_GE(log.Launches(), 1) << log.text;
      EXPECT_TRUE(log.Clean()) << log.text;
    }
  }
}

// GPT-2 on the GPU target: weights uploaded once at load, every program's launches clean,
// with and without the KV cache.
TEST(GpuHostPath, Gpt2GeneratesWithEveryLaunchOnDeviceMemory) {
  Context ctx = NewContext();
  tm_model_options mo;
  tm_model_options_init(&mo);
  mo.target = TM_TARGET_GPU;
  tm_model *model = nullptr;
  TM_ASSERT_OK(tm_model_load(ctx, TM_TEST_DATA_DIR "/tiny-a", &mo, &model));
  for (int kv_cache : {1, 0}) {
    const size_t before = DriverLog().size();
    tm_generate_options o;
    tm_generate_options_init(&o);
    o.max_new_tokens = 4;
    o.use_kv_cache = kv_cache;
    const int32_t prompt[] = {1, 2, 3};
    int32_t ids[4];
    size_t produced = 0;
    EXPECT_EQ(tm_generate(model, prompt, 3, &o, nullptr, nullptr, ids, 4, &produced), TM_OK)
        << tm_last_error();
    EXPECT_EQ(produced, 4u);
    const LogSince log(before);
    EXPECT_GE(log.Launches(), 10) << log.text;
    EXPECT_TRUE(log.Clean()) << log.text;
  }
  tm_model_destroy(model);
}

// The fake driver's own check fails on what it is there to catch: a host pointer handed to a
// kernel (so a clean log above means something).
TEST(GpuHostPath, TheFakeDriverRefusesAHostPointerArgument) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(driver, nullptr) << dlerror();
  using LoadFn = int (*)(void **, const void *, unsigned, int *, void **);
  using GetFn = int (*)(void **, void *, const char *);
  using LaunchFn = int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void *, void **, void **);
  auto load = reinterpret_cast<LoadFn>(dlsym(driver, "cuModuleLoadDataEx"));
  auto get = reinterpret_cast<GetFn>(dlsym(driver, "cuModuleGetFunction"));
  auto launch = reinterpret_cast<LaunchFn>(dlsym(driver, "cuLaunchKernel"));
  ASSERT_TRUE(load && get && launch);
  const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                    ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\tret;\n}\n";
  void *module = nullptr, *kernel = nullptr;
  ASSERT_EQ(load(&module, ptx, 0, nullptr, nullptr), 0);
  ASSERT_EQ(get(&kernel, module, "k"), 0);
  EXPECT_NE(get(&kernel, module, "missing"), 0);
  std::vector<float> host(64);
  void *pointer = host.data();
  void *params[] = {&pointer};
  const size_t before = DriverLog().size();
  EXPECT_NE(launch(kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr), 0);
  EXPECT_NE(LogSince(before).text.find("argument 0 is host memory"), std::string::npos);
  EXPECT_NE(launch(kernel, 1, 1, 1, 2048, 1, 1, 0, nullptr, params, nullptr), 0);
  dlclose(driver);
}

}  // namespace
}  // namespace tmtest
