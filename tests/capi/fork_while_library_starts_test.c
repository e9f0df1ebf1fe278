/* fork() while another thread makes the library's first compile and invoke, all of it inside
 * the fork's prepare phase: the child must compile and invoke correctly.
 *
 * glibc (2.34 and later) runs fork handlers without holding its handler lock, and runs in the
 * child only the handlers that were registered before the fork began. A handler the library
 * registered at first use (one that releases a lock in the child, or tells a worker pool that
 * its threads are gone) could thus be registered by another thread while fork() was under
 * way, and be skipped: the child then waits forever for a lock or for workers. The random
 * timing of fork_during_first_compile_test met that window about once in 700 forks; here
 * the window is certain. A handler this test registers, which runs during every fork of its
 * process, lets the other thread make the whole first use and waits for it to finish.
 *
 * Each round is a fresh process in which the library has done nothing yet. The child
 * compiles and invokes under a 20 s alarm. Usage: fork_while_library_starts_test. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tinymlir/tinymlir.h"
#include "c_expect.h"

/* Big enough that the invoke runs on the library's worker threads. */
enum { ROWS = 512, COLS = 512, ROUNDS = 3 };

/* Compiles exp(x) @ x for a ROWS x COLS matrix and invokes it; 0 when the result equals a
 * double-precision loop's within 1e-4 relative, 1 otherwise (the reason is printed). */
static int compile_and_invoke(void) {
  static float x[ROWS * COLS], y[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; ++i) x[i] = (float)((i * 7 % 23) - 11) / 64.0f;
  tm_context *ctx = NULL;
  tm_trace *trace = NULL;
  tm_program *program = NULL;
  tm_value in, e, out;
  const int64_t shape[2] = {ROWS, COLS};
  const tm_tensor input = {x, TM_F32, 2, shape, NULL}, output = {y, TM_F32, 2, shape, NULL};
  int ok = tm_context_create(&ctx) == TM_OK && tm_cache_set_dir(ctx, NULL, 0) == TM_OK &&
           tm_trace_begin(ctx, "exp_matmul", &trace) == TM_OK &&
           tm_op_input(trace, TM_F32, 2, shape, &in) == TM_OK &&
           tm_op_exp(trace, in, &e) == TM_OK && tm_op_matmul(trace, e, in, &out) == TM_OK &&
           tm_trace_end(trace, &out, 1) == TM_OK &&
           tm_compile(ctx, trace, NULL, &program) == TM_OK &&
           tm_invoke(program, &input, 1, &output, 1) == TM_OK;
  if (!ok) fprintf(stderr, "compile or invoke: %s\n", tm_last_error());
  for (int row = 0; ok && row < ROWS; row += 97) {
    for (int col = 0; col < COLS; col += 89) {
      double want = 0;
      for (int k = 0; k < COLS; ++k) want += exp((double)x[row * COLS + k]) * x[k * COLS + col];
      if (fabs(y[row * COLS + col] - want) > 1e-4 * fabs(want) + 1e-4) {
        fprintf(stderr, "y[%d][%d] = %g, want %g\n", row, col, y[row * COLS + col], want);
        ok = 0;
        break;
      }
    }
  }
  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
  return ok ? 0 : 1;
}

/* The other thread's first use, started and awaited by the fork handler below. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static enum { IDLE, ASKED, DONE } first_use = IDLE;
static int first_use_status = -1;

static void *make_first_use(void *unused) {
  (void)unused;
  pthread_mutex_lock(&lock);
  while (first_use != ASKED) pthread_cond_wait(&changed, &lock);
  pthread_mutex_unlock(&lock);
  const int status = compile_and_invoke();
  pthread_mutex_lock(&lock);
  first_use_status = status;
  first_use = DONE;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* Runs first among the prepare handlers (registered last). */
static void first_use_during_fork(void) {
  pthread_mutex_lock(&lock);
  if (first_use == IDLE) {
    first_use = ASKED;
    pthread_cond_broadcast(&changed);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    while (first_use != DONE && pthread_cond_timedwait(&changed, &lock, &deadline) == 0) {
    }
  }
  pthread_mutex_unlock(&lock);
}

/* A round's process: exits with the child's status (0, 1), 100 + its signal, or 90 when the
 * other thread's first use did not finish or failed. */
static void round_process(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, make_first_use, NULL) != 0) _exit(2);
  if (pthread_atfork(first_use_during_fork, NULL, NULL) != 0) _exit(2);
  const pid_t child = fork();
  if (child == 0) {
    alarm(20);
    _exit(compile_and_invoke());
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) _exit(3);
  pthread_join(thread, NULL);
  if (first_use_status != 0) _exit(90);
  _exit(WIFSIGNALED(status) ? 100 + WTERMSIG(status) : WEXITSTATUS(status));
}

int main(void) {
  /* Compiling in a compiler process, whatever the suite chose (as in
   * fork_during_first_compile_test: LLVM's own state is not fork-safe). */
  setenv("TINYMLIR_COMPILE_IN_PROCESS", "0", 1);
  for (int round = 0; round < ROUNDS; ++round) {
    const pid_t pid = fork();
    if (pid == 0) round_process();
    int status = 0;
    const int waited = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status);
    const int code = waited ? WEXITSTATUS(status) : -1;
    EXPECT(code == 0, "round %d: %s", round,
           code == 100 + SIGALRM ? "the child hung"
           : code == 90          ? "the first use inside the fork failed or took over 60 s"
           : code == 1           ? "the child's result was wrong (printed above)"
                                 : "the round ended otherwise");
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
