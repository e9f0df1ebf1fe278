/*
 * tinymlir.h — the stable C API of tinymlir, a small tensor compiler on MLIR/LLVM.
 *
 * A program is traced as tensor operations (tm_trace_begin, tm_op_*, tm_trace_end),
 * compiled (tm_compile) and invoked on caller-owned buffers (tm_invoke).
 *
 * Conventions (the same for every function below):
 * - Every fallible function returns a tm_status; TM_OK (0) means success. On failure,
 *   tm_last_error() returns a message for the calling thread that names what was wrong.
 *   Output parameters are written only on success.
 * - The caller owns every tensor buffer (inputs and outputs). The library never frees,
 *   keeps or returns pointers into them.
 * - The library owns contexts, traces and programs. Each has one create and one
 *   destroy/release function, and every destroy/release accepts NULL.
 * - Strings the library hands to the caller to keep are released with tm_free().
 * - Nothing aborts the process on bad input, and nothing is printed to stderr.
 *
 * Thread safety: tm_context is thread-safe (compiles from several threads may share it).
 * tm_program is immutable after compilation: tm_invoke may run concurrently on the same
 * program from several threads. A tm_trace must be used by one thread at a time.
 * tm_last_error is per thread.
 */
#ifndef TINYMLIR_TINYMLIR_H
#define TINYMLIR_TINYMLIR_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(TINYMLIR_BUILDING_LIBRARY)
#    define TM_API __declspec(dllexport)
#  else
#    define TM_API __declspec(dllimport)
#  endif
#else
#  if defined(TINYMLIR_BUILDING_LIBRARY)
#    define TM_API __attribute__((visibility("default")))
#  else
#    define TM_API
#  endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version. Bumped whenever a struct layout or a function signature changes.
 * A binding compares tm_api_version() (the library it loaded) with this macro
 * (the header it was built against) and refuses to run on a mismatch. */
#define TM_API_VERSION 1u
#define TM_VERSION_STRING "0.1.0"

/* Largest tensor rank the API accepts. */
#define TM_MAX_RANK 8

/* ---- Basic types (enums are append-only; values are fixed forever) ---------------- */

typedef enum tm_status {
  TM_OK = 0,
  TM_ERROR_INVALID_ARGUMENT = 1, /* null pointer, bad count, use after end, ... */
  TM_ERROR_SHAPE = 2,            /* shapes do not agree (op or invoke) */
  TM_ERROR_DTYPE = 3,            /* element types do not agree or are unsupported */
  TM_ERROR_OUT_OF_RANGE = 4,     /* an index (axis, gather index) outside its range */
  TM_ERROR_COMPILE = 5,          /* MLIR/LLVM rejected the program; message has details */
  TM_ERROR_RUNTIME = 6,          /* failure while running compiled code */
  TM_ERROR_UNSUPPORTED = 7,      /* valid request this build cannot serve */
  TM_ERROR_IO = 8,               /* file missing, unreadable or malformed */
  TM_ERROR_OUT_OF_MEMORY = 9
} tm_status;

typedef enum tm_dtype {
  TM_F32 = 1,
  TM_F64 = 2,
  TM_I32 = 3,
  TM_I64 = 4,
  TM_BOOL = 5 /* one byte per element, 0 or 1 */
} tm_dtype;

typedef enum tm_target { TM_TARGET_CPU = 0, TM_TARGET_GPU = 1 } tm_target;

/* The stages of compilation whose text a program keeps (see tm_program_ir). */
typedef enum tm_stage {
  TM_STAGE_TRACED = 0,     /* the module as built from the trace, before any pass */
  TM_STAGE_OPTIMIZED = 1,  /* after canonicalize, cse and elementwise fusion */
  TM_STAGE_BUFFERIZED = 2, /* after one-shot bufferization and deallocation */
  TM_STAGE_LOWERED = 3,    /* after the target step (BLAS rewrite) and LLVM lowering */
  TM_STAGE_LLVM_IR = 4,    /* the LLVM IR module handed to the JIT */
  TM_STAGE_ASSEMBLY = 5    /* native assembly (CPU) or PTX (GPU) */
} tm_stage;

/* A view of a caller-owned tensor. `shape` has `rank` entries (NULL allowed when
 * rank is 0). `strides` counts elements, not bytes; NULL means C-contiguous. */
