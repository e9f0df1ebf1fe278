// The GPT-2 forward pass as tinymlir programs, traced through the public C API.
//
// Program kinds, each specialised on its sequence lengths only; weights are inputs, so
// every transformer block shares one program (12 blocks of GPT-2 124M -> 1 compile):
//
//   embed(T):        ids (T) i32, positions (T) i32, wte, wpe      -> x (T, d)
//   qkv(T):          x (T, d), ln_1 g/b, c_attn w/b                -> q, k, v (T, d)
//   attn_mlp(T, L):  x, q (T, d), k, v (L, d) cache rows, mask (T, L),
//                    c_proj w/b, ln_2 g/b, c_fc w/b, mlp c_proj w/b -> x' (T, d)
//   head(T):         x (T, d), ln_f g/b, wte (V, d)                -> logits (V) or (T, V)
//   head_argmax(C):  x (1, d), ln_f g/b, wte (V, d), iota (C)      -> token (1) i32,
//                                                                     non-finite (1) i32
//
// head_argmax is the greedy step on a device: the first of the C candidate ids (those the
// tokenizer decodes) with the largest logit, and how many of their logits are NaN or
// infinite (then the logits are computed again to name one), so that a token costs the host
// 8 bytes instead of V floats. `iota` holds 0 .. C - 1 as floats (exact below 2^24).
//
// A batch of sequences decodes with attn_mlp in two parts, since each sequence attends to a
// cache of its own while the projections read their weights once for all rows:
//
//   attention(T, L): q (T, d), k, v (L, d) one sequence's cache rows, mask (T, L)
//                                                                   -> merged heads (T, d)
//   proj_mlp(T):     x, merged (T, d), c_proj w/b, ln_2 g/b, c_fc w/b, mlp c_proj w/b
//                                                                   -> x' (T, d)
//
// Both parts do attn_mlp's operations in its order, so a sequence's row gets the bits it
// gets alone wherever a product's rows are summed independently (gemv_kernels.h).
//
// wte and the blocks' four projection matrices are inputs of dtype config.matrices (F32,
// F16 or BF16); everything else is F32.
//
// The KV cache lives outside the programs (the model writes k, v rows at their positions),
// so the decode step has one fixed shape per cache bucket L and the attention reads only
// L <= n_ctx cached rows.
#pragma once

#include <cstdint>
#include <tuple>

#include "gpt2/src/checkpoint.h"
#include "gpt2/src/status.h"
#include "tinymlir/tinymlir.hpp"

namespace tinymlir::gpt2 {

enum class ProgramKind { kEmbed, kQkv, kAttnMlp, kHead, kAttention, kProjMlp, kHeadArgmax };

// The tm_model_program a kind's invoke time is counted under (tm_model_stats): a batch's
// attention and proj_mlp are the two parts of attn_mlp.
inline int StatsSlot(ProgramKind kind) {
  if (kind == ProgramKind::kAttention || kind == ProgramKind::kProjMlp)
    return static_cast<int>(ProgramKind::kAttnMlp);
  if (kind == ProgramKind::kHeadArgmax) return static_cast<int>(ProgramKind::kHead);
  return static_cast<int>(kind);
}

// attn_mlp's input holding the (T, L) additive attention mask.
inline constexpr int kAttnMlpMaskInput = 4;

// The rows of the head program that scoring runs (kHead with T = kScoreRows): positions
// are scored this many at a time.
inline constexpr int64_t kScoreRows = 64;

// One program of a model: (ProgramKind, T, L), L = 0 except for kAttnMlp and kAttention (the
// cache rows) and kHeadArgmax (the candidates C).
using ProgramKey = std::tuple<int, int64_t, int64_t>;

inline const char *ProgramName(ProgramKind kind) {
  switch (kind) {
    case ProgramKind::kEmbed: return "gpt2_embed";
    case ProgramKind::kQkv: return "gpt2_qkv";
    case ProgramKind::kAttnMlp: return "gpt2_attn_mlp";
    case ProgramKind::kHead: return "gpt2_head";
    case ProgramKind::kAttention: return "gpt2_attention";
    case ProgramKind::kProjMlp: return "gpt2_proj_mlp";
    case ProgramKind::kHeadArgmax: return "gpt2_head_argmax";
  }
  return "gpt2";
}

// Traces one program kind for lengths (t, l) (l only for kAttnMlp and kAttention) into `tracer`, which
// then holds the ended trace (or the first failure).
void TraceProgram(const Gpt2Config &config, ProgramKind kind, int64_t t, int64_t l,
                  Tracer *tracer);

// Traces one program kind and compiles it through ctx's cache for `target`.
Status CompileProgram(tm_context *ctx, const Gpt2Config &config, tm_target target,
                      ProgramKind kind, int64_t t, int64_t l, ProgramHandle *out);

}  // namespace tinymlir::gpt2
