// Programs of any size compile in time that grows linearly with their size.
//
// A whole model traced as one program is thousands of ops. Eleven steps of the compile cost
// the square of that or more, each through a mechanism of its own, and each has a test here
// that fails without its remedy:
//   - elementwise fusion clones both bodies at each step, so a chain of n ops fused into one
//     costs n^2 / 2 clones: bodies are bounded (core/compiler/passes/fuse_elementwise.h);
//   - one-shot bufferization checks every write against every value that may share its
//     buffer, and a tensor.empty that CSE shared among many ops makes them all one set: an
//     empty serves a bounded group of users (core/compiler/passes/unshare_tensors.h);
//   - the same analysis gathers, for each operand, every use of every value that may share
//     its buffer, so many readers of one input or constant cost the square of their number:
//     a read-only tensor serves bounded groups of readers too;
//   - a function holding every loop nest makes scf-to-cf and LLVM's loop passes and
//     instruction selection superlinear: each nest is a function of its own
//     (core/compiler/passes/outline_loop_nests.h);
//   - a model repeats itself, and LLVM compiled each repeat of a nest again: identical
//     functions merge (core/compiler/passes/merge_identical_functions.h);
//   - thousands of buffers: the program's function and its C-interface wrapper, whose
//     argument lists grow with the number of buffers, are inlined into the one-argument
//     entry, and each buffer's pointer is loaded where it is used, not all before the
//     first call (native_object.h);
//   - copies between buffers (a slice's, say): linalg.copy loop nests, not runtime calls
//     with descriptors built in the program's function (core/compiler/passes/copies_to_linalg.h);
//   - on the GPU target, LLVM's SLP vectoriser over the host code's one long block of
//     launches: it does not run there (core/compiler/native_compiler.cpp);
//   - CSE compares operations that differ only in their bodies pairwise, its hash leaving
//     regions out: tm-cse hashes them (core/compiler/passes/cse_with_regions.h);
//   - convert-func-to-llvm renumbers the entry block for each argument it converts there:
//     the arguments get a block of their own (core/compiler/passes/argument_block.h);
//   - register allocation of one long block of calls splits and spills every value live
//     across them around each call: the block is cut into functions of a bounded number of
//     calls (core/compiler/codegen/entry_parts.h).
#include <algorithm>
#include <chrono>
#include <functional>
#include <sstream>

#include "test_util.h"

