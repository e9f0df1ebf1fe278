"""tinymlir.Model: the GPT-2 model API of the library (tm_model_*, tm_generate).

    model = tinymlir.Model.load("models/kjv-tiny")
    ids = model.generate("In the beginning", max_new_tokens=20)
    print(model.detokenize(ids))
    for piece in model.generate("And God said", stream=True):
        print(piece, end="", flush=True)

A model runs one computation at a time (it owns one KV cache). The library refuses, with
BusyError, a logits(), score(), generate() or stats while another runs on the same model: on another
thread, from a generate() callback, or while a stream is open (a stream keeps its
generation running until it is exhausted or closed; the BusyError then says so).
Tokenizing and detokenizing are always allowed. Use one model per thread; models may share
a context.
"""
import contextlib
import os
import threading
import weakref
from typing import (Any, Callable, Dict, Iterator, List, Literal, NamedTuple, Optional,
                    Sequence, Union, overload)

import numpy as np

from . import capi
from ._args import flag_arg, index_arg, real_arg
from ._errors import BusyError
from ._handles import Context, Target, _Handle, c_path, default_context
from ._interrupt import call_interruptibly
from ._stream import Stream, busy_message



class ModelInfo(NamedTuple):
    """A model's dimensions (tm_model_info)."""

    vocab_size: int
    n_ctx: int
    n_layer: int
    n_embd: int


