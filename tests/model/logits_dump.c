/* Writes the model's prompt logits for a few prompts, as raw float32, to a file: run under
 * different TINYMLIR_NUM_THREADS / OPENBLAS_NUM_THREADS and TINYMLIR_CPU_EXCLUDE by
 * logits_reproducibility.sh, which requires the files to be identical byte for byte.
 * Usage: logits_dump MODEL_DIR OUT_FILE [f32|f16|bf16|q8_0] (the dtype the weight matrices
 * are held in; by default the checkpoint's) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinymlir/gpt2.h"
#include "tinymlir/tinymlir.h"

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && (!strcmp(argv[3], "f32") || !strcmp(argv[3], "f16") ||
                                   !strcmp(argv[3], "bf16") || !strcmp(argv[3], "q8_0")))) {
    fprintf(stderr, "usage: %s MODEL_DIR OUT_FILE [f32|f16|bf16|q8_0]\n", argv[0]);
    return 2;
  }
  /* Prompts of 1, 3, 9, 40 and 250 tokens: the decode shape (GEMV kernels), short prompts
   * (the kernels with half weights, OpenBLAS with f32) and prompts whose products go to
   * OpenBLAS in several blocks of columns spread over the threads. */
  static const int32_t verse[40] = {818, 262, 3726, 11, 290, 262, 4534, 373, 1231, 1296,
                                    11, 290, 9099, 26, 290, 3272, 373, 2402, 262, 1986,
                                    286, 262, 2769, 13, 843, 262, 7710, 286, 1793, 3888,
                                    2402, 262, 1986, 286, 262, 10150, 13, 843, 1793, 531};
  enum { kPrompts = 5, kLongest = 250 };
  static const size_t lengths[kPrompts] = {1, 3, 9, 40, kLongest};
  int32_t ids[kLongest];
  for (int i = 0; i < kLongest; ++i) ids[i] = verse[i % 40];
  tm_model_options options;
  tm_model_options_init(&options);
  if (argc == 4)
    options.weights = !strcmp(argv[3], "f32")    ? TM_F32
                      : !strcmp(argv[3], "f16")  ? TM_F16
                      : !strcmp(argv[3], "bf16") ? TM_BF16
                                                 : TM_Q8_0;
  tm_context *ctx = NULL;
  tm_model *model = NULL;
  int32_t vocab = 0;
  if (tm_context_create(&ctx) != TM_OK ||
      tm_model_load(ctx, argv[1], &options, &model) != TM_OK ||
      tm_model_info(model, &vocab, NULL, NULL, NULL) != TM_OK) {
    fprintf(stderr, "%s\n", tm_last_error());
    return 1;
  }
  float *logits = malloc((size_t)vocab * sizeof(float));
  FILE *out = fopen(argv[2], "wb");
  int ok = logits && out;
  for (int p = 0; ok && p < kPrompts; ++p) {
    ok = tm_model_logits(model, ids, lengths[p], logits, (size_t)vocab) == TM_OK &&
         fwrite(logits, sizeof(float), (size_t)vocab, out) == (size_t)vocab;
  }
  if (out) ok = fclose(out) == 0 && ok;
  if (!ok) fprintf(stderr, "%s\n", tm_last_error());
  free(logits);
  tm_model_destroy(model);
  tm_context_release(ctx);
  return ok ? 0 : 1;
}
