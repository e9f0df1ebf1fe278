// Every op on every target: each op of the library's tables (tm_op_count's and
// tm_unary_op_count's, so a new op cannot be left out) is compiled and run on every target
// this process can run (tm_target_check: the CPU; the GPU where a driver and a device are
// here, or with TINYMLIR_GPU_EMULATE set, its kernels on the host), on shapes that cover
// tile edges (17 and 33 against the GPU's 16 x 16 tiles and 32-thread rows), broadcasting,
// size-1 and empty axes, in several dtypes, and compared element by element with the
// reference interpreter (tests/fuzz/reference_interpreter.h: NumPy's documented semantics in
// double precision, every element with a bound on how far a faithful implementation may be).
//
// Tolerance: |result - reference| <= 2 e + slack, e the reference's bound for that element
// (its roundings, the summations' gamma_n sum |terms|, libm-grade functions' units in the
// last place: reference_interpreter.h's accuracy model), and slack the smallest normal of
// the dtype plus, for the composites (softmax, layer norm, variance: several roundings
// folded into one bound), 1e-5 (f32) or 1e-12 (f64) of |reference|. Elements the reference
// leaves open (a comparison within its operands' bounds, a domain edge) are not compared.
//
// Usage: backend_ops_test (CTest backend_ops; backend_ops_gpu_emulated runs it with
// TINYMLIR_GPU_EMULATE=1). Prints one line per target and op with the cases it ran.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/reference_interpreter.h"
#include "tinymlir/tinymlir.h"

