#include "core/model/gpt2_programs.h"

#include <cmath>
#include <memory>

namespace tinymlir {
namespace {

// A trace under construction; every op goes through Op(), which stops at the first failure
// (the status and tm_last_error() then describe it).
class Tracer {
 public:
  explicit Tracer(tm_trace *trace) : t_(trace) {}
  bool ok() const { return status_ == TM_OK; }
  tm_status status() const { return status_; }

  template <typename F>
  tm_value Op(F &&f) {
    tm_value v = 0;
    if (ok()) status_ = f(&v);
    return v;
  }
  tm_value Input(tm_dtype dtype, std::initializer_list<int64_t> shape) {
    std::vector<int64_t> s(shape);
    return Op([&](tm_value *v) {
      return tm_op_input(t_, dtype, static_cast<int32_t>(s.size()), s.data(), v);
    });
  }
  tm_value Scalar(double x) {
    return Op([&](tm_value *v) { return tm_op_scalar(t_, TM_F32, x, v); });
  }
  tm_value Add(tm_value a, tm_value b) { return Op([&](tm_value *v) { return tm_op_add(t_, a, b, v); }); }
  tm_value Mul(tm_value a, tm_value b) { return Op([&](tm_value *v) { return tm_op_mul(t_, a, b, v); }); }
  tm_value Matmul(tm_value a, tm_value b) {
    return Op([&](tm_value *v) { return tm_op_matmul(t_, a, b, v); });
  }
  tm_value Reshape(tm_value x, std::initializer_list<int64_t> shape) {
    std::vector<int64_t> s(shape);
    return Op([&](tm_value *v) {
      return tm_op_reshape(t_, x, static_cast<int32_t>(s.size()), s.data(), v);
    });
  }
  tm_value Transpose(tm_value x, std::initializer_list<int32_t> perm) {
    std::vector<int32_t> p(perm);
    return Op([&](tm_value *v) { return tm_op_transpose(t_, x, p.data(), v); });
  }
  tm_value Slice(tm_value x, std::initializer_list<int64_t> begin,
                 std::initializer_list<int64_t> end) {
    std::vector<int64_t> b(begin), e(end);
    return Op([&](tm_value *v) { return tm_op_slice(t_, x, b.data(), e.data(), v); });
  }
  tm_value Gather(tm_value table, tm_value ids) {
    return Op([&](tm_value *v) { return tm_op_gather(t_, table, ids, v); });
  }
  tm_value LayerNorm(tm_value x, tm_value g, tm_value b, double eps) {
    return Op([&](tm_value *v) { return tm_op_layer_norm(t_, x, g, b, eps, v); });
  }
  tm_value Softmax(tm_value x) { return Op([&](tm_value *v) { return tm_op_softmax(t_, x, -1, v); }); }
  tm_value Gelu(tm_value x) { return Op([&](tm_value *v) { return tm_op_gelu_tanh(t_, x, v); }); }
  // x @ w + b: a GPT-2 Conv1D (weights stored [in, out]).
  tm_value Linear(tm_value x, tm_value w, tm_value b) { return Add(Matmul(x, w), b); }

  void End(std::initializer_list<tm_value> outputs) {
    std::vector<tm_value> o(outputs);
    if (ok()) status_ = tm_trace_end(t_, o.data(), static_cast<int32_t>(o.size()));
  }

