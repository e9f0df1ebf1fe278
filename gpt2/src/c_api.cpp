// The C functions of <tinymlir/gpt2.h>: argument checks, options, and the busy rule, over
// Gpt2Model. Like the rest of this folder, it uses only the public tinymlir headers.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/support/last_error.h"
#include "core/support/versioned_struct.h"
#include "gpt2/src/model.h"
#include "tinymlir/gpt2.h"

using tinymlir::gpt2::Gpt2Model;
using tinymlir::gpt2::Status;
using tinymlir::OutOfMemory;
using tinymlir::RuntimeError;

struct tm_model {
  std::unique_ptr<Gpt2Model> impl;
};

namespace {

// First published layouts (struct_size) of the options structs.
constexpr size_t kModelOptionsFirstLayout = TM_MODEL_OPTIONS_SIZE_V1;
constexpr size_t kGenerateOptionsFirstLayout = TM_GENERATE_OPTIONS_SIZE_V1;
constexpr size_t kModelStatsFirstLayout = TM_MODEL_STATS_SIZE_V1;
// The newest layout of each struct is this library's: gpt2.h names every layout's size.
static_assert(sizeof(tm_model_options) == TM_MODEL_OPTIONS_SIZE_V3, "update gpt2.h's sizes");
static_assert(sizeof(tm_generate_options) == TM_GENERATE_OPTIONS_SIZE_V2, "update gpt2.h's sizes");
static_assert(sizeof(tm_model_stats) == TM_MODEL_STATS_SIZE_V4, "update gpt2.h's sizes");

// This library's defaults, in its own layouts.
tm_model_options DefaultModelOptions() {
  tm_model_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.target = TM_TARGET_CPU;
  return o;
}

tm_generate_options DefaultGenerateOptions() {
  tm_generate_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.max_new_tokens = 32;
  o.temperature = 0.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.seed = 0;
  o.use_kv_cache = 1;
  o.stop_at_eos = 0;
  return o;
}

// Reports a failed Status the way the compiler's shims do: its code, and its message as
// the thread's tm_last_error (through the C API, so both layers share one last error).
tm_status Report(const Status &status) {
  if (status.ok()) return TM_OK;
  tinymlir::SetLastError(status.message());
  return static_cast<tm_status>(status.code());
}

// Runs `body`, keeping C++ exceptions inside the library.
template <typename F>
tm_status Guard(const char *fn, F &&body) {
  try {
    return Report(body());
  } catch (const std::bad_alloc &) {
    return Report(OutOfMemory(std::string(fn) + ": out of memory"));
  } catch (const std::exception &e) {
    return Report(RuntimeError(std::string(fn) + ": internal error: " + e.what()));
  }
}

// Reads a versioned options struct: see "Options structs" in tinymlir.h.
template <typename T>
Status ReadOptions(const char *fn, const T *in, size_t first_layout, T *out) {
  return tinymlir::ReadVersionedStruct(fn, in, first_layout, TM_OPTIONS_MAX_STRUCT_SIZE, out);
}

Status NeedTokenizer(const tm_model *m, const char *fn) {
  if (!m->impl->tokenizer())
    return tinymlir::Unsupported(std::string(fn) +
                                       ": this model has no tokenizer (vocab.json and "
                                       "merges.txt were not in its folder); use token ids");
  return Status::Ok();
}

Status Null(const char *fn, const char *what) {
  return tinymlir::InvalidArgument(std::string(fn) + ": " + what + " is NULL");
}

}  // namespace