namespace {

using tmref::El;
using tmref::Op;

// ---- cases -------------------------------------------------------------------------------

// How an input's values are drawn.
// kTies: floats from a few values (ties), with -inf and, rarely, NaN among them.
enum class Draw { kAny, kPositive, kIndices, kSmallInts, kTies };

struct Operand {
  tm_dtype dtype;
  std::vector<int64_t> shape;
  Draw draw = Draw::kAny;
  int64_t rows = 0;  // kIndices: indices of a table of this many rows
};

struct Case {
  std::vector<Operand> inputs;
  std::vector<int64_t> ints;
  double real = 0.0;
};

Operand F32(std::vector<int64_t> s, Draw d = Draw::kAny) { return {TM_F32, std::move(s), d}; }
Operand F64(std::vector<int64_t> s, Draw d = Draw::kAny) { return {TM_F64, std::move(s), d}; }
Operand I32(std::vector<int64_t> s, Draw d = Draw::kSmallInts) { return {TM_I32, std::move(s), d}; }
Operand I64(std::vector<int64_t> s, Draw d = Draw::kSmallInts) { return {TM_I64, std::move(s), d}; }
Operand Bool(std::vector<int64_t> s) { return {TM_BOOL, std::move(s), Draw::kAny}; }
Operand Indices(tm_dtype d, std::vector<int64_t> s, int64_t rows) {
  return {d, std::move(s), Draw::kIndices, rows};
}

// Two operands of every kind of shape pair: tile edges, broadcasting, size 1, empty.
std::vector<Case> BinaryCases(std::vector<Operand (*)(std::vector<int64_t>, Draw)> makers) {
  std::vector<Case> cases;
  for (auto make : makers) {
    cases.push_back({{make({17, 33}, Draw::kAny), make({17, 33}, Draw::kAny)}});
    cases.push_back({{make({3, 1}, Draw::kAny), make({1, 4}, Draw::kAny)}});
    cases.push_back({{make({1}, Draw::kAny), make({2, 5}, Draw::kAny)}});
    cases.push_back({{make({2, 0, 3}, Draw::kAny), make({3}, Draw::kAny)}});
  }
  return cases;
}

Operand F32Any(std::vector<int64_t> s, Draw) { return F32(std::move(s)); }
Operand F64Any(std::vector<int64_t> s, Draw) { return F64(std::move(s)); }
Operand I32Any(std::vector<int64_t> s, Draw) { return I32(std::move(s)); }
Operand I64Any(std::vector<int64_t> s, Draw) { return I64(std::move(s)); }
Operand BoolAny(std::vector<int64_t> s, Draw) { return Bool(std::move(s)); }

// The cases of each op of the tables, by the op's name. An op of the library with none
// fails the test.
const std::map<std::string, std::vector<Case>> &Cases() {
  static const auto *cases = new std::map<std::string, std::vector<Case>>([] {
    std::map<std::string, std::vector<Case>> c;
    for (const char *op : {"add", "mul", "maximum", "minimum", "less", "greater", "equal"})
      c[op] = BinaryCases({F32Any, F64Any, I32Any, BoolAny});
    for (const char *op : {"sub", "div"}) c[op] = BinaryCases({F32Any, F64Any, I64Any});
    c["pow"] = {{{F32({17, 33}, Draw::kPositive), F32({17, 33})}},
                {{F64({3, 1}, Draw::kPositive), F64({1, 4})}},
                {{I32({2, 5}), I32({5})}}};
    c["where"] = {{{Bool({3, 1}), F32({1, 4}), F32({3, 4})}},
                  {{Bool({17, 33}), I32({17, 33}), I32({1})}},
                  {{Bool({0, 2}), F64({2}), F64({1, 2})}}};
    c["cast"] = {{{F32({17, 33})}, {TM_I32}},  {{F64({4, 5})}, {TM_F32}},
                 {{I32({4, 5})}, {TM_F64}},     {{F32({17, 33})}, {TM_BF16}},
                 {{F32({17, 33})}, {TM_F16}},   {{Bool({3, 4})}, {TM_F32}},
                 {{F32({3, 4})}, {TM_BOOL}},    {{F32({0, 3})}, {TM_F64}}};
    c["matmul"] = {{{F32({1, 64}), F32({64, 17})}},       // a decode step's product
                   {{F32({17, 33}), F32({33, 5})}},       // tile edges
                   {{F32({5, 33}), F32({33, 1})}},        // one column
                   {{F64({3, 2, 4}), F64({3, 4, 5})}},    // batched
                   {{F32({2, 3, 4}), F32({4, 6})}},       // leading dims folded
                   {{I32({4, 3}), I32({3, 2})}},
                   {{F32({0, 4}), F32({4, 3})}}};         // empty
    for (const char *op : {"reduce_sum", "reduce_max", "reduce_mean", "reduce_var"}) {
      c[op] = {{{F32({17, 33})}, {-1, 0}}, {{F32({17, 33})}, {0, 1}}, {{F64({2, 3, 4})}, {1, 0}},
               {{I32({5, 7})}, {1, 1}}};
      if (std::string(op) != "reduce_max") c[op].push_back({{F32({4, 0})}, {1, 0}});
    }
    // Ties (small integers, bools, kTies floats) keep the first; kTies puts a NaN, which
    // wins, in some rows, and rows of -inf.
    c["argmax"] = {{{F32({17, 33})}, {-1, 0}},
                   {{F32({17, 33}, Draw::kTies)}, {-1, 0}},
                   {{F64({33, 17}, Draw::kTies)}, {0, 1}},
                   {{F64({2, 3, 4})}, {1, 0}},
                   {{I32({5, 7})}, {1, 1}},
                   {{I64({4, 6})}, {0, 0}},
                   {{Bool({3, 5})}, {-1, 0}},
                   {{F32({0, 4})}, {1, 0}},
                   {{F32({1, 1})}, {0, 0}},
                   {{F32({8, 1}, Draw::kTies)}, {-1, 0}}};
    c["reshape"] = {{{F32({4, 6})}, {2, -1}}, {{I64({3, 4, 5})}, {60}}, {{F32({1})}, {}},
                    {{F32({0, 3})}, {3, 0}}};
    c["transpose"] = {{{F32({3, 4, 5})}, {1, 2, 0}}, {{F32({17, 33})}, {}},
                      {{I32({2, 3})}, {-1, 0}}, {{F64({0, 2})}, {1, 0}}};
    c["slice"] = {{{F32({17, 33})}, {1, 2, 16, 31}}, {{I64({4, 5})}, {0, 5, 4, 5}},
                  {{F64({3, 4, 5})}, {0, 1, 2, 3, 3, 5}}};
    c["concat"] = {{{F32({2, 3}), F32({4, 3})}, {0}}, {{F64({2, 3}), F64({2, 0})}, {1}},
                   {{I32({1, 2}), F32({1, 3}), F32({1, 1})}, {-1}}};
    c["gather"] = {{{F32({10, 4}), Indices(TM_I64, {3}, 10)}},
                   {{F64({17, 33}), Indices(TM_I32, {2, 2}, 17)}},
                   {{I32({5}), Indices(TM_I64, {4}, 5)}},
                   {{F32({6, 3}), Indices(TM_I32, {0}, 6)}}};
    c["softmax"] = {{{F32({17, 33})}, {-1}}, {{F32({4, 5})}, {0}}, {{F64({2, 3, 7})}, {1}},
                    {{F32({3, 0})}, {-1}}};
    c["layer_norm"] = {{{F32({17, 33}), F32({33}), F32({33})}, {}, 1e-5},
                       {{F64({3, 8}), F64({1}), F64({8})}, {}, 1e-3},
                       {{F32({2, 4, 7}), F32({7}), F32({1})}, {}, 0.0}};
    c["gelu_tanh"] = {{{F32({17, 33})}}, {{F64({4, 5})}}};
    c["causal_mask"] = {{{}, {5, 7, 2, TM_F32}}, {{}, {17, 33, 0, TM_F64}},
                        {{}, {4, 4, -2, TM_F32}}, {{}, {0, 3, 0, TM_F32}}};
    // The unary ops: floats of both widths (positive where the op's domain ends at 0) and
    // an integer operand (computing in f64, or keeping its dtype for neg and abs).
    for (int u = 0; u < tm_unary_op_count(); ++u) {
      const std::string name = tm_unary_op_name(static_cast<tm_unary_op>(u));
      const tmref::UnaryRef *ref = nullptr;
      for (const tmref::UnaryRef &r : tmref::UnaryRefs())
        if (name == r.name) ref = &r;
      const Draw d = ref && ref->domain != tmref::UnaryRef::kReals ? Draw::kPositive : Draw::kAny;
      c[name] = {{{F32({17, 33}, d)}}, {{F64({4, 5}, d)}}, {{I32({3, 4}, Draw::kSmallInts)}},
                 {{F32({0, 2}, d)}}};
    }
    return c;
  }());
  return *cases;
}

// ---- the reference -------------------------------------------------------------------------

// The reference's prediction of one op of the tables, by name, on its values and attributes
// (tm_op's order). An op of the library without one fails the test.
using Reference = std::function<tmref::Expect(tmref::Program &, const std::vector<int> &,
                                              const std::vector<int64_t> &, double)>;

const std::map<std::string, Reference> &References() {
  static const auto *refs = new std::map<std::string, Reference>([] {
    std::map<std::string, Reference> r;
    const std::pair<const char *, Op> binary[] = {
        {"add", Op::kAdd},         {"sub", Op::kSub},         {"mul", Op::kMul},
        {"div", Op::kDiv},         {"pow", Op::kPow},         {"maximum", Op::kMax},
        {"minimum", Op::kMin},     {"less", Op::kLess},       {"greater", Op::kGreater},
        {"equal", Op::kEqual},
    };
    for (const auto &[name, op] : binary) {
      const Op o = op;
      r[name] = [o](tmref::Program &p, const std::vector<int> &v, auto &, double) {
        return p.Binary(o, v[0], v[1]);
      };
    }
    r["where"] = [](tmref::Program &p, auto &v, auto &, double) { return p.Where(v[0], v[1], v[2]); };
    r["cast"] = [](tmref::Program &p, auto &v, auto &i, double) {
      return p.Cast(v[0], static_cast<int>(i[0]));
    };
    r["matmul"] = [](tmref::Program &p, auto &v, auto &, double) { return p.Matmul(v[0], v[1]); };
    const std::pair<const char *, Op> reductions[] = {
        {"reduce_sum", Op::kSum}, {"reduce_max", Op::kRMax}, {"reduce_mean", Op::kMean},
        {"reduce_var", Op::kVar}};
    for (const auto &[name, op] : reductions) {
      const Op o = op;
      r[name] = [o](tmref::Program &p, const std::vector<int> &v, const std::vector<int64_t> &i,
                    double) {
        return p.Reduce(o, v[0], static_cast<int32_t>(i[0]), static_cast<int32_t>(i[1]));
      };
    }
    r["argmax"] = [](tmref::Program &p, auto &v, const std::vector<int64_t> &i, double) {
      return p.ArgMax(v[0], static_cast<int32_t>(i[0]), static_cast<int32_t>(i[1]));
    };
    r["reshape"] = [](tmref::Program &p, auto &v, const std::vector<int64_t> &i, double) {
      return p.Reshape(v[0], static_cast<int32_t>(i.size()), i.data());
    };
    r["transpose"] = [](tmref::Program &p, auto &v, const std::vector<int64_t> &i, double) {
      std::vector<int32_t> perm(i.begin(), i.end());
      return p.Transpose(v[0], perm.empty() ? nullptr : perm.data(),
                         static_cast<int32_t>(perm.size()));
    };
    r["slice"] = [](tmref::Program &p, auto &v, const std::vector<int64_t> &i, double) {
      const int32_t rank = static_cast<int32_t>(i.size() / 2);
      return p.Slice(v[0], rank, i.data(), i.data() + rank);
    };
    r["concat"] = [](tmref::Program &p, const std::vector<int> &v, auto &i, double) {
      return p.Concat(v.data(), static_cast<int32_t>(v.size()), static_cast<int32_t>(i[0]));
    };
    r["gather"] = [](tmref::Program &p, auto &v, auto &, double) { return p.Gather(v[0], v[1]); };
    r["softmax"] = [](tmref::Program &p, auto &v, auto &i, double) {
      return p.Softmax(v[0], static_cast<int32_t>(i[0]));
    };
    r["layer_norm"] = [](tmref::Program &p, auto &v, auto &, double eps) {
      return p.LayerNorm(v[0], v[1], v[2], eps);
    };
    r["gelu_tanh"] = [](tmref::Program &p, auto &v, auto &, double) { return p.Gelu(v[0]); };
    r["causal_mask"] = [](tmref::Program &p, auto &, auto &i, double) {
      return p.CausalMask(i[0], i[1], i[2], static_cast<int>(i[3]));
    };
    for (const tmref::UnaryRef &u : tmref::UnaryRefs()) {
      const Op o = u.op;
      r[u.name] = [o](tmref::Program &p, const std::vector<int> &v, auto &, double) {
        return p.Unary(o, v[0]);
      };
    }
    return r;
  }());
  return *refs;
}

// The composites, whose several roundings the reference bounds together loosely.
bool IsComposite(const std::string &op) {
  return op == "softmax" || op == "layer_norm" || op == "reduce_var" || op == "gelu_tanh";
}

// ---- running one case ----------------------------------------------------------------------

size_t DtypeBytes(tm_dtype d) {
  return d == TM_F32 || d == TM_I32 ? 4 : d == TM_BOOL ? 1 : d == TM_F16 || d == TM_BF16 ? 2 : 8;
}

int64_t Elements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Deterministic input bytes.
std::vector<uint8_t> DrawValues(const Operand &o, std::mt19937_64 &rng) {
  const int64_t n = Elements(o.shape);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * DtypeBytes(o.dtype) + 1);
  std::uniform_real_distribution<double> real(o.draw == Draw::kPositive ? 0.05 : -2.0, 2.0);
  for (int64_t k = 0; k < n; ++k) {
    uint8_t *at = bytes.data() + k * DtypeBytes(o.dtype);
    const int64_t small = static_cast<int64_t>(rng() % 11) - 5;
    const int64_t index = o.rows > 0 ? static_cast<int64_t>(rng() % o.rows) : 0;
    const int64_t integer = o.draw == Draw::kIndices ? index : small;
    static constexpr double kTieValues[] = {-INFINITY, -1.0, 0.0, 1.0, 2.0, 2.0, 2.0, NAN};
    const uint64_t tie = rng() % 64;
    double r = real(rng);
    if (o.draw == Draw::kTies) r = tie < 62 ? kTieValues[tie % 7] : kTieValues[7];
    switch (o.dtype) {
      case TM_F32: { const float f = static_cast<float>(r); std::memcpy(at, &f, 4); break; }
      case TM_F64: { const double d = r; std::memcpy(at, &d, 8); break; }
      case TM_I32: { const int32_t i = static_cast<int32_t>(integer); std::memcpy(at, &i, 4); break; }
      case TM_I64: std::memcpy(at, &integer, 8); break;
      case TM_BOOL: *at = static_cast<uint8_t>(rng() & 1); break;
      default: break;
    }
  }
  return bytes;
}

