// Defect classes that once crashed the host or gave silent garbage, one test per class:
// huge temporaries, programs accepted at record time that failed later, values and buffers
// the contract forbids, and the bounded, single-flight cache.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <thread>

#include "test_util.h"
#include "tinymlir/gpt2.h"

namespace tmtest {
namespace {

class Reliability : public ::testing::Test {
 protected:
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
};

// sum(sum(x^T * y)): small inputs, an (n, n) temporary of n^2 * 4 bytes.
Program OuterProductSum(tm_context *ctx, tm_trace *t, int64_t n) {
  tm_value x = Input(t, TM_F32, {n, 1}), y = Input(t, TM_F32, {1, n});
  tm_value outer = Op(tm_op_mul, t, x, y);
  tm_value rows = Op(tm_op_reduce_sum, t, outer, 1, 0);
  End(t, {Op(tm_op_reduce_sum, t, rows, 0, 0)});
  Program p;
  EXPECT_EQ(tm_compile(ctx, t, nullptr, p.out()), TM_OK) << tm_last_error();
  return p;
}

TEST_F(Reliability, TemporaryLargerThanTheMachineIsOutOfMemory) {
  const int64_t n = 1 << 19;  // a 1 TiB temporary
  Program p = OuterProductSum(ctx, t, n);
  ASSERT_NE(p.get(), nullptr);
  EXPECT_GE(tm_program_temporary_bytes(p), static_cast<uint64_t>(n) * n * 4);
  std::vector<float> x(n, 1.0f), y(n, 1.0f);
  float sum = -1;
  std::vector<int64_t> col = {n, 1}, row = {1, n};
  tm_tensor in[] = {View(x.data(), col), View(y.data(), row)};
  tm_tensor out = {&sum, TM_F32, 0, nullptr, nullptr};
  TM_EXPECT_STATUS(tm_invoke(p, in, 2, &out, 1), TM_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(tm_last_error()).find("temporary memory"), std::string::npos)
      << tm_last_error();
  EXPECT_EQ(sum, -1.0f);
}

// Runs p on `in` with an address-space limit of what is mapped now plus 256 MiB, and exits
// 0 if that gives TM_ERROR_OUT_OF_MEMORY (in a child: the test process keeps its limit).
[[noreturn]] void InvokeUnderAddressLimit(tm_program *p, const tm_tensor *in) {
  rlimit limit;
  getrlimit(RLIMIT_AS, &limit);
  unsigned long pages = 0;
  if (FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  limit.rlim_cur = pages * 4096ull + (256ull << 20);
  setrlimit(RLIMIT_AS, &limit);
  float sum = -1;
  tm_tensor out = {&sum, TM_F32, 0, nullptr, nullptr};
  tm_status s = tm_invoke(p, in, 2, &out, 1);
  std::fprintf(stderr, "%s: %s\n", tm_status_string(s), tm_last_error());
  std::exit(s == TM_ERROR_OUT_OF_MEMORY ? 0 : 1);
}

// A temporary the machine has but the process may not allocate: the failed malloc inside
// the native code becomes a status (and what that call had allocated is freed).
TEST_F(Reliability, FailedAllocationInsideTheKernelIsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator dies on an address-space limit instead of "
                  "returning NULL";
#endif
  const int64_t n = 1 << 14;  // a 1 GiB temporary
  Program p = OuterProductSum(ctx, t, n);
  ASSERT_NE(p.get(), nullptr);
  std::vector<float> x(n, 1.0f), y(n, 1.0f);
  std::vector<int64_t> col = {n, 1}, row = {1, n};
  tm_tensor in[] = {View(x.data(), col), View(y.data(), row)};
  EXPECT_EXIT(InvokeUnderAddressLimit(p, in), ::testing::ExitedWithCode(0),
              "TM_ERROR_OUT_OF_MEMORY: .*could not allocate");
}

// A matrix product under an address-space limit that leaves no room for OpenBLAS's packing
// buffer (128 MiB, mapped at the first product): OpenBLAS itself retries the mapping forever,
// so the buffer is mapped before the product starts, and its failure is a status. With the
// limit lifted, the same program runs and is right. In a child: the limit is the process's.
[[noreturn]] void MatmulUnderAddressLimit(tm_program *p, const tm_tensor *in, int64_t n) {
  rlimit saved, limit;
  getrlimit(RLIMIT_AS, &saved);
  unsigned long pages = 0;
  if (FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  limit = saved;
  limit.rlim_cur = pages * 4096ull + (64ull << 20);
  setrlimit(RLIMIT_AS, &limit);
  std::vector<float> y(static_cast<size_t>(n * n), -1.0f);
  std::vector<int64_t> shape = {n, n};
  tm_tensor out = View(y.data(), shape);
  const tm_status limited = tm_invoke(p, in, 2, &out, 1);
  std::fprintf(stderr, "%s: %s\n", tm_status_string(limited), tm_last_error());
  setrlimit(RLIMIT_AS, &saved);
  const tm_status lifted = tm_invoke(p, in, 2, &out, 1);
  bool right = lifted == TM_OK;
  for (float v : y) right = right && v == static_cast<float>(n);  // ones @ ones
  std::fprintf(stderr, "then %s, %s\n", tm_status_string(lifted), right ? "right" : "wrong");
  std::exit(limited == TM_ERROR_OUT_OF_MEMORY && right ? 0 : 1);
}

TEST_F(Reliability, AMatrixProductWithoutRoomForOpenBlasIsOutOfMemoryNotAHang) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's shadow memory does not fit under an address-space limit";
#endif
  // A fresh process for the child (gtest's "threadsafe" style runs this test alone in a new
  // one): a product run earlier in this process would have had its buffer mapped already.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int64_t n = 300;  // a GEMM (not a GEMV) of 6 blocks, on the worker pool
  tm_value a = Input(t, TM_F32, {n, n}), b = Input(t, TM_F32, {n, n});
  End(t, {Op(tm_op_matmul, t, a, b)});
  Program p;
  ASSERT_EQ(tm_compile(ctx, t, nullptr, p.out()), TM_OK) << tm_last_error();
  ASSERT_NE(StageText(p, TM_STAGE_LOWERED).find("tm_rt_gemm"), std::string::npos)
      << "the product does not go to OpenBLAS";
  std::vector<float> ones(static_cast<size_t>(n * n), 1.0f);
  std::vector<int64_t> shape = {n, n};
  tm_tensor in[] = {View(ones.data(), shape), View(ones.data(), shape)};
  EXPECT_EXIT(MatmulUnderAddressLimit(p, in, n), ::testing::ExitedWithCode(0),
              "TM_ERROR_OUT_OF_MEMORY: .*OpenBLAS cannot map its packing buffer.*\n"
              "then TM_OK, right");
}

TEST_F(Reliability, ZeroSizedResultsAreEmptyNotCompileErrors) {
  // x[3:] on 3 elements, a concat with an empty operand, a matmul over k = 0, a sum over
  // an empty axis and a softmax of an empty tensor all compile and run.
  tm_value x = Input(t, TM_F32, {2, 3});
  const int64_t b[] = {0, 3}, e[] = {2, 3};
  tm_value tail = Op(tm_op_slice, t, x, 2, b, e);  // (2, 0)
  tm_value parts[] = {tail, x, tail};
  tm_value joined = Op(tm_op_concat, t, static_cast<const tm_value *>(parts), 3, 1);  // (2, 3)
  tm_value ones = Input(t, TM_F32, {0, 4});
  tm_value k0 = Op(tm_op_matmul, t, tail, ones);           // (2, 4) of zeros
  tm_value sum0 = Op(tm_op_reduce_sum, t, tail, 1, 0);     // (2) of zeros
  tm_value soft = Op(tm_op_softmax, t, tail, -1);          // (2, 0)
  End(t, {joined, k0, sum0, soft});
  Host<float> xs({2, 3}, {1, 2, 3, 4, 5, 6}), os({0, 4}, 0.0f);
  Host<float> j({2, 3}, -1.0f), m({2, 4}, -1.0f), s({2}, -1.0f), sm({2, 0}, 0.0f);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {xs.view(), os.view()},
                             {j.view(), m.view(), s.view(), sm.view()}));
  EXPECT_TRUE(AllClose(j.data, {1, 2, 3, 4, 5, 6}, 0.0));
  EXPECT_TRUE(AllClose(m.data, std::vector<double>(8, 0.0), 0.0));
  EXPECT_TRUE(AllClose(s.data, {0, 0}, 0.0));
}

TEST_F(Reliability, MaximumOverAnEmptyAxisIsARecordTimeError) {
  tm_value x = Input(t, TM_F32, {2, 0});
  tm_value out = 12345;
  TM_EXPECT_STATUS(tm_op_reduce_max(t, x, 1, 0, &out), TM_ERROR_SHAPE);
  EXPECT_NE(std::string(tm_last_error()).find("empty"), std::string::npos);
  EXPECT_EQ(out, 12345u);
  // Over an empty result there is nothing to compute: fine.
  TM_ASSERT_OK(tm_op_reduce_max(t, x, 0, 0, &out));
}

// Where NumPy and the header once left the answer open, the header now decides.
TEST_F(Reliability, IntegerPowerWithANegativeExponentTruncates) {
  tm_value x = Input(t, TM_I32, {7});
  tm_value e = Input(t, TM_I32, {7});
  End(t, {Op(tm_op_pow, t, x, e)});
  Host<int32_t> xs({7}, {2, 1, -1, -1, 0, 3, -2}), es({7}, {-1, -3, -3, -2, -1, 2, 3});
  Host<int32_t> y({7}, 99);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {xs.view(), es.view()}, {y.view()}));
  EXPECT_EQ(y.data, (std::vector<int32_t>{0, 1, -1, 1, 0, 9, -8}));
}

