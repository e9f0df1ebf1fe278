/*
 * gpt2.h — GPT-2 inference on tinymlir: load a Hugging Face checkpoint, tokenize, run,
 * generate. Built only on the public compiler API in <tinymlir/tinymlir.h> (the model
 * traces its programs with tm_op_* and runs them with tm_invoke), shipped in the same
 * library, libtinymlir.so.
 *
 * The conventions of tinymlir.h hold here too: statuses and tm_last_error(), caller-owned
 * buffers, size queries that report the needed size (snprintf-style), options structs
 * versioned by struct_size.
 *
 * Thread safety: a tm_model runs one computation at a time. tm_model_logits,
 * tm_model_score, tm_generate, tm_generate_batch and tm_model_get_stats called while another
 * of them runs on the same model (from another thread, or from inside a generation's
 * callback) return TM_ERROR_BUSY at once and change nothing; they never block or corrupt
 * the model. tm_model_info, tm_tokenize and tm_detokenize read immutable state and may run
 * concurrently with anything. Use one model per thread for parallel generation (models may
 * share a context), or tm_generate_batch for many prompts on one model. In a process forked
 * while another thread computed with a model, that computation does not exist: the model is
 * free there (its first call takes it over).
 */
#ifndef TINYMLIR_GPT2_H
#define TINYMLIR_GPT2_H

#include "tinymlir/tinymlir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tm_model tm_model;

/* Called while programs are prepared (tm_generate, tm_model_compile_bundle): `done` of
 * `total` ready (compiled, or read from a cache or bundle). Called from the thread that
 * made the call, at least once when total > 0 (with done == total last). */
typedef void (*tm_progress_callback)(void *user, int32_t done, int32_t total);

/* Model options. Published layouts: */
#define TM_MODEL_OPTIONS_SIZE_V1 8  /* target */
#define TM_MODEL_OPTIONS_SIZE_V2 16 /* bundle_dir */
#define TM_MODEL_OPTIONS_SIZE_V3 24 /* weights */
typedef struct tm_model_options {
  uint32_t struct_size; /* sizeof(tm_model_options); set by tm_model_options_init */
  tm_target target;     /* TM_TARGET_CPU (default) or TM_TARGET_GPU: programs compile for
                           the GPU and the weights are copied to GPU memory once, at load
                           (tm_process_managed_alloc; where there is no GPU they stay on the host
                           and generating fails with the driver's message) */
  /* NULL (default): programs are compiled through the context's cache as needed. A folder
   * written by tm_model_compile_bundle: programs are loaded from it (tm_program_load, no
   * compiler involved) and a program it lacks is an error. */
  const char *bundle_dir;
  /* The dtype the weight matrices (wte and each block's four projections; 97% of GPT-2's
   * weights) are held in and streamed from. 0 (default): as the checkpoint stores them (an
   * F16 or BF16 checkpoint stays half precision, with the tokens of its F32 widening: the
   * CPU kernels widen exactly and sum in the same order). TM_F16 or TM_BF16: converted at
   * load (rounded to nearest even), half the memory and about half the bytes per decoded
   * token; the README gives the measured accuracy. TM_F32: widened at load. The GPU target
   * holds F32 (a half request there is TM_ERROR_UNSUPPORTED). A bundle is compiled for one
   * choice and names it in its manifest: with bundle_dir set, 0 means the bundle's choice,
   * and any other value must match it. */
  tm_dtype weights;
} tm_model_options;

/* Fills the first `struct_size` bytes of *options with the defaults (the CPU target, no
 * bundle, the checkpoint's dtype) and sets options->struct_size, as
 * tm_compile_options_init_size does (tinymlir.h).
 * Errors: TM_ERROR_INVALID_ARGUMENT (NULL; a size below TM_MODEL_OPTIONS_SIZE_V1 or above
 * TM_OPTIONS_MAX_STRUCT_SIZE: nothing is written). */
TM_API tm_status tm_model_options_init_size(tm_model_options *options, size_t struct_size);

