// The GPU target on a machine without a GPU (CI has none): every op kind compiles to host
// code that launches kernels, the device code is PTX that the CUDA toolkit's ptxas accepts
// for the chosen chip, matmuls use shared-memory tiles with barriers, programs export and
// load like CPU ones, and running one where there is no CUDA driver is a clear error.
// scripts/gpu-check.sh runs the same programs on a GPU and compares them with the CPU.
// Without the CUDA toolkit (Debian's archive has none) PTX is still generated and checked
// here; what needs ptxas (cubin, the PTX's check) or libdevice (math functions, without which
// ptxas refuses the PTX) is skipped, naming what is missing (cuda_toolkit.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "cuda_toolkit.h"
#include "gpu_op_cases.h"
#include "test_util.h"

namespace tmtest {
namespace {

tm_compile_options GpuOptions(int sm = 90) {
  tm_compile_options o = Options();
  o.target = TM_TARGET_GPU;
  o.gpu_sm = sm;
  return o;
}

std::string TempDir() {
  const char *tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/tinymlir-gpu-test-" +
                    std::to_string(getpid());
  std::string cmd = "mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

// Runs the toolkit's ptxas (FindPtxas) on every module of a program's device code; "" when
// all are accepted.
std::string PtxasErrors(const std::string &device_code, const std::string &arch,
                        const std::string &dir) {
  std::vector<std::string> modules;
  std::istringstream lines(device_code);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("// ---- gpu module", 0) == 0) modules.emplace_back();
    if (!modules.empty()) modules.back() += line + "\n";
  }
  if (modules.empty()) return "no device code";
  std::string errors;
  for (size_t i = 0; i < modules.size(); ++i) {
    const std::string ptx = dir + "/m" + std::to_string(i) + ".ptx", log = ptx + ".log";
    WriteFile(ptx, modules[i]);
    const std::string cmd = "'" + FindPtxas() + "' -arch=" + arch + " '" + ptx + "' -o /dev/null > '" +
                            log + "' 2>&1";
    if (std::system(cmd.c_str()) != 0) errors += "module " + std::to_string(i) + ": " + ReadFile(log);
  }
  return errors;
}

TEST(GpuTarget, EveryOpKindCompilesToKernelLaunchesAndPtxasAcceptsThePtx) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  // The op cases call math functions (tanh, exp, erf, ...): their PTX is complete, and ptxas
  // accepts it, only with libdevice linked in.
  const std::string missing =
      MissingCudaToolkit({CudaToolkitPart::kPtxas, CudaToolkitPart::kLibdevice});
  Context ctx = NewContext();
  const std::string dir = TempDir();
  for (const OpCase &c : OpCases()) {
    SCOPED_TRACE(c.name);
    Program p = CompileCase(ctx, c, GpuOptions());
    ASSERT_NE(p.get(), nullptr);
    const std::string host = StageText(p, TM_STAGE_LOWERED);
    EXPECT_NE(host.find("gpu.launch_func"), std::string::npos);
    EXPECT_EQ(host.find("linalg."), std::string::npos) << "linalg left in the host code";
    EXPECT_EQ(host.find("scf."), std::string::npos) << "scf left in the host code";
    // No host loop (a reduction over a leading axis is one kernel, its parallel loops
    // first), and the launches are queued on one stream, never waited for: the engine
    // waits only for results the host reads.
    EXPECT_EQ(host.find("llvm.cond_br"), std::string::npos) << host;
    EXPECT_EQ(CountSubstr(host, "llvm.call @mgpuStreamCreate"), 1) << host;
    EXPECT_EQ(CountSubstr(host, "llvm.call @mgpuStreamSynchronize"), 0) << host;
    EXPECT_EQ(CountSubstr(host, "gpu.launch_func <"), CountSubstr(host, "gpu.launch_func"));
    const std::string ptx = StageText(p, TM_STAGE_ASSEMBLY);
    EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
    if (missing.empty()) {
      EXPECT_EQ(PtxasErrors(ptx, "sm_90", dir), "");
    }
  }
  if (!missing.empty())
    GTEST_SKIP() << missing << " (every op kind compiled to PTX and its host code was checked; "
                 << "ptxas did not check the PTX)";
}

