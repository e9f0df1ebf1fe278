"""Tracers: the stand-ins a jitted function computes with while it is traced.

A Tracer is a tm_value of the trace being recorded, with its shape and dtype (read back from
the library, which infers them; the binding never guesses). Its operators record C API ops:
`x * g + b` records tm_op_mul and tm_op_add. Operands that are not tracers enter the trace
as the C API has them: Python scalars as tm_op_scalar (weak, NumPy-style: f32 * 0.5 stays
f32) and NumPy arrays or scalars as tm_op_constant (part of the program). A Python int that
a double cannot hold exactly goes in as an exact int64 constant (see _lift_int). Elementwise
ops promote as the installed NumPy does (tinymlir._promotion): where its dtype is not the
library's, the operands are cast to it first.

Shape and dtype errors come from the library, at the op that caused them, with a message
that names the op and the shapes.
"""
import contextlib
import threading
from typing import Any, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from . import capi
from ._args import flag_arg, index_arg
from ._dtypes import from_tm, to_tm
from ._errors import OutOfRangeError
from ._promotion import cast_constant, numpy_dtype

_local = threading.local()

# What traced ops take: a traced value, a NumPy array or scalar, or a Python number.
Operand = Union["Tracer", np.ndarray, np.generic, bool, int, float]
# A reduction's axis: one, several, or all (None).
Axis = Union[int, Sequence[int], None]


class TraceState:
    """The trace one jitted call is recording (a _handles.Trace) and its name."""

    def __init__(self, trace, name):
        self.trace = trace
        self.name = name

    @property
    def ptr(self):
        if self.trace.closed:
            raise TypeError(
                f"a traced value of '{self.name}' was used after its trace ended: tracers "
                "must not leak out of the function being traced (return them instead)")
        return self.trace.ptr


def current():
    """The trace being recorded on this thread, or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def tracing(state):
    """Makes `state` the current trace. Traces nest: a jitted function called with NumPy
    arrays while another is being traced records (and runs) its own program."""
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(state)
    try:
        yield state
    finally:
        stack.pop()


def state_of(operands, what):
    for x in operands:
        if isinstance(x, Tracer):
            return x._state
    state = current()
    if state is None:
        raise TypeError(f"{what} records an op in a trace, so it needs a traced value: call it "
                        "inside a function decorated with @tinymlir.jit")
    return state


def lift(state, x, others=(), compare=False):
    """The tm_value of an operand in `state`'s trace. `others` are the op's other operands
    and `compare` tells whether the op is a comparison: a Python int enters according to
    what it meets (see _lift_int)."""
    if isinstance(x, Tracer):
        if x._state is not state:
            raise TypeError(
                f"a traced value of '{x._state.name}' was used in the trace of "
                f"'{state.name}': tracers must not leak out of the function being traced")
        return x.value
    # NumPy scalars first: np.float64 subclasses float, but like every NumPy value it has a
    # dtype and enters as a typed constant. Only Python's own numbers are weak scalars that
    # take the tensor's dtype. (Where the installed NumPy promotes a NumPy scalar by its
    # value, record() has cast it already.)
    if isinstance(x, (np.ndarray, np.generic)):
        return capi.tm_op_constant(state.ptr, np.asarray(x))
    # bool before int: bool is an int subclass, and a Python bool is a TM_BOOL scalar.
    if isinstance(x, bool):
        return capi.tm_op_scalar(state.ptr, capi.TM_BOOL, float(x))
    if isinstance(x, int):
        return _lift_int(state, x, others, compare)
    if isinstance(x, float):
        return capi.tm_op_scalar(state.ptr, capi.TM_F64, x)
    raise TypeError(f"cannot use a {type(x).__name__} in a traced computation (expected a "
                    "traced value, a Python number or a NumPy array)")


def lift_all(state, operands, compare=False):
    """The tm_values of one op's operands, each lifted knowing the others."""
    return [lift(state, x, operands[:i] + operands[i + 1:], compare)
            for i, x in enumerate(operands)]