typedef struct tm_tensor {
  void *data;
  tm_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  const int64_t *strides;
} tm_tensor;

/* A value inside a trace: an index into the trace's values. */
typedef uint32_t tm_value;

typedef struct tm_context tm_context;
typedef struct tm_trace tm_trace;
typedef struct tm_program tm_program;

/* ---- Errors, versions, memory ------------------------------------------------------ */

/* The message describing the last failure on the calling thread ("" if none yet).
 * Successful calls leave it unchanged. The pointer stays valid until the next failing
 * tinymlir call on this thread; copy it to keep it. */
TM_API const char *tm_last_error(void);

/* A static, human-readable name for a status ("TM_ERROR_SHAPE", ...). Never NULL. */
TM_API const char *tm_status_string(tm_status status);

/* The library's version string, e.g. "0.1.0". Static; never NULL. */
TM_API const char *tm_version(void);

/* The ABI version of the loaded library; equals TM_API_VERSION of a matching header. */
TM_API uint32_t tm_api_version(void);

/* Frees memory the library allocated for the caller (IR text, ...). Accepts NULL. */
TM_API void tm_free(void *ptr);

/* ---- Context ----------------------------------------------------------------------- */

/* Creates a context: the owner of the compiled-program cache.
 * *out receives a context to release with tm_context_destroy.
 * Errors: TM_ERROR_INVALID_ARGUMENT (out is NULL), TM_ERROR_OUT_OF_MEMORY. */
TM_API tm_status tm_context_create(tm_context **out);

/* Destroys a context and drops its cache's references to programs. Programs the caller
 * still holds stay valid until released. Accepts NULL. */
TM_API void tm_context_destroy(tm_context *ctx);

/* Cache statistics: lookups that found a program, lookups that compiled one, and programs
 * currently cached. Any output pointer may be NULL.
 * Errors: TM_ERROR_INVALID_ARGUMENT (ctx is NULL). */
TM_API tm_status tm_cache_stats(tm_context *ctx, uint64_t *hits, uint64_t *misses,
                                uint64_t *entries);

/* ---- Tracing ------------------------------------------------------------------------ */

/* Begins a trace named `name` (NULL = "kernel"; used in messages only).
 * *out receives a trace to release with tm_trace_destroy. The trace does not keep ctx;
 * it may be compiled in any context. Errors: TM_ERROR_INVALID_ARGUMENT. */
TM_API tm_status tm_trace_begin(tm_context *ctx, const char *name, tm_trace **out);

/* Ends a trace: fixes its outputs, in order (n_outputs >= 1, each a value of this trace).
 * After this no op may be added; the trace can be compiled any number of times.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, bad count, unknown value, already ended). */
TM_API tm_status tm_trace_end(tm_trace *trace, const tm_value *outputs, int32_t n_outputs);

/* Destroys a trace. Programs compiled from it are independent of it. Accepts NULL. */
TM_API void tm_trace_destroy(tm_trace *trace);

/* The type of a value: dtype, rank, and `rank` dims written to `shape` (room for
 * TM_MAX_RANK). Any output pointer may be NULL.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null trace, unknown value). */
TM_API tm_status tm_value_type(tm_trace *trace, tm_value value, tm_dtype *dtype,
                               int32_t *rank, int64_t *shape);

/* Every tm_op_* function below records one operation (or a few, for composites) and
 * writes the new value to *out. Shapes and dtypes are checked at the call: a bad program
 * fails here, with a message naming the op and the shapes, never later at compile time.
 * Errors common to all: TM_ERROR_INVALID_ARGUMENT (null trace or out, unknown value,
 * trace already ended). */

/* Declares the next program input (inputs are numbered in declaration order).
 * Weights are inputs too: a program never bakes their values in.
 * Errors: TM_ERROR_DTYPE (unknown dtype), TM_ERROR_SHAPE (rank outside 0..8, negative dim). */
TM_API tm_status tm_op_input(tm_trace *trace, tm_dtype dtype, int32_t rank,
                             const int64_t *shape, tm_value *out);

/* A rank-0 constant that behaves like a Python scalar in promotion: combined with a
 * tensor of the same kind (float/int) it takes the tensor's dtype (f32 + 0.5 is f32).
 * Errors: TM_ERROR_DTYPE. */