TEST(GpuTarget, MatmulKernelsStageTilesInSharedMemoryWithBarriers) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  for (const OpCase &c : OpCases()) {
    if (std::string(c.name).find("mat") == std::string::npos) continue;  // matmul, matvec
    SCOPED_TRACE(c.name);
    Program p = CompileCase(ctx, c, GpuOptions());
    const std::string ptx = StageText(p, TM_STAGE_ASSEMBLY);
    EXPECT_NE(ptx.find(".shared"), std::string::npos);
    EXPECT_NE(ptx.find("bar.sync"), std::string::npos);
  }
}

// Kernel launches in a program's host code.
int Launches(tm_context *ctx, tm_trace *t) {
  Program p;
  const tm_compile_options o = GpuOptions();
  EXPECT_EQ(tm_compile(ctx, t, &o, p.out()), TM_OK) << tm_last_error();
  return p.get() ? CountSubstr(StageText(p, TM_STAGE_LOWERED), "gpu.launch_func") : -1;
}

// The zeroing of a matmul's fresh output (a linalg.fill) is the kernel's starting value, not
// a kernel of its own: a @ b is one launch, and two products whose zeroings bufferization put
// together before the first are two. (A reduction's zeroing joins the row kernel:
// ARowsReductionAndTheOpsAroundItAreOneKernel.)
TEST(GpuTarget, ZeroingAnOutputIsNoLaunchOfItsOwn) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  for (int64_t rows : {1, 37}) {
    SCOPED_TRACE(rows);
    Trace t = NewTrace(ctx);
    End(t, {Op(tm_op_matmul, t, Input(t, TM_F32, {rows, 19}), Input(t, TM_F32, {19, 23}))});
    EXPECT_EQ(Launches(ctx, t), 1);
    Trace two = NewTrace(ctx);
    tm_value w = Input(two, TM_F32, {19, 23});
    tm_value y1 = Op(tm_op_matmul, two, Input(two, TM_F32, {rows, 19}), w);
    tm_value y2 = Op(tm_op_matmul, two, Input(two, TM_F32, {rows, 19}), w);
    End(two, {Op(tm_op_tanh, two, y1), Op(tm_op_tanh, two, y2)});
    EXPECT_EQ(Launches(ctx, two), 2);
  }
}

// A reduction along rows and the ops around it that work row by row are one kernel, a block
// per row (core/targets/gpu/compile/gpu_row_kernels.h): a row sum with its zeroing and the copy into the
// caller's output, a column sum (its loops interchanged), softmax, and layer norm with GELU
// after it, over one row (decode) and several. Before, each op was a launch of its own: a
// row sum two, softmax four, layer norm five. An op that reads the kernel's results at
// another row (p + p^T) is a kernel of its own. The emulated results are checked in
// GpuEmulation.RowKernelsEqualADoubleLoop.
TEST(GpuTarget, ARowsReductionAndTheOpsAroundItAreOneKernel) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  for (int32_t axis : {0, 1}) {
    Trace t = NewTrace(ctx);
    End(t, {Op(tm_op_reduce_sum, t, Input(t, TM_F32, {6, 33}), axis, 0)});
    EXPECT_EQ(Launches(ctx, t), 1) << "axis " << axis;
  }
  for (int64_t rows : {1, 5}) {
    SCOPED_TRACE(rows);
    Trace s = NewTrace(ctx);
    End(s, {Op(tm_op_softmax, s, Input(s, TM_F32, {rows, 50}), -1)});
    EXPECT_EQ(Launches(ctx, s), 1);
    Trace n = NewTrace(ctx);
    End(n, {Op(tm_op_gelu_tanh, n,
               Op(tm_op_layer_norm, n, Input(n, TM_F32, {rows, 768}), Input(n, TM_F32, {768}),
                  Input(n, TM_F32, {768}), 1e-5))});
    EXPECT_EQ(Launches(ctx, n), 1);
  }
  Trace both = NewTrace(ctx);
  tm_value p = Op(tm_op_softmax, both, Input(both, TM_F32, {8, 8}), -1);
  const int32_t swap[2] = {1, 0};
  End(both, {Op(tm_op_add, both, p, Op(tm_op_transpose, both, p, swap, 2))});
  EXPECT_EQ(Launches(ctx, both), 2);
}

