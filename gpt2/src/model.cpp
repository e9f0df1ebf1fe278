#include "gpt2/src/model.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>

#include "gpt2/src/prepared_weights.h"
#include "gpt2/src/safetensors.h"
#include "gpt2/src/target_info.h"

namespace tinymlir::gpt2 {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Whether anything is at `path` (a broken symlink included): the reader then decides
// whether it is a usable file, so a FIFO or a device named vocab.json is reported as such
// rather than taken for an absent tokenizer.
bool PathExists(const std::string &path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

int64_t NextPowerOfTwo(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// The tm_tensor array of one tm_invoke call; the shapes live as long as the builder.
class Tensors {
 public:
  void Add(const float *data, std::vector<int64_t> shape) { Add(data, TM_F32, std::move(shape)); }
  void Add(const void *data, tm_dtype dtype, std::vector<int64_t> shape) {
    shapes_.push_back(std::move(shape));
    tensors_.push_back({const_cast<void *>(data), dtype,
                        static_cast<int32_t>(shapes_.back().size()), shapes_.back().data(),
                        nullptr});
  }
  void Add(const Weight &w) { Add(w.for_programs(), w.dtype, w.shape); }
  const tm_tensor *data() const { return tensors_.data(); }
  int32_t size() const { return static_cast<int32_t>(tensors_.size()); }

 private:
  std::deque<std::vector<int64_t>> shapes_;
  std::vector<tm_tensor> tensors_;
};

static_assert(static_cast<int>(ProgramKind::kEmbed) == TM_MODEL_PROGRAM_EMBED &&
                  static_cast<int>(ProgramKind::kQkv) == TM_MODEL_PROGRAM_QKV &&
                  static_cast<int>(ProgramKind::kAttnMlp) == TM_MODEL_PROGRAM_ATTN_MLP &&
                  static_cast<int>(ProgramKind::kHead) == TM_MODEL_PROGRAM_HEAD,
              "ProgramKind indexes tm_model_stats.decode_invoke_seconds");

// Room for a model's matrices in TM_Q8_0 (config.matrices), in a HostArena: the token
// table and four per layer.
size_t Q8MatrixSpace(const Gpt2Config &c) {
  size_t space = 0;
  for (const auto &[shape, dtype] : HeldTensorShapes(c))
    if (dtype == TM_Q8_0)
      space += HostArena::Space(TensorBytes(dtype, static_cast<size_t>(shape[0] * shape[1])));
  return space;
}

// A matrix read in F32, quantized to TM_Q8_0 into `arena`: blocks of 32 along each row, the
// contraction axis of every product it enters (projections are laid out-major first). The
// F32 copy goes at once: a converting load peaks at the blocks plus one F32 matrix.
Status QuantizeMatrix(Weight *w, HostArena *arena) {
  if (w->dtype != TM_F32 || w->shape.size() != 2)
    return Status(StatusCode::kRuntime, "QuantizeMatrix: not a 2-D F32 tensor");
  const int64_t rows = w->shape[0], k = w->shape[1];
  HostArray blocks;
  const size_t bytes = TensorBytes(TM_Q8_0, static_cast<size_t>(rows * k));
  TM_RETURN_IF_ERROR(arena->Take(bytes, &blocks));
  const Status s = FromC(tm_quantize_q8_0(w->f32(), rows, k, blocks.data(), bytes));
  if (!s.ok()) return Status(s.code(), "quantizing the weights to q8_0: " + s.message());
  w->host = std::move(blocks);
  w->dtype = TM_Q8_0;
  return Status::Ok();
}

Status Invoke(tm_program *p, const Tensors &in, const Tensors &out) {
  return FromC(tm_invoke(p, in.data(), in.size(), out.data(), out.size()));
}

// Invoke, its time added to seconds[StatsSlot(kind)] and the call to *calls.
Status InvokeTimed(ProgramKind kind, tm_program *p, const Tensors &in, const Tensors &out,
                   double *seconds, uint64_t *calls) {
  const auto start = Clock::now();
  const Status status = Invoke(p, in, out);
  seconds[StatsSlot(kind)] += Seconds(start);
  *calls += 1;
  return status;
}

// Sets row i of the (t, l) additive mask for a row at `position` (-1: a padded row): cache
// rows j <= position visible (0), the others hidden (the lowest float). A padded row sees
// row 0 only, so that no row is fully masked.
void SetMaskRow(float *row, int64_t l, int64_t position) {
  const int64_t last = std::min(std::max<int64_t>(position, 0), l - 1);
  std::fill(row, row + last + 1, 0.0f);
  std::fill(row + last + 1, row + l, std::numeric_limits<float>::lowest());
}

// embed's tensors for t rows: ids and positions in, x (t, d) out.
void EmbedTensors(const Gpt2Weights &w, const int32_t *ids, const int32_t *positions, int64_t t,
                  float *x, int64_t d, Tensors *in, Tensors *out) {
  in->Add(ids, TM_I32, {t});
  in->Add(positions, TM_I32, {t});
  in->Add(w.wte);
  in->Add(w.wpe);
  out->Add(x, {t, d});
}

// qkv's inputs for t rows of x.
void QkvInputs(const Gpt2Layer &w, const float *x, int64_t t, int64_t d, Tensors *in) {
  in->Add(x, {t, d});
  in->Add(w.ln_1_g);
  in->Add(w.ln_1_b);
  in->Add(w.attn_w);
  in->Add(w.attn_b);
}

// head's inputs for t rows of x (the final hidden states).
void HeadInputs(const Gpt2Weights &w, const float *x, int64_t t, int64_t d, Tensors *in) {
  in->Add(x, {t, d});
  in->Add(w.ln_f_g);
  in->Add(w.ln_f_b);
  in->Add(w.wte);
}

// The weights of a block's part after the attention (attn_mlp's and proj_mlp's last inputs).
void ProjMlpWeights(const Gpt2Layer &w, Tensors *in) {
  in->Add(w.attn_proj_w);
  in->Add(w.attn_proj_b);
  in->Add(w.ln_2_g);
  in->Add(w.ln_2_b);
  in->Add(w.fc_w);
  in->Add(w.fc_b);
  in->Add(w.mlp_proj_w);
  in->Add(w.mlp_proj_b);
}

}  // namespace

Status Gpt2Model::Load(tm_context *ctx, const std::string &dir, tm_target target,
                       tm_dtype weights, const std::string &bundle_dir,
                       std::unique_ptr<Gpt2Model> *out) {
  auto start = Clock::now();
  std::unique_ptr<Gpt2Model> m(new Gpt2Model());
  std::string config_text;  // hashed into the prepared weights' key
  TM_RETURN_IF_ERROR(ReadGpt2Config(dir + "/config.json", &m->config_, &config_text));
  {
    std::unique_ptr<SafetensorsFile> file;
    TM_RETURN_IF_ERROR(SafetensorsFile::Open(dir + "/model.safetensors", &file));
    // A bundle's manifest names its target; the weights are held for that one.
    if (!bundle_dir.empty()) TM_RETURN_IF_ERROR(BundleChoices(bundle_dir, &target, &weights));
    TM_RETURN_IF_ERROR(ChooseMatrixDtype(*file, weights, target, &m->config_.matrices));
    if (m->config_.matrices == TM_Q8_0 && (m->config_.n_embd % 32 || m->config_.n_inner % 32))
      return Unsupported(dir + "/config.json: q8_0 weights need n_embd and n_inner to be "
                         "multiples of 32 (the block length); this model has " +
                         std::to_string(m->config_.n_embd) + " and " +
                         std::to_string(m->config_.n_inner));
    // Where the target's decode products stream weight rows as dot products, the
    // projections are laid out so (Gpt2Config::projections_out_major); else as stored.
    tm_target_info info;
    TM_RETURN_IF_ERROR(GetTargetInfo(target, &info));
    m->config_.projections_out_major = info.weights_transposed != 0;
    // The weights as this model holds them: from the prepared file of an earlier load, or
    // converted from the checkpoint (then prepared for the next one).
    const auto weights_start = Clock::now();
    std::string why_none, why;
    const PreparedKey key = KeyFor(dir, *file, m->config_, config_text, &why_none);
    bool prepared = false;
    TM_RETURN_IF_ERROR(ReadPreparedWeights(key, m->config_, &m->weights_, &prepared, &why));
    if (prepared) {
      m->load_notes_ = "weights: read from " + key.path;
    } else {
      const bool out_major = m->config_.projections_out_major;
      if (m->config_.matrices == TM_Q8_0) {  // each matrix laid out and quantized as read
        HostArena blocks;  // the matrices' blocks, back to back (weight_memory.h)
        TM_RETURN_IF_ERROR(blocks.Allocate(Q8MatrixSpace(m->config_)));
        TM_RETURN_IF_ERROR(LoadGpt2Weights(*file, m->config_, &m->weights_,
                                           [&](Weight *w, bool is_projection) {
                                             if (is_projection && out_major)
                                               TM_RETURN_IF_ERROR(TransposeMatrix(w));
                                             return QuantizeMatrix(w, &blocks);
                                           }));
      } else {
        TM_RETURN_IF_ERROR(LoadGpt2Weights(*file, m->config_, &m->weights_));
        if (out_major) TM_RETURN_IF_ERROR(TransposeProjections(&m->weights_));
      }
      m->load_notes_ = "weights: converted from " + dir + "/model.safetensors";
      if (key.path.empty()) {
        m->load_notes_ += " (not prepared for the next load: " + why_none + ")";
      } else {
        const Status written = WritePreparedWeights(key, m->weights_);
        m->load_notes_ += "; prepared file " + key.path + " " +
                          (written.ok() ? std::string("written") : "not written: " + written.message()) +
                          (why.empty() ? "" : " (" + why + ")");
      }
    }
    m->load_notes_ += " in " + std::to_string(static_cast<int>(1e3 * Seconds(weights_start))) + " ms\n";
  }

  std::string vocab = dir + "/vocab.json", merges = dir + "/merges.txt";
  bool has_vocab = PathExists(vocab), has_merges = PathExists(merges);
  if (has_vocab != has_merges)
    return IoError(dir + ": has " + (has_vocab ? "vocab.json but no merges.txt"
                                               : "merges.txt but no vocab.json") +
                   " (the tokenizer needs both)");
  if (has_vocab) {
    TM_RETURN_IF_ERROR(BpeTokenizer::Load(vocab, merges, &m->tokenizer_));
    if (m->tokenizer_->vocab_size() > m->config_.vocab_size)
      return IoError(dir + ": the tokenizer has " + std::to_string(m->tokenizer_->vocab_size()) +
                     " tokens but the model only " + std::to_string(m->config_.vocab_size));
  }

  if (bundle_dir.empty())
    TM_RETURN_IF_ERROR(NewCompilerSource(ctx, m->config_, target, &m->source_));
  else
    TM_RETURN_IF_ERROR(OpenBundle(bundle_dir, m->config_, &m->source_));
  bool on_device = false;
  tm_target_info info;
  TM_RETURN_IF_ERROR(GetTargetInfo(m->source_->target(), &info));
  if (!info.host_memory) TM_RETURN_IF_ERROR(m->UploadWeights(&on_device));
  TM_RETURN_IF_ERROR(m->AllocateCaches(on_device));
  m->on_device_ = on_device;
  for (Floats *scratch : {&m->x_, &m->x_next_, &m->q_, &m->k_, &m->v_, &m->mask_, &m->merged_})
    scratch->set_device(on_device, m->source_->target());
  if (on_device) {
    std::vector<float> iota(static_cast<size_t>(m->Candidates()));
    for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<float>(i);
    m->argmax_iota_.set_device(true, m->source_->target());
    TM_RETURN_IF_ERROR(m->argmax_iota_.Resize(iota.size()));
    TM_RETURN_IF_ERROR(m->argmax_iota_.Write(0, iota.data(), iota.size()));
  }
  m->stats_.struct_size = sizeof(tm_model_stats);
  m->stats_.load_seconds = Seconds(start);
  *out = std::move(m);
  return Status::Ok();
}

Gpt2Model::~Gpt2Model() {
  for (tm_device_buffer *buffer : weight_buffers_) tm_device_buffer_destroy(buffer);
}

Status Gpt2Model::AllocateCaches(bool on_device) {
  // Zeros, so that masked rows stay finite (Floats: on the host, the cache occupies memory
  // only as the rows the programs read grow, TouchCacheRows; GPT-2 124M's full cache is
  // 75 MB, a 100-token generation reads 128 rows of it, 9 MB).
  const Gpt2Config &c = config_;
  const size_t cache = static_cast<size_t>(c.n_ctx) * c.n_embd;
  for (auto *caches : {&k_cache_, &v_cache_}) {
    caches->resize(c.n_layer);
    for (Floats &layer : *caches) {
      layer.set_device(on_device, source_->target());
      Status status = layer.Resize(cache);
      if (!status.ok())
        return {status.code(), "tm_model_load: cannot allocate the KV cache (" +
                                   std::to_string(2 * c.n_layer * cache * sizeof(float)) +
                                   " bytes): " + status.message()};
    }
  }
  return Status::Ok();
}

void Gpt2Model::TouchCacheRows(int64_t rows) {
  // A decode step reads its cache's rows up to the bucket (CacheRows), most of them masked
  // and never written. Read first, a page of them is the kernel's shared zero page; the
  // step that later writes the page's first K or V row takes a copy-on-write fault, whose
  // TLB flush interrupts every CPU the process runs on: GPT-2 124M took about 75 page
  // faults a token, 18 of them with that interrupt, in a 64-token decode. Written here
  // once per bucket (zeros over zeros), the pages are the process's own before any read.
  // A cache on a device is zero already (device buffers start so).
  if (rows <= cache_written_rows_) return;
  const int64_t d = config_.n_embd;
  for (auto *caches : {&k_cache_, &v_cache_})
    for (Floats &layer : *caches)
      if (!layer.on_device())
        std::memset(layer.data() + cache_written_rows_ * d, 0,
                    static_cast<size_t>((rows - cache_written_rows_) * d) * sizeof(float));
  cache_written_rows_ = rows;
}

Status Gpt2Model::UploadWeights(bool *uploaded) {
  *uploaded = false;
  std::vector<Weight *> all = {&weights_.wte, &weights_.wpe, &weights_.ln_f_g, &weights_.ln_f_b};
  for (Gpt2Layer &l : weights_.layers)
    for (Weight *w : {&l.ln_1_g, &l.ln_1_b, &l.attn_w, &l.attn_b, &l.attn_proj_w, &l.attn_proj_b,
                      &l.ln_2_g, &l.ln_2_b, &l.fc_w, &l.fc_b, &l.mlp_proj_w, &l.mlp_proj_b})
      all.push_back(w);
  for (Weight *w : all) {
    tm_device_buffer *buffer = nullptr;
    const tm_status s = tm_device_buffer_create(source_->target(), w->bytes(), &buffer);
    // Where there is no GPU, the weights stay on the host: every program call then fails
    // with the same message, and a model can still be loaded, inspected and tokenized.
    if (s == TM_ERROR_UNSUPPORTED) return Status::Ok();
    TM_RETURN_IF_ERROR(FromC(s));
    weight_buffers_.push_back(buffer);
    TM_RETURN_IF_ERROR(FromC(tm_device_buffer_write(buffer, 0, w->host.data(), w->bytes())));
    w->device = tm_device_buffer_data(buffer);
  }
  *uploaded = true;
  return Status::Ok();
}

Status Gpt2Model::TryClaim(const char *fn, std::unique_ptr<Claim> *claim) {
  const pid_t self = getpid();
  const auto thread = reinterpret_cast<uintptr_t>(pthread_self());
  pid_t holder = 0;
  if (!claimed_by_.compare_exchange_strong(holder, self, std::memory_order_acquire)) {
    const Status busy = Busy(std::string(fn) +
                             ": the model is busy with another call (from another thread, or "
                             "from inside a tm_generate callback); use one model per thread");
    // Held in this process, or by this very thread before it forked (a callback that
    // forked: the call it interrupted goes on here).
    if (holder == self || claiming_thread_.load(std::memory_order_relaxed) == thread) return busy;
    // The holder was a thread of the process this one was forked from.
    if (adding_programs_.load(std::memory_order_acquire))
      return RuntimeError(std::string(fn) +
                          ": this process was forked while another thread was adding compiled "
                          "programs to the model; load the model again in this process");
    if (!claimed_by_.compare_exchange_strong(holder, self, std::memory_order_acquire))
      return busy;  // another thread of this process took it over first
  }
  claiming_thread_.store(thread, std::memory_order_relaxed);
  *claim = std::make_unique<Claim>(this);
  return Status::Ok();
}

Status Gpt2Model::GetProgram(ProgramKind kind, int64_t t, int64_t l, tm_program **out) {
  const ProgramKey key(static_cast<int>(kind), t, l);
  TM_RETURN_IF_ERROR(EnsurePrograms({key}, nullptr, nullptr));
  *out = programs_.at(key);
  return Status::Ok();
}

int64_t Gpt2Model::CacheRows(int64_t filled) const {
  return std::min<int64_t>(std::max<int64_t>(16, NextPowerOfTwo(filled)), config_.n_ctx);
}

Status Gpt2Model::Prepare(size_t n_prompt, const GenerateRequest &request) {
  // The (T, L) shapes each step will run (EnsurePrograms skips repeats and what is held).
  std::vector<ProgramKey> wanted;
  auto want = [&](ProgramKind kind, int64_t t, int64_t l) {
    wanted.emplace_back(static_cast<int>(kind), t, l);
  };
  auto need = [&](int64_t t, int64_t filled) {
    want(ProgramKind::kEmbed, t, 0);
    want(ProgramKind::kQkv, t, 0);
    want(ProgramKind::kAttnMlp, t, CacheRows(filled));
  };
  want(ProgramKind::kHead, 1, 0);
  if (ArgmaxOnDevice(request)) want(ProgramKind::kHeadArgmax, 1, Candidates());
  const int64_t n = static_cast<int64_t>(n_prompt), steps = request.max_new_tokens;
  need(NextPowerOfTwo(n), n);
  for (int64_t step = 1; step < steps; ++step) {
    int64_t filled = n + step;  // positions in the cache after this step's token
    request.use_kv_cache ? need(1, filled) : need(NextPowerOfTwo(filled), filled);
  }
  return EnsurePrograms(wanted, request.progress, request.progress_user);
}

Status Gpt2Model::EnsurePrograms(const std::vector<ProgramKey> &wanted,
                                 tm_progress_callback progress, void *user) {
  std::vector<ProgramKey> missing;
  for (const ProgramKey &key : wanted)
    if (!programs_.count(key) && std::find(missing.begin(), missing.end(), key) == missing.end())
      missing.push_back(key);
  if (missing.empty()) return Status::Ok();
  const auto start = Clock::now();
  std::vector<ProgramHandle> made;
  Status status = source_->Make(missing, progress, user, &made, &stats_);
  stats_.compile_seconds += Seconds(start);
  TM_RETURN_IF_ERROR(status);
  adding_programs_.store(true, std::memory_order_release);
  for (size_t i = 0; i < missing.size(); ++i) programs_.emplace(missing[i], std::move(made[i]));
  adding_programs_.store(false, std::memory_order_release);
  return Status::Ok();
}

Status Gpt2Model::CheckIds(const std::string &fn, const int32_t *ids, size_t n) const {
  if (n == 0) return InvalidArgument(fn + ": the prompt is empty");
  if (!ids) return InvalidArgument(fn + ": ids is NULL");
  if (n > static_cast<size_t>(config_.n_ctx))
    return OutOfRange(fn + ": " + std::to_string(n) +
                      " tokens exceed the model's context of " + std::to_string(config_.n_ctx));
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= config_.vocab_size)
      return OutOfRange(fn + ": token id " + std::to_string(ids[i]) +
                        " at position " + std::to_string(i) + " is outside the vocabulary (" +
                        std::to_string(config_.vocab_size) + " tokens)");
  return Status::Ok();
}

Status Gpt2Model::ForwardLayers(const int32_t *ids, size_t n, int64_t pos) {
  const Gpt2Config &c = config_;
  const int64_t d = c.n_embd;
  const int64_t t = NextPowerOfTwo(static_cast<int64_t>(n));
  const int64_t l = CacheRows(pos + static_cast<int64_t>(n));

  // Padded rows read token 0 at position 0: valid indices, results never used.
  std::vector<int32_t> padded_ids(t, 0), positions(t, 0);
  for (size_t i = 0; i < n; ++i) {
    padded_ids[i] = ids[i];
    positions[i] = static_cast<int32_t>(pos + static_cast<int64_t>(i));
  }
  // Row i (position pos + i) sees cache rows j <= pos + i; padded rows see row 0 only, so
  // no row is fully masked.
  mask_rows_.resize(static_cast<size_t>(t * l));
  for (int64_t i = 0; i < t; ++i)
    SetMaskRow(mask_rows_.data() + i * l, l, i < static_cast<int64_t>(n) ? pos + i : -1);
  TM_RETURN_IF_ERROR(mask_.Resize(mask_rows_.size()));
  TM_RETURN_IF_ERROR(mask_.Write(0, mask_rows_.data(), mask_rows_.size()));
  // Rows [pos + n, l) of the cache are read under the mask, where they must contribute
  // exactly nothing: a row a previous computation left there (possibly NaN or infinite,
  // and 0 * NaN is NaN) is zeroed first. Only a computation that restarts below the rows
  // already written pays for it.
  const int64_t end = pos + static_cast<int64_t>(n);
  if (cache_dirty_end_ > end) {
    for (int layer = 0; layer < c.n_layer; ++layer)
      for (Floats *cache : {&k_cache_[layer], &v_cache_[layer]})
        TM_RETURN_IF_ERROR(cache->Zero(static_cast<size_t>(end * d),
                                       static_cast<size_t>((cache_dirty_end_ - end) * d)));
  }
  cache_dirty_end_ = end;
  TouchCacheRows(l);
  for (double &seconds : forward_invoke_seconds_) seconds = 0.0;
  forward_invokes_ = 0;
  // tm_invoke, timed per program kind (tm_model_stats.decode_invoke_seconds).
  auto Run = [this](ProgramKind kind, tm_program *program, const Tensors &in,
                    const Tensors &out) {
    return InvokeTimed(kind, program, in, out, forward_invoke_seconds_, &forward_invokes_);
  };
  for (Floats *scratch : {&x_, &x_next_, &q_, &k_, &v_})
    TM_RETURN_IF_ERROR(scratch->Resize(static_cast<size_t>(t * d)));

  tm_program *embed, *qkv, *attn_mlp;
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kEmbed, t, 0, &embed));
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kQkv, t, 0, &qkv));
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kAttnMlp, t, l, &attn_mlp));

  {
    Tensors in, out;
    EmbedTensors(weights_, padded_ids.data(), positions.data(), t, x_.data(), d, &in, &out);
    TM_RETURN_IF_ERROR(Run(ProgramKind::kEmbed, embed, in, out));
  }
  for (int layer = 0; layer < c.n_layer; ++layer) {
    const Gpt2Layer &w = weights_.layers[layer];
    Tensors qkv_in, qkv_out;
    QkvInputs(w, x_.data(), t, d, &qkv_in);
    // Only real rows enter the cache. Without padded rows (every decode step, and prompts
    // of a power-of-two length) the program writes K and V into their cache rows itself:
    // no copy.
    const bool into_cache = t == static_cast<int64_t>(n);
    float *k_rows = into_cache ? k_cache_[layer].data() + pos * d : k_.data();
    float *v_rows = into_cache ? v_cache_[layer].data() + pos * d : v_.data();
    qkv_out.Add(q_.data(), {t, d});
    qkv_out.Add(k_rows, {t, d});
    qkv_out.Add(v_rows, {t, d});
    TM_RETURN_IF_ERROR(Run(ProgramKind::kQkv, qkv, qkv_in, qkv_out));
    if (!into_cache) {
      TM_RETURN_IF_ERROR(k_cache_[layer].CopyFrom(static_cast<size_t>(pos * d), k_, 0, n * d));
      TM_RETURN_IF_ERROR(v_cache_[layer].CopyFrom(static_cast<size_t>(pos * d), v_, 0, n * d));
    }

    Tensors in, out;
    in.Add(x_.data(), {t, d});
    in.Add(q_.data(), {t, d});
    in.Add(k_cache_[layer].data(), {l, d});
    in.Add(v_cache_[layer].data(), {l, d});
    in.Add(mask_.data(), {t, l});
    ProjMlpWeights(w, &in);
    out.Add(x_next_.data(), {t, d});
    TM_RETURN_IF_ERROR(Run(ProgramKind::kAttnMlp, attn_mlp, in, out));
    std::swap(x_, x_next_);
  }
  return Status::Ok();
}

