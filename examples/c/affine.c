/* An affine activation through the public C API:
 *   affine_activation(x, gain, bias) = (x * gain + bias) * 0.5
 * Traced as three elementwise ops; elementwise fusion turns them into one linalg.generic.
 * Prints the input, the output and the generic count before and after fusion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinymlir/tinymlir.h"

#define CHECK(call)                                                             \
  do {                                                                          \
    tm_status s_ = (call);                                                      \
    if (s_ != TM_OK) {                                                          \
      fprintf(stderr, "%s failed: %s: %s\n", #call, tm_status_string(s_),       \
              tm_last_error());                                                 \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) ++n;
  return n;
}

static void print_matrix(const char *name, const float *v, int rows, int cols) {
  printf("%s =\n", name);
  for (int r = 0; r < rows; ++r) {
    printf("  [");
    for (int c = 0; c < cols; ++c) printf("%s%8.3f", c ? ", " : "", v[r * cols + c]);
    printf("]\n");
  }
}

int main(void) {
  tm_context *ctx;
  tm_trace *trace;
  tm_program *program;
  CHECK(tm_context_create(&ctx));
  CHECK(tm_trace_begin(ctx, "affine_activation", &trace));

  const int64_t x_shape[2] = {2, 4}, row_shape[1] = {4};
  tm_value x, gain, bias, half, t0, t1, y;
  CHECK(tm_op_input(trace, TM_F32, 2, x_shape, &x));
  CHECK(tm_op_input(trace, TM_F32, 1, row_shape, &gain));
  CHECK(tm_op_input(trace, TM_F32, 1, row_shape, &bias));
  CHECK(tm_op_scalar(trace, TM_F32, 0.5, &half));
  CHECK(tm_op_mul(trace, x, gain, &t0));
  CHECK(tm_op_add(trace, t0, bias, &t1));
  CHECK(tm_op_mul(trace, t1, half, &y));
  CHECK(tm_trace_end(trace, &y, 1));
  CHECK(tm_compile(ctx, trace, NULL, &program));

  /* Each stage's text, snprintf-style: asked for its size, then copied into our buffer. */
  char *text[2];
  const tm_stage stages[2] = {TM_STAGE_TRACED, TM_STAGE_OPTIMIZED};
  for (int i = 0; i < 2; ++i) {
    size_t len = 0;
    CHECK(tm_program_ir_text(program, stages[i], NULL, 0, &len));
    text[i] = malloc(len + 1);
    if (!text[i]) return 1;
    CHECK(tm_program_ir_text(program, stages[i], text[i], len + 1, &len));
  }
  printf("linalg.generic ops: %d traced -> %d after fusion\n", count(text[0], "linalg.generic"),
         count(text[1], "linalg.generic"));
  free(text[0]);
  free(text[1]);

  float xs[8] = {-2, -1, 0, 1, 2, 3, 4, 5}, gs[4] = {1, 2, 3, 4}, bs[4] = {0.5f, 0, -1, 2};
  float ys[8];
  tm_tensor inputs[3] = {{xs, TM_F32, 2, x_shape, NULL},
                         {gs, TM_F32, 1, row_shape, NULL},
                         {bs, TM_F32, 1, row_shape, NULL}};
  tm_tensor output = {ys, TM_F32, 2, x_shape, NULL};
  CHECK(tm_invoke(program, inputs, 3, &output, 1));

  print_matrix("x", xs, 2, 4);
  printf("gain = [1, 2, 3, 4], bias = [0.5, 0, -1, 2]\n");
  print_matrix("(x * gain + bias) * 0.5", ys, 2, 4);

  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
  return 0;
}