namespace tmtest {
namespace {

constexpr int64_t kRows = 4, kCols = 16;
constexpr size_t kMaxFusedBodyOps = 256;  // core/compiler/passes/fuse_elementwise.h

// The number of operations in each linalg.generic body of an IR text (the lines between
// its block header and its closing "} -> ").
std::vector<int> GenericBodySizes(const std::string &ir) {
  std::vector<int> sizes;
  for (size_t at = ir.find("linalg.generic"); at != std::string::npos;
       at = ir.find("linalg.generic", at + 1)) {
    const size_t body = ir.find("^bb0(", at), end = ir.find("} -> ", at);
    if (body == std::string::npos || end == std::string::npos) break;
    sizes.push_back(static_cast<int>(std::count(ir.begin() + body, ir.begin() + end, '\n')) - 1);
  }
  return sizes;
}

// Compiles trace(steps) in a new context with the default options (null if that failed:
// the failure is reported).
Program CompileTraced(void (*trace)(tm_trace *, int), int steps) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  trace(t, steps);
  Program p;
  EXPECT_EQ(tm_compile(ctx, t, nullptr, p.out()), TM_OK) << tm_last_error();
  return p;
}

// `steps` times y = y * 1.001 - 0.5, on x (kRows x kCols).
void TraceChain(tm_trace *t, int steps) {
  tm_value y = Input(t, TM_F32, {kRows, kCols});
  tm_value a = Op(tm_op_scalar, t, TM_F32, 1.001), b = Op(tm_op_scalar, t, TM_F32, 0.5);
  for (int i = 0; i < steps; ++i) y = Op(tm_op_sub, t, Op(tm_op_mul, t, y, a), b);
  End(t, {y});
}

// Step i's scale: the same at every step, or a different one at each.
enum class Scales { kSame, kDistinct };
double Scale(Scales scales, int step) { return scales == Scales::kSame ? 1.5 : 1.5 + 0.125 * step; }

// `steps` times y = (y - mean of y's row) * scale + 0.25: a reduction and a fused
// elementwise op per step, which no fusion merges across. With `axis` 0, the mean of y's
// column instead (for the GPU target, whose row kernels join a row's steps into one launch).
void TraceRowSteps(tm_trace *t, int steps, Scales scales = Scales::kSame, int32_t axis = 1) {
  tm_value y = Input(t, TM_F32, {kRows, kCols});
  tm_value b = Op(tm_op_scalar, t, TM_F32, 0.25);
  for (int i = 0; i < steps; ++i) {
    tm_value a = Op(tm_op_scalar, t, TM_F32, Scale(scales, i));
    tm_value centred = Op(tm_op_sub, t, y, Op(tm_op_reduce_mean, t, y, axis, 1));
    y = Op(tm_op_add, t, Op(tm_op_mul, t, centred, a), b);
  }
  End(t, {y});
}

// The same in double precision.
std::vector<double> RowSteps(std::vector<double> y, int steps, Scales scales = Scales::kSame) {
  for (int i = 0; i < steps; ++i)
    for (int64_t r = 0; r < kRows; ++r) {
      double mean = 0;
      for (int64_t c = 0; c < kCols; ++c) mean += y[r * kCols + c];
      mean /= kCols;
      for (int64_t c = 0; c < kCols; ++c)
        y[r * kCols + c] = (y[r * kCols + c] - mean) * Scale(scales, i) + 0.25;
    }
  return y;
}

// Compiles TraceRowSteps(steps, scales), checks its results against RowSteps, and returns
// the program (its IR stages for the caller to check).
Program CompileAndCheckRowSteps(int steps, Scales scales) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  TraceRowSteps(t, steps, scales);
  Program p;
  EXPECT_EQ(tm_compile(ctx, t, nullptr, p.out()), TM_OK) << tm_last_error();
  Host<float> x({kRows, kCols}, Cast<float>(Pseudo(kRows * kCols, -4, 4, 12)));
  Host<float> y({kRows, kCols}, -99.0f);
  std::vector<tm_tensor> in = {x.view()}, out = {y.view()};
  EXPECT_EQ(tm_invoke(p, in.data(), 1, out.data(), 1), TM_OK) << tm_last_error();
  // Values up to ~30 after the steps, some near 0 after subtracting the mean: 1e-5
  // relative plus 1e-5 absolute (a few f32 ulps of the largest).
  EXPECT_TRUE(AllClose(y.data, RowSteps(ToDouble(x.data), steps, scales), 1e-5, 1e-5));
  return p;
}

TEST(ProgramSize, ALongElementwiseChainIsFusedIntoBoundedBodies) {
  constexpr int kSteps = 400;  // 800 ops: more than three bodies' worth
  Program p = CompileTraced(TraceChain, kSteps);
  ASSERT_NE(p.get(), nullptr);
  const std::vector<int> sizes = GenericBodySizes(StageText(p, TM_STAGE_OPTIMIZED));
  // Fused (a few generics, not 800), but no body beyond the bound.
  EXPECT_GE(sizes.size(), 2u * kSteps / kMaxFusedBodyOps);
  EXPECT_LE(sizes.size(), 4u * kSteps / kMaxFusedBodyOps);
  for (int size : sizes) EXPECT_LE(size, static_cast<int>(kMaxFusedBodyOps));

  // Splitting the chain changes no rounding: equal to the same f32 operations done here
  // (volatile: no FMA contraction).
  Host<float> x({kRows, kCols}, Cast<float>(Pseudo(kRows * kCols, -4, 4, 11)));
  Host<float> y({kRows, kCols}, -99.0f);
  std::vector<tm_tensor> in = {x.view()}, out = {y.view()};
  ASSERT_EQ(tm_invoke(p, in.data(), 1, out.data(), 1), TM_OK) << tm_last_error();
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    volatile float v = x[i];
    for (int s = 0; s < kSteps; ++s) {
      volatile float product = v * 1.001f;
      v = product - 0.5f;
    }
    EXPECT_EQ(y[i], v) << "element " << i;
  }
}

