/* fork() while another thread makes the library's first compile: the child's own compile
 * must not wait for set-up the other thread had under way (a function-local static's guard,
 * the loader's lock taken by dl_iterate_phdr), which the child has no thread to finish.
 *
 * Each round is a fresh process, in which the library has done nothing yet: it starts a
 * thread that compiles (disk cache off), forks 0-600 us later, and the child compiles the
 * same under a 5 s alarm. Before the fix, about one child in fifteen hung.
 * Usage: fork_during_first_compile_test. Prints "N passed, N failed". */
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

enum { ROUNDS = 100, MAX_DELAY_US = 600 };

/* 0: compiled; 1: failed (the message is printed). */
static int compile_exp(void) {
  tm_context *ctx = NULL;
  tm_trace *trace = NULL;
  tm_program *program = NULL;
  tm_value x, y;
  const int64_t shape[1] = {8};
  const int ok = tm_context_create(&ctx) == TM_OK && tm_cache_set_dir(ctx, NULL, 0) == TM_OK &&
                 tm_trace_begin(ctx, "exp", &trace) == TM_OK &&
                 tm_op_input(trace, TM_F32, 1, shape, &x) == TM_OK &&
                 tm_op_exp(trace, x, &y) == TM_OK && tm_trace_end(trace, &y, 1) == TM_OK &&
                 tm_compile(ctx, trace, NULL, &program) == TM_OK;
  if (!ok) fprintf(stderr, "compile: %s\n", tm_last_error());
  tm_program_release(program);
  tm_trace_destroy(trace);
  tm_context_release(ctx);
  return ok ? 0 : 1;
}

static void *first_compile(void *unused) {
  (void)unused;
  compile_exp();
  return NULL;
}

/* A round's process: exits with the child's status (0, 1) or 100 + its signal. */
static void round_process(unsigned delay_us) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, first_compile, NULL) != 0) _exit(2);
  usleep(delay_us);
  const pid_t child = fork();
  if (child == 0) {
    alarm(5);
    _exit(compile_exp());
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) _exit(3);
  pthread_join(thread, NULL);
  _exit(WIFSIGNALED(status) ? 100 + WTERMSIG(status) : WEXITSTATUS(status));
}

int main(void) {
  /* The compiler process, whatever the suite chose: compiling in the caller's process
   * (TINYMLIR_COMPILE_IN_PROCESS=1, for the sanitizers) loads LLVM there, whose own statics
   * and the loader's state in the middle of dlopen no fork can make whole. */
  setenv("TINYMLIR_COMPILE_IN_PROCESS", "0", 1);
  int hung = 0, other = 0;
  srand((unsigned)time(NULL));
  for (int round = 0; round < ROUNDS; ++round) {
    const unsigned delay_us = (unsigned)(rand() % MAX_DELAY_US);
    const pid_t pid = fork();
    if (pid == 0) round_process(delay_us);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
      ++other;
      continue;
    }
    const int code = WEXITSTATUS(status);
    if (code == 100 + SIGALRM) {
      ++hung;
      fprintf(stderr, "round %d: the child forked %u us into the first compile hung\n", round,
              delay_us);
    } else if (code != 0) {
      ++other;
      fprintf(stderr, "round %d: ended with %d\n", round, code);
    }
  }
  EXPECT(hung == 0, "%d of %d children hung", hung, ROUNDS);
  EXPECT(other == 0, "%d of %d rounds failed otherwise", other, ROUNDS);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
