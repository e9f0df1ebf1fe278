/* The runtime library alone. Built twice:
 *  - with WRITE_PROGRAMS, linked to libtinymlir.so: compiles a few programs, exports them to
 *    DIR and writes their inputs and the outputs the JIT gave (DIR/<name>.{in,out});
 *  - without, linked to libtinymlir_runtime.so only (no LLVM in the process): loads each
 *    program file, invokes it on the same inputs and requires the same bytes out, then
 *    checks the error paths.
 * Both also handle a GPT-2 model: the writer compiles the bundle of MODEL_DIR into
 * DIR/bundle; the runtime loads the model from it (no context) and must generate the
 * golden greedy tokens, and without a bundle must say it has no compiler.
 * Usage: runtime_test DIR MODEL_DIR (tests/data/tiny-a). Prints "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinymlir/gpt2.h"
#include "tinymlir/tinymlir.h"
#include "c_expect.h"

enum { N_PROGRAMS = 3 };
static const char *const kNames[N_PROGRAMS] = {"matmul_tanh", "gemv", "softmax_rows"};

/* Inputs: x (M, K) and w (K, N) for each program, deterministic. */
static const int64_t kShapes[N_PROGRAMS][3] = {{8, 16, 12}, {1, 256, 384}, {5, 7, 3}};

static void fill(float *v, int64_t n, unsigned seed) {
  unsigned s = seed;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1103515245u + 12345u;
    v[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
  }
}

static char *path_of(const char *dir, const char *name, const char *ext) {
  size_t n = strlen(dir) + strlen(name) + strlen(ext) + 3;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s.%s", dir, name, ext);
  return p;
}

static int write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(data, 1, n, f) == n;
  if (f) fclose(f);
  return ok;
}

static int read_bytes(const char *path, void *data, size_t n) {
  FILE *f = fopen(path, "rb");
  int ok = f && fread(data, 1, n, f) == n;
  if (f) fclose(f);
  return ok;
}

/* tiny-a's greedy continuation of the ids 1 2 3 (Hugging Face golden). */
static const int32_t kTinyPrompt[3] = {1, 2, 3};
static const int32_t kTinyGolden[5] = {19, 407, 371, 380, 25};