TEST(ProgramSize, EveryLoopNestIsAFunctionOfItsOwn) {
  constexpr int kSteps = 3;
  Program p = CompileAndCheckRowSteps(kSteps, Scales::kSame);
  ASSERT_NE(p.get(), nullptr);
  const std::string lowered = StageText(p, TM_STAGE_LOWERED);
  // A reduction and an elementwise op per step, each a nest of its own (the steps' nests
  // are the same, and share their functions: see the next test).
  EXPECT_GE(CountSubstr(lowered, "llvm.func internal @__tm_loop_nest_"), 2) << lowered;
  // The program's function is left with no loop: no conditional branch, and one block
  // besides the arguments' (core/compiler/passes/argument_block.h), which branches to it.
  const size_t kernel = lowered.find("llvm.func @kernel(");
  ASSERT_NE(kernel, std::string::npos) << lowered;
  const std::string body = lowered.substr(kernel, lowered.find("\n  }\n", kernel) - kernel);
  EXPECT_EQ(CountSubstr(body, "llvm.cond_br"), 0) << body;
  EXPECT_EQ(CountSubstr(body, "llvm.br ^bb1"), 1) << body;
  EXPECT_EQ(CountSubstr(body, "\n  ^bb"), 1) << body;  // the one block label
  EXPECT_GE(CountSubstr(body, "llvm.call @__tm_loop_nest_"), 2 * kSteps) << body;
  // Internal and never inlined: LLVM keeps them apart, and drops the arguments they do not
  // read (most of each buffer's descriptor; 500 inputs to one elementwise op compiled in
  // 11.3 s while the descriptors were passed whole, 1.8 s now).
  const std::string llvm_ir = StageText(p, TM_STAGE_LLVM_IR);
  EXPECT_GE(CountSubstr(llvm_ir, "define internal fastcc void @__tm_loop_nest_"), 2) << llvm_ir;
  // Each called with pointers alone (a 2-d buffer's descriptor is 2 pointers and 5 i64s).
  std::istringstream lines(llvm_ir);
  int calls = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("call fastcc void @__tm_loop_nest_") == std::string::npos) continue;
    ++calls;
    EXPECT_EQ(line.find("i64"), std::string::npos) << line;
  }
  EXPECT_GE(calls, 2 * kSteps);
}

// A model repeats itself, and LLVM would optimise and compile each repeat again (GPT-2's
// 12 blocks traced as one program: 429 nest functions, 34 of them different; 48 blocks
// compiled in 33.5 s, 2.7 s once merged). Nests that differ in a constant stay apart.
TEST(ProgramSize, IdenticalLoopNestsShareOneFunction) {
  const char *kDefinition = "llvm.func internal @__tm_loop_nest_";
  const char *kCall = "llvm.call @__tm_loop_nest_";
  const std::string two = StageText(CompileAndCheckRowSteps(2, Scales::kSame), TM_STAGE_LOWERED);
  const std::string twelve =
      StageText(CompileAndCheckRowSteps(12, Scales::kSame), TM_STAGE_LOWERED);
  EXPECT_GE(CountSubstr(two, kDefinition), 2) << two;
  EXPECT_EQ(CountSubstr(twelve, kDefinition), CountSubstr(two, kDefinition)) << twelve;
  EXPECT_GE(CountSubstr(twelve, kCall), 2 * 12) << twelve;
  // Each step's elementwise nest holds its own scale: twelve of them, one reduction shared.
  const std::string distinct =
      StageText(CompileAndCheckRowSteps(12, Scales::kDistinct), TM_STAGE_LOWERED);
  EXPECT_GE(CountSubstr(distinct, kDefinition), 12 + 1) << distinct;
  EXPECT_GE(CountSubstr(distinct, kCall), 2 * 12) << distinct;
}

constexpr int kParameters = 64;
constexpr double kRate = 0.25;

// kParameters updates p - kRate * g, p and g of 7 different shapes: 128 inputs, 64 outputs.
Program CompileParameterUpdates() {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  std::vector<tm_value> outputs;
  tm_value rate = Op(tm_op_scalar, t, TM_F32, kRate);
  for (int i = 0; i < kParameters; ++i) {
    const int64_t rows = 1 + i % 7;
    tm_value p = Input(t, TM_F32, {rows, kCols}), g = Input(t, TM_F32, {rows, kCols});
    outputs.push_back(Op(tm_op_sub, t, p, Op(tm_op_mul, t, g, rate)));
  }
  End(t, outputs);
  Program p;
  EXPECT_EQ(tm_compile(ctx, t, nullptr, p.out()), TM_OK) << tm_last_error();
  return p;
}

