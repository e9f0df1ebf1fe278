// libFuzzer target: the C API of tinymlir as a state machine.
//
// A byte string is decoded into a sequence of tm_op_* calls on one trace (values chosen
// among those created so far, or from nowhere), then tm_trace_end, tm_compile and tm_invoke
// on buffers generated deterministically from the input. A reference interpreter
// (reference_interpreter.h) follows the same calls and predicts each outcome from the
// header's documented semantics. The target aborts (a libFuzzer crash) when
//   - a call's status is not one the header allows for that call (success where it must
//     fail, failure where it must succeed, a status the header does not name);
//   - a failing call leaves tm_last_error() empty or unchanged, or writes an output;
//     a successful call changes tm_last_error();
//   - anything is printed to stderr during a library call;
//   - tm_value_type or a program's input/output types disagree with the reference;
//   - tm_invoke writes its inputs, writes an output's padding, or (on failure) any output;
//   - a result differs from the reference beyond the stated tolerance;
// and of course on any crash, hang, leak or sanitizer report.
//
// The byte format is described in tests/fuzz/README.md ("C API target").
//
// Environment: TM_FUZZ_VERBOSE=1 prints every call; TM_FUZZ_NO_CAPTURE=1 leaves stderr alone
// (to see what the library printed before a crash); TM_FUZZ_STATS=1 prints, at exit, how
// often each open point of the header was met; TM_FUZZ_NUMPY_STRICT=1 expects NumPy's
// answer where the library is known to differ. TM_FUZZ_TARGET=gpu compiles every program for
// the GPU target with its kernels emulated on the CPU and checked for races
// (TINYMLIR_GPU_EMULATE=1, core/targets/gpu/compile/gpu_emulation.h): the same checks, on the GPU lowering.
// TM_FUZZ_TARGET=gpu-host compiles them for the GPU for real and runs them against the fake
// CUDA driver (tests/gpu/fake_cuda_driver.cpp, first on LD_LIBRARY_PATH): no kernel runs
// there, so no result is compared, but the host side is checked on every program: statuses,
// stderr, the bytes written, the driver's checks of each launch (refused: the invoke fails),
// and the host code's accesses to memory a queued kernel was given (they fault).
#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "reference_interpreter.h"
#include "tinymlir/tinymlir.h"