struct Outcome {
  int compared = 0;
  std::string failure;  // empty when every element is within the bound
};

// Compiles and runs `op` (a table op by kind, or a unary op) on `target`, and compares with
// the reference.
Outcome RunCase(tm_context *ctx, tm_target target, const std::string &name, bool unary, int kind,
            const Case &c, uint64_t seed) {
  Outcome out;
  auto fail = [&](const std::string &why) {
    out.failure = why;
    return out;
  };
  tmref::Program ref(tmref::Semantics{});
  tm_trace *trace = nullptr;
  if (tm_trace_begin(ctx, name.c_str(), &trace) != TM_OK) return fail(tm_last_error());
  std::vector<tm_value> values;
  std::vector<int> ref_values;
  for (const Operand &o : c.inputs) {
    tm_value v;
    if (tm_op_input(trace, o.dtype, static_cast<int32_t>(o.shape.size()), o.shape.data(), &v) !=
        TM_OK) {
      tm_trace_destroy(trace);
      return fail(std::string("tm_op_input: ") + tm_last_error());
    }
    values.push_back(v);
    ref.Input(o.dtype, static_cast<int32_t>(o.shape.size()), o.shape.data());
    ref_values.push_back(ref.Commit());
  }
  tm_value result = 0;
  const tm_status s =
      unary ? tm_op_unary(trace, static_cast<tm_unary_op>(kind), values[0], &result)
            : tm_op(trace, static_cast<tm_op_kind>(kind), values.data(),
                    static_cast<int32_t>(values.size()), c.ints.data(),
                    static_cast<int32_t>(c.ints.size()), c.real, &result);
  const tmref::Expect ex = References().at(name)(ref, ref_values, c.ints, c.real);
  if (s != TM_OK) {
    const std::string why = tm_last_error();
    tm_trace_destroy(trace);
    return fail("recording failed (" + why + "); the reference says " +
                (ex.may_succeed ? "it succeeds" : "'" + ex.why + "'"));
  }
  if (!ex.may_succeed) {
    tm_trace_destroy(trace);
    return fail("recorded, where the reference refuses it: " + ex.why);
  }
  const int ref_result = ref.Commit();
  ref.End(&ref_result, 1);
  ref.CommitEnd(&ref_result, 1);
  tm_compile_options options;
  tm_compile_options_init(&options);
  options.target = target;
  tm_program *program = nullptr;
  if (tm_trace_end(trace, &result, 1) != TM_OK ||
      tm_compile(ctx, trace, &options, &program) != TM_OK) {
    const std::string why = tm_last_error();
    tm_trace_destroy(trace);
    return fail("compiling: " + why);
  }
  tm_trace_destroy(trace);

  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<tm_tensor> in;
  std::vector<tmref::Tensor> ref_in;
  for (const Operand &o : c.inputs) {
    bytes.push_back(DrawValues(o, rng));
    in.push_back({});
    in.back().const_data = bytes.back().data();
    in.back().dtype = o.dtype;
    in.back().rank = static_cast<int32_t>(o.shape.size());
    in.back().shape = o.shape.data();
    tmref::Tensor t;
    t.type = {o.dtype, o.shape, false};
    for (int64_t k = 0; k < Elements(o.shape); ++k)
      t.el.push_back(tmref::LoadElement(o.dtype, bytes.back().data() + k * DtypeBytes(o.dtype)));
    ref_in.push_back(std::move(t));
  }
  tm_dtype out_dtype;
  int32_t out_rank = 0;
  int64_t out_shape[TM_MAX_RANK];
  tm_program_output_type(program, 0, &out_dtype, &out_rank, out_shape);
  const std::vector<int64_t> shape(out_shape, out_shape + out_rank);
  std::vector<uint8_t> result_bytes(static_cast<size_t>(Elements(shape)) * DtypeBytes(out_dtype) + 1);
  tm_tensor output = {};
  output.data = result_bytes.data();
  output.dtype = out_dtype;
  output.rank = out_rank;
  output.shape = out_shape;
  const tm_status ran =
      tm_invoke(program, in.data(), static_cast<int32_t>(in.size()), &output, 1);
  tm_program_release(program);
  if (ran != TM_OK) return fail(std::string("tm_invoke: ") + tm_last_error());

  const tmref::Tensor want = ref.Run(ref_in).values[static_cast<size_t>(ref_result)];
  if (static_cast<int>(out_dtype) != want.type.dtype || shape != want.type.shape)
    return fail("the result is " + std::to_string(out_dtype) + tmref::ShapeStr(shape) +
                ", the reference's " + want.type.str());
  const int dt = want.type.dtype;
  const bool f64 = dt == tmref::kF64;
  const double slack = IsComposite(name) ? (f64 ? 1e-12 : 1e-5) : 0.0;
  for (int64_t k = 0; k < Elements(shape); ++k) {
    const El &w = want.el[static_cast<size_t>(k)];
    if (w.dc) continue;
    const El g = tmref::LoadElement(dt, result_bytes.data() + k * DtypeBytes(out_dtype));
    bool ok;
    if (!tmref::IsFloat(dt)) ok = g.i == w.i;
    else if (std::isnan(w.v)) ok = std::isnan(g.v);
    else if (std::isinf(w.v)) ok = g.v == w.v || (w.e > 0 && std::fabs(g.v) >= tmref::Lim(dt));
    else
      ok = std::fabs(g.v - w.v) <=
           2 * w.e + tmref::MinNormal(dt) + slack * std::fabs(w.v);
    ++out.compared;
    if (!ok) {
      char buf[192];
      if (tmref::IsFloat(dt))
        std::snprintf(buf, sizeof buf, "element %" PRId64 ": %.17g, the reference %.17g (bound %.3g)",
                      k, g.v, w.v, w.e);
      else
        std::snprintf(buf, sizeof buf, "element %" PRId64 ": %" PRId64 ", the reference %" PRId64,
                      k, g.i, w.i);
      return fail(buf);
    }
  }
  return out;
}