TEST_F(Reliability, IntegerSumKeepsItsDtypeAndWraps) {
  tm_value x = Input(t, TM_I32, {2});
  tm_value sum = Op(tm_op_reduce_sum, t, x, 0, 0);
  tm_dtype dtype = TM_F64;
  TM_ASSERT_OK(tm_value_type(t, sum, &dtype, nullptr, nullptr));
  EXPECT_EQ(dtype, TM_I32);
  tm_value mean = Op(tm_op_reduce_mean, t, Input(t, TM_I32, {0}), 0, 0);  // over nothing
  End(t, {sum, mean});
  Host<int32_t> xs({2}, {INT32_MAX, 2}), none({0}, 0);
  int32_t s = 0;
  double m = 0;
  tm_tensor outs[] = {{&s, TM_I32, 0, nullptr, nullptr}, {&m, TM_F64, 0, nullptr, nullptr}};
  TM_ASSERT_OK(CompileInvoke(ctx, t, {xs.view(), none.view()}, {outs[0], outs[1]}));
  EXPECT_EQ(s, INT32_MIN + 1);
  EXPECT_TRUE(std::isnan(m));
}

TEST_F(Reliability, IndicesOfAnUnusedGatherAreNotChecked) {
  tm_value table = Input(t, TM_F32, {2, 3}), ids = Input(t, TM_I32, {1});
  Op(tm_op_gather, t, table, ids);  // reaches no output
  End(t, {Op(tm_op_neg, t, table)});
  Host<float> tab({2, 3}, 1.0f), y({2, 3}, 0.0f);
  Host<int32_t> bad({1}, {7});
  TM_ASSERT_OK(CompileInvoke(ctx, t, {tab.view(), bad.view()}, {y.view()}));
}