extern "C" {

TM_API tm_status tm_model_options_init_size(tm_model_options *options, size_t struct_size) {
  return Report(tinymlir::InitVersionedStruct("tm_model_options_init_size",
                                              DefaultModelOptions(), kModelOptionsFirstLayout,
                                              TM_OPTIONS_MAX_STRUCT_SIZE, options, struct_size));
}

TM_API tm_status tm_model_load(tm_context *ctx, const char *dir, const tm_model_options *options,
                               tm_model **out) {
  // ctx may be NULL with a bundle: Gpt2Model::Load (NewCompilerSource) checks it.
  if (!dir) return Report(Null("tm_model_load", "dir"));
  if (!out) return Report(Null("tm_model_load", "out"));
  return Guard("tm_model_load", [&]() -> Status {
    tm_model_options o = DefaultModelOptions();
    TM_RETURN_IF_ERROR(ReadOptions("tm_model_load", options, kModelOptionsFirstLayout, &o));
    // An empty path would name files at the root ("/config.json"), and an empty bundle
    // folder would quietly mean none.
    if (*dir == '\0')
      return tinymlir::InvalidArgument("tm_model_load: dir is an empty path");
    if (o.bundle_dir && *o.bundle_dir == '\0')
      return tinymlir::InvalidArgument(
          "tm_model_load: options.bundle_dir is an empty path (NULL for no bundle)");
    auto model = std::make_unique<tm_model>();
    TM_RETURN_IF_ERROR(
        Gpt2Model::Load(ctx, dir, o.target, o.weights, o.bundle_dir ? o.bundle_dir : "",
                        &model->impl));
    *out = model.release();
    return Status::Ok();
  });
}

TM_API void tm_model_destroy(tm_model *model) { delete model; }

TM_API tm_status tm_model_info(const tm_model *model, int32_t *vocab_size, int32_t *n_ctx,
                               int32_t *n_layer, int32_t *n_embd) {
  if (!model) return Report(Null("tm_model_info", "model"));
  const tinymlir::gpt2::Gpt2Config &c = model->impl->config();
  if (vocab_size) *vocab_size = c.vocab_size;
  if (n_ctx) *n_ctx = c.n_ctx;
  if (n_layer) *n_layer = c.n_layer;
  if (n_embd) *n_embd = c.n_embd;
  return TM_OK;
}

TM_API tm_status tm_tokenize(const tm_model *model, const char *text, size_t len, int32_t *ids,
                             size_t capacity, size_t *n_ids) {
  if (!model) return Report(Null("tm_tokenize", "model"));
  if (!n_ids) return Report(Null("tm_tokenize", "n_ids"));
  if (!text && len > 0) return Report(Null("tm_tokenize", "text"));
  if (!ids && capacity > 0) return Report(Null("tm_tokenize", "ids"));
  return Guard("tm_tokenize", [&]() -> Status {
    TM_RETURN_IF_ERROR(NeedTokenizer(model, "tm_tokenize"));
    std::vector<int32_t> encoded;
    TM_RETURN_IF_ERROR(model->impl->tokenizer()->Encode(std::string_view(text ? text : "", len),
                                                         &encoded));
    std::copy_n(encoded.begin(), std::min(capacity, encoded.size()), ids);
    *n_ids = encoded.size();
    return Status::Ok();
  });
}

TM_API tm_status tm_detokenize(const tm_model *model, const int32_t *ids, size_t n, char *buf,
                               size_t capacity, size_t *len) {
  if (!model) return Report(Null("tm_detokenize", "model"));
  if (!len) return Report(Null("tm_detokenize", "len"));
  if (!ids && n > 0) return Report(Null("tm_detokenize", "ids"));
  if (!buf && capacity > 0) return Report(Null("tm_detokenize", "buf"));
  return Guard("tm_detokenize", [&]() -> Status {
    TM_RETURN_IF_ERROR(NeedTokenizer(model, "tm_detokenize"));
    std::string text;
    TM_RETURN_IF_ERROR(model->impl->tokenizer()->Decode(ids, n, &text));
    std::copy_n(text.data(), std::min(capacity, text.size()), buf);
    *len = text.size();
    return Status::Ok();
  });
}

TM_API tm_status tm_model_logits(tm_model *model, const int32_t *ids, size_t n, float *logits,
                                 size_t capacity) {
  if (!model) return Report(Null("tm_model_logits", "model"));
  return Guard("tm_model_logits", [&]() -> Status {
    std::unique_ptr<Gpt2Model::Claim> claim;
    TM_RETURN_IF_ERROR(model->impl->TryClaim("tm_model_logits", &claim));
    return model->impl->Logits(ids, n, logits, capacity);
  });
}

TM_API tm_status tm_model_score(tm_model *model, const int32_t *ids, size_t n, double *logprobs,
                                size_t logprobs_capacity, float *logits,
                                size_t logits_capacity) {
  if (!model) return Report(Null("tm_model_score", "model"));
  return Guard("tm_model_score", [&]() -> Status {
    std::unique_ptr<Gpt2Model::Claim> claim;
    TM_RETURN_IF_ERROR(model->impl->TryClaim("tm_model_score", &claim));
    return model->impl->Score(ids, n, logprobs, logprobs_capacity, logits, logits_capacity);
  });
}

TM_API tm_status tm_generate_options_init_size(tm_generate_options *options,
                                               size_t struct_size) {
  return Report(tinymlir::InitVersionedStruct(
      "tm_generate_options_init_size", DefaultGenerateOptions(), kGenerateOptionsFirstLayout,
      TM_OPTIONS_MAX_STRUCT_SIZE, options, struct_size));
}

namespace {

// Reads and checks generation options (NULL: the defaults) into a request; `fn` names the
// call (and the sequence of a batch) in a message.
Status ReadGenerateRequest(const std::string &fn, const tm_generate_options *options,
                           tinymlir::gpt2::GenerateRequest *request) {
  tm_generate_options o = DefaultGenerateOptions();
  TM_RETURN_IF_ERROR(ReadOptions(fn.c_str(), options, kGenerateOptionsFirstLayout, &o));
  // Each field named with the value it has (NaN fails every comparison, so the checks say
  // what is valid).
  const auto bad = [&](const char *field, double value, const char *need) {
    char text[160];
    std::snprintf(text, sizeof text, ": options.%s is %.9g; it must be %s", field, value, need);
    return tinymlir::InvalidArgument(fn + text);
  };
  if (o.max_new_tokens < 0) return bad("max_new_tokens", o.max_new_tokens, ">= 0");
  if (!(o.temperature >= 0.0f)) return bad("temperature", o.temperature, ">= 0 (0: greedy)");
  if (o.top_k < 0) return bad("top_k", o.top_k, ">= 0 (0: all tokens)");
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f))
    return bad("top_p", o.top_p, "more than 0 and at most 1 (as a float: at least 1.2e-38)");
  request->max_new_tokens = o.max_new_tokens;
  request->sampling = {o.temperature, o.top_k, o.top_p, o.seed};
  request->use_kv_cache = o.use_kv_cache != 0;
  request->stop_at_eos = o.stop_at_eos != 0;
  request->progress = o.progress;
  request->progress_user = o.progress_user;
  return Status::Ok();
}

}  // namespace

