#include "gpt2/src/programs.h"

#include <cmath>
#include <memory>

namespace tinymlir::gpt2 {
namespace {

// x @ w + b: a GPT-2 Conv1D, w held [in, out] as stored or [out, in]
// (projections_out_major; the transpose is a view, read in place). A half-precision w is
// promoted by the matmul; the CPU target widens it inside its kernels (never a copy in f32).
tm_value Linear(Tracer &tr, const Gpt2Config &c, tm_value x, tm_value w, tm_value b) {
  return tr.add(tr.matmul(x, c.projections_out_major ? tr.transpose(w, {1, 0}) : w), b);
}

// A projection's weight input, (in, out) as stored or (out, in).
tm_value Projection(Tracer &tr, const Gpt2Config &c, int64_t in, int64_t out) {
  return c.projections_out_major ? tr.input(c.matrices, {out, in}) : tr.input(c.matrices, {in, out});
}

void TraceEmbed(Tracer &tr, const Gpt2Config &c, int64_t t) {
  tm_value ids = tr.input(TM_I32, {t});
  tm_value positions = tr.input(TM_I32, {t});
  tm_value wte = tr.input(c.matrices, {c.vocab_size, c.n_embd});
  tm_value wpe = tr.input(TM_F32, {c.n_ctx, c.n_embd});
  tm_value tokens = tr.gather(wte, ids);  // rows of a half table widen after the gather
  if (c.matrices != TM_F32) tokens = tr.cast(tokens, TM_F32);
  tr.end({tr.add(tokens, tr.gather(wpe, positions))});  // (t, d)
}

void TraceQkv(Tracer &tr, const Gpt2Config &c, int64_t t) {
  const int64_t d = c.n_embd;
  tm_value x = tr.input(TM_F32, {t, d});
  tm_value g = tr.input(TM_F32, {d}), b = tr.input(TM_F32, {d});
  tm_value w = Projection(tr, c, d, 3 * d), bias = tr.input(TM_F32, {3 * d});
  tm_value qkv = Linear(tr, c, tr.layer_norm(x, g, b, c.layer_norm_epsilon), w, bias);  // (t, 3d)
  tr.end({tr.slice(qkv, {0, 0}, {t, d}), tr.slice(qkv, {0, d}, {t, 2 * d}),
          tr.slice(qkv, {0, 2 * d}, {t, 3 * d})});
}

// Causal self-attention of t query rows over l cache rows: the merged heads, (t, d).
tm_value Attention(Tracer &tr, const Gpt2Config &c, int64_t t, int64_t l, tm_value q, tm_value k,
                   tm_value v, tm_value mask) {
  const int64_t d = c.n_embd, h = c.n_head, hd = c.head_dim();
  tm_value qh = tr.transpose(tr.reshape(q, {t, h, hd}), {1, 0, 2});   // (h, t, hd)
  tm_value kt = tr.transpose(tr.reshape(k, {l, h, hd}), {1, 2, 0});   // (h, hd, l)
  tm_value vh = tr.transpose(tr.reshape(v, {l, h, hd}), {1, 0, 2});   // (h, l, hd)
  tm_value scores = tr.mul(tr.matmul(qh, kt), tr.scalar(1.0 / std::sqrt(double(hd))));
  tm_value probs = tr.softmax(tr.add(scores, mask));                   // (h, t, l)
  tm_value heads = tr.matmul(probs, vh);                                // (h, t, hd)
  return tr.reshape(tr.transpose(heads, {1, 0, 2}), {t, d});           // (t, d)
}

// The attention inputs (q, then k and v of l cache rows, then the (t, l) mask).
struct AttentionInputs {
  tm_value q, k, v, mask;
};
AttentionInputs AttentionInputsOf(Tracer &tr, const Gpt2Config &c, int64_t t, int64_t l) {
  const int64_t d = c.n_embd;
  tm_value q = tr.input(TM_F32, {t, d});
  tm_value k = tr.input(TM_F32, {l, d});
  tm_value v = tr.input(TM_F32, {l, d});
  tm_value mask = tr.input(TM_F32, {t, l});  // 0 = visible, lowest float = hidden
  return {q, k, v, mask};
}

// The block's rest after the attention: its output projection and residual, then the MLP
// and its residual, over x and the merged heads (t, d). Its weights are the next inputs.
tm_value ProjMlp(Tracer &tr, const Gpt2Config &c, tm_value x, tm_value merged) {
  const int64_t d = c.n_embd, inner = c.n_inner;
  tm_value proj_w = Projection(tr, c, d, d), proj_b = tr.input(TM_F32, {d});
  tm_value ln2_g = tr.input(TM_F32, {d}), ln2_b = tr.input(TM_F32, {d});
  tm_value fc_w = Projection(tr, c, d, inner), fc_b = tr.input(TM_F32, {inner});
  tm_value mp_w = Projection(tr, c, inner, d), mp_b = tr.input(TM_F32, {d});
  tm_value x1 = tr.add(x, Linear(tr, c, merged, proj_w, proj_b));
  tm_value hidden = tr.gelu_tanh(Linear(tr, c, tr.layer_norm(x1, ln2_g, ln2_b, c.layer_norm_epsilon),
                                      fc_w, fc_b));                     // (t, inner)
  return tr.add(x1, Linear(tr, c, hidden, mp_w, mp_b));
}

void TraceAttnMlp(Tracer &tr, const Gpt2Config &c, int64_t t, int64_t l) {
  tm_value x = tr.input(TM_F32, {t, c.n_embd});
  const AttentionInputs a = AttentionInputsOf(tr, c, t, l);
  tr.end({ProjMlp(tr, c, x, Attention(tr, c, t, l, a.q, a.k, a.v, a.mask))});
}

void TraceAttention(Tracer &tr, const Gpt2Config &c, int64_t t, int64_t l) {
  const AttentionInputs a = AttentionInputsOf(tr, c, t, l);
  tr.end({Attention(tr, c, t, l, a.q, a.k, a.v, a.mask)});
}

void TraceProjMlp(Tracer &tr, const Gpt2Config &c, int64_t t) {
  tm_value x = tr.input(TM_F32, {t, c.n_embd});
  tm_value merged = tr.input(TM_F32, {t, c.n_embd});
  tr.end({ProjMlp(tr, c, x, merged)});
}

// The final layer norm and the tied LM head over t rows: (t, d) -> (vocab_size) for one
// row, (t, vocab_size) for more (scoring).
void TraceHead(Tracer &tr, const Gpt2Config &c, int64_t t) {
  const int64_t d = c.n_embd;
  tm_value x = tr.input(TM_F32, {t, d});
  tm_value g = tr.input(TM_F32, {d}), b = tr.input(TM_F32, {d});
  tm_value wte = tr.input(c.matrices, {c.vocab_size, d});
  tm_value xn = tr.layer_norm(x, g, b, c.layer_norm_epsilon);
  if (t == 1) {
    // wte @ x^T: the head without transposing the (V, d) table; N = 1 makes it a single
    // GEMV on the CPU target.
    tr.end({tr.reshape(tr.matmul(wte, tr.reshape(xn, {d, 1})), {c.vocab_size})});
    return;
  }
  // x @ wte^T, wte read in place as a (d, V) view, as a projection stored (out, in) is.
  tr.end({tr.matmul(xn, tr.transpose(wte, {1, 0}))});
}

// The head at one position, then the greedy choice among the first c ids (see programs.h).
void TraceHeadArgmax(Tracer &tr, const Gpt2Config &c, int64_t candidates) {
  const int64_t d = c.n_embd;
  tm_value x = tr.input(TM_F32, {1, d});
  tm_value g = tr.input(TM_F32, {d}), b = tr.input(TM_F32, {d});
  tm_value wte = tr.input(c.matrices, {c.vocab_size, d});
  tm_value iota = tr.input(TM_F32, {candidates});
  tm_value xn = tr.layer_norm(x, g, b, c.layer_norm_epsilon);
  tm_value logits = tr.reshape(tr.matmul(wte, tr.reshape(xn, {d, 1})), {c.vocab_size});
  if (candidates < c.vocab_size) logits = tr.slice(logits, {0}, {candidates});
  // The first index holding the largest logit: the smallest of the indices that do, as
  // -max(-index); every other index counts as C.
  tm_value top = tr.reduce_max(logits, 0, /*keepdims=*/true);
  tm_value index = tr.where(tr.equal(logits, top), iota,
                            tr.scalar(static_cast<double>(candidates)));
  tm_value token = tr.cast(tr.neg(tr.reduce_max(tr.neg(index), 0, /*keepdims=*/true)), TM_I32);
  // 1 for a finite logit: NaN is not equal to itself, an infinity is above the largest float.
  tm_value bounded = tr.where(tr.greater(tr.abs(logits), tr.scalar(3.4028234663852886e38)),
                              tr.scalar(0.0), tr.scalar(1.0));
  tm_value finite = tr.where(tr.equal(logits, logits), bounded, tr.scalar(0.0));
  tm_value non_finite = tr.cast(
      tr.reduce_sum(tr.sub(tr.scalar(1.0), finite), 0, /*keepdims=*/true), TM_I32);
  tr.end({token, non_finite});
}

}  // namespace

void TraceProgram(const Gpt2Config &config, ProgramKind kind, int64_t t, int64_t l,
                  Tracer *tracer) {
  switch (kind) {
    case ProgramKind::kEmbed: TraceEmbed(*tracer, config, t); break;
    case ProgramKind::kQkv: TraceQkv(*tracer, config, t); break;
    case ProgramKind::kAttnMlp: TraceAttnMlp(*tracer, config, t, l); break;
    case ProgramKind::kHead: TraceHead(*tracer, config, t); break;
    case ProgramKind::kAttention: TraceAttention(*tracer, config, t, l); break;
    case ProgramKind::kProjMlp: TraceProjMlp(*tracer, config, t); break;
    case ProgramKind::kHeadArgmax: TraceHeadArgmax(*tracer, config, l); break;
  }
}

// LLVM optimisation per program, by what it is worth (bench/profile_programs --opt N shows
// both sides). At -O3 LLVM fully unrolls and unswitches the attention's loops over the L cache
// rows: 3x the code and 2.3x the compile time at GPT-2 124M's L = 256 (1.4 s against 0.6 s,
// growing with L) for no measurable gain in its invoke time, which BLAS dominates. The other
// programs compile as fast at -O3 as at -O2.
namespace {
int OptLevel(ProgramKind kind) {
  return kind == ProgramKind::kAttnMlp || kind == ProgramKind::kAttention ? 2 : 3;
}
}  // namespace

Status CompileProgram(tm_context *ctx, const Gpt2Config &config, tm_target target,
                      ProgramKind kind, int64_t t, int64_t l, ProgramHandle *out) {
  Tracer tracer(ctx, ProgramName(kind));
  TraceProgram(config, kind, t, l, &tracer);
  tm_compile_options options;
  tm_compile_options_init(&options);
  options.target = target;
  options.opt_level = OptLevel(kind);
  if (tracer.compile(ctx, &options, out) != TM_OK) return Status(static_cast<StatusCode>(tracer.status()), tracer.error());
  return Status::Ok();
}

}  // namespace tinymlir::gpt2