# A prompt: text (str or bytes-like), or token ids (a sequence or 1-D array of ints).
Prompt = Union[str, bytes, bytearray, memoryview, Sequence[int], np.ndarray]
TokenIds = Union[Sequence[int], np.ndarray]

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

    def __init__(self, ptr: Any):
        super().__init__(ptr)
        # Streams of this model that have started and not ended (for BusyError's message);
        # weak, so that an abandoned stream is still collected, and closed.
        self._open_streams: "weakref.WeakSet[Stream]" = weakref.WeakSet()

    @classmethod
    def load(cls, directory: Union[str, bytes, "os.PathLike[Any]"],
             target: Union[str, int] = "cpu", context: Optional[Context] = None,
             weights: Optional[str] = None) -> "Model":
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
    def info(self) -> ModelInfo:
        return ModelInfo(*capi.tm_model_info(self._live_ptr()))

    @property
    def stats(self) -> Dict[str, Union[int, float]]:
        """tm_model_get_stats as a dict (programs compiled/cached/read from disk, seconds,
        tokens)."""
        with self._calling() as ptr:
            s = capi.tm_model_get_stats(ptr)
        return {name: getattr(s, name) for name in (
            "programs_compiled", "programs_cached", "compile_seconds", "load_seconds",
            "prefill_seconds", "decode_seconds", "decode_tokens", "programs_from_disk")}

    def tokenize(self, text: Union[str, bytes, bytearray, memoryview]) -> List[int]:
        """Token ids of a str (UTF-8) or bytes-like object (bytes, bytearray, memoryview)."""
        return capi.tm_tokenize(self._live_ptr(), _text(text))

    def detokenize(self, ids: TokenIds, errors: str = "replace") -> str:
        """The text of token ids. A piece may end inside a UTF-8 character; such bytes are
        decoded with `errors` (see detokenize_bytes for the raw bytes, and
        generate(..., stream=True) for text that is never split)."""
        return self.detokenize_bytes(ids).decode("utf-8", errors)

    def detokenize_bytes(self, ids: TokenIds) -> bytes:
        """The bytes of token ids (GPT-2's tokens are bytes: one may end inside a UTF-8
        character)."""
        return capi.tm_detokenize(self._live_ptr(), _ids(ids))

    def logits(self, ids: TokenIds) -> np.ndarray:
        """The vocab_size logits (float32) of the last position, recomputing all of ids."""
        out = np.empty(self.info.vocab_size, np.float32)
        ids = _ids(ids)

        def call():
            with self._calling() as ptr:
                capi.tm_model_logits(ptr, ids, out)
        call_interruptibly(call)
        return out

    @overload
    def score(self, ids: Prompt, logits: Literal[False] = ...) -> np.ndarray: ...

    @overload
    def score(self, ids: Prompt, logits: Literal[True]) -> "tuple[np.ndarray, np.ndarray]": ...

    def score(self, ids: Prompt, logits: bool = False) -> Any:
        """How likely each token of a text is after the ones before it, in one forward pass.

        Returns the n - 1 log-probabilities (float64, natural log) of ids[1:], each given
        the ids before it (text is tokenized first); with logits=True, also every
        position's logits as an (n, vocab_size) float32 array. A text's perplexity is
        exp(-mean(log-probabilities)).
        """
        ids = _ids(self.tokenize(ids) if isinstance(ids, (str, bytes, bytearray, memoryview))
                   else ids)
        n = ids.size
        logprobs = np.empty(max(n - 1, 0), np.float64)
        all_logits = np.empty((n, self.info.vocab_size), np.float32) if logits else None

        def call():
            with self._calling() as ptr:
                capi.tm_model_score(ptr, ids, logprobs, all_logits)
        call_interruptibly(call)
        return (logprobs, all_logits) if logits else logprobs

    @overload
    def generate(self, prompt: List[Union[str, bytes, TokenIds]],
                 max_new_tokens: Optional[int] = ...,
                 temperature: Optional[float] = ..., top_k: Optional[int] = ...,
                 top_p: Optional[float] = ..., seed: Union[None, int, Sequence[int]] = ...,
                 use_kv_cache: Optional[bool] = ..., stop_at_eos: Optional[bool] = ...,
                 stream: Literal[False] = ...,
                 callback: Optional[Callable[[int, int], Any]] = ...) -> List[List[int]]: ...

    @overload
    def generate(self, prompt: Prompt, max_new_tokens: Optional[int] = ...,
                 temperature: Optional[float] = ..., top_k: Optional[int] = ...,
                 top_p: Optional[float] = ..., seed: Optional[int] = ...,
                 use_kv_cache: Optional[bool] = ..., stop_at_eos: Optional[bool] = ...,
                 stream: Literal[False] = ...,
                 callback: Optional[Callable[[int], Any]] = ...) -> List[int]: ...

    @overload
    def generate(self, prompt: Prompt, max_new_tokens: Optional[int] = ...,
                 temperature: Optional[float] = ..., top_k: Optional[int] = ...,
                 top_p: Optional[float] = ..., seed: Optional[int] = ...,
                 use_kv_cache: Optional[bool] = ..., stop_at_eos: Optional[bool] = ...,
                 stream: Literal[True, 'tokens'] = ...,
                 callback: Optional[Callable[[int], Any]] = ...) -> Stream: ...

    def generate(self, prompt: Any, max_new_tokens: Optional[int] = None,
                 temperature: Optional[float] = None, top_k: Optional[int] = None,
                 top_p: Optional[float] = None, seed: Any = None,
                 use_kv_cache: Optional[bool] = None, stop_at_eos: Optional[bool] = None,
                 stream: Union[bool, str] = False,
                 callback: Optional[Callable[..., Any]] = None) -> Any:
        """Generates tokens after `prompt`: text (a str or bytes-like object, tokenized) or
        token ids (a sequence or 1-D array of ints).

        Options left as None take the library's defaults (32 tokens, greedy, KV cache on,
        no stop at EOS). Returns the list of generated ids. With stream=True, returns a
        Stream that yields the generated text as it comes, in pieces of whole characters (a
        character split across tokens is held back until complete); with stream="tokens",
        one StreamedToken(id, text) per token instead. A stream keeps the model busy until
        it is exhausted or closed (close(), a `with` block, or dropping it).
        callback(token), if given, is called for each token; a true result stops the
        generation after that token (None or False goes on), and an exception it raises
        stops the generation and is re-raised here.

        Several prompts at once, a list of them (each text or ids), decode together
        (tm_generate_batch: each step reads the weights once for all of them, up to
        TM_MAX_BATCH_SEQUENCES, 16): returns a list of each prompt's ids, each what
        generate() gives that prompt alone with the same options. seed may then be a list,
        one per prompt; callback(sequence, token) gets the prompt's index, and a true result
        ends that sequence only. A batch is not streamed."""
        if stream not in (False, True, "tokens"):
            raise ValueError(f"stream must be False, True (text) or 'tokens', not {stream!r}")
        batch = _is_batch(prompt)
        seeds = None
        if batch and isinstance(seed, (list, tuple)):
            seeds, seed = [index_arg(s, "seed") for s in seed], None
        if batch:
            if stream:
                raise ValueError("a batch of prompts is not streamed: use callback(sequence, "
                                 "token) to see its tokens as they come")
            ids_list = [self.tokenize(p) if _is_text(p) else _ids(p) for p in prompt]
        else:
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
        if batch:
            return self._generate_batch(ids_list, options, seeds, callback)
        if stream:
            def run(on_token):
                with self._calling() as ptr:
                    return capi.tm_generate(ptr, ids, options, on_token)
            return Stream(self, run, callback, tokens=stream == "tokens")
        if threading.current_thread() is not threading.main_thread():
            with self._calling() as ptr:
                return capi.tm_generate(ptr, ids, options, callback)
        # From the main thread: interruptible (see _interrupt); an interrupted generation
        # stops after its current token.
        interrupted = threading.Event()

        def on_token(token):
            stop = callback is not None and callback(token)
            return bool(stop) or interrupted.is_set()

        def call():
            with self._calling() as ptr:
                return capi.tm_generate(ptr, ids, options, on_token)
        return call_interruptibly(call, stop=interrupted.set)

    def _generate_batch(self, prompts: List[np.ndarray], options: Any,
                        seeds: Optional[List[int]],
                        callback: Optional[Callable[[int, int], Any]]) -> List[List[int]]:
        """tm_generate_batch: every prompt's tokens, each as generate() gives it alone."""
        interrupted = threading.Event()
        main = threading.current_thread() is threading.main_thread()

        def on_token(sequence, token):
            stop = callback is not None and callback(sequence, token)
            return bool(stop) or interrupted.is_set()

        def call():
            with self._calling() as ptr:
                return capi.tm_generate_batch(ptr, prompts, options, seeds,
                                              on_token if (callback or main) else None)
        if not main:
            return call()
        return call_interruptibly(call, stop=interrupted.set)

    @contextlib.contextmanager
    def _calling(self) -> Iterator[Any]:
        """_using() for a call the library may refuse as busy: a BusyError while a stream
        of this model is open says so."""
        try:
            with self._using() as ptr:
                yield ptr
        except BusyError as e:
            if len(self._open_streams) == 0:
                raise
            raise BusyError(busy_message(str(e))) from None

    def __repr__(self) -> str:
        if self.closed:
            return "<tinymlir.Model closed>"
        return "<tinymlir.Model vocab_size={} n_ctx={} n_layer={} n_embd={}>".format(*self.info)


def _is_batch(prompt: Any) -> bool:
    """Whether generate() was given several prompts: a list or tuple whose items are each
    text or a sequence of ids (a list of ints is one prompt's ids)."""
    return (isinstance(prompt, (list, tuple)) and len(prompt) > 0 and
            all(_is_text(p) or isinstance(p, (list, tuple, np.ndarray)) for p in prompt))


def _is_text(prompt: Any) -> bool:
    """Whether a prompt is text: a str or a bytes-like object. A NumPy array exposes a
    buffer too, but it holds ids, as does any other sequence."""
    return isinstance(prompt, (str, bytes, bytearray, memoryview))


def _text(text: Any) -> Union[str, bytes]:
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


def _ids(ids: Any) -> np.ndarray:
    """Token ids as a 1-D int32 array; values outside int32 raise OverflowError rather than
    wrap around."""
    arr = np.asarray(ids)
    if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
        raise TypeError(f"token ids must be a 1-D sequence of ints, got {arr.dtype} with "
                        f"shape {arr.shape}")
    if arr.size and (arr.min() < np.iinfo(np.int32).min or arr.max() > np.iinfo(np.int32).max):
        raise OverflowError("token ids must fit in int32")
    return np.ascontiguousarray(arr, dtype=np.int32)