namespace {

using tmref::Bit;
using tmref::El;
using tmref::Expect;
using tmref::Op;
using tmref::Shape;
using tmref::Tensor;
using tmref::Type;

// ---- process-wide setup: stderr capture --------------------------------------------------

struct Global {
  int out = 2;            // where this target reports (the real stderr)
  int quiet = -1;         // what fd 2 is between library calls
  int capture = -1;       // memfd that receives fd 2 during library calls
  bool verbose = false;
  tmref::Semantics sem;
  // The options of a compile that names none: NULL (the defaults), or the GPU target.
  const tm_compile_options *defaults = nullptr;
  tm_compile_options gpu_options;
  bool results_unchecked = false;  // gpu-host: the fake driver runs no kernel
  long runs = 0, compiled = 0, invoked = 0, compared = 0, dont_care = 0;
  std::map<std::string, long> checked_ops;  // ops of programs whose results were compared
  std::map<std::string, long> cells;        // op x parameter cells of compared values
} G;

void Print(const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  ssize_t w = write(G.out, buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
  (void)w;
}

void PrintLong(const std::string &s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t w = write(G.out, s.data() + done, s.size() - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
}

void PrintStats() {
  Print("\ncapi_fuzz: %ld inputs, %ld compiled, %ld invoked, %ld elements compared, %ld don't care\n",
        G.runs, G.compiled, G.invoked, G.compared, G.dont_care);
  Print("live ops of programs whose results were compared:\n");
  for (const auto &[what, n] : G.checked_ops) Print("  %8ld  %s\n", n, what.c_str());
  Print("open points and tolerated disagreements met:\n");
  for (const auto &[what, n] : tmref::Hits()) Print("  %8ld  %s\n", n, what.c_str());
}

void BeginCapture() {
  if (G.capture < 0) return;
  if (G.quiet < 0) G.quiet = dup(2);
  if (ftruncate(G.capture, 0) != 0 || lseek(G.capture, 0, SEEK_SET) != 0) return;
  dup2(G.capture, 2);
}

void EndCapture() {
  if (G.capture < 0 || G.quiet < 0) return;
  dup2(G.quiet, 2);
}

// What the library wrote to stderr since BeginCapture ("" if nothing).
std::string Captured() {
  if (G.capture < 0) return "";
  off_t n = lseek(G.capture, 0, SEEK_END);
  if (n <= 0) return "";
  std::string s(static_cast<size_t>(std::min<off_t>(n, 4000)), '\0');
  ssize_t r = pread(G.capture, s.data(), s.size(), 0);
  s.resize(r > 0 ? static_cast<size_t>(r) : 0);
  return s;
}

// ---- input bytes and data ------------------------------------------------------------------

struct Reader {
  const uint8_t *p;
  size_t n, pos = 0;
  bool empty() const { return pos >= n; }
  uint8_t Byte() { return pos < n ? p[pos++] : 0; }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | Byte();
    return v;
  }
};

struct Rng {
  uint64_t s;
  uint64_t Next() {  // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t Below(uint32_t n) { return n ? static_cast<uint32_t>(Next() % n) : 0; }
};

constexpr int kSentinelOp = 987654;  // see Call
constexpr tm_value kUnwritten = 0x000abcdeu;  // tag 0: never a value of a trace

const char *StatusName(int s) { return s == 0 ? "TM_OK" : tm_status_string(static_cast<tm_status>(s)); }

std::string Mask(uint32_t m) {
  std::string r;
  if (m == tmref::kAnyError) return "any error";
  for (int s = 1; s <= 10; ++s)
    if (m & Bit(s)) r += (r.empty() ? "" : "|") + std::string(StatusName(s));
  return r;
}

std::string TypeStr(int dtype, int rank, const int64_t *shape) {
  std::string s = tmref::ValidDtype(dtype) ? tmref::DtypeName(dtype) : "dtype" + std::to_string(dtype);
  s += "(";
  for (int i = 0; i < rank; ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + (rank == 1 ? ",)" : ")");
}

// A value the fuzzer may pass: the library's id and the reference's (-1: not of this trace).
struct Val {
  tm_value lib;
  int ref;
};

// ---- one input -----------------------------------------------------------------------------

// Opcodes (byte % kNumOps).
enum Opcode {
  kInput, kInput2, kScalar, kConstant,
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum, kLess, kGreater, kEqual, kWhere,
  kUnary, kUnary2, kUnary3,  // three draws, as the eight named unary ops had before
  kMatmul, kSum, kRMax, kMean, kVar, kReshape, kTranspose, kSlice, kConcat, kGather, kCast,
  kSoftmax, kLayerNorm, kGelu, kCausalMask, kMisuse, kQueryType, kStop,
  kNumOps
};

// Limits that keep one input cheap.
constexpr int kMaxOps = 24;
constexpr int64_t kMaxInvokeElements = 1 << 17;  // per value
constexpr int64_t kMaxTotalElements = 1 << 19;   // all live values (and matmul terms)

class Runner {
 public:
  Runner(const uint8_t *data, size_t size) : rd_{data, size}, prog_(G.sem) {}
  ~Runner() {
    for (tm_program *p : programs_) tm_program_release(p);
    tm_trace_destroy(other_);
    tm_trace_destroy(trace_);
    tm_context_release(ctx_);
  }

  void Run() {
    flags_ = rd_.Byte();
    uint8_t s0 = rd_.Byte(), s1 = rd_.Byte();
    seed_ = (static_cast<uint64_t>(s0) << 8 | s1) * 0x100000001b3ull + 1;
    Must(Call("tm_context_create", [&] { return tm_context_create(&ctx_); }), "tm_context_create");
    const char *name = (flags_ & 0x40) ? nullptr : "fuzz";
    Must(Call("tm_trace_begin", [&] { return tm_trace_begin(ctx_, name, &trace_); }), "tm_trace_begin");
    for (int n = 0; n < kMaxOps && !rd_.empty(); ++n)
      if (!Step()) break;
    End();
    if (ended_) AfterEnd();
    if (ended_ && CompileWanted()) CompileAndInvoke();
    if (!ended_) {
      // A trace that has not ended cannot be compiled.
      tm_program *p = Unwritten<tm_program>();
      tm_status s = Call("tm_compile", [&] { return tm_compile(ctx_, trace_, nullptr, &p); });
      Check(s, Only(tmref::kInvalid), "tm_compile of a trace that has not ended");
      if (p != Unwritten<tm_program>()) Violation("tm_compile wrote *out on failure");
    }
  }

 private:
  template <typename T>
  static T *Unwritten() { return reinterpret_cast<T *>(static_cast<uintptr_t>(0xdeadbeefull)); }
  static Expect Only(int status) {
    Expect e;
    e.Fail(Bit(status), "");
    return e;
  }

  // ---- coverage: the op x parameter cells of each value (CoverageReport) -------------

  // The cells every value of op `id` counts for: the op with its operand's dtype (a cast with
  // both), and whether an operand (or the result, for ops without operands) has an empty or
  // a size-1 dimension.
  std::vector<std::string> CellsOf(int id) const {
    const tmref::Node &n = prog_.node(id);
    const std::string op = tmref::OpName(n.op);
    std::vector<std::string> cells;
    auto dt = [&](int v) { return std::string(tmref::DtypeName(prog_.type(v).dtype)); };
    if (n.op == Op::kCast) {
      cells.push_back("cast " + dt(n.args[0]) + " -> " + tmref::DtypeName(n.type.dtype));
    } else if (n.op == Op::kGather) {
      cells.push_back("gather table " + dt(n.args[0]));
      cells.push_back("gather indices " + dt(n.args[1]));
    } else if (n.op == Op::kWhere) {
      cells.push_back("where " + dt(n.args[1]));
    } else {
      cells.push_back(op + " " + (n.args.empty() ? std::string(tmref::DtypeName(n.type.dtype)) : dt(n.args[0])));
    }
    std::vector<const Type *> shapes;
    for (int a : n.args) shapes.push_back(&prog_.type(a));
    if (shapes.empty()) shapes.push_back(&n.type);
    bool empty = false, one = false;
    for (const Type *t : shapes)
      for (int64_t d : t->shape) {
        empty |= d == 0;
        one |= d == 1;
      }
    if (empty) cells.push_back(op + " empty");
    if (one) cells.push_back(op + " size-1");
    return cells;
  }

  // An axis cell ("reduce_sum axis -2 of rank 3") for the next op, when the axis is valid.
  void AxisCells(const char *op, int32_t axis, int rank) {
    if (rank >= 1 && axis >= -rank && axis < rank)
      next_cells_.push_back(std::string(op) + " axis " + std::to_string(axis) + " of rank " +
                            std::to_string(rank));
  }

  // ---- reporting -------------------------------------------------------------------------

  void Log(const std::string &s) {
    log_ += s;
    log_ += '\n';
    if (G.verbose) Print("%s\n", s.c_str());
  }

  [[noreturn]] void Violation(const std::string &what) {
    EndCapture();
    std::string msg = "\n==== tinymlir C API fuzzer: VIOLATION ====\n" + what + "\n";
    std::string err = Captured();
    if (!err.empty()) msg += "---- the library printed to stderr:\n" + err + "\n";
    msg += "---- calls so far:\n" + log_ + "====\n";
    PrintLong(msg);
    abort();
  }

  // Runs one library call: checks the last-error protocol and that nothing was printed.
  template <typename F>
  tm_status Call(const char *what, F &&f) {
    // A failure no drawn call makes (an op value far beyond the table) first: a successful
    // call must leave its message as it is, a failing one must replace it.
    (void)tm_op_unary(nullptr, static_cast<tm_unary_op>(kSentinelOp), 0, nullptr);
    const std::string sentinel = tm_last_error();
    tm_status s = f();
    const char *msg = tm_last_error();
    if (!msg) Violation(std::string(what) + ": tm_last_error() returned NULL");
    if (s == TM_OK) {
      if (sentinel != msg)
        Violation(std::string(what) + " succeeded but changed tm_last_error() to \"" + msg + "\"");
    } else {
      if (!*msg) Violation(std::string(what) + " failed with an empty tm_last_error()");
      if (sentinel == msg)
        Violation(std::string(what) + " failed (" + StatusName(s) + ") without setting tm_last_error()");
      last_msg_ = msg;
    }
    if (static_cast<int>(s) < 0 || static_cast<int>(s) > 10)
      Violation(std::string(what) + " returned an unknown status " + std::to_string(s));
    std::string err = Captured();
    if (!err.empty()) Violation(std::string(what) + " printed to stderr");
    return s;
  }

  void Must(tm_status s, const char *what) {
    if (s != TM_OK) Violation(std::string(what) + " failed: " + StatusName(s) + ": " + last_msg_);
  }

  // Checks a status against an expectation.
  void Check(tm_status s, const Expect &ex, const std::string &call) {
    if (ex.Allows(s)) return;
    std::string want = ex.may_succeed ? "TM_OK" : "";
    if (ex.errors) want += (want.empty() ? "" : " or ") + Mask(ex.errors);
    Violation(call + " returned " + StatusName(s) + (s ? ": " + last_msg_ : "") + "\n  expected " +
              want + (ex.why.empty() ? "" : " (" + ex.why + ")"));
  }

  // ---- values ----------------------------------------------------------------------------

  std::string Name(const Val &v) const {
    if (v.ref < 0) return "bogus(0x" + Hex(v.lib) + ")";
    return "%" + std::to_string(v.ref);
  }
  static std::string Hex(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRIx64, v);
    return b;
  }

  // A value that is not of this trace.
  Val Bogus(uint8_t sel) {
    uint32_t tag = vals_.empty() ? 0 : vals_.back().lib >> 20;
    if (sel >= 0xfc && !vals_.empty()) {  // a value of another trace
      if (!other_) {
        Must(Call("tm_trace_begin", [&] { return tm_trace_begin(ctx_, "other", &other_); }), "tm_trace_begin");
        Must(Call("tm_op_input", [&] { return tm_op_input(other_, TM_F32, 0, nullptr, &other_value_); }),
             "tm_op_input");
      }
      if ((other_value_ >> 20) != tag) return {other_value_, -1};
    }
    if (sel >= 0xf8 && tag) return {tag << 20 | ((1u << 20) - 1 - (sel & 3)), -1};  // past the end
    uint32_t r = rd_.U32();
    if ((r >> 20) == tag) r ^= 0x80000000u;
    if ((r >> 20) == tag) r ^= 0x40000000u;
    return {r, -1};
  }

  // Picks a value: sel >= 0xf0 is a value from nowhere; sel < 0x80 prefers values that
  // satisfy `good` (most recent first), else any value.
  Val Pick(const std::function<bool(const Type &)> &good = nullptr) {
    uint8_t sel = rd_.Byte();
    if (vals_.empty() || sel >= 0xf0) return Bogus(sel);
    if (sel < 0x80 && good) {
      std::vector<size_t> ok;
      for (size_t i = 0; i < vals_.size(); ++i)
        if (good(prog_.type(vals_[i].ref))) ok.push_back(i);
      if (!ok.empty()) return vals_[ok[ok.size() - 1 - sel % ok.size()]];
    }
    return vals_[vals_.size() - 1 - (sel & 0x7f) % vals_.size()];
  }

  const Type *TypeOf(const Val &v) const { return v.ref < 0 ? nullptr : &prog_.type(v.ref); }

  // ---- decoding helpers ----------------------------------------------------------------

  int Dtype() {
    static const int table[16] = {TM_F32, TM_F32, TM_F32, TM_F32, TM_F64, TM_F64, TM_I32, TM_I32,
                                  TM_I64, TM_I64, TM_BOOL, TM_BOOL, TM_F32, TM_F64, 0, 0};
    uint8_t b = rd_.Byte();
    int d = table[b % 16];
    if (d) return d;
    // The storage types, and values no tm_dtype has.
    if (b % 16 == 14) return (b >> 4) & 1 ? TM_BF16 : TM_F16;
    static const int invalid[8] = {0, 11, -1, 255, INT32_MAX, INT32_MIN, 9, 100};
    return invalid[(b >> 4) % 8];
  }

  // Mostly 1..5, sometimes 0, sometimes past the vector widths (8, 16) of the kernels.
  int64_t Dim() {
    static const int64_t table[32] = {1, 2, 3, 4, 2, 3, 1, 4, 0, 2, 3, 1, 5, 2, 1, 3,
                                      1, 2, 3, 4, 6, 7, 8, 9, 16, 17, 1, 2, 3, 4, 33, 5};
    return table[rd_.Byte() % 32];
  }
  // Sizes for matrix-vector products (the GEMV kernels work in blocks of 8 and 16 and
  // split products of 65536 elements and more across threads).
  int64_t BigDim() {
    static const int64_t table[16] = {1, 8, 9, 16, 17, 31, 32, 33, 64, 65, 256, 257, 1, 24, 255, 128};
    return table[rd_.Byte() % 16];
  }

  // A shape for an input/constant: fresh, like/broadcastable with/matmul partner of an
  // existing value, or invalid. *rank_out may be outside 0..8 and *null_shape asks for NULL.
  Shape GenShape(int *rank_out, bool *null_shape) {
    uint8_t mode = rd_.Byte();
    *null_shape = false;
    Shape s;
    const Type *ref = nullptr;
    if (!vals_.empty() && mode % 8 >= 3 && mode % 8 <= 5) {
      Val v = vals_[vals_.size() - 1 - rd_.Byte() % vals_.size()];
      ref = TypeOf(v);
    }
    switch (mode % 8) {
      case 2:  // matrix/vector shapes for products: (1,k), (k,n), (m,k), (k,)
        switch (rd_.Byte() % 4) {
          case 0: s = {1, BigDim()}; break;
          case 1: s = {BigDim(), BigDim()}; break;
          case 2: s = {BigDim(), 1}; break;
          case 3: s = {BigDim()}; break;
        }
        break;
      case 3:  // same shape
        if (ref) { s = ref->shape; break; }
        [[fallthrough]];
      case 0: case 1: {
        int rank = rd_.Byte() % 4;
        for (int i = 0; i < rank; ++i) s.push_back(Dim());
        break;
      }
      case 4: {  // broadcastable with ref: drop leading dims, set some to 1
        if (!ref) { s = {Dim()}; break; }
        uint8_t m = rd_.Byte();
        size_t drop = m % (ref->shape.size() + 1);
        s.assign(ref->shape.begin() + static_cast<long>(drop), ref->shape.end());
        for (size_t i = 0; i < s.size(); ++i)
          if ((m >> (2 + i)) & 1) s[i] = 1;
        break;
      }
      case 5: {  // right operand of a matmul with ref
        if (!ref || ref->rank() < 2) { s = {Dim(), Dim()}; break; }
        uint8_t m = rd_.Byte();
        int64_t n = m & 2 ? BigDim() : Dim();
        if (m & 1 || ref->rank() == 2) s = {ref->shape.back(), n};
        else {
          s.assign(ref->shape.begin(), ref->shape.end() - 2);
          s.push_back(ref->shape.back());
          s.push_back(n);
        }
        break;
      }
      case 6: {  // a table for gather, or indices
        s = {Dim() + 1, Dim()};
        if (rd_.Byte() & 1) s.resize(1);
        break;
      }
      case 7: {  // invalid (or big)
        uint8_t m = rd_.Byte();
        switch (m % 6) {
          case 0: *rank_out = 9; s.assign(9, 1); return s;
          case 1: *rank_out = -1; return s;
          case 2: s = {2, -1}; break;
          case 3: s = {int64_t{1} << 62, 4}; break;  // too many elements
          case 4: *rank_out = 2; *null_shape = true; return {2, 2};
          case 5: s = {INT64_MIN}; break;
        }
        break;
      }
    }
    *rank_out = static_cast<int>(s.size());
    return s;
  }

  double ScalarValue() {
    static const double table[32] = {
        0, 1, -1, 2, 0.5, -0.5, 3, -3, 0.1, 1e-3, 100, -2.5, 2.7, 65536, 1e10, 3e9, -3e9,
        2147483647.0, 2147483648.0, -2147483649.0, 9.3e18, NAN, INFINITY, -INFINITY, 1e300,
        -0.0, 1e-40, 0.044715, 7, 10, 1e-5, 4};
    return table[rd_.Byte() % 32];
  }

  // An axis for a value of rank `rank`: mostly in [-rank, rank), sometimes not.
  int32_t Axis(int rank) {
    uint8_t b = rd_.Byte();
    if (b < 0xf0) return rank > 0 ? static_cast<int32_t>(b % (2 * rank)) - rank : static_cast<int32_t>(b % 3) - 1;
    static const int32_t wild[8] = {100, -100, INT32_MAX, INT32_MIN, 3, -4, 4, -5};
    return wild[b % 8];
  }
  int RankOf(const Val &v) const { return v.ref < 0 ? 2 : prog_.type(v.ref).rank(); }

  // Fills `n` elements of dtype `d` (deterministic from the seed).
  static void FillData(Rng &rng, int d, void *dst, int64_t n, bool specials) {
    for (int64_t k = 0; k < n; ++k) {
      uint32_t pick = rng.Below(64);
      if (tmref::IsFloat(d)) {
        double v;
        if (specials && pick < 3) {
          // ..., then the edges of the half types: f16's largest finite value, the midpoint
          // above it (rounds to infinity), its smallest normal and subnormal values.
          static const double sp[12] = {NAN, INFINITY, -INFINITY, -0.0, 1e30, -1e30, 3e38, 1e-39,
                                        65504.0, 65520.0, 0x1p-14, 0x1p-24};
          v = sp[rng.Below(12)];
        } else if (pick >= 40 && pick < 48) {
          // Multiples of 2^-12 in [-2, 2): exact in f32, and often halfway between two f16
          // or bf16 values, where a cast must round to even.
          v = (static_cast<double>(rng.Below(1 << 14)) - 8192) / 4096;
        } else if (pick < 6) {
          v = 0;
        } else if (pick < 14) {
          v = (static_cast<double>(rng.Below(2001)) - 1000) / 8;  // [-125, 125]
        } else if (pick < 18) {
          v = (static_cast<double>(rng.Below(2001)) - 1000) * 1e-6;
        } else {
          v = (static_cast<double>(rng.Below(513)) - 256) / 64;  // [-4, 4]
        }
        if (d == tmref::kF64 && pick >= 18 && pick < 40) v += static_cast<double>(rng.Below(1000)) * 1e-10;
        if (d == tmref::kF32) {
          float f = static_cast<float>(v);
          std::memcpy(static_cast<char *>(dst) + k * 4, &f, 4);
        } else if (tmref::IsHalf(d)) {
          // Specials past the half range become infinities (or subnormals, zeros).
          uint16_t h = tmref::RoundHalfBits(d, static_cast<float>(v));
          std::memcpy(static_cast<char *>(dst) + k * 2, &h, 2);
        } else {
          std::memcpy(static_cast<char *>(dst) + k * 8, &v, 8);
        }
      } else if (d == tmref::kBool) {
        static_cast<uint8_t *>(dst)[k] = static_cast<uint8_t>(rng.Below(2));
      } else {
        int64_t v = static_cast<int64_t>(rng.Below(13)) - 6;
        if (specials && pick < 3) {
          static const int64_t sp[6] = {INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, 1 << 20, -(1 << 20)};
          v = sp[rng.Below(6)];
        } else if (pick < 6) {
          v = static_cast<int64_t>(rng.Below(201)) - 100;
        }
        if (d == tmref::kI32) {
          int32_t i = static_cast<int32_t>(v);
          std::memcpy(static_cast<char *>(dst) + k * 4, &i, 4);
        } else {
          std::memcpy(static_cast<char *>(dst) + k * 8, &v, 8);
        }
      }
    }
  }

  // ---- recording one op --------------------------------------------------------------------

  // Calls `call(&out)` and checks it against `ex`; on success adds the value.
  void Record(const std::string &desc, const Expect &ex, const std::function<tm_status(tm_value *)> &call) {
    tm_value out = kUnwritten;
    tm_status s = Call(desc.c_str(), [&] { return call(&out); });
    std::string line = desc + " -> " + StatusName(s);
    if (s != TM_OK) line += " (" + last_msg_ + ")";
    Log(line);
    Check(s, ex, desc);
    if (s != TM_OK) {
      next_cells_.clear();
      if (out != kUnwritten) Violation(desc + " failed but wrote *out");
      return;
    }
    int ref = prog_.Commit();
    Val v{out, ref};
    vals_.push_back(v);
    cells_[ref] = CellsOf(ref);
    for (std::string &c : next_cells_) cells_[ref].push_back(std::move(c));
    next_cells_.clear();
    log_.back() = ' ';
    Log("   = %" + std::to_string(ref) + " " + ex.type.str());
    // The library's type of the new value.
    tm_dtype dt = static_cast<tm_dtype>(-7);
    int32_t rank = -7;
    int64_t shape[TM_MAX_RANK];
    Must(Call("tm_value_type", [&] { return tm_value_type(trace_, out, &dt, &rank, shape); }), "tm_value_type");
    const Type &t = ex.type;
    bool same = dt == t.dtype && rank == t.rank();
    for (int i = 0; same && i < rank; ++i) same = shape[i] == t.shape[static_cast<size_t>(i)];
    if (!same)
      Violation(desc + ": tm_value_type gives " + TypeStr(dt, rank, shape) + ", the reference " + t.str());
  }

  // Calls the same op with out == NULL or trace == NULL: INVALID_ARGUMENT, nothing written.
  void Misuse() {
    uint8_t m = rd_.Byte();
    Val a = Pick(), b = Pick();
    tm_value out = kUnwritten;
    tm_status s;
    switch (m % 8) {
      case 0: s = Call("tm_op_add(out NULL)", [&] { return tm_op_add(trace_, a.lib, b.lib, nullptr); }); break;
      case 1: s = Call("tm_op_exp(trace NULL)", [&] { return tm_op_exp(nullptr, a.lib, &out); }); break;
      case 2: s = Call("tm_op_input(out NULL)", [&] { return tm_op_input(trace_, TM_F32, 0, nullptr, nullptr); }); break;
      case 3: s = Call("tm_op_constant(data NULL)", [&] { return tm_op_constant(trace_, nullptr, &out); }); break;
      case 4: s = Call("tm_op_concat(xs NULL)", [&] { return tm_op_concat(trace_, nullptr, 2, 0, &out); }); break;
      case 5: s = Call("tm_op_where(out NULL)", [&] { return tm_op_where(trace_, a.lib, a.lib, b.lib, nullptr); }); break;
      case 6: s = Call("tm_op_layer_norm(trace NULL)", [&] { return tm_op_layer_norm(nullptr, a.lib, a.lib, b.lib, 1e-5, &out); }); break;
      default: s = Call("tm_op_causal_mask(out NULL)", [&] { return tm_op_causal_mask(trace_, 2, 2, 0, TM_F32, nullptr); }); break;
    }
    Log("misuse " + std::to_string(m % 8) + " -> " + StatusName(s));
    Check(s, Only(tmref::kInvalid), "a call with a NULL trace/out/array");
    if (out != kUnwritten) Violation("a failing call wrote *out");
  }

  void QueryType() {
    Val v = Pick();
    tm_dtype dt = static_cast<tm_dtype>(-7);
    int32_t rank = -7;
    int64_t shape[TM_MAX_RANK];
    for (int64_t &d : shape) d = -7;
    tm_status s = Call("tm_value_type", [&] { return tm_value_type(trace_, v.lib, &dt, &rank, shape); });
    Log("tm_value_type(" + Name(v) + ") -> " + StatusName(s));
    if (v.ref < 0) {
      Check(s, Only(tmref::kInvalid), "tm_value_type of a value not from the trace");
      if (dt != static_cast<tm_dtype>(-7) || rank != -7 || shape[0] != -7)
        Violation("tm_value_type failed but wrote its outputs");
    } else {
      Must(s, "tm_value_type");
      // NULL outputs are allowed.
      Must(Call("tm_value_type", [&] { return tm_value_type(trace_, v.lib, nullptr, nullptr, nullptr); }),
           "tm_value_type with NULL outputs");
    }
  }

  // Decodes and runs one call; false at the opcode that ends the list of ops.
  bool Step() {
    uint8_t opcode = rd_.Byte() % kNumOps;
    switch (opcode) {
      case kStop: return false;
      case kInput:
      case kInput2: {
        int dtype = Dtype();
        int rank;
        bool null_shape;
        Shape s = GenShape(&rank, &null_shape);
        const int64_t *sp = null_shape ? nullptr : s.data();
        Expect ex = prog_.Input(dtype, rank, sp);
        Record("tm_op_input(" + TypeStr(dtype, std::max(0, std::min(rank, static_cast<int>(s.size()))), s.data()) +
                   ", rank " + std::to_string(rank) + (null_shape ? ", shape NULL)" : ")"),
               ex, [&](tm_value *o) { return tm_op_input(trace_, static_cast<tm_dtype>(dtype), rank, sp, o); });
        break;
      }
      case kScalar: {
        int dtype = Dtype();
        double v = ScalarValue();
        Expect ex = prog_.Scalar(dtype, v);
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", v);
        Record("tm_op_scalar(" + std::string(tmref::DtypeName(dtype)) + "/" + std::to_string(dtype) + ", " + buf + ")",
               ex, [&](tm_value *o) { return tm_op_scalar(trace_, static_cast<tm_dtype>(dtype), v, o); });
        break;
      }
      case kConstant: Constant(); break;
      case kAdd: case kSub: case kMul: case kDiv: case kPow: case kMaximum: case kMinimum:
      case kLess: case kGreater: case kEqual: {
        static const Op ops[] = {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kPow, Op::kMax,
                                 Op::kMin, Op::kLess, Op::kGreater, Op::kEqual};
        static tm_status (*const fns[])(tm_trace *, tm_value, tm_value, tm_value *) = {
            tm_op_add, tm_op_sub, tm_op_mul, tm_op_div, tm_op_pow, tm_op_maximum,
            tm_op_minimum, tm_op_less, tm_op_greater, tm_op_equal};
        Op op = ops[opcode - kAdd];
        auto fn = fns[opcode - kAdd];
        Val a = Pick();
        const Type *ta = TypeOf(a);
        Val b = Pick([&](const Type &t) {
          Shape s;
          return ta && tmref::Broadcast(ta->shape, t.shape, &s);
        });
        Expect ex = prog_.Binary(op, a.ref, b.ref);
        Record(std::string("tm_op_") + tmref::OpName(op) + "(" + Name(a) + ", " + Name(b) + ")", ex,
               [&](tm_value *o) { return fn(trace_, a.lib, b.lib, o); });
        break;
      }
      case kWhere: {
        Val c = Pick([](const Type &t) { return t.dtype == tmref::kBool; });
        const Type *tc = TypeOf(c);
        auto fits = [&](const Type &t) {
          Shape s;
          return tc && tmref::Broadcast(tc->shape, t.shape, &s);
        };
        Val a = Pick(fits), b = Pick(fits);
        Expect ex = prog_.Where(c.ref, a.ref, b.ref);
        Record("tm_op_where(" + Name(c) + ", " + Name(a) + ", " + Name(b) + ")", ex,
               [&](tm_value *o) { return tm_op_where(trace_, c.lib, a.lib, b.lib, o); });
        break;
      }
      case kUnary: case kUnary2: case kUnary3: {
        // Any op of the library's table (core/trace/unary_ops.def), through tm_op_unary.
        const auto &ops = tmref::UnaryRefs();
        const tmref::UnaryRef &op = ops[rd_.Byte() % ops.size()];
        Val x = Pick([](const Type &t) { return t.dtype != tmref::kBool; });
        Expect ex = prog_.Unary(op.op, x.ref);
        Record(std::string("tm_op_unary(") + op.name + ", " + Name(x) + ")", ex, [&](tm_value *o) {
          return tm_op_unary(trace_, static_cast<tm_unary_op>(op.c_value), x.lib, o);
        });
        break;
      }
      case kMatmul: {
        Val a = Pick([](const Type &t) { return t.rank() >= 2 && t.dtype != tmref::kBool; });
        const Type *ta = TypeOf(a);
        Val b = Pick([&](const Type &t) {
          if (!ta || ta->rank() < 2 || t.rank() < 2 || t.shape[t.shape.size() - 2] != ta->shape.back()) return false;
          return t.rank() == 2 || std::equal(ta->shape.begin(), ta->shape.end() - 2, t.shape.begin(), t.shape.end() - 2);
        });
        Expect ex = prog_.Matmul(a.ref, b.ref);
        Record("tm_op_matmul(" + Name(a) + ", " + Name(b) + ")", ex,
               [&](tm_value *o) { return tm_op_matmul(trace_, a.lib, b.lib, o); });
        break;
      }
      case kSum: case kRMax: case kMean: case kVar: {
        static const Op ops[] = {Op::kSum, Op::kRMax, Op::kMean, Op::kVar};
        static tm_status (*const fns[])(tm_trace *, tm_value, int32_t, int32_t, tm_value *) = {
            tm_op_reduce_sum, tm_op_reduce_max, tm_op_reduce_mean, tm_op_reduce_var};
        Op op = ops[opcode - kSum];
        auto fn = fns[opcode - kSum];
        Val x = Pick([](const Type &t) { return t.rank() >= 1 && t.dtype != tmref::kBool; });
        int32_t axis = Axis(RankOf(x));
        static const int32_t keeps[4] = {0, 1, 0, 7};
        int32_t keep = keeps[rd_.Byte() % 4];
        AxisCells(tmref::OpName(op), axis, RankOf(x));
        next_cells_.push_back(std::string(tmref::OpName(op)) + " keepdims " + (keep ? "1" : "0"));
        Expect ex = prog_.Reduce(op, x.ref, axis, keep);
        Record(std::string("tm_op_") + tmref::OpName(op) + "(" + Name(x) + ", axis " + std::to_string(axis) +
                   ", keepdims " + std::to_string(keep) + ")",
               ex, [&](tm_value *o) { return fn(trace_, x.lib, axis, keep, o); });
        break;
      }
      case kReshape: Reshape(); break;
      case kTranspose: Transpose(); break;
      case kSlice: Slice(); break;
      case kConcat: Concat(); break;
      case kGather: {
        Val t = Pick([](const Type &ty) { return ty.rank() >= 1 && ty.shape[0] > 0; });
        Val i = Pick([](const Type &ty) { return tmref::IsInt(ty.dtype); });
        Expect ex = prog_.Gather(t.ref, i.ref);
        Record("tm_op_gather(" + Name(t) + ", " + Name(i) + ")", ex,
               [&](tm_value *o) { return tm_op_gather(trace_, t.lib, i.lib, o); });
        break;
      }
      case kCast: {
        Val x = Pick();
        int dtype = Dtype();
        Expect ex = prog_.Cast(x.ref, dtype);
        Record("tm_op_cast(" + Name(x) + ", " + std::to_string(dtype) + ")", ex,
               [&](tm_value *o) { return tm_op_cast(trace_, x.lib, static_cast<tm_dtype>(dtype), o); });
        break;
      }
      case kSoftmax: {
        Val x = Pick([](const Type &t) { return tmref::IsFloat(t.dtype) && t.rank() >= 1; });
        int32_t axis = Axis(RankOf(x));
        AxisCells("softmax", axis, RankOf(x));
        Expect ex = prog_.Softmax(x.ref, axis);
        Record("tm_op_softmax(" + Name(x) + ", axis " + std::to_string(axis) + ")", ex,
               [&](tm_value *o) { return tm_op_softmax(trace_, x.lib, axis, o); });
        break;
      }
      case kLayerNorm: {
        Val x = Pick([](const Type &t) { return tmref::IsFloat(t.dtype) && t.rank() >= 1; });
        const Type *tx = TypeOf(x);
        auto fits = [&](const Type &t) {
          Shape s;
          return tx && tmref::Broadcast(tx->shape, t.shape, &s) && s == tx->shape;
        };
        Val g = Pick(fits), b = Pick(fits);
        static const double eps_table[8] = {1e-5, 0, 1e-3, 0.1, 1, -1e-5, NAN, INFINITY};
        double eps = eps_table[rd_.Byte() % 8];
        Expect ex = prog_.LayerNorm(x.ref, g.ref, b.ref, eps);
        char buf[32];
        snprintf(buf, sizeof buf, "%g", eps);
        Record("tm_op_layer_norm(" + Name(x) + ", " + Name(g) + ", " + Name(b) + ", " + buf + ")", ex,
               [&](tm_value *o) { return tm_op_layer_norm(trace_, x.lib, g.lib, b.lib, eps, o); });
        break;
      }
      case kGelu: {
        Val x = Pick([](const Type &t) { return tmref::IsFloat(t.dtype); });
        Expect ex = prog_.Gelu(x.ref);
        Record("tm_op_gelu_tanh(" + Name(x) + ")", ex, [&](tm_value *o) { return tm_op_gelu_tanh(trace_, x.lib, o); });
        break;
      }
      case kCausalMask: {
        static const int64_t sizes[16] = {0, 1, 2, 3, 4, 5, 2, 3, 4, 1, -1, -5, 3, 2, int64_t{1} << 20, int64_t{1} << 40};
        static const int64_t offsets[12] = {0, 1, -1, 2, -2, 5, -5, INT64_MAX, INT64_MIN, 100, -100, 3};
        int64_t rows = sizes[rd_.Byte() % 16], cols = sizes[rd_.Byte() % 16];
        int64_t off = offsets[rd_.Byte() % 12];
        int dtype = Dtype();
        Expect ex = prog_.CausalMask(rows, cols, off, dtype);
        Record("tm_op_causal_mask(" + std::to_string(rows) + ", " + std::to_string(cols) + ", " +
                   std::to_string(off) + ", " + std::to_string(dtype) + ")",
               ex, [&](tm_value *o) { return tm_op_causal_mask(trace_, rows, cols, off, static_cast<tm_dtype>(dtype), o); });
        break;
      }
      case kMisuse: Misuse(); break;
      case kQueryType: QueryType(); break;
    }
    return true;
  }

  void Constant() {
    int dtype = Dtype();
    int rank;
    bool null_shape;
    Shape s = GenShape(&rank, &null_shape);
    uint8_t layout = rd_.Byte();
    bool null_struct = layout % 16 == 15;
    bool ok_shape = rank >= 0 && rank <= 8 && !null_shape && tmref::SizeOk(s) && tmref::ValidDtype(dtype) &&
                    tmref::NumElements(s) <= 4096;
    std::vector<int64_t> strides;
    std::vector<unsigned char> buf;
    void *data = nullptr;
    if (ok_shape) {
      int64_t n = tmref::NumElements(s);
      size_t esz = tmref::DtypeSize(dtype);
      strides = tmref::Strides(s);
      int64_t padded = n;
      if (layout % 4 == 1 && rank > 0) {  // padded rows
        int64_t step = 1;
        for (size_t i = s.size(); i-- > 0;) {
          strides[i] = step;
          step *= s[i] + 1;
        }
        padded = step;
      }
      buf.resize(static_cast<size_t>(std::max<int64_t>(padded, 1)) * esz);
      Rng rng{seed_ ^ (0x5151ull * (vals_.size() + 1))};
      FillData(rng, dtype, buf.data(), static_cast<int64_t>(buf.size() / esz), flags_ & 0x04);
      if (dtype == tmref::kBool && (layout & 0x80) && n > 0) buf[0] = 2;  // a byte that is not a bool
      data = (layout % 4 == 2 && n == 0) ? nullptr : buf.data();
      if (layout % 4 == 3 && n > 0) data = nullptr;  // NULL data for a non-empty constant
    }
    const int64_t *sp = null_shape ? nullptr : s.data();
    const int64_t *st = (layout % 4 == 1 && ok_shape) ? strides.data() : nullptr;
    tm_tensor t{data, static_cast<tm_dtype>(dtype), rank, sp, st};
    Expect ex = prog_.Constant(!null_struct, dtype, rank, sp, st, data);
    Record("tm_op_constant(" + TypeStr(dtype, std::max(0, std::min(rank, static_cast<int>(s.size()))), s.data()) +
               ", layout " + std::to_string(layout) + ")",
           ex, [&](tm_value *o) { return tm_op_constant(trace_, null_struct ? nullptr : &t, o); });
  }

  void Reshape() {
    Val x = Pick();
    const Type *t = TypeOf(x);
    uint8_t mode = rd_.Byte();
    Shape s;
    int32_t rank = 0;
    bool null_shape = false;
    int64_t n = t ? t->numel() : 1;
    Shape src = t ? t->shape : Shape{};
    switch (mode % 10) {
      case 0: s.assign(src.rbegin(), src.rend()); break;  // same count, reversed dims
      case 1: s = {-1}; break;
      case 2: s = {1, -1}; if (src.size() > 1) s.push_back(src.back()); break;
      case 3: s = {-1, 1}; break;
      case 4: {  // factor the count
        int64_t a = n > 0 && n % 2 == 0 ? 2 : 1;
        s = {a, -1, 1};
        if (rd_.Byte() & 1) s = {n / (a ? a : 1), a};
        break;
      }
      case 5: s = {}; break;  // rank 0: valid for one element
      case 6: s = {Dim(), Dim()}; break;  // probably not the count
      case 7: s = {-1, -1}; break;
      case 8: null_shape = true; s = {1, 1}; break;
      case 9: s = {n, -2}; break;
    }
    rank = static_cast<int32_t>(s.size());
    if (mode % 32 == 31) rank = 9;
    const int64_t *sp = null_shape ? nullptr : s.data();
    std::vector<int64_t> big(9, 1);
    if (rank == 9) sp = big.data();
    Expect ex = prog_.Reshape(x.ref, rank, sp);
    Record("tm_op_reshape(" + Name(x) + ", " + (sp ? TypeStr(0, std::min(rank, 8), sp) : "NULL") + ", rank " +
               std::to_string(rank) + ")",
           ex, [&](tm_value *o) { return tm_op_reshape(trace_, x.lib, rank, sp, o); });
  }

  void Transpose() {
    Val x = Pick();
    const Type *t = TypeOf(x);
    int r = t ? t->rank() : 2;
    uint8_t mode = rd_.Byte();
    std::vector<int32_t> perm(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
    auto shuffle = [&] {  // a permutation from the next byte
      uint8_t k = rd_.Byte();
      for (int i = r; i > 1; --i) {
        std::swap(perm[static_cast<size_t>(i - 1)], perm[static_cast<size_t>(k % i)]);
        k = static_cast<uint8_t>(k / i + 7 * i);
      }
    };
    bool null_perm = false;
    int32_t n = r;
    switch (mode % 8) {
      case 0: null_perm = true; n = 0; break;  // NULL, 0: reverse the axes
      case 1: case 2: case 3: shuffle(); break;
      case 4:  // not a permutation
        if (r >= 2) perm[0] = perm[1];
        else if (r == 1) perm[0] = 1;
        else { perm = {0}; n = 1; }
        break;
      case 5: perm.push_back(r); n = r + 1; break;  // one entry too many
      case 6:  // negative axes, as NumPy allows
        shuffle();
        if (r > 0) perm[rd_.Byte() % static_cast<size_t>(r)] -= r;
        break;
      case 7: null_perm = true; n = r > 0 ? r : 1; break;  // NULL with n_perm > 0
    }
    const int32_t *pp = null_perm ? nullptr : perm.data();
    Expect ex = prog_.Transpose(x.ref, pp, n);
    std::string ps = pp ? "" : "NULL";
    for (int i = 0; pp && i < n; ++i) ps += (i ? "," : "") + std::to_string(pp[i]);
    Record("tm_op_transpose(" + Name(x) + ", [" + ps + "], " + std::to_string(n) + ")", ex,
           [&](tm_value *o) { return tm_op_transpose(trace_, x.lib, pp, n, o); });
  }

  void Slice() {
    Val x = Pick([](const Type &t) { return t.rank() >= 1; });
    const Type *t = TypeOf(x);
    uint8_t mode = rd_.Byte();
    Shape shape = t ? t->shape : Shape{2};
    int32_t rank = static_cast<int32_t>(shape.size());
    std::vector<int64_t> b(shape.size() + 1, 0), e(shape.size() + 1, 0);
    for (size_t i = 0; i < shape.size(); ++i) {  // begin, then length
      int64_t d = shape[i];
      b[i] = rd_.Byte() % (d + 1);
      e[i] = b[i] + rd_.Byte() % (d - b[i] + 1);
    }
    const int64_t *bp = b.data(), *ep = e.data();
    switch (mode % 8) {
      case 5: if (rank > 0) e[0] = shape[0] + 1; break;   // past the end
      case 6: if (rank > 0) { b[0] = 1; e[0] = 0; } break;  // begin > end
      case 7: {
        uint8_t k = rd_.Byte() % 3;
        if (k == 0) rank += 1;
        else if (k == 1) bp = nullptr;
        else if (rank > 0) b[0] = -1;
        break;
      }
      default: break;
    }
    Expect ex = prog_.Slice(x.ref, rank, bp, ep);
    std::string bs;
    for (int i = 0; i < rank && bp; ++i) bs += (i ? "," : "") + std::to_string(b[static_cast<size_t>(i)]) + ":" + std::to_string(e[static_cast<size_t>(i)]);
    Record("tm_op_slice(" + Name(x) + ", rank " + std::to_string(rank) + ", [" + (bp ? bs : "NULL") + "])", ex,
           [&](tm_value *o) { return tm_op_slice(trace_, x.lib, rank, bp, ep, o); });
  }

  void Concat() {
    uint8_t nb = rd_.Byte();
    int32_t n = nb % 16 == 15 ? 0 : nb % 16 == 14 ? 4 + (nb >> 4) % 6 : 1 + nb % 3;
    Val first = Pick([](const Type &t) { return t.rank() >= 1; });
    int32_t axis = Axis(RankOf(first));
    std::vector<Val> xs{first};
    const Type *tf = TypeOf(first);
    for (int i = 1; i < n; ++i) {
      xs.push_back(Pick([&](const Type &t) {
        if (!tf || t.rank() != tf->rank() || tf->rank() == 0) return false;
        int r = tf->rank(), ax = axis < 0 ? axis + r : axis;
        for (int k = 0; k < r; ++k)
          if (k != ax && t.shape[static_cast<size_t>(k)] != tf->shape[static_cast<size_t>(k)]) return false;
        return true;
      }));
    }
    std::vector<tm_value> lib;
    std::vector<int> ref;
    std::string names;
    for (const Val &v : xs) {
      lib.push_back(v.lib);
      ref.push_back(v.ref);
      names += (names.empty() ? "" : ", ") + Name(v);
    }
    AxisCells("concat", axis, RankOf(first));
    Expect ex = prog_.Concat(ref.data(), n, axis);
    Record("tm_op_concat([" + names + "], n " + std::to_string(n) + ", axis " + std::to_string(axis) + ")", ex,
           [&](tm_value *o) { return tm_op_concat(trace_, lib.data(), n, axis, o); });
  }

  // ---- end, compile, invoke --------------------------------------------------------------

  void End() {
    uint8_t b = rd_.Byte();
    std::vector<Val> outs;
    if (!vals_.empty()) {
      outs.push_back(vals_.back());
      int n = 1 + b % 3;
      if ((b & 0x1c) == 0x1c) n = 30 + b % 12;  // more tensors than tm_invoke keeps on its stack
      for (int i = 1; i < n; ++i) outs.push_back(vals_[vals_.size() - 1 - rd_.Byte() % vals_.size()]);
    }
    // Sometimes a wrong call first: no outputs, NULL, or a value from nowhere.
    if (b >= 0xe0 || outs.empty()) {
      std::vector<tm_value> lib;
      std::vector<int> ref;
      for (const Val &v : outs) { lib.push_back(v.lib); ref.push_back(v.ref); }
      int32_t n = static_cast<int32_t>(lib.size());
      const tm_value *lp = lib.data();
      const int *rp = ref.data();
      if (b % 4 == 0 || outs.empty()) n = 0;
      else if (b % 4 == 1) { lp = nullptr; rp = nullptr; }
      else {
        Val bogus = Bogus(static_cast<uint8_t>(0xf0 | (b & 0x0f)));
        lib.push_back(bogus.lib);
        ref.push_back(-1);
        n = static_cast<int32_t>(lib.size());
        lp = lib.data();
        rp = ref.data();
      }
      Expect ex = prog_.End(rp, n);
      tm_status s = Call("tm_trace_end", [&] { return tm_trace_end(trace_, lp, n); });
      Log("tm_trace_end(bad: n " + std::to_string(n) + ") -> " + StatusName(s));
      Check(s, ex, "tm_trace_end with bad outputs");
      if (s == TM_OK) prog_.CommitEnd(rp, n), ended_ = true;
      if (outs.empty() || ended_) return;
    }
    std::vector<tm_value> lib;
    std::vector<int> ref;
    std::string names;
    for (const Val &v : outs) {
      lib.push_back(v.lib);
      ref.push_back(v.ref);
      names += (names.empty() ? "" : ", ") + Name(v);
    }
    Expect ex = prog_.End(ref.data(), static_cast<int32_t>(ref.size()));
    tm_status s = Call("tm_trace_end", [&] { return tm_trace_end(trace_, lib.data(), static_cast<int32_t>(lib.size())); });
    Log("tm_trace_end([" + names + "]) -> " + StatusName(s));
    Check(s, ex, "tm_trace_end");
    if (s == TM_OK) {
      prog_.CommitEnd(ref.data(), static_cast<int32_t>(ref.size()));
      ended_ = true;
    }
  }

  void AfterEnd() {
    // No op may be added, and the trace cannot end twice.
    const Val &v = vals_.back();
    tm_value out = kUnwritten;
    tm_status s = Call("tm_op_neg after end", [&] { return tm_op_neg(trace_, v.lib, &out); });
    Check(s, Only(tmref::kInvalid), "tm_op_neg after tm_trace_end");
    if (out != kUnwritten) Violation("tm_op_neg after end wrote *out");
    s = Call("tm_trace_end twice", [&] { return tm_trace_end(trace_, &v.lib, 1); });
    Check(s, Only(tmref::kInvalid), "tm_trace_end twice");
  }

  bool CompileWanted() {
    if ((flags_ & 3) == 3) return false;  // record only
    std::vector<bool> live = prog_.Live();
    int64_t total = 0;
    for (int id = 0; id < prog_.size(); ++id) {
      // Every input is passed to tm_invoke, whether an output needs it or not.
      if (!live[static_cast<size_t>(id)] && prog_.node(id).op != Op::kInput) continue;
      int64_t n = prog_.type(id).numel();
      if (n > kMaxInvokeElements) return false;
      total += n;
      const tmref::Node &node = prog_.node(id);
      if (node.op == Op::kMatmul) total += n * prog_.type(node.args[0]).shape.back();
    }
    return total <= kMaxTotalElements;
  }

  struct Buffer {
    std::vector<unsigned char> bytes;  // the allocation
    int64_t offset = 0;                // element offset of element 0 within it
    size_t esz = 1;
    std::vector<int64_t> strides;
    bool null_data = false;
    int alias_of = -1;                 // input index whose buffer this one uses
    unsigned char *data() {
      if (null_data) return nullptr;
      return bytes.data() + offset * static_cast<int64_t>(esz);
    }
  };

  // Element offsets (relative to element 0) of a layout.
  static std::vector<int64_t> ElementOffsets(const Shape &shape, const std::vector<int64_t> &strides) {
    int64_t n = tmref::NumElements(shape);
    std::vector<int64_t> offs;
    std::vector<int64_t> pos(shape.size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      int64_t o = 0;
      for (size_t j = 0; j < shape.size(); ++j) o += pos[j] * strides[j];
      offs.push_back(o);
      for (size_t j = shape.size(); j-- > 0;) {
        if (++pos[j] < shape[j]) break;
        pos[j] = 0;
      }
    }
    return offs;
  }

  // A buffer for a tensor of `t` with layout `kind` (0 contiguous, 1 explicit contiguous
  // strides, 2 padded, 3 one axis reversed, 4 one axis broadcast (stride 0)).
  Buffer MakeBuffer(const Type &t, int kind, uint8_t axis_byte) {
    Buffer b;
    size_t esz = tmref::DtypeSize(t.dtype);
    b.esz = esz;
    b.strides = tmref::Strides(t.shape);
    int r = t.rank();
    if (r == 0) kind = 0;
    if (kind == 2) {
      int64_t step = 1;
      for (size_t i = t.shape.size(); i-- > 0;) {
        b.strides[i] = step;
        step *= t.shape[i] + 1 + static_cast<int64_t>(i % 2);
      }
    } else if (kind == 3 || kind == 4) {
      size_t ax = axis_byte % static_cast<size_t>(r);
      if (kind == 3) b.strides[ax] = -b.strides[ax];
      else if (t.shape[ax] > 1) b.strides[ax] = 0;
    }
    int64_t lo = 0, hi = 0;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (t.shape[i] == 0) { lo = hi = 0; break; }
      int64_t ext = (t.shape[i] - 1) * b.strides[i];
      (ext < 0 ? lo : hi) += ext;
    }
    b.offset = -lo;
    b.bytes.assign(static_cast<size_t>(hi - lo + 1) * esz, 0);
    if (kind == 0) b.strides.clear();  // NULL strides
    return b;
  }

  const int64_t *StridesPtr(const Buffer &b) const { return b.strides.empty() ? nullptr : b.strides.data(); }

  void CompileAndInvoke() {
    tm_compile_options opt;
    tm_compile_options_init(&opt);
    uint8_t ob = rd_.Byte();
    Expect ex;  // compile must succeed
    const tm_compile_options *op = G.defaults;
    if (G.defaults) opt = *G.defaults;
    std::vector<unsigned char> bigger;
    if ((flags_ & 3) == 2) {
      op = &opt;
      opt.optimize = ob & 1;
      opt.use_blas = (ob >> 1) & 1;
      opt.opt_level = (ob >> 2) & 3;
      if ((ob >> 4) == 15) {  // an older struct than the first layout
        opt.struct_size = 12;
        ex = Only(tmref::kInvalid);
      } else if ((ob >> 4) == 14) {  // a newer header with a field this library does not know
        bigger.assign(sizeof opt + 8, 0);
        std::memcpy(bigger.data(), &opt, sizeof opt);
        bigger[sizeof opt + 3] = 1;
        uint32_t size = static_cast<uint32_t>(bigger.size());
        std::memcpy(bigger.data(), &size, 4);
        op = reinterpret_cast<const tm_compile_options *>(bigger.data());
        ex = Only(tmref::kUnsupported);
      } else if ((ob >> 4) == 13) {  // a newer header, new fields zero: fine
        bigger.assign(sizeof opt + 8, 0);
        std::memcpy(bigger.data(), &opt, sizeof opt);
        uint32_t size = static_cast<uint32_t>(bigger.size());
        std::memcpy(bigger.data(), &size, 4);
        op = reinterpret_cast<const tm_compile_options *>(bigger.data());
      } else if ((ob >> 4) == 12) {
        opt.opt_level = 4 + (ob & 3);
        ex = Only(tmref::kInvalid);
      } else if ((ob >> 4) == 11) {
        opt.target = static_cast<tm_target>(7);
        ex = Only(tmref::kInvalid);
      } else if ((ob >> 4) == 10) {  // a GPU build may accept this; then the defaults follow
        opt.target = TM_TARGET_GPU;
        ex.Open(Bit(tmref::kUnsupported), "no GPU target in this build");
      }
    }
    tm_program *prog = Unwritten<tm_program>();
    char what[96];
    snprintf(what, sizeof what, "tm_compile(optimize %d, blas %d, O%d, size %u)", op ? opt.optimize : 1,
             op ? opt.use_blas : 1, op ? opt.opt_level : 3, op ? *reinterpret_cast<const uint32_t *>(op) : 0);
    tm_status s = Call(what, [&] { return tm_compile(ctx_, trace_, op, &prog); });
    Log(std::string(what) + " -> " + StatusName(s) + (s ? " (" + last_msg_ + ")" : ""));
    Check(s, ex, what);
    // A GPU build compiles the GPU request; its program stays cached after this release, so
    // the defaults' compile below is the context's second lookup (a hit when the options
    // are otherwise the defaults' and the target does not enter the key, else a miss).
    int earlier_lookups = 0;
    if (s == TM_OK && opt.target == TM_TARGET_GPU && op && !G.defaults) {
      earlier_lookups = 1;
      tm_program_release(prog);
      s = TM_ERROR_UNSUPPORTED;
      prog = Unwritten<tm_program>();
    }
    if (s != TM_OK) {
      if (prog != Unwritten<tm_program>()) Violation("tm_compile failed but wrote *out");
      if (ex.errors) {  // a bad option: compile again with the defaults
        prog = Unwritten<tm_program>();
        op = G.defaults;
        s = Call("tm_compile", [&] { return tm_compile(ctx_, trace_, op, &prog); });
        Log(std::string("tm_compile(defaults) -> ") + StatusName(s) + (s ? " (" + last_msg_ + ")" : ""));
        Check(s, Expect(), "tm_compile");
      } else {
        return;
      }
    }
    ++G.compiled;
    programs_.push_back(prog);
    if (earlier_lookups == 0 && tm_program_cache_hit(prog) != 0)
      Violation("the first tm_compile in a fresh context reports a cache hit");
    CheckProgramTypes(prog);
    uint64_t hits0 = 7, misses0 = 7, entries0 = 7;
    Must(Call("tm_cache_stats", [&] { return tm_cache_stats(ctx_, &hits0, &misses0, &entries0); }), "tm_cache_stats");

    // The same trace again: a cache hit sharing the program.
    tm_program *again = Unwritten<tm_program>();
    Must(Call("tm_compile (again)", [&] { return tm_compile(ctx_, trace_, op, &again); }), "tm_compile (again)");
    programs_.push_back(again);
    if (tm_program_cache_hit(again) != 1) Violation("compiling the same trace twice did not hit the cache");
    uint64_t hits = 7, misses = 7, entries = 7;
    Must(Call("tm_cache_stats", [&] { return tm_cache_stats(ctx_, &hits, &misses, &entries); }), "tm_cache_stats");
    const bool first_lookups_ok = hits0 + misses0 == 1u + earlier_lookups && entries0 == misses0 &&
                                  hits0 == static_cast<uint64_t>(tm_program_cache_hit(prog));
    if (!first_lookups_ok || hits != hits0 + 1 || misses != misses0 || entries != entries0)
      Violation("tm_cache_stats after a miss (" + std::to_string(hits0) + " hits, " + std::to_string(misses0) +
                " misses, " + std::to_string(entries0) + " entries) and a hit (" + std::to_string(hits) + ", " +
                std::to_string(misses) + ", " + std::to_string(entries) + ")");

    if (flags_ & 0x80) {  // the text of one stage
      uint8_t sb = rd_.Byte();
      int stage = sb % 8 < 5 ? sb % 8 : sb % 8 == 5 ? (sb & 0x80 ? 5 : 0) : sb % 8 == 6 ? 6 : -1;
      char *text = reinterpret_cast<char *>(0x1);
      tm_status st = Call("tm_program_ir", [&] { return tm_program_ir(prog, static_cast<tm_stage>(stage), &text); });
      Log("tm_program_ir(stage " + std::to_string(stage) + ") -> " + StatusName(st));
      Expect ir;
      if (stage < 0 || stage > 5) ir.Fail(Bit(tmref::kInvalid) | Bit(tmref::kUnsupported), "unknown stage");
      else if (stage == 5) ir.Open(Bit(tmref::kUnsupported), "assembly may be unavailable");
      Check(st, ir, "tm_program_ir");
      if (st == TM_OK) {
        if (!text || !*text) Violation("tm_program_ir gave an empty text");
        tm_free(text);
      } else if (text != reinterpret_cast<char *>(0x1)) {
        Violation("tm_program_ir failed but wrote *text");
      }
    }

    // Lifetimes: the program outlives its trace and context.
    if (flags_ & 0x20) {
      tm_trace_destroy(trace_);
      trace_ = nullptr;
      tm_trace_destroy(other_);
      other_ = nullptr;
      tm_context_release(ctx_);
      ctx_ = nullptr;
      Log("destroyed the trace and the context");
    }
    Invoke(prog, again);
  }

  void CheckProgramTypes(tm_program *prog) {
    int32_t ni = tm_program_num_inputs(prog), no = tm_program_num_outputs(prog);
    if (ni != static_cast<int32_t>(prog_.inputs().size()) || no != static_cast<int32_t>(prog_.outputs().size()))
      Violation("the program has " + std::to_string(ni) + " inputs and " + std::to_string(no) +
                " outputs, the trace " + std::to_string(prog_.inputs().size()) + " and " +
                std::to_string(prog_.outputs().size()));
    for (int k = 0; k < ni + no; ++k) {
      bool in = k < ni;
      int i = in ? k : k - ni;
      const Type &t = prog_.type(in ? prog_.inputs()[static_cast<size_t>(i)] : prog_.outputs()[static_cast<size_t>(i)]);
      tm_dtype dt;
      int32_t rank;
      int64_t shape[TM_MAX_RANK];
      Must(Call("tm_program_*_type", [&] {
             return in ? tm_program_input_type(prog, i, &dt, &rank, shape) : tm_program_output_type(prog, i, &dt, &rank, shape);
           }),
           "tm_program_input/output_type");
      bool same = dt == t.dtype && rank == t.rank();
      for (int j = 0; same && j < rank; ++j) same = shape[j] == t.shape[static_cast<size_t>(j)];
      if (!same)
        Violation(std::string(in ? "input " : "output ") + std::to_string(i) + " of the program is " +
                  TypeStr(dt, rank, shape) + ", the reference " + t.str());
    }
    tm_dtype dt = static_cast<tm_dtype>(-7);
    tm_status s = Call("tm_program_input_type", [&] { return tm_program_input_type(prog, ni, &dt, nullptr, nullptr); });
    Check(s, Only(tmref::kOutOfRange), "tm_program_input_type past the last input");
    if (dt != static_cast<tm_dtype>(-7)) Violation("tm_program_input_type failed but wrote *dtype");
  }

  // Invokes the program a few times: with the input's choices first, then with other data,
  // layouts and special values (an invocation costs little next to a compile).
  void Invoke(tm_program *prog, tm_program *again) {
    uint8_t mb = rd_.Byte();
    int64_t total = 0;
    for (int id : prog_.inputs()) total += prog_.type(id).numel();
    for (int id : prog_.outputs()) total += prog_.type(id).numel();
    int rounds = total > 20000 ? 1 : 3;
    for (int round = 0; round < rounds; ++round) {
      bool first = round == 0;
      bool layouts = first ? (flags_ & 0x10) != 0 : round == 1;
      bool specials = first ? (flags_ & 0x04) != 0 : round == 2;
      InvokeOnce(prog, first ? again : nullptr, round, layouts, specials, first && (flags_ & 0x08),
                 first && (flags_ & 0x40), mb);
    }
    if (rounds > 1) Concurrent(prog, again);
  }

  // The header: tm_invoke may run concurrently on one program from several threads.
  void Concurrent(tm_program *prog, tm_program *again) {
    const std::vector<int> &in_ids = prog_.inputs(), &out_ids = prog_.outputs();
    Rng rng{seed_ ^ 0xc0ffeeull};
    std::vector<std::vector<unsigned char>> in_bytes(in_ids.size());
    std::vector<Tensor> ref_in(in_ids.size());
    std::vector<int64_t> limits = prog_.GatherRowLimits();
    std::vector<tm_tensor> tin(in_ids.size());
    for (size_t i = 0; i < in_ids.size(); ++i) {
      const Type &t = prog_.type(in_ids[i]);
      size_t esz = tmref::DtypeSize(t.dtype), n = static_cast<size_t>(t.numel());
      in_bytes[i].assign(n * esz + 1, 0);
      FillData(rng, t.dtype, in_bytes[i].data(), static_cast<int64_t>(n), false);
      for (size_t k = 0; k < n && limits[i] >= 0; ++k) {
        int64_t v = limits[i] > 0 ? static_cast<int64_t>(rng.Below(static_cast<uint32_t>(limits[i]))) : 0;
        if (t.dtype == tmref::kI32) {
          int32_t w = static_cast<int32_t>(v);
          std::memcpy(in_bytes[i].data() + k * 4, &w, 4);
        } else {
          std::memcpy(in_bytes[i].data() + k * 8, &v, 8);
        }
      }
      ref_in[i].type = t;
      for (size_t k = 0; k < n; ++k) ref_in[i].el.push_back(tmref::LoadElement(t.dtype, in_bytes[i].data() + k * esz));
      tin[i] = {in_bytes[i].data(), static_cast<tm_dtype>(t.dtype), t.rank(), t.shape.data(), nullptr};
    }
    tmref::RunResult ref = prog_.Run(ref_in);
    constexpr int kThreads = 3;
    std::vector<std::vector<std::vector<unsigned char>>> out_bytes(kThreads);
    std::vector<std::vector<tm_tensor>> tout(kThreads);
    for (int th = 0; th < kThreads; ++th)
      for (int id : out_ids) {
        const Type &t = prog_.type(id);
        out_bytes[static_cast<size_t>(th)].emplace_back(static_cast<size_t>(t.numel()) * tmref::DtypeSize(t.dtype) + 1, 0xa5);
      }
    for (int th = 0; th < kThreads; ++th)
      for (size_t o = 0; o < out_ids.size(); ++o) {
        const Type &t = prog_.type(out_ids[o]);
        tout[static_cast<size_t>(th)].push_back({out_bytes[static_cast<size_t>(th)][o].data(), static_cast<tm_dtype>(t.dtype),
                                                 t.rank(), t.shape.data(), nullptr});
      }
    std::vector<tm_status> st(kThreads, TM_OK);
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; ++th)
      threads.emplace_back([&, th] {
        tm_program *p = th == 1 ? again : prog;
        for (int rep = 0; rep < 3 && st[static_cast<size_t>(th)] == TM_OK; ++rep)
          st[static_cast<size_t>(th)] = tm_invoke(p, tin.data(), static_cast<int32_t>(tin.size()),
                                                   tout[static_cast<size_t>(th)].data(),
                                                   static_cast<int32_t>(out_ids.size()));
      });
    for (std::thread &t : threads) t.join();
    Log("tm_invoke from " + std::to_string(kThreads) + " threads at once");
    if (!Captured().empty()) Violation("concurrent tm_invoke printed to stderr");
    for (int th = 0; th < kThreads; ++th) {
      if (st[static_cast<size_t>(th)] != TM_OK)
        Violation("concurrent tm_invoke failed in thread " + std::to_string(th) + ": " + StatusName(st[static_cast<size_t>(th)]));
      for (size_t o = 0; o < out_ids.size(); ++o) {
        const Type &t = prog_.type(out_ids[o]);
        size_t esz = tmref::DtypeSize(t.dtype);
        std::vector<unsigned char> &b = out_bytes[static_cast<size_t>(th)][o];
        if (b.back() != 0xa5) Violation("concurrent tm_invoke wrote past the end of output " + std::to_string(o));
        std::vector<El> got;
        for (int64_t k = 0; k < t.numel(); ++k) got.push_back(tmref::LoadElement(t.dtype, b.data() + static_cast<size_t>(k) * esz));
        Compare(o, t, got, ref.values[static_cast<size_t>(out_ids[o])]);
      }
    }
  }

  void InvokeOnce(tm_program *prog, tm_program *again, int round, bool layouts, bool specials,
                  bool out_of_range, bool misuse, uint8_t mb) {
    const std::vector<int> &in_ids = prog_.inputs();
    const std::vector<int> &out_ids = prog_.outputs();
    size_t ni = in_ids.size(), no = out_ids.size();
    std::vector<int64_t> limits = prog_.GatherRowLimits();
    Rng rng{seed_ + 0x9e3779b9ull * static_cast<uint64_t>(round)};

    // Inputs.
    std::vector<Buffer> ins(ni);
    std::vector<Tensor> ref_in(ni);
    std::vector<std::vector<int64_t>> in_offs(ni);
    for (size_t i = 0; i < ni; ++i) {
      const Type &t = prog_.type(in_ids[i]);
      size_t esz = tmref::DtypeSize(t.dtype);
      int kind = layouts ? static_cast<int>(rng.Below(5)) : 0;
      // An earlier input of the same type may share its buffer.
      if (layouts && limits[i] < 0 && rng.Below(4) == 0)
        for (size_t j = 0; j < i; ++j)
          if (limits[j] < 0 && prog_.type(in_ids[j]).dtype == t.dtype && prog_.type(in_ids[j]).shape == t.shape) {
            ins[i] = ins[j];
            ins[i].alias_of = static_cast<int>(j);
            break;
          }
      if (ins[i].alias_of < 0) {
        ins[i] = MakeBuffer(t, kind, static_cast<uint8_t>(rng.Next()));
        size_t n = ins[i].bytes.size() / esz;
        FillData(rng, t.dtype, ins[i].bytes.data(), static_cast<int64_t>(n), specials);
        if (limits[i] >= 0) {  // gather indices: within the table
          for (size_t k = 0; k < n; ++k) {
            int64_t v = limits[i] > 0 ? static_cast<int64_t>(rng.Below(static_cast<uint32_t>(limits[i]))) : 0;
            if (t.dtype == tmref::kI32) {
              int32_t w = static_cast<int32_t>(v);
              std::memcpy(ins[i].bytes.data() + k * 4, &w, 4);
            } else {
              std::memcpy(ins[i].bytes.data() + k * 8, &v, 8);
            }
          }
        }
        if (t.numel() == 0 && rng.Below(2)) ins[i].null_data = true;
      }
      std::vector<int64_t> st = ins[i].strides.empty() ? tmref::Strides(t.shape) : ins[i].strides;
      in_offs[i] = ElementOffsets(t.shape, st);
      // Out-of-range gather indices (some of the time).
      if (limits[i] >= 0 && out_of_range && !in_offs[i].empty() && ins[i].alias_of < 0) {
        static const int64_t bad[6] = {-1, 0, 1, 1000, INT32_MIN, INT32_MAX};
        int64_t v = bad[rng.Below(6)];
        if (v == 0 || v == 1) v += limits[i];
        size_t at = static_cast<size_t>(ins[i].offset + in_offs[i][rng.Below(static_cast<uint32_t>(in_offs[i].size()))]);
        if (t.dtype == tmref::kI32) {
          int32_t w = static_cast<int32_t>(v);
          std::memcpy(ins[i].bytes.data() + at * 4, &w, 4);
        } else {
          std::memcpy(ins[i].bytes.data() + at * 8, &v, 8);
        }
      }
      ref_in[i].type = t;
      for (int64_t o : in_offs[i]) ref_in[i].el.push_back(tmref::LoadElement(t.dtype, ins[i].bytes.data() + (ins[i].offset + o) * static_cast<int64_t>(esz)));
    }
    // Aliased inputs share the bytes of the one they alias: rebuild from it.
    for (size_t i = 0; i < ni; ++i)
      if (ins[i].alias_of >= 0) ref_in[i] = ref_in[static_cast<size_t>(ins[i].alias_of)];

    tmref::RunResult ref = prog_.Run(ref_in);
    if (!ref.strict_failure.empty()) Violation("NumPy would raise: " + ref.strict_failure);

    // Outputs: canary-filled, some strided, one may alias an input.
    std::vector<Buffer> outs(no);
    std::vector<int> out_alias(no, -1);  // input whose buffer this output uses
    std::vector<bool> input_used(ni, false);
    for (size_t o = 0; o < no; ++o) {
      const Type &t = prog_.type(out_ids[o]);
      int kind = layouts ? static_cast<int>(rng.Below(4)) : 0;
      if (layouts && rng.Below(4) == 0 && t.numel() > 0)
        for (size_t i = 0; i < ni; ++i)
          if (!input_used[i] && ins[i].alias_of < 0 && ins[i].strides.empty() && prog_.type(in_ids[i]).dtype == t.dtype &&
              prog_.type(in_ids[i]).shape == t.shape) {
            out_alias[o] = static_cast<int>(i);
            input_used[i] = true;
            break;
          }
      if (out_alias[o] >= 0) continue;
      outs[o] = MakeBuffer(t, kind, static_cast<uint8_t>(rng.Next()));
      std::fill(outs[o].bytes.begin(), outs[o].bytes.end(), 0xa5);
      if (t.numel() == 0 && rng.Below(2)) outs[o].null_data = true;
    }
    // An input whose buffer an output uses must keep its bytes for the reference; the
    // buffer is shared through the input's vector.
    auto out_data = [&](size_t o) -> unsigned char * {
      return out_alias[o] >= 0 ? ins[static_cast<size_t>(out_alias[o])].data() : outs[o].data();
    };
    auto out_strides = [&](size_t o) -> const int64_t * {
      return out_alias[o] >= 0 ? nullptr : StridesPtr(outs[o]);
    };

    std::vector<tm_tensor> tin(ni), tout(no);
    auto build = [&]() {
      for (size_t i = 0; i < ni; ++i) {
        const Type &t = prog_.type(in_ids[i]);
        Buffer &b = ins[i].alias_of >= 0 ? ins[static_cast<size_t>(ins[i].alias_of)] : ins[i];
        tin[i] = {b.null_data ? nullptr : b.data(), static_cast<tm_dtype>(t.dtype), t.rank(), t.shape.data(), StridesPtr(b)};
      }
      for (size_t o = 0; o < no; ++o) {
        const Type &t = prog_.type(out_ids[o]);
        tout[o] = {out_data(o), static_cast<tm_dtype>(t.dtype), t.rank(), t.shape.data(), out_strides(o)};
      }
    };
    build();
    // Snapshots: inputs must never be written; outputs not on failure.
    std::vector<std::vector<unsigned char>> in_before(ni), out_before(no);
    for (size_t i = 0; i < ni; ++i) in_before[i] = ins[i].bytes;
    for (size_t o = 0; o < no; ++o) out_before[o] = outs[o].bytes;
    auto check_unwritten = [&](const char *when, bool outputs_too) {
      for (size_t i = 0; i < ni; ++i) {
        if (ins[i].alias_of >= 0) continue;
        bool written_by_output = false;
        for (size_t o = 0; o < no; ++o) written_by_output |= out_alias[o] == static_cast<int>(i);
        if (written_by_output && !outputs_too) continue;
        if (ins[i].bytes != in_before[i]) Violation(std::string(when) + ": tm_invoke wrote input " + std::to_string(i));
      }
      if (outputs_too)
        for (size_t o = 0; o < no; ++o)
          if (outs[o].bytes != out_before[o]) Violation(std::string(when) + ": tm_invoke wrote output " + std::to_string(o));
    };

    // A wrong call first (some of the time): it must fail and write nothing.
    if (misuse) Misinvoke(prog, tin, tout, mb, ref, check_unwritten);

    Expect ex;
    if (ref.invoke_errors) {
      if (ref.invoke_must_fail) ex.Fail(ref.invoke_errors, ref.invoke_why);
      else ex.Open(ref.invoke_errors, "out-of-range indices of an unused gather");
    }
    tm_status s = Call("tm_invoke", [&] { return tm_invoke(prog, tin.data(), static_cast<int32_t>(ni), tout.data(), static_cast<int32_t>(no)); });
    Log("tm_invoke (round " + std::to_string(round) + (layouts ? ", layouts" : "") + (specials ? ", special values" : "") +
        ") -> " + StatusName(s) + (s ? " (" + last_msg_ + ")" : ""));
    Check(s, ex, "tm_invoke");
    ++G.invoked;
    if (s != TM_OK) {
      check_unwritten("failed tm_invoke", true);
      return;
    }
    check_unwritten("tm_invoke", false);
    std::vector<std::vector<El>> got(no);
    for (size_t o = 0; o < no; ++o) {
      const Type &t = prog_.type(out_ids[o]);
      size_t esz = tmref::DtypeSize(t.dtype);
      std::vector<int64_t> st = out_strides(o) ? outs[o].strides : tmref::Strides(t.shape);
      std::vector<int64_t> offs = ElementOffsets(t.shape, st);
      const unsigned char *base = out_data(o);
      for (int64_t off : offs) got[o].push_back(tmref::LoadElement(t.dtype, base + off * static_cast<int64_t>(esz)));
      // Padding between strided elements is not touched.
      if (out_alias[o] < 0 && !outs[o].null_data) {
        std::vector<bool> mine(outs[o].bytes.size(), false);
        for (int64_t off : offs)
          for (size_t k = 0; k < esz; ++k) mine[static_cast<size_t>((outs[o].offset + off) * static_cast<int64_t>(esz)) + k] = true;
        for (size_t k = 0; k < mine.size(); ++k)
          if (!mine[k] && outs[o].bytes[k] != 0xa5)
            Violation("tm_invoke wrote byte " + std::to_string(k) + " of output " + std::to_string(o) + " outside its elements");
      }
      Compare(o, t, got[o], ref.values[static_cast<size_t>(out_ids[o])]);
    }
    std::vector<bool> live = prog_.Live();
    for (int id = 0; id < prog_.size(); ++id)
      if (live[static_cast<size_t>(id)]) {
        ++G.checked_ops[tmref::OpName(prog_.node(id).op)];
        for (const std::string &c : cells_[id]) ++G.cells[c];
      }

    if (!again) return;
    // The cached handle computes the same bytes (contiguous buffers this time).
    std::vector<std::vector<unsigned char>> again_out(no);
    std::vector<tm_tensor> tout2(no);
    for (size_t o = 0; o < no; ++o) {
      const Type &t = prog_.type(out_ids[o]);
      again_out[o].assign(static_cast<size_t>(t.numel()) * tmref::DtypeSize(t.dtype) + 1, 0x5a);
      tout2[o] = {again_out[o].data(), static_cast<tm_dtype>(t.dtype), t.rank(), t.shape.data(), nullptr};
    }
    // Inputs that an output overwrote are restored first.
    for (size_t i = 0; i < ni; ++i) ins[i].bytes = in_before[i];
    build();
    s = Call("tm_invoke (cached handle)", [&] {
      return tm_invoke(again, tin.data(), static_cast<int32_t>(ni), tout2.data(), static_cast<int32_t>(no));
    });
    Must(s, "tm_invoke on the cached program");
    for (size_t o = 0; o < no; ++o) {
      const Type &t = prog_.type(out_ids[o]);
      size_t esz = tmref::DtypeSize(t.dtype);
      for (size_t k = 0; k < got[o].size(); ++k) {
        El e = tmref::LoadElement(t.dtype, again_out[o].data() + k * esz);
        bool same = tmref::IsFloat(t.dtype) ? (std::memcmp(&e.v, &got[o][k].v, 8) == 0 ||
                                                (std::isnan(e.v) && std::isnan(got[o][k].v)))
                                             : e.i == got[o][k].i;
        if (!same && !G.results_unchecked)
          Violation("the cached program gave a different result for output " + std::to_string(o) + " element " + std::to_string(k));
      }
      if (again_out[o].back() != 0x5a) Violation("tm_invoke wrote past the end of output " + std::to_string(o));
    }
  }

  template <typename F>
  void Misinvoke(tm_program *prog, std::vector<tm_tensor> tin, std::vector<tm_tensor> tout, uint8_t mb,
                 const tmref::RunResult &ref, F &check_unwritten) {
    size_t ni = tin.size(), no = tout.size();
    int32_t n_in = static_cast<int32_t>(ni), n_out = static_cast<int32_t>(no);
    std::vector<int64_t> shape_copy;
    std::vector<int64_t> zero_strides;
    std::vector<unsigned char> badbool;
    tm_program *p = prog;
    const tm_tensor *ip = tin.data(), *op = tout.data();
    Expect ex;
    std::string what;
    switch (mb % 10) {
      case 0: {  // a real extra tensor: the count is wrong, not the array (that would be the caller's UB)
        static float dummy = 0;
        tin.push_back(tm_tensor{&dummy, TM_F32, 0, nullptr, nullptr});
        ip = tin.data();
        n_in += 1;
        ex.Fail(Bit(tmref::kInvalid), "input count");
        what = "one input too many";
        break;
      }
      case 1: n_out = 0; ex.Fail(Bit(tmref::kInvalid), "output count"); what = "no outputs"; break;
      case 2: p = nullptr; ex.Fail(Bit(tmref::kInvalid), "NULL program"); what = "NULL program"; break;
      case 3:
        if (ni == 0) return;
        tin[0].dtype = static_cast<tm_dtype>(tin[0].dtype == TM_F32 ? TM_I32 : TM_F32);
        ex.Fail(Bit(tmref::kDtypeErr), "input dtype");
        what = "input 0 with another dtype";
        break;
      case 4: {
        if (ni == 0) return;
        shape_copy.assign(tin[0].shape, tin[0].shape + tin[0].rank);
        shape_copy.push_back(1);
        if (mb & 0x10 || tin[0].rank == 0) {
          tin[0].rank += 1;  // one more dimension
        } else {
          shape_copy[0] += 1;
        }
        tin[0].shape = shape_copy.data();
        ex.Fail(Bit(tmref::kShapeErr), "input shape");
        what = "input 0 with another shape";
        break;
      }
      case 5: {
        size_t k = ni;
        for (size_t i = 0; i < ni; ++i)
          if (prog_.type(prog_.inputs()[i]).numel() > 0) k = i;
        if (k == ni) return;
        tin[k].data = nullptr;
        ex.Fail(Bit(tmref::kInvalid), "NULL data");
        what = "NULL data for input " + std::to_string(k);
        break;
      }
      case 6: {  // two outputs of one type share a buffer
        size_t a = no, b = no;
        for (size_t i = 0; i < no && b == no; ++i)
          for (size_t j = i + 1; j < no && b == no; ++j) {
            const Type &ti = prog_.type(prog_.outputs()[i]), &tj = prog_.type(prog_.outputs()[j]);
            if (ti.numel() > 0 && ti.dtype == tj.dtype && ti.shape == tj.shape) a = i, b = j;
          }
        if (b == no) return;
        tout[b].data = tout[a].data;
        tout[b].strides = tout[a].strides;
        ex.Fail(Bit(tmref::kInvalid), "overlapping outputs");
        what = "outputs " + std::to_string(a) + " and " + std::to_string(b) + " overlap";
        break;
      }
      case 7: {  // an output whose strides map two elements to one address
        size_t k = no;
        for (size_t o = 0; o < no; ++o) {
          const Type &t = prog_.type(prog_.outputs()[o]);
          for (int64_t d : t.shape) if (d > 1) k = o;
        }
        if (k == no) return;
        const Type &t = prog_.type(prog_.outputs()[k]);
        zero_strides = tmref::Strides(t.shape);
        for (size_t j = 0; j < t.shape.size(); ++j)
          if (t.shape[j] > 1) { zero_strides[j] = 0; break; }
        tout[k].strides = zero_strides.data();
        ex.Fail(Bit(tmref::kInvalid), "overlapping output strides");
        what = "output " + std::to_string(k) + " with a zero stride";
        break;
      }
      case 8: {  // a bool input holding a byte that is not 0/1
        size_t k = ni;
        for (size_t i = 0; i < ni; ++i)
          if (tin[i].dtype == TM_BOOL && prog_.type(prog_.inputs()[i]).numel() > 0 && !tin[i].strides) k = i;
        if (k == ni) return;
        const Type &t = prog_.type(prog_.inputs()[k]);
        badbool.assign(static_cast<const unsigned char *>(tin[k].data), static_cast<const unsigned char *>(tin[k].data) + t.numel());
        badbool[static_cast<size_t>(mb >> 4) % badbool.size()] = static_cast<unsigned char>(2 + (mb & 0x7f));
        tin[k].data = badbool.data();
        ex.Fail(Bit(tmref::kInvalid), "bool byte > 1");
        what = "input " + std::to_string(k) + " holds a bool byte > 1";
        break;
      }
      default:
        ip = nullptr;
        if (n_in == 0) return;
        ex.Fail(Bit(tmref::kInvalid), "NULL inputs array");
        what = "NULL inputs array";
        break;
    }
    // Data-dependent failures may come first.
    ex.errors |= ref.invoke_errors;
    tm_status s = Call("tm_invoke (wrong)", [&] { return tm_invoke(p, ip, n_in, op, n_out); });
    Log("tm_invoke(" + what + ") -> " + StatusName(s) + (s ? " (" + last_msg_ + ")" : ""));
    Check(s, ex, "tm_invoke with " + what);
    check_unwritten("a failing tm_invoke", true);
  }

  void Compare(size_t o, const Type &t, const std::vector<El> &got, const Tensor &want) {
    if (G.results_unchecked) {
      G.dont_care += static_cast<long>(got.size());
      return;
    }
    if (want.el.size() != got.size())
      Violation("output " + std::to_string(o) + ": the reference has " + std::to_string(want.el.size()) +
                " elements, the program " + std::to_string(got.size()));
    // Half outputs are exact copies or casts (their rounding is in the bound): f32's slack.
    const bool f64 = t.dtype == tmref::kF64;
    double rtol = f64 ? 1e-12 : 1e-4, atol = f64 ? 1e-12 : 1e-5;
    for (size_t k = 0; k < got.size(); ++k) {
      const El &w = want.el[k], &g = got[k];
      if (t.dtype == tmref::kBool && g.i > 1)
        Violation("output " + std::to_string(o) + " element " + std::to_string(k) + " is a bool byte " + std::to_string(g.i));
      if (w.dc) {
        ++G.dont_care;
        continue;
      }
      ++G.compared;
      bool ok;
      if (tmref::IsFloat(t.dtype)) {
        if (std::isnan(w.v)) ok = std::isnan(g.v);
        else if (std::isinf(w.v)) ok = g.v == w.v || (w.e > 0 && std::fabs(g.v) >= tmref::Lim(t.dtype));
        else ok = std::isfinite(g.v) && std::fabs(g.v - w.v) <= 2 * w.e + atol + rtol * std::fabs(w.v);
      } else {
        ok = g.i == w.i;
      }
      if (!ok) {
        char buf[256];
        if (tmref::IsFloat(t.dtype))
          snprintf(buf, sizeof buf, "library %.17g, reference %.17g (error bound %.3g)", g.v, w.v, w.e);
        else
          snprintf(buf, sizeof buf, "library %" PRId64 ", reference %" PRId64, g.i, w.i);
        Violation("output " + std::to_string(o) + " (" + t.str() + ") element " + std::to_string(k) + ": " + buf);
      }
    }
  }

  Reader rd_;
  tmref::Program prog_;
  uint8_t flags_ = 0;
  uint64_t seed_ = 0;
  tm_context *ctx_ = nullptr;
  tm_trace *trace_ = nullptr;
  tm_trace *other_ = nullptr;
  tm_value other_value_ = 0;
  std::vector<tm_program *> programs_;
  std::vector<Val> vals_;
  std::map<int, std::vector<std::string>> cells_;  // each value's coverage cells (CellsOf)
  std::vector<std::string> next_cells_;            // the next op's own (an axis, keepdims)
  bool ended_ = false;
  std::string log_, last_msg_;
};

}  // namespace

// ---- the sweep: every op x parameter cell, through the fuzzer's own decoding --------------
//
// Random inputs reach most cells but not all in a CI run's 500. With TM_FUZZ_SWEEP=1 the
// target first runs inputs written to reach each cell (every op, every dtype it accepts,
// every axis of ranks 1 to 3, negative too, keepdims, empty and size-1 dimensions): byte
// strings that the decoding above turns into those calls, so each is traced, compiled,
// invoked and compared with the reference interpreter like any input. With
// TM_FUZZ_COVERAGE=require, a run that leaves a required cell unchecked fails.

// Writes the bytes Runner decodes into chosen calls. Every call must be one the library
// accepts (a value is then added): the value indices below count on it.
class SweepProgram {
 public:
  SweepProgram() : bytes_{0x00 /*flags: named trace, compile*/, 0x12, 0x34 /*data seed*/} {}

