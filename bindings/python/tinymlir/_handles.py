"""Python objects over the C handles: each destroys or releases its handle exactly once.

The SWIG module hands out bare pointers. These classes own them: `close()` (or `with`, or
garbage collection through __del__) frees the handle and forgets it, so a second close is a
no-op and a use after close raises instead of touching freed memory. Calls that release the
GIL hold the handle through `_using()`: a close() meanwhile (from another thread, or from a
callback of that very call) frees it once the call has returned, never under it. `.ptr`
hands the handle to tinymlir.capi as a HandlePointer, which keeps its owner alive. The C
functions are bound as class attributes so that __del__ still finds them during interpreter
shutdown.
"""
import contextlib
import enum
import os
import threading
from typing import Any, Iterator, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

from . import capi
from ._args import flag_arg, index_arg
from ._errors import InvalidArgumentError
from ._interrupt import call_interruptibly

PathLike = Union[str, bytes, "os.PathLike[Any]"]
_H = TypeVar("_H", bound="_Handle")


class CacheStats(NamedTuple):
    """A context cache's counts (tm_cache_get_info)."""

    hits: int
    misses: int
    entries: int


class Target(enum.IntEnum):
    CPU = capi.TM_TARGET_CPU
    GPU = capi.TM_TARGET_GPU

    @classmethod
    def of(cls, target: Union["Target", str, int]) -> "Target":
        """Target from a Target, its value, or a name like "cpu"/"gpu"."""
        if isinstance(target, str):
            try:
                return cls[target.upper()]
            except KeyError:
                raise InvalidArgumentError(
                    f"unknown target {target!r} (expected 'cpu' or 'gpu')") from None
        return cls(target)


