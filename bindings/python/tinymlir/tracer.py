"""Tracers: the stand-ins a jitted function computes with while it is traced.

A Tracer is a tm_value of the trace being recorded, with its shape and dtype (read back from
the library, which infers them; the binding never guesses). Its operators record C API ops:
`x * g + b` records tm_op_mul and tm_op_add. Operands that are not tracers enter the trace
as the C API has them: Python scalars as tm_op_scalar (weak, NumPy-style: f32 * 0.5 stays
f32) and NumPy arrays or scalars as tm_op_constant (part of the program).

Shape and dtype errors come from the library, at the op that caused them, with a message
that names the op and the shapes.
"""
import contextlib
import threading

import numpy as np

from . import capi
from ._dtypes import from_tm, to_tm
from ._errors import OutOfRangeError

_local = threading.local()


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


def lift(state, x):
    """The tm_value of an operand in `state`'s trace."""
    if isinstance(x, Tracer):
        if x._state is not state:
            raise TypeError(
                f"a traced value of '{x._state.name}' was used in the trace of "
                f"'{state.name}': tracers must not leak out of the function being traced")
        return x.value
    # NumPy scalars first: np.float64 subclasses float, but like every NumPy value it has a
    # dtype, and typed values promote as arrays do (NumPy 2's rule, NEP 50): f32 tensor *
    # np.float64(0.5) is f64, exactly as with np.asarray(0.5). Only Python's own numbers
    # are weak scalars that take the tensor's dtype.
    if isinstance(x, (np.ndarray, np.generic)):
        return capi.tm_op_constant(state.ptr, np.asarray(x))
    # bool before int: bool is an int subclass, and a Python bool is a TM_BOOL scalar.
    if isinstance(x, bool):
        return capi.tm_op_scalar(state.ptr, capi.TM_BOOL, float(x))
    if isinstance(x, int):
        return capi.tm_op_scalar(state.ptr, capi.TM_I64, float(x))
    if isinstance(x, float):
        return capi.tm_op_scalar(state.ptr, capi.TM_F64, x)
    raise TypeError(f"cannot use a {type(x).__name__} in a traced computation (expected a "
                    "traced value, a Python number or a NumPy array)")


def record(c_op, *operands, args=(), what=None):
    """Records c_op(trace, *operand values, *args) and returns the result's Tracer."""
    state = state_of(operands, what or c_op.__name__)
    values = [lift(state, x) for x in operands]
    return Tracer(state, c_op(state.ptr, *values, *args))


def _normalize_axes(axis, ndim, what):
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise OutOfRangeError(f"{what}: axis {a} is outside the {ndim} axes")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise OutOfRangeError(f"{what}: repeated axis in {axis}")
    return tuple(out)