def record(c_op, *operands, args=(), what=None):
    """Records c_op(trace, *operand values, *args) and returns the result's Tracer."""
    what = what or c_op.__name__
    state = state_of(operands, what)
    compare = c_op in _COMPARISONS
    if c_op in _PROMOTING:
        operands = promote(state, operands, what, compare)
    elif c_op is capi.tm_op_where:   # the condition is no part of the promotion
        operands = (operands[0], *promote(state, operands[1:], what, compare))
    values = lift_all(state, operands, compare=compare)
    return Tracer(state, c_op(state.ptr, *values, *args))


_COMPARISONS = (capi.tm_op_less, capi.tm_op_greater, capi.tm_op_equal)
# The elementwise ops whose operands promote together (tm_op_where's last two, too).
_PROMOTING = _COMPARISONS + (capi.tm_op_add, capi.tm_op_sub, capi.tm_op_mul, capi.tm_op_div,
                             capi.tm_op_pow, capi.tm_op_maximum, capi.tm_op_minimum)


def promote(state, operands, what, compare):
    """The operands of one elementwise op, cast to the dtype the installed NumPy computes it
    in where that is not the library's (tinymlir._promotion)."""
    dtype = numpy_dtype(operands, what) if len(operands) > 1 else None
    if dtype is None:
        return operands
    if dtype == np.dtype(object):
        # NumPy 1.x computes with Python objects for an int beyond int64. A comparison gets
        # its exact answer from _lift_int, and with floats the int becomes a float (the
        # values NumPy's objects hold, in float64); integer arithmetic cannot be traced.
        big = next(x for x in operands if type(x) is int)
        if compare or any(_kind(x) == "f" for x in operands):
            return operands
        raise OverflowError(f"Python integer {big} out of bounds for int64: NumPy computes "
                            "with it as a Python object, which cannot be traced")
    out = []
    for x in operands:
        if isinstance(x, Tracer) and x.dtype != dtype:
            x = Tracer(state, capi.tm_op_cast(state.ptr, lift(state, x), to_tm(dtype)))
        elif isinstance(x, (np.ndarray, np.generic)) and x.dtype != dtype:
            x = cast_constant(x, dtype)
        out.append(x)
    return out


def _kind(x):
    """The dtype kind of an operand ("f" for a Python float), or None."""
    if isinstance(x, float) and not isinstance(x, np.generic):
        return "f"
    dtype = getattr(x, "dtype", None)
    return dtype.kind if isinstance(dtype, np.dtype) else None
_EXACT_IN_DOUBLE = 2 ** 53   # every int of at most this magnitude is a double exactly


def _lift_int(state, x, others, compare):
    """A Python int, weak as NumPy 2 has it (NEP 50): it takes the dtype of what it meets.

    tm_op_scalar carries the value as a double, exact up to 2**53, and the library checks
    it against the tensor's dtype; so the NumPy rules that need the exact int are applied
    here, where it still is one:
    - met with floats, it becomes that float (np.ones(2) * 2**64 is a float64 product);
    - met with ints (or bools, or nothing: NumPy's default int64), it must fit that dtype,
      else OverflowError as in NumPy 2 ("Python integer 2147483648 out of bounds for
      int32"), but a comparison has an exact answer then, as in NumPy 2 (_beyond_dtype);
    - an int beyond 2**53 that fits goes in as an exact int64 constant (it only fits int64,
      so being a strong int64 changes no result dtype)."""
    partner = _partner_dtype(others)
    if partner is not None and partner.kind == "f":
        if abs(x) <= _EXACT_IN_DOUBLE:
            return capi.tm_op_scalar(state.ptr, capi.TM_I64, float(x))
        # float() rounds to nearest, and raises OverflowError beyond float64, as NumPy does.
        return capi.tm_op_scalar(state.ptr, capi.TM_F64, float(x))
    dtype = partner if partner is not None and partner.kind in "iu" else np.dtype(np.int64)
    info = np.iinfo(dtype)
    if not info.min <= x <= info.max:
        if compare:
            return _beyond_dtype(state, x)
        raise OverflowError(f"Python integer {x} out of bounds for {dtype}")
    if abs(x) <= _EXACT_IN_DOUBLE:
        return capi.tm_op_scalar(state.ptr, capi.TM_I64, float(x))
    return capi.tm_op_constant(state.ptr, np.asarray(x, np.int64))