Status Gpt2Model::Forward(const int32_t *ids, size_t n, int64_t pos, float *logits) {
  tm_program *head;
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kHead, 1, 0, &head));
  TM_RETURN_IF_ERROR(ForwardLayers(ids, n, pos));
  return HeadLogits(n, logits);
}

Status Gpt2Model::HeadLogits(size_t n, float *logits) {
  const int64_t d = config_.n_embd;
  tm_program *head;
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kHead, 1, 0, &head));
  Tensors in, out;
  HeadInputs(weights_, x_.data() + (n - 1) * d, 1, d, &in);
  out.Add(logits, {config_.vocab_size});
  return InvokeTimed(ProgramKind::kHead, head, in, out, forward_invoke_seconds_,
                     &forward_invokes_);
}

Status Gpt2Model::HeadArgmax(size_t n, int32_t *token, int32_t *non_finite) {
  const int64_t d = config_.n_embd;
  tm_program *head;
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kHeadArgmax, 1, Candidates(), &head));
  Tensors in, out;
  HeadInputs(weights_, x_.data() + (n - 1) * d, 1, d, &in);
  in.Add(argmax_iota_.data(), {Candidates()});
  out.Add(token, TM_I32, {1});
  out.Add(non_finite, TM_I32, {1});
  return InvokeTimed(ProgramKind::kHeadArgmax, head, in, out, forward_invoke_seconds_,
                     &forward_invokes_);
}

