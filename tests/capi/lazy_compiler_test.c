/* libtinymlir.so loads its compiler (libtinymlir_compiler.so, LLVM, MLIR) only to compile.
 * Usage: lazy_compiler_test MODE DIR, DIR holding the disk cache ("DIR/cache") and a
 * program file ("DIR/program.tmp"); the modes run in this order (lazy_compiler.sh):
 *   cold     compiles y = tanh(x @ w) into an empty disk cache and exports it; the compiler
 *            and LLVM are mapped once it has compiled, not before;
 *   warm     a new process: the same program comes from the disk cache and runs with
 *            neither the compiler nor LLVM mapped; a new program then loads the compiler;
 *   missing  libtinymlir.so alone in a folder (LD_LIBRARY_PATH): the program still comes
 *            from the disk cache and its file still loads and runs, while a new program
 *            fails to compile with a message naming the compiler library, and the
 *            assembly stage too;
 *   foreign  beside libtinymlir.so, another library under the compiler library's name, or
 *            the compiler library with another build ID (as from another build): refused
 *            with a message saying why (the fourth argument is the expected words). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinymlir/tinymlir.h"
#include "c_expect.h"

enum { M = 3, K = 5, N = 4 };

/* Whether a file whose path contains `name` is mapped into this process. */
static int mapped(const char *name) {
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (maps && fgets(line, sizeof line, maps))
    if (strstr(line, name)) found = 1;
  if (maps) fclose(maps);
  return found;
}

static int llvm_mapped(void) {
  return mapped("libtinymlir_compiler.so") || mapped("libLLVM") || mapped("libMLIR");
}

/* y = tanh(x @ w) for x [m, K], w [K, N]. */
static tm_status trace_program(tm_context *ctx, int64_t m, tm_trace **trace) {
  tm_value x, w, xw, y;
  const int64_t xs[2] = {m, K}, ws[2] = {K, N};
  tm_status s = tm_trace_begin(ctx, "lazy", trace);
  if (s == TM_OK) s = tm_op_input(*trace, TM_F32, 2, xs, &x);
  if (s == TM_OK) s = tm_op_input(*trace, TM_F32, 2, ws, &w);
  if (s == TM_OK) s = tm_op_matmul(*trace, x, w, &xw);
  if (s == TM_OK) s = tm_op_tanh(*trace, xw, &y);
  if (s == TM_OK) s = tm_trace_end(*trace, &y, 1);
  return s;
}

