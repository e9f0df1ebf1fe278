// The GPU target's host side against a CUDA driver without a GPU (fake_cuda_driver.cpp, put
// first on the library path by CTest): module loading, kernel lookup, the launches' dimensions
// and arguments, managed memory for the program's buffers, the invoke's staging of the
// caller's tensors, and GPT-2's weights uploaded once. Kernels do not run there, so values
// are not checked here (GPU emulation and scripts/gpu-check.sh do that); what is checked is
// what a real driver would only show by faulting: every pointer a kernel gets is device-
// reachable, every kernel asked for exists, every launch fits the device.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_toolkit.h"
#include "gpu_op_cases.h"
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
  int Count(const char *line) const { return CountSubstr(text, std::string(line) + "\n"); }
  bool Clean() const { return text.find("violation") == std::string::npos; }
  std::string text;
};

TEST(GpuHostPath, TheFakeDriverIsTheOneLoaded) {
  ASSERT_NE(std::getenv("FAKE_CUDA_LOG"), nullptr) << "run under CTest";
  void *block = nullptr;
  TM_ASSERT_OK(tm_process_managed_alloc(4096, &block));
  tm_process_managed_free(block);
}

// tm_process_managed_prefetch moves a managed block, or part of it; memory the driver did not
// allocate, or a range past a block's end, is the driver's error, named.
TEST(GpuHostPath, ManagedBlocksArePrefetchedAndOtherMemoryIsRefused) {
  void *block = nullptr;
  TM_ASSERT_OK(tm_process_managed_alloc(8192, &block));
  const size_t before = DriverLog().size();
  TM_ASSERT_OK(tm_process_managed_prefetch(block, 8192));
  TM_ASSERT_OK(tm_process_managed_prefetch(static_cast<char *>(block) + 4096, 100));
  TM_ASSERT_OK(tm_process_managed_prefetch(block, 0));
  const LogSince log(before);
  EXPECT_EQ(log.Count("prefetch 8192") + log.Count("prefetch 100"), 2) << log.text;
  EXPECT_TRUE(log.Clean()) << log.text;
  std::vector<char> host(64);
  for (auto [what, p, bytes] :
       {std::tuple<const char *, const void *, size_t>{"host memory", host.data(), host.size()},
        {"past the end", block, 8193}}) {
    SCOPED_TRACE(what);
    TM_EXPECT_STATUS(tm_process_managed_prefetch(p, bytes), TM_ERROR_RUNTIME);
    const std::string msg = tm_last_error();
    EXPECT_EQ(msg.rfind("tm_process_managed_prefetch: cuMemPrefetchAsync(", 0), 0u) << msg;
    EXPECT_NE(msg.find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << msg;
  }
  tm_process_managed_free(block);
}

// Every op kind (gpu_op_cases.h), as PTX or as cubin: invoked on the caller's host arrays
// (zeros: valid gather indices too), each launches its kernels with device-reachable
// arguments only, and each output is copied back from the device. The fake driver runs no
// kernel, so device memory holds only zeros (fresh blocks and copies of the zero inputs);
// outputs are filled with kOutputFill first, and one still all kOutputFill afterwards was
// never copied back.
constexpr char kOutputFill = static_cast<char>(0xA5);

void EveryOpKindLaunchesItsKernelsOnDeviceMemoryOnly(int cubin) {
  for (const OpCase &c : OpCases()) {
    SCOPED_TRACE(std::string(c.name) + (cubin ? " (cubin)" : " (PTX)"));
    Context ctx = NewContext();
    tm_compile_options o = Options();
    o.target = TM_TARGET_GPU;
    o.gpu_cubin = cubin;
    Program p = CompileCase(ctx, c, o);
    ASSERT_NE(p.get(), nullptr);
    std::vector<std::vector<char>> data;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<tm_tensor> inputs, outputs;
    const int32_t n_in = tm_program_num_inputs(p), n_out = tm_program_num_outputs(p);
    data.reserve(n_in + n_out);
    shapes.reserve(n_in + n_out);
    for (int32_t k = 0; k < n_in + n_out; ++k) {
      const bool in = k < n_in;
      tm_dtype dtype;
      int32_t rank = 0;
      shapes.emplace_back(TM_MAX_RANK);
      TM_ASSERT_OK((in ? tm_program_input_type : tm_program_output_type)(
          p, in ? k : k - n_in, &dtype, &rank, shapes.back().data()));
      shapes.back().resize(rank);
      data.emplace_back(NumElements(shapes.back()) * (dtype == TM_F64 ? 8 : 4),
                        in ? 0 : kOutputFill);
      (in ? inputs : outputs)
          .push_back({data.back().data(), dtype, rank, shapes.back().data(), nullptr});
    }
    const size_t before = DriverLog().size();
    TM_ASSERT_OK(tm_invoke(p, inputs.data(), n_in, outputs.data(), n_out));
    const LogSince log(before);
    EXPECT_GE(log.Launches(), 1) << log.text;
    EXPECT_TRUE(log.Clean()) << log.text;
    for (int32_t k = 0; k < n_out; ++k) {
      const std::vector<char> &bytes = data[n_in + k];
      EXPECT_TRUE(bytes.empty() || std::any_of(bytes.begin(), bytes.end(),
                                               [](char b) { return b != kOutputFill; }))
          << "output " << k << " (" << bytes.size() << " bytes) was not copied back";
    }
  }
}

TEST(GpuHostPath, EveryOpKindLaunchesItsKernelsOnDeviceMemoryOnly) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  EveryOpKindLaunchesItsKernelsOnDeviceMemoryOnly(0);
}