// The elementwise op after a product is the product's epilogue (core/targets/gpu/compile/gpu_matmul.h),
// no launch of its own: tanh(a @ b + bias), a decode step's scaled and masked attention
// scores, and a product that is an output too beside its residual sum. An op that reads the
// product at another element than its own (y + y^T) is not one. The emulated results are
// checked in GpuEmulation.ProductsWithTheirElementwiseEpiloguesEqualADoubleLoop.
TEST(GpuTarget, AnElementwiseOpAfterAProductIsPartOfItsKernel) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  for (int64_t rows : {1, 37}) {
    SCOPED_TRACE(rows);
    Trace t = NewTrace(ctx);
    tm_value y = Op(tm_op_matmul, t, Input(t, TM_F32, {rows, 19}), Input(t, TM_F32, {19, 23}));
    End(t, {Op(tm_op_tanh, t, Op(tm_op_add, t, y, Input(t, TM_F32, {23})))});
    EXPECT_EQ(Launches(ctx, t), 1);

    Trace kept = NewTrace(ctx);
    tm_value p =
        Op(tm_op_matmul, kept, Input(kept, TM_F32, {rows, 19}), Input(kept, TM_F32, {19, 23}));
    End(kept, {p, Op(tm_op_add, kept, p, Input(kept, TM_F32, {rows, 23}))});
    EXPECT_EQ(Launches(ctx, kept), 1);
  }
  Trace scores = NewTrace(ctx);
  tm_value s = Op(tm_op_matmul, scores, Input(scores, TM_F32, {12, 1, 64}),
                  Input(scores, TM_F32, {12, 64, 19}));
  End(scores,
      {Op(tm_op_add, scores, Op(tm_op_mul, scores, s, Op(tm_op_scalar, scores, TM_F32, 0.125)),
          Input(scores, TM_F32, {1, 19}))});
  EXPECT_EQ(Launches(ctx, scores), 1);

  // Heads merged back into rows (a transpose of a batch product) are an epilogue too.
  Trace merged = NewTrace(ctx);
  const int32_t swap[3] = {1, 0, 2};
  End(merged, {Op(tm_op_transpose, merged,
                  Op(tm_op_matmul, merged, Input(merged, TM_F32, {4, 3, 16}),
                     Input(merged, TM_F32, {4, 16, 32})),
                  swap, 3)});
  EXPECT_EQ(Launches(ctx, merged), 1);

  Trace symmetric = NewTrace(ctx);
  tm_value y = Op(tm_op_matmul, symmetric, Input(symmetric, TM_F32, {23, 19}),
                  Input(symmetric, TM_F32, {19, 23}));
  const int32_t perm[2] = {1, 0};
  End(symmetric, {Op(tm_op_add, symmetric, y, Op(tm_op_transpose, symmetric, y, perm, 2))});
  EXPECT_EQ(Launches(ctx, symmetric), 2);
}

// A product's operand that is a transposed copy made for it alone is read in place through a
// view when the transpose keeps rows contiguous (the attention's q and v heads): no copy
// kernel. The keys' transpose, which moves the last dimension, keeps its copy.
TEST(GpuTarget, HeadsSplitOutOfRowsAreReadInPlace) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  const int64_t split[3] = {5, 4, 32};
  auto heads = [&](tm_trace *t, std::vector<int32_t> perm) {
    return Op(tm_op_transpose, t, Op(tm_op_reshape, t, Input(t, TM_F32, {5, 128}), 3, split),
              perm.data(), 3);
  };
  Trace rows_kept = NewTrace(ctx);  // (4, 5, 32) @ (4, 32, 7)
  End(rows_kept, {Op(tm_op_matmul, rows_kept, heads(rows_kept, {1, 0, 2}),
                     Input(rows_kept, TM_F32, {4, 32, 7}))});
  EXPECT_EQ(Launches(ctx, rows_kept), 1);
  Trace rows_moved = NewTrace(ctx);  // (4, 7, 32) @ (4, 32, 5): a copy, then the product
  End(rows_moved, {Op(tm_op_matmul, rows_moved, Input(rows_moved, TM_F32, {4, 7, 32}),
                      heads(rows_moved, {1, 2, 0}))});
  EXPECT_EQ(Launches(ctx, rows_moved), 2);

  // A decode step's attention: as many launches whatever the number of keys, also when the
  // scores have the shape of q's heads (32 keys of heads of 32) and reuse their buffer.
  std::vector<int> launches;
  for (int64_t keys : {8, 32, 64}) {
    Trace t = NewTrace(ctx);
    End(t, AttentionStep(t, 1, keys, 4, 32));
    launches.push_back(Launches(ctx, t));
  }
  // The keys' copy, the scores' product, softmax, the weighted values' product, the copy
  // into the caller's output.
  EXPECT_EQ(launches[0], 5);
  EXPECT_EQ(launches[1], launches[0]);
  EXPECT_EQ(launches[2], launches[0]);
}