  int Input(int dtype, const Shape &shape) {
    Op(kInput);
    bytes_.push_back(DtypeByte(dtype));
    bytes_.push_back(0);  // GenShape: a fresh shape of rank byte % 4
    bytes_.push_back(static_cast<uint8_t>(shape.size()));
    for (int64_t d : shape) bytes_.push_back(DimByte(d));
    return Value();
  }
  int Unary(size_t table_index, int x) {
    Op(kUnary);
    bytes_.push_back(static_cast<uint8_t>(table_index));
    Pick(x);
    return Value();
  }
  int Binary(int which, int a, int b) {  // which: kAdd - kAdd .. kEqual - kAdd
    Op(kAdd + which);
    Pick(a);
    Pick(b);
    return Value();
  }
  int Where(int c, int a, int b) {
    Op(kWhere);
    Pick(c);
    Pick(a);
    Pick(b);
    return Value();
  }
  int Cast(int x, int dtype) {
    Op(kCast);
    Pick(x);
    bytes_.push_back(DtypeByte(dtype));
    return Value();
  }
  int Matmul(int a, int b) {
    Op(kMatmul);
    Pick(a);
    Pick(b);
    return Value();
  }
  int Reduce(int which, int x, int axis, int rank, bool keep) {  // which: sum, max, mean, var
    Op(kSum + which);
    Pick(x);
    bytes_.push_back(static_cast<uint8_t>(axis + rank));  // Axis: byte % (2 rank) - rank
    bytes_.push_back(keep ? 1 : 0);
    return Value();
  }
  int Softmax(int x, int axis, int rank) {
    Op(kSoftmax);
    Pick(x);
    bytes_.push_back(static_cast<uint8_t>(axis + rank));
    return Value();
  }
  int Concat(int x, int axis, int rank) {  // x with itself
    Op(kConcat);
    bytes_.push_back(1);  // two values
    Pick(x);
    bytes_.push_back(static_cast<uint8_t>(axis + rank));
    Pick(x);
    return Value();
  }
  int Reshape(int x) {  // to (-1,)
    Op(kReshape);
    Pick(x);
    bytes_.push_back(1);
    return Value();
  }
  int Transpose(int x) {  // perm NULL: the axes reversed
    Op(kTranspose);
    Pick(x);
    bytes_.push_back(0);
    return Value();
  }
  int Slice(int x, const Shape &shape) {  // the whole of each dimension
    Op(kSlice);
    Pick(x);
    bytes_.push_back(0);
    for (int64_t d : shape) {
      bytes_.push_back(0);
      bytes_.push_back(static_cast<uint8_t>(d));
    }
    return Value();
  }
  int Gather(int table, int indices) {
    Op(kGather);
    Pick(table);
    Pick(indices);
    return Value();
  }
  int LayerNorm(int x, int gamma, int beta) {
    Op(kLayerNorm);
    Pick(x);
    Pick(gamma);
    Pick(beta);
    bytes_.push_back(0);  // eps 1e-5
    return Value();
  }
  int Gelu(int x) {
    Op(kGelu);
    Pick(x);
    return Value();
  }
  int CausalMask(int rows, int cols, int dtype) {  // rows, cols in 0..5
    Op(kCausalMask);
    bytes_.push_back(static_cast<uint8_t>(rows));
    bytes_.push_back(static_cast<uint8_t>(cols));
    bytes_.push_back(0);  // offset 0
    bytes_.push_back(DtypeByte(dtype));
    return Value();
  }
  int steps() const { return steps_; }
  // Ends the trace with every value but the inputs as an output, and adds the input.
  void FinishAndRun(std::vector<std::vector<uint8_t>> *out) {
    // The runner takes at most kMaxOps calls: the stop must be one of them.
    if (steps_ >= kMaxOps) std::abort();
    Op(kStop);
    bytes_.push_back(0x1c);  // End: 30 + 0x1c % 12 = 34 outputs, the last value first
    for (int i = 1; i < 34; ++i) {
      const int v = results_.empty() ? values_ - 1 : results_[static_cast<size_t>(i) % results_.size()];
      bytes_.push_back(static_cast<uint8_t>(values_ - 1 - v));
    }
    out->push_back(bytes_);
  }

