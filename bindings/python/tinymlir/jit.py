"""@tinymlir.jit: trace a Python function once per specialisation, then run it compiled.

Calling a jitted function with arrays:
1. flattens the positional arguments as a tree (tuples, named tuples, lists, dicts,
   dataclasses) down to leaves, and makes each leaf an array (tinymlir._arrays: NumPy
   arrays, Python and NumPy scalars, DLPack producers, objects with __array__, buffers);
2. looks the specialisation up by (tree structure with every leaf's shape and dtype, how
   each 0-d leaf promotes, static keyword arguments, compile options such as the target);
3. on a miss, calls the function with tracers in place of the arrays (keyword arguments
   are passed through as Python values), records the ops into a tm_trace, and compiles it
   (tm_compile, which has its own cache in the context);
4. invokes the program on the arrays with newly allocated outputs of the inferred types
   (or the arrays of `out=`), and returns them in the tree structure the function returned.

The arrays are runtime inputs, never constants: a function called with different weights of
the same shapes reuses one compiled program.

A jitted function defined in a class binds like a function (obj.method(x)). The instance is
an argument like the others when it is a tree of arrays (a dataclass of weights: traced, one
program for every instance of that structure); otherwise it is static, a Python value in the
cache key (its attributes are read while tracing, so each instance has its own programs).
"""
import collections
import functools
import sys
import threading
from typing import Any, Callable, NamedTuple, Optional, Union, overload

import numpy as np

from . import _tree
from ._arrays import Argument, as_argument, check_out
from ._dtypes import SUPPORTED_DTYPES, from_tm, to_tm
from ._promotion import scalar_class
from ._handles import (CacheStats, Context, Program, Stage, Target, Trace, compile_options,
                       default_context)
from . import capi
from .tracer import TraceState, Tracer, lift, tracing



class CacheInfo(NamedTuple):
    """hits/misses/entries of one jitted function's specialisations; context: the context's
    tm_cache_get_info counts (CacheStats), shared by everything compiled in it."""

    hits: int
    misses: int
    entries: int
    context: CacheStats



DEFAULT_MAX_SPECIALIZATIONS = 128   # as functools.lru_cache

_UNBOUND = object()   # no static instance (see BoundJittedFunction): a plain call


class _Specialization:
    """A compiled program and what is needed to call it."""

    def __init__(self, program, out_treedef):
        self.program = program
        self.out_treedef = out_treedef
        self.out_types = [(from_tm(dtype), shape) for dtype, shape in program.output_types]


class Lowered:
    """Every IR stage of one specialisation (fn.lower(*args)). Holds its own reference to
    the program, so it stays valid after the jit cache is cleared."""

    def __init__(self, program: Program, in_treedef: Any, out_treedef: Any):
        self.program = program
        self.in_treedef = in_treedef
        self.out_treedef = out_treedef

    @property
    def cache_hit(self) -> bool:
        """True if compiling this specialisation found the program in the context's cache
        (compiled earlier for an equal trace, by this function or another), False if it
        was compiled then."""
        return self.program.cache_hit

    def ir(self, stage: Union[Stage, str, int]) -> str:
        """The text of a stage: a tinymlir.Stage or its name ("traced", "optimized",
        "bufferized", "lowered", "llvm_ir", "assembly")."""
        return self.program.ir(stage)

    @property
    def traced(self) -> str:
        return self.ir(Stage.TRACED)

    @property
    def optimized(self) -> str:
        return self.ir(Stage.OPTIMIZED)

    @property
    def bufferized(self) -> str:
        return self.ir(Stage.BUFFERIZED)

    @property
    def lowered(self) -> str:
        return self.ir(Stage.LOWERED)

    @property
    def llvm_ir(self) -> str:
        return self.ir(Stage.LLVM_IR)

    @property
    def assembly(self) -> str:
        return self.ir(Stage.ASSEMBLY)


