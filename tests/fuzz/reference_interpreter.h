// A reference interpreter of tinymlir traces for the C API fuzzer (capi_fuzz.cpp).
//
// It knows nothing of the library: it mirrors the documented semantics of
// <tinymlir/tinymlir.h> (NumPy broadcasting and promotion, weak Python-like scalars, true
// division, the documented composites) and predicts, for every tm_op_* call, whether the call
// must succeed, must fail (and with which statuses), or whether the header leaves the outcome
// open. When a trace is complete it evaluates it in double precision.
//
// Accuracy model. Every float element carries its value and a bound on how far any faithful
// implementation may be from it (`e`, absolute). Basic IEEE operations (+ - * / sqrt,
// conversions) on exactly known operands are exact: the reference computes them in double
// and rounds once to the element type, which is what one IEEE f32/f64 operation gives
// (double rounding is innocuous for these with 53 >= 2*24+2 bits). Operations that are not
// correctly rounded (exp, log, tanh, erf, pow: library calls or the f32 polynomial
// approximations) and reductions/matrix products (summation order, BLAS) add their own error,
// and inexact operands propagate theirs. Where the bound straddles a discontinuity (a
// comparison of two values within their bounds, a float-to-int cast near an integer, a
// division by a value whose bound contains 0, a domain edge of log/sqrt, f32 overflow) the
// element becomes "don't care" (dc) and is not compared. The fuzzer compares the remaining
// elements with |lib - ref| <= 2 e + atol + rtol |ref| (see capi_fuzz.cpp).
//
// Where the header leaves behaviour open or the library is known to differ from NumPy, the
// choice is explicit in Semantics (default: tolerate the library's current behaviour and
// count the hit; TM_FUZZ_NUMPY_STRICT=1 expects NumPy's answer). Each such point is listed
// in tests/fuzz/README.md.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace tmref {

// ---- dtypes ------------------------------------------------------------------------------

// TM_F16 and TM_BF16 are storage types (the header): inputs, outputs, constants, data
// movement and casts take them, promotion widens them, and arithmetic whose operands would
// be a half type is TM_ERROR_DTYPE. Their elements are exact doubles of half values.
enum DType : int { kF32 = 1, kF64 = 2, kI32 = 3, kI64 = 4, kBool = 5, kF16 = 6, kBF16 = 7 };

inline bool ValidDtype(int d) { return d >= kF32 && d <= kBF16; }
inline bool IsHalf(int d) { return d == kF16 || d == kBF16; }
inline bool IsFloat(int d) { return d == kF32 || d == kF64 || IsHalf(d); }
inline bool IsInt(int d) { return d == kI32 || d == kI64; }
inline int Kind(int d) { return d == kBool ? 0 : IsInt(d) ? 1 : 2; }
inline size_t DtypeSize(int d) {
  return d == kF32 || d == kI32 ? 4 : d == kBool ? 1 : IsHalf(d) ? 2 : 8;
}
inline const char *DtypeName(int d) {
  switch (d) {
    case kF32: return "f32";
    case kF64: return "f64";
    case kI32: return "i32";
    case kI64: return "i64";
    case kBool: return "bool";
    case kF16: return "f16";
    case kBF16: return "bf16";
  }
  return "invalid";
}

// ---- half-precision values, from their definitions ---------------------------------------

// The value of binary16 bits (1 sign, 5 exponent bits biased by 15, 10 fraction bits) or
// bfloat16 bits (1, 8 biased by 127, 7: the top half of a binary32).
inline double HalfValue(int dt, uint16_t bits) {
  const int exp_bits = dt == kF16 ? 5 : 8, frac_bits = dt == kF16 ? 10 : 7;
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int sign = bits >> 15, e = (bits >> frac_bits) & ((1 << exp_bits) - 1);
  const int f = bits & ((1 << frac_bits) - 1);
  double mag;
  if (e == (1 << exp_bits) - 1) mag = f ? NAN : INFINITY;
  else if (e == 0) mag = std::ldexp(f, 1 - bias - frac_bits);                 // subnormal
  else mag = std::ldexp(f + (1 << frac_bits), e - bias - frac_bits);          // normal
  return sign ? -mag : mag;
}

// The bits of the half value nearest to x, ties to even (x is an f32 value: the header
// rounds f64 and integers to f32 first). Searches the finite values by magnitude, so it
// shares nothing with the library's bit manipulations.
inline uint16_t RoundHalfBits(int dt, float xf) {
  const double x = xf;
  const int exp_bits = dt == kF16 ? 5 : 8, frac_bits = dt == kF16 ? 10 : 7;
  const uint16_t inf_bits = static_cast<uint16_t>(((1 << exp_bits) - 1) << frac_bits);
  if (std::isnan(x)) return static_cast<uint16_t>(inf_bits | (1 << (frac_bits - 1)));
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  // Largest finite magnitude and the step beyond it: values at or past the midpoint
  // between them round to infinity.
  const uint16_t max_bits = static_cast<uint16_t>(inf_bits - 1);
  const double max = HalfValue(dt, max_bits);
  const double step = max - HalfValue(dt, static_cast<uint16_t>(max_bits - 1));
  const double a = std::fabs(x);
  if (a >= max + step / 2) return sign | inf_bits;
  uint16_t lo = 0, hi = max_bits;  // HalfValue(lo) <= a
  while (hi - lo > 1) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    (HalfValue(dt, mid) <= a ? lo : hi) = mid;
  }
  if (HalfValue(dt, hi) <= a) lo = hi;
  const double below = HalfValue(dt, lo);
  if (below == a || lo == max_bits) return sign | lo;
  const double to_below = a - below, to_above = HalfValue(dt, static_cast<uint16_t>(lo + 1)) - a;
  const bool up = to_above < to_below || (to_above == to_below && (lo & 1));
  return static_cast<uint16_t>(sign | (up ? lo + 1 : lo));
}
inline double RoundHalf(int dt, float x) { return HalfValue(dt, RoundHalfBits(dt, x)); }

// NumPy's result_type of two arrays.
inline int Promote(int a, int b) {
  if (a == b) return a;
  if (Kind(a) != Kind(b)) {
    int lo = Kind(a) < Kind(b) ? a : b, hi = Kind(a) < Kind(b) ? b : a;
    // f32 and the half types cannot hold every i32/i64 (NumPy: int32 + float16 is float64)
    if (IsInt(lo) && (hi == kF32 || IsHalf(hi))) return kF64;
    return hi;
  }
  if (IsHalf(a) && IsHalf(b)) return kF32;  // f16 and bf16: neither holds the other
  return DtypeSize(a) >= DtypeSize(b) ? a : b;
}

// NEP 50: an array with a Python scalar keeps its dtype unless the scalar is of a higher
// kind, which then gives that kind's default type (float64, int64).
inline int PromoteWeak(int tensor, int scalar) {
  if (Kind(scalar) <= Kind(tensor)) return tensor;
  return Kind(scalar) == 2 ? kF64 : kI64;
}

inline bool FitsInt(double v, int dt) {
  if (dt == kI32) return v >= -2147483648.0 && v <= 2147483647.0;
  if (dt == kI64) return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  return true;
}

using Shape = std::vector<int64_t>;

