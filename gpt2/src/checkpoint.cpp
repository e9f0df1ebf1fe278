#include "gpt2/src/checkpoint.h"

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gpt2/src/safetensors.h"

namespace tinymlir::gpt2 {
namespace {

std::string ShapeText(const std::vector<int64_t> &s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

Status ReadInt(const nlohmann::json &j, const std::string &path, const char *key, bool required,
               int32_t *out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return IoError(path + ": missing \"" + key + "\"");
    return Status::Ok();
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > INT32_MAX)
    return IoError(path + ": \"" + key + "\" must be a positive integer");
  *out = static_cast<int32_t>(it->get<int64_t>());
  return Status::Ok();
}

// A flag that must have the given value for this implementation to be faithful.
Status RequireBool(const nlohmann::json &j, const std::string &path, const char *key,
                   bool expected) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean() || it->get<bool>() != expected)
    return Unsupported(path + ": \"" + key + "\" = " + it->dump() + " is not supported (only " +
                       (expected ? "true" : "false") + ")");
  return Status::Ok();
}

}  // namespace

Status ReadGpt2Config(const std::string &path, Gpt2Config *config) {
  std::ifstream in(path);
  if (!in) return IoError(path + ": cannot open (a GPT-2 folder needs config.json)");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return IoError(path + ": not a JSON object");

  Gpt2Config c;
  TM_RETURN_IF_ERROR(ReadInt(j, path, "vocab_size", true, &c.vocab_size));
  TM_RETURN_IF_ERROR(ReadInt(j, path, "n_positions", false, &c.n_ctx));
  if (c.n_ctx == 0) TM_RETURN_IF_ERROR(ReadInt(j, path, "n_ctx", true, &c.n_ctx));
  TM_RETURN_IF_ERROR(ReadInt(j, path, "n_embd", true, &c.n_embd));
  TM_RETURN_IF_ERROR(ReadInt(j, path, "n_layer", true, &c.n_layer));
  TM_RETURN_IF_ERROR(ReadInt(j, path, "n_head", true, &c.n_head));
  c.n_inner = 4 * c.n_embd;
  TM_RETURN_IF_ERROR(ReadInt(j, path, "n_inner", false, &c.n_inner));
  if (auto it = j.find("layer_norm_epsilon"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() < 0)
      return IoError(path + ": \"layer_norm_epsilon\" must be a non-negative number");
    c.layer_norm_epsilon = it->get<double>();
  }
  if (auto it = j.find("eos_token_id"); it != j.end() && it->is_number_integer())
    c.eos_token_id = static_cast<int32_t>(it->get<int64_t>());
  if (auto it = j.find("model_type"); it != j.end() && *it != "gpt2")
    return Unsupported(path + ": model_type " + it->dump() + " is not gpt2");
  if (auto it = j.find("activation_function"); it != j.end()) {
    // gelu_new and gelu_pytorch_tanh are the same tanh approximation.
    if (*it != "gelu_new" && *it != "gelu_pytorch_tanh")
      return Unsupported(path + ": activation_function " + it->dump() +
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

Status LoadGpt2Weights(const std::string &path, const Gpt2Config &c, Gpt2Weights *weights) {
  std::unique_ptr<SafetensorsFile> file;
  TM_RETURN_IF_ERROR(SafetensorsFile::Open(path, &file));

  // Both layouts: "wte.weight" and "transformer.wte.weight"; decided by which wte exists.
  bool prefixed = file->Find("transformer.wte.weight") != nullptr;
  std::string prefix = prefixed ? "transformer." : "";
  std::set<std::string> used;

  auto read = [&](const std::string &name, std::vector<int64_t> shape, Weight *w) -> Status {
    std::string key = prefix + name;
    const TensorInfo *info = file->Find(key);
    if (!info) return IoError(path + ": missing tensor " + key);
    if (info->shape != shape)
      return IoError(path + ": tensor " + key + " has shape " + ShapeText(info->shape) +
                     ", the config calls for " + ShapeText(shape));
    w->shape = std::move(shape);
    used.insert(key);
    return file->ReadAsF32(key, &w->data);
  };

  const int64_t d = c.n_embd, inner = c.n_inner;
  Gpt2Weights out;
  TM_RETURN_IF_ERROR(read("wte.weight", {c.vocab_size, d}, &out.wte));
  TM_RETURN_IF_ERROR(read("wpe.weight", {c.n_ctx, d}, &out.wpe));
  out.layers.resize(c.n_layer);
  for (int i = 0; i < c.n_layer; ++i) {
    std::string h = "h." + std::to_string(i) + ".";
    Gpt2Layer &l = out.layers[i];
    TM_RETURN_IF_ERROR(read(h + "ln_1.weight", {d}, &l.ln_1_g));
    TM_RETURN_IF_ERROR(read(h + "ln_1.bias", {d}, &l.ln_1_b));
    TM_RETURN_IF_ERROR(read(h + "attn.c_attn.weight", {d, 3 * d}, &l.attn_w));
    TM_RETURN_IF_ERROR(read(h + "attn.c_attn.bias", {3 * d}, &l.attn_b));
    TM_RETURN_IF_ERROR(read(h + "attn.c_proj.weight", {d, d}, &l.attn_proj_w));
    TM_RETURN_IF_ERROR(read(h + "attn.c_proj.bias", {d}, &l.attn_proj_b));
    TM_RETURN_IF_ERROR(read(h + "ln_2.weight", {d}, &l.ln_2_g));
    TM_RETURN_IF_ERROR(read(h + "ln_2.bias", {d}, &l.ln_2_b));
    TM_RETURN_IF_ERROR(read(h + "mlp.c_fc.weight", {d, inner}, &l.fc_w));
    TM_RETURN_IF_ERROR(read(h + "mlp.c_fc.bias", {inner}, &l.fc_b));
    TM_RETURN_IF_ERROR(read(h + "mlp.c_proj.weight", {inner, d}, &l.mlp_proj_w));
    TM_RETURN_IF_ERROR(read(h + "mlp.c_proj.bias", {d}, &l.mlp_proj_b));
  }
  TM_RETURN_IF_ERROR(read("ln_f.weight", {d}, &out.ln_f_g));
  TM_RETURN_IF_ERROR(read("ln_f.bias", {d}, &out.ln_f_b));

  // Anything else must be a buffer we know to skip; an unknown tensor means the file is
  // not the architecture the config describes.
  for (const std::string &name : file->names()) {
    if (used.count(name)) continue;
    bool mask = name.size() > 10 && (name.compare(name.size() - 10, 10, ".attn.bias") == 0 ||
                                     name.find(".attn.masked_bias") != std::string::npos);
    if (mask || name == "lm_head.weight") continue;
    return IoError(path + ": unexpected tensor " + name + " for a GPT-2 with " +
                   std::to_string(c.n_layer) + " layers");
  }
  *weights = std::move(out);
  return Status::Ok();
}

}  // namespace tinymlir::gpt2
