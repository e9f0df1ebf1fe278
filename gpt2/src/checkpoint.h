// A GPT-2 checkpoint in Hugging Face layout: config.json plus model.safetensors, read,
// validated against each other and converted once: the weight matrices to the dtype the
// model keeps them in (F32, F16 or BF16), everything else to F32.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpt2/src/status.h"
#include "gpt2/src/weight_memory.h"
#include "tinymlir/tinymlir.h"

namespace tinymlir::gpt2 {

struct Gpt2Config {
  int32_t vocab_size = 0;
  int32_t n_ctx = 0;    // n_positions: the longest sequence
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_inner = 0;  // 4 * n_embd when config.json says null
  double layer_norm_epsilon = 1e-5;
  int32_t eos_token_id = -1;  // config's eos_token_id; -1 when it has none
  // The dtype the weight matrices (wte and each block's four projections) are held in and
  // passed to the programs: TM_F32, TM_F16, TM_BF16 or TM_Q8_0 (8-bit blocks, quantized at
  // load; CPU only, projections out-major). Not read from config.json: chosen
  // when the model loads (ChooseMatrixDtype), and part of what a bundle is compiled for.
  tm_dtype matrices = TM_F32;
  // Whether the blocks' four projection matrices are held output-major, (out, in), the
  // transpose of the checkpoint's Conv1D layout: on the CPU target every decode product is
  // then a dot product of weight rows with x (tm_rt_gemv_dots), which streams half
  // precision faster than scaling rows (f16: 2.0x f32 against 1.6x). Set at load.
  bool projections_out_major = false;