def _partner_dtype(others):
    """The dtype a weak Python int meets: NumPy's promotion of the other operands' dtypes
    (a Python float counts as a float, other Python scalars as nothing), or None."""
    dtypes = [y.dtype for y in others if isinstance(y, (Tracer, np.ndarray, np.generic))]
    if any(isinstance(y, float) for y in others):
        dtypes.append(np.dtype(np.float64))
    return np.result_type(*dtypes) if dtypes else None


def _beyond_dtype(state, x):
    """A comparand standing for an int beyond the range of the integer (or bool) values it
    is compared with, so that <, > and == give NumPy 2's exact answers (all True or all
    False). An int64 constant when x fits int64 (the library compares int32 and int64
    exactly); else +-2**64 as a float64 constant: every int64 converts to a float64 of
    magnitude at most 2**63, strictly inside it, as every int64 is strictly inside x."""
    if np.iinfo(np.int64).min <= x <= np.iinfo(np.int64).max:
        return capi.tm_op_constant(state.ptr, np.asarray(x, np.int64))
    return capi.tm_op_constant(state.ptr, np.asarray(2.0 ** 64 if x > 0 else -2.0 ** 64))


def _normalize_axes(axis, ndim, what):
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        a = index_arg(a, "axis")
        if not -ndim <= a < ndim:
            raise OutOfRangeError(f"{what}: axis {a} is outside the {ndim} axes")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise OutOfRangeError(f"{what}: repeated axis in {axis}")
    return tuple(out)