int32_t Gpt2Model::Candidates() const {
  return tokenizer_ ? tokenizer_->vocab_size() : config_.vocab_size;
}

bool Gpt2Model::ArgmaxOnDevice(const GenerateRequest &request) const {
  return on_device_ && request.sampling.temperature == 0.0f &&
         source_->Has(ProgramKey(static_cast<int>(ProgramKind::kHeadArgmax), 1, Candidates()));
}

Status Gpt2Model::Logits(const int32_t *ids, size_t n, float *logits, size_t capacity) {
  TM_RETURN_IF_ERROR(CheckIds("tm_model_logits", ids, n));
  if (!logits) return InvalidArgument("tm_model_logits: logits is NULL");
  if (capacity < static_cast<size_t>(config_.vocab_size))
    return InvalidArgument("tm_model_logits: logits has room for " + std::to_string(capacity) +
                           " floats, the model has " + std::to_string(config_.vocab_size) +
                           " logits");
  return Forward(ids, n, 0, logits);
}

Status Gpt2Model::Score(const int32_t *ids, size_t n, double *logprobs, size_t logprobs_capacity,
                        float *logits, size_t logits_capacity) {
  constexpr const char *fn = "tm_model_score";
  TM_RETURN_IF_ERROR(CheckIds(fn, ids, n));
  const int64_t d = config_.n_embd, vocab = config_.vocab_size;
  if (logprobs && logprobs_capacity < n - 1)
    return InvalidArgument(std::string(fn) + ": logprobs has room for " +
                           std::to_string(logprobs_capacity) + " values, " +
                           std::to_string(n) + " tokens have " + std::to_string(n - 1));
  if (logits && logits_capacity / n < static_cast<size_t>(vocab))
    return InvalidArgument(std::string(fn) + ": logits has room for " +
                           std::to_string(logits_capacity) + " floats, " + std::to_string(n) +
                           " positions of " + std::to_string(vocab) + " logits need " +
                           std::to_string(n * static_cast<size_t>(vocab)));
  if (!logprobs && logprobs_capacity > 0)
    return InvalidArgument(std::string(fn) + ": logprobs is NULL with a capacity of " +
                           std::to_string(logprobs_capacity));
  if (!logits && logits_capacity > 0)
    return InvalidArgument(std::string(fn) + ": logits is NULL with a capacity of " +
                           std::to_string(logits_capacity));

  const int64_t t = NextPowerOfTwo(static_cast<int64_t>(n));
  TM_RETURN_IF_ERROR(EnsurePrograms({{static_cast<int>(ProgramKind::kEmbed), t, 0},
                                     {static_cast<int>(ProgramKind::kQkv), t, 0},
                                     {static_cast<int>(ProgramKind::kAttnMlp), t,
                                      CacheRows(static_cast<int64_t>(n))},
                                     {static_cast<int>(ProgramKind::kHead), kScoreRows, 0}},
                                    nullptr, nullptr));
  tm_program *head;
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kHead, kScoreRows, 0, &head));
  TM_RETURN_IF_ERROR(head_rows_.Resize(static_cast<size_t>(kScoreRows * d)));
  TM_RETURN_IF_ERROR(head_logits_.Resize(static_cast<size_t>(kScoreRows * vocab)));
  TM_RETURN_IF_ERROR(ForwardLayers(ids, n, 0));

  // The head runs kScoreRows positions at a time; the rows of the last chunk past n are
  // zero (their logits unused).
  for (size_t first = 0; first < n; first += kScoreRows) {
    const size_t rows = std::min(n - first, static_cast<size_t>(kScoreRows));
    TM_RETURN_IF_ERROR(x_.Read(first * d, rows * d, head_rows_.data()));
    std::fill(head_rows_.data() + rows * d, head_rows_.data() + head_rows_.size(), 0.0f);
    Tensors in, out;
    HeadInputs(weights_, head_rows_.data(), kScoreRows, d, &in);
    out.Add(head_logits_.data(), {kScoreRows, vocab});
    TM_RETURN_IF_ERROR(Invoke(head, in, out));
    for (size_t r = 0; r < rows; ++r) {
      const size_t i = first + r;
      const float *row = head_logits_.data() + r * vocab;
      if (logits) std::copy(row, row + vocab, logits + i * vocab);
      if (!logprobs || i + 1 == n) continue;
      if (const int32_t id = FirstNonFinite(row, static_cast<int32_t>(vocab)); id >= 0)
        return RuntimeError(std::string(fn) + ": position " + std::to_string(i) +
                            " has a non-finite logit (" + std::to_string(row[id]) +
                            ") for token " + std::to_string(id));
      // log softmax in double: the largest logit first, so that no exponential overflows.
      const double top = *std::max_element(row, row + vocab);
      double sum = 0.0;
      for (int64_t j = 0; j < vocab; ++j) sum += std::exp(static_cast<double>(row[j]) - top);
      logprobs[i] = static_cast<double>(row[ids[i + 1]]) - top - std::log(sum);
    }
  }
  return Status::Ok();
}