// Sizes in messages are the caller's numbers, never wrapped or negative artefacts.
TEST_F(Reliability, MessagesNeverPrintWrappedSizes) {
  End(t, {Op(tm_op_causal_mask, t, int64_t{2}, int64_t{2}, int64_t{0}, TM_F32)});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  TM_EXPECT_STATUS(tm_program_input_type(p, 0, nullptr, nullptr, nullptr), TM_ERROR_OUT_OF_RANGE);
  std::string message = tm_last_error();
  EXPECT_NE(message.find("has 0 inputs"), std::string::npos) << message;
  EXPECT_EQ(message.find("-1"), std::string::npos) << message;
  TM_EXPECT_STATUS(tm_invoke(p, nullptr, -1, nullptr, 0), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("negative"), std::string::npos);
}

TEST_F(Reliability, ValueFromAnotherTraceIsRefused) {
  Trace other = NewTrace(ctx, "other");
  tm_value mine = Input(t, TM_F32, {2});
  tm_value theirs = Input(other, TM_F32, {2});
  tm_value out = 12345;
  TM_EXPECT_STATUS(tm_op_add(t, mine, theirs, &out), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("another trace"), std::string::npos)
      << tm_last_error();
  TM_EXPECT_STATUS(tm_trace_end(t, &theirs, 1), TM_ERROR_INVALID_ARGUMENT);
  TM_EXPECT_STATUS(tm_value_type(t, theirs, nullptr, nullptr, nullptr),
                   TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(out, 12345u);
}

// `count` elements of T ending where an inaccessible page begins: reading one element more
// faults, so a call that reads past what it may is a crash here, not luck.
template <typename T>
class AtPageEnd {
 public:
  explicit AtPageEnd(size_t count) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    base_ = static_cast<char *>(
        mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(mprotect(base_ + page_, page_, PROT_NONE), 0);
    items_ = reinterpret_cast<T *>(base_ + page_) - count;
  }
  ~AtPageEnd() { munmap(base_, 2 * page_); }
  T *get() { return items_; }

 private:
  size_t page_ = 0;
  char *base_ = nullptr;
  T *items_ = nullptr;
};

// Counts the library can check (against the program's inputs and outputs, or a value's
// rank) are checked before the caller's arrays are read: a count that says more than the
// array holds, up to INT32_MAX, is an error naming the counts, never a read past the array
// (the C API fuzzer met one: tm_invoke converted every tensor it was told of first).
TEST_F(Reliability, CountsAreCheckedBeforeTheArraysAreRead) {
  tm_value x = Input(t, TM_F32, {2, 3});
  End(t, {Op(tm_op_neg, t, x)});
  Program p;
  ASSERT_EQ(tm_compile(ctx, t, nullptr, p.out()), TM_OK) << tm_last_error();
  std::vector<float> xs(6), ys(6);
  std::vector<int64_t> shape = {2, 3};
  AtPageEnd<tm_tensor> in(1), out(1);
  *in.get() = View(xs.data(), shape);
  *out.get() = View(ys.data(), shape);
  for (int32_t n : {2, 33, INT32_MAX}) {
    TM_EXPECT_STATUS(tm_invoke(p, in.get(), n, out.get(), 1), TM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tm_last_error()).find("takes 1 inputs and 1 outputs, got " +
                                                std::to_string(n) + " and 1"),
              std::string::npos)
        << tm_last_error();
    TM_EXPECT_STATUS(tm_invoke(p, in.get(), 1, out.get(), n), TM_ERROR_INVALID_ARGUMENT);
  }
  TM_EXPECT_STATUS(tm_invoke(p, in.get(), 1, out.get(), 1), TM_OK);

  Trace u = NewTrace(ctx, "counts");
  tm_value y = Input(u, TM_F32, {2, 3}), v = 12345;
  AtPageEnd<int32_t> perm(2);
  perm.get()[0] = 1, perm.get()[1] = 0;
  AtPageEnd<int64_t> begin(2), end(2);
  begin.get()[0] = begin.get()[1] = 0;
  end.get()[0] = 1, end.get()[1] = 2;
  for (int32_t n : {3, 9, 1 << 30, INT32_MAX}) {
    TM_EXPECT_STATUS(tm_op_transpose(u, y, perm.get(), n, &v), TM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tm_last_error()).find("perm has " + std::to_string(n) + " entries"),
              std::string::npos)
        << tm_last_error();
    TM_EXPECT_STATUS(tm_op_slice(u, y, n, begin.get(), end.get(), &v), TM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tm_last_error()).find("has rank 2"), std::string::npos)
        << tm_last_error();
  }
  EXPECT_EQ(v, 12345u);
  TM_EXPECT_STATUS(tm_op_transpose(u, y, perm.get(), 2, &v), TM_OK);
  TM_EXPECT_STATUS(tm_op_slice(u, y, 2, begin.get(), end.get(), &v), TM_OK);
}

