//! GPT-2 models: loading a Hugging Face checkpoint, tokenizing, logits and generation.

use std::any::Any;
use std::ffi::{c_int, c_void, CString};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::ptr;

use tinymlir_sys as sys;

use crate::context::Context;
use crate::error::{check, Error, ErrorKind, Result};
use crate::program::Target;
use crate::tensor::DType;

/// A loaded GPT-2 model. It compiles its programs through the context's cache and keeps
/// its own reference to the context (`tm_context_retain`), so it does not borrow it: the
/// [`Context`] may be dropped first.
///
/// `Send + Sync`: the library guards the model itself. A model runs one computation at a
/// time (it owns one KV cache): [`Model::logits`], [`Model::score`], [`Model::generate`] and
/// [`Model::stats`] called while another of them runs on the same model (on another thread, or from inside
/// a `generate` callback) fail at once with [`ErrorKind::Busy`] and change nothing; they
/// never block. Tokenizing, detokenizing and [`Model::info`] are always allowed. For
/// parallel generation use one model per thread (they may share a context), or wrap one in
/// a `Mutex` to wait rather than fail.
#[derive(Debug)]
pub struct Model {
    raw: *mut sys::tm_model,
}

// SAFETY: gpt2.h: tm_model_info, tm_tokenize and tm_detokenize "may run concurrently with
// anything"; tm_model_logits, tm_generate and tm_model_get_stats return TM_ERROR_BUSY when
// they would overlap ("they never block or corrupt the model"). Only tm_model_destroy must
// not run concurrently with another call, and Drop has the model to itself. Nothing in a
// model is tied to the thread that loaded it.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

/// Loading options; `Default` is the library's (`tm_model_options_init`): the CPU target,
/// the weight matrices held as the checkpoint stores them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelOptions {
    /// Where the model's programs run.
    pub target: Target,
    /// The dtype the weight matrices are held in: `Some(DType::F32 | F16 | BF16 | Q8_0)`
    /// (`Q8_0`: 8-bit blocks quantized at load, CPU only), or `None`
    /// for the checkpoint's own.
    pub weights: Option<DType>,
}

impl ModelOptions {
    fn raw(&self) -> sys::tm_model_options {
        let mut raw = std::mem::MaybeUninit::<sys::tm_model_options>::zeroed();
        // SAFETY: the init function fills every field of our layout, struct_size included.
        let mut raw = unsafe {
            sys::tm_model_options_init_size(raw.as_mut_ptr(), std::mem::size_of::<sys::tm_model_options>());
            raw.assume_init()
        };
        raw.target = self.target.raw();
        raw.weights = self.weights.map_or(0, DType::raw);
        raw
    }
}

/// A model's dimensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelInfo {
    /// Rows of the token embedding (GPT-2: 50257, or padded, e.g. to 50304).
    pub vocab_size: usize,
    /// The context: the most tokens a prompt and its continuation may hold.
    pub n_ctx: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Embedding width.
    pub n_embd: usize,
}

/// Generation settings; `Default` is the library's (`tm_generate_options_init`): 32 tokens,
/// greedy, KV cache on, no stop at end-of-text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Tokens to generate (fewer when the generation stops at end-of-text).
    pub max_new_tokens: usize,
    /// 0 = greedy; > 0 samples from softmax(logits / temperature).
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 = all.
    pub top_k: usize,
    /// Keep the smallest set with probability >= top_p; 1 = all.
    pub top_p: f32,
    /// The random seed of sampling: the same seed and options give the same tokens.
    pub seed: u64,
    /// false recomputes the whole prefix at every step.
    pub use_kv_cache: bool,
    /// Stop after emitting the end-of-text token.
    pub stop_at_eos: bool,
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        let raw = raw_generate_options();
        GenerateOptions {
            max_new_tokens: raw.max_new_tokens.max(0) as usize,
            temperature: raw.temperature,
            top_k: raw.top_k.max(0) as usize,
            top_p: raw.top_p,
            seed: raw.seed,
            use_kv_cache: raw.use_kv_cache != 0,
            stop_at_eos: raw.stop_at_eos != 0,
        }
    }
}

fn raw_generate_options() -> sys::tm_generate_options {
    let mut raw = std::mem::MaybeUninit::<sys::tm_generate_options>::zeroed();
    // SAFETY: the init function fills every field of our layout, struct_size included.
    unsafe {
        sys::tm_generate_options_init_size(raw.as_mut_ptr(), std::mem::size_of::<sys::tm_generate_options>());
        raw.assume_init()
    }
}

