// The GPT-2 forward pass as tinymlir programs, traced through the public C API.
//
// Four program kinds, each specialised on its sequence lengths only; weights are inputs, so
// every transformer block shares one program (12 blocks of GPT-2 124M -> 1 compile):
//
//   embed(T):        ids (T) i32, positions (T) i32, wte, wpe      -> x (T, d)
//   qkv(T):          x (T, d), ln_1 g/b, c_attn w/b                -> q, k, v (T, d)
//   attn_mlp(T, L):  x, q (T, d), k, v (L, d) cache rows, mask (T, L),
//                    c_proj w/b, ln_2 g/b, c_fc w/b, mlp c_proj w/b -> x' (T, d)
//   head:            x (1, d), ln_f g/b, wte (V, d)                -> logits (V)
//
// The KV cache lives outside the programs (the model writes k, v rows at their positions),
// so the decode step has one fixed shape per cache bucket L and the attention reads only
// L <= n_ctx cached rows.
#pragma once

#include <cstdint>
#include <string>

#include "core/model/gpt2_checkpoint.h"
#include "tinymlir/tinymlir.h"

namespace tinymlir {

enum class Gpt2ProgramKind { kEmbed, kQkv, kAttnMlp, kHead };

// Traces one program kind for lengths (t, l) (l only for kAttnMlp) and compiles it through
// ctx's cache. *out receives a program reference to release with tm_program_release;
// *was_cached tells whether the context already had it.
tm_status CompileGpt2Program(tm_context *ctx, const Gpt2Config &config, tm_target target,
                             Gpt2ProgramKind kind, int64_t t, int64_t l, tm_program **out,
                             bool *was_cached);

}  // namespace tinymlir