/* Runs `program` on fixed inputs; checks it against a double-precision loop (1e-5). */
static void check_runs(tm_program *program, int64_t m, const char *what) {
  float x[8 * K], w[K * N], y[8 * N];
  for (int i = 0; i < m * K; ++i) x[i] = (float)((i % 7) - 3) * 0.25f;
  for (int i = 0; i < K * N; ++i) w[i] = (float)((i % 5) - 2) * 0.5f;
  const int64_t xs[2] = {m, K}, ws[2] = {K, N}, ys[2] = {m, N};
  tm_tensor in[2] = {{x, TM_F32, 2, xs, NULL}, {w, TM_F32, 2, ws, NULL}};
  tm_tensor out = {y, TM_F32, 2, ys, NULL};
  EXPECT(tm_invoke(program, in, 2, &out, 1) == TM_OK, "%s: invoke: %s", what, tm_last_error());
  double worst = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += (double)x[i * K + k] * w[k * N + j];
      const double err = fabs(tanh(sum) - y[i * N + j]);
      if (err > worst) worst = err;
    }
  EXPECT(worst <= 1e-5, "%s: |y - tanh(x @ w)| = %g > 1e-5", what, worst);
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && strcmp(argv[1], "foreign") == 0)) {
    fprintf(stderr, "usage: lazy_compiler_test cold|warm|missing DIR | foreign DIR WORDS\n");
    return 2;
  }
  const char *mode = argv[1];
  char cache[4096], file[4096];
  snprintf(cache, sizeof cache, "%s/cache", argv[2]);
  snprintf(file, sizeof file, "%s/program.tmp", argv[2]);

  tm_context *ctx = NULL;
  EXPECT(tm_context_create(&ctx) == TM_OK, "context: %s", tm_last_error());
  EXPECT(tm_cache_set_dir(ctx, cache, 1ull << 30) == TM_OK, "cache dir: %s", tm_last_error());
  EXPECT(!llvm_mapped(), "%s: LLVM or the compiler is mapped before anything was compiled",
         mode);
  tm_trace *trace = NULL;
  // Foreign: a shape no earlier mode compiled, so that the disk cache cannot answer.
  EXPECT(trace_program(ctx, strcmp(mode, "foreign") == 0 ? M + 4 : M, &trace) == TM_OK,
         "trace: %s", tm_last_error());
  tm_program *program = NULL;
  const tm_status compiled = tm_compile(ctx, trace, NULL, &program);

  if (strcmp(mode, "cold") == 0) {
    EXPECT(compiled == TM_OK, "compile: %s", tm_last_error());
    EXPECT(tm_program_from_disk_cache(program) == 0, "the cache was not empty");
    EXPECT(llvm_mapped(), "a compile did not load the compiler library");
    check_runs(program, M, "compiled");
    EXPECT(tm_program_export(program, file) == TM_OK, "export: %s", tm_last_error());
  } else if (strcmp(mode, "warm") == 0) {
    EXPECT(compiled == TM_OK, "compile: %s", tm_last_error());
    EXPECT(tm_program_from_disk_cache(program) == 1, "the program was compiled again");
    check_runs(program, M, "from the disk cache");
    EXPECT(!llvm_mapped(), "a disk cache hit loaded the compiler library or LLVM");
    tm_trace *other = NULL;
    tm_program *second = NULL;
    EXPECT(trace_program(ctx, M + 2, &other) == TM_OK, "trace: %s", tm_last_error());
    EXPECT(tm_compile(ctx, other, NULL, &second) == TM_OK, "second compile: %s",
           tm_last_error());
    EXPECT(llvm_mapped(), "compiling a new program did not load the compiler library");
    check_runs(second, M + 2, "a new shape");
    char *assembly = NULL;
    EXPECT(tm_program_ir(program, TM_STAGE_ASSEMBLY, &assembly) == TM_OK &&
               strstr(assembly, "ret") != NULL,
           "assembly of a program from the disk cache: %s", tm_last_error());
    tm_free(assembly);
    tm_program_release(second);
    tm_trace_destroy(other);
  } else if (strcmp(mode, "missing") == 0) {
    EXPECT(compiled == TM_OK && tm_program_from_disk_cache(program) == 1,
           "a disk cache hit without the compiler library gave %d '%s'", (int)compiled,
           tm_last_error());
    if (program) check_runs(program, M, "from the disk cache, no compiler library");
    tm_trace *other = NULL;
    tm_program *second = NULL;
    // M + 2 is in the disk cache now (warm): a shape no mode compiled.
    EXPECT(trace_program(ctx, M + 3, &other) == TM_OK, "trace: %s", tm_last_error());
    const tm_status s = tm_compile(ctx, other, NULL, &second);
    EXPECT(s == TM_ERROR_UNSUPPORTED && second == NULL &&
               strstr(tm_last_error(), "cannot load the compiler library") &&
               strstr(tm_last_error(), "libtinymlir_compiler.so") &&
               strstr(tm_last_error(), "No such file"),
           "compile without the compiler library gave %d '%s'", (int)s, tm_last_error());
    tm_trace_destroy(other);
    tm_program *loaded = NULL;
    EXPECT(tm_program_load(file, &loaded) == TM_OK, "load: %s", tm_last_error());
    if (loaded) check_runs(loaded, M, "loaded from its file");
    char *assembly = NULL;
    EXPECT(tm_program_ir(loaded, TM_STAGE_ASSEMBLY, &assembly) == TM_ERROR_UNSUPPORTED &&
               strstr(tm_last_error(), "cannot load the compiler library"),
           "assembly without the compiler library gave '%s'", tm_last_error());
    tm_free(assembly);
    tm_program_release(loaded);
  } else if (strcmp(mode, "foreign") == 0) {
    EXPECT(compiled == TM_ERROR_UNSUPPORTED &&
               strstr(tm_last_error(), "cannot load the compiler library") &&
               strstr(tm_last_error(), argv[3]),
           "compile with a foreign compiler library gave %d '%s'", (int)compiled,
           tm_last_error());
  } else {
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 2;
  }
  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_destroy(ctx);
  printf("lazy_compiler_test %s: %d passed, %d failed\n", mode, passed, failed);
  return failed == 0 ? 0 : 1;
}
