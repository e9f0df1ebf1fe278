package tinymlir

/*
#include <stdint.h>
#include <stdlib.h>
#include <tinymlir/gpt2.h>

// goTokenCallback is exported by callback.go (an //export file may only declare C, hence
// the C side of the callback lives here).
extern int goTokenCallback(uintptr_t handle, int32_t token);

static int tmg_token_trampoline(void *user, int32_t token) {
  return goTokenCallback((uintptr_t)user, token);
}

extern int goBatchTokenCallback(uintptr_t handle, size_t sequence, int32_t token);

static int tmg_batch_token_trampoline(void *user, size_t sequence, int32_t token) {
  return goBatchTokenCallback((uintptr_t)user, sequence, token);
}

static tm_status tmg_generate_batch(tm_model *model, tm_batch_sequence *sequences, size_t n,
                                    uintptr_t handle) {
  return tm_generate_batch(model, sequences, n, handle ? tmg_batch_token_trampoline : NULL,
                           (void *)handle);
}

// The callback's user pointer carries a cgo.Handle, an integer: it becomes a void * only
// on the C side, so Go never passes a non-pointer disguised as a pointer.
static tm_status tmg_generate(tm_model *model, const int32_t *prompt, size_t n_prompt,
                              const tm_generate_options *options, uintptr_t handle,
                              int32_t *out_ids, size_t capacity, size_t *n_out) {
  return tm_generate(model, prompt, n_prompt, options, handle ? tmg_token_trampoline : NULL,
                     (void *)handle, out_ids, capacity, n_out);
}
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// Model is a loaded GPT-2 model. It keeps its own reference to the context it was loaded
// in, which may be closed first.
//
// A model is safe for concurrent use, but it runs one computation at a time (it owns one
// KV cache): Logits, Score, Generate and Stats called while another of them runs on the same
// model (in another goroutine, or from inside a Generate callback) fail at once with
// StatusBusy and change nothing. Tokenize, Detokenize and Info are always allowed. Use one
// model per goroutine for parallel generation; models may share a context.
type Model struct {
	// mu guards the fields; it is held only to start and finish calls, never during one.
	mu sync.Mutex
	c  *C.tm_model
	// calls counts the calls running on c. Close frees c at once, or, with calls running
	// (another goroutine, or a Generate callback closing its own model), when the last one
	// returns: never under a running call.
	calls   int
	closing bool
}

// ModelInfo is a model's dimensions.
type ModelInfo struct {
	VocabSize, NCtx, NLayer, NEmbd int
}

// ModelOptions are tm_model_options; DefaultModelOptions gives the library's defaults (the
// CPU target, the weight matrices held as the checkpoint stores them).
type ModelOptions struct {
	Target Target
	// Weights is the dtype the weight matrices are held in: F32, F16, BF16, Q8_0 (8-bit
	// blocks quantized at load, CPU only), or 0 for the
	// checkpoint's own.
	Weights DType
}

// DefaultModelOptions returns the library's defaults (tm_model_options_init).
func DefaultModelOptions() ModelOptions {
	var raw C.tm_model_options
	C.tm_model_options_init(&raw)
	return ModelOptions{Target: Target(raw.target), Weights: DType(raw.weights)}
}

func (o ModelOptions) raw() C.tm_model_options {
	var raw C.tm_model_options
	C.tm_model_options_init(&raw) // struct_size
	raw.target = C.tm_target(o.Target)
	raw.weights = C.tm_dtype(o.Weights)
	return raw
}

// LoadModel loads a GPT-2 checkpoint in Hugging Face layout from dir (config.json,
// model.safetensors, and vocab.json + merges.txt for the tokenizer); options nil = the
// defaults.
func LoadModel(ctx *Context, dir string, options *ModelOptions) (*Model, error) {
	opts := DefaultModelOptions()
	if options != nil {
		opts = *options
	}
	raw := opts.raw()
	cdir, err := cString("the model folder", dir)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cdir))
	m := &Model{}
	err = ctx.use(func(c *C.tm_context) error {
		return call(func() C.tm_status { return C.tm_model_load(c, cdir, &raw, &m.c) })
	})
	if err != nil {
		return nil, err
	}
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

// Close frees the model (weights, tokenizer, KV cache, its reference to the context): at
// once, or when the calls running on it have returned. Closing twice is fine.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	runtime.SetFinalizer(m, nil)
	m.closing = true
	m.destroyIfIdle()
	return nil
}

// destroyIfIdle frees c once the model is closing and no call runs on it; mu is held.
func (m *Model) destroyIfIdle() {
	if m.closing && m.calls == 0 && m.c != nil {
		C.tm_model_destroy(m.c)
		m.c = nil
	}
}

// use runs f with the C model. Calls are not serialised here (the library refuses
// overlapping work itself); this only keeps Close from freeing the model under f.
func (m *Model) use(f func(*C.tm_model) error) error {
	if m == nil {
		return newError(StatusInvalidArgument, "the model is nil")
	}
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return newError(StatusInvalidArgument, "the model is closed")
	}
	m.calls++
	c := m.c
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.calls--
		m.destroyIfIdle()
		m.mu.Unlock()
	}()
	return f(c)
}

// Info returns the model's dimensions.
func (m *Model) Info() (ModelInfo, error) {
	var vocab, nctx, nlayer, nembd C.int32_t
	err := m.use(func(c *C.tm_model) error {
		return call(func() C.tm_status { return C.tm_model_info(c, &vocab, &nctx, &nlayer, &nembd) })
	})
	return ModelInfo{int(vocab), int(nctx), int(nlayer), int(nembd)}, err
}

// sized runs a size query of the C API (snprintf-style: f writes min(capacity, needed)
// items and reports needed): first with capacity 0 for the size, then with a buffer of
// exactly that size.
func sized[T any](f func(buf *T, capacity C.size_t, needed *C.size_t) C.tm_status) ([]T, error) {
	var needed C.size_t
	if err := call(func() C.tm_status { return f(nil, 0, &needed) }); err != nil {
		return nil, err
	}
	buf := make([]T, needed)
	if needed == 0 {
		return buf, nil
	}
	var written C.size_t
	if err := call(func() C.tm_status { return f(&buf[0], needed, &written) }); err != nil {
		return nil, err
	}
	if written < needed {
		buf = buf[:written]
	}
	return buf, nil
}

// Tokenize encodes text into token ids (GPT-2 byte-level BPE).
func (m *Model) Tokenize(text string) ([]int32, error) {
	var ids []int32
	err := m.use(func(c *C.tm_model) (err error) {
		bytes := append([]byte(text), 0) // Go memory without pointers, read during the call
		ids, err = sized(func(buf *int32, capacity C.size_t, needed *C.size_t) C.tm_status {
			return C.tm_tokenize(c, (*C.char)(unsafe.Pointer(&bytes[0])), C.size_t(len(text)),
				(*C.int32_t)(buf), capacity, needed)
		})
		return err
	})
	return ids, err
}

// Detokenize decodes ids into bytes; a piece may end inside a UTF-8 character.
func (m *Model) Detokenize(ids []int32) ([]byte, error) {
	var text []byte
	err := m.use(func(c *C.tm_model) (err error) {
		ptr := (*C.int32_t)(nil)
		if len(ids) > 0 {
			ptr = (*C.int32_t)(unsafe.Pointer(&ids[0]))
		}
		text, err = sized(func(buf *byte, capacity C.size_t, needed *C.size_t) C.tm_status {
			return C.tm_detokenize(c, ptr, C.size_t(len(ids)), (*C.char)(unsafe.Pointer(buf)), capacity, needed)
		})
		return err
	})
	return text, err
}

// Logits runs the model on ids (no KV cache) and returns the last position's logits. It
// fails with StatusBusy while another computation runs on the model.
func (m *Model) Logits(ids []int32) ([]float32, error) {
	info, err := m.Info()
	if err != nil {
		return nil, err
	}
	logits := make([]float32, info.VocabSize)
	err = m.use(func(c *C.tm_model) error {
		ptr := (*C.int32_t)(nil)
		if len(ids) > 0 {
			ptr = (*C.int32_t)(unsafe.Pointer(&ids[0]))
		}
		return call(func() C.tm_status {
			return C.tm_model_logits(c, ptr, C.size_t(len(ids)), (*C.float)(unsafe.Pointer(&logits[0])),
				C.size_t(len(logits)))
		})
	})
	if err != nil {
		return nil, err
	}
	return logits, nil
}

// Score returns the log-probability (natural log) of each of ids[1:] given the ids before
// it, from one forward pass over all positions: len(ids) - 1 values. A text's perplexity is
// the exponential of their negated mean. It fails with StatusBusy while another computation
// runs on the model.
func (m *Model) Score(ids []int32) ([]float64, error) {
	logprobs := make([]float64, 0, len(ids))
	if len(ids) > 1 {
		logprobs = logprobs[:len(ids)-1]
	}
	err := m.use(func(c *C.tm_model) error {
		ptr := (*C.int32_t)(nil)
		if len(ids) > 0 {
			ptr = (*C.int32_t)(unsafe.Pointer(&ids[0]))
		}
		out := (*C.double)(nil)
		if len(logprobs) > 0 {
			out = (*C.double)(unsafe.Pointer(&logprobs[0]))
		}
		return call(func() C.tm_status {
			return C.tm_model_score(c, ptr, C.size_t(len(ids)), out, C.size_t(len(logprobs)), nil, 0)
		})
	})
	if err != nil {
		return nil, err
	}
	return logprobs, nil
}

// GenerateOptions are tm_generate_options; DefaultGenerateOptions gives the library's
// defaults (32 tokens, greedy, KV cache on, no stop at end-of-text).
type GenerateOptions struct {
	MaxNewTokens int
	Temperature  float32 // 0 = greedy; > 0 samples from softmax(logits / T)
	TopK         int     // keep the k most likely tokens; 0 = all
	TopP         float32 // keep the smallest set with probability >= p; 1 = all
	Seed         uint64
	UseKVCache   bool // false recomputes the whole prefix at every step
	StopAtEOS    bool // stop after emitting the end-of-text token
}

// DefaultGenerateOptions returns the library's defaults (tm_generate_options_init).
func DefaultGenerateOptions() GenerateOptions {
	var raw C.tm_generate_options
	C.tm_generate_options_init(&raw)
	return GenerateOptions{
		MaxNewTokens: int(raw.max_new_tokens),
		Temperature:  float32(raw.temperature),
		TopK:         int(raw.top_k),
		TopP:         float32(raw.top_p),
		Seed:         uint64(raw.seed),
		UseKVCache:   raw.use_kv_cache != 0,
		StopAtEOS:    raw.stop_at_eos != 0,
	}
}

func (o GenerateOptions) raw() (C.tm_generate_options, error) {
	var raw C.tm_generate_options
	C.tm_generate_options_init(&raw) // struct_size
	tokens, err := int32Arg("GenerateOptions.MaxNewTokens", o.MaxNewTokens)
	if err != nil {
		return raw, err
	}
	topK, err := int32Arg("GenerateOptions.TopK", o.TopK)
	if err != nil {
		return raw, err
	}
	raw.max_new_tokens = tokens
	raw.temperature = C.float(o.Temperature)
	raw.top_k = topK
	raw.top_p = C.float(o.TopP)
	raw.seed = C.uint64_t(o.Seed)
	raw.use_kv_cache = cbool(o.UseKVCache)
	raw.stop_at_eos = cbool(o.StopAtEOS)
	return raw, nil
}

// Generate generates up to options.MaxNewTokens tokens after prompt (options nil = the
// defaults) and returns them. callback (may be nil) sees each token as soon as it is
// chosen and returns true to stop after that token (which is kept), false to go on. It runs
// on a goroutine of its own. A panic in the callback stops generation and is raised again
// here once the library has returned; runtime.Goexit in it (t.FailNow) stops generation and
// ends the goroutine that called Generate, once the library has returned.
//
// The model is busy for the whole call: from the callback (or another goroutine), Logits,
// Generate and Stats on it fail with StatusBusy, while Tokenize, Detokenize and Info work.
func (m *Model) Generate(prompt []int32, options *GenerateOptions, callback func(token int32) bool) ([]int32, error) {
	opts := DefaultGenerateOptions()
	if options != nil {
		opts = *options
	}
	if opts.MaxNewTokens < 0 {
		return nil, newError(StatusInvalidArgument, "MaxNewTokens is negative (%d)", opts.MaxNewTokens)
	}
	raw, err := opts.raw()
	if err != nil {
		return nil, err
	}
	// A generation never makes more than MaxNewTokens, nor more than the context holds: the
	// capacity is the smaller (MaxNewTokens of 1<<31 allocated 8 GB before the library could
	// say the context is too short; of 1<<38, the Go runtime's fatal out of memory).
	info, err := m.Info()
	if err != nil {
		return nil, err
	}
	capacity := opts.MaxNewTokens
	if capacity > info.NCtx {
		capacity = info.NCtx
	}
	out := make([]int32, capacity+1) // never empty, so &out[0] exists
	var handle cgo.Handle
	var state *tokenCallback
	if callback != nil {
		state = &tokenCallback{f: callback}
		handle = cgo.NewHandle(state)
		defer handle.Delete()
	}
	var n C.size_t
	err = m.use(func(c *C.tm_model) error {
		var prompt0 *C.int32_t
		if len(prompt) > 0 {
			prompt0 = (*C.int32_t)(unsafe.Pointer(&prompt[0]))
		}
		return call(func() C.tm_status {
			return C.tmg_generate(c, prompt0, C.size_t(len(prompt)), &raw, C.uintptr_t(handle),
				(*C.int32_t)(unsafe.Pointer(&out[0])), C.size_t(capacity), &n)
		})
	})
	state.resume()
	if err != nil {
		return nil, err
	}
	if int(n) > capacity {
		n = C.size_t(capacity)
	}
	return out[:n], nil
}

// GenerateBatch generates for several prompts at once (tm_generate_batch, at most
// MaxBatchSequences): each decode step reads the weights once for all of them. options has
// one entry per prompt (its tokens, sampling and seed). It returns each prompt's tokens,
// which are those Generate gives it alone with the same options. callback (may be nil)
// sees each token with its prompt's index; true ends that sequence, the others go on.
func (m *Model) GenerateBatch(prompts [][]int32, options []GenerateOptions, callback func(sequence int, token int32) bool) ([][]int32, error) {
	if len(options) != len(prompts) {
		return nil, newError(StatusInvalidArgument, "GenerateBatch: %d options for %d prompts (one each)", len(options), len(prompts))
	}
	info, err := m.Info()
	if err != nil {
		return nil, err
	}
	n := len(prompts)
	// The sequences, their options, prompts and outputs in C memory: cgo lets C keep no Go
	// pointer inside memory it is passed.
	seqs := (*[1 << 20]C.tm_batch_sequence)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof(C.tm_batch_sequence{}))))[: n+1 : n+1]
	raws := (*[1 << 20]C.tm_generate_options)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof(C.tm_generate_options{}))))[: n+1 : n+1]
	var blocks []unsafe.Pointer
	defer func() {
		for _, b := range blocks {
			C.free(b)
		}
		C.free(unsafe.Pointer(&seqs[0]))
		C.free(unsafe.Pointer(&raws[0]))
	}()
	for i, prompt := range prompts {
		if options[i].MaxNewTokens < 0 {
			return nil, newError(StatusInvalidArgument, "GenerateBatch: prompt %d: MaxNewTokens is negative (%d)", i, options[i].MaxNewTokens)
		}
		if raws[i], err = options[i].raw(); err != nil {
			return nil, err
		}
		capacity := options[i].MaxNewTokens
		if capacity > info.NCtx {
			capacity = info.NCtx
		}
		ids := C.calloc(C.size_t(len(prompt)+1), 4)
		out := C.calloc(C.size_t(capacity+1), 4)
		blocks = append(blocks, ids, out)
		copy((*[1 << 28]int32)(ids)[:len(prompt):len(prompt)], prompt)
		seqs[i] = C.tm_batch_sequence{prompt: (*C.int32_t)(ids), n_prompt: C.size_t(len(prompt)),
			options: &raws[i], out_ids: (*C.int32_t)(out), capacity: C.size_t(capacity)}
	}
	var handle cgo.Handle
	var state *tokenCallback
	if callback != nil {
		state = &tokenCallback{batch: callback}
		handle = cgo.NewHandle(state)
		defer handle.Delete()
	}
	err = m.use(func(c *C.tm_model) error {
		return call(func() C.tm_status {
			return C.tmg_generate_batch(c, &seqs[0], C.size_t(n), C.uintptr_t(handle))
		})
	})
	state.resume()
	if err != nil {
		return nil, err
	}
	outs := make([][]int32, n)
	for i := range outs {
		made := int(seqs[i].n_out)
		if made > int(seqs[i].capacity) {
			made = int(seqs[i].capacity)
		}
		outs[i] = append([]int32(nil), (*[1 << 28]int32)(unsafe.Pointer(seqs[i].out_ids))[:made:made]...)
	}
	return outs, nil
}

// MaxBatchSequences is the most prompts one GenerateBatch decodes (TM_MAX_BATCH_SEQUENCES).
const MaxBatchSequences = C.TM_MAX_BATCH_SEQUENCES

// ModelStats is the model's work so far.
type ModelStats struct {
	ProgramsCompiled, ProgramsCached uint64
	CompileSeconds, LoadSeconds      float64
	PrefillSeconds, DecodeSeconds    float64 // last Generate
	DecodeTokens                     uint64  // last Generate: tokens from decode steps
	ProgramsFromDisk                 uint64  // read from the disk cache, not compiled
}

// Stats returns the model's statistics. It fails with StatusBusy while another
// computation runs on the model.
func (m *Model) Stats() (ModelStats, error) {
	var raw C.tm_model_stats
	raw.struct_size = C.uint32_t(unsafe.Sizeof(raw))
	err := m.use(func(c *C.tm_model) error {
		return call(func() C.tm_status { return C.tm_model_get_stats(c, &raw) })
	})
	return ModelStats{
		ProgramsCompiled: uint64(raw.programs_compiled),
		ProgramsCached:   uint64(raw.programs_cached),
		CompileSeconds:   float64(raw.compile_seconds),
		LoadSeconds:      float64(raw.load_seconds),
		PrefillSeconds:   float64(raw.prefill_seconds),
		DecodeSeconds:    float64(raw.decode_seconds),
		DecodeTokens:     uint64(raw.decode_tokens),
		ProgramsFromDisk: uint64(raw.programs_from_disk),
	}, err
}