Status Gpt2Model::CheckRequest(const std::string &fn, const int32_t *prompt, size_t n,
                               const GenerateRequest &request) const {
  TM_RETURN_IF_ERROR(CheckIds(fn, prompt, n));
  if (request.max_new_tokens < 0)
    return InvalidArgument(fn + ": max_new_tokens must be >= 0, got " +
                           std::to_string(request.max_new_tokens));
  if (n + static_cast<size_t>(request.max_new_tokens) > static_cast<size_t>(config_.n_ctx))
    return OutOfRange(fn + ": the prompt (" + std::to_string(n) + " tokens) plus " +
                      std::to_string(request.max_new_tokens) +
                      " new tokens exceed the model's context of " +
                      std::to_string(config_.n_ctx) + " tokens");
  return Status::Ok();
}

tm_device_counters Gpt2Model::DeviceCountersNow() const {
  tm_device_counters c = {};
  c.struct_size = sizeof c;
  // Programs on the caller's buffers ask nothing of a device: no call on the CPU's decode path.
  if (!on_device_) return c;
  if (tm_target_get_device_counters(source_->target(), &c) != TM_OK) {
    c = {};
    c.struct_size = sizeof c;
  }
  return c;
}

void Gpt2Model::AddDecodeStep(double seconds, uint64_t tokens,
                              const tm_device_counters &device_before) {
  stats_.decode_seconds += seconds;
  stats_.decode_tokens += tokens;
  for (int kind = 0; kind < TM_MODEL_NUM_PROGRAM_KINDS; ++kind)
    stats_.decode_invoke_seconds[kind] += forward_invoke_seconds_[kind];
  stats_.decode_invokes += forward_invokes_;
  const tm_device_counters now = DeviceCountersNow();
  stats_.decode_graph_launches += now.graph_launches - device_before.graph_launches;
  stats_.decode_kernel_launches += now.kernel_launches - device_before.kernel_launches;
  stats_.decode_host_syncs += now.host_syncs - device_before.host_syncs;
  stats_.decode_allocations += now.allocations - device_before.allocations;
  stats_.decode_bytes_to_device += now.bytes_to_device - device_before.bytes_to_device;
  stats_.decode_bytes_from_device += now.bytes_from_device - device_before.bytes_from_device;
}

