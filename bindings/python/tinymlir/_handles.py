"""Python objects over the C handles: each destroys or releases its handle exactly once.

The SWIG module hands out bare pointers. These classes own them: `close()` (or `with`, or
garbage collection through __del__) frees the handle and forgets it, so a second close is a
no-op and a use after close raises instead of touching freed memory. Calls that release the
GIL hold the handle through `_using()`: a close() meanwhile (from another thread, or from a
callback of that very call) frees it once the call has returned, never under it. The C
functions are bound as class attributes so that __del__ still finds them during interpreter
shutdown.
"""
import collections
import contextlib
import enum
import threading

from . import capi
from ._errors import InvalidArgumentError

CacheStats = collections.namedtuple("CacheStats", "hits misses entries")


class Target(enum.IntEnum):
    CPU = capi.TM_TARGET_CPU
    GPU = capi.TM_TARGET_GPU

    @classmethod
    def of(cls, target):
        """Target from a Target, its value, or a name like "cpu"/"gpu"."""
        if isinstance(target, str):
            try:
                return cls[target.upper()]
            except KeyError:
                raise InvalidArgumentError(
                    f"unknown target {target!r} (expected 'cpu' or 'gpu')") from None
        return cls(target)


class Stage(enum.IntEnum):
    """The compilation stages a program keeps as text (tm_program_ir)."""

    TRACED = capi.TM_STAGE_TRACED
    OPTIMIZED = capi.TM_STAGE_OPTIMIZED
    BUFFERIZED = capi.TM_STAGE_BUFFERIZED
    LOWERED = capi.TM_STAGE_LOWERED
    LLVM_IR = capi.TM_STAGE_LLVM_IR
    ASSEMBLY = capi.TM_STAGE_ASSEMBLY

    @classmethod
    def of(cls, stage):
        if isinstance(stage, str):
            try:
                return cls[stage.upper()]
            except KeyError:
                names = ", ".join(s.name.lower() for s in cls)
                raise InvalidArgumentError(
                    f"unknown stage {stage!r} (expected one of {names})") from None
        return cls(stage)


class _Handle:
    """An owned pointer; subclasses set _free to the C function that frees it."""

    _free = None
    _kind = "handle"

    def __init__(self, ptr):
        self._lock = threading.Lock()   # guards _calls and _closing
        self._calls = 0                 # calls inside _using()
        self._closing = False
        self._ptr = ptr

    @property
    def ptr(self):
        """The SWIG pointer, for calls into tinymlir.capi."""
        if self._ptr is None or self._closing:
            raise InvalidArgumentError(f"this {self._kind} is closed")
        return self._ptr

    @property
    def closed(self):
        return self._ptr is None or self._closing

    @contextlib.contextmanager
    def _using(self):
        """The pointer, held for one call that releases the GIL. Only memory safety: calls
        are not serialised (the library itself refuses calls that conflict)."""
        with self._lock:
            ptr = self.ptr
            self._calls += 1
        try:
            yield ptr
        finally:
            with self._lock:
                self._calls -= 1
                ptr = None
                if self._closing and self._calls == 0:
                    ptr, self._ptr = self._ptr, None
            if ptr is not None:
                type(self)._free(ptr)

    def close(self):
        """Frees the handle, at once or, if a call is using it, when that call returns."""
        with self._lock:
            self._closing = True
            ptr = None
            if self._calls == 0:
                ptr, self._ptr = self._ptr, None
        if ptr is not None:
            type(self)._free(ptr)

    def __del__(self):
        # __init__ may have failed before _ptr was set.
        if getattr(self, "_ptr", None) is not None:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Context(_Handle):
    """tm_context: the owner of the compiled-program cache. Thread-safe. Models keep their
    own reference to it, so it may be closed before them."""

    _free = staticmethod(capi.tm_context_destroy)
    _kind = "context"

    def __init__(self):
        super().__init__(capi.tm_context_create())

    def cache_stats(self):
        """tm_cache_stats: CacheStats(hits, misses, entries)."""
        return CacheStats(*capi.tm_cache_stats(self.ptr))

    def __repr__(self):
        if self.closed:
            return "<tinymlir.Context closed>"
        return "<tinymlir.Context hits={} misses={} entries={}>".format(*self.cache_stats())


_default_context = None
_default_lock = threading.Lock()


def default_context():
    """The process-wide context used when none is given (created on first use)."""
    global _default_context
    with _default_lock:
        if _default_context is None or _default_context.closed:
            _default_context = Context()
        return _default_context


class Trace(_Handle):
    """tm_trace: a program being recorded. One thread at a time."""

    _free = staticmethod(capi.tm_trace_destroy)
    _kind = "trace"

    def __init__(self, context, name=None):
        super().__init__(capi.tm_trace_begin(context.ptr, name))

    def end(self, values):
        capi.tm_trace_end(self.ptr, list(values))

    def value_type(self, value):
        """(tm_dtype, shape tuple) of a value."""
        return capi.tm_value_type(self.ptr, value)


def compile_options(target=Target.CPU, optimize=None, use_blas=None, opt_level=None):
    """A tm_compile_options with the library's defaults, overridden where given."""
    options = capi.tm_compile_options()
    capi.tm_compile_options_init(options)
    options.target = int(Target.of(target))
    if optimize is not None:
        options.optimize = int(bool(optimize))
    if use_blas is not None:
        options.use_blas = int(bool(use_blas))
    if opt_level is not None:
        options.opt_level = int(opt_level)
    return options


class Program(_Handle):
    """One reference to a tm_program (immutable, invokable from several threads).

    compile() returns a new reference; retain() makes another Program object that holds
    its own reference. Each object releases its reference exactly once."""

    _free = staticmethod(capi.tm_program_release)
    _kind = "program"

    @classmethod
    def compile(cls, context, trace, options=None):
        with context._using() as ctx:
            return cls(capi.tm_compile(ctx, trace.ptr, options))

    def retain(self):
        ptr = self.ptr
        capi.tm_program_retain(ptr)
        return Program(ptr)

    def export(self, path):
        """Writes the program to `path` as one self-contained file (tm_program_export)."""
        with self._using() as ptr:
            capi.tm_program_export(ptr, str(path))

    @classmethod
    def load(cls, path):
        """A program written by export(), linked without the compiler (tm_program_load)."""
        return cls(capi.tm_program_load(str(path)))

    @property
    def cache_hit(self):
        """True if the tm_compile that returned this program found it in the context's
        cache, False if that call compiled it (tm_program_cache_hit)."""
        return bool(capi.tm_program_cache_hit(self.ptr))

    @property
    def input_types(self):
        """[(tm_dtype, shape)] of the inputs the program is specialised to."""
        return [capi.tm_program_input_type(self.ptr, i)
                for i in range(capi.tm_program_num_inputs(self.ptr))]

    @property
    def output_types(self):
        return [capi.tm_program_output_type(self.ptr, i)
                for i in range(capi.tm_program_num_outputs(self.ptr))]

    def ir(self, stage):
        """The text of one compilation stage (a Stage, its value, or a name)."""
        return capi.tm_program_ir(self.ptr, int(Stage.of(stage)))

    def invoke(self, inputs, outputs):
        """tm_invoke on NumPy arrays: reads `inputs`, writes `outputs` (caller-owned)."""
        inputs, outputs = list(inputs), list(outputs)
        with self._using() as ptr:
            capi.tm_invoke(ptr, inputs, outputs)