/* The defaults, for the layout of the header the caller was built with. */
static inline void tm_model_options_init(tm_model_options *options) {
  tm_model_options_init_size(options, sizeof *options);
}

/* Loads a GPT-2 checkpoint in Hugging Face layout from the folder `dir`: config.json and
 * model.safetensors (F32, F16 or BF16 weights; the matrices kept as options.weights says,
 * the rest converted to F32 once; keys with or without
 * the "transformer." prefix), plus vocab.json and merges.txt when present (without them
 * the model works on token ids only). Every file must be a regular file (a FIFO or a device
 * is TM_ERROR_IO, without blocking) within a size cap (config.json 1 MiB, vocab.json and
 * merges.txt 64 MiB, the safetensors header 100 MB); dimensions in config.json beyond this
 * implementation's limits are TM_ERROR_UNSUPPORTED, naming the key and the value; the
 * checkpoint's layers are checked against the config before anything is sized from it.
 * options may be NULL (defaults). Programs are compiled
 * through ctx's cache as they are first needed; the model keeps a reference to ctx, so the
 * caller may destroy its own first. With options.bundle_dir the programs come from the
 * bundle and ctx is not used (it may be NULL). *out receives a model to release with
 * tm_model_destroy.
 * libtinymlir_runtime.so has the functions of this header too, without a compiler: there a
 * model needs options.bundle_dir (ctx NULL), and tm_model_compile_bundle is
 * TM_ERROR_INVALID_ARGUMENT like any model loaded from a bundle.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, bad options), TM_ERROR_IO (missing or malformed
 * file, wrong tensor name/shape/dtype, a bundle for other dimensions; the message names
 * it), TM_ERROR_UNSUPPORTED (a configuration this implementation does not run, e.g. another
 * activation or target; no bundle in the runtime library). */
TM_API tm_status tm_model_load(tm_context *ctx, const char *dir, const tm_model_options *options,
                               tm_model **out);

/* What loading the model did, as lines of text, snprintf-style (*len receives the bytes
 * needed without the NUL; min(capacity, *len + 1) bytes, NUL-terminated, are written to buf):
 * where the weights came from (converted from the checkpoint, or read from the prepared file
 * an earlier load wrote, and why one was not used or rebuilt: stale, corrupt), and how much
 * of them is in huge pages. For a tool's verbose output; the format may change.
 * Errors: TM_ERROR_INVALID_ARGUMENT (NULL model or len, buf NULL with capacity > 0). */
TM_API tm_status tm_model_load_report(const tm_model *model, char *buf, size_t capacity,
                                      size_t *len);

/* Compiles every program this model can run (each prompt and context length bucket, the
 * decode step and the no-KV-cache path, up to the model's n_ctx), in parallel, reporting
 * progress, and exports them (tm_program_export) into the folder `dir` (created if
 * missing) with a manifest.txt naming the model's dimensions. A model loaded with
 * options.bundle_dir = dir then runs without compiling, with the same tokens.
 * Errors: TM_ERROR_INVALID_ARGUMENT, TM_ERROR_IO (cannot write), TM_ERROR_COMPILE,
 * TM_ERROR_BUSY. */
TM_API tm_status tm_model_compile_bundle(tm_model *model, const char *dir,
                                         tm_progress_callback progress, void *user);

/* Frees a model (weights, tokenizer, KV cache, its references to programs and to its
 * context). Must not run concurrently with another call on the model. Accepts NULL. */
TM_API void tm_model_destroy(tm_model *model);

/* The model's dimensions; any output pointer may be NULL.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null model). */
TM_API tm_status tm_model_info(const tm_model *model, int32_t *vocab_size, int32_t *n_ctx,
                               int32_t *n_layer, int32_t *n_embd);

/* Encodes `len` bytes of UTF-8 text into token ids (GPT-2 byte-level BPE). *n_ids receives
 * the number of ids the text needs; the first min(capacity, *n_ids) are written to `ids`
 * (ids may be NULL when capacity is 0). A result longer than capacity is not an error:
 * compare *n_ids with capacity.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, invalid UTF-8), TM_ERROR_UNSUPPORTED (the model
 * has no tokenizer files). */
