#include "core/target/compiler_process.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/target/compiler_library.h"
#include "core/target/compiler_protocol.h"
#include "core/target/cpu/runtime_symbols.h"
#include "core/target/gpu/gpu_symbols.h"

extern char **environ;

#ifndef TINYMLIR_COMPILER_PROCESS_FILE
#error "TINYMLIR_COMPILER_PROCESS_FILE must be defined by the build"
#endif

namespace tinymlir {
namespace {

// A started compiler process: the socket to it and the anonymous file holding its output.
struct Worker {
  pid_t pid = -1;
  int socket = -1;
  int output = -1;
};

// `fd` moved to a number >= 10 (close-on-exec), so that the child's dup2 onto 1, 2 and 3
// never meets a descriptor already there (dup2 onto itself would keep close-on-exec).
int HighFd(int fd) {
  if (fd < 0 || fd >= 10) return fd;
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  close(fd);
  return high;
}

std::string Errno(const char *call) { return std::string(call) + ": " + std::strerror(errno); }

// The last ~2 KB the process printed, on one line per line, or "" when it printed nothing.
std::string OutputTail(int output) {
  constexpr off_t kTail = 2048;
  const off_t size = lseek(output, 0, SEEK_END);
  if (size <= 0) return "";
  std::string text(static_cast<size_t>(size < kTail ? size : kTail), '\0');
  const ssize_t n = pread(output, text.data(), text.size(), size - static_cast<off_t>(text.size()));
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "" : "; its last output: \"" + text + "\"";
}

std::string DescribeExit(pid_t reaped, int wstatus) {
  if (reaped <= 0) return "ended (its exit status is not known: SIGCHLD is ignored)";
  if (WIFSIGNALED(wstatus))
    return "was killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
           strsignal(WTERMSIG(wstatus)) + ")";
  if (WIFEXITED(wstatus)) return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  return "ended";
}

// Ends `w`, reaps it and says how it ended and what it printed last. A process that has
// just closed its socket is given 100 ms to finish exiting, so that a crash is reported
// as such; one still running then (it broke the protocol) is killed.
std::string Stop(Worker *w) {
  close(w->socket);
  int wstatus = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 10 && reaped == 0; ++i) {
    reaped = waitpid(w->pid, &wstatus, WNOHANG);
    if (reaped == 0) usleep(10000);
  }
  std::string how;
  if (reaped == 0) {
    kill(w->pid, SIGKILL);
    do reaped = waitpid(w->pid, &wstatus, 0);
    while (reaped < 0 && errno == EINTR);
    how = "was stopped by libtinymlir.so";
  } else {
    how = DescribeExit(reaped, wstatus);
  }
  how += OutputTail(w->output);
  close(w->output);
  *w = Worker();
  return how;
}

// Whether `w` has exited (its idle time ran out); reaps it if so.
bool HasExited(const Worker &w) {
  int wstatus = 0;
  const pid_t reaped = waitpid(w.pid, &wstatus, WNOHANG);
  return reaped == w.pid || (reaped < 0 && errno == ECHILD);
}

std::vector<std::string> Names(const std::unordered_map<std::string, void *> &table) {
  std::vector<std::string> names;
  for (const auto &entry : table) names.push_back(entry.first);
  return names;
}

class CompilerProcesses {
 public:
  static CompilerProcesses &Get() {
    static CompilerProcesses processes;
    return processes;
  }