 private:
  void Op(int opcode) {
    bytes_.push_back(static_cast<uint8_t>(opcode));
    if (opcode != kStop) ++steps_;
  }
  // Pick's "any value" branch (sel 0x80..0xef): the value `values - 1 - (sel & 0x7f)`.
  void Pick(int v) { bytes_.push_back(static_cast<uint8_t>(0x80 | (values_ - 1 - v))); }
  int Value() { return values_++; }
  static uint8_t DtypeByte(int d) {
    switch (d) {
      case TM_F32: return 0;
      case TM_F64: return 4;
      case TM_I32: return 6;
      case TM_I64: return 8;
      case TM_BOOL: return 10;
      case TM_F16: return 14;
      case TM_BF16: return 30;
    }
    return 0;
  }
  static uint8_t DimByte(int64_t d) {
    static const int64_t table[32] = {1, 2, 3, 4, 2, 3, 1, 4, 0, 2, 3, 1, 5, 2, 1, 3,
                                      1, 2, 3, 4, 6, 7, 8, 9, 16, 17, 1, 2, 3, 4, 33, 5};
    for (int i = 0; i < 32; ++i)
      if (table[i] == d) return static_cast<uint8_t>(i);
    return 0;
  }
  std::vector<uint8_t> bytes_;
  int values_ = 0, steps_ = 0;

