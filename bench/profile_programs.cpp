// profile_programs: where tinymlir's GPT-2 time goes, per program kind.
//
// Re-traces, through the public C API only, the programs the library's GPT-2 model runs
// (embed, qkv, attn_mlp, head: the same ops and shapes as core/model/gpt2_programs.cpp)
// plus finer pieces of attn_mlp, compiles them, and times tm_invoke on random data with
// GPT-2 124M shapes. Prints one line per program: compile ms, median invoke ms, and the
// per-token cost implied for a 12-layer decode step.
//
//   profile_programs [--t 1] [--l 128] [--reps 10] [--ir KIND]   (KIND: print lowered IR)
#include <tinymlir/tinymlir.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

bool g_real_mask = false;
bool g_mask_half = false;
// Cache rows visible to row 0: all but the last t - 1 rows, or half of them (--mask-half).
int64_t g_mask_offset(int64_t rows, int64_t cols) { return g_mask_half ? cols / 2 - rows : cols - rows; }

const int64_t V = 50257, C = 1024, D = 768, H = 12, HD = 64, I = 3072;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Check(tm_status s, const char *what) {
  if (s != TM_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", what, tm_status_string(s), tm_last_error());
    std::exit(1);
  }
}

// Minimal tracing helpers; every input remembers its shape/dtype so data can be made for it.
struct Tr {
  tm_trace *t = nullptr;
  std::vector<std::pair<tm_dtype, std::vector<int64_t>>> inputs;
  int mask_input = -1;  // filled with a causal mask: 0 visible, lowest float hidden
  tm_value Mask(int64_t t, int64_t l) {
    mask_input = (int)inputs.size();
    return F({t, l});
  }
  tm_value In(tm_dtype dt, std::vector<int64_t> s) {
    tm_value v;
    Check(tm_op_input(t, dt, (int32_t)s.size(), s.data(), &v), "input");
    inputs.push_back({dt, s});
    return v;
  }
  tm_value F(std::vector<int64_t> s) { return In(TM_F32, s); }
  // Runs one tm_op_* call (f writes the new value) and stops the program on failure.
  template <typename Fn>
  tm_value Op(Fn f) {
    tm_value v = 0;
    Check(f(&v), "op");
    return v;
  }
  tm_value Add(tm_value a, tm_value b) { return Op([&](tm_value *v) { return tm_op_add(t, a, b, v); }); }
  tm_value Mul(tm_value a, tm_value b) { return Op([&](tm_value *v) { return tm_op_mul(t, a, b, v); }); }
  tm_value Mm(tm_value a, tm_value b) { return Op([&](tm_value *v) { return tm_op_matmul(t, a, b, v); }); }
  tm_value Sc(double x) { return Op([&](tm_value *v) { return tm_op_scalar(t, TM_F32, x, v); }); }
  tm_value Rs(tm_value x, std::vector<int64_t> s) {
    return Op([&](tm_value *v) { return tm_op_reshape(t, x, (int32_t)s.size(), s.data(), v); });
  }
  tm_value Tp(tm_value x, std::vector<int32_t> p) {
    return Op([&](tm_value *v) { return tm_op_transpose(t, x, p.data(), v); });
  }
  tm_value Sl(tm_value x, std::vector<int64_t> b, std::vector<int64_t> e) {
    return Op([&](tm_value *v) { return tm_op_slice(t, x, b.data(), e.data(), v); });
  }
  tm_value Ga(tm_value tab, tm_value ids) { return Op([&](tm_value *v) { return tm_op_gather(t, tab, ids, v); }); }
  tm_value Ln(tm_value x, tm_value g, tm_value b) {
    return Op([&](tm_value *v) { return tm_op_layer_norm(t, x, g, b, 1e-5, v); });
  }
  tm_value Sm(tm_value x) { return Op([&](tm_value *v) { return tm_op_softmax(t, x, -1, v); }); }
  tm_value Ge(tm_value x) { return Op([&](tm_value *v) { return tm_op_gelu_tanh(t, x, v); }); }
  tm_value Lin(tm_value x, tm_value w, tm_value b) { return Add(Mm(x, w), b); }
};

using Body = std::function<std::vector<tm_value>(Tr &)>;

struct Kernel {
  std::string name;
  int per_token;  // how many times a decode/prefill step runs it (12 per layer-program)
  Body body;
};

