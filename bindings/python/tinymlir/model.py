"""tinymlir.Model: the GPT-2 model API of the library (tm_model_*, tm_generate).

    model = tinymlir.Model.load("models/kjv-tiny")
    ids = model.generate("In the beginning", max_new_tokens=20)
    print(model.detokenize(ids))
    for token in model.generate("And God said", stream=True):
        print(model.detokenize([token]), end="", flush=True)

A model runs one computation at a time (it owns one KV cache). The library refuses, with
BusyError, a logits(), generate() or stats while another runs on the same model: on another
thread, from a generate() callback, or while a stream is open (a stream keeps its
generation running until it is exhausted or closed). Tokenizing and detokenizing are always
allowed. Use one model per thread; models may share a context.
"""
import collections
import queue
import threading

import numpy as np

from . import capi
from ._args import flag_arg, index_arg, real_arg
from ._handles import Target, _Handle, c_path, default_context
from ._interrupt import call_interruptibly

ModelInfo = collections.namedtuple("ModelInfo", "vocab_size n_ctx n_layer n_embd")

# How each generate() option is checked: integers by operator.index (never a truncated
# float or a parsed str), real numbers for the float options, flags as bool (or 0/1).
_GENERATE_OPTIONS = {
    "max_new_tokens": index_arg, "temperature": real_arg, "top_k": index_arg,
    "top_p": real_arg, "seed": index_arg, "use_kv_cache": flag_arg, "stop_at_eos": flag_arg,
}