// A model repeats itself: identical kernels share one module, compiled to PTX once and
// loaded (JIT-compiled by the driver) once. GPT-2's kjv-tiny blocks traced 24 times as one
// program: PTX generation 5.8 s, 0.9 s merged. Kernels over other shapes stay apart.
TEST(GpuTarget, IdenticalKernelsShareOneModule) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  // The device code's modules and the host's launches of `steps` times y = tanh(x @ w) * 0.5,
  // each on an input x of its own, (8 x 32) or (8 + step x 32).
  auto modules_and_launches = [&](int steps, bool same_shapes) {
    Trace t = NewTrace(ctx);
    tm_value w = Input(t, TM_F32, {32, 32}), half = Op(tm_op_scalar, t, TM_F32, 0.5);
    std::vector<tm_value> ys;
    for (int i = 0; i < steps; ++i) {
      tm_value x = Input(t, TM_F32, {same_shapes ? 8 : 8 + i, 32});
      ys.push_back(Op(tm_op_mul, t, Op(tm_op_tanh, t, Op(tm_op_matmul, t, x, w)), half));
    }
    End(t, ys);
    Program p;
    tm_compile_options o = GpuOptions();
    EXPECT_EQ(tm_compile(ctx, t, &o, p.out()), TM_OK) << tm_last_error();
    return std::make_pair(CountSubstr(StageText(p, TM_STAGE_ASSEMBLY), "// ---- gpu module"),
                          CountSubstr(StageText(p, TM_STAGE_LOWERED), "gpu.launch_func"));
  };
  const int two_modules = modules_and_launches(2, true).first;
  const auto [eight_modules, eight_launches] = modules_and_launches(8, true);
  EXPECT_GE(two_modules, 1);
  EXPECT_EQ(eight_modules, two_modules);
  EXPECT_GE(eight_launches, 8);  // a product (with its tanh and scaling) per step, at least
  const auto [distinct_modules, distinct_launches] = modules_and_launches(8, false);
  EXPECT_EQ(distinct_modules, 8 * two_modules);
  EXPECT_GE(distinct_launches, 8);
}

TEST(GpuTarget, TheChipOptionChangesTheTarget) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  Program p = CompileCase(ctx, OpCases()[0], GpuOptions(80));
  const std::string ptx = StageText(p, TM_STAGE_ASSEMBLY);
  EXPECT_NE(ptx.find(".target sm_80"), std::string::npos);
  EXPECT_EQ(ptx.find("sm_90"), std::string::npos);
  tm_compile_options bad = GpuOptions(7);
  Trace t = NewTrace(ctx);
  End(t, {Op(tm_op_neg, t, Input(t, TM_F32, {2}))});
  Program q;
  TM_EXPECT_STATUS(tm_compile(ctx, t, &bad, q.out()), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("gpu_sm"), std::string::npos) << tm_last_error();
  // The case is tanh(x * w): ptxas accepts its PTX only with libdevice linked in.
  const std::string missing =
      MissingCudaToolkit({CudaToolkitPart::kPtxas, CudaToolkitPart::kLibdevice});
  if (!missing.empty())
    GTEST_SKIP() << missing << " (the PTX targets sm_80; ptxas did not check it)";
  EXPECT_EQ(PtxasErrors(ptx, "sm_80", TempDir()), "");
}