inline std::string ShapeStr(const Shape &s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

inline int64_t NumElements(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

struct Type {
  int dtype = kF32;
  Shape shape;
  bool weak = false;  // a Python-like scalar (rank 0)
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const { return NumElements(shape); }
  std::string str() const { return std::string(DtypeName(dtype)) + ShapeStr(shape) + (weak ? "~" : ""); }
};

inline bool Broadcast(const Shape &a, const Shape &b, Shape *out) {
  size_t r = std::max(a.size(), b.size());
  Shape s(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    s[i] = da == 1 ? db : da;
  }
  *out = s;
  return true;
}

// Element count times 8 fits int64 (the library's size rule; larger shapes are refused).
inline bool SizeOk(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > INT64_MAX / 8) return false;
  return true;
}

// ---- expectations ------------------------------------------------------------------------

// tm_status values, as bits of a mask.
enum Status : int {
  kOk = 0, kInvalid = 1, kShapeErr = 2, kDtypeErr = 3, kOutOfRange = 4, kCompileErr = 5,
  kRuntime = 6, kUnsupported = 7, kIo = 8, kOom = 9, kBusy = 10
};
constexpr uint32_t Bit(int s) { return 1u << s; }
constexpr uint32_t kAnyError = 0x7feu;  // statuses 1..10

// What a call may do: succeed (may_succeed) and/or fail with one of `errors`.
struct Expect {
  bool may_succeed = true;
  uint32_t errors = 0;
  std::string why;
  Type type;  // the result when success is possible

  void Fail(uint32_t codes, const std::string &w) {
    may_succeed = false;
    errors |= codes;
    why += (why.empty() ? "" : "; ") + w;
  }
  void Open(uint32_t codes, const std::string &w) {  // the outcome is left open
    errors |= codes;
    why += (why.empty() ? "" : "; ") + w;
  }
  bool Allows(int status) const { return status == kOk ? may_succeed : (errors & Bit(status)) != 0; }
  bool MustSucceed() const { return may_succeed && errors == 0; }
};

// ---- open points and known disagreements --------------------------------------------------

// false: accept the library's current behaviour (and count it); true: expect NumPy's.
struct Semantics {
  bool sum_i32_gives_i64 = false;        // np.sum(int32) is int64
  bool int_pow_negative_raises = false;  // int ** negative int raises in NumPy
  bool compare_big_python_int = false;   // int32 array < 3_000_000_000 is fine in NumPy 2
  bool negative_eps = false;             // layer norm with eps < 0 is just arithmetic
  bool softmax_inf_rows = false;         // exp(x - max) / sum gives NaN for +inf / all -inf rows
  bool zero_d_array_is_strong = false;   // reshape/transpose/slice of a scalar give a 0-d array

  static Semantics FromEnv() {
    Semantics s;
    const char *v = std::getenv("TM_FUZZ_NUMPY_STRICT");
    if (v && *v && *v != '0') {
      s.sum_i32_gives_i64 = s.int_pow_negative_raises = true;
      s.compare_big_python_int = true;
      s.negative_eps = s.softmax_inf_rows = s.zero_d_array_is_strong = true;
    }
    return s;
  }
};

// How often each open point / tolerated disagreement was met (printed by the fuzzer).
inline std::map<std::string, long> &Hits() {
  static auto *hits = new std::map<std::string, long>;  // never destroyed: read at exit
  return *hits;
}
inline void Hit(const char *what) { ++Hits()[what]; }

// ---- elements with error bounds -------------------------------------------------------------

struct El {
  double v = 0;    // float value (already rounded to the element type)
  double e = 0;    // bound on |implementation - v|
  int64_t i = 0;   // integer/bool value
  bool dc = false; // don't care: the documented semantics do not pin this element down
};

inline El DC() { El o; o.dc = true; return o; }
inline El F(double v, double e = 0) { El o; o.v = v; o.e = e; return o; }
inline El I(int64_t i) { El o; o.i = i; return o; }

// Unit roundoff, largest finite value and rounding of each float type (only casts round to
// a half type: no arithmetic produces one).
inline double U(int dt) {
  return dt == kF32 ? 0x1p-24 : dt == kF16 ? 0x1p-11 : dt == kBF16 ? 0x1p-8 : 0x1p-53;
}
inline double Lim(int dt) {
  return dt == kF32 ? static_cast<double>(FLT_MAX) : dt == kF16 ? 65504.0
         : dt == kBF16 ? 0x1.fep127 : DBL_MAX;
}
// The smallest positive normal value: below it rounding errors are absolute.
inline double MinNormal(int dt) {
  return dt == kF32 ? static_cast<double>(FLT_MIN) : dt == kF16 ? 0x1p-14
         : dt == kBF16 ? 0x1p-126 : DBL_MIN;
}
inline double RoundTo(int dt, double x) {
  if (IsHalf(dt)) return RoundHalf(dt, static_cast<float>(x));  // through f32, as the header says
  return dt == kF32 ? static_cast<double>(static_cast<float>(x)) : x;
}
// Product of a magnitude and an error bound where 0 * inf means 0 (an exact infinity).
inline double M(double x, double e) { return e == 0 ? 0 : x * e; }
// The sign of a zero that the documented semantics leave open: a tiny error marks it.
constexpr double kZeroSign = 1e-300;
// Error of the f32 polynomial approximations (tanh, exp, erf), in units of 2^-24, and of
// library calls (log, pow, f64 transcendentals).
constexpr double kApproxF32 = 8;  // about 4 ulp: the ~2 ulp of the approximation, and slack
constexpr double kLibm = 4;

inline int64_t Wrap(int dt, uint64_t x) {
  if (dt == kI32) return static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(x)));
  if (dt == kBool) return x != 0;
  return static_cast<int64_t>(x);
}

// The result of one float operation: `r` computed in double from the operands' values,
// `prop` the propagated error, `exact` whether every operand was exact, `err_u` the
// operation's own error in units of U(dt) (0: correctly rounded).
inline El Finish(int dt, double r, double prop, bool exact, double err_u) {
  if (std::isnan(prop)) return DC();
  if (!std::isfinite(r)) {
    if (!exact || prop != 0) return DC();
    return F(r);
  }
  if (exact && prop == 0 && err_u == 0) return F(RoundTo(dt, r));
  double u = U(dt), e = prop;
  // Rounding is relative down to the smallest normal value, absolute below it (which
  // matters for the half types: f16's subnormals start at 6.1e-5).
  if (!exact || prop != 0) e += 2 * u * (std::fabs(r) + prop + MinNormal(dt));
  if (err_u != 0) e += err_u * u * std::fabs(r) + MinNormal(dt);
  if (!std::isfinite(e)) return DC();
  double lim = Lim(dt);
  if (std::fabs(r) + e >= lim * (1 - 4 * u)) {
    if (std::fabs(r) - e > lim * (1 + 4 * u)) return F(std::copysign(INFINITY, r));
    return DC();  // near overflow
  }
  return F(RoundTo(dt, r), e);
}

// The unary ops are the library's table (core/trace/unary_ops.def): their kinds, C values,
// names, dtype rules, accuracy and reference expressions all come from it.
enum class Op {
  kInput, kScalar, kConstant,
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kLess, kGreater, kEqual, kWhere,
#define TM_UNARY_OP(Name, ...) k##Name,
#include "core/trace/unary_ops.def"
#undef TM_UNARY_OP
  kCast,
  kMatmul, kSum, kRMax, kMean, kVar, kReshape, kTranspose, kSlice, kConcat, kGather,
  kSoftmax, kLayerNorm, kGelu, kCausalMask, kArgMax
};

// One unary op of the table, as the reference evaluates it.
struct UnaryRef {
  Op op;
  int c_value;       // tm_unary_op
  const char *name;
  bool keeps_number;  // kKeepsNumber: integers keep their dtype, and the op is exact
  double ulps_f32, ulps_f64;
  enum Domain { kReals, kNonNegative, kPositive } domain;
  double (*f)(double x, int dt);  // the reference expression; dt rounds intermediates (R)
};

inline const std::vector<UnaryRef> &UnaryRefs() {
  // Never destroyed: exit handlers (the fuzzer's coverage report) still read it.
  static const std::vector<UnaryRef> &refs = *new std::vector<UnaryRef>{
#define TM_UNARY_OP(Name, C_ENUMERATOR, c_value, name, rule, ulps_f32, ulps_f64, domain,   \
                    reference, lowering)                                                   \
  {Op::k##Name, c_value, name, #rule == std::string("kKeepsNumber"), ulps_f32, ulps_f64,   \
   UnaryRef::domain, [](double x, int dt) -> double {                                      \
     auto R = [dt](double v) { return RoundTo(dt, v); };                                   \
     (void)R;                                                                              \
     return reference;                                                                     \
   }},
#include "core/trace/unary_ops.def"
#undef TM_UNARY_OP
  };
  return refs;
}

inline const UnaryRef *FindUnaryRef(Op op) {
  for (const UnaryRef &u : UnaryRefs())
    if (u.op == op) return &u;
  return nullptr;
}

inline const char *OpName(Op op) {
  if (const UnaryRef *u = FindUnaryRef(op)) return u->name;
  switch (op) {
    case Op::kInput: return "input";
    case Op::kScalar: return "scalar";
    case Op::kConstant: return "constant";
    case Op::kAdd: return "add";
    case Op::kSub: return "sub";
    case Op::kMul: return "mul";
    case Op::kDiv: return "div";
    case Op::kPow: return "pow";
    case Op::kMax: return "maximum";
    case Op::kMin: return "minimum";
    case Op::kLess: return "less";
    case Op::kGreater: return "greater";
    case Op::kEqual: return "equal";
    case Op::kWhere: return "where";
    case Op::kCast: return "cast";
    case Op::kMatmul: return "matmul";
    case Op::kSum: return "reduce_sum";
    case Op::kRMax: return "reduce_max";
    case Op::kMean: return "reduce_mean";
    case Op::kVar: return "reduce_var";
    case Op::kReshape: return "reshape";
    case Op::kTranspose: return "transpose";
    case Op::kSlice: return "slice";
    case Op::kConcat: return "concat";
    case Op::kGather: return "gather";
    case Op::kSoftmax: return "softmax";
    case Op::kLayerNorm: return "layer_norm";
    case Op::kGelu: return "gelu_tanh";
    case Op::kCausalMask: return "causal_mask";
    case Op::kArgMax: return "argmax";
    default: return "unknown";
  }
}
inline bool IsComparison(Op op) { return op == Op::kLess || op == Op::kGreater || op == Op::kEqual; }
// Unary ops that compute integers in f64 (the table's kFloatResult rule).
inline bool IsTranscendental(Op op) {
  const UnaryRef *u = FindUnaryRef(op);
  return u && !u->keeps_number;
}

// Float binary operation in dtype dt.
inline El FloatBinary(Op op, int dt, const El &a, const El &b) {
  if (a.dc || b.dc) return DC();
  const bool exact = a.e == 0 && b.e == 0;
  const double x = a.v, y = b.v;
  const bool xinf = std::isinf(x), yinf = std::isinf(y);
  double r = 0, prop = 0, err_u = 0;
  switch (op) {
    case Op::kAdd:
    case Op::kSub: {
      double yy = op == Op::kSub ? -y : y;
      r = x + yy;
      if (!exact) {
        // An exact infinity with a finite value is that infinity, whatever the error.
        if ((xinf && a.e == 0 && std::isfinite(yy)) || (yinf && b.e == 0 && std::isfinite(x)))
          return F(r);
        prop = a.e + b.e;
      }
      break;
    }
    case Op::kMul:
      r = x * y;
      if (!exact) {
        if (xinf && a.e == 0 && std::isfinite(y)) return std::fabs(y) > b.e ? F(r) : DC();
        if (yinf && b.e == 0 && std::isfinite(x)) return std::fabs(x) > a.e ? F(r) : DC();
        prop = M(std::fabs(x), b.e) + M(std::fabs(y), a.e) + a.e * b.e;
      }
      break;
    case Op::kDiv:
      r = x / y;
      if (!exact) {
        if (!std::isfinite(x) || !std::isfinite(y)) {
          if (yinf && b.e == 0 && std::isfinite(x)) return F(r, kZeroSign);
          if (xinf && a.e == 0 && std::isfinite(y) && std::fabs(y) > b.e) return F(r);
          return DC();
        }
        if (std::fabs(y) <= b.e) return DC();
        for (double cx : {x - a.e, x + a.e})
          for (double cy : {y - b.e, y + b.e}) prop = std::max(prop, std::fabs(cx / cy - r));
      }
      break;
    case Op::kPow:
      r = std::pow(x, y);
      err_u = kLibm;
      if (!exact) {
        if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(r)) return DC();
        if (std::fabs(x) <= a.e) return DC();
        if (x < 0) {
          if (b.e != 0) return DC();
          if (y != std::floor(y)) return F(NAN);
        }
        for (double cx : {x - a.e, x + a.e})
          for (double cy : {y - b.e, y + b.e}) {
            double c = std::pow(cx, cy);
            if (!std::isfinite(c)) return DC();
            prop = std::max(prop, std::fabs(c - r));
          }
      }
      break;
    case Op::kMax:
    case Op::kMin:
      if (std::isnan(x) || std::isnan(y)) return F(NAN);  // NaN propagates (NaN is exact)
      r = op == Op::kMax ? (x > y ? x : y) : (x < y ? x : y);
      prop = std::max(a.e, b.e);
      if (x == 0 && y == 0 && std::signbit(x) != std::signbit(y)) {
        prop = std::max(prop, kZeroSign);  // the sign of max(-0, +0) is not specified
        return F(r, prop);
      }
      if (exact) return F(r);
      return F(r, prop);  // picks one operand: no rounding
    default: return DC();
  }
  return Finish(dt, r, prop, exact, err_u);
}