void Gpt2Model::ResetGenerationStats() {
  stats_.prefill_seconds = stats_.decode_seconds = 0.0;
  stats_.decode_tokens = 0;
  for (double &seconds : stats_.decode_invoke_seconds) seconds = 0.0;
  stats_.decode_invokes = 0;
  stats_.decode_graph_launches = stats_.decode_kernel_launches = stats_.decode_host_syncs = 0;
  stats_.decode_allocations = stats_.decode_bytes_to_device = stats_.decode_bytes_from_device = 0;
}

Status Gpt2Model::ChooseToken(const std::string &fn, const float *logits, int32_t step,
                              size_t position, Sampler *sampler, int32_t *token) const {
  // Checkpoints pad the embedding past the tokenizer (GPT-2: 50257 tokens, often 50304
  // rows): with a tokenizer, only the ids it can decode are candidates. Load checked that
  // it covers [0, its size) and is no larger than the model's vocabulary.
  const int32_t candidates = Candidates();
  // A NaN or infinite logit (non-finite weights, or an overflow) has no meaningful
  // sample; stop rather than emit whatever the comparison order picks.
  if (const int32_t id = FirstNonFinite(logits, candidates); id >= 0)
    return RuntimeError(fn + ": step " + std::to_string(step) + " (position " +
                        std::to_string(position) + "): the logit of token " +
                        std::to_string(id) + " is " + std::to_string(logits[id]) +
                        "; the model's weights or activations are not finite");
  *token = sampler->Next(logits, candidates);
  return Status::Ok();
}