TM_API tm_status tm_tokenize(const tm_model *model, const char *text, size_t len, int32_t *ids,
                             size_t capacity, size_t *n_ids);

/* Decodes n ids into bytes (not NUL-terminated; a piece may end inside a UTF-8 character).
 * *len receives the number of bytes the text needs; the first min(capacity, *len) are
 * written to `buf` (buf may be NULL when capacity is 0), as snprintf does.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null), TM_ERROR_OUT_OF_RANGE (an id outside the
 * vocabulary), TM_ERROR_UNSUPPORTED (no tokenizer). */
TM_API tm_status tm_detokenize(const tm_model *model, const int32_t *ids, size_t n, char *buf,
                               size_t capacity, size_t *len);

/* Runs the model on ids[0..n) (full recompute, no cache) and writes the vocab_size logits
 * of the last position to `logits` (caller-owned, room for `capacity` floats).
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, n == 0, capacity < vocab_size),
 * TM_ERROR_OUT_OF_RANGE (an id outside the vocabulary, n > n_ctx), TM_ERROR_COMPILE,
 * TM_ERROR_BUSY. */
TM_API tm_status tm_model_logits(tm_model *model, const int32_t *ids, size_t n, float *logits,
                                 size_t capacity);

/* Scores ids[0..n) in one forward pass over all its positions (no cache). For i in
 * [0, n - 1), logprobs[i] receives log P(ids[i + 1] | ids[0..i]): position i's logit of
 * ids[i + 1] less the log of the sum of the exponentials of all vocab_size logits of that
 * position, in double precision (API 1.3). When `logits` is not NULL it receives every
 * position's vocab_size logits, n rows one after the other. Either output may be NULL (its
 * capacity then 0); the sum of a text's -logprobs over n - 1, exponentiated, is its
 * perplexity.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null model or ids, n == 0, logprobs_capacity < n - 1,
 * logits_capacity < n * vocab_size), TM_ERROR_OUT_OF_RANGE (an id outside the vocabulary,
 * n > n_ctx), TM_ERROR_RUNTIME (a logit is NaN or infinite), TM_ERROR_COMPILE,
 * TM_ERROR_BUSY. */
TM_API tm_status tm_model_score(tm_model *model, const int32_t *ids, size_t n, double *logprobs,
                                size_t logprobs_capacity, float *logits,
                                size_t logits_capacity);

/* Generation options. Published layouts: */
#define TM_GENERATE_OPTIONS_SIZE_V1 40 /* up to stop_at_eos */
#define TM_GENERATE_OPTIONS_SIZE_V2 56 /* progress */
typedef struct tm_generate_options {
  uint32_t struct_size;   /* sizeof(tm_generate_options); set by tm_generate_options_init */
  int32_t max_new_tokens; /* tokens to generate (default 32) */
  float temperature;      /* 0 = greedy (default); > 0 samples from softmax(logits / T) */
  int32_t top_k;          /* keep the k most likely tokens; 0 = all (default) */
  float top_p;            /* keep the smallest set with probability >= p; 1 = all (default) */
  uint64_t seed;          /* random seed for sampling (default 0) */
  int32_t use_kv_cache;   /* 1 = KV cache (default); 0 = recompute the prefix every step */
  int32_t stop_at_eos;    /* 1 = stop after emitting the config's eos_token_id (GPT-2:
                           * <|endoftext|>, 50256); default 0 */
  tm_progress_callback progress; /* may be NULL (default) */
  void *progress_user;           /* passed to progress */
} tm_generate_options;

/* Fills the first `struct_size` bytes of *options with the defaults (32 tokens, greedy, KV
 * cache on, no stop at EOS, no progress callback) and sets options->struct_size, as
 * tm_compile_options_init_size does.
 * Errors: TM_ERROR_INVALID_ARGUMENT (NULL; a size below TM_GENERATE_OPTIONS_SIZE_V1 or
 * above TM_OPTIONS_MAX_STRUCT_SIZE: nothing is written). */
