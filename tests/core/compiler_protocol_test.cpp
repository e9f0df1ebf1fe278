// What travels between libtinymlir.so and its compiler process
// (core/driver/compiler_protocol.h): traces as bytes, compile requests, replies, and the
// messages over a socket. Round trips must give back the same thing (a trace's fingerprint,
// a program's data); any truncation of the bytes must be refused, never read past; a peer
// that has gone must be an error, not a signal.
#include "core/driver/compiler_protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/program_file.h"
#include "core/trace/composites.h"
#include "core/trace/ops.h"

namespace tinymlir {
namespace {

#define ASSERT_OK(expr)                          \
  do {                                           \
    const Status s_ = (expr);                    \
    ASSERT_TRUE(s_.ok()) << s_.message();        \
  } while (0)

// A trace with every kind of node: inputs, a weak scalar, a constant with data, binary
// ops with promotion, where, unary ops, a cast, matmul, reductions, reshape, transpose,
// slice, a concat naming one value twice, gather, a causal mask and composites; its outputs
// name one value twice.
Trace EveryKindOfNode() {
  Trace t("every kind");
  ValueId x, w, idx, s, c, v[24];
  EXPECT_TRUE(t.Input("in", DType::kF32, {2, 4}, &x).ok());
  EXPECT_TRUE(t.Input("in", DType::kF16, {4, 3}, &w).ok());
  EXPECT_TRUE(t.Input("in", DType::kI64, {5}, &idx).ok());
  EXPECT_TRUE(t.Scalar("scalar", DType::kF64, 0.5, &s).ok());
  std::vector<uint8_t> data(2 * 4 * sizeof(double));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  EXPECT_TRUE(t.Constant("constant", DType::kF64, {2, 4}, data, &c).ok());
  EXPECT_TRUE(RecordOp(t, {OpKind::kAdd, "add", {x, s}}, &v[0]).ok());
  EXPECT_TRUE(RecordOp(t, {OpKind::kMul, "mul", {v[0], c}}, &v[1]).ok());  // f32 * f64 -> f64
  EXPECT_TRUE(RecordOp(t, {OpKind::kLess, "less", {x, v[0]}}, &v[2]).ok());
  EXPECT_TRUE(t.Where("where", v[2], x, v[0], &v[3]).ok());
  EXPECT_TRUE(t.Unary(OpKind::kTanh, "tanh", v[3], &v[4]).ok());
  EXPECT_TRUE(t.Cast("cast", v[1], DType::kF32, &v[5]).ok());
  EXPECT_TRUE(t.Matmul("matmul", v[4], w, &v[6]).ok());
  EXPECT_TRUE(t.Reduce(OpKind::kReduceSum, "sum", v[6], -1, true, &v[7]).ok());
  EXPECT_TRUE(t.Reduce(OpKind::kReduceMax, "max", v[6], 0, false, &v[8]).ok());
  EXPECT_TRUE(t.Reshape("reshape", v[6], {3, 2}, &v[9]).ok());
  EXPECT_TRUE(t.Transpose("transpose", v[9], {1, 0}, &v[10]).ok());
  EXPECT_TRUE(t.Slice("slice", v[10], {0, 1}, {2, 3}, &v[11]).ok());
  EXPECT_TRUE(t.Concat("concat", {v[11], v[11], v[10]}, 1, &v[12]).ok());
  EXPECT_TRUE(t.Gather("gather", v[5], idx, &v[13]).ok());
  EXPECT_TRUE(RecordOp(t, {OpKind::kCausalMask, "mask", {}, {3, 5, 2, static_cast<int>(DType::kF32)}},
                       &v[14]).ok());
  EXPECT_TRUE(Softmax(t, "softmax", v[14], -1, &v[15]).ok());
  EXPECT_TRUE(GeluTanh(t, "gelu", v[12], &v[16]).ok());
  EXPECT_TRUE(t.End("end", {v[16], v[13], v[7], v[8], v[15], v[16]}).ok());
  return t;
}

TEST(TraceBytes, RoundTripKeepsEveryNode) {
  const Trace t = EveryKindOfNode();
  Trace back("");
  ASSERT_OK(Trace::Deserialize(t.Serialize(), &back));
  EXPECT_TRUE(back.ended());
  EXPECT_EQ(back.name(), "every kind");
  EXPECT_EQ(back.Fingerprint(), t.Fingerprint());
  EXPECT_EQ(back.inputs(), t.inputs());
  EXPECT_EQ(back.outputs(), t.outputs());
  ASSERT_EQ(back.size(), t.size());
  for (ValueId v = 0; v < t.size(); ++v) {  // the fingerprint hashes constants: compare them
    EXPECT_EQ(back.node(v).data, t.node(v).data) << "node " << v;
    EXPECT_EQ(back.node(v).weak, t.node(v).weak) << "node " << v;
  }
  EXPECT_EQ(back.Serialize(), t.Serialize());
}

TEST(TraceBytes, EveryTruncationIsRefused) {
  const std::string bytes = EveryKindOfNode().Serialize();
  for (size_t n = 0; n < bytes.size(); ++n) {
    Trace back("");
    EXPECT_FALSE(Trace::Deserialize(bytes.substr(0, n), &back).ok()) << n << " bytes";
  }
  Trace back("");
  EXPECT_FALSE(Trace::Deserialize(bytes + "x", &back).ok()) << "a trailing byte";
}

TEST(TraceBytes, AnOperandDefinedLaterIsRefused) {
  Trace t("forward");
  ValueId x, y;
  ASSERT_OK(t.Input("in", DType::kF32, {2}, &x));
  ASSERT_OK(t.Unary(OpKind::kNeg, "neg", x, &y));
  ASSERT_OK(t.End("end", {y}));
  std::string bytes = t.Serialize();
  // The 8-byte fields before node 1's operand: the format, the name (length, 7 bytes), the
  // node count; node 0 (kind, dtype, rank, 1 dim, operand count, int count, scalar, weak,
  // input index, data length); node 1's kind, dtype, rank, dim and operand count.
  const size_t at = 8 + 8 + 7 + 8 + 10 * 8 + 5 * 8;
  ASSERT_EQ(bytes[at], 0);  // it names node 0
  bytes[at] = 1;            // now node 1 itself
  Trace back("");
  const Status s = Trace::Deserialize(bytes, &back);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("malformed"), std::string::npos) << s.message();
}

TEST(CompilerProtocol, CompileRequestRoundTrip) {
  CompileOptions options;
  options.target = static_cast<TargetKind>(kNumTargetKinds - 1);
  options.optimize = false;
  options.opt_level = 1;
  options.SetOption("some_option", 80);
  options.SetOption("another", -8);
  const Trace t = EveryKindOfNode();
  Trace back("");
  CompileOptions got;
  ASSERT_OK(DecodeCompileRequest(EncodeCompileRequest(t, options), &back, &got));
  EXPECT_EQ(back.Fingerprint(), t.Fingerprint());
  EXPECT_EQ(static_cast<int>(got.target), static_cast<int>(options.target));
  EXPECT_EQ(got.optimize, options.optimize);
  EXPECT_EQ(got.opt_level, options.opt_level);
  EXPECT_EQ(got.target_options, options.target_options);
}

std::unique_ptr<Program> SomeProgram() {
  auto program = std::make_unique<Program>();
  Program &p = *program;
  p.inputs = {{DType::kF32, {2, 3}}, {DType::kI64, {4}}};
  p.outputs = {{DType::kF64, {3}}};
  p.gather_checks = {{1, 7}};
  p.temporary_bytes = 4096;
  p.stage(Stage::kTraced) = "module { traced }";
  p.stage(Stage::kLlvmIr) = "define void @kernel() { ret void }";
  p.object_code = std::string("\x7f" "ELF object bytes", 17);
  p.device = "cpu";
  for (int i = 0; i < kNumCompilePhases; ++i) p.phase_seconds[i] = 0.25 * (i + 1);
  return program;
}

TEST(CompilerProtocol, ProgramReplyRoundTrip) {
  const std::unique_ptr<Program> program = SomeProgram();
  const Program &p = *program;
  const std::string bytes = EncodeProgramReply(Status::Ok(), &p);
  Status status(StatusCode::kCompile, "not set");
  std::unique_ptr<Program> back;
  ASSERT_TRUE(DecodeProgramReply(bytes, &status, &back));
  ASSERT_OK(status);
  ASSERT_TRUE(back);
  EXPECT_EQ(SerializeProgram(*back), SerializeProgram(p));
  EXPECT_EQ(back->phase_seconds, p.phase_seconds);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(DecodeProgramReply(bytes.substr(0, n), &status, &back)) << n << " bytes";
}

TEST(CompilerProtocol, AFailedCompileKeepsItsStatus) {
  const std::string bytes =
      EncodeProgramReply(CompileError("kernel: 'linalg.matmul' op failed to verify"), nullptr);
  Status status;
  std::unique_ptr<Program> back;
  ASSERT_TRUE(DecodeProgramReply(bytes, &status, &back));
  EXPECT_EQ(status.code(), StatusCode::kCompile);
  EXPECT_EQ(status.message(), "kernel: 'linalg.matmul' op failed to verify");
  EXPECT_FALSE(back);
  std::string text;
  ASSERT_TRUE(DecodeTextReply(EncodeTextReply(Unsupported("no"), "ignored"), &status, &text));
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  ASSERT_TRUE(DecodeTextReply(EncodeTextReply(Status::Ok(), "ret"), &status, &text));
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(text, "ret");
}

TEST(CompilerProtocol, StatusAndSymbolsRoundTrip) {
  Status status;
  ASSERT_OK(DecodeStatus(EncodeStatus(Unsupported("cannot load")), &status));
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_EQ(status.message(), "cannot load");
  const DeviceSymbols sent = {{"one", {"expf", "tm_rt_gemm"}}, {"two", {"mgpuLaunchKernel"}},
                              {"three", {}}};
  DeviceSymbols got;
  ASSERT_OK(DecodeSymbols(EncodeSymbols(sent), &got));
  EXPECT_EQ(got, sent);
  EXPECT_FALSE(DecodeStatus(EncodeStatus(Unsupported("x")) + "!", &status).ok());
}

struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
  ~SocketPair() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  void Close(int i) {
    close(fd[i]);
    fd[i] = -1;
  }
};