  // At unload or exit: idle processes see their socket close and exit; they are reaped,
  // so an unloaded library leaves no process or descriptor behind.
  ~CompilerProcesses() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Worker &w : idle_) Stop(&w);
    idle_.clear();
  }

  // Sends `request` to an idle process (or a new one) and reads its reply, which `decode`
  // must accept (false: malformed). `what` says what the request is, for messages
  // ("compiling trace 'x'").
  Status Call(MessageKind kind, const std::string &request, const std::string &what,
              const std::function<bool(const std::string &)> &decode) {
    for (int attempt = 0;; ++attempt) {
      Worker w;
      const bool reused = TakeIdle(&w);
      if (!reused) TM_RETURN_IF_ERROR(Start(&w));
      MessageKind reply_kind = MessageKind::kReply;
      std::string reply;
      bool closed = false;
      Status status = WriteMessage(w.socket, kind, request);
      const bool sent = status.ok();
      if (sent) status = ReadMessage(w.socket, &reply_kind, &reply, &closed);
      if (status.ok() && (reply_kind != MessageKind::kReply || !decode(reply)))
        status = IoError("it sent a malformed reply");
      if (status.ok()) {
        std::lock_guard<std::mutex> lock(mutex_);
        idle_.push_back(w);
        return Status::Ok();
      }
      const std::string how = Stop(&w);
      // An idle process may have reached its idle time just as this request was sent (it
      // took no request, or closed before answering): a fresh one is asked, once. A request
      // that ends a fresh process is reported.
      if (reused && attempt == 0 && (!sent || closed)) continue;
      return CompileError("the compiler process " + CompilerProcessPath() + " failed while " +
                          what + ": " + status.message() + "; it " + how);
    }
  }

 private:
  CompilerProcesses() {
    // A child forked from this process must not share these processes' sockets with it:
    // it starts its own. The lock is held across fork so the list is consistent.
    pthread_atfork([] { Get().mutex_.lock(); }, [] { Get().mutex_.unlock(); },
                   [] {
                     CompilerProcesses &self = Get();
                     for (Worker &w : self.idle_) {
                       close(w.socket);
                       close(w.output);
                     }
                     self.idle_.clear();
                     self.mutex_.unlock();
                   });
  }

  // An idle process that is still running; processes that exited are reaped on the way.
  bool TakeIdle(Worker *out) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!idle_.empty()) {
      Worker w = idle_.back();
      idle_.pop_back();
      if (!HasExited(w)) {
        *out = w;
        return true;
      }
      close(w.socket);
      close(w.output);
    }
    return false;
  }

  Status Start(Worker *w) {
    const std::string &path = CompilerProcessPath();
    auto cannot = [&path](const std::string &why) {
      return Unsupported("cannot start the compiler process " + path + ": " + why +
                         " (programs from program files and the disk cache need no compiler)");
    };
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      return cannot(Errno("socketpair"));
    const int child_socket = HighFd(pair[1]);
    w->socket = pair[0];
    w->output = HighFd(memfd_create("tinymlir-compiler output", MFD_CLOEXEC));
    if (child_socket < 0 || w->output < 0) {
      const std::string why = Errno(child_socket < 0 ? "fcntl" : "memfd_create");
      close(child_socket);
      close(w->socket);
      close(w->output);
      return cannot(why);
    }
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&files, w->output, 1);
    posix_spawn_file_actions_adddup2(&files, w->output, 2);
    posix_spawn_file_actions_adddup2(&files, child_socket, kCompilerProcessSocket);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
    const std::string idle = std::to_string(kCompilerIdleSeconds);
    char *argv[] = {const_cast<char *>(path.c_str()),
                    const_cast<char *>(CompilerLibraryPath().c_str()),
                    const_cast<char *>(idle.c_str()), nullptr};
    const int error = posix_spawn(&w->pid, path.c_str(), &files, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attributes);
    close(child_socket);
    if (error != 0) {
      close(w->socket);
      close(w->output);
      return cannot(std::strerror(error));
    }
    // It says whether it could load the compiler library; then it learns what the
    // engine's linker resolves.
    MessageKind kind = MessageKind::kHello;
    std::string body;
    bool closed = false;
    Status status = ReadMessage(w->socket, &kind, &body, &closed);
    Status loaded;
    if (status.ok() && kind != MessageKind::kHello) status = IoError("it did not say hello");
    if (status.ok()) status = DecodeStatus(body, &loaded);
    if (status.ok() && loaded.ok())
      status = WriteMessage(w->socket, MessageKind::kSymbols,
                            EncodeSymbols(Names(RuntimeSymbols()), Names(GpuRuntimeSymbols())));
    if (!status.ok()) {
      const std::string how = Stop(w);
      return cannot(status.message() + " as it started; it " + how);
    }
    if (!loaded.ok()) {
      Stop(w);
      return loaded;
    }
    return Status::Ok();
  }

  std::mutex mutex_;
  std::vector<Worker> idle_;
};

}  // namespace

bool CompileInThisProcess() {
  static const bool in_process = [] {
    const char *value = std::getenv("TINYMLIR_COMPILE_IN_PROCESS");
    return value && std::strcmp(value, "1") == 0;
  }();
  return in_process;
}

const std::string &CompilerProcessPath() {
  static const std::string path = LibraryFolder() + TINYMLIR_COMPILER_PROCESS_FILE;
  return path;
}

Status CompileInCompilerProcess(const Trace &trace, const CompileOptions &options,
                                std::unique_ptr<Program> *program) {
  Status compiled;
  TM_RETURN_IF_ERROR(CompilerProcesses::Get().Call(
      MessageKind::kCompile, EncodeCompileRequest(trace, options),
      "compiling trace '" + trace.name() + "'",
      [&](const std::string &reply) { return DecodeProgramReply(reply, &compiled, program); }));
  return compiled;
}

Status AssemblyInCompilerProcess(const std::string &llvm_ir, int opt_level, std::string *out) {
  Status printed;
  TM_RETURN_IF_ERROR(CompilerProcesses::Get().Call(
      MessageKind::kAssembly, EncodeAssemblyRequest(llvm_ir, opt_level),
      "printing a program's assembly",
      [&](const std::string &reply) { return DecodeTextReply(reply, &printed, out); }));
  return printed;
}

}  // namespace tinymlir