std::string Describe(const Case &c) {
  std::string s;
  for (const Operand &o : c.inputs) {
    s += (s.empty() ? "" : ", ") + std::string(tmref::DtypeName(o.dtype)) + tmref::ShapeStr(o.shape);
  }
  s += " | ints (";
  for (size_t i = 0; i < c.ints.size(); ++i) s += (i ? ", " : "") + std::to_string(c.ints[i]);
  return s + ")";
}

// ---- the test ------------------------------------------------------------------------------

struct TableOp {
  std::string name;
  bool unary;
  int kind;
};

std::vector<TableOp> EveryOp() {
  std::vector<TableOp> ops;
  for (int k = 0; k < tm_op_count(); ++k) {
    const std::string signature = tm_op_signature(static_cast<tm_op_kind>(k));
    ops.push_back({signature.substr(0, signature.find('(')), false, k});
  }
  for (int u = 0; u < tm_unary_op_count(); ++u)
    ops.push_back({tm_unary_op_name(static_cast<tm_unary_op>(u)), true, u});
  return ops;
}

TEST(BackendOps, EveryOpHasCasesAndAReference) {
  for (const TableOp &op : EveryOp()) {
    EXPECT_TRUE(Cases().count(op.name)) << op.name << " has no cases in tests/backend_ops";
    EXPECT_TRUE(References().count(op.name)) << op.name << " has no reference in tests/backend_ops";
  }
}