class Tracer:
    """A traced array: shape and dtype are static, values exist only when the compiled
    program runs."""

    __slots__ = ("_state", "value", "shape", "dtype", "scalar")
    # NumPy defers to our reflected operators (ndarray * tracer -> Tracer.__rmul__) instead
    # of trying to make an object array out of a tracer.
    __array_ufunc__ = None

    def __init__(self, state: TraceState, value: Any, scalar: Any = None):
        self._state = state
        self.value = value
        # For a 0-d argument of the jitted function: the value of the call it was traced
        # for, by which NumPy promotes it (tinymlir._promotion); else None.
        self.scalar = scalar
        dtype, shape = capi.tm_value_type(state.ptr, value)
        self.dtype = from_tm(dtype)
        self.shape = shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        return f"Tracer(shape={self.shape}, dtype={self.dtype})"

    # ---- Values that only exist at run time ------------------------------------------------

    def _no_value(self, what: str) -> Any:
        raise TypeError(
            f"{what} on a traced value ({self!r}) needs its data, which exists only when the "
            "compiled program runs: data-dependent control flow cannot be traced. Compute "
            "both branches and pick with tinymlir.where(cond, a, b), or pass the value as a "
            "static keyword argument.")

    def __bool__(self) -> bool:
        self._no_value("bool() (a Python `if`, `while`, `and`, `or` or `not`)")

    def __int__(self) -> int:
        self._no_value("int()")

    def __float__(self) -> float:
        self._no_value("float()")

    def __index__(self) -> int:
        self._no_value("using it as a Python index")

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        self._no_value("converting it to a NumPy array")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """NumPy functions called on a tracer (NEP 18). Those whose NumPy implementation
        calls the array's method of the same name (np.sum(x) calls x.sum) run it; any other
        would convert the tracer to an array, which has no data: the error says what to
        use instead."""
        implementation = getattr(func, "_implementation", None)
        if func in _NUMPY_METHOD_BACKED and implementation is not None:
            return implementation(*args, **kwargs)
        hint = _NUMPY_HINTS.get(func.__name__, "the traced value's methods and operators, or "
                                "tinymlir's functions (tinymlir.exp, tinymlir.where, ...)")
        raise TypeError(f"np.{func.__name__} on a traced value: NumPy functions cannot run "
                        f"on traced values; use {hint}")

    # ---- Arithmetic --------------------------------------------------------------------------

    def __add__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_add, self, other)

    def __radd__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_add, other, self)

    def __sub__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_sub, self, other)

    def __rsub__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_sub, other, self)

    def __mul__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_mul, self, other)

    def __rmul__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_mul, other, self)

    def __truediv__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_div, self, other)

    def __rtruediv__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_div, other, self)

    def __pow__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_pow, self, other)

    def __rpow__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_pow, other, self)

    def __matmul__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_matmul, self, other)

    def __rmatmul__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_matmul, other, self)

    def __neg__(self) -> "Tracer":
        return record(capi.tm_op_neg, self)

    def __pos__(self) -> "Tracer":
        return self

    def __abs__(self) -> "Tracer":
        return record(capi.tm_op_abs, self)

    # ---- Comparisons (bool results) --------------------------------------------------------
    # The C API has less, greater and equal; the other three are composed from them with
    # NumPy's NaN behaviour (NaN compares unequal, and neither <= nor >= anything).

    def __lt__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_less, self, other)

    def __gt__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_greater, self, other)

    def __eq__(self, other: "Operand") -> "Tracer":  # type: ignore[override]
        return record(capi.tm_op_equal, self, other)

    def __ne__(self, other: "Operand") -> "Tracer":  # type: ignore[override]
        return record(capi.tm_op_equal, record(capi.tm_op_equal, self, other), False)

    def __le__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_where, self < other, True, self == other)

    def __ge__(self, other: "Operand") -> "Tracer":
        return record(capi.tm_op_where, self > other, True, self == other)

    __hash__ = None  # == records an op, so tracers cannot be dict keys

    # ---- Shapes ------------------------------------------------------------------------------

    def reshape(self, *shape: Any, order: str = "C", copy: Optional[bool] = None) -> "Tracer":
        """As ndarray.reshape; `copy` has nothing to decide here (traced values are never
        views), and only the C order is traced."""
        if order != "C":
            raise ValueError(f"reshape: order={order!r} cannot be traced (only 'C')")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray)):
            shape = shape[0]
        return record(capi.tm_op_reshape, self, args=([index_arg(d, "shape") for d in shape],))

    def transpose(self, *axes: Any) -> "Tracer":
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return record(capi.tm_op_transpose, self,
                      args=([index_arg(a, "axes") for a in axes] if axes else None,))

    @property
    def T(self) -> "Tracer":
        return self.transpose()

    def astype(self, dtype: Any) -> "Tracer":
        return record(capi.tm_op_cast, self, args=(to_tm(dtype, "astype"),))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self) -> Iterator["Tracer"]:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, key: Any) -> "Tracer":
        # Integer tensors index rows (a gather): table[ids]. Traced ids are checked by the
        # library (see tm_op_gather); ids known now are checked here, as NumPy does.
        if isinstance(key, Tracer):
            return record(capi.tm_op_gather, self, key)
        if isinstance(key, (np.ndarray, list)):
            return record(capi.tm_op_gather, self, constant_rows(self, key, "index"))
        return _static_index(self, key)

    # ---- Reductions --------------------------------------------------------------------------
    # The signatures are ndarray's, so that np.sum(x), np.max(x), np.mean(x) and np.var(x),
    # which call these methods with NumPy's keywords, work on traced values.

    def sum(self, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False, **unsupported: Any) -> "Tracer":
        _numpy_keywords("sum", out, unsupported)
        return _reduce(capi.tm_op_reduce_sum, _as_dtype(self, dtype, "sum"), axis, keepdims)

    def max(self, axis: Axis = None, out: None = None, keepdims: bool = False,
            **unsupported: Any) -> "Tracer":
        _numpy_keywords("max", out, unsupported)
        return _reduce(capi.tm_op_reduce_max, self, axis, keepdims)

    def mean(self, axis: Axis = None, dtype: Any = None, out: None = None,
             keepdims: bool = False, **unsupported: Any) -> "Tracer":
        _numpy_keywords("mean", out, unsupported)
        return _reduce(capi.tm_op_reduce_mean, _as_dtype(self, dtype, "mean"), axis, keepdims)

    def var(self, axis: Axis = None, dtype: Any = None, out: None = None, ddof: int = 0,
            keepdims: bool = False, **unsupported: Any) -> "Tracer":
        """Variance; ddof 0 (the population variance) is the C API's, another ddof scales
        it by n / (n - ddof), as NumPy divides by n - ddof."""
        _numpy_keywords("var", out, unsupported)
        x = _as_dtype(self, dtype, "var")
        y = _reduce(capi.tm_op_reduce_var, x, axis, keepdims)
        ddof = index_arg(ddof, "ddof")
        if ddof == 0:
            return y
        axes = range(x.ndim) if axis is None else _normalize_axes(axis, x.ndim, "var")
        n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        if n - ddof <= 0:
            raise ValueError(f"var: ddof={ddof} leaves no degrees of freedom for {n} values")
        return y * (n / (n - ddof))