// The program's function takes each buffer as a descriptor of scalars (a 2-d buffer is 2
// pointers and 5 i64s), and its C-interface wrapper a pointer per buffer: both argument
// lists grow with the program. LLVM's per-argument work on a function costs the square of
// its argument count (a call with 10,000 arguments through instruction selection; attribute
// inference copying the whole attribute list for each argument it marks: 800 parameters
// updated by 4 ops each took 38 s and 2.0 GB to compile). Both are inlined into the packed
// entry, whose one argument is an array, and no function left takes more than its nest's
// buffers.
TEST(ProgramSize, NoFunctionsArgumentsGrowWithTheNumberOfBuffers) {
  Program p = CompileParameterUpdates();
  const std::string llvm_ir = StageText(p, TM_STAGE_LLVM_IR);
  EXPECT_NE(llvm_ir.find("define void @tm_packed_entry(ptr "), std::string::npos) << llvm_ir;
  EXPECT_EQ(llvm_ir.find("@_mlir_ciface_kernel("), std::string::npos) << llvm_ir;
  EXPECT_EQ(llvm_ir.find("@kernel("), std::string::npos) << llvm_ir;
  int functions = 0;
  std::istringstream lines(llvm_ir);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("define ", 0) != 0) continue;
    ++functions;
    // A loop nest reads p and g and writes the result: three pointers.
    EXPECT_LE(CountSubstr(line, "ptr "), 3) << line;
    EXPECT_EQ(CountSubstr(line, "i64 "), 0) << line;
  }
  EXPECT_GE(functions, 8);  // the entry and a nest per shape

  std::vector<Host<float>> ps, gs, out;
  std::vector<tm_tensor> ins, outs;
  for (int i = 0; i < kParameters; ++i) {
    const int64_t rows = 1 + i % 7;
    ps.emplace_back(std::vector<int64_t>{rows, kCols}, Cast<float>(Pseudo(rows * kCols, -4, 4, i)));
    gs.emplace_back(std::vector<int64_t>{rows, kCols},
                    Cast<float>(Pseudo(rows * kCols, -4, 4, 100 + i)));
    out.emplace_back(std::vector<int64_t>{rows, kCols}, -99.0f);
  }
  for (int i = 0; i < kParameters; ++i) {
    ins.push_back(ps[i].view());
    ins.push_back(gs[i].view());
    outs.push_back(out[i].view());
  }
  ASSERT_EQ(tm_invoke(p, ins.data(), ins.size(), outs.data(), outs.size()), TM_OK)
      << tm_last_error();
  for (int i = 0; i < kParameters; ++i)
    for (size_t k = 0; k < out[i].data.size(); ++k)  // g * 0.25 is exact: one rounding
      ASSERT_EQ(out[i].data[k], ps[i].data[k] - gs[i].data[k] * static_cast<float>(kRate))
          << i << ", " << k;
}

// The C-interface wrapper inlined into the entry reads every buffer's descriptor before the
// first call, so each pointer stayed live across every loop nest's call, and code
// generation (instruction selection, register allocation) grew faster than the number of
// buffers: 800 parameters, 5.8 s; 1,600 concatenations, 6 s; after SinkArgumentLoads
// (native_object.h), which moves each such load to its first use: 0.8 s and 1.2 s. Between
// two calls the entry loads only what the next call takes (three loads per buffer: its
// slot in the array, its descriptor, the descriptor's data pointer; three buffers a nest).
TEST(ProgramSize, TheEntryLoadsEachBufferWhereItIsUsed) {
  Program p = CompileParameterUpdates();
  const std::string llvm_ir = StageText(p, TM_STAGE_LLVM_IR);
  const size_t entry = llvm_ir.find("define void @tm_packed_entry(");
  ASSERT_NE(entry, std::string::npos) << llvm_ir;
  std::istringstream lines(llvm_ir.substr(entry, llvm_ir.find("\n}", entry) - entry));
  int loads = 0, calls = 0, most = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" = load ") != std::string::npos) most = std::max(most, ++loads);
    if (line.find("call ") != std::string::npos) {
      loads = 0;
      ++calls;
    }
  }
  EXPECT_EQ(calls, kParameters);
  EXPECT_LE(most, 3 * 3) << llvm_ir.substr(entry);
}