// An options struct's struct_size is the one count the library cannot check against
// anything: it reads the bytes beyond its own layout to see that a newer header left them
// zero. A struct_size beyond any layout (an uninitialised struct) is refused before those
// bytes are read, for every options struct (found by probing: 4096 read past the page).
TEST_F(Reliability, AStructSizeBeyondAnyLayoutIsRefusedBeforeTheBytesAreRead) {
  End(t, {Op(tm_op_neg, t, Input(t, TM_F32, {2}))});
  const auto refused = [](const std::string &call) {
    const std::string message = tm_last_error();
    EXPECT_NE(message.find(call + ": options.struct_size is 4096"), std::string::npos) << message;
    EXPECT_NE(message.find("TM_OPTIONS_MAX_STRUCT_SIZE"), std::string::npos) << message;
  };
  AtPageEnd<tm_compile_options> compile(1);
  tm_compile_options_init(compile.get());
  compile.get()->struct_size = 4096;
  Program p;
  TM_EXPECT_STATUS(tm_compile(ctx, t, compile.get(), p.out()), TM_ERROR_INVALID_ARGUMENT);
  refused("tm_compile");

  AtPageEnd<tm_model_options> load(1);
  tm_model_options_init(load.get());
  load.get()->struct_size = 4096;
  tm_model *model = nullptr;
  const std::string tiny_a = std::string(TM_TEST_DATA_DIR) + "/tiny-a";
  TM_EXPECT_STATUS(tm_model_load(ctx, tiny_a.c_str(), load.get(), &model),
                   TM_ERROR_INVALID_ARGUMENT);
  refused("tm_model_load");
  load.get()->struct_size = sizeof(tm_model_options);
  TM_ASSERT_OK(tm_model_load(ctx, tiny_a.c_str(), load.get(), &model));

  AtPageEnd<tm_generate_options> generate(1);
  tm_generate_options_init(generate.get());
  generate.get()->struct_size = 4096;
  const int32_t prompt[] = {1, 2};
  int32_t ids[4];
  size_t n = 0;
  TM_EXPECT_STATUS(tm_generate(model, prompt, 2, generate.get(), nullptr, nullptr, ids, 4, &n),
                   TM_ERROR_INVALID_ARGUMENT);
  refused("tm_generate");
  // The largest size allowed reads no further than its bytes: here, zeros on the stack.
  struct {
    tm_generate_options known;
    unsigned char future[TM_OPTIONS_MAX_STRUCT_SIZE - sizeof(tm_generate_options)];
  } largest = {};
  tm_generate_options_init(&largest.known);
  largest.known.max_new_tokens = 2;
  largest.known.struct_size = TM_OPTIONS_MAX_STRUCT_SIZE;
  TM_EXPECT_STATUS(tm_generate(model, prompt, 2, &largest.known, nullptr, nullptr, ids, 4, &n),
                   TM_OK);
  tm_model_destroy(model);
}

