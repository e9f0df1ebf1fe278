/* libtinymlir.so compiles in a compiler process (tinymlir-compiler, which loads
 * libtinymlir_compiler.so, LLVM and MLIR); the calling process never maps them.
 * Usage: lazy_compiler_test MODE DIR [WORDS], DIR holding the disk cache ("DIR/cache") and a
 * program file ("DIR/program.tmp"); the modes run in this order (lazy_compiler.sh):
 *   cold       compiles y = tanh(x @ w) into an empty disk cache and exports it: a compiler
 *              process ran it, and neither the compiler nor LLVM is mapped here, before or
 *              after; a compiler process that has gone (killed here) is replaced;
 *   warm       a new process: the same program comes from the disk cache and runs, then
 *              a new program compiles and the assembly stage prints, still without LLVM
 *              mapped here; a forked child compiles with a compiler process of its own,
 *              and the parent's still serves the parent; once idle for its idle time,
 *              the compiler process has exited and is reaped (no zombie left);
 *   in-process with TINYMLIR_COMPILE_IN_PROCESS=1 a new program loads the compiler here,
 *              and no process is started;
 *   closed-streams  an application that closed its standard streams (a daemon): the
 *              descriptors the library keeps (a compiler process's socket, output file and
 *              pidfd) never take 0, 1 or 2, where the application's next write to stdout
 *              would go into the compiler's socket; compiles before and after such a write
 *              work;
 *   reaped     with SIGCHLD ignored (LAZY_IGNORE_SIGCHLD=1: the kernel reaps children), a
 *              compile works, and after its compiler process is killed, the next one too;
 *   moved      loaded by a relative path (LD_LIBRARY_PATH=relative), after a chdir the
 *              first compile still finds the compiler process beside the library;
 *   few-descriptors  under a descriptor limit of 10 a compile works;
 *   small-address-space  under an address-space limit the compiler process cannot load
 *              LLVM in, a compile is TM_ERROR_OUT_OF_MEMORY saying so;
 *   killed-idle  the idle compiler process killed right before a compile: it succeeds;
 *   missing    libtinymlir.so alone in a folder (LD_LIBRARY_PATH): the program still comes
 *              from the disk cache and its file still loads and runs, while a new program
 *              fails to compile with a message naming the compiler process, and the
 *              assembly stage too;
 *   broken     beside libtinymlir.so, a compiler process or library that is not right (an
 *              impostor library, one from another build, a process that crashes or
 *              breaks the protocol): the compile fails with a message containing WORDS,
 *              and this process carries on (a program file still loads and runs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tinymlir/tinymlir.h"
#include "c_expect.h"
#include "child_processes.h"

/* The compiler process's idle time (kCompilerIdleSeconds in compiler_process.h). */
enum { IDLE_SECONDS = 5 };
/* How long after its idle time an idle compiler process may still be there. */
enum { IDLE_SECONDS_LEFT_AT_MOST = 60 };

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
  float x[64 * K], w[K * N], y[64 * N];
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

/* A shape no other mode compiles, so that the disk cache cannot answer it. */
enum { COLD_RESTART = M + 1, WARM_NEW = M + 2, MISSING_NEW = M + 3, BROKEN_NEW = M + 4,
       IN_PROCESS_NEW = M + 5, FORK_CHILD_NEW = M + 6, FORK_PARENT_NEW = M + 7,
       REAPED_FIRST = M + 8, REAPED_SECOND = M + 9, CLOSED_FIRST = M + 10,
       CLOSED_SECOND = M + 11, MOVED_NEW = M + 12, FEW_DESCRIPTORS_NEW = M + 13,
       SMALL_SPACE_NEW = M + 14, KILLED_IDLE_FIRST = M + 15 /* to M + 24 */ };

