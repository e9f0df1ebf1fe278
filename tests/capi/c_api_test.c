/* The headers are C: a plain C11 program that traces, compiles and invokes the fusion
 * example affine_activation(x, gain, bias) = (x * gain + bias) * 0.5, checks an error case,
 * and the API's lifetime and versioning rules from C (cache hit, context outliving, older
 * and newer struct_size, size queries, the busy model).
 * Prints "N passed, N failed" and exits non-zero on any failure. */
#include <stdio.h>
#include <string.h>

#include "tinymlir/gpt2.h"
#include "tinymlir/tinymlir.h"
#include "c_expect.h"



#define EXPECT_OK(call)                                                               \
  do {                                                                                \
    tm_status s_ = (call);                                                            \
    EXPECT(s_ == TM_OK, "%s -> %s: %s", #call, tm_status_string(s_), tm_last_error()); \
  } while (0)

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + strlen(needle), needle)) ++n;
  return n;
}

static void test_affine(void) {
  tm_context *ctx = NULL;
  tm_trace *trace = NULL;
  tm_program *program = NULL;
  EXPECT_OK(tm_context_create(&ctx));
  EXPECT_OK(tm_trace_begin(ctx, "affine_activation", &trace));
  const int64_t x_shape[2] = {2, 4}, row_shape[1] = {4};
  tm_value x = 0, gain = 0, bias = 0, half = 0, t0 = 0, t1 = 0, y = 0;
  EXPECT_OK(tm_op_input(trace, TM_F32, 2, x_shape, &x));
  EXPECT_OK(tm_op_input(trace, TM_F32, 1, row_shape, &gain));
  EXPECT_OK(tm_op_input(trace, TM_F32, 1, row_shape, &bias));
  EXPECT_OK(tm_op_scalar(trace, TM_F32, 0.5, &half));
  EXPECT_OK(tm_op_mul(trace, x, gain, &t0));
  EXPECT_OK(tm_op_add(trace, t0, bias, &t1));
  EXPECT_OK(tm_op_mul(trace, t1, half, &y));
  EXPECT_OK(tm_trace_end(trace, &y, 1));
  EXPECT_OK(tm_compile(ctx, trace, NULL, &program));
  if (!program) {
    tm_trace_destroy(trace);
    tm_context_release(ctx);
    return;
  }

  char *traced = NULL, *optimized = NULL;
  EXPECT_OK(tm_program_ir(program, TM_STAGE_TRACED, &traced));
  EXPECT_OK(tm_program_ir(program, TM_STAGE_OPTIMIZED, &optimized));
  if (traced && optimized) {
    EXPECT(count(traced, "linalg.generic") == 3, "traced has %d generics",
           count(traced, "linalg.generic"));
    EXPECT(count(optimized, "linalg.generic") == 1, "optimized has %d generics",
           count(optimized, "linalg.generic"));
  }
  tm_free(traced);
  tm_free(optimized);

  float xs[8] = {-2, -1, 0, 1, 2, 3, 4, 5}, gs[4] = {1, 2, 3, 4}, bs[4] = {0.5f, 0, -1, 2};
  float ys[8] = {0};
  tm_tensor inputs[3] = {{xs, TM_F32, 2, x_shape, NULL},
                         {gs, TM_F32, 1, row_shape, NULL},
                         {bs, TM_F32, 1, row_shape, NULL}};
  tm_tensor output = {ys, TM_F32, 2, x_shape, NULL};
  EXPECT_OK(tm_invoke(program, inputs, 3, &output, 1));
  /* Hand-computed; every step is exact in f32, so the comparison is exact. */
  const float want[8] = {-0.75f, -1.0f, -0.5f, 3.0f, 1.25f, 3.0f, 5.5f, 11.0f};
  for (int i = 0; i < 8; ++i) EXPECT(ys[i] == want[i], "y[%d] = %g, want %g", i, ys[i], want[i]);

  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
}

static void test_error(void) {
  tm_context *ctx = NULL;
  tm_trace *trace = NULL;
  EXPECT_OK(tm_context_create(&ctx));
  EXPECT_OK(tm_trace_begin(ctx, "bad", &trace));
  const int64_t a_shape[2] = {2, 3}, b_shape[2] = {4, 3};
  tm_value a = 0, b = 0, c = 777;
  EXPECT_OK(tm_op_input(trace, TM_F32, 2, a_shape, &a));
  EXPECT_OK(tm_op_input(trace, TM_F32, 2, b_shape, &b));
  tm_status s = tm_op_add(trace, a, b, &c);
  EXPECT(s == TM_ERROR_SHAPE, "status %s", tm_status_string(s));
  EXPECT(strstr(tm_last_error(), "tm_op_add") != NULL, "message: %s", tm_last_error());
  EXPECT(strstr(tm_last_error(), "(2,3)") != NULL, "message: %s", tm_last_error());
  EXPECT(strstr(tm_last_error(), "(4,3)") != NULL, "message: %s", tm_last_error());
  EXPECT(c == 777, "out written on failure: %u", c);
  EXPECT(strcmp(tm_status_string(TM_ERROR_SHAPE), "TM_ERROR_SHAPE") == 0, "%s",
         tm_status_string(TM_ERROR_SHAPE));
  EXPECT(tm_api_version() == TM_API_VERSION, "api version %u", tm_api_version());
  tm_trace_destroy(trace);
  tm_context_release(ctx);
}