class Stage(enum.IntEnum):
    """The compilation stages a program keeps as text (tm_program_ir_text)."""

    TRACED = capi.TM_STAGE_TRACED
    OPTIMIZED = capi.TM_STAGE_OPTIMIZED
    BUFFERIZED = capi.TM_STAGE_BUFFERIZED
    LOWERED = capi.TM_STAGE_LOWERED
    LLVM_IR = capi.TM_STAGE_LLVM_IR
    ASSEMBLY = capi.TM_STAGE_ASSEMBLY

    @classmethod
    def of(cls, stage: Union["Stage", str, int]) -> "Stage":
        """Stage from a Stage, its value, or a name like "optimized"."""
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

    def __init__(self, ptr: Any):
        self._lock = threading.Lock()   # guards _calls and _closing
        self._calls = 0                 # calls inside _using()
        self._closing = False
        self._ptr = ptr

    @property
    def ptr(self) -> "HandlePointer":
        """The handle, for calls into tinymlir.capi: a HandlePointer, which keeps this
        object (and so the C handle) alive as long as the pointer itself is referenced."""
        self._live_ptr()  # a closed handle fails here, as it always did
        return HandlePointer(self)

    def _live_ptr(self) -> Any:
        """The bare SWIG pointer, for the package's own calls: they hold `self` (the owner)
        for the whole call, so the pointer cannot outlive it."""
        if self._ptr is None or self._closing:
            raise InvalidArgumentError(f"this {self._kind} is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        """Whether close() was called (or the object was freed)."""
        return self._ptr is None or self._closing

    @contextlib.contextmanager
    def _using(self) -> Iterator[Any]:
        """The pointer, held for one call that releases the GIL. Only memory safety: calls
        are not serialised (the library itself refuses calls that conflict)."""
        with self._lock:
            ptr = self._live_ptr()
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

    def close(self) -> None:
        """Frees the handle, at once or, if a call is using it, when that call returns."""
        with self._lock:
            self._closing = True
            ptr = None
            if self._calls == 0:
                ptr, self._ptr = self._ptr, None
        if ptr is not None:
            type(self)._free(ptr)

    def __del__(self) -> None:
        # __init__ may have failed before _ptr was set.
        if getattr(self, "_ptr", None) is not None:
            self.close()

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # How to have the same object in another process, for the error below.
    _elsewhere = "make a new one there"

    def __reduce__(self) -> Any:
        """Pickling and copying are refused: the object is a handle to native state of this
        process (copy.copy would share it, to be freed twice)."""
        raise TypeError(f"a tinymlir {self._kind} cannot be pickled or copied: it is a handle "
                        f"to native state of this process; {self._elsewhere}")


class HandlePointer:
    """What `.ptr` returns: the C handle of a Context, Trace, Program or Model for calls into
    tinymlir.capi, holding its owner.

    A bare SWIG pointer does not own its handle: `capi.tm_model_info(Model.load(d).ptr)`
    would free the model (with its Python owner) before the call, and use freed memory.
    This object keeps the owner alive as long as it is referenced (a variable, or the
    arguments of a running call). SWIG's wrappers (non-builtin mode) accept any object
    whose `this` attribute is the SwigPyObject; `this` is read at each call, so a pointer
    whose owner was closed explicitly is refused (TypeError) instead of used."""

    __slots__ = ("_owner",)   # no __dict__: SWIG then looks `this` up as an attribute

    def __init__(self, owner: _Handle):
        self._owner = owner

    @property
    def this(self) -> Any:
        """The SWIG pointer (read by tinymlir.capi's wrappers at each call)."""
        return self._owner._live_ptr()

    def __int__(self) -> int:
        """The address, as int() of a SWIG pointer gives it."""
        return int(self.this)

    def __eq__(self, other: Any) -> bool:   # as SWIG pointers compare (and, like them, unhashable)
        if isinstance(other, HandlePointer):
            other = other.this
        return self.this == other

    def __repr__(self) -> str:
        state = "closed" if self._owner.closed else hex(int(self))
        return f"<tinymlir {self._owner._kind} pointer {state}>"


def c_path(path: PathLike, name: str) -> str:
    """A file name for the C API, which takes `const char *` (SWIG passes a str as UTF-8).

    Accepts str, bytes and os.PathLike, as open() does. The C string ends at the first NUL,
    so a name with one would silently name another file: refused, as open() refuses it. A
    name that is not valid UTF-8 (a bytes name, or a str with the surrogate escapes that
    os.fsdecode gives such names) cannot cross SWIG's char * unchanged: refused too."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"{name} must be a str, bytes or os.PathLike, not "
                        f"{type(path).__name__} ({path!r})") from None
    try:
        raw = path if isinstance(path, bytes) else os.fsencode(path)
    except UnicodeEncodeError:
        raise ValueError(f"{name} {path!r} cannot be encoded as a file name") from None
    if b"\0" in raw:
        raise ValueError(f"{name}: embedded null byte in {path!r}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name} {path!r} is not valid UTF-8: the C API takes UTF-8 file "
                         "names") from None


def c_name(value: str, name: str) -> str:
    """A name (text used in messages) for the C API: a str, without NUL, valid UTF-8."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__} ({value!r})")
    if "\0" in value:
        raise ValueError(f"{name}: embedded null byte in {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} {value!r} is not valid UTF-8 (a lone surrogate)") from None
    return value


class Context(_Handle):
    """tm_context: the owner of the compiled-program cache. Thread-safe. Models keep their
    own reference to it, so it may be closed before them."""

    _free = staticmethod(capi.tm_context_release)
    _kind = "context"
    _elsewhere = "create a Context (or use tinymlir.default_context()) in the other process"

    def __init__(self) -> None:
        super().__init__(capi.tm_context_create())

    def cache_stats(self) -> CacheStats:
        """tm_cache_get_info's hits, misses and entries: CacheStats(hits, misses, entries)."""
        info = capi.tm_cache_get_info(self._live_ptr())
        return CacheStats(info.hits, info.misses, info.entries)

    def set_cache_dir(self, directory: Optional[PathLike], limit_bytes: int = 0) -> None:
        """tm_cache_set_dir: keeps compiled programs in `directory` (a path; None turns the
        disk cache off, "" is the default place), bounded by limit_bytes (0: 1 GiB)."""
        directory = None if directory is None else c_path(directory, "directory")
        limit_bytes = index_arg(limit_bytes, "limit_bytes")
        if limit_bytes < 0:
            raise ValueError(f"limit_bytes must be >= 0, not {limit_bytes}")
        with self._using() as ptr:
            capi.tm_cache_set_dir(ptr, directory, limit_bytes)

    def __repr__(self) -> str:
        if self.closed:
            return "<tinymlir.Context closed>"
        return "<tinymlir.Context hits={} misses={} entries={}>".format(*self.cache_stats())


_default_context: Optional[Context] = None
_default_lock = threading.Lock()


def default_context() -> Context:
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
    _elsewhere = "trace again in the other process"

    def __init__(self, context: Context, name: Optional[str] = None):
        name = None if name is None else c_name(name, "name")
        super().__init__(capi.tm_trace_begin(context._live_ptr(), name))

    def end(self, values: Sequence[Any]) -> None:
        """tm_trace_end: the program's outputs are `values` (tm_values of this trace)."""
        capi.tm_trace_end(self._live_ptr(), list(values))

    def value_type(self, value: Any) -> Tuple[int, Tuple[int, ...]]:
        """(tm_dtype, shape tuple) of a value."""
        return capi.tm_value_type(self._live_ptr(), value)


def compile_options(target: Union[Target, str, int] = Target.CPU,
                    optimize: Optional[bool] = None, use_blas: Optional[bool] = None,
                    opt_level: Optional[int] = None) -> Any:
    """A tm_compile_options with the library's defaults, overridden where given."""
    options = capi.tm_compile_options()
    capi.tm_compile_options_init(options)
    options.target = int(Target.of(target))
    if optimize is not None:
        options.optimize = flag_arg(optimize, "optimize")
    if use_blas is not None:
        options.use_blas = flag_arg(use_blas, "use_blas")
    if opt_level is not None:
        options.opt_level = index_arg(opt_level, "opt_level")
    return options


class Program(_Handle):
    """One reference to a tm_program (immutable, invokable from several threads).

    compile() returns a new reference; retain() makes another Program object that holds
    its own reference. Each object releases its reference exactly once."""

    _free = staticmethod(capi.tm_program_release)
    _kind = "program"
    _elsewhere = "export() it to a file and Program.load() that file there"

    @classmethod
    def compile(cls, context: Context, trace: Trace, options: Any = None) -> "Program":
        """tm_compile; a KeyboardInterrupt (or another signal's exception) is raised without
        waiting for the compile, which finishes in the background (see _interrupt)."""
        # The trace is held for the call too: an interrupted caller closes it (a `with`
        # block) while the compile, going on in the background, still reads it.
        def call():
            with context._using() as ctx, trace._using() as traced:
                return cls(capi.tm_compile(ctx, traced, options))
        return call_interruptibly(call)

    def retain(self) -> "Program":
        """Another Program object holding its own reference to the same program."""
        ptr = self._live_ptr()
        capi.tm_program_retain(ptr)
        return Program(ptr)

    def export(self, path: PathLike) -> None:
        """Writes the program to `path` (str, bytes or os.PathLike) as one self-contained
        file (tm_program_export)."""
        path = c_path(path, "path")
        with self._using() as ptr:
            capi.tm_program_export(ptr, path)

    @classmethod
    def load(cls, path: PathLike) -> "Program":
        """A program written by export(), linked without the compiler (tm_program_load)."""
        return cls(capi.tm_program_load(c_path(path, "path")))

    @property
    def cache_hit(self) -> bool:
        """True if the tm_compile that returned this program found it in the context's
        cache, False if that call compiled it (tm_program_cache_hit)."""
        return bool(capi.tm_program_cache_hit(self._live_ptr()))

    @property
    def input_types(self) -> List[Tuple[int, Tuple[int, ...]]]:
        """[(tm_dtype, shape)] of the inputs the program is specialised to."""
        ptr = self._live_ptr()
        return [capi.tm_program_input_type(ptr, i)
                for i in range(capi.tm_program_num_inputs(ptr))]

    @property
    def output_types(self) -> List[Tuple[int, Tuple[int, ...]]]:
        """[(tm_dtype, shape)] of the outputs."""
        ptr = self._live_ptr()
        return [capi.tm_program_output_type(ptr, i)
                for i in range(capi.tm_program_num_outputs(ptr))]

    def ir(self, stage: Union[Stage, str, int]) -> str:
        """The text of one compilation stage (a Stage, its value, or a name)."""
        return capi.tm_program_ir_text(self._live_ptr(), int(Stage.of(stage)))

    def invoke(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """tm_invoke on NumPy arrays and DeviceTensors: reads `inputs`, writes `outputs`
        (caller-owned)."""
        inputs, outputs = list(inputs), list(outputs)
        with self._using() as ptr, contextlib.ExitStack() as held:
            # A DeviceTensor's buffer stays open for the call (close() waits for it).
            buffers = {id(t.buffer): t.buffer for t in inputs + outputs
                       if hasattr(t, "_tm_tensor")}
            for buffer in buffers.values():
                held.enter_context(buffer._using())
            capi.tm_invoke(ptr, inputs, outputs)