TEST_F(Reliability, BoolBytesOtherThanZeroOrOneAreRefused) {
  tm_value c = Input(t, TM_BOOL, {3}), a = Input(t, TM_F32, {3});
  tm_value zero = Op(tm_op_scalar, t, TM_F32, 0.0);
  End(t, {Op(tm_op_where, t, c, a, zero)});
  Host<uint8_t> cond({3}, {1, 2, 0});
  Host<float> xs({3}, {1, 2, 3}), y({3}, -1.0f);
  TM_EXPECT_STATUS(CompileInvoke(ctx, t, {cond.view(), xs.view()}, {y.view()}),
                   TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("byte 2 at element 1"), std::string::npos)
      << tm_last_error();
  EXPECT_TRUE(AllClose(y.data, {-1, -1, -1}, 0.0)) << "no native code may have run";
  cond[1] = 1;
  TM_ASSERT_OK(CompileInvoke(ctx, t, {cond.view(), xs.view()}, {y.view()}));
  EXPECT_TRUE(AllClose(y.data, {1, 2, 0}, 0.0));
}

TEST_F(Reliability, OutputWhoseElementsOverlapIsRefused) {
  tm_value x = Input(t, TM_F32, {2, 2});
  End(t, {Op(tm_op_neg, t, x)});
  Host<float> xs({2, 2}, {1, 2, 3, 4});
  std::vector<float> y(4, -9.0f);
  std::vector<int64_t> shape = {2, 2}, zero_stride = {0, 1}, transposed = {1, 2};
  TM_EXPECT_STATUS(CompileInvoke(ctx, t, {xs.view()}, {View(y.data(), shape, &zero_stride)}),
                   TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("overlap"), std::string::npos);
  // A transposed (non-overlapping) view is fine.
  TM_ASSERT_OK(CompileInvoke(ctx, t, {xs.view()}, {View(y.data(), shape, &transposed)}));
  EXPECT_TRUE(AllClose(y, {-1, -3, -2, -4}, 0.0));
}

