// GPT-2 inference: weights, tokenizer, the compiled programs and a KV cache.
//
// Sequence lengths are bucketed so that a whole generation compiles O(log n_ctx) programs:
// a chunk of n new tokens runs in a program for T = next power of two >= n (padded rows are
// masked out and never written to the cache), attending to L = next power of two >= the
// positions filled so far (at least 16, at most n_ctx) rows of the cache. The attention
// reads the cache rows in place, so a larger minimum would cost GPT-2 124M little; but a
// small model would decode slower and save no compile time (attn_mlp compiles slower as L
// grows), so it stays 16.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gpt2/src/bpe_tokenizer.h"
#include "gpt2/src/checkpoint.h"
#include "gpt2/src/floats.h"
#include "gpt2/src/program_source.h"
#include "gpt2/src/programs.h"
#include "gpt2/src/sampler.h"
#include "gpt2/src/status.h"
#include "tinymlir/gpt2.h"
#include "tinymlir/tinymlir.hpp"

namespace tinymlir::gpt2 {

struct GenerateRequest {
  int32_t max_new_tokens = 32;
  SamplingOptions sampling;
  bool use_kv_cache = true;
  bool stop_at_eos = false;
  tm_token_callback callback = nullptr;
  void *user = nullptr;
  tm_progress_callback progress = nullptr;
  void *progress_user = nullptr;
};

// The most sequences one tm_generate_batch decodes together (TM_MAX_BATCH_SEQUENCES).
inline constexpr size_t kMaxBatchSequences = TM_MAX_BATCH_SEQUENCES;

// One sequence of a batch: its prompt and its own request (tokens, sampling, seed, stop at
// EOS; the callbacks are the batch's).
struct BatchRequest {
  const int32_t *prompt = nullptr;
  size_t n = 0;
  GenerateRequest request;
};

class Gpt2Model {
 public:
  // Loads config, weights and (when both files exist) the tokenizer from `dir`, the weight
  // matrices in the dtype ChooseMatrixDtype makes of `weights` (0: as stored). Programs
  // come from the bundle in `bundle_dir` when it is not empty (ctx unused; its target
  // rules), else from the compiler over ctx (the model keeps a reference).
  static Status Load(tm_context *ctx, const std::string &dir, tm_target target,
                     tm_dtype weights, const std::string &bundle_dir,
                     std::unique_ptr<Gpt2Model> *out);
  ~Gpt2Model();
  Gpt2Model(const Gpt2Model &) = delete;
  Gpt2Model &operator=(const Gpt2Model &) = delete;

  const Gpt2Config &config() const { return config_; }
  const BpeTokenizer *tokenizer() const { return tokenizer_.get(); }  // null: ids only
  const tm_model_stats &stats() const { return stats_; }
  // What the load did that a user may want to know: where the weights came from (the
  // checkpoint, converted; or a prepared file, and why one was not used), how many of their
  // bytes are in huge pages. Lines of text (tm_model_load_report).
  std::string LoadReport() const;

  // Marks the model busy for one computation; fails with TM_ERROR_BUSY (naming `fn`) when
  // another computation holds it. Callers hold the returned claim for the whole call.
  //
  // A claim names the process and thread that hold it. In a process forked while another
  // thread held the model, that thread does not exist: its claim is stale, and the first
  // call takes the model over (its state is whole at every point a fork can see, except
  // while compiled programs are being added, which is refused with a message).
  class Claim {
   public:
    explicit Claim(Gpt2Model *model) : model_(model) {}
    Claim(Claim &&o) noexcept : model_(o.model_) { o.model_ = nullptr; }
    Claim(const Claim &) = delete;
    ~Claim() {
      if (!model_) return;
      model_->claiming_thread_.store(0, std::memory_order_relaxed);
      model_->claimed_by_.store(0, std::memory_order_release);
    }

   private:
    Gpt2Model *model_;
  };
  Status TryClaim(const char *fn, std::unique_ptr<Claim> *claim);

  // Logits of the last position for ids[0..n), recomputing everything from position 0.
  Status Logits(const int32_t *ids, size_t n, float *logits, size_t capacity);

  // Log-probabilities of ids[i + 1] after ids[0..i] (logprobs: n - 1 of them) and, where
  // `logits` is not null, every position's logits, in one forward pass (tm_model_score).
  Status Score(const int32_t *ids, size_t n, double *logprobs, size_t logprobs_capacity,
               float *logits, size_t logits_capacity);

  // Generates tokens after the prompt into *out (also streamed to the callback).
  Status Generate(const int32_t *prompt, size_t n, const GenerateRequest &request,
                  std::vector<int32_t> *out);

  // Generates for every sequence of `batch` at once (tm_generate_batch): each prompt is
  // processed alone, then each decode step runs the token of every sequence still going
  // through one product per weight matrix, each sequence attending to a KV cache of its
  // own. (*out)[i] receives sequence i's tokens; callback (may be null) is told each one
  // with its sequence's index, and a non-zero return ends that sequence. Every sequence's
  // tokens are those it gets alone (tm_generate with the same request).
  Status GenerateBatch(const std::vector<BatchRequest> &batch, tm_batch_token_callback callback,
                       void *user, tm_progress_callback progress, void *progress_user,
                       std::vector<std::vector<int32_t>> *out);

  // Compiles every program the model can run and exports them, with a manifest, to `dir`.
  Status CompileBundle(const std::string &dir, tm_progress_callback progress, void *user);

 private:
  Gpt2Model() = default;

