// The messages between libtinymlir.so and its compiler process (compiler_process.h), over
// a stream socket. A message is a kind, a length and that many bytes. Both ends come from
// one build (the process checks the compiler library's build ID as the in-process loader
// does), so the bodies use the project's plain binary formats: a trace as
// Trace::Serialize writes it, a program as SerializeProgram writes it.
//
//   process -> library  kHello     the status of loading the compiler library
//   library -> process  kSymbols   the functions the engine's linker resolves (CPU, GPU)
//   library -> process  kCompile   a trace and compile options
//   library -> process  kAssembly  a CPU program's LLVM IR and codegen level
//   process -> library  kReply     a status, then the program (kCompile) or text (kAssembly)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/engine/program.h"
#include "core/support/status.h"
#include "core/driver/compile.h"

namespace tinymlir {

enum class MessageKind : uint64_t {
  kHello = 1, kSymbols = 2, kCompile = 3, kAssembly = 4, kReply = 5
};

// The socket is this descriptor in the compiler process.
inline constexpr int kCompilerProcessSocket = 3;

// Sends one message; never raises SIGPIPE (a peer that has gone is an IoError).
Status WriteMessage(int fd, MessageKind kind, const std::string &body);
// Reads one message. `*closed` says whether the peer closed the socket before its first
// byte (an orderly end, not a torn message); `*unread` (if given), whether it did so by a
// reset, which a peer's end causes only when bytes sent to it were left unread (it never
// read this side's last message whole).
Status ReadMessage(int fd, MessageKind *kind, std::string *body, bool *closed,
                   bool *unread = nullptr);

std::string EncodeStatus(const Status &status);
Status DecodeStatus(const std::string &body, Status *status);

// The functions each device's code may call, by device name (the kSymbols message).
using DeviceSymbols = std::map<std::string, std::set<std::string>>;
std::string EncodeSymbols(const DeviceSymbols &symbols);
Status DecodeSymbols(const std::string &body, DeviceSymbols *symbols);

std::string EncodeCompileRequest(const Trace &trace, const CompileOptions &options);
Status DecodeCompileRequest(const std::string &body, Trace *trace, CompileOptions *options);

std::string EncodeAssemblyRequest(const std::string &llvm_ir, int opt_level);
Status DecodeAssemblyRequest(const std::string &body, std::string *llvm_ir, int *opt_level);

// A compile's reply: its status and, when it succeeded, the unlinked program with its
// compile phase times. The decoders return false on malformed bytes, else set the
// request's own status (and the program or text when it succeeded).
std::string EncodeProgramReply(const Status &status, const CompiledProgram *program);
bool DecodeProgramReply(const std::string &body, Status *status,
                        std::unique_ptr<Program> *program);

std::string EncodeTextReply(const Status &status, const std::string &text);
bool DecodeTextReply(const std::string &body, Status *status, std::string *text);

}  // namespace tinymlir