// A concatenation whose length along its axis passes int64 says so, in words, rather than
// wrapping to a negative size (nine inputs of 2^60 - 1 elements, the most one may declare).
TEST_F(Reliability, AConcatenationBeyondTwoToTheSixtyThreeElementsSaysSo) {
  std::vector<tm_value> parts;
  for (int i = 0; i < 9; ++i) parts.push_back(Input(t, TM_BOOL, {(int64_t{1} << 60) - 1}));
  tm_value joined;
  TM_EXPECT_STATUS(tm_op_concat(t, parts.data(), 9, 0, &joined), TM_ERROR_SHAPE);
  const std::string message = tm_last_error();
  EXPECT_NE(message.find("more than 2^63 elements along axis 0"), std::string::npos) << message;
  EXPECT_EQ(message.find('-'), std::string::npos) << message;
  // Seven fit int64 but not memory: the size check names the shape as it is.
  TM_EXPECT_STATUS(tm_op_concat(t, parts.data(), 7, 0, &joined), TM_ERROR_SHAPE);
  EXPECT_NE(std::string(tm_last_error()).find("(8070450532247928825,) has too many elements"),
            std::string::npos)
      << tm_last_error();
}

TEST_F(Reliability, CausalMaskOffsetsDoNotOverflow) {
  tm_value all = Op(tm_op_causal_mask, t, int64_t{2}, int64_t{3}, INT64_MAX, TM_F32);
  tm_value none = Op(tm_op_causal_mask, t, int64_t{2}, int64_t{3}, INT64_MIN, TM_F32);
  End(t, {all, none});
  Host<float> a({2, 3}, -1.0f), n({2, 3}, -1.0f);
  TM_ASSERT_OK(CompileInvoke(ctx, t, {}, {a.view(), n.view()}));
  EXPECT_TRUE(AllClose(a.data, std::vector<double>(6, 0.0), 0.0));
  for (float v : n.data) EXPECT_EQ(v, -std::numeric_limits<float>::max());
}

Trace Scaled(tm_context *ctx, int64_t n) {
  Trace t = NewTrace(ctx);
  End(t, {Op(tm_op_mul, t, Input(t, TM_F32, {n}), Op(tm_op_scalar, t, TM_F32, 2.0))});
  return t;
}

tm_cache_info Info(tm_context *ctx) {
  tm_cache_info info;
  info.struct_size = sizeof info;
  EXPECT_EQ(tm_cache_get_info(ctx, &info), TM_OK) << tm_last_error();
  return info;
}