class JittedFunction:
    """A function traced and compiled per specialisation; see the module docstring."""

    def __init__(self, fn: Callable[..., Any], target: Union[str, int] = "cpu",
                 context: Optional[Context] = None, optimize: Optional[bool] = None,
                 use_blas: Optional[bool] = None, opt_level: Optional[int] = None,
                 max_specializations: Optional[int] = DEFAULT_MAX_SPECIALIZATIONS):
        functools.update_wrapper(self, fn)
        self._max_specializations = _check_max_specializations(max_specializations)
        self._fn = fn
        self._context = context
        self._options = dict(target=Target.of(target), optimize=optimize, use_blas=use_blas,
                             opt_level=opt_level)
        compile_options(**self._options)   # bad options fail here, not at the first call
        self._options_key = tuple(sorted(self._options.items()))
        # Least recently used first. Bounded: each entry holds a program (~0.1-0.3 MB) beyond
        # the context cache's budget, and a static instance in its key alive.
        self._cache = collections.OrderedDict()
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()

    def __reduce__(self) -> Any:
        """Pickles as the function and its options (multiprocessing's spawn, for one); the
        copy compiles its own programs. A jitted function defined at module level (the
        decorator's name is then this object) pickles by name, like a function; one with a
        context of its own cannot be pickled (the context is a handle of this process)."""
        module = getattr(self, "__module__", None)
        qualname = getattr(self, "__qualname__", "")
        if module and "<locals>" not in qualname:
            found = sys.modules.get(module)
            for part in qualname.split("."):
                found = getattr(found, part, None)
            if found is self:
                return qualname
        return (_rebuild_jitted_function,
                (self._fn, self._context, dict(self._options), self._max_specializations))

    @property
    def target(self) -> Target:
        return self._options["target"]

    @property
    def context(self) -> Context:
        return self._context if self._context is not None else default_context()

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """obj.f for a jitted f defined in obj's class, as for a function."""
        if instance is None:
            return self
        return BoundJittedFunction(self, instance)

    def __call__(self, *args: Any, **static: Any) -> Any:
        """Runs the function compiled: positional arguments are arrays (or trees of them;
        see tinymlir._arrays for what is taken), keyword arguments static values, except
        `out`: arrays (in the tree structure of the results) to write the results into."""
        return self._call(_UNBOUND, args, static)

    def lower(self, *args: Any, **static: Any) -> Lowered:
        """Specialises (through the cache) and returns the Lowered program with every IR
        stage."""
        return self._lower(_UNBOUND, args, static)

    def _call(self, bound, args, static):
        """Runs the function on `args`; `bound` is a static instance passed first (see
        BoundJittedFunction), or _UNBOUND. `out` in `static` is where the results go."""
        leaves, treedef = _tree.flatten(args)
        if any(isinstance(x, Tracer) for x in leaves):
            # Called from inside another jitted function: becomes part of that trace.
            return self._fn(*_prepend(bound, args), **static)
        out = static.pop("out", None)
        spec, arrays = self._specialize(leaves, treedef, static, bound)
        if out is None:
            outputs = [np.empty(shape, dtype) for dtype, shape in spec.out_types]
        else:
            outputs = self._check_out(out, spec)
        spec.program.invoke(arrays, outputs)
        return _tree.unflatten(spec.out_treedef, outputs)

    def _check_out(self, out, spec):
        """The arrays of `out=`: a tree of the results' structure (one array for one result)
        whose leaves are writable NumPy arrays of the results' dtypes and shapes."""
        leaves, treedef = _tree.flatten(out)
        if treedef != spec.out_treedef:
            raise ValueError(f"{self.__qualname__}: out= has the structure {treedef!r}; the "
                             f"results have {spec.out_treedef!r}")
        paths = _tree.leaf_paths(treedef)
        return [check_out(x, f"{self.__qualname__}: out{paths[i]}", dtype, shape)
                for i, (x, (dtype, shape)) in enumerate(zip(leaves, spec.out_types))]

    def _lower(self, bound, args, static):
        leaves, treedef = _tree.flatten(args)
        spec, _ = self._specialize(leaves, treedef, static, bound)
        return Lowered(spec.program.retain(), treedef, spec.out_treedef)

    def cache_info(self) -> CacheInfo:
        with self._lock:
            hits, misses, entries = self._hits, self._misses, len(self._cache)
        return CacheInfo(hits, misses, entries, self.context.cache_stats())

    def cache_clear(self) -> None:
        """Drops this function's specialisations. Their programs are released when the
        last reference goes (not closed here: another thread may be running one)."""
        with self._lock:
            dropped, self._cache = self._cache, collections.OrderedDict()
            self._hits = self._misses = 0
        del dropped   # finalizers run outside the lock (they may call this function)

    def __repr__(self) -> str:
        return f"<tinymlir.jit {self.__qualname__} target={self.target.name.lower()}>"

    # ---- Specialisation ----------------------------------------------------------------------

    def _specialize(self, leaves, treedef, static, bound):
        arguments = self._check_leaves(leaves, treedef)
        arrays = [a.array for a in arguments]
        bound_key = () if bound is _UNBOUND else self._static_key({"self": bound})
        key = (treedef, tuple((a.shape, a.dtype.str) for a in arrays),
               tuple(None if a.scalar is None else scalar_class(a.scalar) for a in arguments),
               self._static_key(static), bound_key, self._options_key)
        with self._lock:
            spec = self._cache.get(key)
            if spec is not None:
                self._cache.move_to_end(key)
                self._hits += 1
                return spec, arrays
            self._misses += 1
        # Traced and compiled outside the lock; two threads racing on one key both trace,
        # and the context's cache makes the second compile a lookup.
        spec = self._trace_and_compile(treedef, arguments, static, bound)
        dropped = []
        with self._lock:
            spec = self._cache.setdefault(key, spec)
            self._cache.move_to_end(key)
            while (self._max_specializations is not None
                   and len(self._cache) > self._max_specializations):
                dropped.append(self._cache.popitem(last=False))
        # Released here, outside the lock: a static key's __del__ may call this function.
        del dropped
        return spec, arrays

    def _check_leaves(self, leaves, treedef):
        """Each leaf as an Argument (tinymlir._arrays), named by its path in messages."""
        paths = None
        arguments = []
        for i, x in enumerate(leaves):
            if (type(x) is np.ndarray and x.ndim > 0 and x.dtype in SUPPORTED_DTYPES
                    and x.flags.aligned):   # the usual leaf, taken as it is
                arguments.append(Argument(x, None))
                continue
            paths = paths or _tree.leaf_paths(treedef)
            arguments.append(as_argument(x, f"{self.__qualname__}: argument "
                                            f"{_arg_path(paths[i])}"))
        return arguments

    def _static_key(self, static):
        items = tuple(sorted(static.items()))
        for name, value in items:
            try:
                hash(value)
            except TypeError:
                raise TypeError(
                    f"{self.__qualname__}: keyword argument {name}={type(value).__name__} is "
                    "static (part of the cache key) and must be hashable; pass arrays "
                    "positionally") from None
        # By type and exact value, at every depth: 0.5 and np.float64(0.5) (or 1 and True)
        # are equal and hash alike, yet promote differently; 0.0 and -0.0 are equal yet
        # divide differently; NaN equals nothing, so it would never hit and every call would
        # trace again.
        return tuple((name, _tree.canonical_key(value)) for name, value in items)

    def _trace_and_compile(self, treedef, arguments, static, bound=_UNBOUND):
        context = self.context
        name = getattr(self._fn, "__qualname__", "kernel")
        with Trace(context, name) as trace:
            state = TraceState(trace, name)
            with tracing(state):
                inputs = [Tracer(state, capi.tm_op_input(trace.ptr, to_tm(a.array.dtype),
                                                         a.array.shape), scalar=a.scalar)
                          for a in arguments]
                args = _tree.unflatten(treedef, inputs)
                result = self._fn(*_prepend(bound, args), **static)
                out_leaves, out_treedef = _tree.flatten(result)
                if not out_leaves:
                    raise TypeError(f"{name} returned no arrays ({result!r})")
                for x in out_leaves:
                    if not isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float)):
                        raise TypeError(f"{name} returned a {type(x).__name__}; outputs must "
                                        "be arrays (traced values), possibly in a tree")
                trace.end([lift(state, x) for x in out_leaves])
            program = Program.compile(context, trace, compile_options(**self._options))
        return _Specialization(program, out_treedef)