TM_API tm_status tm_op_scalar(tm_trace *trace, tm_dtype dtype, double value, tm_value *out);

/* A constant tensor; the data is copied (strides honoured) and becomes part of the
 * program (and of its cache key). Errors: TM_ERROR_DTYPE, TM_ERROR_SHAPE. */
TM_API tm_status tm_op_constant(tm_trace *trace, const tm_tensor *data, tm_value *out);

/* Elementwise binary ops with NumPy broadcasting and dtype promotion
 * (f32 with f64 gives f64; integers with floats give the float; bool with numbers gives
 * the number). Division of integers gives f64, as NumPy's true division.
 * Errors: TM_ERROR_SHAPE (shapes do not broadcast). */
TM_API tm_status tm_op_add(tm_trace *trace, tm_value a, tm_value b, tm_value *out);
TM_API tm_status tm_op_sub(tm_trace *trace, tm_value a, tm_value b, tm_value *out);
TM_API tm_status tm_op_mul(tm_trace *trace, tm_value a, tm_value b, tm_value *out);
TM_API tm_status tm_op_div(tm_trace *trace, tm_value a, tm_value b, tm_value *out);
TM_API tm_status tm_op_pow(tm_trace *trace, tm_value a, tm_value b, tm_value *out);
/* maximum/minimum propagate NaN, as NumPy's. */
TM_API tm_status tm_op_maximum(tm_trace *trace, tm_value a, tm_value b, tm_value *out);
TM_API tm_status tm_op_minimum(tm_trace *trace, tm_value a, tm_value b, tm_value *out);

/* Comparisons; the result dtype is TM_BOOL. Errors: TM_ERROR_SHAPE. */
TM_API tm_status tm_op_less(tm_trace *trace, tm_value a, tm_value b, tm_value *out);
TM_API tm_status tm_op_greater(tm_trace *trace, tm_value a, tm_value b, tm_value *out);
TM_API tm_status tm_op_equal(tm_trace *trace, tm_value a, tm_value b, tm_value *out);

/* where(cond, a, b): a where cond is true, else b; all three broadcast together; the
 * result dtype is the promotion of a and b. Errors: TM_ERROR_SHAPE,
 * TM_ERROR_DTYPE (cond is not TM_BOOL). */
TM_API tm_status tm_op_where(tm_trace *trace, tm_value cond, tm_value a, tm_value b,
                             tm_value *out);

/* Elementwise unary ops. Transcendental ops on integers compute in f64 (as NumPy).
 * Errors: TM_ERROR_DTYPE (a bool operand). */
TM_API tm_status tm_op_neg(tm_trace *trace, tm_value x, tm_value *out);
TM_API tm_status tm_op_exp(tm_trace *trace, tm_value x, tm_value *out);
TM_API tm_status tm_op_log(tm_trace *trace, tm_value x, tm_value *out);
TM_API tm_status tm_op_tanh(tm_trace *trace, tm_value x, tm_value *out);
TM_API tm_status tm_op_sqrt(tm_trace *trace, tm_value x, tm_value *out);
TM_API tm_status tm_op_rsqrt(tm_trace *trace, tm_value x, tm_value *out);
TM_API tm_status tm_op_erf(tm_trace *trace, tm_value x, tm_value *out);
TM_API tm_status tm_op_abs(tm_trace *trace, tm_value x, tm_value *out);

/* Matrix product: (m,k)@(k,n) -> (m,n); (b,m,k)@(b,k,n) -> (b,m,n); any leading batch
 * dims equal on both sides (b1,..,m,k)@(b1,..,k,n); and (..,m,k)@(k,n), which folds the
 * leading dims into m. Operands are promoted to a common float or int dtype.
 * Errors: TM_ERROR_SHAPE (inner dims or batch dims differ, rank < 2), TM_ERROR_DTYPE (bool). */
TM_API tm_status tm_op_matmul(tm_trace *trace, tm_value a, tm_value b, tm_value *out);

/* Reductions over one axis (negative counts from the end); keepdims != 0 keeps the axis
 * with size 1. mean and var (population variance, ddof 0) compute in float.
 * Errors: TM_ERROR_OUT_OF_RANGE (axis), TM_ERROR_DTYPE (bool). */
