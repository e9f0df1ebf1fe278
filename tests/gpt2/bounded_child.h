// Test helpers for readers that must stay bounded: a body that would block (a FIFO) or read
// without end (/dev/zero) runs in a forked child with a wall-clock limit and, unless the
// build uses AddressSanitizer (whose shadow memory needs a large address space), a 1 GiB
// address-space limit. A reader that regresses then fails its test instead of hanging the
// suite or exhausting the machine.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#define TM_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TM_TEST_UNDER_ASAN 1
#endif
#endif

namespace tinymlir::gpt2::testing {

// Runs `body` in a child process; *result receives the string it returns. Fails when the
// child does not finish normally within `seconds` (three times that under AddressSanitizer):
// blocked, killed for memory, crashed.
inline ::testing::AssertionResult RunBounded(const std::function<std::string()> &body,
                                             std::string *result, unsigned seconds = 10) {
#ifdef TM_TEST_UNDER_ASAN
  seconds *= 3;  // the limit is for readers that hang or go quadratic, not for ASan's cost
#endif
  int fds[2];
  if (pipe(fds) != 0) return ::testing::AssertionFailure() << "pipe: " << std::strerror(errno);
  const pid_t pid = fork();
  if (pid < 0) return ::testing::AssertionFailure() << "fork: " << std::strerror(errno);
  if (pid == 0) {
    close(fds[0]);
    alarm(seconds);
#ifndef TM_TEST_UNDER_ASAN
    struct rlimit limit = {rlim_t{1} << 30, rlim_t{1} << 30};
    setrlimit(RLIMIT_AS, &limit);
#endif
    std::string text;
    int code = 0;
    try {
      text = body();
    } catch (const std::exception &e) {
      text = std::string("exception: ") + e.what();
      code = 3;
    }
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = write(fds[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(code);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *result = text;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return ::testing::AssertionFailure()
           << "the child was killed by signal " << sig << " (" << strsignal(sig) << ")"
           << (sig == SIGALRM ? ": it blocked or ran past " + std::to_string(seconds) + " s"
                              : std::string());
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return ::testing::AssertionFailure()
           << "the child exited with status " << WEXITSTATUS(status) << ": " << text;
  return ::testing::AssertionSuccess();
}

// Plain GoogleTest (no gmock): passes when `text` contains `needle`, else shows both.
inline ::testing::AssertionResult HasSubstr(const std::string &text, const std::string &needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << needle << "\"";
}

}  // namespace tinymlir::gpt2::testing
