"""Streaming generation: Model.generate(..., stream=True).

A Stream runs tm_generate on a worker thread (the GIL released) and hands each token to
the consumer: the C callback puts the token in a queue and waits until the consumer asks
for the next one, so the generation advances with the loop and the model stays busy (the
library answers BusyError to its other calls) until the stream is exhausted or closed.
close(), leaving a `with` block, or dropping the last reference to the stream (a `for`
loop left with `break`) asks the library to stop after the current token and waits for it.
A stream still open when the interpreter exits is closed then (atexit), while threads can
still run: its worker would otherwise wait for a consumer that is gone.

What it yields is text: TextPieces decodes the tokens' bytes incrementally, so a character
whose UTF-8 bytes are split across tokens (GPT-2's byte-level vocabulary splits most
characters outside Latin-1: 日, 🙂) is held back until its last byte has come, and each
piece is whole characters. With stream="tokens" it yields StreamedToken(id, text) for each
token, text being what that token completed ("" while a character is held back).
"""
import atexit
import codecs
import queue
import sys
import threading
import weakref
from typing import Any, Callable, List, NamedTuple, Optional, Union

_DONE = object()
# Streams whose worker has started and not ended, for _close_at_exit.
_running: "weakref.WeakSet[Stream]" = weakref.WeakSet()


class StreamedToken(NamedTuple):
    """One token of a stream="tokens" stream: its id, and the text it completed (possibly
    ""). A last StreamedToken(None, text) carries a character the generation left
    incomplete, as U+FFFD."""

    id: Optional[int]
    text: str


class TextPieces:
    """Token ids to text, a token at a time, never splitting a UTF-8 character: bytes that
    begin a character are kept until it is complete; bytes that can never be one decode to
    U+FFFD, as bytes.decode(errors="replace") has them."""

    def __init__(self, detokenize_bytes: Callable[[List[int]], bytes]):
        self._detokenize_bytes = detokenize_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token: int) -> str:
        """The text this token completes ("" while a character is incomplete)."""
        return self._decoder.decode(self._detokenize_bytes([token]))

    def finish(self) -> str:
        """What is left at the end: a character left incomplete, as U+FFFD, or ""."""
        return self._decoder.decode(b"", final=True)


class _Channel:
    """What the worker thread and the consumer share. The worker holds only this, never the
    Stream, so that a stream nobody references any more is collected (and closed) while its
    worker waits."""

    def __init__(self, callback: Optional[Callable[[int], Any]]):
        self.callback = callback
        self.tokens: "queue.Queue[Any]" = queue.Queue()
        self.resume = threading.Semaphore(0)
        self.closing = threading.Event()

    def on_token(self, token: int) -> bool:
        """tm_generate's callback: hands the token over, waits for the consumer to ask for
        the next one; true (stop) once the stream is closed."""
        stop = self.callback is not None and self.callback(token)
        self.tokens.put(token)
        self.resume.acquire()
        return bool(stop) or self.closing.is_set()


class Stream:
    """The iterator generate(..., stream=True) returns; see the module docstring. Iterate it,
    close() it, or use it in a `with` block."""

    def __init__(self, model: Any, generate: Callable[[Callable[[int], bool]], Any],
                 callback: Optional[Callable[[int], Any]], tokens: bool):
        self._model = model
        self._generate = generate         # generate(on_token): runs tm_generate
        self._tokens = tokens
        self._pieces = TextPieces(model.detokenize_bytes)
        self._channel = _Channel(callback)
        self._worker: Optional[threading.Thread] = None
        self._finished = False
        self._waiting = False             # a token was handed over; its callback waits

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Union[str, StreamedToken]:
        channel = self._channel
        while True:
            if self._finished:
                raise StopIteration
            if self._worker is None:
                self._start()
            elif self._waiting:
                self._waiting = False
                channel.resume.release()  # the callback returns: the next token is made
            item = channel.tokens.get()
            if isinstance(item, tuple) and item and item[0] is _DONE:
                self._end()
                if item[1] is not None:
                    raise item[1]
                rest = self._pieces.finish()
                if rest:
                    return StreamedToken(None, rest) if self._tokens else rest
                raise StopIteration
            self._waiting = True
            text = self._pieces.feed(item)
            if self._tokens:
                return StreamedToken(item, text)
            if text:
                return text

    def _start(self) -> None:
        channel, generate = self._channel, self._generate

        def work() -> None:
            try:
                generate(channel.on_token)
                channel.tokens.put((_DONE, None))
            except BaseException as e:  # re-raised in the consumer's thread
                channel.tokens.put((_DONE, e))

        self._model._open_streams.add(self)
        _running.add(self)
        self._worker = threading.Thread(target=work, name="tinymlir-generate", daemon=True)
        self._worker.start()

    def _end(self) -> None:
        self._finished = True
        self._model._open_streams.discard(self)
        _running.discard(self)

    def close(self) -> None:
        """Stops the generation after its current token and waits for it; the model is
        free again when this returns. Closing twice, or a finished stream, does nothing."""
        if self._finished:
            return
        self._finished = True
        worker = self._worker
        if worker is not None:
            self._channel.closing.set()
            self._channel.resume.release()   # wakes a callback waiting for the consumer
            # While the interpreter finalizes, its daemon threads never run again: no join.
            if not sys.is_finalizing():
                worker.join()
        self._model._open_streams.discard(self)
        _running.discard(self)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # An abandoned stream (the loop that read it left with break) frees the model.
        if getattr(self, "_worker", None) is not None:
            self.close()


def _close_at_exit() -> None:
    for stream in list(_running):
        stream.close()


atexit.register(_close_at_exit)


def busy_message(message: str) -> str:
    """A BusyError's message on a model whose stream is open, saying so."""
    return (f"{message}; this model has an open stream (generate(..., stream=True)) that "
            "is still generating: read it to the end, or close it (stream.close(), or a "
            "`with` block) before the next call")