TM_API tm_status tm_op_reduce_sum(tm_trace *trace, tm_value x, int32_t axis, int32_t keepdims,
                                  tm_value *out);
TM_API tm_status tm_op_reduce_max(tm_trace *trace, tm_value x, int32_t axis, int32_t keepdims,
                                  tm_value *out);
TM_API tm_status tm_op_reduce_mean(tm_trace *trace, tm_value x, int32_t axis,
                                   int32_t keepdims, tm_value *out);
TM_API tm_status tm_op_reduce_var(tm_trace *trace, tm_value x, int32_t axis, int32_t keepdims,
                                  tm_value *out);

/* Reshape to `shape` (rank entries; one entry may be -1 and is inferred).
 * Errors: TM_ERROR_SHAPE (element counts differ, several -1, negative dims). */
TM_API tm_status tm_op_reshape(tm_trace *trace, tm_value x, int32_t rank, const int64_t *shape,
                               tm_value *out);

/* Transpose by `perm` (rank entries, a permutation; NULL reverses the axes).
 * Errors: TM_ERROR_OUT_OF_RANGE (not a permutation). */
TM_API tm_status tm_op_transpose(tm_trace *trace, tm_value x, const int32_t *perm,
                                 tm_value *out);

/* Static slice x[begin:end] with unit steps; begin/end have rank entries each, with
 * 0 <= begin <= end <= dim. Errors: TM_ERROR_OUT_OF_RANGE. */
TM_API tm_status tm_op_slice(tm_trace *trace, tm_value x, const int64_t *begin,
                             const int64_t *end, tm_value *out);

/* Concatenates n >= 1 values along axis; other dims must agree; dtypes are promoted.
 * Errors: TM_ERROR_SHAPE, TM_ERROR_OUT_OF_RANGE (axis). */
TM_API tm_status tm_op_concat(tm_trace *trace, const tm_value *xs, int32_t n, int32_t axis,
                              tm_value *out);

/* Rows of a table: out[i..., :] = table[indices[i...], :]. indices must be TM_I32 or
 * TM_I64. Indices that are program inputs are checked against the table's row count by
 * tm_invoke before native code runs (TM_ERROR_OUT_OF_RANGE); computed indices are
 * clamped to the table inside the kernel, so no read leaves the table.
 * Errors: TM_ERROR_DTYPE (float or bool indices), TM_ERROR_SHAPE (table rank 0). */
TM_API tm_status tm_op_gather(tm_trace *trace, tm_value table, tm_value indices,
                              tm_value *out);

/* Converts x to dtype (floats to ints truncate toward zero; to bool is "!= 0").
 * Errors: TM_ERROR_DTYPE. */
TM_API tm_status tm_op_cast(tm_trace *trace, tm_value x, tm_dtype dtype, tm_value *out);

/* Composites, expanded into the primitives above so that fusion sees them. */

/* Numerically stable softmax along axis: exp(x - max) / sum. Rows of -inf give 0 where
 * finite entries exist. Errors: TM_ERROR_OUT_OF_RANGE (axis), TM_ERROR_DTYPE (not float). */
TM_API tm_status tm_op_softmax(tm_trace *trace, tm_value x, int32_t axis, tm_value *out);

/* Layer normalisation over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta,
 * gamma and beta broadcast against x. Errors: TM_ERROR_SHAPE, TM_ERROR_DTYPE. */
TM_API tm_status tm_op_layer_norm(tm_trace *trace, tm_value x, tm_value gamma, tm_value beta,
                                  double eps, tm_value *out);

/* GELU, tanh approximation (GPT-2's gelu_new):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Errors: TM_ERROR_DTYPE. */
TM_API tm_status tm_op_gelu_tanh(tm_trace *trace, tm_value x, tm_value *out);

/* A (rows, cols) additive mask of dtype (a float type): 0 where col <= row + offset,
 * the dtype's lowest finite value elsewhere (finite, so a fully masked row stays finite).
 * Errors: TM_ERROR_SHAPE (negative size), TM_ERROR_DTYPE (not float). */
TM_API tm_status tm_op_causal_mask(tm_trace *trace, int64_t rows, int64_t cols, int64_t offset,
                                   tm_dtype dtype, tm_value *out);

/* ---- Compilation -------------------------------------------------------------------- */