class Tracer:
    """A traced array: shape and dtype are static, values exist only when the compiled
    program runs."""

    __slots__ = ("_state", "value", "shape", "dtype")
    # NumPy defers to our reflected operators (ndarray * tracer -> Tracer.__rmul__) instead
    # of trying to make an object array out of a tracer.
    __array_ufunc__ = None

    def __init__(self, state, value):
        self._state = state
        self.value = value
        dtype, shape = capi.tm_value_type(state.ptr, value)
        self.dtype = from_tm(dtype)
        self.shape = shape

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self):
        return f"Tracer(shape={self.shape}, dtype={self.dtype})"

    # ---- Values that only exist at run time ------------------------------------------------

    def _no_value(self, what):
        raise TypeError(
            f"{what} on a traced value ({self!r}) needs its data, which exists only when the "
            "compiled program runs: data-dependent control flow cannot be traced. Compute "
            "both branches and pick with tinymlir.where(cond, a, b), or pass the value as a "
            "static keyword argument.")

    def __bool__(self):
        self._no_value("bool() (a Python `if`, `while`, `and`, `or` or `not`)")

    def __int__(self):
        self._no_value("int()")

    def __float__(self):
        self._no_value("float()")

    def __index__(self):
        self._no_value("using it as a Python index")

    def __array__(self, dtype=None):
        self._no_value("converting it to a NumPy array")

    # ---- Arithmetic --------------------------------------------------------------------------

    def __add__(self, other): return record(capi.tm_op_add, self, other)
    def __radd__(self, other): return record(capi.tm_op_add, other, self)
    def __sub__(self, other): return record(capi.tm_op_sub, self, other)
    def __rsub__(self, other): return record(capi.tm_op_sub, other, self)
    def __mul__(self, other): return record(capi.tm_op_mul, self, other)
    def __rmul__(self, other): return record(capi.tm_op_mul, other, self)
    def __truediv__(self, other): return record(capi.tm_op_div, self, other)
    def __rtruediv__(self, other): return record(capi.tm_op_div, other, self)
    def __pow__(self, other): return record(capi.tm_op_pow, self, other)
    def __rpow__(self, other): return record(capi.tm_op_pow, other, self)
    def __matmul__(self, other): return record(capi.tm_op_matmul, self, other)
    def __rmatmul__(self, other): return record(capi.tm_op_matmul, other, self)
    def __neg__(self): return record(capi.tm_op_neg, self)
    def __pos__(self): return self
    def __abs__(self): return record(capi.tm_op_abs, self)

    # ---- Comparisons (bool results) --------------------------------------------------------
    # The C API has less, greater and equal; the other three are composed from them with
    # NumPy's NaN behaviour (NaN compares unequal, and neither <= nor >= anything).

    def __lt__(self, other): return record(capi.tm_op_less, self, other)
    def __gt__(self, other): return record(capi.tm_op_greater, self, other)
    def __eq__(self, other): return record(capi.tm_op_equal, self, other)

    def __ne__(self, other):
        return record(capi.tm_op_equal, record(capi.tm_op_equal, self, other), False)

    def __le__(self, other):
        return record(capi.tm_op_where, self < other, True, self == other)

    def __ge__(self, other):
        return record(capi.tm_op_where, self > other, True, self == other)

    __hash__ = None  # == records an op, so tracers cannot be dict keys

    # ---- Shapes ------------------------------------------------------------------------------

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return record(capi.tm_op_reshape, self, args=([int(d) for d in shape],))

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return record(capi.tm_op_transpose, self,
                      args=([int(a) for a in axes] if axes else None,))

    @property
    def T(self):
        return self.transpose()

    def astype(self, dtype):
        return record(capi.tm_op_cast, self, args=(to_tm(dtype, "astype"),))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, key):
        # Integer tensors index rows (a gather): table[ids].
        if isinstance(key, Tracer) or (isinstance(key, np.ndarray) and key.dtype.kind in "iu"):
            return record(capi.tm_op_gather, self, key)
        return _static_index(self, key)

    # ---- Reductions --------------------------------------------------------------------------

    def sum(self, axis=None, keepdims=False):
        return _reduce(capi.tm_op_reduce_sum, self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _reduce(capi.tm_op_reduce_max, self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _reduce(capi.tm_op_reduce_mean, self, axis, keepdims)

    def var(self, axis=None, keepdims=False):
        """Population variance (ddof 0), as the C API and NumPy's default."""
        return _reduce(capi.tm_op_reduce_var, self, axis, keepdims)


def _reduce(c_op, x, axis, keepdims):
    """A reduction over one axis, several or all (axis=None), from the C API's one-axis
    reductions: the reduced axes are moved last and merged into one."""
    if axis is not None and not isinstance(axis, (tuple, list)):
        return record(c_op, x, args=(int(axis), int(bool(keepdims))))
    axes = tuple(range(x.ndim)) if axis is None else _normalize_axes(axis, x.ndim, c_op.__name__)
    if len(axes) == 1:
        return record(c_op, x, args=(axes[0], int(bool(keepdims))))
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
    if Ellipsis not in key:
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