class Model(_Handle):
    """A loaded GPT-2 checkpoint (tm_model). Use Model.load(dir)."""

    _free = staticmethod(capi.tm_model_destroy)
    _kind = "model"
    _elsewhere = "Model.load() its directory again there"

    @classmethod
    def load(cls, directory, target="cpu", context=None, weights=None):
        """Loads config.json, model.safetensors and (if present) vocab.json + merges.txt
        from `directory` (str, bytes or os.PathLike). Raises LoadError for missing or
        malformed files. The model keeps its own reference to the context (default: the
        process-wide one), which may be closed first. `weights`: the dtype the weight
        matrices are held in, "f32", "f16", "bf16" or "q8_0" (8-bit blocks quantized at
        load, CPU only) (default None: as the checkpoint stores them)."""
        directory = c_path(directory, "directory")
        context = context if context is not None else default_context()
        options = capi.tm_model_options()
        capi.tm_model_options_init(options)
        options.target = int(Target.of(target))
        kinds = {None: 0, "f32": capi.TM_F32, "f16": capi.TM_F16, "bf16": capi.TM_BF16,
                 "q8_0": capi.TM_Q8_0}
        if weights not in kinds:
            raise ValueError(f"weights must be None, 'f32', 'f16', 'bf16' or 'q8_0', not {weights!r}")
        options.weights = kinds[weights]
        def call():
            with context._using() as ctx:
                return cls(capi.tm_model_load(ctx, directory, options))
        return call_interruptibly(call)

    @property
    def info(self):
        return ModelInfo(*capi.tm_model_info(self._live_ptr()))

    @property
    def stats(self):
        """tm_model_get_stats as a dict (programs compiled/cached/read from disk, seconds,
        tokens)."""
        with self._using() as ptr:
            s = capi.tm_model_get_stats(ptr)
        return {name: getattr(s, name) for name in (
            "programs_compiled", "programs_cached", "compile_seconds", "load_seconds",
            "prefill_seconds", "decode_seconds", "decode_tokens", "programs_from_disk")}

    def tokenize(self, text):
        """Token ids of a str (UTF-8) or bytes-like object (bytes, bytearray, memoryview)."""
        return capi.tm_tokenize(self._live_ptr(), _text(text))

    def detokenize(self, ids, errors="replace"):
        """The text of token ids. A piece may end inside a UTF-8 character; such bytes are
        decoded with `errors` (see detokenize_bytes for the raw bytes)."""
        return self.detokenize_bytes(ids).decode("utf-8", errors)

    def detokenize_bytes(self, ids):
        return capi.tm_detokenize(self._live_ptr(), _ids(ids))

    def logits(self, ids):
        """The vocab_size logits (float32) of the last position, recomputing all of ids."""
        out = np.empty(self.info.vocab_size, np.float32)
        ids = _ids(ids)

        def call():
            with self._using() as ptr:
                capi.tm_model_logits(ptr, ids, out)
        call_interruptibly(call)
        return out

    def generate(self, prompt, max_new_tokens=None, temperature=None, top_k=None, top_p=None,
                 seed=None, use_kv_cache=None, stop_at_eos=None, stream=False, callback=None):
        """Generates tokens after `prompt`: text (a str or bytes-like object, tokenized) or
        token ids (a sequence or 1-D array of ints).

        Options left as None take the library's defaults (32 tokens, greedy, KV cache on,
        no stop at EOS). Returns the list of generated ids; with stream=True, returns an
        iterator that yields each id as soon as it is chosen. callback(token), if given, is
        called for each token; a true result stops the generation after that token (None or
        False goes on), and an exception it raises stops the generation and is re-raised
        here."""
        ids = self.tokenize(prompt) if _is_text(prompt) else _ids(prompt)
        options = capi.tm_generate_options()
        capi.tm_generate_options_init(options)
        for name, value in (("max_new_tokens", max_new_tokens), ("temperature", temperature),
                            ("top_k", top_k), ("top_p", top_p), ("seed", seed),
                            ("use_kv_cache", use_kv_cache), ("stop_at_eos", stop_at_eos)):
            if value is not None:
                value = _GENERATE_OPTIONS[name](value, name)
                try:
                    setattr(options, name, value)
                except OverflowError:   # SWIG's message names only its setter
                    raise OverflowError(f"{name}={value!r} is outside the range of "
                                        "tm_generate_options." + name) from None
        if stream:
            return self._stream(ids, options, callback)
        if threading.current_thread() is not threading.main_thread():
            with self._using() as ptr:
                return capi.tm_generate(ptr, ids, options, callback)
        # From the main thread: interruptible (see _interrupt); an interrupted generation
        # stops after its current token.
        interrupted = threading.Event()

        def on_token(token):
            stop = callback is not None and callback(token)
            return bool(stop) or interrupted.is_set()

        def call():
            with self._using() as ptr:
                return capi.tm_generate(ptr, ids, options, on_token)
        return call_interruptibly(call, stop=interrupted.set)

    def _stream(self, ids, options, callback):
        """A generator over tm_generate's callback. The C call runs in a worker thread (with
        the GIL released); its callback hands each token over and waits until the consumer
        asks for the next one, so the generation advances with the loop and the model stays
        busy (BusyError for other calls) until the stream is exhausted or closed. Closing it
        early makes the callback ask the library to stop."""
        tokens = queue.Queue()
        resume = threading.Semaphore(0)
        closing = threading.Event()
        done = object()

        def on_token(token):
            stop = callback is not None and callback(token)
            tokens.put(token)
            resume.acquire()
            return bool(stop) or closing.is_set()

        def work():
            try:
                with self._using() as ptr:
                    capi.tm_generate(ptr, ids, options, on_token)
                tokens.put((done, None))
            except BaseException as e:  # re-raised in the consumer's thread
                tokens.put((done, e))

        worker = threading.Thread(target=work, name="tinymlir-generate", daemon=True)
        worker.start()
        try:
            while True:
                item = tokens.get()
                if isinstance(item, tuple) and item[0] is done:
                    if item[1] is not None:
                        raise item[1]
                    return
                yield item
                resume.release()
        finally:
            closing.set()
            resume.release()   # wakes a callback waiting for the consumer
            worker.join()

    def __repr__(self):
        if self.closed:
            return "<tinymlir.Model closed>"
        return "<tinymlir.Model vocab_size={} n_ctx={} n_layer={} n_embd={}>".format(*self.info)


def _is_text(prompt):
    """Whether a prompt is text: a str or a bytes-like object. A NumPy array exposes a
    buffer too, but it holds ids, as does any other sequence."""
    return isinstance(prompt, (str, bytes, bytearray, memoryview))


def _text(text):
    """Text for tm_tokenize, which takes str or bytes: bytearray and byte memoryviews are
    copied to bytes."""
    if isinstance(text, (str, bytes)):
        return text
    if isinstance(text, bytearray):
        return bytes(text)
    if isinstance(text, memoryview) and text.format in ("B", "b", "c"):
        return text.tobytes()
    raise TypeError(f"text must be a str or a bytes-like object (bytes, bytearray, a memoryview "
                    f"of bytes), not {type(text).__name__}"
                    + (f" of format {text.format!r}" if isinstance(text, memoryview) else ""))


def _ids(ids):
    """Token ids as a 1-D int32 array; values outside int32 raise OverflowError rather than
    wrap around."""
    arr = np.asarray(ids)
    if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
        raise TypeError(f"token ids must be a 1-D sequence of ints, got {arr.dtype} with "
                        f"shape {arr.shape}")
    if arr.size and (arr.min() < np.iinfo(np.int32).min or arr.max() > np.iinfo(np.int32).max):
        raise OverflowError("token ids must fit in int32")
    return np.ascontiguousarray(arr, dtype=np.int32)