// A slice's copy into its output reads its source through strides. As a memref.copy it
// became a call of the runtime's generic memrefCopy with both descriptors built on the
// stack in the program's function, whose optimisation grew faster than the number of
// copies (10 slices: 0.04 s of LLVM's optimisation, 40 slices: 0.99 s). Every copy is a
// linalg.copy instead, a loop nest like any other (outlined, merged with its equals).
TEST(ProgramSize, CopiesAreLoopNestsNotRuntimeCalls) {
  constexpr int kSlices = 40;
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  std::vector<tm_value> outputs;
  std::vector<int64_t> rows;
  for (int i = 0; i < kSlices; ++i) {  // x[1:, 2:kCols-1] of x (rows x kCols), 5 shapes
    rows.push_back(2 + i % 5);
    tm_value x = Input(t, TM_F32, {rows.back(), kCols});
    const int64_t begin[2] = {1, 2}, end[2] = {rows.back(), kCols - 1};
    tm_value y;
    TM_ASSERT_OK(tm_op_slice(t, x, 2, begin, end, &y));
    outputs.push_back(y);
  }
  End(t, outputs);
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  EXPECT_EQ(StageText(p, TM_STAGE_LOWERED).find("memref.copy"), std::string::npos);
  const std::string llvm_ir = StageText(p, TM_STAGE_LLVM_IR);
  EXPECT_EQ(llvm_ir.find("memrefCopy"), std::string::npos) << llvm_ir;
  EXPECT_LE(CountSubstr(llvm_ir, "define internal"), 5) << llvm_ir;  // a nest per shape

  std::vector<Host<float>> xs, ys;
  std::vector<tm_tensor> ins, outs;
  for (int i = 0; i < kSlices; ++i) {
    xs.emplace_back(std::vector<int64_t>{rows[i], kCols},
                    Cast<float>(Pseudo(rows[i] * kCols, -4, 4, i)));
    ys.emplace_back(std::vector<int64_t>{rows[i] - 1, kCols - 3}, -99.0f);
  }
  for (int i = 0; i < kSlices; ++i) {
    ins.push_back(xs[i].view());
    outs.push_back(ys[i].view());
  }
  ASSERT_EQ(tm_invoke(p, ins.data(), ins.size(), outs.data(), outs.size()), TM_OK)
      << tm_last_error();
  for (int i = 0; i < kSlices; ++i)
    for (int64_t r = 1; r < rows[i]; ++r)
      for (int64_t c = 2; c < kCols - 1; ++c)
        ASSERT_EQ(ys[i].data[(r - 1) * (kCols - 3) + (c - 2)], xs[i].data[r * kCols + c])
            << i << ", " << r << ", " << c;
}

// Traces a program of `steps` steps.
using Tracer = std::function<void(tm_trace *, int steps)>;

// TraceRowSteps with the mean along `axis`.
Tracer RowStepsTracer(int32_t axis = 1) {
  return [axis](tm_trace *t, int steps) { TraceRowSteps(t, steps, Scales::kSame, axis); };
}

// Seconds to compile `trace`(steps) with `options` in a new context with no disk cache (so
// no compile finds another's program): the whole call, or one phase of it
// (tm_compile_phase).
double CompileSeconds(const Tracer &trace, int steps, const tm_compile_options &options,
                      int phase = -1) {
  Context ctx = NewContext();
  EXPECT_EQ(tm_cache_set_dir(ctx, nullptr, 0), TM_OK);
  Trace t = NewTrace(ctx);
  trace(t, steps);
  Program p;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(tm_compile(ctx, t, &options, p.out()), TM_OK) << tm_last_error();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return phase < 0 ? wall : tm_program_phase_seconds(p, static_cast<tm_compile_phase>(phase));
}

struct SmallAndLarge {
  double small = 1e30, large = 1e30;
};

// The least of three compiles of each size, the sizes taken in turn: seconds are wall
// time, and a machine whose load changes between the sizes would otherwise move the ratio
// the tests bound (other tests run beside these).
SmallAndLarge CompileSecondsOfTwoSizes(const Tracer &trace, int small_steps, int large_steps,
                                       const tm_compile_options &options, int phase = -1) {
  SmallAndLarge best;
  for (int round = 0; round < 3; ++round) {
    best.small = std::min(best.small, CompileSeconds(trace, small_steps, options, phase));
    best.large = std::min(best.large, CompileSeconds(trace, large_steps, options, phase));
  }
  return best;
}

// How many times the linear ratio a test allows. The sanitizer builds are Debug builds whose
// allocator (quarantine, redzones) costs more per byte as a compile's working set grows, so
// they get three times, still under the square's ratio.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kLinearSlack = 3.0;
#else
constexpr double kLinearSlack = 2.0;
#endif

// Expects `trace` at `large_steps` to compile (the whole call, or one phase:
// tm_compile_phase) in less than kLinearSlack times large_steps / small_steps times the seconds
// it takes at `small_steps`: linear growth is that ratio, the square its square. Records both
// as test properties, `phase_name`_seconds_<steps>_`unit`.
void ExpectLinearGrowth(const Tracer &trace, int small_steps, int large_steps,
                        const tm_compile_options &options, int phase, const std::string &phase_name,
                        const std::string &unit) {
  const auto [small, large] =
      CompileSecondsOfTwoSizes(trace, small_steps, large_steps, options, phase);
  const std::string prefix = phase_name.empty() ? "" : phase_name + "_";
  ::testing::Test::RecordProperty(prefix + "seconds_" + std::to_string(small_steps) + "_" + unit,
                                  std::to_string(small));
  ::testing::Test::RecordProperty(prefix + "seconds_" + std::to_string(large_steps) + "_" + unit,
                                  std::to_string(large));
  const double bound = kLinearSlack * large_steps / small_steps;
  EXPECT_LT(large, bound * small) << small_steps << " " << unit << ": " << small << " s, "
                                  << large_steps << " " << unit << ": " << large << " s";
}