/* A trace of neg(x) for x: f32[2]. */
static tm_trace *negate(tm_context *ctx) {
  tm_trace *trace = NULL;
  const int64_t shape[1] = {2};
  tm_value x = 0, y = 0;
  EXPECT_OK(tm_trace_begin(ctx, "neg", &trace));
  EXPECT_OK(tm_op_input(trace, TM_F32, 1, shape, &x));
  EXPECT_OK(tm_op_neg(trace, x, &y));
  EXPECT_OK(tm_trace_end(trace, &y, 1));
  return trace;
}

static void test_cache_hit_and_struct_size(void) {
  tm_context *ctx = NULL;
  tm_program *a = NULL, *b = NULL;
  EXPECT_OK(tm_context_create(&ctx));
  tm_trace *trace = negate(ctx);
  tm_compile_options first;
  tm_compile_options_init(&first);
  first.struct_size = 20; /* the first published layout */
  EXPECT_OK(tm_compile(ctx, trace, &first, &a));
  EXPECT(tm_program_cache_hit(a) == 0, "first compile reported a hit");
  struct {
    tm_compile_options known;
    int32_t future;
  } newer;
  tm_compile_options_init(&newer.known);
  newer.known.struct_size = sizeof newer;
  newer.future = 0;
  EXPECT_OK(tm_compile(ctx, trace, &newer.known, &b));
  EXPECT(tm_program_cache_hit(b) == 1, "second compile of the same trace missed");
  newer.future = 1;
  tm_program *c = NULL;
  tm_status s = tm_compile(ctx, trace, &newer.known, &c);
  EXPECT(s == TM_ERROR_UNSUPPORTED && c == NULL, "newer options: %s", tm_status_string(s));
  first.struct_size = 8;
  s = tm_compile(ctx, trace, &first, &c);
  EXPECT(s == TM_ERROR_INVALID_ARGUMENT, "too small options: %s", tm_status_string(s));
  tm_program_release(a);
  tm_program_release(b);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
}

struct reentry {
  tm_model *model;
  int busy, other;
};

static int call_back_in(void *user, int32_t token) {
  struct reentry *r = (struct reentry *)user;
  size_t n = 0;
  tm_status s = tm_generate(r->model, &token, 1, NULL, NULL, NULL, NULL, 0, &n);
  if (s == TM_ERROR_BUSY) ++r->busy; else ++r->other;
  return 0;
}

static void test_model_rules(void) {
  tm_context *ctx = NULL;
  tm_model *model = NULL;
  EXPECT_OK(tm_context_create(&ctx));
  EXPECT_OK(tm_model_load(ctx, TM_MODELS_DIR "/kjv-tiny", NULL, &model));
  tm_context_release(ctx); /* the model keeps the context alive */
  if (!model) return;

  const char text[] = "In the beginning";
  size_t n_ids = 0;
  EXPECT_OK(tm_tokenize(model, text, sizeof text - 1, NULL, 0, &n_ids));
  EXPECT(n_ids == 3, "needs %zu ids", n_ids);
  int32_t ids[3] = {0, 0, 0};
  EXPECT_OK(tm_tokenize(model, text, sizeof text - 1, ids, 3, &n_ids));
  size_t len = 0;
  EXPECT_OK(tm_detokenize(model, ids, 3, NULL, 0, &len));
  EXPECT(len == sizeof text - 1, "needs %zu bytes", len);

  tm_generate_options options;
  tm_generate_options_init(&options);
  options.max_new_tokens = 4;
  struct reentry r = {model, 0, 0};
  int32_t out[4];
  size_t n = 0;
  EXPECT_OK(tm_generate(model, ids, 3, &options, call_back_in, &r, out, 4, &n));
  EXPECT(n == 4 && r.busy == 4 && r.other == 0, "n %zu, busy %d, other %d", n, r.busy, r.other);
  tm_model_destroy(model);
}

int main(void) {
  test_affine();
  test_error();
  test_cache_hit_and_struct_size();
  test_model_rules();
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