TEST(Cache, BudgetEvictsLeastRecentlyUsed) {
  Context ctx = NewContext();
  EXPECT_EQ(Info(ctx).budget_bytes, 512ull << 20);
  TM_ASSERT_OK(tm_cache_set_budget(ctx, 1));  // every new program evicts the others
  Program a, b, c;
  Trace ta = Scaled(ctx, 2), tb = Scaled(ctx, 3), tc = Scaled(ctx, 4);
  TM_ASSERT_OK(tm_compile(ctx, ta, nullptr, a.out()));
  TM_ASSERT_OK(tm_compile(ctx, tb, nullptr, b.out()));
  TM_ASSERT_OK(tm_compile(ctx, tc, nullptr, c.out()));
  tm_cache_info info = Info(ctx);
  EXPECT_EQ(info.entries, 1u);
  EXPECT_EQ(info.evictions, 2u);
  EXPECT_GT(info.bytes, 0u);
  // Evicted programs stay valid for their holders.
  Host<float> x({2}, {1, 2}), y({2}, 0.0f);
  tm_tensor in = x.view(), out = y.view();
  TM_ASSERT_OK(tm_invoke(a, &in, 1, &out, 1));
  EXPECT_TRUE(AllClose(y.data, {2, 4}, 0.0));
  // A lookup of an evicted program compiles it again.
  Program again;
  TM_ASSERT_OK(tm_compile(ctx, ta, nullptr, again.out()));
  EXPECT_EQ(tm_program_cache_hit(again), 0);
  // With room, the least recently used goes first.
  TM_ASSERT_OK(tm_cache_set_budget(ctx, 512ull << 20));
  TM_ASSERT_OK(tm_compile(ctx, tb, nullptr, b.out()));
  EXPECT_EQ(Info(ctx).entries, 2u);
  info.struct_size = 8;
  TM_EXPECT_STATUS(tm_cache_get_info(ctx, &info), TM_ERROR_INVALID_ARGUMENT);
}

// Least recently *used*, not first in first out: a program just found in the cache (a hit)
// outlives one compiled after it when the budget evicts (core/driver/program_cache.h).
TEST(Cache, AProgramJustHitOutlivesNewerOnesWhenTheBudgetEvicts) {
  Context ctx = NewContext();
  Program a, b, c, again;
  Trace ta = Scaled(ctx, 2), tb = Scaled(ctx, 3), tc = Scaled(ctx, 4);
  TM_ASSERT_OK(tm_compile(ctx, ta, nullptr, a.out()));  // oldest
  TM_ASSERT_OK(tm_compile(ctx, tb, nullptr, b.out()));
  TM_ASSERT_OK(tm_compile(ctx, ta, nullptr, again.out()));  // a hit: now the most recent
  ASSERT_EQ(tm_program_cache_hit(again), 1);
  // Room for two of these programs (they are within a few bytes of each other), not three.
  const uint64_t two = Info(ctx).bytes;
  ASSERT_EQ(Info(ctx).entries, 2u);
  TM_ASSERT_OK(tm_cache_set_budget(ctx, two + two / 4));
  TM_ASSERT_OK(tm_compile(ctx, tc, nullptr, c.out()));
  tm_cache_info info = Info(ctx);
  EXPECT_EQ(info.entries, 2u);
  EXPECT_EQ(info.evictions, 1u);
  // b, the least recently used, went; a, compiled first but used since, stayed.
  TM_ASSERT_OK(tm_compile(ctx, ta, nullptr, again.out()));
  EXPECT_EQ(tm_program_cache_hit(again), 1) << "the program just hit was evicted (FIFO)";
  TM_ASSERT_OK(tm_compile(ctx, tb, nullptr, again.out()));
  EXPECT_EQ(tm_program_cache_hit(again), 0) << "the least recently used program stayed";
}