Status Gpt2Model::Generate(const int32_t *prompt, size_t n, const GenerateRequest &request,
                           std::vector<int32_t> *out) {
  TM_RETURN_IF_ERROR(CheckRequest("tm_generate", prompt, n, request));
  ResetGenerationStats();
  out->clear();
  if (request.max_new_tokens == 0) return Status::Ok();

  // Compile everything up front: the first token waits for it, later ones never do.
  TM_RETURN_IF_ERROR(Prepare(n, request));
  Sampler sampler(request.sampling);
  std::vector<int32_t> tokens(prompt, prompt + n);
  std::vector<float> logits(config_.vocab_size);
  const int32_t eos = config_.eos_token_id;
  // Greedy on a device: the token is chosen there, and 8 bytes come back instead of the
  // logits (whose first non-finite one is computed and named when there is one).
  const bool argmax_on_device = ArgmaxOnDevice(request);
  for (int32_t step = 0; step < request.max_new_tokens; ++step) {
    auto start = Clock::now();
    double compiling = stats_.compile_seconds;  // compile time is reported separately
    const tm_device_counters device_before = DeviceCountersNow();
    const bool whole = step == 0 || !request.use_kv_cache;
    const size_t rows = whole ? tokens.size() : 1;
    TM_RETURN_IF_ERROR(ForwardLayers(whole ? tokens.data() : &tokens.back(), rows,
                                     whole ? 0 : static_cast<int64_t>(tokens.size()) - 1));
    int32_t token = 0, non_finite = 1;
    if (argmax_on_device) TM_RETURN_IF_ERROR(HeadArgmax(rows, &token, &non_finite));
    if (non_finite != 0) TM_RETURN_IF_ERROR(HeadLogits(rows, logits.data()));
    double elapsed = Seconds(start) - (stats_.compile_seconds - compiling);
    if (step == 0) {
      stats_.prefill_seconds = elapsed;
    } else {
      AddDecodeStep(elapsed, 1, device_before);
    }
    if (non_finite != 0)
      TM_RETURN_IF_ERROR(ChooseToken("tm_generate", logits.data(), step, tokens.size() - 1,
                                     &sampler, &token));
    tokens.push_back(token);
    out->push_back(token);
    if (request.callback && request.callback(request.user, token) != 0) break;
    if (request.stop_at_eos && token == eos) break;
  }
  return Status::Ok();
}

// A sequence of a batch as it generates: its tokens so far, its sampler and its own KV
// cache (per layer, the rows it can reach).
struct Gpt2Model::Lane {
  Lane(size_t index, const BatchRequest &r)
      : index(index), request(r.request), tokens(r.prompt, r.prompt + r.n), sampler(r.request.sampling) {}
  size_t index;  // in the batch
  GenerateRequest request;
  std::vector<int32_t> tokens;
  Sampler sampler;
  int32_t produced = 0;
  bool done = false;
  std::vector<Floats *> k_cache, v_cache;  // per layer: its slot's cache

  int64_t position() const { return static_cast<int64_t>(tokens.size()) - 1; }
};

std::vector<ProgramKey> Gpt2Model::BatchProgramKeys(const std::vector<BatchRequest> &batch) const {
  std::vector<ProgramKey> keys;
  auto want = [&](ProgramKind kind, int64_t t, int64_t l) {
    keys.emplace_back(static_cast<int>(kind), t, l);
  };
  size_t decoding = 0;  // sequences that take a decode step
  want(ProgramKind::kHead, 1, 0);
  for (const BatchRequest &r : batch) {
    if (r.request.max_new_tokens == 0) continue;
    const int64_t n = static_cast<int64_t>(r.n);
    want(ProgramKind::kEmbed, NextPowerOfTwo(n), 0);
    want(ProgramKind::kQkv, NextPowerOfTwo(n), 0);
    want(ProgramKind::kAttnMlp, NextPowerOfTwo(n), CacheRows(n));
    if (r.request.max_new_tokens < 2) continue;
    decoding += 1;
    for (int64_t filled = n + 1; filled < n + r.request.max_new_tokens; ++filled)
      want(ProgramKind::kAttention, 1, CacheRows(filled));
  }
  // As sequences end the batch narrows: every power of two up to its first width.
  for (int64_t t = 1; decoding > 0 && t <= NextPowerOfTwo(static_cast<int64_t>(decoding)); t *= 2)
    for (ProgramKind kind : {ProgramKind::kEmbed, ProgramKind::kQkv, ProgramKind::kProjMlp,
                             ProgramKind::kHead})
      want(kind, t, 0);
  return keys;
}