void Profile(tm_context *ctx, const Kernel &k, int reps, const std::string &ir_kind) {
  Tr tr;
  Check(tm_trace_begin(ctx, k.name.c_str(), &tr.t), "trace_begin");
  std::vector<tm_value> outs = k.body(tr);
  Check(tm_trace_end(tr.t, outs.data(), (int32_t)outs.size()), "trace_end");
  double t0 = Now();
  tm_program *p = nullptr;
  Check(tm_compile(ctx, tr.t, nullptr, &p), "compile");
  double compile_ms = 1e3 * (Now() - t0);
  if (ir_kind == k.name) {
    char *text = nullptr;
    Check(tm_program_ir(p, TM_STAGE_LOWERED, &text), "ir");
    std::printf("%s\n", text);
    tm_free(text);
  }
  // Data: floats N(0, 0.02) (ones for layer-norm gammas would not change timing), ids 0.
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 0.02f);
  std::vector<std::vector<char>> bufs;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<tm_tensor> out;
  auto numel = [](const std::vector<int64_t> &s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
  };
  for (auto &[dt, s] : tr.inputs) {
    shapes.push_back(s);
    bufs.emplace_back(numel(s) * 4);
    if (dt == TM_F32) {
      float *f = reinterpret_cast<float *>(bufs.back().data());
      for (int64_t i = 0; i < numel(s); ++i) f[i] = nd(rng);
      if ((int)bufs.size() - 1 == tr.mask_input && g_real_mask) {
        // As the model builds it after a t-token step ending at cache row l - 1... or, for
        // --mask-half, with only the first half of the rows visible (a partly filled cache).
        int64_t rows = s[0], cols = s[1];
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            f[i * cols + j] = j <= i + g_mask_offset(rows, cols) ? 0.0f
                                                                 : std::numeric_limits<float>::lowest();
      }
    } else {
      std::memset(bufs.back().data(), 0, bufs.back().size());
    }
  }
  // A program that runs once per layer gets one copy of its inputs per layer, used in turn,
  // so that (as in the model) its weights come from DRAM, not from the cache.
  const int copies = k.per_token;
  std::vector<std::vector<char>> extra;  // inputs of copies 1..copies-1
  std::vector<std::vector<tm_tensor>> sets(copies);
  for (int c = 0; c < copies; ++c)
    for (size_t i = 0; i < tr.inputs.size(); ++i) {
      void *data = bufs[i].data();
      if (c > 0) {
        extra.push_back(bufs[i]);
        data = extra.back().data();
      }
      sets[c].push_back({data, tr.inputs[i].first, (int32_t)shapes[i].size(), shapes[i].data(),
                         nullptr});
    }
  for (int32_t i = 0; i < tm_program_num_outputs(p); ++i) {
    tm_dtype dt;
    int32_t rank;
    std::vector<int64_t> s(TM_MAX_RANK);
    Check(tm_program_output_type(p, i, &dt, &rank, s.data()), "output_type");
    s.resize(rank);
    shapes.push_back(s);
    bufs.emplace_back(numel(s) * 4);
  }
  size_t base = tr.inputs.size();
  for (size_t i = base; i < bufs.size(); ++i)
    out.push_back({bufs[i].data(), TM_F32, (int32_t)shapes[i].size(), shapes[i].data(), nullptr});
  std::vector<double> ms;  // per invoke, averaged over the copies
  for (int r = 0; r < reps + 1; ++r) {
    double s = Now();
    for (int c = 0; c < copies; ++c)
      Check(tm_invoke(p, sets[c].data(), (int32_t)sets[c].size(), out.data(), (int32_t)out.size()),
            "invoke");
    if (r > 0) ms.push_back(1e3 * (Now() - s) / copies);  // the first round is a warm-up
  }
  std::sort(ms.begin(), ms.end());
  double med = ms[ms.size() / 2];
  std::printf("%-22s compile %8.1f ms   invoke median %9.3f ms  min %9.3f ms   x%-2d = %9.2f ms\n",
              k.name.c_str(), compile_ms, med, ms.front(), k.per_token, med * k.per_token);
  tm_program_release(p);
  tm_trace_destroy(tr.t);
}

}  // namespace