def _numpy_keywords(what, out, unsupported):
    """Refuses the NumPy keywords a traced reduction cannot honour, saying what to do."""
    if out is not None:
        raise TypeError(f"{what}: out= cannot be traced (traced values are immutable); "
                        "use the returned value")
    if unsupported:
        names = ", ".join(f"{k}=" for k in unsupported)
        raise TypeError(f"{what}: {names} cannot be traced; supported: axis, dtype, "
                        "keepdims (compute initial or where with tinymlir.where first)")


def _as_dtype(x, dtype, what):
    """x cast to a reduction's dtype= (NumPy accumulates in it and returns it)."""
    return x if dtype is None else x.astype(dtype)


def constant_rows(table, indices, what):
    """Row indices known at trace time (a NumPy integer array, a list of ints, an int), as
    NumPy takes them: negative entries count from the end, and one outside the rows raises
    IndexError naming it and the axis size. The library cannot do this for them: it clamps
    indices that are not program inputs. Returns them as an int64 array."""
    ids = np.asarray(indices)
    if ids.dtype.kind not in "iu":
        if ids.size == 0 and not isinstance(indices, np.ndarray):
            ids = ids.astype(np.int64)   # x[[]] is an empty integer index in NumPy
        elif ids.dtype.kind == "b":
            raise IndexError(f"{what}: boolean masks cannot be traced (the result's shape "
                             "depends on the data); use integer indices, np.nonzero(mask)[0]")
        else:
            raise IndexError(f"{what}: arrays used as indices must be of integer type, "
                             f"not {ids.dtype}")
    if table.ndim == 0:
        raise IndexError(f"{what}: a 0-d traced value has no rows to index")
    rows = table.shape[0]
    outside = ids >= rows if ids.dtype.kind == "u" else (ids < -rows) | (ids >= rows)
    if outside.any():
        raise OutOfRangeError(f"{what}: index {ids[outside].flat[0]} is out of bounds for "
                              f"axis 0 with size {rows}")
    ids = ids.astype(np.int64)
    return np.where(ids < 0, ids + rows, ids)