inline El FloatCompare(Op op, const El &a, const El &b) {
  if (a.dc || b.dc) return DC();
  auto cmp = [&](double x, double y) {
    return op == Op::kLess ? x < y : op == Op::kGreater ? x > y : x == y;
  };
  if (a.e == 0 && b.e == 0) return I(cmp(a.v, b.v));
  if (std::isnan(a.v) || std::isnan(b.v)) return I(0);
  if (std::fabs(a.v - b.v) <= a.e + b.e || std::isnan(std::fabs(a.v - b.v))) return DC();
  return I(cmp(a.v, b.v));
}

// A float unary op of the table. Its own error is the table's ulps for the dtype; an
// operand's error is carried through the function's values at the ends of its interval,
// which bounds it for the table's kFloatResult ops, all monotonic (kKeepsNumber ops, neg
// and abs, move an error unchanged).
inline El FloatUnary(Op op, int dt, const El &a) {
  const UnaryRef *u = FindUnaryRef(op);
  if (a.dc || !u) return DC();
  const double x = a.v;
  const bool exact = a.e == 0;
  const double r = u->f(x, dt);
  if (u->keeps_number) return exact ? F(r) : F(r, a.e);
  double prop = 0;
  const double err_u = dt == kF32 ? u->ulps_f32 : u->ulps_f64;
  if (!exact) {
    if (u->domain == UnaryRef::kPositive && x - a.e <= 0) return x + a.e < 0 ? F(NAN) : DC();
    if (u->domain == UnaryRef::kNonNegative && x - a.e < 0) return x + a.e < 0 ? F(NAN) : DC();
    prop = std::max(std::fabs(u->f(x - a.e, dt) - r), std::fabs(u->f(x + a.e, dt) - r));
  }
  return Finish(dt, r, prop, exact, err_u);
}

// Conversion of one element (tm_op_cast and implicit promotion).
inline El CastEl(int from, int to, const El &a) {
  if (a.dc) return DC();
  if (from == to) return a;
  if (IsFloat(from)) {
    if (IsFloat(to)) {
      if (a.e == 0) return F(RoundTo(to, a.v));
      return Finish(to, a.v, a.e, false, 0);
    }
    if (to == kBool) {
      if (a.e > 0 && std::fabs(a.v) <= a.e) return DC();
      return I(a.v != 0);  // NaN != 0
    }
    // Truncated toward zero, saturating, NaN to 0 (the header; NumPy leaves these undefined).
    if (std::isnan(a.v)) return a.e == 0 ? I(0) : DC();
    const auto saturate = [to](double t) -> int64_t {
      const double limit = to == kI32 ? 0x1p31 : 0x1p63;
      if (t >= limit) return to == kI32 ? INT32_MAX : INT64_MAX;
      if (t < -limit) return to == kI32 ? INT32_MIN : INT64_MIN;
      return static_cast<int64_t>(t);
    };
    const int64_t lo = saturate(std::trunc(a.v - a.e)), hi = saturate(std::trunc(a.v + a.e));
    if (lo != hi) return DC();
    return I(lo);
  }
  if (IsFloat(to)) {
    // Integer to float: one correct rounding (no detour through double for f32); to a half
    // type through f32, as the header says.
    if (IsHalf(to)) return F(RoundHalf(to, static_cast<float>(a.i)));
    return F(to == kF32 ? static_cast<double>(static_cast<float>(a.i)) : static_cast<double>(a.i));
  }
  if (to == kBool) return I(a.i != 0);
  return I(Wrap(to, static_cast<uint64_t>(a.i)));
}

inline El IntBinary(Op op, int dt, const El &a, const El &b, const Semantics &sem, std::string *strict) {
  if (a.dc || b.dc) return DC();
  const uint64_t x = static_cast<uint64_t>(a.i), y = static_cast<uint64_t>(b.i);
  if (dt == kBool) {
    switch (op) {
      case Op::kAdd: case Op::kMax: return I((a.i | b.i) & 1);
      case Op::kMul: case Op::kMin: return I(a.i & b.i & 1);
      case Op::kLess: return I(a.i < b.i);
      case Op::kGreater: return I(a.i > b.i);
      case Op::kEqual: return I(a.i == b.i);
      default: return DC();
    }
  }
  switch (op) {
    case Op::kAdd: return I(Wrap(dt, x + y));
    case Op::kSub: return I(Wrap(dt, x - y));
    case Op::kMul: return I(Wrap(dt, x * y));
    case Op::kMax: return I(std::max(a.i, b.i));
    case Op::kMin: return I(std::min(a.i, b.i));
    case Op::kLess: return I(a.i < b.i);
    case Op::kGreater: return I(a.i > b.i);
    case Op::kEqual: return I(a.i == b.i);
    case Op::kPow: {
      if (b.i < 0) {
        // The header: 1 / x^n truncated toward zero (NumPy refuses it at run time).
        Hit("header (NumPy raises ValueError): integer ** negative integer");
        if (sem.int_pow_negative_raises && strict)
          *strict = "integer ** negative integer: NumPy raises ValueError, the program ran";
        if (a.i == 1) return I(1);
        if (a.i == -1) return I((b.i & 1) ? -1 : 1);
        return I(0);
      }
      uint64_t result = 1, base = x;
      for (uint64_t n = y; n; n >>= 1) {
        if (n & 1) result *= base;
        base *= base;
      }
      return I(Wrap(dt, result));
    }
    default: return DC();
  }
}

// ---- tensors --------------------------------------------------------------------------------

struct Tensor {
  Type type;
  std::vector<El> el;
  bool literal = false;  // a tm_op_scalar value: the exact double, rounded where it is used
  double lit = 0;
};

inline std::vector<int64_t> Strides(const Shape &s) {
  std::vector<int64_t> st(s.size());
  int64_t step = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = step;
    step *= s[i];
  }
  return st;
}

// The element of dtype `dtype` at p, exactly as stored (a bool is its byte, whatever it is).
inline El LoadElement(int dtype, const unsigned char *p) {
  switch (dtype) {
    case kF32: { float f; std::memcpy(&f, p, 4); return F(f); }
    case kF64: { double d; std::memcpy(&d, p, 8); return F(d); }
    case kF16: case kBF16: { uint16_t h; std::memcpy(&h, p, 2); return F(HalfValue(dtype, h)); }
    case kI32: { int32_t i; std::memcpy(&i, p, 4); return I(i); }
    case kI64: { int64_t i; std::memcpy(&i, p, 8); return I(i); }
    case kBool: return I(*p);
  }
  return DC();
}

inline El LiteralAs(double lit, int dt) {
  if (IsFloat(dt)) return F(RoundTo(dt, lit));
  if (dt == kBool) return I(lit != 0);
  if (std::isnan(lit) || !FitsInt(lit, dt)) return DC();
  return I(Wrap(dt, static_cast<uint64_t>(static_cast<int64_t>(lit))));
}

// t converted to dtype dt (a literal is converted from its exact value).
inline Tensor Convert(const Tensor &t, int dt) {
  Tensor o;
  o.type = t.type;
  o.type.dtype = dt;
  if (t.literal) {
    o.el.assign(1, LiteralAs(t.lit, dt));
    return o;
  }
  o.el.reserve(t.el.size());
  for (const El &x : t.el) o.el.push_back(CastEl(t.type.dtype, dt, x));
  return o;
}

// For each element of `out`, the flat index of the broadcast operand of shape `s`.
inline std::vector<int64_t> BroadcastIndex(const Shape &s, const Shape &out) {
  int64_t n = NumElements(out);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> st = Strides(s);
  size_t r = out.size(), off = r - s.size();
  std::vector<int64_t> pos(r, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t f = 0;
    for (size_t j = off; j < r; ++j)
      if (s[j - off] != 1) f += pos[j] * st[j - off];
    idx[static_cast<size_t>(k)] = f;
    for (size_t j = r; j-- > 0;) {
      if (++pos[j] < out[j]) break;
      pos[j] = 0;
    }
  }
  return idx;
}

// ---- typing of binary operations (shared by ops and composites) ----------------------------

struct BinaryTyping {
  Expect ex;
  int operand = kF32;  // dtype both operands are converted to
};

// The header: arithmetic whose operands would be of a half type is TM_ERROR_DTYPE.
inline void RefuseHalf(Expect *ex, int operand_dtype) {
  if (IsHalf(operand_dtype))
    ex->Fail(Bit(kDtypeErr), std::string(DtypeName(operand_dtype)) + " is a storage type");
}