// Four times the program in at most eight times the time (linear is four, the square
// sixteen). Before the remedies, 100 steps took 1.5 s and 400 steps 26 s with the empties
// shared (bufferization alone), 12 s with the loop nests in one function.
TEST(ProgramSize, CompileTimeGrowsLinearlyWithTheProgram) {
  const tm_compile_options cpu = Options();
  (void)CompileSeconds(RowStepsTracer(), 1, cpu);  // the compiler process started
  ExpectLinearGrowth(RowStepsTracer(), 100, 400, cpu, /*phase=*/-1, "", "steps");
}

// `steps` times h = (h @ w) * 0.5 + c, h (kRows x kCols): every step reads the input w and
// the constant c.
void TraceRecurrence(tm_trace *t, int steps) {
  tm_value h = Input(t, TM_F32, {kRows, kCols}), w = Input(t, TM_F32, {kCols, kCols});
  Host<float> c_data({kRows, kCols}, Cast<float>(Pseudo(kRows * kCols, -1, 1, 31)));
  tm_tensor c_view = c_data.view();
  tm_value c, half = Op(tm_op_scalar, t, TM_F32, 0.5);
  ASSERT_EQ(tm_op_constant(t, &c_view, &c), TM_OK) << tm_last_error();
  for (int i = 0; i < steps; ++i)
    h = Op(tm_op_add, t, Op(tm_op_mul, t, Op(tm_op_matmul, t, h, w), half), c);
  End(t, {h});
}

// One-shot bufferization gathers, for each operand it analyses, every use of every value
// that may share the operand's buffer: n readers of one tensor cost it n^2 (an unrolled
// recurrence of 1,000 steps reading three inputs: 4.4 s). Read-only tensors serve bounded
// groups of readers (core/compiler/passes/unshare_tensors.h): four times the readers, at most eight
// times the bufferization (3.6 times: 0.12 and 0.44 s). Before, 11.7 times (0.16 and 1.9 s).
TEST(ProgramSize, ManyReadersOfOneTensorBufferizeInLinearTime) {
  ExpectLinearGrowth(TraceRecurrence, 200, 800, Options(), TM_PHASE_BUFFERIZE, "bufferize",
                     "steps");
}

// TraceRecurrence in double precision.
std::vector<double> Recurrence(std::vector<double> h, const std::vector<double> &w,
                               const std::vector<double> &c, int steps) {
  for (int i = 0; i < steps; ++i) {
    std::vector<double> next(h.size());
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t j = 0; j < kCols; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < kCols; ++k) dot += h[r * kCols + k] * w[k * kCols + j];
        next[r * kCols + j] = dot * 0.5 + c[r * kCols + j];
      }
    h = std::move(next);
  }
  return h;
}

