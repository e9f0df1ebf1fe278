#include "core/driver/compiler_protocol.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/engine/program_file.h"
#include "core/trace/byte_io.h"

namespace tinymlir {
namespace {

constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 36;
constexpr uint64_t kMaxSymbols = 1 << 16;
constexpr int64_t kMaxStatusCode = static_cast<int64_t>(StatusCode::kBusy);

Status Malformed(const char *what) {
  return IoError(std::string("malformed ") + what +
                 " between libtinymlir.so and its compiler process");
}

// All of `n` bytes, or the reason why not; *received counts what arrived, *reset whether
// the peer reset the connection (ECONNRESET).
Status ReadAll(int fd, char *data, size_t n, size_t *received, bool *reset) {
  *received = 0;
  *reset = false;
  while (*received < n) {
    const ssize_t got = recv(fd, data + *received, n - *received, 0);
    if (got > 0) {
      *received += static_cast<size_t>(got);
    } else if (got == 0) {
      return IoError("the connection closed");
    } else if (errno != EINTR) {
      *reset = errno == ECONNRESET;
      return IoError(std::string("recv: ") + std::strerror(errno));
    }
  }
  return Status::Ok();
}

}  // namespace

Status WriteMessage(int fd, MessageKind kind, const std::string &body) {
  ByteWriter head;
  head.U64(static_cast<uint64_t>(kind));
  head.U64(body.size());
  const std::string header = head.Take();
  for (const std::string *part : {&header, &body}) {
    size_t sent = 0;
    while (sent < part->size()) {
      // MSG_NOSIGNAL: a peer that has died makes this fail with EPIPE instead of killing
      // the process with SIGPIPE.
      const ssize_t n = send(fd, part->data() + sent, part->size() - sent, MSG_NOSIGNAL);
      if (n >= 0) {
        sent += static_cast<size_t>(n);
      } else if (errno != EINTR) {
        return IoError(std::string("send: ") + std::strerror(errno));
      }
    }
  }
  return Status::Ok();
}

Status ReadMessage(int fd, MessageKind *kind, std::string *body, bool *closed, bool *unread) {
  char header[16];
  size_t received = 0;
  bool reset = false;
  Status status = ReadAll(fd, header, sizeof header, &received, &reset);
  *closed = !status.ok() && received == 0;
  if (unread) *unread = *closed && reset;
  TM_RETURN_IF_ERROR(status);
  uint64_t raw_kind, length;
  std::memcpy(&raw_kind, header, 8);
  std::memcpy(&length, header + 8, 8);
  if (raw_kind < static_cast<uint64_t>(MessageKind::kHello) ||
      raw_kind > static_cast<uint64_t>(MessageKind::kReply) || length > kMaxMessageBytes)
    return Malformed("message header");
  *kind = static_cast<MessageKind>(raw_kind);
  // The buffer grows with the bytes that arrive, never to what a header merely claims: a
  // broken peer cannot make this process allocate gigabytes.
  constexpr size_t kChunk = size_t{1} << 20;
  body->clear();
  while (body->size() < length) {
    const size_t at = body->size();
    body->resize(at + static_cast<size_t>(std::min<uint64_t>(kChunk, length - at)));
    TM_RETURN_IF_ERROR(ReadAll(fd, body->data() + at, body->size() - at, &received, &reset));
  }
  return Status::Ok();
}

namespace {

// A status within a message: its code, then its message.
void WriteStatus(ByteWriter *w, const Status &status) {
  w->I64(static_cast<int64_t>(status.code()));
  w->Text(status.message());
}

bool ReadStatus(ByteReader *r, Status *status) {
  int64_t code;
  std::string message;
  if (!r->I64(&code) || code < 0 || code > kMaxStatusCode || !r->Text(&message)) return false;
  *status = code == 0 ? Status::Ok() : Status(static_cast<StatusCode>(code), message);
  return true;
}

}  // namespace

std::string EncodeStatus(const Status &status) {
  ByteWriter w;
  WriteStatus(&w, status);
  return w.Take();
}

Status DecodeStatus(const std::string &body, Status *status) {
  ByteReader r(body);
  if (!ReadStatus(&r, status) || !r.AtEnd()) return Malformed("status");
  return Status::Ok();
}

std::string EncodeSymbols(const DeviceSymbols &symbols) {
  ByteWriter w;
  w.U64(symbols.size());
  for (const auto &[device, names] : symbols) {
    w.Text(device);
    w.U64(names.size());
    for (const std::string &name : names) w.Text(name);
  }
  return w.Take();
}

Status DecodeSymbols(const std::string &body, DeviceSymbols *symbols) {
  ByteReader r(body);
  uint64_t devices = 0;
  bool ok = r.Count(kMaxSymbols, &devices);
  for (uint64_t i = 0; ok && i < devices; ++i) {
    std::string device;
    uint64_t n = 0;
    ok = r.Text(&device) && r.Count(kMaxSymbols, &n);
    std::set<std::string> &names = (*symbols)[device];
    for (uint64_t j = 0; ok && j < n; ++j) {
      std::string name;
      ok = r.Text(&name);
      names.insert(std::move(name));
    }
  }
  if (!ok || !r.AtEnd()) return Malformed("symbol list");
  return Status::Ok();
}

std::string EncodeCompileRequest(const Trace &trace, const CompileOptions &options) {
  ByteWriter w;
  w.Text(EncodeCompileOptions(options));
  w.Text(trace.Serialize());
  return w.Take();
}

Status DecodeCompileRequest(const std::string &body, Trace *trace, CompileOptions *options) {
  ByteReader r(body);
  std::string options_text, trace_bytes;
  if (!r.Text(&options_text) || !r.Text(&trace_bytes) || !r.AtEnd() ||
      !DecodeCompileOptions(options_text, options).ok())
    return Malformed("compile request");
  return Trace::Deserialize(trace_bytes, trace);
}

std::string EncodeAssemblyRequest(const std::string &llvm_ir, int opt_level) {
  ByteWriter w;
  w.I64(opt_level);
  w.Text(llvm_ir);
  return w.Take();
}

Status DecodeAssemblyRequest(const std::string &body, std::string *llvm_ir, int *opt_level) {
  ByteReader r(body);
  int64_t level;
  if (!r.I64(&level) || !r.Text(llvm_ir) || !r.AtEnd()) return Malformed("assembly request");
  *opt_level = static_cast<int>(level);
  return Status::Ok();
}

std::string EncodeProgramReply(const Status &status, const CompiledProgram *program) {
  ByteWriter w;
  WriteStatus(&w, status);
  if (status.ok()) {
    for (double seconds : program->phase_seconds) w.F64(seconds);
    w.Text(SerializeProgram(*program));
  }
  return w.Take();
}

bool DecodeProgramReply(const std::string &body, Status *status,
                        std::unique_ptr<Program> *program) {
  ByteReader r(body);
  if (!ReadStatus(&r, status)) return false;
  if (!status->ok()) return r.AtEnd();
  auto compiled = std::make_unique<Program>();
  std::string bytes;
  bool ok = true;
  for (double &seconds : compiled->phase_seconds) ok = ok && r.F64(&seconds);
  if (!ok || !r.Text(&bytes) || !r.AtEnd() || !DeserializeProgram(bytes, compiled.get()).ok())
    return false;
  *program = std::move(compiled);
  return true;
}

std::string EncodeTextReply(const Status &status, const std::string &text) {
  ByteWriter w;
  WriteStatus(&w, status);
  w.Text(status.ok() ? text : std::string());
  return w.Take();
}

bool DecodeTextReply(const std::string &body, Status *status, std::string *text) {
  ByteReader r(body);
  return ReadStatus(&r, status) && r.Text(text) && r.AtEnd();
}

}  // namespace tinymlir