TM_API tm_status tm_generate(tm_model *model, const int32_t *prompt, size_t n_prompt,
                             const tm_generate_options *options, tm_token_callback callback,
                             void *user, int32_t *out_ids, size_t capacity, size_t *n_out) {
  if (!model) return Report(Null("tm_generate", "model"));
  if (!n_out) return Report(Null("tm_generate", "n_out"));
  if (!out_ids && capacity > 0) return Report(Null("tm_generate", "out_ids"));
  return Guard("tm_generate", [&]() -> Status {
    tinymlir::gpt2::GenerateRequest request;
    TM_RETURN_IF_ERROR(ReadGenerateRequest("tm_generate", options, &request));
    std::unique_ptr<Gpt2Model::Claim> claim;
    TM_RETURN_IF_ERROR(model->impl->TryClaim("tm_generate", &claim));
    request.callback = callback;
    request.user = user;
    std::vector<int32_t> generated;
    TM_RETURN_IF_ERROR(model->impl->Generate(prompt, n_prompt, request, &generated));
    std::copy_n(generated.begin(), std::min(capacity, generated.size()), out_ids);
    *n_out = generated.size();
    return Status::Ok();
  });
}

TM_API tm_status tm_generate_batch(tm_model *model, tm_batch_sequence *sequences, size_t n,
                                   tm_batch_token_callback callback, void *user) {
  if (!model) return Report(Null("tm_generate_batch", "model"));
  if (!sequences && n > 0) return Report(Null("tm_generate_batch", "sequences"));
  return Guard("tm_generate_batch", [&]() -> Status {
    std::vector<tinymlir::gpt2::BatchRequest> batch(n);
    for (size_t i = 0; i < n; ++i) {
      const std::string fn = "tm_generate_batch: sequence " + std::to_string(i);
      const tm_batch_sequence &s = sequences[i];
      if (!s.out_ids && s.capacity > 0)
        return tinymlir::InvalidArgument(fn + ": out_ids is NULL with a capacity of " +
                                         std::to_string(s.capacity));
      TM_RETURN_IF_ERROR(ReadGenerateRequest(fn, s.options, &batch[i].request));
      batch[i].prompt = s.prompt;
      batch[i].n = s.n_prompt;
    }
    std::unique_ptr<Gpt2Model::Claim> claim;
    TM_RETURN_IF_ERROR(model->impl->TryClaim("tm_generate_batch", &claim));
    std::vector<std::vector<int32_t>> generated;
    // The first sequence's progress callback is the batch's (programs are made once).
    tm_progress_callback progress = n > 0 ? batch[0].request.progress : nullptr;
    void *progress_user = n > 0 ? batch[0].request.progress_user : nullptr;
    const Status status =
        model->impl->GenerateBatch(batch, callback, user, progress, progress_user, &generated);
    // Every sequence's tokens so far, also after a failure.
    for (size_t i = 0; i < n; ++i) {
      const size_t made = i < generated.size() ? generated[i].size() : 0;
      if (made > 0)
        std::copy_n(generated[i].begin(), std::min(sequences[i].capacity, made),
                    sequences[i].out_ids);
      sequences[i].n_out = made;
    }
    return status;
  });
}