impl GenerateOptions {
    fn raw(&self) -> Result<sys::tm_generate_options> {
        let int = |n: usize, what: &str| {
            i32::try_from(n).map_err(|_| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "GenerateOptions::{what} is {n}, more than the largest the library takes ({})",
                        i32::MAX
                    ),
                )
            })
        };
        let mut raw = raw_generate_options();
        raw.max_new_tokens = int(self.max_new_tokens, "max_new_tokens")?;
        raw.temperature = self.temperature;
        raw.top_k = int(self.top_k, "top_k")?;
        raw.top_p = self.top_p;
        raw.seed = self.seed;
        raw.use_kv_cache = self.use_kv_cache as i32;
        raw.stop_at_eos = self.stop_at_eos as i32;
        Ok(raw)
    }
}

/// Work done so far (see [`Model::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelStats {
    /// Programs this model's lookups compiled.
    pub programs_compiled: u64,
    /// Programs this model's lookups found in the context's cache.
    pub programs_cached: u64,
    /// Wall time spent compiling (or reading compiled programs from disk).
    pub compile_seconds: f64,
    /// Wall time of loading the checkpoint.
    pub load_seconds: f64,
    /// Last generate: prompt processing.
    pub prefill_seconds: f64,
    /// Last generate: all decode steps.
    pub decode_seconds: f64,
    /// Last generate: tokens produced by decode steps.
    pub decode_tokens: u64,
    /// Programs read from the disk cache (not counted as compiled or cached).
    pub programs_from_disk: u64,
}

/// State shared with the C callback: the user's closure and a panic caught in it.
struct Callback<'a> {
    f: &'a mut dyn FnMut(i32) -> bool,
    panic: Option<Box<dyn Any + Send>>,
}

