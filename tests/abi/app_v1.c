/* An application built against the 1.0 headers as published (headers/v1.0, a frozen copy),
 * run against the current library: every versioned struct it hands the library sits in
 * front of 64 canary bytes, which must come back untouched, and every result must be right
 * (a sum computed by a compiled program, the model's greedy tokens against the Hugging Face
 * golden). A later 1.x library that writes past a 1.0 struct, or reads one wrongly, fails
 * here. Usage: app_v1 MODEL_DIR PROMPT_IDS(comma) GOLDEN_IDS(comma) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinymlir/gpt2.h"

#define CANARY 0xA5
#define CANARY_BYTES 64

static int failures = 0;

#define EXPECT(cond, ...)                     \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "app_v1: " __VA_ARGS__); \
      fprintf(stderr, " (%s)\n", tm_last_error()); \
      ++failures;                             \
    }                                         \
  } while (0)

/* A struct of `size` bytes followed by canaries, zeroed in between. */
static void *with_canary(size_t size) {
  unsigned char *p = malloc(size + CANARY_BYTES);
  if (!p) exit(2);
  memset(p, 0, size);
  memset(p + size, CANARY, CANARY_BYTES);
  return p;
}

static int canary_intact(const void *p, size_t size) {
  const unsigned char *c = (const unsigned char *)p + size;
  for (int i = 0; i < CANARY_BYTES; ++i)
    if (c[i] != CANARY) return 0;
  return 1;
}

static size_t parse_ids(const char *text, int32_t *ids, size_t capacity) {
  size_t n = 0;
  for (const char *p = text; *p && n < capacity;) {
    ids[n++] = (int32_t)strtol(p, (char **)&p, 10);
    if (*p == ',') ++p;
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: app_v1 MODEL_DIR PROMPT_IDS GOLDEN_IDS\n");
    return 2;
  }
  EXPECT(tm_api_version() / 1000 == TM_API_VERSION / 1000 && tm_api_version() >= TM_API_VERSION,
         "library ABI %u, header ABI %u", tm_api_version(), TM_API_VERSION);

  /* A compiled program: a + b, into an output followed by canaries. */
  tm_context *ctx = NULL;
  EXPECT(tm_context_create(&ctx) == TM_OK, "tm_context_create");
  tm_trace *trace = NULL;
  tm_value a, b, sum;
  const int64_t shape[1] = {3};
  tm_trace_begin(ctx, "app_v1", &trace);
  tm_op_input(trace, TM_F32, 1, shape, &a);
  tm_op_input(trace, TM_F32, 1, shape, &b);
  tm_op_add(trace, a, b, &sum);
  EXPECT(tm_trace_end(trace, &sum, 1) == TM_OK, "tm_trace_end");
  tm_compile_options *options = with_canary(sizeof *options);
  tm_compile_options_init(options);
  EXPECT(canary_intact(options, sizeof *options), "tm_compile_options_init wrote past the struct");
  EXPECT(options->struct_size == sizeof *options && options->opt_level == 3 && options->use_blas == 1,
         "tm_compile_options_init gave struct_size %u, opt_level %d", options->struct_size,
         options->opt_level);
  tm_program *program = NULL;
  EXPECT(tm_compile(ctx, trace, options, &program) == TM_OK, "tm_compile");
  const float xs[3] = {1, 2, 3}, ys[3] = {10, 20, 30};
  float *out = with_canary(3 * sizeof(float));
  tm_tensor in[2], res[1];
  in[0].const_data = xs;
  in[1].const_data = ys;
  res[0].data = out;
  for (int i = 0; i < 2; ++i) {
    in[i].dtype = TM_F32, in[i].rank = 1, in[i].shape = shape, in[i].strides = NULL;
  }
  res[0].dtype = TM_F32, res[0].rank = 1, res[0].shape = shape, res[0].strides = NULL;
  EXPECT(tm_invoke(program, in, 2, res, 1) == TM_OK, "tm_invoke");
  EXPECT(out[0] == 11 && out[1] == 22 && out[2] == 33, "a + b = %g %g %g", out[0], out[1], out[2]);
  EXPECT(canary_intact(out, 3 * sizeof(float)), "tm_invoke wrote past the output");

  /* Query structs, filled up to struct_size. */
  tm_cache_info *info = with_canary(sizeof *info);
  info->struct_size = sizeof *info;
  EXPECT(tm_cache_get_info(ctx, info) == TM_OK && info->misses == 1 && info->entries == 1,
         "tm_cache_get_info: %llu misses, %llu entries", (unsigned long long)info->misses,
         (unsigned long long)info->entries);
  EXPECT(canary_intact(info, sizeof *info), "tm_cache_get_info wrote past the struct");
  tm_kernel_times *times = with_canary(sizeof *times);
  times->struct_size = sizeof *times;
  EXPECT(tm_process_kernel_times(times) == TM_OK, "tm_process_kernel_times");
  EXPECT(canary_intact(times, sizeof *times), "tm_process_kernel_times wrote past the struct");

  /* The model: load, greedy generation against the golden tokens, statistics. */
  tm_model_options *model_options = with_canary(sizeof *model_options);
  tm_model_options_init(model_options);
  EXPECT(canary_intact(model_options, sizeof *model_options),
         "tm_model_options_init wrote past the struct");
  tm_model *model = NULL;
  EXPECT(tm_model_load(ctx, argv[1], model_options, &model) == TM_OK, "tm_model_load %s", argv[1]);
  int32_t prompt[64], golden[64], got[64];
  const size_t n_prompt = parse_ids(argv[2], prompt, 64), n_golden = parse_ids(argv[3], golden, 64);
  tm_generate_options *generate = with_canary(sizeof *generate);
  tm_generate_options_init(generate);
  EXPECT(canary_intact(generate, sizeof *generate), "tm_generate_options_init wrote past the struct");
  generate->max_new_tokens = (int32_t)n_golden;
  size_t n_out = 0;
  if (model)
    EXPECT(tm_generate(model, prompt, n_prompt, generate, NULL, NULL, got, 64, &n_out) == TM_OK,
           "tm_generate");
  EXPECT(n_out == n_golden, "%zu tokens, the golden has %zu", n_out, n_golden);
  for (size_t i = 0; i < n_out && i < n_golden; ++i)
    EXPECT(got[i] == golden[i], "token %zu is %d, the golden's %d", i, got[i], golden[i]);
  tm_model_stats *stats = with_canary(sizeof *stats);
  stats->struct_size = sizeof *stats;
  if (model) EXPECT(tm_model_get_stats(model, stats) == TM_OK, "tm_model_get_stats");
  EXPECT(stats->decode_tokens + 1 >= n_golden, "%llu decode tokens",
         (unsigned long long)stats->decode_tokens);
  EXPECT(canary_intact(stats, sizeof *stats), "tm_model_get_stats wrote past the struct");

  tm_model_destroy(model);
  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
  free(options), free(out), free(info), free(times), free(model_options), free(generate), free(stats);
  if (failures == 0) printf("app_v1: every result right, every canary intact\n");
  return failures == 0 ? 0 : 1;
}
