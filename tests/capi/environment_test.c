/* The environment variables the library reads (core/support/environment.h).
 * Usage: environment_test MODE, with the variables set by the caller (each is read once):
 *   portable             (TINYMLIR_CPU_EXCLUDE=avx2,fma,f16c) casts between f16 and f32
 *                        compile to calls into libgcc's __extendhfsf2 / __truncsfhf2, with no
 *                        F16C instruction, and give the exact widening of every f16 value
 *                        and round-to-nearest-even narrowing of the midpoint between every
 *                        two neighbours.
 *   refused NAME VALUE   (NAME=VALUE, a value the library cannot take) tm_compile and
 *                        tm_program_load fail with TM_ERROR_INVALID_ARGUMENT naming the
 *                        variable and the value, and nothing is compiled or read.
 * Prints "N passed, N failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinymlir/tinymlir.h"
#include "c_expect.h"

/* The value of binary16 bits, from the format's definition. */
static float f16_value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
  float magnitude;
  if (exponent == 0x1f) magnitude = fraction ? NAN : INFINITY;
  else if (exponent == 0) magnitude = ldexpf((float)fraction, -24);
  else magnitude = ldexpf((float)(fraction + 1024), exponent - 25);
  return sign ? -magnitude : magnitude;
}

/* An f32 -> f16 -> f32 round trip program, or f16 -> f32 (`widen`). */
static tm_program *compile_cast(tm_context *ctx, int widen, int64_t n, tm_status *status) {
  tm_trace *t = NULL;
  tm_value x, y;
  tm_program *p = NULL;
  *status = tm_trace_begin(ctx, widen ? "widen" : "narrow", &t);
  if (*status != TM_OK) return NULL;
  if (widen) {
    tm_op_input(t, TM_F16, 1, &n, &x);
    tm_op_cast(t, x, TM_F32, &y);
  } else {
    tm_value h;
    tm_op_input(t, TM_F32, 1, &n, &x);
    tm_op_cast(t, x, TM_F16, &h);
    tm_op_cast(t, h, TM_F32, &y);
  }
  tm_trace_end(t, &y, 1);
  *status = tm_compile(ctx, t, NULL, &p);
  tm_trace_destroy(t);
  return p;
}

static int contains(const char *text, const char *word) { return text && strstr(text, word); }

static void check_portable(tm_context *ctx) {
  enum { kAll = 65536 };
  tm_status s;
  tm_program *widen = compile_cast(ctx, 1, kAll, &s);
  EXPECT(s == TM_OK, "compile widen: %s", tm_last_error());
  tm_program *narrow = compile_cast(ctx, 0, kAll, &s);
  EXPECT(s == TM_OK, "compile narrow: %s", tm_last_error());
  if (!widen || !narrow) return;

  char *assembly = NULL;
  EXPECT(tm_program_ir(widen, TM_STAGE_ASSEMBLY, &assembly) == TM_OK, "%s", tm_last_error());
  EXPECT(contains(assembly, "__extendhfsf2"), "the widening does not call __extendhfsf2");
  EXPECT(!contains(assembly, "vcvtph2ps"), "the widening uses F16C (vcvtph2ps)");
  tm_free(assembly);
  assembly = NULL;
  EXPECT(tm_program_ir(narrow, TM_STAGE_ASSEMBLY, &assembly) == TM_OK, "%s", tm_last_error());
  EXPECT(contains(assembly, "__truncsfhf2"), "the narrowing does not call __truncsfhf2");
  EXPECT(!contains(assembly, "vcvtps2ph"), "the narrowing uses F16C (vcvtps2ph)");
  tm_free(assembly);

  /* Every f16 value widens exactly; each f32 value of an f16, and each midpoint between
   * two neighbours, narrows as round-to-nearest-even says. */
  static uint16_t bits[kAll];
  static float wide[kAll], mid[kAll], back[kAll];
  for (int i = 0; i < kAll; ++i) bits[i] = (uint16_t)i;
  const int64_t n = kAll;
  tm_tensor in = {bits, TM_F16, 1, &n, NULL}, out = {wide, TM_F32, 1, &n, NULL};
  EXPECT(tm_invoke(widen, &in, 1, &out, 1) == TM_OK, "invoke widen: %s", tm_last_error());
  int wrong = 0;
  for (int i = 0; i < kAll; ++i) {
    const float want = f16_value((uint16_t)i);
    if (isnan(want) ? !isnan(wide[i]) : memcmp(&want, &wide[i], sizeof want) != 0) ++wrong;
  }
  EXPECT(wrong == 0, "%d of 65536 f16 values widened wrongly", wrong);

  /* Midpoints between consecutive finite positive f16 values: the even one wins. */
  const int kFinite = 0x7bff;  /* the largest finite f16 */
  for (int i = 0; i < kAll; ++i)
    mid[i] = i < kFinite ? (f16_value((uint16_t)i) + f16_value((uint16_t)(i + 1))) / 2 : 0.0f;
  tm_tensor in_mid = {mid, TM_F32, 1, &n, NULL}, out_back = {back, TM_F32, 1, &n, NULL};
  EXPECT(tm_invoke(narrow, &in_mid, 1, &out_back, 1) == TM_OK, "invoke narrow: %s",
         tm_last_error());
  wrong = 0;
  for (int i = 0; i < kFinite; ++i)
    if (back[i] != f16_value((uint16_t)((i & 1) ? i + 1 : i))) ++wrong;
  EXPECT(wrong == 0, "%d of %d midpoints narrowed wrongly", wrong, kFinite);

  tm_program_release(widen);
  tm_program_release(narrow);
}

static void check_refused(tm_context *ctx, const char *name, const char *value) {
  tm_status s;
  tm_program *p = compile_cast(ctx, 1, 4, &s);
  EXPECT(s == TM_ERROR_INVALID_ARGUMENT && p == NULL, "compile: status %d", (int)s);
  const char *message = tm_last_error();
  EXPECT(strstr(message, name) && strstr(message, value),
         "the compile's message names neither %s nor '%s': %s", name, value, message);
  tm_program_release(p);
  /* Checked before the path is opened: a file that does not exist gives the same answer. */
  s = tm_program_load("/nonexistent/program.tmp", &p);
  EXPECT(s == TM_ERROR_INVALID_ARGUMENT && p == NULL, "load: status %d", (int)s);
  message = tm_last_error();
  EXPECT(strstr(message, name) && strstr(message, value),
         "the load's message names neither %s nor '%s': %s", name, value, message);
}

int main(int argc, char **argv) {
  const int portable = argc == 2 && !strcmp(argv[1], "portable");
  const int refused = argc == 4 && !strcmp(argv[1], "refused");
  if (!portable && !refused) {
    fprintf(stderr, "usage: %s portable | refused NAME VALUE\n", argv[0]);
    return 2;
  }
  tm_context *ctx = NULL;
  if (tm_context_create(&ctx) != TM_OK) {
    fprintf(stderr, "%s\n", tm_last_error());
    return 1;
  }
  if (portable) check_portable(ctx);
  else check_refused(ctx, argv[2], argv[3]);
  tm_context_release(ctx);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