/// The C-ABI token callback. A true result stops the generation after that token (the C
/// callback's non-zero return). A panic must not unwind through the library's C++ frames,
/// so it is caught here, generation is stopped, and `generate` resumes it once the C call
/// has returned.
unsafe extern "C" fn token_trampoline(user: *mut c_void, token: i32) -> c_int {
    // SAFETY: `user` is the &mut Callback that `generate` passed, alive for the whole call.
    let state = unsafe { &mut *(user as *mut Callback<'_>) };
    match panic::catch_unwind(AssertUnwindSafe(|| (state.f)(token))) {
        Ok(stop) => stop as c_int,
        Err(payload) => {
            state.panic = Some(payload);
            1
        }
    }
}

/// State shared with the batch's C callback: the user's closure and a panic caught in it.
struct BatchCallback<'a> {
    f: &'a mut dyn FnMut(usize, i32) -> bool,
    panic: Option<Box<dyn Any + Send>>,
}

/// The batch's C-ABI token callback: as [`token_trampoline`], with the sequence's index. A
/// true result (or a panic, caught and resumed later) ends that sequence.
unsafe extern "C" fn batch_token_trampoline(user: *mut c_void, sequence: usize, token: i32) -> c_int {
    // SAFETY: `user` is the &mut BatchCallback that `generate_batch` passed, alive for the call.
    let state = unsafe { &mut *(user as *mut BatchCallback<'_>) };
    if state.panic.is_some() {
        return 1;
    }
    match panic::catch_unwind(AssertUnwindSafe(|| (state.f)(sequence, token))) {
        Ok(stop) => stop as c_int,
        Err(payload) => {
            state.panic = Some(payload);
            1
        }
    }
}

/// Runs a size query of the C API (snprintf-style: `f(buffer, capacity, &mut needed)` writes
/// min(capacity, needed) items and reports `needed`): first with capacity 0 for the size,
/// then with a buffer of exactly that size.
fn sized<T: Copy + Default>(
    mut f: impl FnMut(*mut T, usize, &mut usize) -> sys::tm_status,
) -> Result<Vec<T>> {
    let mut needed = 0usize;
    check(f(ptr::null_mut(), 0, &mut needed))?;
    let mut buf = vec![T::default(); needed];
    if needed > 0 {
        let mut written = 0usize;
        check(f(buf.as_mut_ptr(), buf.len(), &mut written))?;
        buf.truncate(written);
    }
    Ok(buf)
}

impl Model {
    /// Loads a GPT-2 checkpoint in Hugging Face layout from `dir` (config.json,
    /// model.safetensors, and vocab.json + merges.txt for the tokenizer) for the CPU.
    pub fn load(ctx: &Context, dir: impl AsRef<Path>) -> Result<Model> {
        Model::load_with(ctx, dir, &ModelOptions::default())
    }

    /// Loads a checkpoint with `options` (the target).
    pub fn load_with(ctx: &Context, dir: impl AsRef<Path>, options: &ModelOptions) -> Result<Model> {
        use std::os::unix::ffi::OsStrExt;
        let dir = dir.as_ref();
        let c_dir = CString::new(dir.as_os_str().as_bytes()).map_err(|_| {
            Error::new(ErrorKind::InvalidArgument, format!("model path {dir:?} contains a NUL byte"))
        })?;
        let raw_options = options.raw();
        let mut raw = ptr::null_mut();
        check(unsafe { sys::tm_model_load(ctx.as_raw(), c_dir.as_ptr(), &raw_options, &mut raw) })?;
        Ok(Model { raw })
    }

    /// The model's dimensions.
    pub fn info(&self) -> Result<ModelInfo> {
        let (mut vocab, mut n_ctx, mut n_layer, mut n_embd) = (0, 0, 0, 0);
        check(unsafe { sys::tm_model_info(self.raw, &mut vocab, &mut n_ctx, &mut n_layer, &mut n_embd) })?;
        Ok(ModelInfo {
            vocab_size: vocab as usize,
            n_ctx: n_ctx as usize,
            n_layer: n_layer as usize,
            n_embd: n_embd as usize,
        })
    }

    /// Encodes text into token ids (GPT-2 byte-level BPE).
    pub fn tokenize(&self, text: &str) -> Result<Vec<i32>> {
        sized(|ids, cap, n| unsafe {
            sys::tm_tokenize(self.raw, text.as_ptr().cast(), text.len(), ids, cap, n)
        })
    }

    /// Decodes ids into bytes. A piece may end inside a UTF-8 character, hence bytes; see
    /// [`Model::detokenize_lossy`] for text.
    pub fn detokenize(&self, ids: &[i32]) -> Result<Vec<u8>> {
        sized(|buf: *mut u8, cap, len| unsafe {
            sys::tm_detokenize(self.raw, ids.as_ptr(), ids.len(), buf.cast(), cap, len)
        })
    }

    /// Decodes ids into text, replacing invalid UTF-8 with U+FFFD.
    pub fn detokenize_lossy(&self, ids: &[i32]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.detokenize(ids)?).into_owned())
    }

    /// The logits of the last position after running the model on `ids` (no KV cache).
    /// Fails with [`ErrorKind::Busy`] while another computation runs on the model.
    pub fn logits(&self, ids: &[i32]) -> Result<Vec<f32>> {
        let mut logits = vec![0f32; self.info()?.vocab_size];
        check(unsafe {
            sys::tm_model_logits(self.raw, ids.as_ptr(), ids.len(), logits.as_mut_ptr(), logits.len())
        })?;
        Ok(logits)
    }

    /// The log-probability (natural log) of each of `ids[1..]` given the ids before it, from
    /// one forward pass over all positions: `ids.len() - 1` values. A text's perplexity is
    /// the exponential of their negated mean. Fails with [`ErrorKind::Busy`] while another
    /// computation runs on the model.
    pub fn score(&self, ids: &[i32]) -> Result<Vec<f64>> {
        let mut logprobs = vec![0f64; ids.len().saturating_sub(1)];
        check(unsafe {
            sys::tm_model_score(
                self.raw,
                ids.as_ptr(),
                ids.len(),
                logprobs.as_mut_ptr(),
                logprobs.len(),
                std::ptr::null_mut(),
                0,
            )
        })?;
        Ok(logprobs)
    }

    /// Generates up to `options.max_new_tokens` tokens after `prompt` and returns them.
    /// `callback` sees each token as soon as it is chosen and returns `true` to stop after
    /// that token (which is kept), `false` to go on. A panic in the callback stops
    /// generation and is resumed here once the library has returned.
    ///
    /// The model is busy for the whole call: from the callback (or another thread),
    /// `logits`, `generate` and `stats` on it fail with [`ErrorKind::Busy`], while
    /// `tokenize`, `detokenize` and `info` work.
    pub fn generate(
        &self,
        prompt: &[i32],
        options: &GenerateOptions,
        callback: Option<&mut dyn FnMut(i32) -> bool>,
    ) -> Result<Vec<i32>> {
        let raw_options = options.raw()?;
        // A generation never makes more than max_new_tokens, nor more than the context
        // holds: the buffer is the smaller (a max_new_tokens of i32::MAX asked for 8 GiB
        // before the library could say the context is too short).
        let n_ctx = self.info()?.n_ctx;
        let mut out = vec![0i32; options.max_new_tokens.min(n_ctx)];
        let mut n_out = 0usize;
        let mut state = callback.map(|f| Callback { f, panic: None });
        let (cb, user): (sys::tm_token_callback, *mut c_void) = match state.as_mut() {
            Some(state) => (Some(token_trampoline), (state as *mut Callback<'_>).cast()),
            None => (None, ptr::null_mut()),
        };
        let status = unsafe {
            sys::tm_generate(
                self.raw,
                prompt.as_ptr(),
                prompt.len(),
                &raw_options,
                cb,
                user,
                out.as_mut_ptr(),
                out.len(),
                &mut n_out,
            )
        };
        // Read the message before anything else can touch tm_last_error on this thread.
        let result = check(status);
        if let Some(payload) = state.and_then(|s| s.panic) {
            panic::resume_unwind(payload);
        }
        result?;
        out.truncate(n_out);
        Ok(out)
    }

    /// Generates for several prompts at once (`tm_generate_batch`, at most
    /// `TM_MAX_BATCH_SEQUENCES`, 16): each decode step reads the weights once for all of
    /// them. `options` has one entry per prompt (its tokens, sampling and seed). Returns
    /// each prompt's tokens, which are those [`Model::generate`] gives it alone with the same
    /// options. `callback(sequence, token)` sees each token with its prompt's index and
    /// returns `true` to end that sequence (the others go on); a panic in it is resumed here
    /// once the library has returned.
    pub fn generate_batch(
        &self,
        prompts: &[&[i32]],
        options: &[GenerateOptions],
        callback: Option<&mut dyn FnMut(usize, i32) -> bool>,
    ) -> Result<Vec<Vec<i32>>> {
        if options.len() != prompts.len() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("generate_batch: {} options for {} prompts (one each)", options.len(), prompts.len()),
            ));
        }
        let raw_options = options.iter().map(|o| o.raw()).collect::<Result<Vec<_>>>()?;
        let n_ctx = self.info()?.n_ctx;
        let mut outs: Vec<Vec<i32>> = options.iter().map(|o| vec![0i32; o.max_new_tokens.min(n_ctx)]).collect();
        let mut batch: Vec<sys::tm_batch_sequence> = prompts
            .iter()
            .zip(raw_options.iter())
            .zip(outs.iter_mut())
            .map(|((prompt, raw), out)| sys::tm_batch_sequence {
                prompt: prompt.as_ptr(),
                n_prompt: prompt.len(),
                options: raw,
                out_ids: out.as_mut_ptr(),
                capacity: out.len(),
                n_out: 0,
            })
            .collect();
        let mut state = callback.map(|f| BatchCallback { f, panic: None });
        let (cb, user): (sys::tm_batch_token_callback, *mut c_void) = match state.as_mut() {
            Some(state) => (Some(batch_token_trampoline), (state as *mut BatchCallback<'_>).cast()),
            None => (None, ptr::null_mut()),
        };
        let status = unsafe { sys::tm_generate_batch(self.raw, batch.as_mut_ptr(), batch.len(), cb, user) };
        let result = check(status);
        if let Some(payload) = state.and_then(|s| s.panic) {
            panic::resume_unwind(payload);
        }
        result?;
        let made: Vec<usize> = batch.iter().map(|b| b.n_out).collect();
        for (out, n) in outs.iter_mut().zip(made) {
            out.truncate(n);
        }
        Ok(outs)
    }

    /// Programs compiled and found in the cache, and time spent so far. Fails with
    /// [`ErrorKind::Busy`] while another computation runs on the model.
    pub fn stats(&self) -> Result<ModelStats> {
        let mut raw: sys::tm_model_stats = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<sys::tm_model_stats>() as u32;
        check(unsafe { sys::tm_model_get_stats(self.raw, &mut raw) })?;
        Ok(ModelStats {
            programs_compiled: raw.programs_compiled,
            programs_cached: raw.programs_cached,
            compile_seconds: raw.compile_seconds,
            load_seconds: raw.load_seconds,
            prefill_seconds: raw.prefill_seconds,
            decode_seconds: raw.decode_seconds,
            decode_tokens: raw.decode_tokens,
            programs_from_disk: raw.programs_from_disk,
        })
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // Drops the model's reference to its context too.
        unsafe { sys::tm_model_destroy(self.raw) }
    }
}