  int32_t head_dim() const { return n_embd / n_head; }
};

// Limits on the config's dimensions. Every value is read as an int64, must be a positive
// integer (TM_ERROR_IO naming the key and the value otherwise) and at most its limit here
// (TM_ERROR_UNSUPPORTED otherwise). With these bounds no size the model computes from the
// config overflows: the largest, vocab_size * n_embd * 4 bytes, is below 2^39, and every
// dimension fits an int32 with room for 4 * n_embd.
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 20;  // GPT-2: 50257 (50304 padded)
inline constexpr int64_t kMaxContext = int64_t{1} << 16;    // n_positions / n_ctx; GPT-2: 1024
inline constexpr int64_t kMaxEmbd = int64_t{1} << 16;       // n_embd; GPT-2 XL: 1600
inline constexpr int64_t kMaxLayers = 1024;                 // n_layer; GPT-2 XL: 48
inline constexpr int64_t kMaxHeads = 1024;                  // n_head; GPT-2 XL: 25
inline constexpr int64_t kMaxInner = int64_t{1} << 18;      // n_inner; 4 * kMaxEmbd

// Reads and validates config.json: a regular file of at most kMaxConfigBytes, JSON within
// kConfigJsonLimits (gpt2/src/bounded_input.h), dimensions within the limits
// above, eos_token_id (when an integer) inside the vocabulary. Configurations the model
// cannot run faithfully (other activations, attention variants, n_embd not divisible by
// n_head) are TM_ERROR_UNSUPPORTED. `text`, when not null, receives the bytes parsed (what a
// prepared-weights key hashes: prepared_weights.h; read once, so the key names the
// configuration the model was built from even if the file changes meanwhile).
Status ReadGpt2Config(const std::string &path, Gpt2Config *config, std::string *text = nullptr);

// The same on the text of a config; `name` stands for the file in messages.
Status ParseGpt2Config(const std::string &name, std::string_view text, Gpt2Config *config);

// One tensor (C-contiguous): F32, or a weight matrix kept in F16/BF16, in host memory of
// its own (weight_memory.h: 2 MB-aligned, in huge pages where the kernel gives them).
struct Weight {
  std::vector<int64_t> shape;
  tm_dtype dtype = TM_F32;
  HostArray host;  // floats for TM_F32, the raw bits for TM_F16 / TM_BF16, blocks for TM_Q8_0
  // A copy in a device buffer (tm_device_buffer), in the same dtype, when the
  // model's programs run on the GPU: passed to them in place, so the weights are uploaded
  // once. Owned by the model.
  void *device = nullptr;

  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  const float *f32() const { return host.as<float>(); }      // dtype TM_F32
  const void *for_programs() const { return device ? device : host.data(); }
  size_t bytes() const { return host.bytes(); }
};

struct Gpt2Layer {
  Weight ln_1_g, ln_1_b;        // (d)
  Weight attn_w, attn_b;        // Conv1D (d, 3d), (3d)
  Weight attn_proj_w, attn_proj_b;  // (d, d), (d)
  Weight ln_2_g, ln_2_b;        // (d)
  Weight fc_w, fc_b;            // (d, n_inner), (n_inner)
  Weight mlp_proj_w, mlp_proj_b;  // (n_inner, d), (d)
};

struct Gpt2Weights {
  Weight wte;  // (vocab, d); also the LM head (tied)
  Weight wpe;  // (n_ctx, d)
  std::vector<Gpt2Layer> layers;
  Weight ln_f_g, ln_f_b;
};

// Every tensor a model holds for `config` (config.matrices, projections_out_major), as
// (shape, dtype): wte, wpe, ln_f g and b, then each layer's twelve in checkpoint order
// (ln_1 g/b, c_attn w/b, attn c_proj w/b, ln_2 g/b, c_fc w/b, mlp c_proj w/b).
using TensorShape = std::pair<std::vector<int64_t>, tm_dtype>;
std::vector<TensorShape> HeldTensorShapes(const Gpt2Config &config);

// Bytes of a tensor of n elements of dtype d (q8_0: 34-byte blocks of 32 along the rows).
size_t TensorBytes(tm_dtype d, size_t n);

// Loads every tensor the config calls for, with or without the "transformer." prefix,
// skipping attention-mask buffers (h.N.attn.bias / masked_bias) and a tied lm_head.weight.
// A missing tensor, a wrong shape or an unexpected tensor is TM_ERROR_IO naming it.
//
// The checkpoint's structure is checked against the config before anything is sized from
// the config: the layers h.0 .. h.{n_layer-1} must each have tensors in the header (and no
// other layer may), and every tensor's shape must match, before the first byte of weights
// is allocated. Memory is then proportional to what the file holds, whatever the config
// says.
// Without `finish`, the matrices come in config.matrices when it is F16 or BF16 (an F32,
// F16 or BF16 tensor converts to either, rounding to nearest even), in F32 otherwise. With
// it, each matrix is read in F32 (memory of its own) and handed to `finish` as soon as it
// is read, to be laid out and converted (q8_0) before the next is read (so the F32 copies
// never coexist). Every tensor kept as read is in one arena (weight_memory.h).
// finish(matrix, is_projection): is_projection is false for wte.
using MatrixFinisher = std::function<Status(Weight *matrix, bool is_projection)>;
Status LoadGpt2Weights(const std::string &safetensors_path, const Gpt2Config &config,
                       Gpt2Weights *weights, const MatrixFinisher &finish = nullptr);

class SafetensorsFile;
// The same from an opened file.
Status LoadGpt2Weights(const SafetensorsFile &file, const Gpt2Config &config,
                       Gpt2Weights *weights, const MatrixFinisher &finish = nullptr);

// Transposes a matrix, (rows, cols) to (cols, rows), in its own memory (through a copy).
Status TransposeMatrix(Weight *w);

// Transposes each block's four projection matrices to (out, in) (projections_out_major).
Status TransposeProjections(Gpt2Weights *weights);

// A weight dtype's name: "f32", "f16", "bf16", "q8_0".
const char *DtypeText(tm_dtype d);

// The dtype a model keeps its weight matrices in, for a request (tm_model_options.weights):
// 0 keeps the checkpoint's own (F16 and BF16 stay half when wte and every projection are
// stored so; F32 otherwise); TM_F32, TM_F16, TM_BF16 and TM_Q8_0 convert at load. A target
// holds the dtypes its tm_target_info.weight_dtypes has: another request is
// TM_ERROR_UNSUPPORTED, naming them, and 0 keeps the stored dtype only when it is one of
// them (F32 otherwise). Any other value is TM_ERROR_INVALID_ARGUMENT.
Status ChooseMatrixDtype(const SafetensorsFile &file, tm_dtype requested, tm_target target,
                         tm_dtype *out);

}  // namespace tinymlir::gpt2