// Cubin is assembled by the CUDA toolkit's ptxas, which refuses PTX that calls math functions
// unless libdevice was linked in: without either, skipped, naming what is missing (CTest runs
// this test on its own: gpu_host_path_cubin_with_a_fake_driver).
TEST(GpuHostPathCubin, EveryOpKindLaunchesItsKernelsOnDeviceMemoryOnly) {
  if (const std::string missing =
          MissingCudaToolkit({CudaToolkitPart::kPtxas, CudaToolkitPart::kLibdevice});
      !missing.empty())
    GTEST_SKIP() << missing;
  EveryOpKindLaunchesItsKernelsOnDeviceMemoryOnly(1);
}

// GPT-2 on the GPU target: weights uploaded once at load, every program's launches clean,
// with and without the KV cache.
TEST(GpuHostPath, Gpt2GeneratesWithEveryLaunchOnDeviceMemory) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  tm_model_options mo;
  tm_model_options_init(&mo);
  mo.target = TM_TARGET_GPU;
  tm_model *model = nullptr;
  const size_t before_load = DriverLog().size();
  TM_ASSERT_OK(tm_model_load(ctx, TM_TEST_DATA_DIR "/tiny-a", &mo, &model));
  // The KV cache is device memory (not managed), one (n_ctx, n_embd) block of floats per
  // layer for K and for V, passed to the programs in place: not copied per call.
  int32_t vocab = 0, n_ctx = 0, n_layer = 0, n_embd = 0;
  TM_ASSERT_OK(tm_model_info(model, &vocab, &n_ctx, &n_layer, &n_embd));
  const std::string load = LogSince(before_load).text;
  EXPECT_GE(CountSubstr(load, "alloc " + std::to_string(int64_t{n_ctx} * n_embd * 4) + "\n"),
            2 * n_layer);
  // Every weight, cache and activation the model keeps is a device buffer: the load makes no
  // managed memory, and moves no managed pages.
  EXPECT_EQ(CountSubstr(load, " managed\n"), 0) << load;
  EXPECT_EQ(CountSubstr(load, "prefetch "), 0) << load;
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
    // Every call queues its kernels on the engine's stream and waits only for what the host
    // reads: the greedy token (and, since this driver runs no kernel, the count of
    // non-finite logits may read non-zero, and the logits come back too), never for the
    // context nor between a layer's calls. The blocks a call frees are reused once the
    // device has passed it, so no cuMemFree waits for a queued kernel.
    EXPECT_EQ(log.Count("wait context"), 0) << log.text;
    if (kv_cache) EXPECT_LE(log.Count("wait stream"), 2 * 4) << log.text;
    EXPECT_GT(log.Launches(), 2 * log.Count("wait stream")) << log.text;
    EXPECT_EQ(log.Count("free waits"), 0) << log.text;
  }
  // The same generation again allocates nothing: the KV cache and the activations are
  // device buffers the model keeps, and the calls' temporaries and staged tensors are the
  // blocks the first generation's calls left idle (core/targets/gpu/run/recycled_blocks.h).
  const size_t before = DriverLog().size();
  tm_generate_options o;
  tm_generate_options_init(&o);
  o.max_new_tokens = 4;
  const int32_t prompt[] = {1, 2, 3};
  int32_t ids[4];
  size_t produced = 0;
  EXPECT_EQ(tm_generate(model, prompt, 3, &o, nullptr, nullptr, ids, 4, &produced), TM_OK)
      << tm_last_error();
  const LogSince log(before);
  EXPECT_GE(log.Launches(), 10) << log.text;
  EXPECT_EQ(CountSubstr(log.text, "alloc "), 0) << log.text;
  tm_model_destroy(model);
}