def _rebuild_jitted_function(fn, context, options, max_specializations):
    """JittedFunction.__reduce__'s other half."""
    return JittedFunction(fn, context=context, max_specializations=max_specializations,
                          **options)


class BoundJittedFunction:
    """A jitted function bound to an instance (obj.f), as a method is. The instance goes to
    the function as its first argument: traced with the others if it is a tree of arrays,
    else as a static value (hashable; part of the cache key). The cache is the function's."""

    def __init__(self, jitted: JittedFunction, instance: Any):
        self.__func__ = jitted
        self.__self__ = instance

    def __call__(self, *args: Any, **static: Any) -> Any:
        if _is_array_tree(self.__self__):
            return self.__func__(self.__self__, *args, **static)
        return self.__func__._call(self.__self__, args, static)

    def lower(self, *args: Any, **static: Any) -> Lowered:
        if _is_array_tree(self.__self__):
            return self.__func__.lower(self.__self__, *args, **static)
        return self.__func__._lower(self.__self__, args, static)

    def __getattr__(self, name: str) -> Any:   # cache_info, cache_clear, target, __doc__, ...
        return getattr(self.__func__, name)

    def __repr__(self) -> str:
        return f"<bound {self.__func__!r} of {self.__self__!r}>"


def _prepend(bound, args):
    return tuple(args) if bound is _UNBOUND else (bound, *args)