// Cubin is ptxas's output: without ptxas the compile fails, saying so (unless the program
// comes from the disk cache), and the test is skipped.
TEST(GpuTarget, CubinIsAssembledAtCompileTime) {
  Context ctx = NewContext();
  tm_compile_options o = GpuOptions();
  o.gpu_cubin = 1;
  // A product: no math function, so no libdevice needed.
  const std::vector<OpCase> cases = OpCases();
  const auto found = std::find_if(cases.begin(), cases.end(), [](const OpCase &k) {
    return std::string(k.name) == "matmul_odd_sizes";
  });
  ASSERT_NE(found, cases.end());
  const OpCase &c = *found;
  if (const std::string missing = MissingCudaToolkit({CudaToolkitPart::kPtxas}); !missing.empty()) {
    Trace t = NewTrace(ctx, c.name);
    std::vector<tm_value> in;
    for (size_t i = 0; i < c.in_shapes.size(); ++i)
      in.push_back(Input(t, c.dtypes[i], c.in_shapes[i]));
    End(t, c.build(t, in));
    Program p;
    if (tm_compile(ctx, t, &o, p.out()) != TM_OK) {
      EXPECT_NE(std::string(tm_last_error()).find("ptxas"), std::string::npos) << tm_last_error();
    }
    GTEST_SKIP() << missing;
  }
  Program p = CompileCase(ctx, c, o);
  ASSERT_NE(p.get(), nullptr);
  EXPECT_NE(StageText(p, TM_STAGE_ASSEMBLY).find("(cubin, "), std::string::npos);
}

// Without a GPU (or with one: then it must run), an invoke either works or fails with a
// status naming the CUDA driver; nothing crashes and nothing is printed.
TEST(GpuTarget, InvokingWithoutAGpuIsAClearError) {
  TM_SKIP_WITHOUT_LIBDEVICE();
  Context ctx = NewContext();
  const std::vector<OpCase> cases = OpCases();
  const OpCase &c = cases[0];
  Program p = CompileCase(ctx, c, GpuOptions());
  std::vector<float> x(35, 0.5f), w(7, 2.0f), y(35, 0.0f);
  tm_tensor in[] = {View(x.data(), c.in_shapes[0]), View(w.data(), c.in_shapes[1])};
  const std::vector<int64_t> out_shape = {5, 7};
  tm_tensor out = View(y.data(), out_shape);
  const tm_status s = tm_invoke(p, in, 2, &out, 1);
  if (s == TM_OK) {
    for (float v : y) EXPECT_NEAR(v, std::tanh(1.0f), 1e-6);
  } else {
    EXPECT_EQ(s, TM_ERROR_UNSUPPORTED);
    const std::string msg = tm_last_error();
    EXPECT_EQ(msg.rfind("tm_invoke: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  }
}

// Managed memory (weights kept on the device) needs a driver; without one the status says so.
TEST(GpuTarget, ManagedMemoryNeedsTheDriver) {
  TM_EXPECT_STATUS(tm_process_managed_alloc(16, nullptr), TM_ERROR_INVALID_ARGUMENT);
  void *block = reinterpret_cast<void *>(1);
  const tm_status s = tm_process_managed_alloc(1024, &block);
  if (s == TM_OK) {
    ASSERT_NE(block, nullptr);
    static_cast<char *>(block)[1023] = 7;  // host-reachable
  } else {
    EXPECT_EQ(s, TM_ERROR_UNSUPPORTED);
    EXPECT_EQ(block, nullptr);
    EXPECT_NE(std::string(tm_last_error()).find("CUDA"), std::string::npos) << tm_last_error();
  }
  tm_process_managed_free(block);
  tm_process_managed_free(nullptr);
  TM_EXPECT_STATUS(tm_process_managed_prefetch(nullptr, 16), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("block is NULL"), std::string::npos);
  TM_ASSERT_OK(tm_process_managed_prefetch(nullptr, 0));
  if (s != TM_OK) {  // no driver: prefetching says so, as allocating did
    char host[16];
    TM_EXPECT_STATUS(tm_process_managed_prefetch(host, sizeof host), TM_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(tm_last_error()).find("CUDA"), std::string::npos) << tm_last_error();
  }
}

TEST(GpuTarget, ProgramFilesCarryTheDeviceCode) {
  Context ctx = NewContext();
  Program p = CompileCase(ctx, OpCases()[3], GpuOptions());
  const std::string path = TempDir() + "/matmul.tmp";
  TM_ASSERT_OK(tm_program_export(p, path.c_str()));
  Program loaded;
  TM_ASSERT_OK(tm_program_load(path.c_str(), loaded.out()));
  EXPECT_EQ(StageText(loaded, TM_STAGE_ASSEMBLY), StageText(p, TM_STAGE_ASSEMBLY));
  EXPECT_EQ(tm_program_num_inputs(loaded), 2);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tmtest