TEST(Cache, LargeConstantsAreNotKeptAsText) {
  Context ctx = NewContext();
  Trace t = NewTrace(ctx);
  std::vector<float> data(1 << 20, 0.5f);  // 4 MiB
  std::vector<int64_t> shape = {1 << 20};
  tm_tensor c = View(data.data(), shape);
  tm_value k = Op(tm_op_constant, t, static_cast<const tm_tensor *>(&c));
  End(t, {Op(tm_op_add, t, Input(t, TM_F32, {1 << 20}), k)});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  for (tm_stage stage : {TM_STAGE_TRACED, TM_STAGE_OPTIMIZED, TM_STAGE_BUFFERIZED, TM_STAGE_LOWERED})
    EXPECT_LT(StageText(p, stage).size(), 64u << 10) << "stage " << stage;
  char *text = nullptr;
  TM_EXPECT_STATUS(tm_program_ir(p, TM_STAGE_LLVM_IR, &text), TM_ERROR_UNSUPPORTED);
  EXPECT_LT(Info(ctx).bytes, 4u << 20);
}

TEST(Cache, ConcurrentCompilesOfOneTraceCompileOnce) {
  Context ctx = NewContext();
  constexpr int kThreads = 8;
  Trace t = Scaled(ctx, 16);
  std::vector<Program> got(kThreads);
  std::vector<tm_status> status(kThreads, TM_ERROR_RUNTIME);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { status[i] = tm_compile(ctx, t, nullptr, got[i].out()); });
  for (std::thread &th : threads) th.join();
  int compiled = 0;
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(status[i], TM_OK) << "thread " << i;
    compiled += tm_program_cache_hit(got[i]) == 0;
  }
  EXPECT_EQ(compiled, 1);
  tm_cache_info info = Info(ctx);
  EXPECT_EQ(info.misses, 1u);
  EXPECT_EQ(info.hits, static_cast<uint64_t>(kThreads - 1));
}

// tm_program is immutable: 8 threads invoking one program on their own buffers get what a
// serial run gets, on the BLAS path (8 rows) and on the GEMV worker-pool path (1 row).
TEST(Concurrency, InvokesFromEightThreadsEqualSerialResults) {
  Context ctx = NewContext();
  constexpr int kThreads = 8, kRounds = 20;
  const int64_t k = 256, n = 512;  // k * n above the GEMV's parallel threshold
  for (int64_t m : {int64_t{8}, int64_t{1}}) {
    Trace t = NewTrace(ctx);
    tm_value x = Input(t, TM_F32, {m, k});
    tm_value w = Input(t, TM_F32, {k, n});
    End(t, {Op(tm_op_matmul, t, x, w)});
    Program p;
    TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
    Host<float> wd({k, n}, 0.0f);
    for (int64_t i = 0; i < k * n; ++i) wd[i] = static_cast<float>((i * 7919) % 13) - 6.0f;
    std::vector<Host<float>> xs, serial, parallel;
    for (int i = 0; i < kThreads; ++i) {
      xs.emplace_back(std::vector<int64_t>{m, k}, 0.0f);
      for (int64_t j = 0; j < m * k; ++j) xs[i][j] = static_cast<float>((i + j) % 5) - 2.0f;
      serial.emplace_back(std::vector<int64_t>{m, n}, 0.0f);
      parallel.emplace_back(std::vector<int64_t>{m, n}, 0.0f);
      tm_tensor in[] = {xs[i].view(), wd.view()}, out = serial[i].view();
      TM_ASSERT_OK(tm_invoke(p, in, 2, &out, 1));
    }
    std::vector<int> failures(kThreads, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        for (int r = 0; r < kRounds; ++r) {
          tm_tensor in[] = {xs[i].view(), wd.view()}, out = parallel[i].view();
          if (tm_invoke(p, in, 2, &out, 1) != TM_OK || parallel[i].data != serial[i].data)
            ++failures[i];
        }
      });
    for (std::thread &th : threads) th.join();
    for (int i = 0; i < kThreads; ++i) EXPECT_EQ(failures[i], 0) << "m = " << m << ", thread " << i;
  }
}

}  // namespace
}  // namespace tmtest
