/* Loads libtinymlir with dlopen(RTLD_NOW | RTLD_LOCAL), as Python does, and runs a program
 * whose generated code calls the library's BLAS products (tm_rt_gemm, over its private
 * OpenBLAS) and libm (tanhf, expf, erf).
 * With RTLD_LOCAL none of those symbols is visible to a process-global lookup, so this
 * passes only if the linker resolves them through the library's own references.
 * This program links neither tinymlir nor BLAS nor libm (its double-precision references
 * use libm opened RTLD_LOCAL as well). Usage: dlopen_local_test LIB */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "tinymlir/tinymlir.h"
#include "c_expect.h"


static double absd(double x) { return x < 0 ? -x : x; }

/* libm's double functions for the references, from a local handle. */
static double (*ref_tanh)(double), (*ref_exp)(double), (*ref_erf)(double);


/* The entry points this test uses, looked up with dlsym. */
static struct {
  const char *(*last_error)(void);
  tm_status (*context_create)(tm_context **);
  void (*context_destroy)(tm_context *);
  tm_status (*trace_begin)(tm_context *, const char *, tm_trace **);
  tm_status (*trace_end)(tm_trace *, const tm_value *, int32_t);
  void (*trace_destroy)(tm_trace *);
  tm_status (*op_input)(tm_trace *, tm_dtype, int32_t, const int64_t *, tm_value *);
  tm_status (*op_matmul)(tm_trace *, tm_value, tm_value, tm_value *);
  tm_status (*op_unary[3])(tm_trace *, tm_value, tm_value *); /* tanh, exp, erf */
  tm_status (*compile_options_init_size)(tm_compile_options *, size_t);
  tm_status (*compile)(tm_context *, const tm_trace *, const tm_compile_options *,
                       tm_program **);
  tm_status (*program_ir)(tm_program *, tm_stage, char **);
  void (*free_)(void *);
  tm_status (*invoke)(tm_program *, const tm_tensor *, int32_t, const tm_tensor *, int32_t);
  void (*program_release)(tm_program *);
} tm;

static int load(void *lib) {
  struct { void **slot; const char *name; } symbols[] = {
      {(void **)&tm.last_error, "tm_last_error"},
      {(void **)&tm.context_create, "tm_context_create"},
      {(void **)&tm.context_destroy, "tm_context_release"},
      {(void **)&tm.trace_begin, "tm_trace_begin"},
      {(void **)&tm.trace_end, "tm_trace_end"},
      {(void **)&tm.trace_destroy, "tm_trace_destroy"},
      {(void **)&tm.op_input, "tm_op_input"},
      {(void **)&tm.op_matmul, "tm_op_matmul"},
      {(void **)&tm.op_unary[0], "tm_op_tanh"},
      {(void **)&tm.op_unary[1], "tm_op_exp"},
      {(void **)&tm.op_unary[2], "tm_op_erf"},
      {(void **)&tm.compile_options_init_size, "tm_compile_options_init_size"},
      {(void **)&tm.compile, "tm_compile"},
      {(void **)&tm.program_ir, "tm_program_ir"},
      {(void **)&tm.free_, "tm_free"},
      {(void **)&tm.invoke, "tm_invoke"},
      {(void **)&tm.program_release, "tm_program_release"},
  };
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; ++i) {
    *symbols[i].slot = dlsym(lib, symbols[i].name);
    if (!*symbols[i].slot) {
      fprintf(stderr, "dlsym(%s): %s\n", symbols[i].name, dlerror());
      return 0;
    }
  }
  return 1;
}

/* A tiny deterministic generator: values in [-1, 1). */
static double next(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return ((*s >> 8) & 0xffff) / 32768.0 - 1.0;
}

/* M above 16 rows: the f32 product goes to OpenBLAS, not to the GEMV kernels. */
enum { M = 20, K = 5, N = 3, B = 2, L = 6 };

