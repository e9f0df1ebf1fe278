// Versions and lifetimes at the C boundary: the version macros match the library, options
// structs of older and newer layouts, and reference-counted contexts.
#include "test_util.h"

namespace tmtest {
namespace {

TEST(Versioning, HeaderAndLibraryAgree) {
  EXPECT_EQ(tm_api_version(), TM_API_VERSION);
  EXPECT_STREQ(tm_version(), TM_VERSION_STRING);
  std::string v = std::to_string(TM_VERSION_MAJOR) + "." + std::to_string(TM_VERSION_MINOR) +
                  "." + std::to_string(TM_VERSION_PATCH);
  EXPECT_EQ(v, tm_version());
}

Trace Negate(tm_context *ctx) {
  Trace t = NewTrace(ctx);
  End(t, {Op(tm_op_neg, t, Input(t, TM_F32, {2}))});
  return t;
}

TEST(Versioning, CompileOptionsOfOtherLayouts) {
  Context ctx = NewContext();
  Trace t = Negate(ctx);
  Program p;
  tm_compile_options first = Options();
  first.struct_size = 20;  // the first published layout
  TM_ASSERT_OK(tm_compile(ctx, t, &first, p.out()));

  struct Newer {
    tm_compile_options known;
    int32_t future_field;
  } newer;
  newer.known = Options();
  newer.known.struct_size = sizeof newer;
  newer.future_field = 0;  // zero is every future field's default: accepted
  TM_ASSERT_OK(tm_compile(ctx, t, &newer.known, p.out()));
  EXPECT_EQ(tm_program_cache_hit(p), 1) << "the same options as the first compile";
  newer.future_field = 3;  // a request this library cannot honour: refused, not ignored
  TM_EXPECT_STATUS(tm_compile(ctx, t, &newer.known, p.out()), TM_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(tm_last_error()).find("newer header"), std::string::npos);

  tm_compile_options small = Options();
  small.struct_size = 19;
  TM_EXPECT_STATUS(tm_compile(ctx, t, &small, p.out()), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("struct_size"), std::string::npos);
}

TEST(Versioning, ContextIsReferenceCounted) {
  tm_context *ctx = nullptr;
  TM_ASSERT_OK(tm_context_create(&ctx));
  tm_context_retain(ctx);
  tm_context_release(ctx);  // one reference left: still usable
  Trace t = Negate(ctx);
  Program p;
  TM_ASSERT_OK(tm_compile(ctx, t, nullptr, p.out()));
  tm_context_release(ctx);  // the last one
  tm_context_retain(nullptr);
  tm_context_release(nullptr);
  Host<float> x({2}, {1, -2}), y({2}, 0.0f);
  tm_tensor in = x.view(), out = y.view();
  TM_ASSERT_OK(tm_invoke(p, &in, 1, &out, 1));  // programs outlive their context
  EXPECT_EQ(y.data, (std::vector<float>{-1, 2}));
}

}  // namespace
}  // namespace tmtest