Status Gpt2Model::GenerateBatch(const std::vector<BatchRequest> &batch,
                                tm_batch_token_callback callback, void *user,
                                tm_progress_callback progress, void *progress_user,
                                std::vector<std::vector<int32_t>> *out) {
  const std::string fn = "tm_generate_batch";
  if (batch.empty()) return InvalidArgument(fn + ": the batch has no sequences");
  if (batch.size() > kMaxBatchSequences)
    return InvalidArgument(fn + ": " + std::to_string(batch.size()) +
                           " sequences; a batch takes at most " +
                           std::to_string(kMaxBatchSequences) +
                           " (TM_MAX_BATCH_SEQUENCES): split it into batches of that size");
  for (size_t i = 0; i < batch.size(); ++i) {
    const std::string name = fn + ": sequence " + std::to_string(i);
    TM_RETURN_IF_ERROR(CheckRequest(name, batch[i].prompt, batch[i].n, batch[i].request));
    if (!batch[i].request.use_kv_cache)
      return InvalidArgument(name + ": use_kv_cache is 0; a batch decodes with the KV cache");
  }
  ResetGenerationStats();
  out->assign(batch.size(), {});
  TM_RETURN_IF_ERROR(EnsurePrograms(BatchProgramKeys(batch), progress, progress_user));

  const Gpt2Config &c = config_;
  const int64_t d = c.n_embd, vocab = c.vocab_size;
  // Each sequence that takes a decode step has the caches of a slot of its own (kept by the
  // model for the next batch, so that their pages are faulted in once), written whole
  // before any program reads them: the prompt's rows, then zeros. A row a program reads
  // under the mask must be finite (0 times NaN is NaN), and a page first read, then written
  // takes a copy-on-write fault whose TLB flush interrupts every CPU (TouchCacheRows).
  std::vector<std::unique_ptr<Lane>> lanes;
  if (slot_k_caches_.size() < batch.size() * c.n_layer) {
    slot_k_caches_.resize(batch.size() * c.n_layer);
    slot_v_caches_.resize(batch.size() * c.n_layer);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    auto lane = std::make_unique<Lane>(i, batch[i]);
    lane->done = batch[i].request.max_new_tokens == 0;
    if (!lane->done && batch[i].request.max_new_tokens > 1) {
      const int64_t rows = CacheRows(static_cast<int64_t>(batch[i].n) +
                                     batch[i].request.max_new_tokens);
      for (int layer = 0; layer < c.n_layer; ++layer) {
        for (Floats *cache : {&slot_k_caches_[i * c.n_layer + layer],
                              &slot_v_caches_[i * c.n_layer + layer]}) {
          if (cache->on_device() != on_device_) cache->set_device(on_device_, source_->target());
          const Status s = cache->Resize(static_cast<size_t>(rows * d));
          if (!s.ok())
            return {s.code(), fn + ": sequence " + std::to_string(i) +
                                  ": cannot allocate its KV cache (" +
                                  std::to_string(2 * c.n_layer * rows * d * sizeof(float)) +
                                  " bytes): " + s.message()};
          // Rows [0, n) receive the prompt's after its pass.
          TM_RETURN_IF_ERROR(cache->Zero(batch[i].n * d, (rows - batch[i].n) * d));
        }
        lane->k_cache.push_back(&slot_k_caches_[i * c.n_layer + layer]);
        lane->v_cache.push_back(&slot_v_caches_[i * c.n_layer + layer]);
      }
    }
    lanes.push_back(std::move(lane));
  }

  // Takes lane's token of `step`, chosen from logits; marks the lane done when it ends.
  auto take = [&](Lane &lane, const float *logits, int32_t step) -> Status {
    int32_t token;
    TM_RETURN_IF_ERROR(ChooseToken(fn + ": sequence " + std::to_string(lane.index), logits, step,
                                   static_cast<size_t>(lane.position()), &lane.sampler, &token));
    lane.tokens.push_back(token);
    lane.produced += 1;
    (*out)[lane.index].push_back(token);
    if ((callback && callback(user, lane.index, token) != 0) ||
        (lane.request.stop_at_eos && token == c.eos_token_id) ||
        lane.produced == lane.request.max_new_tokens)
      lane.done = true;
    return Status::Ok();
  };

  // Each prompt alone, as tm_generate processes it; its cache rows then go to the lane.
  std::vector<float> logits(vocab);
  for (auto &lane : lanes) {
    if (lane->done) continue;
    const auto start = Clock::now();
    const double compiling = stats_.compile_seconds;
    const size_t n = lane->tokens.size();
    TM_RETURN_IF_ERROR(Forward(lane->tokens.data(), n, 0, logits.data()));
    for (int layer = 0; layer < c.n_layer && !lane->k_cache.empty(); ++layer) {
      TM_RETURN_IF_ERROR(lane->k_cache[layer]->CopyFrom(0, k_cache_[layer], 0, n * d));
      TM_RETURN_IF_ERROR(lane->v_cache[layer]->CopyFrom(0, v_cache_[layer], 0, n * d));
    }
    stats_.prefill_seconds += Seconds(start) - (stats_.compile_seconds - compiling);
    TM_RETURN_IF_ERROR(take(*lane, logits.data(), 0));
  }

  // Decode steps, each over the lanes still going.
  std::vector<Lane *> active;
  for (;;) {
    active.clear();
    for (auto &lane : lanes)
      if (!lane->done) active.push_back(lane.get());
    if (active.empty()) break;
    const auto start = Clock::now();
    const double compiling = stats_.compile_seconds;
    const tm_device_counters device_before = DeviceCountersNow();
    TM_RETURN_IF_ERROR(DecodeBatchStep(active));
    AddDecodeStep(Seconds(start) - (stats_.compile_seconds - compiling), active.size(),
                  device_before);
    for (size_t r = 0; r < active.size(); ++r)
      TM_RETURN_IF_ERROR(take(*active[r], head_logits_.data() + r * vocab, active[r]->produced));
  }
  return Status::Ok();
}