#define OK(call)                                                              \
  do {                                                                        \
    tm_status s_ = (call);                                                    \
    if (s_ != TM_OK) {                                                        \
      fprintf(stderr, "%s failed (%d): %s\n", #call, (int)s_, tm.last_error()); \
      return 0;                                                               \
    }                                                                         \
  } while (0)

/* y0 = tanh(a @ b)          f32 (M,K)@(K,N): tm_rt_gemm, tanhf
 * y1 = erf(c @ d)           f64 (B,M,K)@(B,K,N): tm_rt_gemm (batched), erf
 * y2 = exp(v)               f32 (L,): expf */
static int run(tm_context *ctx, tm_trace *trace) {
  const int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[3] = {B, M, K}, sd[3] = {B, K, N},
                sv[1] = {L}, sy0[2] = {M, N}, sy1[3] = {B, M, N};
  tm_value a, b, c, d, v, ab, cd, y[3];
  OK(tm.op_input(trace, TM_F32, 2, sa, &a));
  OK(tm.op_input(trace, TM_F32, 2, sb, &b));
  OK(tm.op_input(trace, TM_F64, 3, sc, &c));
  OK(tm.op_input(trace, TM_F64, 3, sd, &d));
  OK(tm.op_input(trace, TM_F32, 1, sv, &v));
  OK(tm.op_matmul(trace, a, b, &ab));
  OK(tm.op_matmul(trace, c, d, &cd));
  OK(tm.op_unary[0](trace, ab, &y[0]));
  OK(tm.op_unary[2](trace, cd, &y[1]));
  OK(tm.op_unary[1](trace, v, &y[2]));
  OK(tm.trace_end(trace, y, 3));

  tm_compile_options options;
  OK(tm.compile_options_init_size(&options, sizeof options));
  options.use_blas = 1;
  tm_program *program = NULL;
  OK(tm.compile(ctx, trace, &options, &program));

  char *lowered = NULL;
  OK(tm.program_ir(program, TM_STAGE_LOWERED, &lowered));
  EXPECT(strstr(lowered, "tm_rt_gemm") != NULL, "no tm_rt_gemm in the lowered IR");
  tm.free_(lowered);

  unsigned seed = 42;
  float fa[M * K], fb[K * N], fv[L], y0[M * N], y2[L];
  double dc[B * M * K], dd[B * K * N], y1[B * M * N];
  for (int i = 0; i < M * K; ++i) fa[i] = (float)next(&seed);
  for (int i = 0; i < K * N; ++i) fb[i] = (float)next(&seed);
  for (int i = 0; i < B * M * K; ++i) dc[i] = next(&seed);
  for (int i = 0; i < B * K * N; ++i) dd[i] = next(&seed);
  for (int i = 0; i < L; ++i) fv[i] = (float)(3 * next(&seed));
  tm_tensor in[5] = {{fa, TM_F32, 2, sa, NULL}, {fb, TM_F32, 2, sb, NULL},
                     {dc, TM_F64, 3, sc, NULL}, {dd, TM_F64, 3, sd, NULL},
                     {fv, TM_F32, 1, sv, NULL}};
  tm_tensor out[3] = {{y0, TM_F32, 2, sy0, NULL}, {y1, TM_F64, 3, sy1, NULL},
                      {y2, TM_F32, 1, sv, NULL}};
  tm_status s = tm.invoke(program, in, 5, out, 3);
  EXPECT(s == TM_OK, "tm_invoke: %s", tm.last_error());

  /* References in double. f32: |err| <= 1e-5 * (1 + |want|) (K=5 products, then
   * tanhf/expf); f64: 1e-12 * (1 + |want|). */
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int p = 0; p < K; ++p) acc += (double)fa[i * K + p] * fb[p * N + j];
      double want = ref_tanh(acc), got = y0[i * N + j];
      EXPECT(absd(got - want) <= 1e-5 * (1 + absd(want)), "y0[%d,%d] = %.9g, want %.9g", i, j,
             got, want);
    }
  for (int bt = 0; bt < B; ++bt)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double acc = 0;
        for (int p = 0; p < K; ++p) acc += dc[(bt * M + i) * K + p] * dd[(bt * K + p) * N + j];
        double want = ref_erf(acc), got = y1[(bt * M + i) * N + j];
        EXPECT(absd(got - want) <= 1e-12 * (1 + absd(want)), "y1[%d,%d,%d] = %.17g, want %.17g",
               bt, i, j, got, want);
      }
  for (int i = 0; i < L; ++i) {
    double want = ref_exp((double)fv[i]), got = y2[i];
    EXPECT(absd(got - want) <= 1e-5 * (1 + absd(want)), "y2[%d] = %.9g, want %.9g", i, got,
           want);
  }
  tm.program_release(program);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s path/to/libtinymlir.so\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen(%s): %s\n", argv[1], dlerror());
    return 1;
  }
  /* RTLD_LOCAL: the library's symbols are not in the global scope. */
  EXPECT(dlsym(RTLD_DEFAULT, "tm_compile") == NULL, "tm_compile is globally visible");
  if (!load(lib)) return 1;
  void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!libm) {
    fprintf(stderr, "dlopen(libm.so.6): %s\n", dlerror());
    return 1;
  }
  *(void **)&ref_tanh = dlsym(libm, "tanh");
  *(void **)&ref_exp = dlsym(libm, "exp");
  *(void **)&ref_erf = dlsym(libm, "erf");
  if (!ref_tanh || !ref_exp || !ref_erf) return 1;

  tm_context *ctx = NULL;
  tm_trace *trace = NULL;
  int ran = tm.context_create(&ctx) == TM_OK && tm.trace_begin(ctx, "dlopen", &trace) == TM_OK &&
            run(ctx, trace);
  EXPECT(ran, "tracing/compiling failed: %s", tm.last_error());
  tm.trace_destroy(trace);
  tm.context_destroy(ctx);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
