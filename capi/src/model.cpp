// GPT-2 models: tm_model_*, tm_tokenize/tm_detokenize and tm_generate.
#include <cstring>

#include "capi/src/handles.h"
#include "core/model/gpt2_model.h"

using tm_capi::Fail;
using tm_capi::Guard;

struct tm_model {
  std::unique_ptr<tinymlir::Gpt2Model> impl;
};

namespace {

tinymlir::Status NeedTokenizer(const tm_model *m, const char *fn) {
  if (!m->impl->tokenizer())
    return tinymlir::Unsupported(std::string(fn) +
                                 ": this model has no tokenizer (vocab.json and merges.txt "
                                 "were not in its folder); use token ids");
  return tinymlir::Status::Ok();
}

}  // namespace

extern "C" {

TM_API tm_status tm_model_load(tm_context *ctx, const char *dir, tm_target target,
                               tm_model **out) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_model_load: ctx is NULL");
  if (!dir) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_model_load: dir is NULL");
  if (!out) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_model_load: out is NULL");
  return Guard([&] {
    auto model = std::make_unique<tm_model>();
    TM_RETURN_IF_ERROR(tinymlir::Gpt2Model::Load(ctx, dir, target, &model->impl));
    *out = model.release();
    return tinymlir::Status::Ok();
  });
}

TM_API void tm_model_destroy(tm_model *model) { delete model; }

TM_API tm_status tm_model_info(const tm_model *model, int32_t *vocab_size, int32_t *n_ctx,
                               int32_t *n_layer, int32_t *n_embd) {
  if (!model) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_model_info: model is NULL");
  const tinymlir::Gpt2Config &c = model->impl->config();
  if (vocab_size) *vocab_size = c.vocab_size;
  if (n_ctx) *n_ctx = c.n_ctx;
  if (n_layer) *n_layer = c.n_layer;
  if (n_embd) *n_embd = c.n_embd;
  return TM_OK;
}

TM_API tm_status tm_tokenize(tm_model *model, const char *text, size_t len, int32_t *ids,
                             size_t capacity, size_t *n_ids) {
  if (!model) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_tokenize: model is NULL");
  if (!n_ids) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_tokenize: n_ids is NULL");
  if (!text && len > 0) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_tokenize: text is NULL");
  if (!ids && capacity > 0) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_tokenize: ids is NULL");
  return Guard([&] {
    TM_RETURN_IF_ERROR(NeedTokenizer(model, "tm_tokenize"));
    std::vector<int32_t> encoded;
    TM_RETURN_IF_ERROR(model->impl->tokenizer()->Encode(std::string_view(text ? text : "", len),
                                                         &encoded));
    *n_ids = encoded.size();
    if (encoded.size() > capacity)
      return tinymlir::InvalidArgument("tm_tokenize: the text needs " +
                                       std::to_string(encoded.size()) + " ids, capacity is " +
                                       std::to_string(capacity));
    std::copy(encoded.begin(), encoded.end(), ids);
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_detokenize(tm_model *model, const int32_t *ids, size_t n, char *buf,
                               size_t capacity, size_t *len) {
  if (!model) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_detokenize: model is NULL");
  if (!len) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_detokenize: len is NULL");
  if (!ids && n > 0) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_detokenize: ids is NULL");
  if (!buf && capacity > 0) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_detokenize: buf is NULL");
  return Guard([&] {
    TM_RETURN_IF_ERROR(NeedTokenizer(model, "tm_detokenize"));
    std::string text;
    TM_RETURN_IF_ERROR(model->impl->tokenizer()->Decode(ids, n, &text));
    *len = text.size();
    if (text.size() > capacity)
      return tinymlir::InvalidArgument("tm_detokenize: the text needs " +
                                       std::to_string(text.size()) + " bytes, capacity is " +
                                       std::to_string(capacity));
    if (!text.empty()) std::memcpy(buf, text.data(), text.size());
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_model_logits(tm_model *model, const int32_t *ids, size_t n, float *logits) {
  if (!model) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_model_logits: model is NULL");
  return Guard([&] { return model->impl->Logits(ids, n, logits); });
}

TM_API void tm_generate_options_init(tm_generate_options *options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->max_new_tokens = 32;
  options->temperature = 0.0f;
  options->top_k = 0;
  options->top_p = 1.0f;
  options->seed = 0;
  options->use_kv_cache = 1;
  options->stop_at_eos = 0;
}

TM_API tm_status tm_generate(tm_model *model, const int32_t *prompt, size_t n_prompt,
                             const tm_generate_options *options, tm_token_callback callback,
                             void *user, int32_t *out_ids, size_t capacity, size_t *n_out) {
  if (!model) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_generate: model is NULL");
  if (!n_out) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_generate: n_out is NULL");
  tm_generate_options o;
  tm_generate_options_init(&o);
  if (options) {
    if (options->struct_size != sizeof(tm_generate_options))
      return Fail(TM_ERROR_INVALID_ARGUMENT,
                  "tm_generate: options.struct_size is " + std::to_string(options->struct_size) +
                      ", expected " + std::to_string(sizeof(tm_generate_options)) +
                      " (call tm_generate_options_init)");
    o = *options;
  }
  if (!(o.temperature >= 0.0f) || o.top_k < 0 || !(o.top_p > 0.0f && o.top_p <= 1.0f) ||
      o.max_new_tokens < 0)
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_generate: options need max_new_tokens >= 0, temperature >= 0, top_k >= 0 "
                "and 0 < top_p <= 1");
  bool store = out_ids != nullptr || capacity > 0;
  if (store && (!out_ids || capacity < static_cast<size_t>(o.max_new_tokens))) {
    *n_out = static_cast<size_t>(o.max_new_tokens);
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_generate: out_ids has room for " + std::to_string(capacity) + " ids, " +
                    std::to_string(o.max_new_tokens) + " may be generated");
  }
  return Guard([&] {
    tinymlir::GenerateRequest request;
    request.max_new_tokens = o.max_new_tokens;
    request.sampling = {o.temperature, o.top_k, o.top_p, o.seed};
    request.use_kv_cache = o.use_kv_cache != 0;
    request.stop_at_eos = o.stop_at_eos != 0;
    request.callback = callback;
    request.user = user;
    std::vector<int32_t> generated;
    TM_RETURN_IF_ERROR(model->impl->Generate(prompt, n_prompt, request, &generated));
    if (store) std::copy(generated.begin(), generated.end(), out_ids);
    *n_out = generated.size();
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_model_get_stats(const tm_model *model, tm_model_stats *stats) {
  if (!model) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_model_get_stats: model is NULL");
  if (!stats || stats->struct_size != sizeof(tm_model_stats))
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_model_get_stats: stats is NULL or stats->struct_size is not "
                "sizeof(tm_model_stats)");
  *stats = model->impl->stats();
  return TM_OK;
}

}  // extern "C"