/* Compiles a shape that is in no cache; returns the status, *program set on success. */
static tm_status compile_new(tm_context *ctx, int64_t m, tm_program **program) {
  tm_trace *trace = NULL;
  tm_status s = trace_program(ctx, m, &trace);
  if (s == TM_OK) s = tm_compile(ctx, trace, NULL, program);
  tm_trace_destroy(trace);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && strcmp(argv[1], "broken") == 0)) {
    fprintf(stderr, "usage: lazy_compiler_test cold|warm|in-process|closed-streams|reaped|moved|"
                    "few-descriptors|small-address-space|killed-idle|missing DIR | "
                    "broken DIR WORDS\n");
    return 2;
  }
  const char *mode = argv[1];
  /* An application that lets the kernel reap its children: compiling must still work, and a
   * compiler process that dies is still reported (without its exit status). */
  if (getenv("LAZY_IGNORE_SIGCHLD")) signal(SIGCHLD, SIG_IGN);
  char cache[4096], file[4096];
  snprintf(cache, sizeof cache, "%s/cache", argv[2]);
  snprintf(file, sizeof file, "%s/program.tmp", argv[2]);
  tm_context *ctx = NULL;
  EXPECT(tm_context_create(&ctx) == TM_OK, "context: %s", tm_last_error());
  EXPECT(tm_cache_set_dir(ctx, cache, 1ull << 30) == TM_OK, "cache dir: %s", tm_last_error());
  EXPECT(!llvm_mapped(), "%s: LLVM or the compiler is mapped before anything was compiled",
         mode);
  int pids[16];
  tm_program *program = NULL, *second = NULL;
  if (strcmp(mode, "cold") == 0) {
    /* A pipe this process leaves inheritable: the compiler process must not hold it open. */
    int pipe_fds[2];
    EXPECT(pipe(pipe_fds) == 0, "pipe");
    tm_trace *trace = NULL;
    EXPECT(trace_program(ctx, M, &trace) == TM_OK, "trace: %s", tm_last_error());
    EXPECT(tm_compile(ctx, trace, NULL, &program) == TM_OK, "compile: %s", tm_last_error());
    tm_trace_destroy(trace);
    EXPECT(tm_program_from_disk_cache(program) == 0, "the cache was not empty");
    EXPECT(!llvm_mapped(), "compiling mapped the compiler or LLVM into the calling process");
    const int n = child_processes(pids, 16);
    EXPECT(n == 1, "%d compiler processes after one compile, expected 1", n);
    /* In a process group of its own: a signal to this process's group is not its death. */
    for (int i = 0; i < n; ++i)
      EXPECT(getpgid(pids[i]) == pids[i] && getpgid(pids[i]) != getpgrp(),
             "the compiler process is in this process's group (%d)", (int)getpgrp());
    close(pipe_fds[1]);
    struct pollfd hangup = {pipe_fds[0], POLLIN, 0};
    EXPECT(poll(&hangup, 1, 1000) == 1 && (hangup.revents & POLLHUP),
           "the compiler process holds this process's inheritable pipe open");
    close(pipe_fds[0]);
    check_runs(program, M, "compiled");
    EXPECT(tm_program_export(program, file) == TM_OK, "export: %s", tm_last_error());
    /* The idle compiler process dies: the next compile starts another. */
    for (int i = 0; i < n; ++i) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
    }
    EXPECT(compile_new(ctx, COLD_RESTART, &second) == TM_OK,
           "compile after the compiler process died: %s", tm_last_error());
    if (second) check_runs(second, COLD_RESTART, "compiled by a new compiler process");
    EXPECT(child_processes(pids, 16) == 1, "no new compiler process was started");
  } else if (strcmp(mode, "warm") == 0) {
    tm_trace *trace = NULL;
    EXPECT(trace_program(ctx, M, &trace) == TM_OK, "trace: %s", tm_last_error());
    EXPECT(tm_compile(ctx, trace, NULL, &program) == TM_OK, "compile: %s", tm_last_error());
    tm_trace_destroy(trace);
    EXPECT(tm_program_from_disk_cache(program) == 1, "the program was compiled again");
    EXPECT(child_processes(pids, 16) == 0, "a disk cache hit started a compiler process");
    check_runs(program, M, "from the disk cache");
    EXPECT(compile_new(ctx, WARM_NEW, &second) == TM_OK, "new compile: %s", tm_last_error());
    if (second) check_runs(second, WARM_NEW, "a new shape");
    char *assembly = NULL;
    EXPECT(tm_program_ir(program, TM_STAGE_ASSEMBLY, &assembly) == TM_OK &&
               strstr(assembly, "ret") != NULL,
           "assembly of a program from the disk cache: %s", tm_last_error());
    tm_free(assembly);
    EXPECT(!llvm_mapped(), "compiling or printing assembly mapped LLVM into this process");
    fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {  /* the parent's idle compiler process is not the child's */
      tm_program *forked = NULL;
      EXPECT(compile_new(ctx, FORK_CHILD_NEW, &forked) == TM_OK, "compile in a forked child: %s",
             tm_last_error());
      if (forked) check_runs(forked, FORK_CHILD_NEW, "compiled in a forked child");
      EXPECT(child_processes(pids, 16) == 1, "the forked child did not start its own compiler");
      tm_program_release(forked);
      /* _exit: the child holds only the forking thread, and LeakSanitizer's check at exit
       * would report the parent's other threads as not suspended. Its compiler process sees
       * the socket close and exits. */
      _exit(failed == 0 ? 0 : 1);
    }
    int child_status = -1;
    EXPECT(child > 0 && waitpid(child, &child_status, 0) == child &&
               WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0,
           "the forked child failed (status %d)", child_status);
    tm_program *after_fork = NULL;
    EXPECT(compile_new(ctx, FORK_PARENT_NEW, &after_fork) == TM_OK,
           "compile in the parent after a fork: %s", tm_last_error());
    if (after_fork) check_runs(after_fork, FORK_PARENT_NEW, "compiled after a fork");
    EXPECT(child_processes(pids, 16) == 1, "%d compiler processes in the parent after the fork",
           child_processes(pids, 16));
    tm_program_release(after_fork);
    /* At the end of its idle time the compiler process exits, and the library reaps it
     * without a next compile: no zombie is left waiting for one that may never come. The
     * deadline is generous: under AddressSanitizer the exiting process first checks its
     * heap for leaks, which on a loaded machine takes seconds. */
    sleep(IDLE_SECONDS);
    int left = child_processes(pids, 16);
    for (int tenths = 0; left != 0 && tenths < 10 * IDLE_SECONDS_LEFT_AT_MOST; ++tenths) {
      usleep(100 * 1000);
      left = child_processes(pids, 16);
    }
    EXPECT(left == 0, "a compiler process (pid %d) is left %d s after the last compile", pids[0],
           IDLE_SECONDS + IDLE_SECONDS_LEFT_AT_MOST);
  } else if (strcmp(mode, "closed-streams") == 0) {
    /* Results are kept until stderr is back: EXPECT reports through it. */
    const int saved_stderr = fcntl(2, F_DUPFD_CLOEXEC, 10);
    fflush(NULL);
    close(0);
    close(1);
    close(2);
    const tm_status first = compile_new(ctx, CLOSED_FIRST, &program);
    int taken = 0;
    for (int fd = 0; fd <= 2; ++fd)
      if (fcntl(fd, F_GETFD) != -1) taken |= 1 << fd;
    const ssize_t wrote = write(1, "x", 1); /* what a printf to the closed stdout does */
    const tm_status second_status = compile_new(ctx, CLOSED_SECOND, &second);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    EXPECT(first == TM_OK, "compile with the standard streams closed: %s", tm_last_error());
    EXPECT(taken == 0, "the library took descriptors 0-2 (bit mask %d)", taken);
    EXPECT(wrote < 0, "a write to the closed stdout went somewhere");
    EXPECT(second_status == TM_OK, "compile after a write to the closed stdout: %s",
           tm_last_error());
    if (program) check_runs(program, CLOSED_FIRST, "compiled with the streams closed");
    if (second) check_runs(second, CLOSED_SECOND, "compiled after the write");
  } else if (strcmp(mode, "reaped") == 0) {
    /* SIGCHLD ignored (LAZY_IGNORE_SIGCHLD): the kernel reaps a compiler process that dies;
     * the next compile starts another. */
    EXPECT(compile_new(ctx, REAPED_FIRST, &program) == TM_OK, "compile: %s", tm_last_error());
    if (program) check_runs(program, REAPED_FIRST, "compiled with SIGCHLD ignored");
    const int n = child_processes(pids, 16);
    EXPECT(n == 1, "%d compiler processes, expected 1", n);
    for (int i = 0; i < n; ++i) kill(pids[i], SIGKILL);
    usleep(100000);
    EXPECT(compile_new(ctx, REAPED_SECOND, &second) == TM_OK,
           "compile after the kernel reaped the compiler process: %s", tm_last_error());
    if (second) check_runs(second, REAPED_SECOND, "compiled by a new compiler process");
  } else if (strcmp(mode, "moved") == 0) {
    /* Loaded by a relative name (LD_LIBRARY_PATH=relative, from DIR): the working directory
     * changes before the first compile, which still finds the compiler beside the library. */
    EXPECT(chdir("/") == 0, "chdir");
    EXPECT(compile_new(ctx, MOVED_NEW, &second) == TM_OK,
           "compile after a chdir, the library loaded by a relative path: %s", tm_last_error());
    if (second) check_runs(second, MOVED_NEW, "compiled after a chdir");
  } else if (strcmp(mode, "few-descriptors") == 0) {
    /* A descriptor limit of 10: the library's descriptors cannot go to 10 and above. */
    struct rlimit ten = {10, 10};
    EXPECT(setrlimit(RLIMIT_NOFILE, &ten) == 0, "setrlimit");
    EXPECT(compile_new(ctx, FEW_DESCRIPTORS_NEW, &second) == TM_OK,
           "compile with a descriptor limit of 10: %s", tm_last_error());
    if (second) check_runs(second, FEW_DESCRIPTORS_NEW, "compiled with 10 descriptors");
  } else if (strcmp(mode, "small-address-space") == 0) {
    /* An address-space limit (ulimit -v) this process fits in but the compiler process,
     * which inherits it, cannot map LLVM in: out of memory, not "no compiler". (Not under
     * AddressSanitizer, whose shadow memory is terabytes of address space.) */
#ifndef __SANITIZE_ADDRESS__
    struct rlimit space = {200ull << 20, 200ull << 20}; /* this process: ~32 MB */
    EXPECT(setrlimit(RLIMIT_AS, &space) == 0, "setrlimit");
    const tm_status s = compile_new(ctx, SMALL_SPACE_NEW, &second);
    EXPECT(s == TM_ERROR_OUT_OF_MEMORY && strstr(tm_last_error(), "ulimit -v"),
           "compile under a 200 MiB address-space limit gave %d '%s'", (int)s, tm_last_error());
#endif
  } else if (strcmp(mode, "killed-idle") == 0) {
    /* The idle compiler process killed (SIGKILL: the OOM killer, an administrator) just
     * before the next compile, which must not fail: a process that is being killed is seen
     * running for some milliseconds, the request goes out, and the connection is reset with
     * it unread. */
    for (int i = 0; i < 5; ++i) {
      tm_program *before = NULL, *after = NULL;
      EXPECT(compile_new(ctx, KILLED_IDLE_FIRST + 2 * i, &before) == TM_OK, "compile: %s",
             tm_last_error());
      tm_program_release(before);
      const int n = child_processes(pids, 16);
      for (int j = 0; j < n; ++j) kill(pids[j], SIGKILL);
      EXPECT(compile_new(ctx, KILLED_IDLE_FIRST + 2 * i + 1, &after) == TM_OK,
             "compile right after the idle compiler process was killed (round %d): %s", i,
             tm_last_error());
      if (after) check_runs(after, KILLED_IDLE_FIRST + 2 * i + 1, "compiled after a kill");
      tm_program_release(after);
    }
  } else if (strcmp(mode, "in-process") == 0) {
    EXPECT(compile_new(ctx, IN_PROCESS_NEW, &second) == TM_OK, "compile: %s", tm_last_error());
    if (second) check_runs(second, IN_PROCESS_NEW, "compiled in this process");
    EXPECT(llvm_mapped(), "TINYMLIR_COMPILE_IN_PROCESS=1 did not load the compiler here");
    EXPECT(child_processes(pids, 16) == 0, "TINYMLIR_COMPILE_IN_PROCESS=1 started a process");
  } else if (strcmp(mode, "missing") == 0) {
    tm_trace *trace = NULL;
    EXPECT(trace_program(ctx, M, &trace) == TM_OK, "trace: %s", tm_last_error());
    const tm_status s = tm_compile(ctx, trace, NULL, &program);
    tm_trace_destroy(trace);
    EXPECT(s == TM_OK && tm_program_from_disk_cache(program) == 1,
           "a disk cache hit without the compiler gave %d '%s'", (int)s, tm_last_error());
    if (program) check_runs(program, M, "from the disk cache, no compiler");
    const tm_status failed_compile = compile_new(ctx, MISSING_NEW, &second);
    EXPECT(failed_compile == TM_ERROR_UNSUPPORTED && second == NULL &&
               strstr(tm_last_error(), "cannot start the compiler process") &&
               strstr(tm_last_error(), "tinymlir-compiler") &&
               strstr(tm_last_error(), "No such file"),
           "compile without the compiler gave %d '%s'", (int)failed_compile, tm_last_error());
  } else if (strcmp(mode, "broken") == 0) {
    const tm_status s = compile_new(ctx, BROKEN_NEW, &second);
    EXPECT((s == TM_ERROR_UNSUPPORTED || s == TM_ERROR_COMPILE) && second == NULL &&
               strstr(tm_last_error(), argv[3]),
           "compile with a broken compiler gave %d '%s', expected the words '%s'", (int)s,
           tm_last_error(), argv[3]);
    EXPECT(child_processes(pids, 16) == 0, "a broken compiler process was left running");
  } else {
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 2;
  }
  if (strcmp(mode, "missing") == 0 || strcmp(mode, "broken") == 0) {
    /* Without a working compiler, a program file still loads and runs; its assembly
     * cannot be printed. */
    tm_program *loaded = NULL;
    EXPECT(tm_program_load(file, &loaded) == TM_OK, "load: %s", tm_last_error());
    if (loaded) check_runs(loaded, M, "loaded from its file");
    char *assembly = NULL;
    const tm_status s = tm_program_ir(loaded, TM_STAGE_ASSEMBLY, &assembly);
    EXPECT(s != TM_OK && strstr(tm_last_error(), "compiler"),
           "assembly without a working compiler gave %d '%s'", (int)s, tm_last_error());
    tm_free(assembly);
    tm_program_release(loaded);
  }
  tm_program_release(second);
  tm_program_release(program);
  tm_context_release(ctx);
  printf("lazy_compiler_test %s: %d passed, %d failed\n", mode, passed, failed);
  return failed == 0 ? 0 : 1;
}