  Status CheckIds(const std::string &fn, const int32_t *ids, size_t n) const;
  // Runs ids[0..n) at positions [pos, pos + n): fills the cache rows and writes the last
  // position's logits.
  Status Forward(const int32_t *ids, size_t n, int64_t pos, float *logits);
  // Forward up to the head: the final hidden state of position pos + i in row i of x_.
  Status ForwardLayers(const int32_t *ids, size_t n, int64_t pos);
  // The head on row n - 1 of x_: its logits (host memory), or on a device the greedy token
  // and how many candidate logits are not finite (head_argmax).
  Status HeadLogits(size_t n, float *logits);
  Status HeadArgmax(size_t n, int32_t *token, int32_t *non_finite);
  // The ids a step chooses among: those the tokenizer decodes, or every row of wte.
  int32_t Candidates() const;
  // Whether greedy steps of `request` choose their token on the device (head_argmax).
  bool ArgmaxOnDevice(const GenerateRequest &request) const;
  Status GetProgram(ProgramKind kind, int64_t t, int64_t l, tm_program **out);
  // Cache rows the attention reads once `filled` positions are in the cache.
  int64_t CacheRows(int64_t filled) const;
  // Compiles (or finds) every program a generation of this shape will run.
  Status Prepare(size_t n_prompt, const GenerateRequest &request);
  // The keys of the programs a batch's decode steps run (GenerateBatch).
  std::vector<ProgramKey> BatchProgramKeys(const std::vector<BatchRequest> &batch) const;
  // Checks a sequence's prompt and request (fn names it: "tm_generate", or the batch and the
  // sequence's index).
  Status CheckRequest(const std::string &fn, const int32_t *prompt, size_t n,
                      const GenerateRequest &request) const;
  // Clears the last generation's timings (tm_model_stats).
  void ResetGenerationStats();
  // The model's device counters now (tm_target_get_device_counters; zeros if unreadable).
  tm_device_counters DeviceCountersNow() const;
  // Adds a decode step of `seconds` that made `tokens` tokens, with the invoke times the
  // step's calls recorded (forward_invoke_seconds_) and what it asked of the device since
  // `device_before`, to the statistics.
  void AddDecodeStep(double seconds, uint64_t tokens, const tm_device_counters &device_before);
  // A sequence of a batch as it generates (GenerateBatch).
  struct Lane;
  // One decode step of a batch: the latest token of each of `active` as a row, each
  // attending to its own cache; row r of head_logits_ receives lane r's logits.
  Status DecodeBatchStep(const std::vector<Lane *> &active);
  // Checks the logits of a step and picks its token; `step` and `position` name it in an
  // error.
  Status ChooseToken(const std::string &fn, const float *logits, int32_t step, size_t position,
                     Sampler *sampler, int32_t *token) const;
  // Makes the programs of `keys` that the model does not hold yet (ProgramSource::Make).
  Status EnsurePrograms(const std::vector<ProgramKey> &keys, tm_progress_callback progress,
                        void *user);

  // GPU programs: copies the weights to device buffers once (Weight::device). Where there
  // is no GPU, leaves them on the host; *uploaded says which.
  Status UploadWeights(bool *uploaded);
  // The KV cache, zero, in device buffers when `on_device`.
  Status AllocateCaches(bool on_device);
  // Makes rows [0, rows) of every host cache memory of the process's own (writes zeros to
  // those never written), before programs read them.
  void TouchCacheRows(int64_t rows);

  std::unique_ptr<ProgramSource> source_;
  std::vector<tm_device_buffer *> weight_buffers_;  // the weights' (Weight::device), if any
  Gpt2Config config_;
  Gpt2Weights weights_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
  std::map<ProgramKey, ProgramHandle> programs_;
  // What the programs read and write besides the weights: in device buffers when they run on
  // the GPU (Floats).
  std::vector<Floats> k_cache_, v_cache_;  // per layer, (n_ctx, d) floats
  int64_t cache_dirty_end_ = 0;  // rows at and above are zero in every layer's cache
  int64_t cache_written_rows_ = 0;  // rows below were written by the host (TouchCacheRows)
  Floats x_, x_next_, q_, k_, v_, mask_;  // scratch
  Floats head_rows_, head_logits_;         // scoring's (kScoreRows, d) and (kScoreRows, V)
  Floats merged_;                          // a batch's attention output, (T, d)
  // A batch's KV caches: slot i's layer l at [i * n_layer + l], kept for the next batch.
  std::vector<Floats> slot_k_caches_, slot_v_caches_;
  std::vector<float> mask_rows_;           // the mask, made on the host, then written to mask_
  Floats argmax_iota_;                     // 0 .. Candidates() - 1, head_argmax's, on a device
  bool on_device_ = false;                 // whether the programs' buffers are device buffers
  // The last Forward's time inside tm_invoke, per ProgramKind, and its number of calls.
  double forward_invoke_seconds_[TM_MODEL_NUM_PROGRAM_KINDS] = {};
  uint64_t forward_invokes_ = 0;
  tm_model_stats stats_{};
  std::string load_notes_;  // LoadReport's first lines, written by Load
  // The claim: the holder's process id (0: free), and its thread once it has the claim.
  std::atomic<pid_t> claimed_by_{0};
  std::atomic<uintptr_t> claiming_thread_{0};
  // Set while programs_ changes (a fork then sees a map half changed).
  std::atomic<bool> adding_programs_{false};
};

}  // namespace tinymlir::gpt2
