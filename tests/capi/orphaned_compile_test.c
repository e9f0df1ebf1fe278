/* A caller killed while its compiler process compiles: the compile is nobody's any more,
 * and the compiler process must end at once, not after compiling for seconds more (on a
 * two-core machine an orphaned compile took a core for the rest of it).
 *
 * A child (the caller) compiles a long program, disk cache off; this process, a subreaper,
 * finds the caller's compiler process, kills the caller 1 s into the compile (SIGKILL: no
 * handler, no unload, as os._exit), and expects the orphaned compiler process to end within
 * 1.5 s. Usage: orphaned_compile_test. Prints "N passed, N failed". */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tinymlir/tinymlir.h"
#include "c_expect.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 400 unfused steps x = tanh(x @ x * c) + x: several seconds of compiling. */
static void compile_for_long(void) {
  tm_context *ctx = NULL;
  tm_trace *trace = NULL;
  tm_program *program = NULL;
  tm_value x, y, c;
  const int64_t shape[2] = {4, 4};
  int ok = tm_context_create(&ctx) == TM_OK && tm_cache_set_dir(ctx, NULL, 0) == TM_OK &&
           tm_trace_begin(ctx, "long", &trace) == TM_OK &&
           tm_op_input(trace, TM_F32, 2, shape, &x) == TM_OK;
  for (int i = 0; ok && i < 400; ++i)
    ok = tm_op_matmul(trace, x, x, &y) == TM_OK &&
         tm_op_scalar(trace, TM_F32, 1.0 + i * 0.001, &c) == TM_OK &&
         tm_op_mul(trace, y, c, &y) == TM_OK && tm_op_tanh(trace, y, &y) == TM_OK &&
         tm_op_add(trace, y, x, &x) == TM_OK;
  ok = ok && tm_trace_end(trace, &x, 1) == TM_OK && tm_compile(ctx, trace, NULL, &program) == TM_OK;
  _exit(ok ? 0 : 1);
}

/* The pid of a child of `parent` named tinymlir-compiler (its comm is cut to 15 bytes). */
static pid_t compiler_process_of(pid_t parent) {
  DIR *proc = opendir("/proc");
  pid_t found = 0;
  for (struct dirent *e; proc && !found && (e = readdir(proc));) {
    char path[300], stat[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    const size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    char *close_paren = strrchr(stat, ')');
    int ppid = 0;
    char state;
    if (strstr(stat, "(tinymlir-compil") && close_paren &&
        sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 && ppid == parent)
      found = (pid_t)atoi(e->d_name);
  }
  if (proc) closedir(proc);
  return found;
}

int main(void) {
  setenv("TINYMLIR_COMPILE_IN_PROCESS", "0", 1); /* a compiler process, whatever the suite chose */
  /* The orphan becomes this process's child, so that it can be waited for. */
  EXPECT(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0, "prctl");
  const pid_t caller = fork();
  if (caller == 0) compile_for_long();
  pid_t compiler = 0;
  for (double start = now(); !compiler && now() - start < 20;) {
    compiler = compiler_process_of(caller);
    if (!compiler) usleep(10000);
  }
  EXPECT(compiler > 0, "no compiler process appeared");
  usleep(1000000);  /* loaded, and compiling */
  int status = 0;
  EXPECT(waitpid(caller, &status, WNOHANG) == 0, "the compile ended within 1 s: too short");
  kill(caller, SIGKILL);
  waitpid(caller, &status, 0);
  const double killed = now();
  int ended = 0;
  while (compiler > 0 && !ended && now() - killed < 10) {
    if (waitpid(compiler, &status, WNOHANG) == compiler) ended = 1;
    else usleep(10000);
  }
  const double seconds = now() - killed;
  EXPECT(ended && seconds < 1.5, "the orphaned compiler process ran %.1f s after its caller died",
         seconds);
  if (compiler > 0 && !ended) {
    kill(compiler, SIGKILL);
    waitpid(compiler, &status, 0);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
