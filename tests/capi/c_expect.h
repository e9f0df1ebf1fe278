/* EXPECT for the plain-C tests: counts passes and failures, prints each failure with its
 * condition and a message; main prints "N passed, N failed" from the two counters. */
#ifndef TINYMLIR_TESTS_C_EXPECT_H
#define TINYMLIR_TESTS_C_EXPECT_H

#include <stdio.h>

static int passed = 0, failed = 0;

#define EXPECT(cond, ...)                                                \
  do {                                                                   \
    if (cond) {                                                          \
      ++passed;                                                          \
    } else {                                                             \
      ++failed;                                                          \
      fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                      \
      fprintf(stderr, "\n");                                             \
    }                                                                    \
  } while (0)

#endif /* TINYMLIR_TESTS_C_EXPECT_H */