/* The model from the bundle in `bundle`, with no context: the golden tokens. */
static void check_model_from_bundle(const char *model_dir, const char *bundle) {
  tm_model_options o;
  tm_model_options_init(&o);
  o.bundle_dir = bundle;
  tm_model *model = NULL;
  EXPECT(tm_model_load(NULL, model_dir, &o, &model) == TM_OK, "loading the bundle: %s",
         tm_last_error());
  if (!model) return;
  tm_generate_options g;
  tm_generate_options_init(&g);
  g.max_new_tokens = 5;
  int32_t out[5] = {0};
  size_t n = 0;
  EXPECT(tm_generate(model, kTinyPrompt, 3, &g, NULL, NULL, out, 5, &n) == TM_OK && n == 5,
         "generating from the bundle: %s", tm_last_error());
  EXPECT(memcmp(out, kTinyGolden, sizeof out) == 0, "bundle tokens %d %d %d %d %d", out[0],
         out[1], out[2], out[3], out[4]);
  EXPECT(tm_model_compile_bundle(model, bundle, NULL, NULL) == TM_ERROR_INVALID_ARGUMENT &&
             strstr(tm_last_error(), "from a bundle already") != NULL,
         "compiling a bundle from a bundle gave '%s'", tm_last_error());
  tm_model_destroy(model);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DIR MODEL_DIR\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1], *model_dir = argv[2];
  char *bundle = path_of(dir, "bundle", "d");
  for (int k = 0; k < N_PROGRAMS; ++k) {
    const int64_t m = kShapes[k][0], kk = kShapes[k][1], n = kShapes[k][2];
    const int64_t xs[2] = {m, kk}, ws[2] = {kk, n}, ys[2] = {m, n};
    const size_t nx = (size_t)(m * kk), nw = (size_t)(kk * n), ny = (size_t)(m * n);
    float *in = malloc((nx + nw) * sizeof(float)), *y = malloc(ny * sizeof(float));
    char *file = path_of(dir, kNames[k], "tmp"), *in_path = path_of(dir, kNames[k], "in"),
         *out_path = path_of(dir, kNames[k], "out");
    tm_program *program = NULL;
#ifdef WRITE_PROGRAMS
    tm_context *ctx = NULL;
    tm_trace *t = NULL;
    tm_value x, w, r;
    fill(in, (int64_t)(nx + nw), 7u + (unsigned)k);
    int ok = tm_context_create(&ctx) == TM_OK && tm_trace_begin(ctx, kNames[k], &t) == TM_OK &&
             tm_op_input(t, TM_F32, 2, xs, &x) == TM_OK &&
             tm_op_input(t, TM_F32, 2, ws, &w) == TM_OK && tm_op_matmul(t, x, w, &r) == TM_OK;
    if (ok && k == 0) ok = tm_op_tanh(t, r, &r) == TM_OK;
    if (ok && k == 2) ok = tm_op_softmax(t, r, -1, &r) == TM_OK;
    ok = ok && tm_trace_end(t, &r, 1) == TM_OK && tm_compile(ctx, t, NULL, &program) == TM_OK;
    tm_tensor tin[2] = {{in, TM_F32, 2, xs, NULL}, {in + nx, TM_F32, 2, ws, NULL}};
    tm_tensor tout = {y, TM_F32, 2, ys, NULL};
    ok = ok && tm_invoke(program, tin, 2, &tout, 1) == TM_OK &&
         tm_program_export(program, file) == TM_OK;
    EXPECT(ok, "%s: %s", kNames[k], tm_last_error());
    {  /* the compiler's library prints a loaded program's assembly from its LLVM IR */
      tm_program *loaded = NULL;
      char *text = NULL;
      EXPECT(ok && tm_program_load(file, &loaded) == TM_OK &&
                 tm_program_ir(loaded, TM_STAGE_ASSEMBLY, &text) == TM_OK &&
                 strstr(text, "tm_packed_entry") != NULL,
             "%s: the assembly of the loaded program: %s", kNames[k], text ? "" : tm_last_error());
      tm_free(text);
      tm_program_release(loaded);
    }
    EXPECT(write_bytes(in_path, in, (nx + nw) * sizeof(float)) &&
               write_bytes(out_path, y, ny * sizeof(float)),
           "%s: cannot write the data files", kNames[k]);
    tm_trace_destroy(t);
    tm_context_release(ctx);
#else
    float *want = malloc(ny * sizeof(float));
    EXPECT(read_bytes(in_path, in, (nx + nw) * sizeof(float)) &&
               read_bytes(out_path, want, ny * sizeof(float)),
           "%s: cannot read the data files (run the writer first)", kNames[k]);
    EXPECT(tm_program_load(file, &program) == TM_OK, "%s: %s", kNames[k], tm_last_error());
    if (program) {
      EXPECT(tm_program_num_inputs(program) == 2 && tm_program_num_outputs(program) == 1,
             "%s: signature", kNames[k]);
      memset(y, 0xff, ny * sizeof(float));
      tm_tensor tin[2] = {{in, TM_F32, 2, xs, NULL}, {in + nx, TM_F32, 2, ws, NULL}};
      tm_tensor tout = {y, TM_F32, 2, ys, NULL};
      EXPECT(tm_invoke(program, tin, 2, &tout, 1) == TM_OK, "%s: %s", kNames[k], tm_last_error());
      EXPECT(memcmp(y, want, ny * sizeof(float)) == 0, "%s: results differ from the JIT's",
             kNames[k]);
      char *text = NULL;
      EXPECT(tm_program_ir(program, TM_STAGE_LLVM_IR, &text) == TM_OK, "%s: LLVM IR: %s",
             kNames[k], tm_last_error());
      tm_free(text);
      text = NULL;
      EXPECT(tm_program_ir(program, TM_STAGE_ASSEMBLY, &text) == TM_ERROR_UNSUPPORTED &&
                 strstr(tm_last_error(), "keeps no assembly") != NULL &&
                 strstr(tm_last_error(), "libtinymlir.so's compiler") != NULL,
             "%s: assembly without a code generator gave '%s'", kNames[k], tm_last_error());
      tm_free(text);
      /* The runtime checks what the compiler's library checks. */
      const int64_t wrong[2] = {m + 1, kk};
      tm_tensor bad[2] = {{in, TM_F32, 2, wrong, NULL}, {in + nx, TM_F32, 2, ws, NULL}};
      EXPECT(tm_invoke(program, bad, 2, &tout, 1) == TM_ERROR_SHAPE &&
                 strstr(tm_last_error(), "tm_invoke") != NULL,
             "%s: a wrong shape gave '%s'", kNames[k], tm_last_error());
    }
    free(want);
#endif
    tm_program_release(program);
    free(in);
    free(y);
    free(file);
    free(in_path);
    free(out_path);
  }
#ifdef WRITE_PROGRAMS
  {
    tm_context *ctx = NULL;
    tm_model *model = NULL;
    EXPECT(tm_model_load(NULL, model_dir, NULL, &model) == TM_ERROR_INVALID_ARGUMENT &&
               strstr(tm_last_error(), "ctx is NULL") != NULL,
           "no context and no bundle gave '%s'", tm_last_error());
    EXPECT(tm_context_create(&ctx) == TM_OK && tm_model_load(ctx, model_dir, NULL, &model) == TM_OK,
           "loading %s: %s", model_dir, tm_last_error());
    EXPECT(model && tm_model_compile_bundle(model, bundle, NULL, NULL) == TM_OK,
           "compiling the bundle: %s", tm_last_error());
    tm_model_destroy(model);
    tm_context_release(ctx);
    check_model_from_bundle(model_dir, bundle); /* the same, in the compiler's library */
  }
#else
  check_model_from_bundle(model_dir, bundle);
  {
    tm_model *model = NULL;
    EXPECT(tm_model_load(NULL, model_dir, NULL, &model) == TM_ERROR_UNSUPPORTED && !model &&
               strstr(tm_last_error(), "runs compiled bundles only") != NULL,
           "a model without a bundle gave '%s'", tm_last_error());
  }
  tm_program *p = NULL;
  EXPECT(tm_program_load("/nonexistent/x.tmp", &p) == TM_ERROR_IO && p == NULL &&
             strstr(tm_last_error(), "/nonexistent/x.tmp") != NULL,
         "a missing file gave '%s'", tm_last_error());
  EXPECT(strcmp(tm_status_string(TM_ERROR_IO), "") != 0 && strlen(tm_version()) > 0,
         "status strings and version");
#endif
  free(bundle);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