TM_API tm_status tm_generate_options_init_size(tm_generate_options *options,
                                               size_t struct_size);

/* The defaults, for the layout of the header the caller was built with. */
static inline void tm_generate_options_init(tm_generate_options *options) {
  tm_generate_options_init_size(options, sizeof *options);
}

/* Called with each generated token as soon as it is chosen. Return 0 to go on; a non-zero
 * return stops the generation after that token (the token is kept). Every binding gives
 * its callback this meaning: "true" stops. */
typedef int (*tm_token_callback)(void *user, int32_t token);

/* Generates up to max_new_tokens tokens after prompt[0..n_prompt). First every program the
 * generation will run is made ready: those in no cache are compiled in parallel, one
 * thread per CPU the process may use, with options->progress told as each is ready; the
 * tokens then never wait for a compile. Each new token is passed
 * to `callback` (may be NULL). *n_out receives the number of tokens generated; the first
 * min(capacity, *n_out) are written to out_ids (out_ids may be NULL when capacity is 0, e.g.
 * when only the callback is wanted). options may be NULL (defaults). When the model has
 * tokenizer files with fewer tokens than vocab_size (checkpoints pad the embedding, e.g. to
 * 50304 rows), only ids the tokenizer can decode are generated. A NaN or infinite logit stops
 * the generation with TM_ERROR_RUNTIME naming the step and position; tokens already passed
 * to the callback stay delivered.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, empty prompt, bad options),
 * TM_ERROR_OUT_OF_RANGE (a prompt id outside the vocabulary, prompt + new tokens beyond
 * n_ctx), TM_ERROR_COMPILE, TM_ERROR_RUNTIME (non-finite logits), TM_ERROR_BUSY. */
TM_API tm_status tm_generate(tm_model *model, const int32_t *prompt, size_t n_prompt,
                             const tm_generate_options *options, tm_token_callback callback,
                             void *user, int32_t *out_ids, size_t capacity, size_t *n_out);

/* The most sequences one tm_generate_batch call decodes together (API 1.4). */
#define TM_MAX_BATCH_SEQUENCES 16

/* One sequence of tm_generate_batch. This layout is fixed: what a sequence may be given
 * later goes in tm_generate_options, which is versioned. */
typedef struct tm_batch_sequence {
  const int32_t *prompt;              /* n_prompt ids */
  size_t n_prompt;
  const tm_generate_options *options; /* this sequence's; NULL: the defaults */
  int32_t *out_ids;                   /* room for `capacity` ids; NULL when capacity is 0 */
  size_t capacity;
  size_t n_out;                       /* set by the call: the tokens generated */
} tm_batch_sequence;

/* Called with each token a batch generates, as soon as it is chosen, with the index of its
 * sequence. Return 0 to go on; a non-zero return ends that sequence after this token (the
 * others go on). */
typedef int (*tm_batch_token_callback)(void *user, size_t sequence, int32_t token);

/* Generates for n sequences at once (API 1.4): each prompt is processed alone, then every
 * decode step runs the latest token of each sequence still going through one product per
 * weight matrix (the weights are read once for all of them), each sequence attending to
 * its own KV cache; a sequence that ends (its max_new_tokens, EOS with stop_at_eos, or the
 * callback) leaves the batch. Each sequence has its own options: max_new_tokens,
 * temperature, top_k, top_p, seed and stop_at_eos; the first sequence's progress callback
 * is told as programs are made ready (the others' are not called). Every sequence gets the
 * tokens tm_generate gives it with the same options. The first min(capacity, n_out) of a
 * sequence's tokens are written to its out_ids; n_out is set for every sequence, also when
 * the call fails (the tokens so far).
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, n == 0 or above TM_MAX_BATCH_SEQUENCES, an empty
 * prompt, bad options, use_kv_cache 0), TM_ERROR_OUT_OF_RANGE (a prompt id outside the
 * vocabulary, a prompt plus its new tokens beyond n_ctx), TM_ERROR_OUT_OF_MEMORY (the
 * sequences' KV caches), TM_ERROR_COMPILE, TM_ERROR_RUNTIME (non-finite logits),
 * TM_ERROR_BUSY. Each error names the sequence it is about. */
