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
 *   perf_map DIR         (TINYMLIR_PERF_MAP=1) a compiled program and the same program
 *                        loaded from a file in DIR each list their functions in
 *                        /tmp/perf-PID.map, as tinymlir:widen:NAME with a start and a size
 *                        perf can read, and still compute; the map is removed afterwards.
 *   no_perf_map          (TINYMLIR_PERF_MAP unset) a compile writes no such map.
 * Prints "N passed, N failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* This process's perf map, by perf's convention. */
static void perf_map_path(char *path, size_t size) {
  snprintf(path, size, "/tmp/perf-%ld.map", (long)getpid());
}

/* Widens {1, -2, 0.5, 65504} as f16 and checks the result. */
static void check_widens(tm_program *p, const char *which) {
  const uint16_t bits[4] = {0x3c00, 0xc000, 0x3800, 0x7bff};
  float wide[4] = {0};
  const int64_t n = 4;
  tm_tensor in = {(void *)bits, TM_F16, 1, &n, NULL}, out = {wide, TM_F32, 1, &n, NULL};
  EXPECT(tm_invoke(p, &in, 1, &out, 1) == TM_OK, "invoke %s: %s", which, tm_last_error());
  EXPECT(wide[0] == 1.0f && wide[1] == -2.0f && wide[2] == 0.5f && wide[3] == 65504.0f,
         "%s widened to %g %g %g %g", which, wide[0], wide[1], wide[2], wide[3]);
}

/* Lines of the map naming function `name` of trace "widen"; every line of the map must
 * read "START SIZE NAME" with hexadecimal START and SIZE > 0 (what perf parses). */
static int perf_map_lines(const char *map, const char *name, int *malformed) {
  char want[128];
  snprintf(want, sizeof want, "tinymlir:widen:%s", name);
  FILE *f = fopen(map, "r");
  if (!f) return -1;
  int count = 0;
  char line[512];
  *malformed = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long start = 0, size = 0;
    char symbol[400] = {0};
    if (sscanf(line, "%llx %llx %399s", &start, &size, symbol) != 3 || start == 0 ||
        size == 0 || strncmp(symbol, "tinymlir:", 9) != 0)
      ++*malformed;
    else if (!strcmp(symbol, want))
      ++count;
  }
  fclose(f);
  return count;
}

static void check_perf_map(tm_context *ctx, const char *dir) {
  char map[64], file[4096];
  perf_map_path(map, sizeof map);
  unlink(map);
  tm_status s;
  tm_program *compiled = compile_cast(ctx, 1, 4, &s);
  EXPECT(s == TM_OK && compiled, "compile: %s", tm_last_error());
  if (!compiled) return;
  check_widens(compiled, "the compiled program");
  int malformed = 0;
  EXPECT(perf_map_lines(map, "tm_packed_entry", &malformed) == 1,
         "%s does not name the compiled program's entry once", map);
  EXPECT(malformed == 0, "%d lines of %s are not START SIZE tinymlir:...", malformed, map);

  snprintf(file, sizeof file, "%s/widen.tmprog", dir);
  EXPECT(tm_program_export(compiled, file) == TM_OK, "export: %s", tm_last_error());
  tm_program *loaded = NULL;
  EXPECT(tm_program_load(file, &loaded) == TM_OK, "load: %s", tm_last_error());
  if (loaded) check_widens(loaded, "the loaded program");
  EXPECT(perf_map_lines(map, "tm_packed_entry", &malformed) == 2,
         "%s does not name the loaded program's entry too", map);
  EXPECT(malformed == 0, "%d lines of %s are malformed after the load", malformed, map);
  tm_program_release(loaded);
  tm_program_release(compiled);
  unlink(file);
  unlink(map);
}

static void check_no_perf_map(tm_context *ctx) {
  char map[64];
  perf_map_path(map, sizeof map);
  unlink(map);
  tm_status s;
  tm_program *p = compile_cast(ctx, 1, 4, &s);
  EXPECT(s == TM_OK && p, "compile: %s", tm_last_error());
  if (p) check_widens(p, "the compiled program");
  EXPECT(access(map, F_OK) != 0, "%s was written without TINYMLIR_PERF_MAP", map);
  tm_program_release(p);
}

int main(int argc, char **argv) {
  const int portable = argc == 2 && !strcmp(argv[1], "portable");
  const int refused = argc == 4 && !strcmp(argv[1], "refused");
  const int perf_map = argc == 3 && !strcmp(argv[1], "perf_map");
  const int no_perf_map = argc == 2 && !strcmp(argv[1], "no_perf_map");
  if (!portable && !refused && !perf_map && !no_perf_map) {
    fprintf(stderr, "usage: %s portable | refused NAME VALUE | perf_map DIR | no_perf_map\n",
            argv[0]);
    return 2;
  }
  tm_context *ctx = NULL;
  if (tm_context_create(&ctx) != TM_OK) {
    fprintf(stderr, "%s\n", tm_last_error());
    return 1;
  }
  if (portable) check_portable(ctx);
  else if (refused) check_refused(ctx, argv[2], argv[3]);
  else if (perf_map) check_perf_map(ctx, argv[2]);
  else check_no_perf_map(ctx);
  tm_context_release(ctx);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