TEST(BackendOps, EveryOpOnEveryTargetEqualsTheReference) {
  tm_context *ctx = nullptr;
  ASSERT_EQ(tm_context_create(&ctx), TM_OK);
  int targets_run = 0;
  for (int t = 0; t < tm_target_count(); ++t) {
    const tm_target target = static_cast<tm_target>(t);
    tm_target_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(tm_target_get_info(target, &info), TM_OK);
    if (tm_target_check(target) != TM_OK) {
      std::printf("target %s: not here (%s)\n", info.name, tm_last_error());
      continue;
    }
    ++targets_run;
    for (const TableOp &op : EveryOp()) {
      if (!Cases().count(op.name) || !References().count(op.name)) continue;  // the test above
      int compared = 0, n = 0;
      for (const Case &c : Cases().at(op.name)) {
        const Outcome o = RunCase(ctx, target, op.name, op.unary, op.kind, c, 1000u * t + ++n);
        EXPECT_TRUE(o.failure.empty())
            << info.name << ": " << op.name << "(" << Describe(c) << "): " << o.failure;
        compared += o.compared;
      }
      std::printf("target %s: %-12s %d cases, %d elements compared\n", info.name,
                  op.name.c_str(), n, compared);
    }
  }
  EXPECT_GE(targets_run, 1);
  tm_context_release(ctx);
}

}  // namespace