TM_API tm_status tm_generate_batch(tm_model *model, tm_batch_sequence *sequences, size_t n,
                                   tm_batch_token_callback callback, void *user);

/* Statistics of the model's work so far. Published layouts: */
#define TM_MODEL_STATS_SIZE_V1 64  /* up to decode_tokens */
#define TM_MODEL_STATS_SIZE_V2 136 /* programs_from_disk, phase_seconds */
#define TM_MODEL_STATS_SIZE_V3 176 /* decode_invoke_seconds, decode_invokes */
#define TM_MODEL_STATS_SIZE_V4 224 /* decode_device (API 1.5) */
/* The programs a forward pass runs, in order: the embedding, then per layer the attention
 * projections (layer norm + QKV) and the attention with the MLP, then the LM head. */
typedef enum tm_model_program {
  TM_MODEL_PROGRAM_EMBED = 0,
  TM_MODEL_PROGRAM_QKV = 1,
  TM_MODEL_PROGRAM_ATTN_MLP = 2,
  TM_MODEL_PROGRAM_HEAD = 3,
  TM_MODEL_NUM_PROGRAM_KINDS = 4
} tm_model_program;

typedef struct tm_model_stats {
  uint32_t struct_size;
  uint64_t programs_compiled; /* programs this model's lookups compiled */
  uint64_t programs_cached;   /* programs this model's lookups found in the context's cache */
  double compile_seconds;
  double load_seconds;
  double prefill_seconds;   /* last tm_generate(_batch): prompt processing */
  double decode_seconds;    /* last tm_generate(_batch): all decode steps */
  uint64_t decode_tokens;   /* last tm_generate(_batch): tokens produced by decode steps,
                             * of every sequence of a batch */
  /* From TM_MODEL_STATS_SIZE_V2: */
  uint64_t programs_from_disk; /* programs read from the disk cache (not counted above) */
  /* Seconds each compile phase (tm_compile_phase) took, summed over the programs this
   * model compiled or read from disk; with parallel compiles the sum exceeds
   * compile_seconds, which is wall time. */
  double phase_seconds[TM_NUM_COMPILE_PHASES];
  /* From TM_MODEL_STATS_SIZE_V3: where the last tm_generate's decode steps went. Seconds inside
   * tm_invoke for each program kind (indexed by tm_model_program) and the number of calls;
   * decode_seconds minus their sum is the model's own work between the calls (cache rows,
   * the mask, sampling). A batch's attention and proj_mlp programs, the two halves of
   * attn_mlp, count as TM_MODEL_PROGRAM_ATTN_MLP. */
  double decode_invoke_seconds[TM_MODEL_NUM_PROGRAM_KINDS];
  uint64_t decode_invokes;
  /* From TM_MODEL_STATS_SIZE_V4: what the last tm_generate(_batch)'s decode steps asked of the
   * model's device, summed over the steps (tm_target_get_device_counters' figures, without
   * its struct_size; all zero on the CPU): divide by decode_tokens for a token's cost. */
  uint64_t decode_graph_launches;
  uint64_t decode_kernel_launches;
  uint64_t decode_host_syncs;
  uint64_t decode_allocations;
  uint64_t decode_bytes_to_device;
  uint64_t decode_bytes_from_device;
} tm_model_stats;

/* Fills the first stats->struct_size bytes of *stats (set struct_size first; any size from
 * TM_MODEL_STATS_SIZE_V1 up is accepted; a newer caller's extra fields are left as they
 * were).
 * Errors: TM_ERROR_INVALID_ARGUMENT, TM_ERROR_BUSY. */
TM_API tm_status tm_model_get_stats(tm_model *model, tm_model_stats *stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TINYMLIR_GPT2_H */