// The fake driver's entry points that the tests below call directly, and a kernel of one
// pointer parameter loaded through them.
struct FakeDriverCalls {
  using AllocFn = int (*)(unsigned long long *, size_t, unsigned);
  using FreeFn = int (*)(unsigned long long);
  using StreamFn = int (*)(void *);
  using CreateFn = int (*)(void **, unsigned);
  using LoadFn = int (*)(void **, const void *, unsigned, int *, void **);
  using GetFn = int (*)(void **, void *, const char *);
  using LaunchFn = int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void *, void **, void **);
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  AllocFn alloc = Find<AllocFn>("cuMemAllocManaged");
  FreeFn free_block = Find<FreeFn>("cuMemFree_v2");
  CreateFn create = Find<CreateFn>("cuStreamCreate");
  StreamFn wait = Find<StreamFn>("cuStreamSynchronize");
  StreamFn destroy = Find<StreamFn>("cuStreamDestroy_v2");
  LoadFn load = Find<LoadFn>("cuModuleLoadDataEx");
  GetFn get = Find<GetFn>("cuModuleGetFunction");
  LaunchFn launch = Find<LaunchFn>("cuLaunchKernel");

  ~FakeDriverCalls() {
    if (library) dlclose(library);
  }
  bool ok() const {
    return alloc && free_block && create && wait && destroy && load && get && launch;
  }
  template <typename Fn>
  Fn Find(const char *name) {
    return library ? reinterpret_cast<Fn>(dlsym(library, name)) : nullptr;
  }
  // The kernel "k" of a PTX module (*module) with one 64-bit parameter; nullptr if it does
  // not load.
  void *PointerKernel(void **module) {
    const char *ptx =
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\tret;\n}\n";
    void *kernel = nullptr;
    if (load(module, ptx, 0, nullptr, nullptr) != 0 || get(&kernel, *module, "k") != 0)
      return nullptr;
    return kernel;
  }
};

// The fake driver's own check fails on what it is there to catch: a host pointer handed to a
// kernel (so a clean log above means something).
TEST(GpuHostPath, TheFakeDriverRefusesAHostPointerArgument) {
  FakeDriverCalls driver;
  ASSERT_TRUE(driver.ok()) << dlerror();
  void *module = nullptr, *missing = nullptr;
  void *kernel = driver.PointerKernel(&module);
  ASSERT_NE(kernel, nullptr);
  EXPECT_NE(driver.get(&missing, module, "missing"), 0);
  std::vector<float> host(64);
  void *pointer = host.data();
  void *params[] = {&pointer};
  const size_t before = DriverLog().size();
  EXPECT_NE(driver.launch(kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr), 0);
  EXPECT_NE(LogSince(before).text.find("argument 0 is host memory"), std::string::npos);
  EXPECT_NE(driver.launch(kernel, 1, 1, 1, 2048, 1, 1, 0, nullptr, params, nullptr), 0);
}

// And on host code touching memory a queued kernel was given, before anything waited for it:
// the access faults (so the clean runs above, where no host code faulted, mean something).
TEST(GpuHostPath, TheFakeDriverFaultsAHostAccessToMemoryOfAQueuedKernel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  FakeDriverCalls driver;
  ASSERT_TRUE(driver.ok()) << dlerror();
  void *module = nullptr, *stream = nullptr;
  void *kernel = driver.PointerKernel(&module);
  ASSERT_NE(kernel, nullptr);
  unsigned long long address = 0;
  ASSERT_EQ(driver.create(&stream, 0), 0);
  ASSERT_EQ(driver.alloc(&address, 256, 1), 0);
  auto *block = reinterpret_cast<volatile float *>(static_cast<uintptr_t>(address));
  block[0] = 1;
  void *pointer = const_cast<float *>(block);
  void *params[] = {&pointer};
  ASSERT_EQ(driver.launch(kernel, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr), 0);
  EXPECT_DEATH(block[1] = 2, "");
  const size_t before = DriverLog().size();
  EXPECT_NE(driver.destroy(stream), 0);  // nothing waited for the kernel
  EXPECT_NE(LogSince(before).text.find("nobody waited for"), std::string::npos);
  ASSERT_EQ(driver.wait(stream), 0);
  block[1] = 2;  // the host's again
  EXPECT_EQ(block[0] + block[1], 3.0f);
  EXPECT_EQ(driver.destroy(stream), 0);
  EXPECT_EQ(driver.free_block(address), 0);
}

}  // namespace
}  // namespace tmtest