 private:
  tm_trace *t_;
  tm_status status_ = TM_OK;
};

void TraceEmbed(Tracer &tr, const Gpt2Config &c, int64_t t) {
  tm_value ids = tr.Input(TM_I32, {t});
  tm_value positions = tr.Input(TM_I32, {t});
  tm_value wte = tr.Input(TM_F32, {c.vocab_size, c.n_embd});
  tm_value wpe = tr.Input(TM_F32, {c.n_ctx, c.n_embd});
  tr.End({tr.Add(tr.Gather(wte, ids), tr.Gather(wpe, positions))});  // (t, d)
}

void TraceQkv(Tracer &tr, const Gpt2Config &c, int64_t t) {
  const int64_t d = c.n_embd;
  tm_value x = tr.Input(TM_F32, {t, d});
  tm_value g = tr.Input(TM_F32, {d}), b = tr.Input(TM_F32, {d});
  tm_value w = tr.Input(TM_F32, {d, 3 * d}), bias = tr.Input(TM_F32, {3 * d});
  tm_value qkv = tr.Linear(tr.LayerNorm(x, g, b, c.layer_norm_epsilon), w, bias);  // (t, 3d)
  tr.End({tr.Slice(qkv, {0, 0}, {t, d}), tr.Slice(qkv, {0, d}, {t, 2 * d}),
          tr.Slice(qkv, {0, 2 * d}, {t, 3 * d})});
}

void TraceAttnMlp(Tracer &tr, const Gpt2Config &c, int64_t t, int64_t l) {
  const int64_t d = c.n_embd, h = c.n_head, hd = c.head_dim(), inner = c.n_inner;
  tm_value x = tr.Input(TM_F32, {t, d});
  tm_value q = tr.Input(TM_F32, {t, d});
  tm_value k = tr.Input(TM_F32, {l, d});
  tm_value v = tr.Input(TM_F32, {l, d});
  tm_value mask = tr.Input(TM_F32, {t, l});  // 0 = visible, lowest float = hidden
  tm_value proj_w = tr.Input(TM_F32, {d, d}), proj_b = tr.Input(TM_F32, {d});
  tm_value ln2_g = tr.Input(TM_F32, {d}), ln2_b = tr.Input(TM_F32, {d});
  tm_value fc_w = tr.Input(TM_F32, {d, inner}), fc_b = tr.Input(TM_F32, {inner});
  tm_value mp_w = tr.Input(TM_F32, {inner, d}), mp_b = tr.Input(TM_F32, {d});

  tm_value qh = tr.Transpose(tr.Reshape(q, {t, h, hd}), {1, 0, 2});   // (h, t, hd)
  tm_value kt = tr.Transpose(tr.Reshape(k, {l, h, hd}), {1, 2, 0});   // (h, hd, l)
  tm_value vh = tr.Transpose(tr.Reshape(v, {l, h, hd}), {1, 0, 2});   // (h, l, hd)
  tm_value scores = tr.Mul(tr.Matmul(qh, kt), tr.Scalar(1.0 / std::sqrt(double(hd))));
  tm_value probs = tr.Softmax(tr.Add(scores, mask));                   // (h, t, l)
  tm_value heads = tr.Matmul(probs, vh);                                // (h, t, hd)
  tm_value merged = tr.Reshape(tr.Transpose(heads, {1, 0, 2}), {t, d});  // (t, d)
  tm_value x1 = tr.Add(x, tr.Linear(merged, proj_w, proj_b));
  tm_value hidden = tr.Gelu(tr.Linear(tr.LayerNorm(x1, ln2_g, ln2_b, c.layer_norm_epsilon),
                                      fc_w, fc_b));                     // (t, inner)
  tr.End({tr.Add(x1, tr.Linear(hidden, mp_w, mp_b))});
}

void TraceHead(Tracer &tr, const Gpt2Config &c) {
  const int64_t d = c.n_embd;
  tm_value x = tr.Input(TM_F32, {1, d});
  tm_value g = tr.Input(TM_F32, {d}), b = tr.Input(TM_F32, {d});
  tm_value wte = tr.Input(TM_F32, {c.vocab_size, d});
  // wte @ x^T: the tied LM head without transposing the (V, d) table; N = 1 makes it a
  // single GEMV on the CPU target.
  tm_value col = tr.Reshape(tr.LayerNorm(x, g, b, c.layer_norm_epsilon), {d, 1});
  tr.End({tr.Reshape(tr.Matmul(wte, col), {c.vocab_size})});
}

}  // namespace

tm_status CompileGpt2Program(tm_context *ctx, const Gpt2Config &config, tm_target target,
                             Gpt2ProgramKind kind, int64_t t, int64_t l, tm_program **out,
                             bool *was_cached) {
  static const char *names[] = {"gpt2_embed", "gpt2_qkv", "gpt2_attn_mlp", "gpt2_head"};
  tm_trace *raw = nullptr;
  tm_status s = tm_trace_begin(ctx, names[static_cast<int>(kind)], &raw);
  if (s != TM_OK) return s;
  std::unique_ptr<tm_trace, void (*)(tm_trace *)> trace(raw, tm_trace_destroy);
  Tracer tr(raw);
  switch (kind) {
    case Gpt2ProgramKind::kEmbed: TraceEmbed(tr, config, t); break;
    case Gpt2ProgramKind::kQkv: TraceQkv(tr, config, t); break;
    case Gpt2ProgramKind::kAttnMlp: TraceAttnMlp(tr, config, t, l); break;
    case Gpt2ProgramKind::kHead: TraceHead(tr, config); break;
  }
  if (!tr.ok()) return tr.status();
  uint64_t before = 0, after = 0;
  tm_cache_stats(ctx, &before, nullptr, nullptr);
  tm_compile_options options;
  tm_compile_options_init(&options);
  options.target = target;
  s = tm_compile(ctx, raw, &options, out);
  tm_cache_stats(ctx, &after, nullptr, nullptr);
  *was_cached = after > before;
  return s;
}

}  // namespace tinymlir
