/* An application written against a 0.x header (headers/v0-*), built as it was then: linked
 * to libtinymlir.so.0. tinymlir 1.0 changed signatures under the ABI it declared (tm_model_load
 * took a tm_target, tm_model_logits had no capacity, the *_options_init functions filled
 * sizeof of the library's struct), so 1.x is libtinymlir.so.1 and the loader refuses this
 * binary before a line of it runs (CMakeLists.txt expects exactly that refusal). Were it run
 * on a 0.x library, it would add two vectors and load a model with the 0.x calls. */
#include <stdio.h>

#include "tinymlir/tinymlir.h"
#ifndef TM_V0_MODEL_IN_TINYMLIR_H
#include "tinymlir/gpt2.h"
#endif

int main(int argc, char **argv) {
  tm_context *ctx = NULL;
  tm_trace *trace = NULL;
  tm_program *program = NULL;
  tm_model *model = NULL;
  tm_value a, b, sum;
  const int64_t shape[1] = {3};
  if (tm_context_create(&ctx) != TM_OK) return 1;
  tm_trace_begin(ctx, "old", &trace);
  tm_op_input(trace, TM_F32, 1, shape, &a);
  tm_op_input(trace, TM_F32, 1, shape, &b);
  tm_op_add(trace, a, b, &sum);
  tm_trace_end(trace, &sum, 1);
  tm_compile_options options;
  tm_compile_options_init(&options);
  if (tm_compile(ctx, trace, &options, &program) != TM_OK) return 1;
#ifdef TM_V0_MODEL_IN_TINYMLIR_H
  if (argc > 1 && tm_model_load(ctx, argv[1], TM_TARGET_CPU, &model) != TM_OK) return 1;
#else
  tm_model_options model_options;
  tm_model_options_init(&model_options);
  if (argc > 1 && tm_model_load(ctx, argv[1], &model_options, &model) != TM_OK) return 1;
#endif
  puts("ran");
  tm_model_destroy(model);
  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_destroy(ctx);
  return 0;
}