int main(int argc, char **argv) {
  int64_t t = 1, l = 128;
  int reps = 10;
  std::string ir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--real-mask") { g_real_mask = true; continue; }
    if (a == "--mask-half") { g_real_mask = g_mask_half = true; continue; }
    if (i + 1 >= argc) break;
    if (a == "--t") t = std::atoll(argv[i + 1]);
    else if (a == "--l") l = std::atoll(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--ir") ir = argv[i + 1];
    ++i;
  }
  std::printf("GPT-2 124M program timings: t = %lld rows, l = %lld cache rows\n", (long long)t,
              (long long)l);
  tm_context *ctx;
  Check(tm_context_create(&ctx), "context");
  std::vector<Kernel> ks = {
      {"embed", 1, [&](Tr &r) -> std::vector<tm_value> {
         tm_value ids = r.In(TM_I32, {t}), pos = r.In(TM_I32, {t});
         tm_value wte = r.F({V, D}), wpe = r.F({C, D});
         return {r.Add(r.Ga(wte, ids), r.Ga(wpe, pos))};
       }},
      {"qkv", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, D}), g = r.F({D}), b = r.F({D}), w = r.F({D, 3 * D}), bb = r.F({3 * D});
         tm_value qkv = r.Lin(r.Ln(x, g, b), w, bb);
         return {r.Sl(qkv, {0, 0}, {t, D}), r.Sl(qkv, {0, D}, {t, 2 * D}),
                 r.Sl(qkv, {0, 2 * D}, {t, 3 * D})};
       }},
      {"attn_mlp", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, D}), q = r.F({t, D}), k = r.F({l, D}), v = r.F({l, D}), m = r.Mask(t, l);
         tm_value pw = r.F({D, D}), pb = r.F({D}), g = r.F({D}), b = r.F({D});
         tm_value fw = r.F({D, I}), fb = r.F({I}), mw = r.F({I, D}), mb = r.F({D});
         tm_value qh = r.Tp(r.Rs(q, {t, H, HD}), {1, 0, 2});
         tm_value kt = r.Tp(r.Rs(k, {l, H, HD}), {1, 2, 0});
         tm_value vh = r.Tp(r.Rs(v, {l, H, HD}), {1, 0, 2});
         tm_value probs = r.Sm(r.Add(r.Mul(r.Mm(qh, kt), r.Sc(1.0 / 8.0)), m));
         tm_value merged = r.Rs(r.Tp(r.Mm(probs, vh), {1, 0, 2}), {t, D});
         tm_value x1 = r.Add(x, r.Lin(merged, pw, pb));
         tm_value hid = r.Ge(r.Lin(r.Ln(x1, g, b), fw, fb));
         return {r.Add(x1, r.Lin(hid, mw, mb))};
       }},
      {"head", 1, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({1, D}), g = r.F({D}), b = r.F({D}), wte = r.F({V, D});
         return {r.Rs(r.Mm(wte, r.Rs(r.Ln(x, g, b), {D, 1})), {V})};
       }},
      // Pieces of attn_mlp, to locate its cost.
      {"  attention_only", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value q = r.F({t, D}), k = r.F({l, D}), v = r.F({l, D}), m = r.Mask(t, l);
         tm_value qh = r.Tp(r.Rs(q, {t, H, HD}), {1, 0, 2});
         tm_value kt = r.Tp(r.Rs(k, {l, H, HD}), {1, 2, 0});
         tm_value vh = r.Tp(r.Rs(v, {l, H, HD}), {1, 0, 2});
         tm_value probs = r.Sm(r.Add(r.Mul(r.Mm(qh, kt), r.Sc(1.0 / 8.0)), m));
         return {r.Rs(r.Tp(r.Mm(probs, vh), {1, 0, 2}), {t, D})};
       }},
      {"  transpose_k_only", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value k = r.F({l, D});
         return {r.Tp(r.Rs(k, {l, H, HD}), {1, 2, 0})};
       }},
      {"  attn_proj_linear", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, D}), w = r.F({D, D}), b = r.F({D});
         return {r.Lin(x, w, b)};
       }},
      {"  ln_fc_gelu", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, D}), g = r.F({D}), b = r.F({D}), w = r.F({D, I}), bb = r.F({I});
         return {r.Ge(r.Lin(r.Ln(x, g, b), w, bb))};
       }},
      {"  fc_matmul_only", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, D}), w = r.F({D, I});
         return {r.Mm(x, w)};
       }},
      {"  mlp_proj_linear", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, I}), w = r.F({I, D}), b = r.F({D});
         return {r.Lin(x, w, b)};
       }},
      {"  mlp_proj_matmul_only", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, I}), w = r.F({I, D});
         return {r.Mm(x, w)};
       }},
      {"  layer_norm_only", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, D}), g = r.F({D}), b = r.F({D});
         return {r.Ln(x, g, b)};
       }},
      {"  gelu_only", 12, [&](Tr &r) -> std::vector<tm_value> {
         tm_value x = r.F({t, I});
         return {r.Ge(x)};
       }},
  };
  for (auto &k : ks) Profile(ctx, k, reps, ir);
  tm_context_destroy(ctx);
  return 0;
}
