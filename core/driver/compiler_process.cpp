#include "core/driver/compiler_process.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/support/at_unload.h"
#include "core/support/environment.h"
#include "core/support/fork_safe_once.h"
#include "core/support/host_cpu.h"
#include "core/driver/compiler_library.h"
#include "core/driver/compiler_protocol.h"
#include "core/engine/targets.h"

extern char **environ;

#ifndef TINYMLIR_COMPILER_PROCESS_FILE
#error "TINYMLIR_COMPILER_PROCESS_FILE must be defined by the build"
#endif

namespace tinymlir {
namespace {

// A started compiler process: the socket to it, the anonymous file holding its output,
// and a pidfd, through which it is waited for and killed: a pid alone could name another
// process once the application has reaped this one (wait(-1)) and the kernel reused it.
struct Worker {
  pid_t pid = -1;
  int pidfd = -1;  // -1 where the kernel has no pidfd_open (before Linux 5.4): the pid then
  int socket = -1;
  int output = -1;
  std::chrono::steady_clock::time_point idle_since;  // when it was last left idle
};

// Closes what this process holds of `w` (the process itself is not touched).
void CloseDescriptors(Worker *w) {
  for (int fd : {w->socket, w->output, w->pidfd})
    if (fd >= 0) close(fd);
  *w = Worker();
}

// Whether `w` has ended: kRunning, kReaped (*wstatus set, as waitpid's), or kUnknown (it is
// no longer this process's child to wait for: the application reaped it).
enum class Reaped { kRunning, kReaped, kUnknown };
Reaped Reap(const Worker &w, bool block, int *wstatus) {
  for (;;) {
    if (w.pidfd >= 0) {
      siginfo_t info{};
      if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(w.pidfd), &info,
                 WEXITED | (block ? 0 : WNOHANG)) == 0) {
        if (info.si_pid == 0) return Reaped::kRunning;
        *wstatus = info.si_code == CLD_EXITED ? (info.si_status & 0xff) << 8
                                              : (info.si_status & 0x7f);
        return Reaped::kReaped;
      }
    } else {
      const pid_t reaped = waitpid(w.pid, wstatus, block ? 0 : WNOHANG);
      if (reaped == 0) return Reaped::kRunning;
      if (reaped == w.pid) return Reaped::kReaped;
    }
    if (errno != EINTR) return Reaped::kUnknown;
  }
}

// `fd` moved to a number >= 10 (close-on-exec): the child's dup2 onto 1, 2 and 3 then never
// meets a descriptor already there (dup2 onto itself would keep close-on-exec), and a
// descriptor this process keeps is never 0, 1 or 2 where the host closed its standard
// streams (its next printf would otherwise go into a compiler's socket).
// Under a descriptor limit of 10 or less (EINVAL), any number above 3 does.
int HighFd(int fd) {
  if (fd < 0 || fd >= 10) return fd;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (high < 0 && errno == EINVAL && fd > kCompilerProcessSocket) return fd;
  if (high < 0 && errno == EINVAL) high = fcntl(fd, F_DUPFD_CLOEXEC, kCompilerProcessSocket + 1);
  const int error = errno;
  close(fd);
  errno = error;
  return high;
}

// Empties the process's output file before a request, so that a failure reports what that
// request printed (the file's offset is shared with the process's descriptors 1 and 2).
void ResetOutput(const Worker &w) {
  if (ftruncate(w.output, 0) == 0) lseek(w.output, 0, SEEK_SET);
}

// The last ~2 KB the process printed, or "" when it printed nothing.
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

// How a process ended.
struct Ending {
  std::string how;  // "was killed by signal 11 (Segmentation fault); its last output: ..."
  // It exited with status 0, as at the end of its idle time, or its status is not known
  // (the application reaped it): a request it did not answer may be sent again.
  bool maybe_idle = false;
};

