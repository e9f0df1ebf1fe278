// The context's program cache: equal traces and options share one program; anything that
// changes the generated code (shape, dtype, constant, option) is a new program.
#include <thread>

#include "cache_test_util.h"

namespace tmtest {
namespace {

TEST(Cache, EqualTraceIsAHit) {
  Context ctx = NewContext();
  Stats s = CacheStats(ctx);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.entries, 0u);

  Trace a = TraceScaled(ctx, {2, 3});
  Program pa;
  TM_ASSERT_OK(tm_compile(ctx, a, nullptr, pa.out()));
  EXPECT_EQ(tm_program_cache_hit(pa), 0);
  s = CacheStats(ctx);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.entries, 1u);

  // A second, separately traced trace (its name is for messages only).
  Trace b = TraceScaled(ctx, {2, 3}, "another_name");
  Program pb;
  TM_ASSERT_OK(tm_compile(ctx, b, nullptr, pb.out()));
  EXPECT_EQ(tm_program_cache_hit(pb), 1);
  EXPECT_EQ(tm_program_cache_hit(pa), 0);  // answered per returned reference
  s = CacheStats(ctx);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.entries, 1u);

  // Compiling the same trace object again is a hit too.
  Program pc;
  TM_ASSERT_OK(tm_compile(ctx, a, nullptr, pc.out()));
  EXPECT_EQ(tm_program_cache_hit(pc), 1);
  EXPECT_EQ(tm_program_cache_hit(nullptr), 0);
  EXPECT_EQ(CacheStats(ctx).hits, 2u);
}

TEST(Cache, DifferentWeightValuesShareOneProgram) {
  Context ctx = NewContext();
  Trace t1 = TraceScaled(ctx, {2, 3}), t2 = TraceScaled(ctx, {2, 3});
  Program p1, p2;
  TM_ASSERT_OK(tm_compile(ctx, t1, nullptr, p1.out()));
  TM_ASSERT_OK(tm_compile(ctx, t2, nullptr, p2.out()));
  ASSERT_EQ(tm_program_cache_hit(p2), 1);

  Host<float> x({2, 3}, {1, 2, 3, 4, 5, 6});
  Host<float> w1({3}, {1, 1, 1}), w2({3}, {2, 0, -1});
  Host<float> y1({2, 3}, -99.0f), y2({2, 3}, -99.0f);
  tm_tensor in1[] = {x.view(), w1.view()}, in2[] = {x.view(), w2.view()};
  tm_tensor out1 = y1.view(), out2 = y2.view();
  TM_ASSERT_OK(tm_invoke(p1, in1, 2, &out1, 1));
  TM_ASSERT_OK(tm_invoke(p2, in2, 2, &out2, 1));
  // Small integers: exact in f32.
  EXPECT_TRUE(AllClose(y1.data, {2, 3, 4, 5, 6, 7}, 0.0));
  EXPECT_TRUE(AllClose(y2.data, {3, 1, -2, 9, 1, -5}, 0.0));
  Stats s = CacheStats(ctx);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.entries, 1u);
}

TEST(Cache, NewShapeOrDtypeIsANewProgram) {
  Context ctx = NewContext();
  Trace a = TraceScaled(ctx, {2, 3}), b = TraceScaled(ctx, {4, 3}),
        c = TraceScaled(ctx, {2, 3}, "f64", TM_F64);
  Program pa, pb, pc;
  TM_ASSERT_OK(tm_compile(ctx, a, nullptr, pa.out()));
  TM_ASSERT_OK(tm_compile(ctx, b, nullptr, pb.out()));
  TM_ASSERT_OK(tm_compile(ctx, c, nullptr, pc.out()));
  EXPECT_EQ(tm_program_cache_hit(pb), 0);
  EXPECT_EQ(tm_program_cache_hit(pc), 0);
  Stats s = CacheStats(ctx);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.entries, 3u);

  int64_t shape[TM_MAX_RANK];
  int32_t rank = 0;
  TM_ASSERT_OK(tm_program_input_type(pb, 0, nullptr, &rank, shape));
  ASSERT_EQ(rank, 2);
  EXPECT_EQ(shape[0], 4);
  EXPECT_EQ(shape[1], 3);
}

TEST(Cache, DifferentCompileOptionsAreDifferentPrograms) {
  Context ctx = NewContext();
  Trace t = TraceScaled(ctx, {2, 3});
  tm_compile_options variants[] = {Options(1, 1, 3), Options(0, 1, 3), Options(1, 0, 3),
                                   Options(1, 1, 0)};
  std::vector<Program> programs;
  for (const tm_compile_options &o : variants) {
    programs.emplace_back();
    TM_ASSERT_OK(tm_compile(ctx, t, &o, programs.back().out()));
  }
  for (size_t i = 0; i < programs.size(); ++i)
    EXPECT_EQ(tm_program_cache_hit(programs[i]), 0) << "variant " << i;
  // NULL options are the defaults: the same program as variant 0.
  Program dflt;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, dflt.out()));
  EXPECT_EQ(tm_program_cache_hit(dflt), 1);
  Stats s = CacheStats(ctx);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.entries, 4u);
}