// A block of calls longer than two parts' worth (core/compiler/codegen/entry_parts.h) is split:
// the entry calls parts of at most kCallsPerPart calls each, every part takes one pointer,
// and the values are the recurrence's.
TEST(ProgramSize, ALongEntryIsSplitIntoPartsOfBoundedCalls) {
  constexpr int kSteps = 300, kCallsPerPart = 64;
  Program p = CompileTraced(TraceRecurrence, kSteps);
  ASSERT_NE(p.get(), nullptr);
  const std::string llvm_ir = StageText(p, TM_STAGE_LLVM_IR);
  EXPECT_GE(CountSubstr(llvm_ir, "@tm_packed_entry_part_"), 2 * kSteps / kCallsPerPart);
  std::istringstream lines(llvm_ir);
  int calls = 0, parts = 0;
  bool in_entry = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("define ", 0) == 0) {
      // The entry, a loop nest or a part: each takes pointers, a bounded number of them.
      EXPECT_LE(CountSubstr(line, "ptr "), 3) << line;
      in_entry = line.find("@tm_packed_entry(") != std::string::npos;
      if (line.find("@tm_packed_entry_part_") != std::string::npos) {
        ++parts;
        EXPECT_EQ(CountSubstr(line, "ptr "), 1) << line;
        EXPECT_NE(line.find("internal"), std::string::npos) << line;
      }
      calls = 0;
    }
    if (line.find("call ") != std::string::npos && line.find("@llvm.") == std::string::npos)
      ++calls;
    if (line == "}") {
      // A part's calls, or the entry's own: its first and last runs and a call per part.
      EXPECT_LE(calls, in_entry ? 2 * kCallsPerPart + parts + 1 : kCallsPerPart) << calls;
    }
  }
  EXPECT_GE(parts, 2 * kSteps / kCallsPerPart);

  Host<float> h({kRows, kCols}, Cast<float>(Pseudo(kRows * kCols, -1, 1, 41)));
  Host<float> w({kCols, kCols}, Cast<float>(Pseudo(kCols * kCols, -0.25, 0.25, 42)));
  Host<float> y({kRows, kCols}, -99.0f);
  std::vector<tm_tensor> in = {h.view(), w.view()}, out = {y.view()};
  ASSERT_EQ(tm_invoke(p, in.data(), in.size(), out.data(), out.size()), TM_OK) << tm_last_error();
  const std::vector<double> c = Pseudo(kRows * kCols, -1, 1, 31);  // TraceRecurrence's
  // |h @ w| * 0.5 stays below |h| / 2, so the values settle near c's (up to ~2): 1e-5
  // relative plus 1e-6 absolute.
  EXPECT_TRUE(AllClose(
      y.data, Recurrence(ToDouble(h.data), ToDouble(w.data), ToDouble(Cast<float>(c)), kSteps),
      1e-5, 1e-6));
}

// Register allocation of one block of calls grew with the square of their number: each value
// live across them (the recurrence's w and c, the argument array) is split and spilled
// around every call (an unrolled recurrence of 2,000 steps: 18.5 s of code generation, 4.4
// times what 1,000 steps took). In parts of bounded calls, four times the steps take at most
// eight times the code generation.
TEST(ProgramSize, CodeGenerationGrowsLinearlyWithTheCalls) {
  ExpectLinearGrowth(TraceRecurrence, 250, 1000, Options(), TM_PHASE_CODEGEN, "codegen", "steps");
}

// `steps` times h = (x_i @ w) + h, with an input x_i (1 x kCols) for each step: a program's
// function with an argument per step, each read by a product (a call).
void TraceInputPerStep(tm_trace *t, int steps) {
  tm_value h = Input(t, TM_F32, {1, kCols}), w = Input(t, TM_F32, {kCols, kCols});
  for (int i = 0; i < steps; ++i)
    h = Op(tm_op_add, t, Op(tm_op_matmul, t, Input(t, TM_F32, {1, kCols}), w), h);
  End(t, {h});
}

// convert-func-to-llvm rebuilds each argument's descriptor at the top of the function's entry
// block, and nearly every insertion there renumbered the whole block: the arguments times the
// block's length (an unrolled recurrence with an input per step, 2,000 steps: 9.0 s in that
// pass; this trace at 2,000 steps: 1.98 s, 0.83 s with the block of its own). The arguments
// get a block of their own (core/compiler/passes/argument_block.h): the lowered program's function
// starts with a block that rebuilds the descriptors and branches, before any call.
TEST(ProgramSize, ArgumentsAreConvertedInABlockOfTheirOwn) {
  constexpr int kSteps = 300;
  Program p = CompileTraced(TraceInputPerStep, kSteps);
  ASSERT_NE(p.get(), nullptr);
  const std::string lowered = StageText(p, TM_STAGE_LOWERED);
  const size_t kernel = lowered.find("llvm.func @kernel(");
  ASSERT_NE(kernel, std::string::npos) << lowered;
  const size_t branch = lowered.find("llvm.br ^bb1", kernel);
  ASSERT_NE(branch, std::string::npos) << lowered.substr(kernel, 4000);
  const std::string entry = lowered.substr(kernel, branch - kernel);
  EXPECT_EQ(entry.find("llvm.call"), std::string::npos) << entry;
  EXPECT_GE(CountSubstr(entry, "llvm.insertvalue"), kSteps);  // the inputs' descriptors

  Host<float> h({1, kCols}, Cast<float>(Pseudo(kCols, -1, 1, 51)));
  Host<float> w({kCols, kCols}, Cast<float>(Pseudo(kCols * kCols, -1, 1, 52)));
  std::vector<Host<float>> xs;
  std::vector<tm_tensor> in = {h.view(), w.view()};
  for (int i = 0; i < kSteps; ++i)
    xs.emplace_back(std::vector<int64_t>{1, kCols}, Cast<float>(Pseudo(kCols, -1, 1, 100 + i)));
  for (Host<float> &x : xs) in.push_back(x.view());
  Host<float> y({1, kCols}, -99.0f);
  std::vector<tm_tensor> out = {y.view()};
  ASSERT_EQ(tm_invoke(p, in.data(), in.size(), out.data(), out.size()), TM_OK) << tm_last_error();
  std::vector<double> want = ToDouble(h.data);
  for (const Host<float> &x : xs)
    for (int64_t j = 0; j < kCols; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < kCols; ++k) dot += double{x.data[k]} * w.data[k * kCols + j];
      want[j] += dot;
    }
  // A sum of 300 products of 16 terms each, values up to ~70: 1e-5 relative plus 1e-4
  // absolute (f32 accumulation over 300 steps).
  EXPECT_TRUE(AllClose(y.data, want, 1e-5, 1e-4));
}