TEST(CompilerProtocol, MessagesOverASocket) {
  SocketPair pair;
  const std::string big(1 << 20, 'x');  // more than a socket buffer: written in pieces
  std::thread writer([&] {
    EXPECT_TRUE(WriteMessage(pair.fd[0], MessageKind::kCompile, big).ok());
    EXPECT_TRUE(WriteMessage(pair.fd[0], MessageKind::kReply, "").ok());
  });
  MessageKind kind;
  std::string body;
  bool closed = true;
  ASSERT_OK(ReadMessage(pair.fd[1], &kind, &body, &closed));
  EXPECT_EQ(kind, MessageKind::kCompile);
  EXPECT_EQ(body, big);
  EXPECT_FALSE(closed);
  ASSERT_OK(ReadMessage(pair.fd[1], &kind, &body, &closed));
  EXPECT_EQ(kind, MessageKind::kReply);
  EXPECT_EQ(body, "");
  writer.join();
}

// One ReadMessage on the reading end of `pair`: its status, whether the peer closed before
// a byte, and the body buffer it left.
struct Received {
  Status status;
  bool closed;
  std::string body;
};
Received ReadOne(const SocketPair &pair, bool closed_before) {
  Received r{Status::Ok(), closed_before, std::string()};
  MessageKind kind;
  r.status = ReadMessage(pair.fd[1], &kind, &r.body, &r.closed);
  return r;
}

