/* Every versioned struct at every published layout size (TM_<STRUCT>_SIZE_V<n>), a size
 * below the first (refused, nothing written), and a newer header's larger size: the library
 * writes exactly struct_size bytes, never past them, and takes each layout it initialised.
 * Each struct sits in front of canary bytes. Usage: struct_layouts_test MODEL_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinymlir/gpt2.h"

#define CANARY 0xA5
#define SLACK 64 /* canary bytes behind every struct */
#define NEWER 8  /* the fields a newer header would add */

static int failures = 0;
static tm_context *ctx;
static tm_trace *trace;
static tm_model *model;

#define EXPECT(cond, ...)                              \
  do {                                                 \
    if (!(cond)) {                                     \
      fprintf(stderr, "struct_layouts: " __VA_ARGS__); \
      fprintf(stderr, " (%s)\n", tm_last_error());     \
      ++failures;                                      \
    }                                                  \
  } while (0)

static unsigned char buffer[TM_OPTIONS_MAX_STRUCT_SIZE + SLACK] __attribute__((aligned(16)));

static void fill_canary(void) { memset(buffer, CANARY, sizeof buffer); }

/* Bytes [from, to) of the buffer are all canary. */
static int untouched(size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    if (buffer[i] != CANARY) return 0;
  return 1;
}

/* ---- options: init at a size, then the call that reads them ------------------------- */

typedef tm_status (*init_fn)(void *options, size_t size);
typedef tm_status (*use_fn)(void *options);

static tm_status init_compile(void *o, size_t n) { return tm_compile_options_init_size(o, n); }
static tm_status init_model(void *o, size_t n) { return tm_model_options_init_size(o, n); }
static tm_status init_generate(void *o, size_t n) { return tm_generate_options_init_size(o, n); }

static tm_status use_compile(void *o) {
  tm_program *p = NULL;
  tm_status s = tm_compile(ctx, trace, o, &p);
  tm_program_release(p);
  return s;
}
static const char *model_dir;
static tm_status use_model(void *o) {
  tm_model *m = NULL;
  tm_status s = tm_model_load(ctx, model_dir, o, &m);
  tm_model_destroy(m);
  return s;
}
static tm_status use_generate(void *o) {
  const int32_t prompt[2] = {1, 2};
  int32_t out[4];
  size_t n = 0;
  ((tm_generate_options *)o)->max_new_tokens = 2; /* a field of every layout */
  return tm_generate(model, prompt, 2, o, NULL, NULL, out, 4, &n);
}

static void check_options(const char *name, init_fn init, use_fn use, const size_t *sizes,
                          int n_sizes, size_t current) {
  for (int i = 0; i <= n_sizes; ++i) {
    const size_t size = i < n_sizes ? sizes[i] : current + NEWER; /* last: a newer header */
    fill_canary();
    EXPECT(init(buffer, size) == TM_OK, "%s_init_size(%zu)", name, size);
    EXPECT(untouched(size, sizeof buffer), "%s_init_size(%zu) wrote past the struct", name, size);
    EXPECT(*(uint32_t *)buffer == size, "%s: struct_size %u after init(%zu)", name,
           *(uint32_t *)buffer, size);
    if (size > current) EXPECT(buffer[current] == 0, "%s: a newer field not zeroed", name);
    EXPECT(use(buffer) == TM_OK, "%s at struct_size %zu refused", name, size);
    EXPECT(untouched(size, sizeof buffer), "%s's reader wrote past the struct (%zu)", name, size);
  }
  /* Below the first layout, and beyond any: refused, nothing written. */
  const size_t bad[2] = {sizes[0] - 1, TM_OPTIONS_MAX_STRUCT_SIZE + 1};
  for (int i = 0; i < 2; ++i) {
    fill_canary();
    EXPECT(init(buffer, bad[i]) == TM_ERROR_INVALID_ARGUMENT, "%s_init_size(%zu) accepted", name,
           bad[i]);
    EXPECT(untouched(0, sizeof buffer), "%s_init_size(%zu) wrote though it refused", name, bad[i]);
  }
  EXPECT(init(NULL, sizes[0]) == TM_ERROR_INVALID_ARGUMENT, "%s_init_size(NULL)", name);
}

/* ---- query structs: struct_size set, the rest canary -------------------------------- */

typedef tm_status (*get_fn)(void *info);
static tm_status get_cache(void *i) { return tm_cache_get_info(ctx, i); }
static tm_status get_times(void *t) { return tm_process_kernel_times(t); }
static tm_status get_stats(void *s) { return tm_model_get_stats(model, s); }
static tm_status get_target(void *t) { return tm_target_get_info(TM_TARGET_CPU, t); }
static tm_status get_counters(void *c) { return tm_target_get_device_counters(TM_TARGET_GPU, c); }

