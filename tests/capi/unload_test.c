/* The library can be unloaded: dlopen -> a decode-shaped product (which starts the GEMV
 * worker pool) -> dlclose, three times over. Unloading must stop and join the workers (a
 * detached worker running code that is gone crashes the host), and the pool must not start
 * more threads than the machine has, whatever TINYMLIR_NUM_THREADS asks for (CTest sets
 * 100000). The product is compiled with the disk cache off, by a compiler process, which
 * unloading must end and reap too. Usage: unload_test LIB. Prints "N passed, N failed". */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tinymlir/tinymlir.h"
#include "c_expect.h"
#include "child_processes.h"



static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

#define LOAD(name) *(void **)&name = dlsym(lib, #name)

/* One round: y (1, N) = x (1, K) @ w (K, N) with K * N large enough for the worker pool. */
static int round_trip(const char *path, int round) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  EXPECT(lib != NULL, "round %d: dlopen: %s", round, dlerror());
  if (!lib) return 0;
  const char *(*tm_last_error)(void);
  tm_status (*tm_context_create)(tm_context **);
  void (*tm_context_release)(tm_context *);
  tm_status (*tm_trace_begin)(tm_context *, const char *, tm_trace **);
  tm_status (*tm_trace_end)(tm_trace *, const tm_value *, int32_t);
  void (*tm_trace_destroy)(tm_trace *);
  tm_status (*tm_op_input)(tm_trace *, tm_dtype, int32_t, const int64_t *, tm_value *);
  tm_status (*tm_op_matmul)(tm_trace *, tm_value, tm_value, tm_value *);
  tm_status (*tm_compile)(tm_context *, const tm_trace *, const tm_compile_options *,
                          tm_program **);
  tm_status (*tm_invoke)(tm_program *, const tm_tensor *, int32_t, const tm_tensor *, int32_t);
  void (*tm_program_release)(tm_program *);
  tm_status (*tm_cache_set_dir)(tm_context *, const char *, uint64_t);
  LOAD(tm_cache_set_dir);
  LOAD(tm_last_error); LOAD(tm_context_create); LOAD(tm_context_release);
  LOAD(tm_trace_begin); LOAD(tm_trace_end); LOAD(tm_trace_destroy); LOAD(tm_op_input);
  LOAD(tm_op_matmul); LOAD(tm_compile); LOAD(tm_invoke); LOAD(tm_program_release);

  enum { K = 512, N = 512 };
  const int64_t xs[2] = {1, K}, ws[2] = {K, N}, ys[2] = {1, N};
  static float x[K], w[K * N], y[N];
  for (int i = 0; i < K; ++i) x[i] = 1.0f;
  for (int i = 0; i < K * N; ++i) w[i] = (float)(i % N);
  tm_context *ctx = NULL;
  tm_trace *trace = NULL;
  tm_program *program = NULL;
  tm_value a, b, c;
  int ok = tm_context_create(&ctx) == TM_OK && tm_cache_set_dir(ctx, NULL, 0) == TM_OK &&
           tm_trace_begin(ctx, "gemv", &trace) == TM_OK &&
           tm_op_input(trace, TM_F32, 2, xs, &a) == TM_OK &&
           tm_op_input(trace, TM_F32, 2, ws, &b) == TM_OK &&
           tm_op_matmul(trace, a, b, &c) == TM_OK && tm_trace_end(trace, &c, 1) == TM_OK &&
           tm_compile(ctx, trace, NULL, &program) == TM_OK;
  tm_tensor in[2] = {{x, TM_F32, 2, xs, NULL}, {w, TM_F32, 2, ws, NULL}};
  tm_tensor out = {y, TM_F32, 2, ys, NULL};
  for (int i = 0; ok && i < 20; ++i) ok = tm_invoke(program, in, 2, &out, 1) == TM_OK;
  EXPECT(ok, "round %d: %s", round, tm_last_error());
  int exact = 1;
  for (int j = 0; ok && j < N; ++j) exact &= y[j] == (float)(K * j);  /* exact in f32 */
  EXPECT(exact, "round %d: wrong product", round);
  /* The pool: at most one thread per CPU; OpenBLAS adds at most as many again. */
  int running = count_threads(), cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT(running > 0 && running <= 2 * cpus + 2, "round %d: %d threads running on %d CPUs",
         round, running, cpus);
  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
  if (!getenv("TINYMLIR_COMPILE_IN_PROCESS"))
    EXPECT(child_processes(NULL, 0) == 1, "round %d: %d compiler processes, expected 1", round,
           child_processes(NULL, 0));
  EXPECT(dlclose(lib) == 0, "dlclose: %s", dlerror());
  EXPECT(child_processes(NULL, 0) == 0, "round %d: %d processes left after dlclose", round,
         child_processes(NULL, 0));
  /* The point of the test is a real unload: the library's code must be gone. */
  int mapped = 0;
  FILE *maps = fopen("/proc/self/maps", "r");
  if (maps) {
    char line[512];
    while (fgets(line, sizeof line, maps))
      if (strstr(line, "libtinymlir.so")) mapped = 1;
    fclose(maps);
  }
  EXPECT(!mapped, "round %d: libtinymlir.so is still mapped after dlclose", round);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s path/to/libtinymlir.so\n", argv[0]);
    return 2;
  }
  int before = count_threads();
  for (int round = 0; round < 3; ++round) {
    if (!round_trip(argv[1], round)) break;
    /* The pool's workers are joined at unload; OpenBLAS may keep its own threads, so
     * compare against the first round's residue rather than the start. */
    int after = count_threads();
    EXPECT(after <= before + 8, "round %d: %d threads after dlclose (%d before)", round, after,
           before);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