// Options the compiler refuses (every kind the library checks) are no lookup: the cache's
// counts stay as they were (found by the C API fuzzer: an opt level of 4 counted as a miss).
TEST(Cache, RefusedOptionsAreNoLookup) {
  Context ctx = NewContext();
  Trace t = TraceScaled(ctx, {2, 3});
  tm_compile_options bad[4];
  for (tm_compile_options &o : bad) tm_compile_options_init(&o);
  bad[0].opt_level = 4;
  bad[1].target = TM_TARGET_GPU;
  bad[1].gpu_sm = 7;
  bad[2].target = TM_TARGET_GPU;
  bad[2].gpu_matmul_tile = 33;
  bad[3].target = static_cast<tm_target>(7);
  for (const tm_compile_options &o : bad) {
    Program p;
    TM_EXPECT_STATUS(tm_compile(ctx, t, &o, p.out()), TM_ERROR_INVALID_ARGUMENT);
  }
  Stats s = CacheStats(ctx);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.entries, 0u);
}

TEST(Cache, DifferentConstantsOrScalarsAreDifferentPrograms) {
  Context ctx = NewContext();
  auto trace = [&](float c0, double scalar) {
    Trace t = NewTrace(ctx);
    tm_value x = Input(t, TM_F32, {2});
    std::vector<int64_t> shape = {2};
    float c[2] = {c0, 2.0f};
    tm_tensor ct = View(c, shape);
    tm_value k = Op(tm_op_constant, t, static_cast<const tm_tensor *>(&ct));
    tm_value s = Op(tm_op_scalar, t, TM_F32, scalar);
    End(t, {Op(tm_op_mul, t, Op(tm_op_add, t, x, k), s)});
    return t;
  };
  Trace a = trace(1.0f, 3.0), b = trace(1.5f, 3.0), c = trace(1.0f, 4.0), d = trace(1.0f, 3.0);
  Program pa, pb, pc, pd;
  TM_ASSERT_OK(tm_compile(ctx, a, nullptr, pa.out()));
  TM_ASSERT_OK(tm_compile(ctx, b, nullptr, pb.out()));
  TM_ASSERT_OK(tm_compile(ctx, c, nullptr, pc.out()));
  TM_ASSERT_OK(tm_compile(ctx, d, nullptr, pd.out()));
  EXPECT_EQ(tm_program_cache_hit(pb), 0);
  EXPECT_EQ(tm_program_cache_hit(pc), 0);
  EXPECT_EQ(tm_program_cache_hit(pd), 1);

  Host<float> x({2}, {1, 1}), y({2}, -99.0f);
  tm_tensor in = x.view(), out = y.view();
  TM_ASSERT_OK(tm_invoke(pb, &in, 1, &out, 1));
  EXPECT_TRUE(AllClose(y.data, {7.5, 9.0}, 0.0));  // (1 + {1.5, 2}) * 3, exact
  TM_ASSERT_OK(tm_invoke(pc, &in, 1, &out, 1));
  EXPECT_TRUE(AllClose(y.data, {8.0, 12.0}, 0.0));  // (1 + {1, 2}) * 4, exact
}

TEST(Cache, ProgramOutlivesItsContextAndTrace) {
  Context ctx = NewContext();
  Trace t = TraceScaled(ctx, {2, 3});
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  tm_program *raw = p.get();

  // An extra reference, dropped below: the program must survive it.
  tm_program_retain(raw);
  ctx = Context();  // destroys the context: the cache drops its reference
  t = Trace();      // and the trace: the program does not refer to it
  tm_program_release(raw);

  Host<float> x({2, 3}, {1, 2, 3, 4, 5, 6}), w({3}, {0.5f, -1, 2}), y({2, 3}, -99.0f);
  tm_tensor in[] = {x.view(), w.view()}, out = y.view();
  TM_ASSERT_OK(tm_invoke(p, in, 2, &out, 1));
  EXPECT_TRUE(AllClose(y.data, {1.5, -1, 7, 3, -4, 13}, 0.0));  // exact in f32
  EXPECT_EQ(tm_program_num_inputs(p), 2);
  EXPECT_FALSE(StageText(p, TM_STAGE_TRACED).empty());
}

TEST(Cache, StatsAcceptNullOutputs) {
  Context ctx = NewContext();
  TM_ASSERT_OK(tm_cache_stats(ctx, nullptr, nullptr, nullptr));
  uint64_t entries = 7;
  TM_ASSERT_OK(tm_cache_stats(ctx, nullptr, nullptr, &entries));
  EXPECT_EQ(entries, 0u);
}

TEST(Cache, ConcurrentCompilesOfEqualTracesShareOneProgram) {
  // tm_context is thread-safe: several threads may compile in it at once.
  Context ctx = NewContext();
  constexpr int kThreads = 4;
  std::vector<Trace> traces;
  for (int i = 0; i < kThreads; ++i) traces.push_back(TraceScaled(ctx, {8, 16}));
  std::vector<tm_program *> got(kThreads, nullptr);
  std::vector<tm_status> status(kThreads, TM_ERROR_RUNTIME);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { status[i] = tm_compile(ctx, traces[i], nullptr, &got[i]); });
  for (std::thread &th : threads) th.join();
  uint64_t hits = 0;
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(status[i], TM_OK) << "thread " << i;
    hits += static_cast<uint64_t>(tm_program_cache_hit(got[i]));
  }
  Stats s = CacheStats(ctx);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.hits + s.misses, static_cast<uint64_t>(kThreads));
  EXPECT_EQ(hits, s.hits);  // each reference knows how its own lookup went
  for (tm_program *p : got) tm_program_release(p);
}

}  // namespace
}  // namespace tmtest