static void check_query(const char *name, get_fn get, const size_t *sizes, int n_sizes,
                        size_t current) {
  for (int i = 0; i <= n_sizes; ++i) {
    const size_t size = i < n_sizes ? sizes[i] : current + NEWER;
    fill_canary();
    *(uint32_t *)buffer = (uint32_t)size;
    EXPECT(get(buffer) == TM_OK, "%s(struct_size %zu)", name, size);
    EXPECT(*(uint32_t *)buffer == size, "%s changed struct_size %zu", name, size);
    /* Past the library's layout (a newer header's fields) and past the struct: untouched. */
    const size_t written = size < current ? size : current;
    EXPECT(untouched(written, sizeof buffer), "%s(struct_size %zu) wrote past %zu bytes", name,
           size, written);
    EXPECT(!untouched(4, written), "%s(struct_size %zu) wrote nothing", name, size);
  }
  fill_canary();
  *(uint32_t *)buffer = (uint32_t)(sizes[0] - 1);
  EXPECT(get(buffer) == TM_ERROR_INVALID_ARGUMENT, "%s(struct_size %zu) accepted", name,
         sizes[0] - 1);
  EXPECT(untouched(4, sizeof buffer), "%s wrote though it refused", name);
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  model_dir = argv[1];
  tm_value x, y;
  const int64_t shape[1] = {2};
  if (tm_context_create(&ctx) != TM_OK || tm_trace_begin(ctx, "layouts", &trace) != TM_OK ||
      tm_op_input(trace, TM_F32, 1, shape, &x) != TM_OK || tm_op_neg(trace, x, &y) != TM_OK ||
      tm_trace_end(trace, &y, 1) != TM_OK || tm_model_load(ctx, model_dir, NULL, &model) != TM_OK) {
    fprintf(stderr, "struct_layouts: set-up failed: %s\n", tm_last_error());
    return 1;
  }
  const size_t compile[] = {TM_COMPILE_OPTIONS_SIZE_V1, TM_COMPILE_OPTIONS_SIZE_V2};
  check_options("tm_compile_options", init_compile, use_compile, compile, 2, sizeof(tm_compile_options));
  const size_t model_sizes[] = {TM_MODEL_OPTIONS_SIZE_V1, TM_MODEL_OPTIONS_SIZE_V2, TM_MODEL_OPTIONS_SIZE_V3};
  check_options("tm_model_options", init_model, use_model, model_sizes, 3, sizeof(tm_model_options));
  const size_t generate[] = {TM_GENERATE_OPTIONS_SIZE_V1, TM_GENERATE_OPTIONS_SIZE_V2};
  check_options("tm_generate_options", init_generate, use_generate, generate, 2,
                sizeof(tm_generate_options));
  const size_t cache[] = {TM_CACHE_INFO_SIZE_V1, TM_CACHE_INFO_SIZE_V2};
  check_query("tm_cache_get_info", get_cache, cache, 2, sizeof(tm_cache_info));
  const size_t times[] = {TM_KERNEL_TIMES_SIZE_V1};
  check_query("tm_process_kernel_times", get_times, times, 1, sizeof(tm_kernel_times));
  const size_t stats[] = {TM_MODEL_STATS_SIZE_V1, TM_MODEL_STATS_SIZE_V2, TM_MODEL_STATS_SIZE_V3,
                          TM_MODEL_STATS_SIZE_V4};
  check_query("tm_model_get_stats", get_stats, stats, 4, sizeof(tm_model_stats));
  const size_t counters[] = {TM_DEVICE_COUNTERS_SIZE_V1};
  check_query("tm_target_get_device_counters", get_counters, counters, 1,
              sizeof(tm_device_counters));
  const size_t target[] = {TM_TARGET_INFO_SIZE_V1};
  check_query("tm_target_get_info", get_target, target, 1, sizeof(tm_target_info));
  /* The newest published size of each struct is this header's sizeof. */
  EXPECT(sizeof(tm_compile_options) == TM_COMPILE_OPTIONS_SIZE_V2, "tm_compile_options grew without a TM_COMPILE_OPTIONS_SIZE_V3");
  EXPECT(sizeof(tm_model_options) == TM_MODEL_OPTIONS_SIZE_V3, "tm_model_options grew without a new size");
  EXPECT(sizeof(tm_generate_options) == TM_GENERATE_OPTIONS_SIZE_V2, "tm_generate_options grew without a new size");
  EXPECT(sizeof(tm_cache_info) == TM_CACHE_INFO_SIZE_V2, "tm_cache_info grew without a new size");
  EXPECT(sizeof(tm_kernel_times) == TM_KERNEL_TIMES_SIZE_V1, "tm_kernel_times grew without a new size");
  EXPECT(sizeof(tm_model_stats) == TM_MODEL_STATS_SIZE_V4, "tm_model_stats grew without a new size");
  EXPECT(sizeof(tm_device_counters) == TM_DEVICE_COUNTERS_SIZE_V1, "tm_device_counters grew without a new size");
  EXPECT(sizeof(tm_target_info) == TM_TARGET_INFO_SIZE_V1, "tm_target_info grew without a new size");
  tm_model_destroy(model);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
  if (failures == 0) printf("struct_layouts: every struct at every published size, no byte past it\n");
  return failures == 0 ? 0 : 1;
}