inline BinaryTyping TypeBinary(Op op, const Type &a, bool lit_a, double va, const Type &b,
                               bool lit_b, double vb, const Semantics &sem) {
  BinaryTyping t;
  Shape shape;
  if (!Broadcast(a.shape, b.shape, &shape)) {
    t.ex.Fail(Bit(kShapeErr), "shapes " + ShapeStr(a.shape) + " and " + ShapeStr(b.shape) +
                                  " do not broadcast");
    return t;
  }
  if (!SizeOk(shape)) t.ex.Fail(Bit(kShapeErr), "result too large");
  int d;
  if (a.weak && !b.weak) d = PromoteWeak(b.dtype, a.dtype);
  else if (b.weak && !a.weak) d = PromoteWeak(a.dtype, b.dtype);
  else d = Promote(a.dtype, b.dtype);
  int operand = d, result = d;
  if (d == kBool && op == Op::kSub) t.ex.Fail(Bit(kDtypeErr), "bool - bool (NumPy: TypeError)");
  if (d == kBool && op == Op::kPow) {
    Hit("disagreement: bool ** bool refused (NumPy: int8)");
    t.ex.Fail(Bit(kDtypeErr), "bool ** bool (tinymlir has no int8)");
  }
  RefuseHalf(&t.ex, d);
  if (op == Op::kDiv && !IsFloat(d)) operand = result = kF64;
  if (IsComparison(op)) result = kBool;
  for (int side = 0; side < 2; ++side) {
    bool lit = side ? lit_b : lit_a;
    double v = side ? vb : va;
    if (lit && IsInt(operand) && !FitsInt(v, operand)) {
      if (IsComparison(op)) {
        Hit("disagreement: comparison with a Python int outside the array's int range refused");
        if (!sem.compare_big_python_int)
          t.ex.Fail(kAnyError, "comparison with an int scalar that does not fit (tolerated)");
      } else {
        t.ex.Fail(kAnyError, "int scalar does not fit " + std::string(DtypeName(operand)) +
                                 " (NumPy: OverflowError)");
      }
    }
  }
  t.operand = operand;
  t.ex.type.dtype = result;
  t.ex.type.shape = shape;
  t.ex.type.weak = a.weak && b.weak;
  return t;
}

// ---- the traced program ------------------------------------------------------------------

struct Node {
  Op op = Op::kInput;
  Type type;
  std::vector<int> args;
  std::vector<int64_t> ints;  // axis/keepdims, perm, begin, offset
  double scalar = 0;          // kScalar value, kLayerNorm eps
  int input_index = -1;
  int operand = 0;            // dtype operands are converted to (binary, where, concat, ...)
  Tensor constant;
};

// Everything one evaluation produced.
struct RunResult {
  std::vector<Tensor> values;  // per node (live ones only)
  uint32_t invoke_errors = 0;  // statuses tm_invoke may return because of the data
  bool invoke_must_fail = false;
  std::string invoke_why;
  std::string strict_failure;  // NumPy would raise (only with strict Semantics)
};

class Program {
 public:
  explicit Program(Semantics sem) : sem_(sem) {}

  int size() const { return static_cast<int>(nodes_.size()); }
  const Node &node(int id) const { return nodes_[static_cast<size_t>(id)]; }
  const Type &type(int id) const { return node(id).type; }
  bool is_literal(int id) const { return node(id).op == Op::kScalar; }
  const std::vector<int> &inputs() const { return inputs_; }
  const std::vector<int> &outputs() const { return outputs_; }
  bool ended() const { return ended_; }
  const Semantics &semantics() const { return sem_; }

  // Adds the node of the last prediction (call when the library succeeded).
  int Commit() {
    nodes_.push_back(pending_);
    if (pending_.op == Op::kInput) inputs_.push_back(size() - 1);
    return size() - 1;
  }

  // ---- predictions, one per tm_op_* ---------------------------------------------------

  Expect Input(int dtype, int rank, const int64_t *shape) {
    Expect ex = Start(Op::kInput);
    if (!ValidDtype(dtype)) ex.Fail(Bit(kDtypeErr), "unknown dtype");
    Shape s;
    if (!ReadShape(rank, shape, &s, &ex)) return ex;
    pending_.input_index = static_cast<int>(inputs_.size());
    return Done(ex, {dtype, s, false});
  }

  Expect Scalar(int dtype, double value) {
    Expect ex = Start(Op::kScalar);
    if (!ValidDtype(dtype)) {
      ex.Fail(Bit(kDtypeErr), "unknown dtype");
      return ex;
    }
    if (IsInt(dtype)) {
      if (!std::isfinite(value) || !FitsInt(value, dtype)) {
        // The header names TM_ERROR_DTYPE only; any error is accepted here.
        ex.Fail(kAnyError, "int scalar not finite or out of range");
        return ex;
      }
      if (value != std::trunc(value)) Hit("open: fractional value for an int scalar (truncated)");
      value = std::trunc(value);
    }
    if (dtype == kBool) value = value != 0 ? 1 : 0;
    pending_.scalar = value;
    return Done(ex, {dtype, {}, true});
  }