TEST(CompilerProtocol, APeerThatClosesIsAnErrorNotASignal) {
  {  // closed before a message: an orderly end
    SocketPair pair;
    pair.Close(0);
    const Received r = ReadOne(pair, false);
    EXPECT_FALSE(r.status.ok());
    EXPECT_TRUE(r.closed);
  }
  {  // closed in the middle of a message: torn
    SocketPair pair;
    ASSERT_EQ(write(pair.fd[0], "\x05\0\0\0", 4), 4);
    pair.Close(0);
    const Received r = ReadOne(pair, true);
    EXPECT_FALSE(r.status.ok());
    EXPECT_FALSE(r.closed);
  }
  {  // a header naming no kind of message
    SocketPair pair;
    const std::string header(16, '\x09');
    ASSERT_EQ(write(pair.fd[0], header.data(), header.size()), 16);
    const Status s = ReadOne(pair, true).status;
    EXPECT_NE(s.message().find("malformed message header"), std::string::npos) << s.message();
  }
  {  // a header claiming 32 GiB, then nothing: refused as the bytes fail to come, without
     // allocating what the header claims
    SocketPair pair;
    const uint64_t header[2] = {static_cast<uint64_t>(MessageKind::kReply), uint64_t{1} << 35};
    ASSERT_EQ(write(pair.fd[0], header, sizeof header), 16);
    ASSERT_EQ(write(pair.fd[0], "abc", 3), 3);
    pair.Close(0);
    const Received r = ReadOne(pair, true);
    EXPECT_FALSE(r.status.ok());
    EXPECT_LE(r.body.capacity(), size_t{4} << 20);
  }
  {  // writing to a peer that has gone: EPIPE, and this process lives (no SIGPIPE)
    SocketPair pair;
    pair.Close(1);
    const Status s = WriteMessage(pair.fd[0], MessageKind::kCompile, std::string(1 << 20, 'x'));
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("Broken pipe"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace tinymlir
