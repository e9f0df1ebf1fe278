#include "gpt2/src/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/support/q8_0_format.h"
#include "gpt2/src/bounded_input.h"
#include "gpt2/src/safetensors.h"
#include "gpt2/src/target_info.h"

namespace tinymlir::gpt2 {
namespace {

std::string ShapeText(const std::vector<int64_t> &s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

// A dimension of the config: absent or null leaves *out as it is (an error when
// `required`); otherwise an integer, read as an int64 before anything narrows it, in
// [1, max]. Not an integer or not positive: TM_ERROR_IO; above `max`: TM_ERROR_UNSUPPORTED.
// Every message names the key and the value.
Status ReadDim(const nlohmann::json &j, const std::string &name, const char *key,
               bool required, int64_t max, int32_t *out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return IoError(name + ": missing \"" + key + "\"");
    return Status::Ok();
  }
  const std::string shown = name + ": \"" + key + "\" = " + JsonExcerpt(*it);
  if (!it->is_number_integer()) return IoError(shown + " is not an integer");
  const bool positive =
      it->is_number_unsigned() ? it->get<uint64_t>() > 0 : it->get<int64_t>() > 0;
  if (!positive) return IoError(shown + " must be a positive integer");
  // Positive here, so the unsigned reading is the value whatever the JSON type.
  if (it->get<uint64_t>() > static_cast<uint64_t>(max))
    return Unsupported(shown + " exceeds this implementation's limit of " +
                       std::to_string(max));
  *out = static_cast<int32_t>(it->get<uint64_t>());
  return Status::Ok();
}

// A flag that must have the given value for this implementation to be faithful.
Status RequireBool(const nlohmann::json &j, const std::string &path, const char *key,
                   bool expected) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean() || it->get<bool>() != expected)
    return Unsupported(path + ": \"" + key + "\" = " + JsonExcerpt(*it) +
                       " is not supported (only " + (expected ? "true" : "false") + ")");
  return Status::Ok();
}

// The index N of a tensor named "<h>N.<rest>", N canonical decimal (no sign, no leading
// zero) below 10^9. False for anything else.
bool ParseLayerIndex(const std::string &name, size_t start, int64_t *index) {
  size_t i = start;
  int64_t value = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - start < 9) {
    value = value * 10 + (name[i] - '0');
    ++i;
  }
  const size_t digits = i - start;
  if (digits == 0 || i >= name.size() || name[i] != '.') return false;
  if (digits > 1 && name[start] == '0') return false;
  *index = value;
  return true;
}

// One tensor the config calls for: its key in the file, its shape, and where it goes.
struct Wanted {
  std::string key;
  std::vector<int64_t> shape;
  int layer;                       // -1: a top-level weight
  Weight Gpt2Layer::*in_layer;     // when layer >= 0
  Weight Gpt2Weights::*top_level;  // when layer < 0
  bool matrix;                     // held in config.matrices (else F32)
};

// The names of the weight matrices, without the layer or "transformer." prefix.
bool IsMatrix(const std::string &name) {
  for (const char *suffix : {"wte.weight", "attn.c_attn.weight", "attn.c_proj.weight",
                             "mlp.c_fc.weight", "mlp.c_proj.weight"}) {
    const size_t n = std::strlen(suffix);
    if (name.size() >= n && name.compare(name.size() - n, n, suffix) == 0 &&
        (name.size() == n || name[name.size() - n - 1] == '.'))
      return true;
  }
  return false;
}

}  // namespace