def _reduce(c_op, x, axis, keepdims):
    """A reduction over one axis, several or all (axis=None), from the C API's one-axis
    reductions: the reduced axes are moved last and merged into one."""
    keepdims = flag_arg(keepdims, "keepdims")
    if axis is not None and not isinstance(axis, (tuple, list)):
        return record(c_op, x, args=(index_arg(axis, "axis"), keepdims))
    axes = tuple(range(x.ndim)) if axis is None else _normalize_axes(axis, x.ndim, c_op.__name__)
    if len(axes) == 1:
        return record(c_op, x, args=(axes[0], keepdims))
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = x if kept + list(axes) == list(range(x.ndim)) else x.transpose(kept + list(axes))
    reduced_size = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    merged = moved.reshape([x.shape[d] for d in kept] + [reduced_size])
    y = record(c_op, merged, args=(-1, 0))
    if keepdims:
        y = y.reshape([1 if d in axes else x.shape[d] for d in range(x.ndim)])
    return y


def _static_index(x, key):
    """x[key] for ints, unit-step slices, Ellipsis and None: one tm_op_slice, then a
    reshape that drops the int-indexed axes and inserts the new ones."""
    key = key if isinstance(key, tuple) else (key,)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > x.ndim:
        raise IndexError(f"too many indices: {n_real} for a traced value of rank {x.ndim}")
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (x.ndim - n_real))
        else:
            expanded.append(k)
    if not any(k is Ellipsis for k in key):   # identity: `in` would call ndarray.__eq__
        expanded.extend([slice(None)] * (x.ndim - n_real))

    begin, end, out_shape = [], [], []
    axis = 0
    for k in expanded:
        if k is None:
            out_shape.append(1)
            continue
        dim = x.shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(dim)
            if step != 1:
                raise IndexError(f"only unit-step slices can be traced (got step {k.step})")
            stop = max(stop, start)
            begin.append(start)
            end.append(stop)
            out_shape.append(stop - start)
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            i = int(k)
            if not -dim <= i < dim:
                raise OutOfRangeError(f"index {i} is out of bounds for axis {axis} with size {dim}")
            i %= dim
            begin.append(i)
            end.append(i + 1)
        elif isinstance(k, (np.ndarray, list, Tracer)):
            raise IndexError(
                f"cannot trace an index array combined with other indices (at axis {axis}): "
                "an index array is traced alone, x[ids], indexing rows; split the index, "
                "e.g. x[i][ids] for x[i, ids]")
        else:
            raise IndexError(
                f"cannot trace an index of type {type(k).__name__}: use ints, unit-step "
                "slices, ..., None, or an integer tensor for rows (a gather)")
        axis += 1

    y = x
    if begin != [0] * x.ndim or end != list(x.shape):
        y = record(capi.tm_op_slice, x, args=(begin, end))
    if tuple(out_shape) != y.shape:
        y = y.reshape(out_shape)
    return y


# NumPy functions whose implementation calls the Tracer's method of the same name (or reads
# its shape), so that they run on traced values (see Tracer.__array_function__).
_NUMPY_METHOD_BACKED = {getattr(np, name) for name in (
    "sum", "max", "amax", "mean", "var", "reshape", "transpose", "shape", "ndim", "size")
    if hasattr(np, name)}

# What to use instead of the NumPy functions people reach for first.
_NUMPY_HINTS = {
    "concatenate": "tinymlir.concat(xs, axis)",
    "stack": "tinymlir.concat of x[None] for each x",
    "where": "tinymlir.where(cond, a, b)",
    "dot": "a @ b or tinymlir.matmul(a, b)",
    "tensordot": "a @ b (after x.reshape and x.transpose)",
    "einsum": "a @ b (after x.reshape and x.transpose)",
    "min": "-tinymlir.max(-x)",
    "amin": "-tinymlir.max(-x)",
    "clip": "tinymlir.minimum(tinymlir.maximum(x, lo), hi)",
    "squeeze": "x.reshape(...)",
    "expand_dims": "x[None] or x.reshape(...)",
    "swapaxes": "x.transpose(axes)",
    "moveaxis": "x.transpose(axes)",
    "take": "x[ids] or tinymlir.gather(x, ids)",
    "std": "tinymlir.sqrt(x.var(...))",
}