// `outputs` outputs y_i = x * c_i, x of kCols elements, with half as many different scales:
// c_i = 2 + i % (outputs / 2), so that every product has a twin for CSE to merge.
void TraceScaledCopies(tm_trace *t, int outputs) {
  tm_value x = Input(t, TM_F32, {kCols});
  std::vector<tm_value> ys;
  for (int i = 0; i < outputs; ++i)
    ys.push_back(Op(tm_op_mul, t, x, Op(tm_op_scalar, t, TM_F32, 2.0 + i % (outputs / 2))));
  End(t, ys);
}

// CSE looks candidates up by a hash that leaves out their regions, and products of one input
// by different scalars differ only in their bodies: each was compared with every other (2,000
// of them: 1.9 s in each of the optimisation's two CSE runs, 11.5 times what 500 took).
// tm-cse (core/compiler/passes/cse_with_regions.h) hashes the bodies too: four times the ops, at most
// eight times the optimisation; the twins still merge, and the values are the products.
TEST(ProgramSize, OpsDifferingOnlyInTheirBodiesOptimiseInLinearTime) {
  constexpr int kOutputs = 64;
  {
    Program p = CompileTraced(TraceScaledCopies, kOutputs);
    ASSERT_NE(p.get(), nullptr);
    EXPECT_EQ(CountSubstr(StageText(p, TM_STAGE_OPTIMIZED), "linalg.generic"), kOutputs / 2);
    Host<float> x({kCols}, Cast<float>(Pseudo(kCols, -4, 4, 61)));
    std::vector<Host<float>> ys(kOutputs, Host<float>({kCols}, -99.0f));
    std::vector<tm_tensor> in = {x.view()}, out;
    for (Host<float> &y : ys) out.push_back(y.view());
    ASSERT_EQ(tm_invoke(p, in.data(), in.size(), out.data(), out.size()), TM_OK) << tm_last_error();
    for (int i = 0; i < kOutputs; ++i)
      for (int64_t k = 0; k < kCols; ++k)  // a product by a small integer: exact
        ASSERT_EQ(ys[i].data[k], x.data[k] * static_cast<float>(2 + i % (kOutputs / 2)))
            << i << ", " << k;
  }
  ExpectLinearGrowth(TraceScaledCopies, 300, 1200, Options(), TM_PHASE_OPTIMIZE, "optimize",
                     "outputs");
}

// The GPU target's host code (a launch per loop nest, each launch's arguments stored into an
// array) through LLVM's optimisation: the same bound. The SLP vectoriser, whose cost grew
// with the square of those stores, does not run on it: no vector store is left.
TEST(ProgramSize, GpuHostCodeOptimisesInLinearTime) {
  tm_compile_options gpu = Options();
  gpu.target = TM_TARGET_GPU;
  {
    Context ctx = NewContext();
    Trace t = NewTrace(ctx);
    TraceRowSteps(t, 20, Scales::kSame, /*axis=*/0);  // two launches a step
    Program p;
    TM_ASSERT_OK(tm_compile(ctx, t, &gpu, p.out()));
    const std::string host = StageText(p, TM_STAGE_LLVM_IR);
    EXPECT_GE(CountSubstr(host, "@mgpuLaunchKernel("), 40);
    EXPECT_EQ(CountSubstr(host, "store <"), 0);
  }
  // Eight times the program; with the SLP vectoriser, 16.6 times the time.
  ExpectLinearGrowth(RowStepsTracer(/*axis=*/0), 25, 200, gpu, TM_PHASE_LLVM_OPTIMIZE, "llvm",
                     "steps");
}

}  // namespace
}  // namespace tmtest