Status ParseGpt2Config(const std::string &path, std::string_view text, Gpt2Config *config) {
  if (config == nullptr) return InvalidArgument("ParseGpt2Config: config is null");
  nlohmann::json j;
  TM_RETURN_IF_ERROR(ParseJsonWithLimits(path + ": ", text, kConfigJsonLimits, &j));
  if (!j.is_object()) return IoError(path + ": not a JSON object");

  Gpt2Config c;
  TM_RETURN_IF_ERROR(ReadDim(j, path, "vocab_size", true, kMaxVocabSize, &c.vocab_size));
  TM_RETURN_IF_ERROR(ReadDim(j, path, "n_positions", false, kMaxContext, &c.n_ctx));
  if (c.n_ctx == 0) TM_RETURN_IF_ERROR(ReadDim(j, path, "n_ctx", true, kMaxContext, &c.n_ctx));
  TM_RETURN_IF_ERROR(ReadDim(j, path, "n_embd", true, kMaxEmbd, &c.n_embd));
  TM_RETURN_IF_ERROR(ReadDim(j, path, "n_layer", true, kMaxLayers, &c.n_layer));
  TM_RETURN_IF_ERROR(ReadDim(j, path, "n_head", true, kMaxHeads, &c.n_head));
  c.n_inner = 4 * c.n_embd;  // at most 4 * kMaxEmbd = kMaxInner
  TM_RETURN_IF_ERROR(ReadDim(j, path, "n_inner", false, kMaxInner, &c.n_inner));
  if (auto it = j.find("layer_norm_epsilon"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      return IoError(path + ": \"layer_norm_epsilon\" = " + JsonExcerpt(*it) +
                     " must be a finite non-negative number");
    c.layer_norm_epsilon = it->get<double>();
  }
  // Only an integer is an id; other forms (a list, null) mean no stop token, as before.
  if (auto it = j.find("eos_token_id"); it != j.end() && it->is_number_integer()) {
    const bool in_vocab = it->is_number_unsigned()
                              ? it->get<uint64_t>() < static_cast<uint64_t>(c.vocab_size)
                              : it->get<int64_t>() >= 0 && it->get<int64_t>() < c.vocab_size;
    if (!in_vocab)
      return IoError(path + ": \"eos_token_id\" = " + JsonExcerpt(*it) +
                     " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    c.eos_token_id = static_cast<int32_t>(it->get<int64_t>());
  }
  if (auto it = j.find("model_type"); it != j.end() && *it != "gpt2")
    return Unsupported(path + ": model_type " + JsonExcerpt(*it) + " is not gpt2");
  if (auto it = j.find("activation_function"); it != j.end()) {
    // gelu_new and gelu_pytorch_tanh are the same tanh approximation.
    if (*it != "gelu_new" && *it != "gelu_pytorch_tanh")
      return Unsupported(path + ": activation_function " + JsonExcerpt(*it) +
                         " is not supported (only gelu_new)");
  }
  if (c.n_embd % c.n_head != 0)
    return Unsupported(path + ": n_embd " + std::to_string(c.n_embd) +
                       " is not divisible by n_head " + std::to_string(c.n_head));
  TM_RETURN_IF_ERROR(RequireBool(j, path, "scale_attn_weights", true));
  TM_RETURN_IF_ERROR(RequireBool(j, path, "scale_attn_by_inverse_layer_idx", false));
  TM_RETURN_IF_ERROR(RequireBool(j, path, "reorder_and_upcast_attn", false));
  TM_RETURN_IF_ERROR(RequireBool(j, path, "add_cross_attention", false));
  TM_RETURN_IF_ERROR(RequireBool(j, path, "tie_word_embeddings", true));
  *config = c;
  return Status::Ok();
}

std::vector<TensorShape> HeldTensorShapes(const Gpt2Config &c) {
  const int64_t d = c.n_embd, inner = c.n_inner;
  const tm_dtype m = c.matrices;
  auto matrix = [&](int64_t in, int64_t out) {
    return TensorShape(c.projections_out_major ? std::vector<int64_t>{out, in}
                                               : std::vector<int64_t>{in, out},
                       m);
  };
  auto vec = [](int64_t n) { return TensorShape(std::vector<int64_t>{n}, TM_F32); };
  std::vector<TensorShape> e = {{{c.vocab_size, d}, m}, {{c.n_ctx, d}, TM_F32}, vec(d), vec(d)};
  for (int32_t i = 0; i < c.n_layer; ++i) {
    for (auto x : {vec(d), vec(d), matrix(d, 3 * d), vec(3 * d), matrix(d, d), vec(d), vec(d),
                   vec(d), matrix(d, inner), vec(inner), matrix(inner, d), vec(d)})
      e.push_back(x);
  }
  return e;
}

size_t TensorBytes(tm_dtype d, size_t n) {
  if (d == TM_Q8_0) return n / kQ8BlockElements * kQ8BlockBytes;
  return n * (d == TM_F32 ? 4 : 2);
}

Status ReadGpt2Config(const std::string &path, Gpt2Config *config, std::string *text) {
  std::string read;
  TM_RETURN_IF_ERROR(ReadRegularFile(path + ": ", path, kMaxConfigBytes, &read));
  TM_RETURN_IF_ERROR(ParseGpt2Config(path, read, config));
  if (text != nullptr) *text = std::move(read);
  return Status::Ok();
}

Status LoadGpt2Weights(const std::string &path, const Gpt2Config &c, Gpt2Weights *weights,
                       const MatrixFinisher &finish) {
  std::unique_ptr<SafetensorsFile> file;
  TM_RETURN_IF_ERROR(SafetensorsFile::Open(path, &file));
  return LoadGpt2Weights(*file, c, weights, finish);
}

Status LoadGpt2Weights(const SafetensorsFile &file, const Gpt2Config &c, Gpt2Weights *weights,
                       const MatrixFinisher &finish) {
  if (weights == nullptr) return InvalidArgument("LoadGpt2Weights: weights is null");
  const std::string &path = file.path();
  // Both layouts: "wte.weight" and "transformer.wte.weight"; decided by which wte exists.
  const bool prefixed = file.Find("transformer.wte.weight") != nullptr;
  const std::string prefix = prefixed ? "transformer." : "";

  // 1. The layers the header has, against n_layer, before anything is sized from it: the
  // set holds at most one entry per tensor of the (bounded) header.
  const std::string layer_prefix = prefix + "h.";
  std::set<int64_t> layers;
  for (const std::string &name : file.names()) {
    if (name.compare(0, layer_prefix.size(), layer_prefix) != 0) continue;
    int64_t index = 0;
    if (!ParseLayerIndex(name, layer_prefix.size(), &index) || index >= c.n_layer)
      return IoError(path + ": unexpected tensor " + Excerpt(name) + " for a GPT-2 with " +
                     std::to_string(c.n_layer) + " layers");
    layers.insert(index);
  }
  if (layers.size() != static_cast<size_t>(c.n_layer)) {
    int64_t missing = 0;
    while (layers.count(missing)) ++missing;
    return IoError(path + ": the config calls for " + std::to_string(c.n_layer) +
                   " layers (n_layer) but the checkpoint has tensors for " +
                   std::to_string(layers.size()) + " (none for " + layer_prefix +
                   std::to_string(missing) + ")");
  }

  // 2. Every tensor the config calls for exists with its shape (header only).
  const int64_t d = c.n_embd, inner = c.n_inner;
  std::vector<Wanted> wanted;
  auto top = [&](const char *name, std::vector<int64_t> shape, Weight Gpt2Weights::*w) {
    wanted.push_back({prefix + name, std::move(shape), -1, nullptr, w, IsMatrix(name)});
  };
  top("wte.weight", {c.vocab_size, d}, &Gpt2Weights::wte);
  top("wpe.weight", {c.n_ctx, d}, &Gpt2Weights::wpe);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string h = layer_prefix + std::to_string(i) + ".";
    auto add = [&](const char *name, std::vector<int64_t> shape, Weight Gpt2Layer::*w) {
      wanted.push_back({h + name, std::move(shape), i, w, nullptr, IsMatrix(name)});
    };
    add("ln_1.weight", {d}, &Gpt2Layer::ln_1_g);
    add("ln_1.bias", {d}, &Gpt2Layer::ln_1_b);
    add("attn.c_attn.weight", {d, 3 * d}, &Gpt2Layer::attn_w);
    add("attn.c_attn.bias", {3 * d}, &Gpt2Layer::attn_b);
    add("attn.c_proj.weight", {d, d}, &Gpt2Layer::attn_proj_w);
    add("attn.c_proj.bias", {d}, &Gpt2Layer::attn_proj_b);
    add("ln_2.weight", {d}, &Gpt2Layer::ln_2_g);
    add("ln_2.bias", {d}, &Gpt2Layer::ln_2_b);
    add("mlp.c_fc.weight", {d, inner}, &Gpt2Layer::fc_w);
    add("mlp.c_fc.bias", {inner}, &Gpt2Layer::fc_b);
    add("mlp.c_proj.weight", {inner, d}, &Gpt2Layer::mlp_proj_w);
    add("mlp.c_proj.bias", {d}, &Gpt2Layer::mlp_proj_b);
  }
  top("ln_f.weight", {d}, &Gpt2Weights::ln_f_g);
  top("ln_f.bias", {d}, &Gpt2Weights::ln_f_b);

  std::set<std::string> used;
  for (const Wanted &w : wanted) {
    const TensorInfo *info = file.Find(w.key);
    if (!info) return IoError(path + ": missing tensor " + w.key);
    if (info->shape != w.shape)
      return IoError(path + ": tensor " + w.key + " has shape " + ShapeText(info->shape) +
                     ", the config calls for " + ShapeText(w.shape));
    used.insert(w.key);
  }
  // Anything else must be a buffer we know to skip; an unknown tensor means the file is
  // not the architecture the config describes.
  for (const std::string &name : file.names()) {
    if (used.count(name)) continue;
    bool mask = name.size() > 10 && (name.compare(name.size() - 10, 10, ".attn.bias") == 0 ||
                                     name.find(".attn.masked_bias") != std::string::npos);
    if (mask || name == "lm_head.weight") continue;
    return IoError(path + ": unexpected tensor " + Excerpt(name) + " for a GPT-2 with " +
                   std::to_string(c.n_layer) + " layers");
  }

  // 3. Only now the weights, each sized by a tensor the file holds: those kept as read in
  // one arena (weight_memory.h), the matrices for `finish` in F32 memory of their own, which
  // goes as each is finished.
  const bool half = c.matrices == TM_F16 || c.matrices == TM_BF16;
  auto kept_bytes = [&](const Wanted &w) {
    size_t n = 1;
    for (int64_t d : w.shape) n *= static_cast<size_t>(d);
    return TensorBytes(w.matrix && half ? c.matrices : TM_F32, n);
  };
  HostArena arena;
  size_t space = 0;
  for (const Wanted &w : wanted)
    if (!(w.matrix && finish)) space += HostArena::Space(kept_bytes(w));
  TM_RETURN_IF_ERROR(arena.Allocate(space));
  Gpt2Weights out;
  out.layers.resize(c.n_layer);
  for (const Wanted &w : wanted) {
    Weight &dst = w.layer >= 0 ? out.layers[w.layer].*w.in_layer : out.*w.top_level;
    dst.shape = w.shape;
    const size_t n = static_cast<size_t>(dst.elements());
    if (w.matrix && finish) {  // in F32, then finished (q8_0)
      TM_RETURN_IF_ERROR(dst.host.Allocate(n * sizeof(float)));
      TM_RETURN_IF_ERROR(file.ReadAsF32(w.key, dst.host.as<float>(), n));
      TM_RETURN_IF_ERROR(finish(&dst, w.top_level != &Gpt2Weights::wte));
      continue;
    }
    TM_RETURN_IF_ERROR(arena.Take(kept_bytes(w), &dst.host));
    if (w.matrix && half) {
      dst.dtype = c.matrices;
      TM_RETURN_IF_ERROR(file.ReadAsHalf(w.key, c.matrices == TM_F16 ? SafetensorsDtype::kF16
                                                                     : SafetensorsDtype::kBF16,
                                         dst.host.as<uint16_t>(), n));
    } else {
      TM_RETURN_IF_ERROR(file.ReadAsF32(w.key, dst.host.as<float>(), n));
    }
  }
  *weights = std::move(out);
  return Status::Ok();
}

const char *DtypeText(tm_dtype d) {
  return d == TM_F16 ? "f16" : d == TM_BF16 ? "bf16" : d == TM_Q8_0 ? "q8_0" : "f32";
}

Status ChooseMatrixDtype(const SafetensorsFile &file, tm_dtype requested, tm_target target,
                         tm_dtype *out) {
  if (requested != 0 && requested != TM_F32 && requested != TM_F16 && requested != TM_BF16 &&
      requested != TM_Q8_0)
    return InvalidArgument("tm_model_load: options.weights " + std::to_string(requested) +
                           " is not 0 (as stored), TM_F32, TM_F16, TM_BF16 or TM_Q8_0");
  tm_target_info info;
  TM_RETURN_IF_ERROR(GetTargetInfo(target, &info));
  auto takes = [&info](tm_dtype d) { return (info.weight_dtypes >> d & 1u) != 0; };
  if (requested != 0) {
    if (!takes(requested)) {
      std::string kinds;
      for (tm_dtype d : {TM_F32, TM_F16, TM_BF16, TM_Q8_0})
        if (takes(d)) kinds += (kinds.empty() ? "" : ", ") + std::string(DtypeText(d));
      return Unsupported(std::string("tm_model_load: the ") + info.name + " target holds "
                         "weights as " + kinds + " only, not " + DtypeText(requested) +
                         " (its products read no other)");
    }
    *out = requested;
    return Status::Ok();
  }
  // As stored: half only when every matrix is stored in the same half type, and the target
  // reads it.
  bool first = true;
  SafetensorsDtype common = SafetensorsDtype::kF32;
  for (const std::string &name : file.names()) {
    if (!IsMatrix(name)) continue;
    const SafetensorsDtype d = file.Find(name)->dtype;
    if (first) common = d;
    else if (d != common) common = SafetensorsDtype::kF32;
    first = false;
  }
  *out = common == SafetensorsDtype::kF16 ? TM_F16 : common == SafetensorsDtype::kBF16 ? TM_BF16 : TM_F32;
  if (!takes(*out)) *out = TM_F32;
  return Status::Ok();
}

namespace {

// dst (cols x rows) = src (rows x cols) transposed, in 32 x 32 tiles (both sides stay in
// the cache while a tile moves).
template <typename T>
void Transpose(const T *src, int64_t rows, int64_t cols, T *dst) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
          dst[c * rows + r] = src[r * cols + c];
}

}  // namespace

Status TransposeMatrix(Weight *w) {
  if (w->dtype != TM_F32 && w->dtype != TM_F16 && w->dtype != TM_BF16)
    return Status(StatusCode::kRuntime, "TransposeMatrix: only F32, F16 and BF16 matrices move "
                                        "element by element");
  const int64_t rows = w->shape[0], cols = w->shape[1];
  // Through a copy, back into the matrix's own memory (which may be part of an arena).
  HostArray copy;
  TM_RETURN_IF_ERROR(copy.Allocate(w->host.bytes()));
  std::memcpy(copy.data(), w->host.data(), w->host.bytes());
  if (w->dtype == TM_F32) Transpose(copy.as<float>(), rows, cols, w->host.as<float>());
  else Transpose(copy.as<uint16_t>(), rows, cols, w->host.as<uint16_t>());
  w->shape = {cols, rows};
  return Status::Ok();
}

Status TransposeProjections(Gpt2Weights *weights) {
  for (Gpt2Layer &l : weights->layers)
    for (Weight *w : {&l.attn_w, &l.attn_proj_w, &l.fc_w, &l.mlp_proj_w})
      TM_RETURN_IF_ERROR(TransposeMatrix(w));
  return Status::Ok();
}

}  // namespace tinymlir::gpt2