 public:
  std::vector<int> results_;  // values to output
};

const int kAllDtypes[] = {TM_F32, TM_F64, TM_I32, TM_I64, TM_BOOL, TM_F16, TM_BF16};
const int kNumeric[] = {TM_F32, TM_F64, TM_I32, TM_I64};
const int kFloats[] = {TM_F32, TM_F64};
// The binary ops of Opcode kAdd..kEqual, and whether they take bools (sub and pow do not).
const char *const kBinaryNames[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                    "less", "greater", "equal"};
bool BinaryTakesBool(int which) { return which != 1 && which != 4; }
const char *const kReduceNames[] = {"reduce_sum", "reduce_max", "reduce_mean", "reduce_var"};
// Shapes of each rank: ordinary, with size-1 dimensions, with an empty dimension.
const Shape kShapes[3][3] = {{{3}, {1}, {0}}, {{2, 3}, {1, 3}, {0, 3}}, {{2, 3, 4}, {1, 3, 1}, {2, 0, 3}}};

// The cells a run must check (TM_FUZZ_COVERAGE=require).
std::set<std::string> RequiredCells() {
  std::set<std::string> cells;
  auto add = [&](const std::string &op, bool shapes) {
    if (shapes) {
      cells.insert(op + " empty");
      cells.insert(op + " size-1");
    }
  };
  const char *dt[8] = {};
  for (int d : kAllDtypes) dt[d] = tmref::DtypeName(d);
  for (size_t w = 0; w < 10; ++w) {
    for (int d : kNumeric) cells.insert(std::string(kBinaryNames[w]) + " " + dt[d]);
    if (BinaryTakesBool(static_cast<int>(w))) cells.insert(std::string(kBinaryNames[w]) + " bool");
    add(kBinaryNames[w], true);
  }
  for (int d : kAllDtypes) cells.insert(std::string("where ") + dt[d]);
  add("where", true);
  for (const tmref::UnaryRef &u : tmref::UnaryRefs()) {
    for (int d : kNumeric) cells.insert(std::string(u.name) + " " + dt[d]);
    add(u.name, true);
  }
  for (int a : kAllDtypes)
    for (int b : kAllDtypes) cells.insert(std::string("cast ") + dt[a] + " -> " + dt[b]);
  add("cast", true);
  for (int d : kNumeric) cells.insert(std::string("matmul ") + dt[d]);
  add("matmul", true);
  for (const char *r : kReduceNames) {
    for (int d : kNumeric) cells.insert(std::string(r) + " " + dt[d]);
    for (int rank = 1; rank <= 3; ++rank)
      for (int a = -rank; a < rank; ++a)
        cells.insert(std::string(r) + " axis " + std::to_string(a) + " of rank " + std::to_string(rank));
    cells.insert(std::string(r) + " keepdims 0");
    cells.insert(std::string(r) + " keepdims 1");
    add(r, true);
  }
  for (const char *op : {"softmax", "concat"})
    for (int rank = 1; rank <= 3; ++rank)
      for (int a = -rank; a < rank; ++a)
        cells.insert(std::string(op) + " axis " + std::to_string(a) + " of rank " + std::to_string(rank));
  for (int d : kFloats) cells.insert(std::string("softmax ") + dt[d]);
  add("softmax", true);
  for (const char *op : {"concat", "reshape", "transpose", "slice", "input"}) {
    for (int d : kAllDtypes) cells.insert(std::string(op) + " " + dt[d]);
    add(op, true);
  }
  for (int d : kAllDtypes) cells.insert(std::string("gather table ") + dt[d]);
  cells.insert("gather indices i32");
  cells.insert("gather indices i64");
  add("gather", true);
  for (const char *op : {"layer_norm", "gelu_tanh"}) {
    for (int d : kFloats) cells.insert(std::string(op) + " " + dt[d]);
    add(op, true);
  }
  for (int d : kFloats) cells.insert(std::string("causal_mask ") + dt[d]);
  return cells;
}

// The sweep's inputs: for each kind of shape (ordinary, size-1, empty), programs of at most
// kMaxOps calls reaching every cell of RequiredCells.
std::vector<std::vector<uint8_t>> SweepInputs() {
  std::vector<std::vector<uint8_t>> inputs;
  // Starts programs as needed: `body` adds calls to p (inputs first) and returns false when
  // it needs a fresh program.
  for (int kind = 0; kind < 3; ++kind) {
    const Shape &s2 = kShapes[1][kind], &s3 = kShapes[2][kind];
    // Unary ops (the table's), binary ops and where, each dtype, on rank-2 values.
    for (int d : kAllDtypes) {
      const bool numeric = d != TM_BOOL && d != TM_F16 && d != TM_BF16;
      SweepProgram p;
      int x = p.Input(d, s2), y = p.Input(d, s2);
      int c = p.Input(TM_BOOL, s2);
      if (numeric)
        for (size_t u = 0; u < tmref::UnaryRefs().size(); ++u) p.results_.push_back(p.Unary(u, x));
      p.results_.push_back(p.Where(c, x, y));
      p.FinishAndRun(&inputs);
      if (d == TM_F16 || d == TM_BF16) continue;
      SweepProgram q;
      x = q.Input(d, s2);
      y = q.Input(d, Shape{s2.back()});  // broadcast against the rows
      for (int w = 0; w < 10; ++w)
        if (d != TM_BOOL || BinaryTakesBool(w)) q.results_.push_back(q.Binary(w, x, y));
      q.FinishAndRun(&inputs);
    }
    // Casts, every pair.
    for (int from : kAllDtypes) {
      SweepProgram p;
      int x = p.Input(from, s2);
      for (int to : kAllDtypes) p.results_.push_back(p.Cast(x, to));
      p.FinishAndRun(&inputs);
    }
    // Reductions: every axis of every rank (keepdims alternating) on f32; each other
    // numeric dtype on rank 2.
    for (int r = 0; r < 4; ++r) {
      SweepProgram p;
      int x[3];
      for (int rank = 1; rank <= 3; ++rank) x[rank - 1] = p.Input(TM_F32, kShapes[rank - 1][kind]);
      for (int rank = 1; rank <= 3; ++rank)
        for (int a = -rank; a < rank; ++a) {
          const int ax = a < 0 ? a + rank : a;
          if (r == 1 && kShapes[rank - 1][kind][static_cast<size_t>(ax)] == 0) continue;  // max of nothing
          p.results_.push_back(p.Reduce(r, x[rank - 1], a, rank, (a + rank) % 2 == 1));
        }
      p.FinishAndRun(&inputs);
      SweepProgram q;
      for (int d : {TM_F64, TM_I32, TM_I64}) {
        const int y = q.Input(d, s2);
        if (r == 1 && s2[1] == 0) continue;
        q.results_.push_back(q.Reduce(r, y, -1, 2, false));
      }
      q.FinishAndRun(&inputs);
    }
    // Softmax (each float dtype) and concat over every axis of every rank.
    {
      SweepProgram p, q;
      for (int rank = 1; rank <= 3; ++rank) {
        const Shape &s = kShapes[rank - 1][kind];
        const int x[2] = {p.Input(TM_F32, s), p.Input(TM_F64, s)};
        const int y = q.Input(kAllDtypes[rank], s);
        for (int a = -rank; a < rank; ++a) {
          p.results_.push_back(p.Softmax(x[(a + rank) % 2], a, rank));
          q.results_.push_back(q.Concat(y, a, rank));
        }
      }
      p.FinishAndRun(&inputs);
      q.FinishAndRun(&inputs);
    }
    // Data movement, each dtype: reshape, transpose, slice, concat; gather with both index
    // dtypes (indices computed from a float input: a computed index is clamped to the table,
    // where an input's would be range-checked and refuse the call).
    for (int d : kAllDtypes) {
      SweepProgram p;
      int x = p.Input(d, s3);
      p.results_.push_back(p.Reshape(x));
      p.results_.push_back(p.Transpose(x));
      p.results_.push_back(p.Slice(x, s3));
      p.results_.push_back(p.Concat(x, 0, 3));
      if (s3[0] > 0) {
        int f = p.Input(TM_F32, s2);
        p.results_.push_back(p.Gather(x, p.Cast(f, TM_I32)));
        p.results_.push_back(p.Gather(x, p.Cast(f, TM_I64)));
      }
      p.FinishAndRun(&inputs);
    }
    // Products: 2-D, batched, and a batch folded into the rows; each numeric dtype.
    for (int d : kNumeric) {
      SweepProgram p;
      const int64_t m = kind == 1 ? 1 : 3, k = kind == 2 ? 0 : 4, n = kind == 1 ? 1 : 5;
      int a = p.Input(d, {m, k}), b = p.Input(d, {k, n});
      int ba = p.Input(d, {2, m, k}), bb = p.Input(d, {2, k, n});
      p.results_.push_back(p.Matmul(a, b));
      p.results_.push_back(p.Matmul(ba, bb));
      p.results_.push_back(p.Matmul(ba, b));
      p.FinishAndRun(&inputs);
    }
    // Layer norm and GELU, each float dtype; the causal mask, each float dtype.
    for (int d : kFloats) {
      SweepProgram p;
      int x = p.Input(d, s3), g = p.Input(d, {s3.back()}), b = p.Input(d, {s3.back()});
      p.results_.push_back(p.LayerNorm(x, g, b));
      p.results_.push_back(p.Gelu(x));
      p.FinishAndRun(&inputs);
    }
    if (kind == 0) {
      SweepProgram p;
      for (int d : kFloats) p.results_.push_back(p.CausalMask(3, 4, d));
      p.FinishAndRun(&inputs);
    }
  }
  return inputs;
}

// Prints which required cells the run checked; with TM_FUZZ_COVERAGE=require, a run that
// missed one ends with exit status 1 (at exit, after libFuzzer's own report).
void CoverageReport() {
  const std::set<std::string> required = RequiredCells();
  std::vector<std::string> missing;
  for (const std::string &c : required)
    if (G.cells.count(c) == 0) missing.push_back(c);
  Print("\ncapi_fuzz coverage: %zu of %zu op x parameter cells checked against the reference "
        "(every op x dtype it accepts, every axis of ranks 1-3, keepdims, empty and size-1 "
        "dimensions)\n",
        required.size() - missing.size(), required.size());
  if (std::getenv("TM_FUZZ_VERBOSE"))
    for (const std::string &c : required) Print("  %8ld  %s\n", G.cells.count(c) ? G.cells[c] : 0L, c.c_str());
  for (const std::string &c : missing) Print("  not checked: %s\n", c.c_str());
  const char *want = std::getenv("TM_FUZZ_COVERAGE");
  if (want && std::strcmp(want, "require") == 0 && !missing.empty()) {
    Print("capi_fuzz coverage: %zu required cells were not checked\n", missing.size());
    _exit(1);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  G.verbose = std::getenv("TM_FUZZ_VERBOSE") != nullptr;
  G.sem = tmref::Semantics::FromEnv();
  const char *target = std::getenv("TM_FUZZ_TARGET");
  const bool gpu_host = target && std::strcmp(target, "gpu-host") == 0;
  if (target && (std::strcmp(target, "gpu") == 0 || gpu_host)) {
    if (!gpu_host) setenv("TINYMLIR_GPU_EMULATE", "1", 1);  // before the library's first read
    tm_compile_options_init(&G.gpu_options);
    G.gpu_options.target = TM_TARGET_GPU;
    G.defaults = &G.gpu_options;
    G.results_unchecked = gpu_host;
  }
  G.out = dup(2);
  if (G.out < 0) G.out = 2;
  const char *nc = std::getenv("TM_FUZZ_NO_CAPTURE");
  if (!(nc && *nc && *nc != '0')) {
    __sanitizer_set_report_fd(reinterpret_cast<void *>(static_cast<intptr_t>(G.out)));
    G.capture = memfd_create("capi_fuzz_stderr", MFD_CLOEXEC);
  }
  const char *st = std::getenv("TM_FUZZ_STATS");
  if (st && *st && *st != '0') atexit(PrintStats);
  atexit(CoverageReport);
  const char *sweep = std::getenv("TM_FUZZ_SWEEP");
  if (sweep && *sweep && *sweep != '0') {
    const std::vector<std::vector<uint8_t>> inputs = SweepInputs();
    for (const std::vector<uint8_t> &in : inputs) LLVMFuzzerTestOneInput(in.data(), in.size());
    Print("capi_fuzz: swept %zu inputs over the op x parameter cells\n", inputs.size());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ++G.runs;
  BeginCapture();
  {
    Runner r(data, size);
    r.Run();
  }
  std::string err = Captured();
  EndCapture();
  if (!err.empty()) {
    Print("\n==== tinymlir C API fuzzer: VIOLATION ====\nthe library printed to stderr while releasing "
          "its objects:\n%s\n", err.c_str());
    abort();
  }
  return 0;
}