Status Gpt2Model::DecodeBatchStep(const std::vector<Lane *> &active) {
  // The lanes in rows [0, b) of programs of T = NextPowerOfTwo(b) rows; padded rows read
  // token 0 at position 0 and attend to nothing (their merged heads are zero), and their
  // results are never used.
  const Gpt2Config &c = config_;
  const int64_t d = c.n_embd, vocab = c.vocab_size;
  const int64_t b = static_cast<int64_t>(active.size()), t = NextPowerOfTwo(b);
  for (double &seconds : forward_invoke_seconds_) seconds = 0.0;
  forward_invokes_ = 0;
  auto Run = [this](ProgramKind kind, tm_program *program, const Tensors &in,
                    const Tensors &out) {
    return InvokeTimed(kind, program, in, out, forward_invoke_seconds_, &forward_invokes_);
  };
  // Each lane's token, position, cache rows read, attention program and mask (row r of
  // mask_, lmax apart), the same for every layer.
  std::vector<int32_t> ids(t, 0), positions(t, 0);
  std::vector<int64_t> rows(b);
  std::vector<tm_program *> attention(b);
  int64_t lmax = 0;
  for (int64_t r = 0; r < b; ++r) {
    ids[r] = active[r]->tokens.back();
    positions[r] = static_cast<int32_t>(active[r]->position());
    rows[r] = CacheRows(active[r]->position() + 1);
    lmax = std::max(lmax, rows[r]);
    TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kAttention, 1, rows[r], &attention[r]));
  }
  mask_rows_.assign(static_cast<size_t>(b * lmax), 0.0f);
  for (int64_t r = 0; r < b; ++r) SetMaskRow(mask_rows_.data() + r * lmax, rows[r], positions[r]);
  TM_RETURN_IF_ERROR(mask_.Resize(mask_rows_.size()));
  TM_RETURN_IF_ERROR(mask_.Write(0, mask_rows_.data(), mask_rows_.size()));
  for (Floats *scratch : {&x_, &x_next_, &q_, &k_, &v_, &merged_})
    TM_RETURN_IF_ERROR(scratch->Resize(static_cast<size_t>(t * d)));
  TM_RETURN_IF_ERROR(head_logits_.Resize(static_cast<size_t>(t * vocab)));
  TM_RETURN_IF_ERROR(merged_.Zero(static_cast<size_t>(b * d), static_cast<size_t>((t - b) * d)));
  tm_program *embed, *qkv, *proj_mlp, *head;
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kEmbed, t, 0, &embed));
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kQkv, t, 0, &qkv));
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kProjMlp, t, 0, &proj_mlp));
  TM_RETURN_IF_ERROR(GetProgram(ProgramKind::kHead, t, 0, &head));
  {
    Tensors in, out;
    EmbedTensors(weights_, ids.data(), positions.data(), t, x_.data(), d, &in, &out);
    TM_RETURN_IF_ERROR(Run(ProgramKind::kEmbed, embed, in, out));
  }
  for (int layer = 0; layer < c.n_layer; ++layer) {
    const Gpt2Layer &w = weights_.layers[layer];
    {
      Tensors in, out;
      QkvInputs(w, x_.data(), t, d, &in);
      out.Add(q_.data(), {t, d});
      out.Add(k_.data(), {t, d});
      out.Add(v_.data(), {t, d});
      TM_RETURN_IF_ERROR(Run(ProgramKind::kQkv, qkv, in, out));
    }
    for (int64_t r = 0; r < b; ++r) {
      const Lane &lane = *active[r];
      const int64_t pos = positions[r], l = rows[r];
      TM_RETURN_IF_ERROR(lane.k_cache[layer]->CopyFrom(static_cast<size_t>(pos * d), k_,
                                                       static_cast<size_t>(r * d), d));
      TM_RETURN_IF_ERROR(lane.v_cache[layer]->CopyFrom(static_cast<size_t>(pos * d), v_,
                                                       static_cast<size_t>(r * d), d));
      Tensors in, out;
      in.Add(q_.data() + r * d, {1, d});
      in.Add(lane.k_cache[layer]->data(), {l, d});
      in.Add(lane.v_cache[layer]->data(), {l, d});
      in.Add(mask_.data() + r * lmax, {1, l});
      out.Add(merged_.data() + r * d, {1, d});
      TM_RETURN_IF_ERROR(Run(ProgramKind::kAttention, attention[r], in, out));
    }
    Tensors in, out;
    in.Add(x_.data(), {t, d});
    in.Add(merged_.data(), {t, d});
    ProjMlpWeights(w, &in);
    out.Add(x_next_.data(), {t, d});
    TM_RETURN_IF_ERROR(Run(ProgramKind::kProjMlp, proj_mlp, in, out));
    std::swap(x_, x_next_);
  }
  Tensors in, out;
  HeadInputs(weights_, x_.data(), t, d, &in);
  if (t == 1)
    out.Add(head_logits_.data(), {vocab});
  else
    out.Add(head_logits_.data(), {t, vocab});
  return Run(ProgramKind::kHead, head, in, out);
}

Status Gpt2Model::CompileBundle(const std::string &dir, tm_progress_callback progress,
                                void *user) {
  if (source_->is_bundle())
    return InvalidArgument(
        "tm_model_compile_bundle: this model runs from a bundle already "
        "(load it without options.bundle_dir to compile one)");
  TM_RETURN_IF_ERROR(PrepareBundleFolder(dir));
  // Every (T, L) Forward, Score and GenerateBatch can ask for: prompts and no-KV-cache steps
  // of any length n run in T = NextPowerOfTwo(n) against L = CacheRows(n) rows; decode steps
  // in T = 1 against any L; a batch's decode steps in T up to kMaxBatchSequences rows, each
  // sequence's attention against any L.
  std::vector<ProgramKey> keys;
  auto want = [&](ProgramKind kind, int64_t t, int64_t l) {
    const ProgramKey key(static_cast<int>(kind), t, l);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  };
  want(ProgramKind::kHead, 1, 0);
  want(ProgramKind::kHead, kScoreRows, 0);  // tm_model_score
  tm_target_info info;
  TM_RETURN_IF_ERROR(GetTargetInfo(source_->target(), &info));
  if (!info.host_memory) want(ProgramKind::kHeadArgmax, 1, Candidates());  // greedy steps
  for (int64_t t = 1;; t *= 2) {
    want(ProgramKind::kEmbed, t, 0);
    want(ProgramKind::kQkv, t, 0);
    want(ProgramKind::kAttnMlp, t, CacheRows(t));
    want(ProgramKind::kAttnMlp, 1, CacheRows(t));
    want(ProgramKind::kAttention, 1, CacheRows(t));
    if (t <= static_cast<int64_t>(kMaxBatchSequences)) {
      want(ProgramKind::kProjMlp, t, 0);
      want(ProgramKind::kHead, t, 0);
    }
    if (t >= config_.n_ctx) break;
  }
  TM_RETURN_IF_ERROR(EnsurePrograms(keys, progress, user));
  return WriteBundle(dir, config_, source_->target(), keys, programs_);
}

std::string Gpt2Model::LoadReport() const {
  uint64_t bytes = 0;
  std::vector<std::pair<const void *, size_t>> ranges;
  auto count = [&](const Weight &w) {
    bytes += w.bytes();
    ranges.emplace_back(w.host.data(), w.bytes());
  };
  count(weights_.wte);
  count(weights_.wpe);
  for (const Gpt2Layer &l : weights_.layers)
    for (const Weight *w : {&l.attn_w, &l.attn_proj_w, &l.fc_w, &l.mlp_proj_w}) count(*w);
  const uint64_t huge = std::min(bytes, HugePageBytes(ranges));
  const std::string mode = TransparentHugePageMode();
  std::string text = load_notes_;
  text += "weights: " + std::to_string(bytes >> 20) + " MB in the large tensors, " +
          std::to_string(huge >> 20) + " MB of them in huge pages (transparent huge pages: " + mode;
  if (mode == "never" || mode == "unavailable")
    text += "; 4 KB pages stream about a quarter slower: echo madvise > "
            "/sys/kernel/mm/transparent_hugepage/enabled";
  return text + ")\n";
}

}  // namespace tinymlir::gpt2