// Ends `w`, reaps it and says how it ended and what it printed last. A process that has
// just closed its socket is given 100 ms to finish exiting, so that a crash is reported
// as such; one still running then (it broke the protocol) is killed.
Ending Stop(Worker *w) {
  if (w->socket >= 0) close(w->socket);
  w->socket = -1;
  int wstatus = 0;
  Reaped reaped = Reaped::kRunning;
  for (int i = 0; i < 10 && reaped == Reaped::kRunning; ++i) {
    reaped = Reap(*w, false, &wstatus);
    if (reaped == Reaped::kRunning) usleep(10000);
  }
  Ending ending;
  if (reaped == Reaped::kRunning) {
    if (w->pidfd >= 0)
      syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, nullptr, 0);
    else
      kill(w->pid, SIGKILL);  // still our unreaped child, so the pid is still its own
    Reap(*w, true, &wstatus);
    ending.how = "was stopped by libtinymlir.so";
  } else if (reaped == Reaped::kUnknown) {
    ending.how = "ended (its exit status is not known: the application reaped it, or "
                 "ignores SIGCHLD)";
    ending.maybe_idle = true;
  } else if (WIFSIGNALED(wstatus)) {
    ending.how = "was killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
                 strsignal(WTERMSIG(wstatus)) + ")";
  } else {
    ending.how = "exited with status " + std::to_string(WEXITSTATUS(wstatus));
    ending.maybe_idle = WEXITSTATUS(wstatus) == 0;
  }
  ending.how += OutputTail(w->output);
  CloseDescriptors(w);
  return ending;
}

// Whether `w` has exited (its idle time ran out); reaps it if so.
bool HasExited(const Worker &w) {
  int wstatus = 0;
  return Reap(w, false, &wstatus) != Reaped::kRunning;
}

ForkSafeOnce<std::string> symbols_message;

// The kSymbols message: the names the engine's linker resolves, for each device.
// The tables are fixed, so it is encoded once.
const std::string &SymbolsMessage() {
  return symbols_message.Get([] {
    DeviceSymbols symbols;
    for (const std::string &device : AllDeviceNames()) {
      const std::vector<std::string> names = DeviceSymbolNames(device);
      symbols[device].insert(names.begin(), names.end());
    }
    return EncodeSymbols(symbols);
  });
}

class CompilerProcesses {
 public:
  // Never destroyed: a thread still compiling while the process exits must find it whole.
  // At exit or unload, ShutDown ends the idle processes.
  static CompilerProcesses &Get();

  // Sends `request` to an idle process (or a new one) and reads its reply, which `decode`
  // must accept (false: malformed). `what` says what the request is, for messages
  // ("compiling trace 'x'").
  Status Call(MessageKind kind, const std::string &request, const std::string &what,
              const std::function<bool(const std::string &)> &decode) {
    Worker w;
    bool reused = TakeIdle(&w);
    for (int attempt = 0;; ++attempt) {
      if (!reused) TM_RETURN_IF_ERROR(Start(&w));
      ResetOutput(w);
      MessageKind reply_kind = MessageKind::kReply;
      std::string reply;
      bool closed = false, unread = false;
      Status status = WriteMessage(w.socket, kind, request);
      const bool sent = status.ok();
      if (sent) status = ReadMessage(w.socket, &reply_kind, &reply, &closed, &unread);
      if (status.ok() && (reply_kind != MessageKind::kReply || !decode(reply)))
        status = IoError("it sent a malformed reply");
      if (status.ok()) {
        Release(&w);
        return Status::Ok();
      }
      const Ending ending = Stop(&w);
      // An idle process may have reached its idle time just as this request was sent (it
      // took no request, or exited cleanly without answering), or have been killed while
      // idle, before it read the request (the connection was reset with the request
      // unread; a process that ends as it is killed is seen running for some milliseconds):
      // a new process is asked, once. A request that crashes a process is not sent again.
      if (reused && attempt == 0 && (!sent || unread || (closed && ending.maybe_idle))) {
        reused = false;
        continue;
      }
      return CompileError("the compiler process " + CompilerProcessPath() + " failed while " +
                          what + ": " + status.message() + "; it " + ending.how);
    }
  }

 private:
  CompilerProcesses() = default;

