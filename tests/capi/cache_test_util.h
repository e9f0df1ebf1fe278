// What the program-cache tests share (cache_test.cpp, fork_test.cpp): the cache's counters
// and a small trace whose weight is an input.
#pragma once

#include "test_util.h"

namespace tmtest {

struct Stats {
  uint64_t hits = 0, misses = 0, entries = 0;
};

inline Stats CacheStats(tm_context *ctx) {
  Stats s;
  EXPECT_EQ(tm_cache_stats(ctx, &s.hits, &s.misses, &s.entries), TM_OK) << tm_last_error();
  return s;
}

// y = x * w + 1, with the weight w a program input (never baked in).
inline Trace TraceScaled(tm_context *ctx, std::vector<int64_t> x_shape, const char *name = "scaled",
                         tm_dtype dtype = TM_F32) {
  Trace t = NewTrace(ctx, name);
  tm_value x = Input(t, dtype, x_shape);
  tm_value w = Input(t, dtype, {x_shape.back()});
  tm_value one = Op(tm_op_scalar, t, TM_F64, 1.0);
  End(t, {Op(tm_op_add, t, Op(tm_op_mul, t, x, w), one)});
  return t;
}

}  // namespace tmtest