typedef struct tm_compile_options {
  uint32_t struct_size; /* sizeof(tm_compile_options); set by tm_compile_options_init */
  tm_target target;     /* TM_TARGET_CPU (default) */
  int32_t optimize;     /* run canonicalize/cse/elementwise fusion (default 1) */
  int32_t use_blas;     /* matmuls become cblas_sgemm/dgemm calls (default 1) */
  int32_t opt_level;    /* LLVM optimisation level 0..3 (default 3) */
} tm_compile_options;

/* Fills options with the defaults: CPU, optimize on, BLAS on, opt level 3. */
TM_API void tm_compile_options_init(tm_compile_options *options);

/* Compiles an ended trace, or finds the program compiled earlier for an equal trace
 * (same ops, shapes, dtypes and constants) and equal options in ctx's cache.
 * options may be NULL (defaults). *out receives a reference to release with
 * tm_program_release; the cache keeps its own. The program does not refer to the trace.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, trace not ended, struct_size mismatch, bad
 * option), TM_ERROR_UNSUPPORTED (target not available in this build),
 * TM_ERROR_COMPILE (MLIR/LLVM failure; the message carries the diagnostics). */
TM_API tm_status tm_compile(tm_context *ctx, const tm_trace *trace,
                            const tm_compile_options *options, tm_program **out);

/* Adds a reference to a program. Accepts NULL. */
TM_API void tm_program_retain(tm_program *program);

/* Drops a reference; the program (its MLIR context, module and JIT engine) is freed with
 * the last one. Accepts NULL. */
TM_API void tm_program_release(tm_program *program);

/* Number of inputs/outputs of a program (0 if program is NULL). */
TM_API int32_t tm_program_num_inputs(const tm_program *program);
TM_API int32_t tm_program_num_outputs(const tm_program *program);

/* The type input/output i is specialised to: dtype, rank, and `rank` dims into shape
 * (room for TM_MAX_RANK). Any output pointer may be NULL.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null program), TM_ERROR_OUT_OF_RANGE (i). */
TM_API tm_status tm_program_input_type(const tm_program *program, int32_t i, tm_dtype *dtype,
                                       int32_t *rank, int64_t *shape);
TM_API tm_status tm_program_output_type(const tm_program *program, int32_t i, tm_dtype *dtype,
                                        int32_t *rank, int64_t *shape);

/* The text of one compilation stage, NUL-terminated, in *text: release with tm_free.
 * Errors: TM_ERROR_INVALID_ARGUMENT, TM_ERROR_UNSUPPORTED (stage not produced by this
 * target). */
TM_API tm_status tm_program_ir(tm_program *program, tm_stage stage, char **text);

/* Runs a program: reads inputs (never writes them) and writes outputs, all owned by the
 * caller. Every tensor must match the program's specialisation (dtype, rank, shape).
 * Strided inputs are made contiguous; inputs that overlap another input or an output are
 * copied first, so aliasing gives the same answer as distinct buffers. Strided outputs are
 * written through a temporary. Gather indices that are inputs are range-checked first.
 * Nothing is retained after the call.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, counts, null data, outputs overlapping each
 * other), TM_ERROR_DTYPE, TM_ERROR_SHAPE (no native code ran),
 * TM_ERROR_OUT_OF_RANGE (a gather index outside its table; no native code ran),
 * TM_ERROR_OUT_OF_MEMORY. */
TM_API tm_status tm_invoke(tm_program *program, const tm_tensor *inputs, int32_t n_inputs,
                           const tm_tensor *outputs, int32_t n_outputs);

/* ---- GPT-2 models --------------------------------------------------------------------- */

typedef struct tm_model tm_model;

/* Loads a GPT-2 checkpoint in Hugging Face layout from the folder `dir`: config.json and
 * model.safetensors (F32, F16 or BF16 weights, converted to F32 once; keys with or without
 * the "transformer." prefix), plus vocab.json and merges.txt when present (without them
 * the model works on token ids only). Programs are compiled through ctx's cache as they are
 * first needed; ctx must outlive the model. *out receives a model to release with
 * tm_model_destroy. Errors: TM_ERROR_INVALID_ARGUMENT (null), TM_ERROR_IO (missing or
 * malformed file, wrong tensor name/shape/dtype; the message names it), TM_ERROR_UNSUPPORTED
 * (a configuration this implementation does not run, e.g. another activation or target). */