  // A child forked from this process must not share these processes' sockets with it:
  // it starts its own. The lock is held across fork so the list is consistent, and so
  // that no fork happens while a new process's end of its socket is open here.
  // The child has no reaper thread (only the forking thread is copied); the condition
  // variable may list the parent's reaper as a waiter, so it is made anew. Registered when
  // the library loads (see ForkSafeMutexes: one registered at first use may miss a fork
  // already under way); the first fork makes the list.
  static void BeforeFork() { Get().mutex_.lock(); }
  static void AfterForkInParent() { Get().mutex_.unlock(); }
  static void AfterForkInChild() {
    CompilerProcesses &self = Get();
    for (Worker &w : self.idle_) CloseDescriptors(&w);
    self.idle_.clear();
    self.reaper_started_ = false;
    new (&self.reaper_wake_) std::condition_variable();
    self.mutex_.unlock();
  }
  static const int fork_handlers_registered_;

  // The idle processes are told to end (their sockets close) and reaped, and the reaper
  // thread is joined: at unload, before its code is unmapped.
  void ShutDown() {
    bool join = false;
    pthread_t reaper{};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shut_down_ = true;
      for (Worker &w : idle_) {
        close(w.socket);
        w.socket = -1;
      }
      for (Worker &w : idle_) Stop(&w);
      idle_.clear();
      idle_.shrink_to_fit();
      std::swap(join, reaper_started_);
      reaper = reaper_;
    }
    reaper_wake_.notify_all();
    if (join && !pthread_equal(reaper, pthread_self())) pthread_join(reaper, nullptr);
  }

  // Keeps `w` for the next request (or ends it, after ShutDown).
  void Release(Worker *w) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) {
      Stop(w);
      return;
    }
    w->idle_since = std::chrono::steady_clock::now();
    idle_.push_back(*w);
    StartReaper();
    reaper_wake_.notify_one();
  }

  // An idle process that is still running. Every idle process that has exited is reaped
  // on the way, so none stays a zombie while others are reused.
  bool TakeIdle(Worker *out) {
    std::lock_guard<std::mutex> lock(mutex_);
    ReapExitedIdle();
    if (idle_.empty()) return false;
    *out = idle_.back();
    idle_.pop_back();
    return true;
  }

  // Reaps the idle processes that have exited and forgets them; mutex_ is held.
  void ReapExitedIdle() {
    size_t kept = 0;
    for (Worker &w : idle_) {
      if (HasExited(w)) {
        CloseDescriptors(&w);
      } else {
        idle_[kept++] = w;
      }
    }
    idle_.resize(kept);
  }

  // An idle process exits on its own at the end of its idle time. The reaper thread reaps
  // it then, so that it does not stay a zombie (in `ps`, and counted against the user's
  // process limit) until the next compile, which may never come. Started with the first
  // idle process, with every signal blocked (a host's handlers never run on it); where it
  // cannot start, exited processes are reaped at the next compile. mutex_ is held.
  void StartReaper() {
    if (reaper_started_) return;
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    reaper_started_ = pthread_create(&reaper_, nullptr, &CompilerProcesses::ReaperMain, this) == 0;
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }

  // Sleeps until the earliest idle process's time is up (plus a margin for its exit), then
  // reaps what has exited; one still running past its time is looked at every 250 ms.
  static void *ReaperMain(void *self_pointer) {
    auto *self = static_cast<CompilerProcesses *>(self_pointer);
    using Clock = std::chrono::steady_clock;
    constexpr auto kExitMargin = std::chrono::milliseconds(250);
    std::unique_lock<std::mutex> lock(self->mutex_);
    while (!self->shut_down_) {
      self->ReapExitedIdle();
      if (self->idle_.empty()) {
        self->reaper_wake_.wait(lock);
        continue;
      }
      Clock::time_point due = Clock::time_point::max();
      for (const Worker &w : self->idle_)
        due = std::min(due, w.idle_since + std::chrono::seconds(kCompilerIdleSeconds));
      self->reaper_wake_.wait_until(lock, std::max(due, Clock::now()) + kExitMargin);
    }
    return nullptr;
  }

  Status Start(Worker *w) {
    const std::string &path = CompilerProcessPath();
    auto cannot = [&path](StatusCode code, const std::string &why) {
      return Status(code, "cannot start the compiler process " + path + ": " + why +
                              (code == StatusCode::kUnsupported
                                   ? " (programs from program files and the disk cache need "
                                     "no compiler)"
                                   : ""));
    };
    {
      // Under the lock, so that no fork (which takes it first) copies the process's end of
      // the socket before it is closed here: a copy would keep the socket open, and a
      // crash of the process would never be seen.
      std::lock_guard<std::mutex> lock(mutex_);
      TM_RETURN_IF_ERROR(Spawn(w, [&](int error, const char *call) {
        // A missing or unusable executable is a compiler that is not there; anything else
        // (no descriptors left, no memory) is a failed compile.
        const bool absent = std::strcmp(call, "posix_spawn") == 0 &&
                            (error == ENOENT || error == EACCES || error == ENOEXEC);
        return cannot(absent ? StatusCode::kUnsupported : StatusCode::kCompile,
                      std::string(absent ? "" : std::string(call) + ": ") + std::strerror(error) +
                          (error == EAGAIN ? " (the user's process limit, RLIMIT_NPROC, "
                                             "ulimit -u?)"
                                           : ""));
      }));
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
      status = WriteMessage(w->socket, MessageKind::kSymbols, SymbolsMessage());
    if (!status.ok()) {
      const Ending ending = Stop(w);
      return cannot(StatusCode::kCompile, status.message() + " as it started; it " + ending.how);
    }
    if (!loaded.ok()) {
      Stop(w);
      return loaded;
    }
    return Status::Ok();
  }

  // Starts the process with its socket as descriptor 3 and its output to a memfd; on
  // failure returns fail(errno value, the call that failed).
  template <typename Fail>
  Status Spawn(Worker *w, const Fail &fail) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      return fail(errno, "socketpair");
    const int child_socket = HighFd(pair[1]);
    w->socket = HighFd(pair[0]);
    w->output = HighFd(memfd_create("tinymlir-compiler output", MFD_CLOEXEC));
    if (child_socket < 0 || w->socket < 0 || w->output < 0) {
      const int error = errno;
      if (child_socket >= 0) close(child_socket);
      if (w->socket >= 0) close(w->socket);
      if (w->output >= 0) close(w->output);
      *w = Worker();
      return fail(error, child_socket < 0 || w->socket < 0 ? "fcntl" : "memfd_create");
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
    // A process group of its own: a signal to the caller's group (Ctrl-C at a terminal,
    // SIGTERM to a service's group) is the caller's to handle, not a compiler's death.
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    // The compiler library to load, how long to wait idle, the build the compiler must
    // come from (the process refuses to serve another build's libtinymlir.so), and the
    // CPU extensions to do without as this process read them.
    const std::string idle = std::to_string(kCompilerIdleSeconds);
    char *argv[] = {const_cast<char *>(CompilerProcessPath().c_str()),
                    const_cast<char *>(CompilerLibraryPath().c_str()),
                    const_cast<char *>(idle.c_str()), const_cast<char *>(kCompilerBuildId),
                    const_cast<char *>(CpuExclusionSetting().c_str()), nullptr};
    const int error = posix_spawn(&w->pid, argv[0], &files, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attributes);
    close(child_socket);
    if (error != 0) {
      CloseDescriptors(w);
      return fail(error, "posix_spawn");
    }
    w->pidfd = HighFd(static_cast<int>(syscall(SYS_pidfd_open, w->pid, 0)));  // close-on-exec
    return Status::Ok();
  }

  std::mutex mutex_;
  std::vector<Worker> idle_;
  bool shut_down_ = false;
  std::condition_variable reaper_wake_;  // a process left idle, or ShutDown
  pthread_t reaper_{};
  bool reaper_started_ = false;
};

alignas(CompilerProcesses) unsigned char processes_storage[sizeof(CompilerProcesses)];
ForkSafeOnce<CompilerProcesses *> processes;

CompilerProcesses &CompilerProcesses::Get() {
  return *processes.Get([] {
    auto *made = new (processes_storage) CompilerProcesses();
    AtUnloadOrExit([](void *) { Get().ShutDown(); });
    return made;
  });
}

const int CompilerProcesses::fork_handlers_registered_ =
    pthread_atfork(&BeforeFork, &AfterForkInParent, &AfterForkInChild);

ForkSafeOnce<std::string> compiler_process_path;

}  // namespace

bool CompileInThisProcess() { return CompileInProcessSetting(); }

const std::string &CompilerProcessPath() {
  return compiler_process_path.Get([] { return LibraryFolder() + TINYMLIR_COMPILER_PROCESS_FILE; });
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
