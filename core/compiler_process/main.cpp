// tinymlir-compiler: the compiler process libtinymlir.so starts (compiler_process.h).
// Usage: tinymlir-compiler COMPILER_LIBRARY IDLE_SECONDS BUILD_ID CPU_EXCLUDE, with the
// socket to libtinymlir.so as descriptor 3. It loads the compiler library (and with it LLVM and
// MLIR), says whether that worked, learns which functions the engine's linker resolves,
// then answers compile and assembly requests one at a time until the socket closes or no
// request has come for IDLE_SECONDS. BUILD_ID is the compiler build libtinymlir.so was
// linked with: a compiler process from another build refuses to serve it. CPU_EXCLUDE is
// TINYMLIR_CPU_EXCLUDE as libtinymlir.so read it (core/support/host_cpu.h), so that code is
// generated for the CPU its disk cache key describes, whatever the environment says now.
// Not meant to be run by hand.
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/driver/compiler_library.h"
#include "core/driver/compiler_protocol.h"

namespace tinymlir {
namespace {

// What the engine's linker in libtinymlir.so resolves, by device (the kSymbols message).
DeviceSymbols device_symbols;

bool CanLink(const char *symbol, const char *device) {
  auto it = device_symbols.find(device);
  return it != device_symbols.end() && it->second.count(symbol) > 0;
}

// The reply to one request (a request it cannot decode is answered with why); false for a
// message that is no request.
bool Answer(const CompilerEntryPoints &compiler, MessageKind kind,
            const std::string &body, std::string *reply) {
  if (kind == MessageKind::kCompile) {
    Trace trace("");
    CompileOptions options;
    std::unique_ptr<CompiledProgram> program;
    Status status = DecodeCompileRequest(body, &trace, &options);
    if (status.ok()) status = compiler.compile(trace, options, &CanLink, &program);
    *reply = EncodeProgramReply(status, program.get());
    return true;
  }
  if (kind == MessageKind::kAssembly) {
    std::string llvm_ir, assembly;
    int opt_level = 3;
    Status status = DecodeAssemblyRequest(body, &llvm_ir, &opt_level);
    if (status.ok()) status = compiler.assembly(llvm_ir, opt_level, &assembly);
    *reply = EncodeTextReply(status, assembly);
    return true;
  }
  return false;
}

// The caller gone while a compile runs (killed, or exited without closing: os._exit): the
// compile is nobody's any more, and it would go on using a CPU for up to a minute. This
// thread watches for the caller's end of the socket closing and ends the process at once.
// (Not PR_SET_PDEATHSIG: it fires when the thread that started the process ends, and
// callers start compiler processes from short-lived threads.)
void *WatchForTheCallerGone(void *) {
  pollfd hangup = {kCompilerProcessSocket, POLLRDHUP, 0};  // not POLLIN: requests are not ours
  for (;;) {
    const int ready = poll(&hangup, 1, -1);
    if (ready > 0) _exit(0);  // POLLRDHUP, POLLHUP or POLLERR: the caller's end is closed
    if (ready < 0 && errno != EINTR) return nullptr;
  }
}

// The process's life: load, hello, symbols, then requests until the socket closes or
// the idle time passes. Returns the exit status.
int Serve(const char *compiler_library, int idle_seconds, const char *build_id) {
  const int connection = kCompilerProcessSocket;
  const CompilerEntryPoints *compiler = nullptr;
  const Status loaded =
      std::strcmp(build_id, kCompilerBuildId) != 0
          ? Unsupported("cannot load the compiler library " + std::string(compiler_library) +
                        ": the compiler process beside it is from another build (its "
                        "compiler build ID is " + kCompilerBuildId + ", libtinymlir.so's " +
                        build_id + ")")
          : LoadCompilerLibrary(compiler_library, &compiler);
  if (!WriteMessage(connection, MessageKind::kHello, EncodeStatus(loaded)).ok() || !loaded.ok())
    return 1;
  MessageKind kind;
  std::string body;
  bool closed = false;
  if (!ReadMessage(connection, &kind, &body, &closed).ok() || kind != MessageKind::kSymbols ||
      !DecodeSymbols(body, &device_symbols).ok())
    return 1;
  pthread_t watcher;
  if (pthread_create(&watcher, nullptr, WatchForTheCallerGone, nullptr) == 0)
    pthread_detach(watcher);  // without it (no thread to be had), a compile runs to its end
  for (;;) {
    pollfd wait = {connection, POLLIN, 0};
    const int ready = poll(&wait, 1, idle_seconds * 1000);
    if (ready == 0) return 0;  // idle: the next compile starts a new process
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return 1;
    if (!ReadMessage(connection, &kind, &body, &closed).ok()) return closed ? 0 : 1;
    std::string reply;
    if (!Answer(*compiler, kind, body, &reply)) return 1;
    if (!WriteMessage(connection, MessageKind::kReply, reply).ok()) return 0;
  }
}

}  // namespace
}  // namespace tinymlir

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: tinymlir-compiler COMPILER_LIBRARY IDLE_SECONDS BUILD_ID "
                    "CPU_EXCLUDE (started by libtinymlir.so, with its socket as descriptor 3)\n");
    return 2;
  }
  // Before anything asks about the CPU (the compiler library reads it once).
  setenv("TINYMLIR_CPU_EXCLUDE", argv[4], 1);
  // Descriptors the caller left inheritable are not this process's to hold open (a pipe's
  // reader would wait for this process to exit); stdout is unbuffered, so that what it
  // printed before a crash is in the output libtinymlir.so reports.
  close_range(tinymlir::kCompilerProcessSocket + 1, ~0u, 0);
  setvbuf(stdout, nullptr, _IONBF, 0);
  signal(SIGPIPE, SIG_IGN);
  // Its output file is bounded by the caller's RLIMIT_FSIZE too: a write beyond it fails
  // rather than ending the process.
  signal(SIGXFSZ, SIG_IGN);
  return tinymlir::Serve(argv[1], atoi(argv[2]), argv[3]);
}