TM_API tm_status tm_model_load(tm_context *ctx, const char *dir, tm_target target,
                               tm_model **out);

/* Frees a model (weights, tokenizer, KV cache, its references to programs). Accepts NULL. */
TM_API void tm_model_destroy(tm_model *model);

/* The model's dimensions; any output pointer may be NULL.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null model). */
TM_API tm_status tm_model_info(const tm_model *model, int32_t *vocab_size, int32_t *n_ctx,
                               int32_t *n_layer, int32_t *n_embd);

/* Encodes `len` bytes of UTF-8 text into token ids (GPT-2 byte-level BPE). At most
 * `capacity` ids are written to `ids`; *n_ids receives the number of ids the text needs.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, invalid UTF-8, or capacity too small: *n_ids then
 * holds the size needed), TM_ERROR_UNSUPPORTED (the model has no tokenizer files). */
TM_API tm_status tm_tokenize(tm_model *model, const char *text, size_t len, int32_t *ids,
                             size_t capacity, size_t *n_ids);

/* Decodes ids into bytes (not NUL-terminated; a piece may end inside a UTF-8 character).
 * At most `capacity` bytes are written to `buf`; *len receives the number needed.
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, capacity too small: *len holds the size needed),
 * TM_ERROR_OUT_OF_RANGE (an id outside the vocabulary), TM_ERROR_UNSUPPORTED (no tokenizer). */
TM_API tm_status tm_detokenize(tm_model *model, const int32_t *ids, size_t n, char *buf,
                               size_t capacity, size_t *len);

/* Runs the model on ids[0..n) (full recompute, no cache) and writes the vocab_size logits
 * of the last position to `logits` (caller-owned).
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, n == 0), TM_ERROR_OUT_OF_RANGE (an id outside
 * the vocabulary, n > n_ctx), TM_ERROR_COMPILE. Not thread-safe per model. */
TM_API tm_status tm_model_logits(tm_model *model, const int32_t *ids, size_t n, float *logits);

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
} tm_generate_options;

/* Fills options with the defaults: 32 tokens, greedy, KV cache on, no stop at EOS. */
TM_API void tm_generate_options_init(tm_generate_options *options);

/* Called with each generated token as soon as it is chosen; a non-zero return stops the
 * generation after that token. */
typedef int (*tm_token_callback)(void *user, int32_t token);

/* Generates up to max_new_tokens tokens after prompt[0..n_prompt). Each new token is passed
 * to `callback` (may be NULL) and written to out_ids; out_ids may be NULL with capacity 0
 * when only the callback is wanted. *n_out receives the number generated. options may be
 * NULL (defaults).
 * Errors: TM_ERROR_INVALID_ARGUMENT (null, empty prompt, bad options, capacity smaller than
 * max_new_tokens: *n_out then holds the size needed), TM_ERROR_OUT_OF_RANGE (a prompt id
 * outside the vocabulary, prompt + new tokens beyond n_ctx), TM_ERROR_COMPILE.
 * Not thread-safe per model (it owns one KV cache); use one model per thread. */
TM_API tm_status tm_generate(tm_model *model, const int32_t *prompt, size_t n_prompt,
                             const tm_generate_options *options, tm_token_callback callback,
                             void *user, int32_t *out_ids, size_t capacity, size_t *n_out);

/* Statistics of the model's work so far (any pointer may be NULL): programs compiled and
 * found in the cache, and time spent compiling, in prefill and in decode steps. */
typedef struct tm_model_stats {
  uint32_t struct_size;
  uint64_t programs_compiled;
  uint64_t programs_cached;
  double compile_seconds;
  double load_seconds;
  double prefill_seconds;   /* last tm_generate: prompt processing */
  double decode_seconds;    /* last tm_generate: all decode steps */
  uint64_t decode_tokens;   /* last tm_generate: tokens produced by decode steps */
} tm_model_stats;

/* Fills *stats (set stats->struct_size = sizeof(tm_model_stats) first).
 * Errors: TM_ERROR_INVALID_ARGUMENT. */
TM_API tm_status tm_model_get_stats(const tm_model *model, tm_model_stats *stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TINYMLIR_TINYMLIR_H */