  // tm_op_constant: `present` false means data == NULL.
  Expect Constant(bool present, int dtype, int rank, const int64_t *shape, const int64_t *strides,
                  const void *data) {
    Expect ex = Start(Op::kConstant);
    if (!present) {
      ex.Fail(Bit(kInvalid), "data is NULL");
      return ex;
    }
    if (!ValidDtype(dtype)) ex.Fail(Bit(kDtypeErr), "unknown dtype");
    Shape s;
    if (!ReadShape(rank, shape, &s, &ex)) return ex;
    if (!ex.may_succeed) return ex;
    int64_t n = NumElements(s);
    if (n > 0 && !data) {
      ex.Fail(Bit(kInvalid), "data->data is NULL");
      return ex;
    }
    Tensor t;
    t.type = {dtype, s, false};
    std::vector<int64_t> st = strides ? std::vector<int64_t>(strides, strides + rank) : Strides(s);
    std::vector<int64_t> pos(s.size(), 0);
    size_t esz = DtypeSize(dtype);
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (size_t j = 0; j < s.size(); ++j) off += pos[j] * st[j];
      const unsigned char *p = static_cast<const unsigned char *>(data) + off * static_cast<int64_t>(esz);
      t.el.push_back(ReadElement(dtype, p, &ex));
      for (size_t j = s.size(); j-- > 0;) {
        if (++pos[j] < s[j]) break;
        pos[j] = 0;
      }
    }
    pending_.constant = t;
    return Done(ex, t.type);
  }

  Expect Binary(Op op, int a, int b) {
    Expect ex = Start(op);
    if (!Values(&ex, {a, b})) return ex;
    BinaryTyping t = TypeBinary(op, type(a), is_literal(a), node(a).scalar, type(b),
                                is_literal(b), node(b).scalar, sem_);
    pending_.args = {a, b};
    pending_.operand = t.operand;
    t.ex.why = std::string(OpName(op)) + ": " + t.ex.why;
    return Done(t.ex, t.ex.type);
  }

  Expect Where(int c, int a, int b) {
    Expect ex = Start(Op::kWhere);
    if (!Values(&ex, {c, a, b})) return ex;
    const Type &tc = type(c), &ta = type(a), &tb = type(b);
    if (tc.dtype != kBool) ex.Fail(Bit(kDtypeErr), "condition is not bool");
    Shape ab, s;
    if (!Broadcast(ta.shape, tb.shape, &ab) || !Broadcast(tc.shape, ab, &s)) {
      ex.Fail(Bit(kShapeErr), "shapes do not broadcast");
      return ex;
    }
    int d;
    if (ta.weak && !tb.weak) d = PromoteWeak(tb.dtype, ta.dtype);
    else if (tb.weak && !ta.weak) d = PromoteWeak(ta.dtype, tb.dtype);
    else d = Promote(ta.dtype, tb.dtype);
    for (int v : {a, b})
      if (is_literal(v) && IsInt(d) && !FitsInt(node(v).scalar, d))
        ex.Fail(kAnyError, "int scalar does not fit the result dtype");
    pending_.args = {c, a, b};
    pending_.operand = d;
    return Done(ex, {d, s, false});
  }

  Expect Unary(Op op, int x) {
    Expect ex = Start(op);
    if (!Values(&ex, {x})) return ex;
    const Type &t = type(x);
    if (t.dtype == kBool) ex.Fail(Bit(kDtypeErr), "bool operand");
    int d = IsTranscendental(op) && !IsFloat(t.dtype) ? kF64 : t.dtype;
    RefuseHalf(&ex, d);
    pending_.args = {x};
    pending_.operand = d;
    return Done(ex, {d, t.shape, t.weak});
  }

  Expect Cast(int x, int dtype) {
    Expect ex = Start(Op::kCast);
    bool known = Values(&ex, {x});
    if (!ValidDtype(dtype)) {
      ex.Fail(Bit(kDtypeErr), "unknown dtype");
      return ex;
    }
    if (!known) return ex;
    if (is_literal(x) && IsInt(dtype) && (std::isnan(node(x).scalar) || !FitsInt(node(x).scalar, dtype))) {
      if (IsInt(type(x).dtype)) ex.Fail(kAnyError, "int scalar does not fit (NumPy: OverflowError)");
      else {
        Hit("open: cast of a float scalar outside the int range");
        ex.Open(kAnyError, "float scalar outside the int range (value unspecified)");
      }
    }
    pending_.args = {x};
    return Done(ex, {dtype, type(x).shape, false});
  }

  Expect Matmul(int a, int b) {
    Expect ex = Start(Op::kMatmul);
    if (!Values(&ex, {a, b})) return ex;
    const Shape &sa = type(a).shape, &sb = type(b).shape;
    if (sa.size() < 2 || sb.size() < 2) {
      ex.Fail(Bit(kShapeErr), "rank < 2");
      return ex;
    }
    if (sa.back() != sb[sb.size() - 2]) ex.Fail(Bit(kShapeErr), "inner dimensions differ");
    if (sb.size() > 2 && !(sa.size() == sb.size() && std::equal(sa.begin(), sa.end() - 2, sb.begin())))
      ex.Fail(Bit(kShapeErr), "batch dimensions differ (the header asks for equal ones)");
    int d = Promote(type(a).dtype, type(b).dtype);
    if (d == kBool) ex.Fail(Bit(kDtypeErr), "bool operands");
    RefuseHalf(&ex, d);
    Shape s(sa.begin(), sa.end() - 1);
    s.push_back(sb.back());
    if (!SizeOk(s)) ex.Fail(Bit(kShapeErr), "result too large");
    pending_.args = {a, b};
    pending_.operand = d;
    return Done(ex, {d, s, false});
  }

  Expect Reduce(Op op, int x, int32_t axis, int32_t keepdims) {
    Expect ex = Start(op);
    if (!Values(&ex, {x})) return ex;
    const Type &t = type(x);
    int r = t.rank();
    if (r == 0 || axis < -r || axis >= r) {
      ex.Fail(Bit(kOutOfRange), "axis out of range");
      if (t.dtype == kBool) ex.Fail(Bit(kDtypeErr), "bool operand");
      RefuseHalf(&ex, t.dtype);
      return ex;
    }
    int ax = axis < 0 ? axis + r : axis;
    if (t.dtype == kBool) ex.Fail(Bit(kDtypeErr), "bool operand");
    RefuseHalf(&ex, t.dtype);
    Shape s = t.shape;
    if (keepdims) s[static_cast<size_t>(ax)] = 1;
    else s.erase(s.begin() + ax);
    int d = t.dtype;
    if ((op == Op::kMean || op == Op::kVar) && !IsFloat(d)) d = kF64;
    if (op == Op::kSum && d == kI32) {
      Hit("header (NumPy: int64): reduce_sum of i32 is i32");
      if (sem_.sum_i32_gives_i64) d = kI64;
    }
    if (op == Op::kRMax && t.shape[static_cast<size_t>(ax)] == 0 && NumElements(s) > 0)
      ex.Fail(Bit(kShapeErr), "maximum over an empty axis (NumPy: ValueError)");
    pending_.args = {x};
    pending_.ints = {ax, keepdims ? 1 : 0};
    pending_.operand = d;
    return Done(ex, {d, s, false});
  }

  Expect Reshape(int x, int32_t rank, const int64_t *shape) {
    Expect ex = Start(Op::kReshape);
    // Checks that do not need x may fail first: accumulate them with a bad value.
    bool known = Values(&ex, {x});
    if (rank < 0 || rank > 8) {
      ex.Fail(Bit(kShapeErr), "rank outside 0..8");
      return ex;
    }
    if (rank > 0 && !shape) {
      ex.Fail(Bit(kInvalid), "shape is NULL");
      return ex;
    }
    Shape s(shape, shape + rank);
    int inferred = -1;
    int64_t product = 1;
    bool overflow = false;
    for (int i = 0; i < rank; ++i) {
      if (s[static_cast<size_t>(i)] == -1) {
        if (inferred >= 0) ex.Fail(Bit(kShapeErr), "several -1");
        inferred = i;
      } else if (s[static_cast<size_t>(i)] < 0) {
        ex.Fail(Bit(kShapeErr), "negative dimension");
      } else if (__builtin_mul_overflow(product, s[static_cast<size_t>(i)], &product)) {
        overflow = true;
      }
    }
    if (overflow) ex.Fail(Bit(kShapeErr), "too many elements");
    if (!known || !ex.may_succeed) return ex;
    const Type &t = type(x);
    int64_t total = t.numel();
    if (inferred >= 0) {
      if (product == 0 || total % product != 0) {
        ex.Fail(Bit(kShapeErr), "cannot infer -1");
        return ex;
      }
      s[static_cast<size_t>(inferred)] = total / product;
    }
    if (NumElements(s) != total) {
      ex.Fail(Bit(kShapeErr), "element counts differ");
      return ex;
    }
    pending_.args = {x};
    return Done(ex, {t.dtype, s, IdentityKeepsWeak(t, s == t.shape)});
  }

  // perm_null: perm == NULL.
  Expect Transpose(int x, const int32_t *perm, int32_t n) {
    Expect ex = Start(Op::kTranspose);
    if (!Values(&ex, {x})) return ex;
    const Type &t = type(x);
    int r = t.rank();
    if (n < 0 || (n > 0 && !perm)) {
      ex.Fail(Bit(kInvalid), "perm is NULL or n_perm < 0");
      return ex;
    }
    std::vector<int64_t> p;
    if (!perm) {
      for (int i = 0; i < r; ++i) p.push_back(r - 1 - i);
    } else {
      p.assign(perm, perm + n);
    }
    if (static_cast<int>(p.size()) != r) {
      ex.Fail(Bit(kInvalid), "n_perm is not the rank");
      return ex;
    }
    for (int64_t &v : p)
      if (v < 0 && v >= -r) v += r;  // from the end, as NumPy's
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (int64_t v : p) {
      if (v < 0 || v >= r || seen[static_cast<size_t>(v)]) {
        ex.Fail(Bit(kOutOfRange), "not a permutation");
        return ex;
      }
      seen[static_cast<size_t>(v)] = true;
    }
    Shape s;
    bool identity = true;
    for (int i = 0; i < r; ++i) {
      s.push_back(t.shape[static_cast<size_t>(p[static_cast<size_t>(i)])]);
      identity &= p[static_cast<size_t>(i)] == i;
    }
    pending_.args = {x};
    pending_.ints = p;
    return Done(ex, {t.dtype, s, IdentityKeepsWeak(t, identity)});
  }

  Expect Slice(int x, int32_t rank, const int64_t *begin, const int64_t *end) {
    Expect ex = Start(Op::kSlice);
    if (rank < 0 || (rank > 0 && (!begin || !end))) {
      ex.Fail(Bit(kInvalid), "begin/end NULL or rank < 0");
      return ex;
    }
    if (!Values(&ex, {x})) return ex;
    const Type &t = type(x);
    if (rank != t.rank()) {
      ex.Fail(Bit(kInvalid), "rank is not x's rank");
      return ex;
    }
    Shape s;
    for (int i = 0; i < rank; ++i) {
      if (begin[i] < 0 || begin[i] > end[i] || end[i] > t.shape[static_cast<size_t>(i)]) {
        ex.Fail(Bit(kOutOfRange), "slice bounds");
        return ex;
      }
      s.push_back(end[i] - begin[i]);
    }
    pending_.args = {x};
    pending_.ints.assign(begin, begin + rank);
    return Done(ex, {t.dtype, s, IdentityKeepsWeak(t, s == t.shape)});
  }

  Expect Concat(const int *xs, int32_t n, int32_t axis) {
    Expect ex = Start(Op::kConcat);
    if (n < 1 || !xs) {
      ex.Fail(Bit(kInvalid), "n < 1 or xs NULL");
      return ex;
    }
    std::vector<int> v(xs, xs + n);
    if (!Values(&ex, v)) return ex;
    const Type &first = type(v[0]);
    int r = first.rank();
    if (r == 0 || axis < -r || axis >= r) {
      ex.Fail(Bit(kOutOfRange), "axis out of range");
      return ex;
    }
    int ax = axis < 0 ? axis + r : axis;
    Shape s = first.shape;
    s[static_cast<size_t>(ax)] = 0;
    int d = first.dtype;
    for (int id : v) {
      const Type &t = type(id);
      bool agree = t.rank() == r;
      for (int i = 0; agree && i < r; ++i)
        agree = i == ax || t.shape[static_cast<size_t>(i)] == first.shape[static_cast<size_t>(i)];
      if (!agree) {
        ex.Fail(Bit(kShapeErr), "shapes differ outside the axis");
        return ex;
      }
      s[static_cast<size_t>(ax)] += t.shape[static_cast<size_t>(ax)];
      d = Promote(d, t.dtype);
    }
    pending_.args = v;
    pending_.ints = {ax};
    pending_.operand = d;
    return Done(ex, {d, s, n == 1 ? first.weak : false});
  }

  Expect Gather(int table, int indices) {
    Expect ex = Start(Op::kGather);
    if (!Values(&ex, {table, indices})) return ex;
    const Type &tt = type(table), &it = type(indices);
    if (!IsInt(it.dtype)) ex.Fail(Bit(kDtypeErr), "indices are not i32/i64");
    if (tt.rank() == 0) {
      ex.Fail(Bit(kShapeErr), "table rank 0");
      return ex;
    }
    if (tt.shape[0] == 0) {
      // Zero-sized dims are valid everywhere (header): with no indices the result is empty.
      // With indices, every index is outside the table: refusing at the call is fine, and
      // so is accepting (input indices then fail at tm_invoke).
      if (it.numel() > 0) ex.Open(kAnyError, "indices into a table with no rows");
    }
    Shape s = it.shape;
    s.insert(s.end(), tt.shape.begin() + 1, tt.shape.end());
    if (s.size() > 8) ex.Fail(Bit(kShapeErr), "result rank > 8");
    pending_.args = {table, indices};
    return Done(ex, {tt.dtype, s, false});
  }

  Expect Softmax(int x, int32_t axis) {
    Expect ex = Start(Op::kSoftmax);
    if (!Values(&ex, {x})) return ex;
    const Type &t = type(x);
    if (!IsFloat(t.dtype)) ex.Fail(Bit(kDtypeErr), "not float");
    RefuseHalf(&ex, t.dtype);
    int r = t.rank();
    if (r == 0 || axis < -r || axis >= r) {
      ex.Fail(Bit(kOutOfRange), "axis out of range");
      return ex;
    }
    pending_.args = {x};
    pending_.ints = {axis < 0 ? axis + r : axis};
    return Done(ex, {t.dtype, t.shape, false});
  }

  Expect LayerNorm(int x, int gamma, int beta, double eps) {
    Expect ex = Start(Op::kLayerNorm);
    if (!(eps >= 0)) {
      Hit("open: layer_norm with eps < 0 or NaN refused");
      if (!sem_.negative_eps) ex.Fail(kAnyError, "eps < 0 or NaN (tolerated)");
    }
    if (!Values(&ex, {x, gamma, beta})) return ex;
    const Type &t = type(x);
    if (!IsFloat(t.dtype)) ex.Fail(Bit(kDtypeErr), "x is not float");
    RefuseHalf(&ex, t.dtype);
    if (t.rank() == 0) ex.Fail(Bit(kShapeErr), "x has rank 0");
    if (!ex.may_succeed) return ex;
    Type normed{t.dtype, t.shape, false};
    BinaryTyping scaled = TypeBinary(Op::kMul, normed, false, 0, type(gamma), is_literal(gamma),
                                     node(gamma).scalar, sem_);
    if (!scaled.ex.may_succeed) {
      ex.Fail(scaled.ex.errors, "gamma: " + scaled.ex.why);
      return ex;
    }
    BinaryTyping out = TypeBinary(Op::kAdd, scaled.ex.type, false, 0, type(beta), is_literal(beta),
                                  node(beta).scalar, sem_);
    if (!out.ex.may_succeed) {
      ex.Fail(out.ex.errors, "beta: " + out.ex.why);
      return ex;
    }
    pending_.args = {x, gamma, beta};
    pending_.scalar = eps;
    return Done(ex, out.ex.type);
  }

  Expect Gelu(int x) {
    Expect ex = Start(Op::kGelu);
    if (!Values(&ex, {x})) return ex;
    if (!IsFloat(type(x).dtype)) ex.Fail(Bit(kDtypeErr), "not float");
    RefuseHalf(&ex, type(x).dtype);
    pending_.args = {x};
    return Done(ex, type(x));
  }

  Expect CausalMask(int64_t rows, int64_t cols, int64_t offset, int dtype) {
    Expect ex = Start(Op::kCausalMask);
    if (rows < 0 || cols < 0) ex.Fail(Bit(kShapeErr), "negative size");
    if (!IsFloat(dtype)) ex.Fail(Bit(kDtypeErr), "dtype is not float");
    RefuseHalf(&ex, dtype);
    if (ex.may_succeed && !SizeOk({rows, cols})) ex.Fail(Bit(kShapeErr), "too many elements");
    pending_.ints = {offset};
    return Done(ex, {dtype, {rows, cols}, false});
  }

  // NumPy's argmax: the index (int64) of the first largest element along the axis, the
  // first NaN if there is one; bools compare false < true; an empty axis has none.
  Expect ArgMax(int x, int32_t axis, int32_t keepdims) {
    Expect ex = Start(Op::kArgMax);
    if (!Values(&ex, {x})) return ex;
    const Type &t = type(x);
    const int r = t.rank();
    RefuseHalf(&ex, t.dtype);
    if (r == 0 || axis < -r || axis >= r) {
      ex.Fail(Bit(kOutOfRange), "axis out of range");
      return ex;
    }
    const int ax = axis < 0 ? axis + r : axis;
    Shape s = t.shape;
    if (keepdims) s[static_cast<size_t>(ax)] = 1;
    else s.erase(s.begin() + ax);
    if (t.shape[static_cast<size_t>(ax)] == 0 && NumElements(s) > 0)
      ex.Fail(Bit(kShapeErr), "argmax over an empty axis (NumPy: ValueError)");
    pending_.args = {x};
    pending_.ints = {ax, keepdims ? 1 : 0};
    return Done(ex, {kI64, s, false});
  }

  Expect End(const int *outputs, int32_t n) {
    Expect ex;
    if (ended_) {
      ex.Fail(Bit(kInvalid), "already ended");
      return ex;
    }
    if (n < 1 || !outputs) {
      ex.Fail(Bit(kInvalid), "no outputs");
      return ex;
    }
    for (int i = 0; i < n; ++i)
      if (outputs[i] < 0) ex.Fail(Bit(kInvalid), "unknown output value");
    return ex;
  }
  void CommitEnd(const int *outputs, int32_t n) {
    outputs_.assign(outputs, outputs + n);
    ended_ = true;
  }

  // Values that contribute to an output.
  std::vector<bool> Live() const {
    std::vector<bool> live(nodes_.size(), false);
    for (int o : outputs_) live[static_cast<size_t>(o)] = true;
    for (size_t i = nodes_.size(); i-- > 0;)
      if (live[i])
        for (int a : nodes_[i].args) live[static_cast<size_t>(a)] = true;
    return live;
  }

  // For each input that a gather uses as its indices: the fewest table rows among those
  // gathers (-1: not a gather index).
  std::vector<int64_t> GatherRowLimits() const {
    std::vector<int64_t> rows(inputs_.size(), -1);
    for (const Node &n : nodes_) {
      if (n.op != Op::kGather) continue;
      const Node &idx = node(n.args[1]);
      if (idx.op != Op::kInput) continue;
      int64_t r = type(n.args[0]).shape[0];
      int64_t &slot = rows[static_cast<size_t>(idx.input_index)];
      slot = slot < 0 ? r : std::min(slot, r);
    }
    return rows;
  }

  // Evaluates the program on `inputs` (exact elements, one Tensor per input).
  RunResult Run(const std::vector<Tensor> &inputs) const {
    RunResult res;
    std::vector<bool> live = Live();
    res.values.resize(nodes_.size());
    // Gather indices that are inputs: live ones must be in range, else tm_invoke fails.
    for (size_t id = 0; id < nodes_.size(); ++id) {
      const Node &n = nodes_[id];
      if (n.op != Op::kGather || node(n.args[1]).op != Op::kInput) continue;
      const Tensor &idx = inputs[static_cast<size_t>(node(n.args[1]).input_index)];
      int64_t rows = type(n.args[0]).shape[0];
      bool bad = false;
      for (const El &x : idx.el) bad |= x.i < 0 || x.i >= rows;
      // A gather that reaches no output is not computed and its indices not checked.
      if (!bad || !live[id]) continue;
      res.invoke_errors |= Bit(kOutOfRange);
      res.invoke_must_fail = true;
      res.invoke_why = "a gather index input is outside its table";
    }
    for (size_t id = 0; id < nodes_.size(); ++id)
      if (live[id]) res.values[id] = Eval(static_cast<int>(id), res.values, inputs, &res);
    return res;
  }

 private:
  Expect Start(Op op) {
    pending_ = Node();
    pending_.op = op;
    return Expect();
  }
  Expect Done(Expect ex, const Type &t) {
    ex.type = t;
    pending_.type = t;
    return ex;
  }
  bool Values(Expect *ex, const std::vector<int> &ids) {
    for (int id : ids)
      if (id < 0 || id >= size()) {
        ex->Fail(Bit(kInvalid), "a value not from this trace");
        return false;
      }
    return true;
  }
  bool ReadShape(int rank, const int64_t *shape, Shape *s, Expect *ex) {
    if (rank < 0 || rank > 8) {
      ex->Fail(Bit(kShapeErr), "rank outside 0..8");
      return false;
    }
    if (rank > 0 && !shape) {
      ex->Fail(Bit(kInvalid), "shape is NULL");
      return false;
    }
    s->assign(shape, shape + rank);
    for (int64_t d : *s)
      if (d < 0) {
        ex->Fail(Bit(kShapeErr), "negative dimension");
        return false;
      }
    if (!SizeOk(*s)) {
      ex->Fail(Bit(kShapeErr), "too many elements");
      return false;
    }
    return true;
  }
  // A reshape/transpose/slice that changes nothing of a weak scalar: NumPy gives a 0-d
  // array (strong); the header does not say.
  bool IdentityKeepsWeak(const Type &t, bool identity) {
    if (!t.weak || !identity) return false;
    Hit("open: identity reshape/transpose/slice of a scalar keeps it weak");
    return !sem_.zero_d_array_is_strong;
  }
  static El ReadElement(int dtype, const unsigned char *p, Expect *ex) {
    if (dtype != kBool) return LoadElement(dtype, p);
    if (*p > 1) {
      Hit("open: bool constant bytes other than 0/1");
      ex->Open(kAnyError, "bool constant byte > 1");
    }
    return I(*p != 0);
  }

  // ---- evaluation -------------------------------------------------------------------------

  static Tensor Lit(int dt, double v) {
    Tensor t;
    t.type = {dt, {}, true};
    t.literal = true;
    t.lit = v;
    t.el.assign(1, LiteralAs(v, dt));
    return t;
  }

  // Elementwise binary op on two tensors with NumPy typing (for nodes and composites).
  Tensor EvalBinary(Op op, const Tensor &a, const Tensor &b, RunResult *res) const {
    BinaryTyping t = TypeBinary(op, a.type, a.literal, a.lit, b.type, b.literal, b.lit, sem_);
    Tensor out;
    out.type = t.ex.type;
    int d = t.operand;
    bool wide_compare = false;
    if (IsComparison(op) && IsInt(d))
      for (const Tensor *x : {&a, &b})
        if (x->literal && !FitsInt(x->lit, d)) wide_compare = true;
    Tensor ca, cb;
    if (wide_compare) {  // strict NumPy 2: compare exactly in the wider type
      d = kF64;
    }
    ca = Convert(a, d);
    cb = Convert(b, d);
    std::vector<int64_t> ia = BroadcastIndex(a.type.shape, out.type.shape);
    std::vector<int64_t> ib = BroadcastIndex(b.type.shape, out.type.shape);
    out.el.resize(ia.size());
    for (size_t k = 0; k < ia.size(); ++k) {
      const El &x = ca.el[static_cast<size_t>(ia[k])], &y = cb.el[static_cast<size_t>(ib[k])];
      if (IsFloat(d)) out.el[k] = IsComparison(op) ? FloatCompare(op, x, y) : FloatBinary(op, d, x, y);
      else out.el[k] = IntBinary(op, d, x, y, sem_, &res->strict_failure);
    }
    return out;
  }

  Tensor EvalUnary(Op op, const Tensor &x) const {
    int d = IsTranscendental(op) && !IsFloat(x.type.dtype) ? kF64 : x.type.dtype;
    Tensor c = Convert(x, d);
    Tensor out;
    out.type = {d, x.type.shape, x.type.weak};
    for (const El &a : c.el) {
      if (IsFloat(d)) {
        out.el.push_back(FloatUnary(op, d, a));
      } else if (a.dc) {
        out.el.push_back(DC());
      } else {
        // Integers reach only kKeepsNumber ops: neg, and abs (wrapping at the minimum).
        uint64_t u = static_cast<uint64_t>(a.i);
        if (op == Op::kNeg) out.el.push_back(I(Wrap(d, 0 - u)));
        else if (op == Op::kAbs) out.el.push_back(I(a.i < 0 ? Wrap(d, 0 - u) : a.i));
        else out.el.push_back(DC());  // an integer rule the reference does not know
      }
    }
    return out;
  }

  // Sum or maximum over `ax` (dtype of x; ints wrap).
  Tensor EvalReduce(Op op, const Tensor &x, int ax, bool keepdims) const {
    const Shape &s = x.type.shape;
    int64_t outer = 1, n = s[static_cast<size_t>(ax)], inner = 1;
    for (int i = 0; i < ax; ++i) outer *= s[static_cast<size_t>(i)];
    for (size_t i = static_cast<size_t>(ax) + 1; i < s.size(); ++i) inner *= s[i];
    Tensor out;
    out.type = x.type;
    out.type.weak = false;
    if (keepdims) out.type.shape[static_cast<size_t>(ax)] = 1;
    else out.type.shape.erase(out.type.shape.begin() + ax);
    int d = x.type.dtype;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        std::vector<El> xs;
        for (int64_t k = 0; k < n; ++k) xs.push_back(x.el[static_cast<size_t>((o * n + k) * inner + in)]);
        out.el.push_back(op == Op::kSum ? SumEls(d, xs) : MaxEls(d, xs));
      }
    return out;
  }

  // Per row of the axis, the index of its first largest element (the first NaN if any).
  // An element whose bound makes it possibly the largest of another index leaves the
  // result open (don't care), as does a don't-care element.
  Tensor EvalArgMax(const Tensor &x, int ax) const {
    const Shape &s = x.type.shape;
    int64_t outer = 1, n = s[static_cast<size_t>(ax)], inner = 1;
    for (int i = 0; i < ax; ++i) outer *= s[static_cast<size_t>(i)];
    for (size_t i = static_cast<size_t>(ax) + 1; i < s.size(); ++i) inner *= s[i];
    const bool f = IsFloat(x.type.dtype);
    Tensor out;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        auto at = [&](int64_t k) -> const El & {
          return x.el[static_cast<size_t>((o * n + k) * inner + in)];
        };
        int64_t best = 0;
        bool open = false;
        for (int64_t k = 0; k < n; ++k) {
          const El &e = at(k);
          open |= e.dc || (f && e.e != 0);
          if (f ? (std::isnan(e.v) && !std::isnan(at(best).v)) || e.v > at(best).v
                : e.i > at(best).i)
            best = k;
        }
        out.el.push_back(open ? DC() : I(best));
      }
    return out;
  }

  static El SumEls(int d, const std::vector<El> &xs) {
    for (const El &x : xs)
      if (x.dc) return DC();
    if (!IsFloat(d)) {
      uint64_t acc = 0;
      for (const El &x : xs) acc += static_cast<uint64_t>(x.i);
      return I(Wrap(d, acc));
    }
    if (xs.empty()) return F(0);
    if (xs.size() == 1) return xs[0].v == 0 ? F(0, std::max(xs[0].e, kZeroSign)) : xs[0];
    double sum = 0, comp = 0, abs = 0, prop = 0, special = 0;
    bool has_special = false, special_exact = true;
    for (const El &x : xs) {
      if (!std::isfinite(x.v)) {
        has_special = true;
        special_exact &= x.e == 0;
        special += x.v;
        continue;
      }
      double t = sum + x.v;  // Neumaier
      comp += std::fabs(sum) >= std::fabs(x.v) ? (sum - t) + x.v : (x.v - t) + sum;
      sum = t;
      abs += std::fabs(x.v);
      prop += x.e;
    }
    if (abs + prop >= Lim(d) / 4) return DC();  // partial sums may overflow
    if (has_special) return special_exact ? F(special) : DC();
    double r = sum + comp;
    double e = prop + (static_cast<double>(xs.size()) + 1) * 2 * U(d) * (abs + prop);
    if (r == 0) e = std::max(e, kZeroSign);
    if (std::fabs(r) + e >= Lim(d) * (1 - 4 * U(d))) return DC();
    return F(RoundTo(d, r), e);
  }

  static El MaxEls(int d, const std::vector<El> &xs) {
    for (const El &x : xs)
      if (x.dc) return DC();
    if (xs.empty()) return DC();
    if (!IsFloat(d)) {
      int64_t m = xs[0].i;
      for (const El &x : xs) m = std::max(m, x.i);
      return I(m);
    }
    El m = xs[0];
    for (const El &x : xs) {
      if (std::isnan(x.v)) return F(NAN);
      if (x.v > m.v) m = x;
    }
    double e = 0;
    bool neg0 = false, pos0 = false;
    for (const El &x : xs) {
      e = std::max(e, x.e);
      if (x.v == 0) (std::signbit(x.v) ? neg0 : pos0) = true;
    }
    if (m.v == 0 && neg0 && pos0) e = std::max(e, kZeroSign);
    return F(m.v, e);
  }

  Tensor EvalMean(const Tensor &x, int ax, bool keepdims, RunResult *res) const {
    Tensor xf = IsFloat(x.type.dtype) ? x : Convert(x, kF64);
    xf.type.weak = false;
    Tensor sum = EvalReduce(Op::kSum, xf, ax, keepdims);
    return EvalBinary(Op::kDiv, sum, Lit(xf.type.dtype, static_cast<double>(x.type.shape[static_cast<size_t>(ax)])), res);
  }

  Tensor EvalMatmul(const Node &n, const Tensor &a0, const Tensor &b0) const {
    int d = n.operand;
    Tensor a = Convert(a0, d), b = Convert(b0, d);
    const Shape &sa = a.type.shape, &sb = b.type.shape;
    int64_t m = sa[sa.size() - 2], k = sa.back(), nn = sb.back();
    int64_t batch = NumElements(Shape(sa.begin(), sa.end() - 2));
    bool b_batched = sb.size() > 2;
    Tensor out;
    out.type = n.type;
    for (int64_t bt = 0; bt < batch; ++bt)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < nn; ++j) {
          std::vector<std::pair<El, El>> terms;
          for (int64_t kk = 0; kk < k; ++kk)
            terms.push_back({a.el[static_cast<size_t>((bt * m + i) * k + kk)],
                             b.el[static_cast<size_t>(((b_batched ? bt : 0) * k + kk) * nn + j)]});
          out.el.push_back(DotEls(d, terms));
        }
    return out;
  }

  static El DotEls(int d, const std::vector<std::pair<El, El>> &terms) {
    for (const auto &t : terms)
      if (t.first.dc || t.second.dc) return DC();
    if (!IsFloat(d)) {
      uint64_t acc = 0;
      for (const auto &t : terms) acc += static_cast<uint64_t>(t.first.i) * static_cast<uint64_t>(t.second.i);
      return I(Wrap(d, acc));
    }
    if (terms.empty()) return F(0);
    double sum = 0, comp = 0, abs = 0, prop = 0;
    bool exact = true;
    for (const auto &t : terms) {
      const El &x = t.first, &y = t.second;
      if (!std::isfinite(x.v) || !std::isfinite(y.v)) return DC();  // BLAS and non-finite values
      double p = x.v * y.v;
      double s = sum + p;
      comp += std::fabs(sum) >= std::fabs(p) ? (sum - s) + p : (p - s) + sum;
      sum = s;
      abs += std::fabs(p);
      prop += M(std::fabs(x.v), y.e) + M(std::fabs(y.v), x.e) + x.e * y.e;
      exact &= x.e == 0 && y.e == 0;
    }
    double r = sum + comp;
    if (terms.size() == 1) {
      El o = Finish(d, r, prop, exact, 0);
      if (!o.dc && o.v == 0) o.e = std::max(o.e, kZeroSign);
      return o;
    }
    if (abs + prop >= Lim(d) / 4) return DC();
    double e = prop + (static_cast<double>(terms.size()) + 2) * 2 * U(d) * (abs + prop);
    if (r == 0) e = std::max(e, kZeroSign);
    return F(RoundTo(d, r), e);
  }

  Tensor EvalSoftmax(const Tensor &x, int ax, RunResult *res) const {
    int d = x.type.dtype;
    Tensor out;
    out.type = {d, x.type.shape, false};
    out.el.resize(x.el.size());
    if (x.el.empty()) return out;
    const Shape &s = x.type.shape;
    int64_t outer = 1, n = s[static_cast<size_t>(ax)], inner = 1;
    for (int i = 0; i < ax; ++i) outer *= s[static_cast<size_t>(i)];
    for (size_t i = static_cast<size_t>(ax) + 1; i < s.size(); ++i) inner *= s[i];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        std::vector<size_t> idx;
        std::vector<El> row;
        for (int64_t k = 0; k < n; ++k) {
          idx.push_back(static_cast<size_t>((o * n + k) * inner + in));
          row.push_back(x.el[idx.back()]);
        }
        bool pos_inf = false, all_neg_inf = true, nan = false;
        for (const El &e : row) {
          pos_inf |= e.v == INFINITY;
          all_neg_inf &= e.v == -INFINITY;
          nan |= std::isnan(e.v);
        }
        if ((pos_inf || all_neg_inf) && !nan) {
          Hit("disagreement: softmax of a row holding +inf or only -inf is finite (formula: NaN)");
          if (!sem_.softmax_inf_rows) {
            // The header's limit: the entries equal to the max share the weight equally.
            const double max = all_neg_inf ? -INFINITY : INFINITY;
            if (std::any_of(row.begin(), row.end(), [](const El &e) { return e.dc || e.e != 0; })) {
              for (size_t i : idx) out.el[i] = DC();
              continue;
            }
            double count = 0;
            for (const El &e : row) count += e.v == max;
            for (size_t k = 0; k < idx.size(); ++k)
              out.el[idx[k]] = row[k].v == max ? FloatBinary(Op::kDiv, d, F(1.0), F(count)) : F(0.0);
            continue;
          }
        }
        El m = MaxEls(d, row);
        std::vector<El> ex;
        for (const El &e : row) ex.push_back(FloatUnary(Op::kExp, d, FloatBinary(Op::kSub, d, e, m)));
        El sum = SumEls(d, ex);
        for (size_t k = 0; k < idx.size(); ++k) out.el[idx[k]] = FloatBinary(Op::kDiv, d, ex[k], sum);
      }
    (void)res;
    return out;
  }

  Tensor EvalLayerNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta, double eps,
                       RunResult *res) const {
    int d = x.type.dtype, ax = x.type.rank() - 1;
    Tensor xs = x;
    xs.type.weak = false;
    Tensor mean = EvalMean(xs, ax, true, res);
    Tensor diff = EvalBinary(Op::kSub, xs, mean, res);
    Tensor sq = EvalBinary(Op::kMul, diff, diff, res);
    Tensor var = EvalMean(sq, ax, true, res);
    Tensor ve = EvalBinary(Op::kAdd, var, Lit(d, eps), res);
    Tensor root = EvalUnary(Op::kSqrt, ve);
    Tensor normed = EvalBinary(Op::kDiv, diff, root, res);  // (x - mean) / sqrt(var + eps)
    Tensor scaled = EvalBinary(Op::kMul, normed, gamma, res);
    return EvalBinary(Op::kAdd, scaled, beta, res);
  }

  Tensor EvalGelu(const Tensor &x, RunResult *res) const {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    int d = x.type.dtype;
    Tensor x3 = EvalBinary(Op::kMul, EvalBinary(Op::kMul, x, x, res), x, res);
    Tensor inner = EvalBinary(Op::kAdd, x, EvalBinary(Op::kMul, Lit(d, 0.044715), x3, res), res);
    Tensor arg = EvalBinary(Op::kMul, Lit(d, std::sqrt(2.0 / M_PI)), inner, res);
    Tensor onep = EvalBinary(Op::kAdd, Lit(d, 1.0), EvalUnary(Op::kTanh, arg), res);
    return EvalBinary(Op::kMul, EvalBinary(Op::kMul, Lit(d, 0.5), x, res), onep, res);
  }

  Tensor Eval(int id, const std::vector<Tensor> &v, const std::vector<Tensor> &inputs, RunResult *res) const {
    const Node &n = node(id);
    auto arg = [&](size_t i) -> const Tensor & { return v[static_cast<size_t>(n.args[i])]; };
    Tensor out;
    out.type = n.type;
    // An empty result needs no work (and its other dims may be huge: a (2^40, 0) mask).
    if (n.type.numel() == 0 && n.op != Op::kScalar) return out;
    switch (n.op) {
      case Op::kInput:
        out = inputs[static_cast<size_t>(n.input_index)];
        out.type = n.type;
        return out;
      case Op::kScalar: return Lit(n.type.dtype, n.scalar);
      case Op::kConstant: return n.constant;
      case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kDiv: case Op::kPow:
      case Op::kMax: case Op::kMin: case Op::kLess: case Op::kGreater: case Op::kEqual:
        out = EvalBinary(n.op, arg(0), arg(1), res);
        break;
      case Op::kWhere: {
        const Tensor &c = arg(0);
        Tensor a = Convert(arg(1), n.operand), b = Convert(arg(2), n.operand);
        std::vector<int64_t> ic = BroadcastIndex(c.type.shape, n.type.shape);
        std::vector<int64_t> ia = BroadcastIndex(arg(1).type.shape, n.type.shape);
        std::vector<int64_t> ib = BroadcastIndex(arg(2).type.shape, n.type.shape);
        for (size_t k = 0; k < ic.size(); ++k) {
          const El &ce = c.el[static_cast<size_t>(ic[k])];
          if (ce.dc) out.el.push_back(DC());
          else out.el.push_back(ce.i ? a.el[static_cast<size_t>(ia[k])] : b.el[static_cast<size_t>(ib[k])]);
        }
        break;
      }
#define TM_UNARY_OP(Name, ...) case Op::k##Name:
#include "core/trace/unary_ops.def"
#undef TM_UNARY_OP
        out = EvalUnary(n.op, arg(0));
        break;
      case Op::kCast:
        out = Convert(arg(0), n.type.dtype);
        break;
      case Op::kMatmul: out = EvalMatmul(n, arg(0), arg(1)); break;
      case Op::kSum: case Op::kRMax: {
        Tensor x = Convert(arg(0), n.operand);
        out = EvalReduce(n.op, x, static_cast<int>(n.ints[0]), n.ints[1] != 0);
        break;
      }
      case Op::kMean: out = EvalMean(arg(0), static_cast<int>(n.ints[0]), n.ints[1] != 0, res); break;
      case Op::kVar: {
        const Tensor &x = arg(0);
        Tensor xf = IsFloat(x.type.dtype) ? x : Convert(x, kF64);
        int ax = static_cast<int>(n.ints[0]);
        Tensor mean = EvalMean(xf, ax, true, res);
        Tensor diff = EvalBinary(Op::kSub, xf, mean, res);
        out = EvalMean(EvalBinary(Op::kMul, diff, diff, res), ax, n.ints[1] != 0, res);
        break;
      }
      case Op::kReshape: out.el = arg(0).el; break;
      case Op::kTranspose:
      case Op::kSlice: {
        // Each output index `pos` reads one element of x: axis perm[i] (transpose) or
        // pos[i] + begin[i] (slice).
        const Tensor &x = arg(0);
        std::vector<int64_t> st = Strides(x.type.shape);
        const Shape &os = n.type.shape;
        const bool transpose = n.op == Op::kTranspose;
        std::vector<int64_t> pos(os.size(), 0);
        for (int64_t k = 0; k < n.type.numel(); ++k) {
          int64_t off = 0;
          for (size_t i = 0; i < os.size(); ++i)
            off += transpose ? pos[i] * st[static_cast<size_t>(n.ints[i])]
                             : (pos[i] + n.ints[i]) * st[i];
          out.el.push_back(x.el[static_cast<size_t>(off)]);
          for (size_t i = os.size(); i-- > 0;) {
            if (++pos[i] < os[i]) break;
            pos[i] = 0;
          }
        }
        break;
      }
      case Op::kConcat: {
        int ax = static_cast<int>(n.ints[0]);
        const Shape &os = n.type.shape;
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < ax; ++i) outer *= os[static_cast<size_t>(i)];
        for (size_t i = static_cast<size_t>(ax) + 1; i < os.size(); ++i) inner *= os[i];
        std::vector<Tensor> parts;
        for (size_t i = 0; i < n.args.size(); ++i) parts.push_back(Convert(arg(i), n.operand));
        for (int64_t o = 0; o < outer; ++o)
          for (const Tensor &p : parts) {
            int64_t len = p.type.shape[static_cast<size_t>(ax)] * inner;
            for (int64_t k = 0; k < len; ++k) out.el.push_back(p.el[static_cast<size_t>(o * len + k)]);
          }
        break;
      }
      case Op::kGather: {
        const Tensor &table = arg(0), &idx = arg(1);
        int64_t rows = table.type.shape[0];
        int64_t row = NumElements(Shape(table.type.shape.begin() + 1, table.type.shape.end()));
        for (const El &ie : idx.el) {
          if (ie.dc || rows == 0) {
            for (int64_t k = 0; k < row; ++k) out.el.push_back(DC());
            continue;
          }
          // Computed indices are clamped into the table (header); inputs were checked.
          int64_t r = std::min(std::max<int64_t>(ie.i, 0), rows - 1);
          if (r != ie.i) Hit("header: computed gather index clamped (NumPy: IndexError/wrap)");
          for (int64_t k = 0; k < row; ++k) out.el.push_back(table.el[static_cast<size_t>(r * row + k)]);
        }
        break;
      }
      case Op::kSoftmax: out = EvalSoftmax(arg(0), static_cast<int>(n.ints[0]), res); break;
      case Op::kLayerNorm: out = EvalLayerNorm(arg(0), arg(1), arg(2), n.scalar, res); break;
      case Op::kGelu: out = EvalGelu(arg(0), res); break;
      case Op::kArgMax: out = EvalArgMax(arg(0), static_cast<int>(n.ints[0])); break;
      case Op::kCausalMask: {
        int64_t rows = n.type.shape[0], cols = n.type.shape[1], off = n.ints[0];
        double lowest = -Lim(n.type.dtype);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            bool visible = c - r <= off;  // col <= row + offset (c - r is small)
            out.el.push_back(F(visible ? 0.0 : lowest));
          }
        break;
      }
    }
    out.type = n.type;
    out.literal = false;
    return out;
  }

  Semantics sem_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  bool ended_ = false;
  Node pending_;
};

}  // namespace tmref