TM_API tm_status tm_model_compile_bundle(tm_model *model, const char *dir,
                                         tm_progress_callback progress, void *user) {
  if (!model) return Report(Null("tm_model_compile_bundle", "model"));
  if (!dir) return Report(Null("tm_model_compile_bundle", "dir"));
  return Guard("tm_model_compile_bundle", [&]() -> Status {
    std::unique_ptr<Gpt2Model::Claim> claim;
    TM_RETURN_IF_ERROR(model->impl->TryClaim("tm_model_compile_bundle", &claim));
    return model->impl->CompileBundle(dir, progress, user);
  });
}

TM_API tm_status tm_model_load_report(const tm_model *model, char *buf, size_t capacity,
                                      size_t *len) {
  if (!model) return Report(Null("tm_model_load_report", "model"));
  if (!len) return Report(Null("tm_model_load_report", "len"));
  if (!buf && capacity > 0)
    return Report(tinymlir::InvalidArgument("tm_model_load_report: buf is NULL with capacity " +
                                            std::to_string(capacity)));
  return Guard("tm_model_load_report", [&]() -> Status {
    const std::string text = model->impl->LoadReport();
    *len = text.size();
    if (capacity > 0) {
      const size_t n = std::min(capacity - 1, text.size());
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
    return Status::Ok();
  });
}

TM_API tm_status tm_model_get_stats(tm_model *model, tm_model_stats *stats) {
  if (!model) return Report(Null("tm_model_get_stats", "model"));
  if (!stats) return Report(Null("tm_model_get_stats", "stats"));
  if (stats->struct_size < kModelStatsFirstLayout)
    return Report(tinymlir::InvalidArgument(
        "tm_model_get_stats: stats->struct_size is " + std::to_string(stats->struct_size) +
        ", smaller than the first published layout (" + std::to_string(kModelStatsFirstLayout) +
        " bytes); set it to sizeof(tm_model_stats)"));
  return Guard("tm_model_get_stats", [&]() -> Status {
    std::unique_ptr<Gpt2Model::Claim> claim;
    TM_RETURN_IF_ERROR(model->impl->TryClaim("tm_model_get_stats", &claim));
    const uint32_t size = stats->struct_size;
    tm_model_stats current = model->impl->stats();
    // A caller with an older, smaller struct gets its fields; a newer one keeps its extra
    // fields untouched.
    std::memcpy(stats, &current, std::min<size_t>(size, sizeof current));
    stats->struct_size = size;
    return Status::Ok();
  });
}

}  // extern "C"