def _is_array_tree(x):
    """Whether x is a container (dataclass, tuple, dict, ...) whose leaves are all arrays or
    tracers."""
    leaves, treedef = _tree.flatten(x)
    return treedef.kind != "leaf" and all(
        isinstance(leaf, (np.ndarray, np.generic, Tracer)) for leaf in leaves)


def _arg_path(path):
    # The root is the tuple of positional arguments: "[0].w" reads better as "0.w".
    end = path.index("]")
    return path[1:end] + path[end + 1:]


def _check_max_specializations(n):
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"max_specializations={n!r}: it must be an int of at least 1, or "
                         "None for no bound")
    return n


@overload
def jit(fn: Callable[..., Any], *, target: Union[str, int] = ...,
        context: Optional[Context] = ..., optimize: Optional[bool] = ...,
        use_blas: Optional[bool] = ..., opt_level: Optional[int] = ...,
        max_specializations: Optional[int] = ...) -> JittedFunction: ...


@overload
def jit(fn: None = ..., *, target: Union[str, int] = ...,
        context: Optional[Context] = ..., optimize: Optional[bool] = ...,
        use_blas: Optional[bool] = ..., opt_level: Optional[int] = ...,
        max_specializations: Optional[int] = ...
        ) -> Callable[[Callable[..., Any]], JittedFunction]: ...


def jit(fn: Optional[Callable[..., Any]] = None, *, target: Union[str, int] = "cpu",
        context: Optional[Context] = None, optimize: Optional[bool] = None,
        use_blas: Optional[bool] = None, opt_level: Optional[int] = None,
        max_specializations: Optional[int] = DEFAULT_MAX_SPECIALIZATIONS
        ) -> Union[JittedFunction, Callable[[Callable[..., Any]], JittedFunction]]:
    """Decorator (or function) that traces and compiles `fn` per specialisation.

    target: "cpu" or "gpu" (or a tinymlir.Target), passed through to tm_compile; the
    formulas do not change with it. context: the tinymlir.Context whose cache is used
    (default: a process-wide one). optimize, use_blas, opt_level: tm_compile_options
    (None: the library's defaults). max_specializations: how many specialisations the
    function keeps, least recently used dropped first (None: no bound); a dropped one is
    traced again when next called, and its compile is usually a lookup in the context's
    cache."""
    kwargs = dict(target=target, context=context, optimize=optimize, use_blas=use_blas,
                  opt_level=opt_level, max_specializations=max_specializations)
    if fn is None:
        return lambda f: JittedFunction(f, **kwargs)
    return JittedFunction(fn, **kwargs)
