"""Functions for traced code: tm.exp(x), tm.softmax(x), tm.where(c, a, b), ...

Each records the C API op of the same name (tm.gelu_tanh records tm_op_gelu_tanh, tm.concat
tm_op_concat; composites such as softmax, layer_norm and gelu_tanh are expanded by the
library into primitives that fusion sees). They work on tracers, Python scalars and NumPy
arrays, inside a function being traced by @tinymlir.jit. There is no NumPy fallback outside
a trace: calling them there raises a TypeError.
"""
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

from . import capi
from ._args import index_arg, real_arg
from ._dtypes import to_tm
from .tracer import Axis, Operand, Tracer, constant_rows, lift, lift_all, record, state_of


def _unary_function(op, name):
    """tinymlir.<name>(x): records the library's unary op `op` (tm_op_unary)."""
    def unary(x: Operand) -> Tracer:
        return record(lambda trace, value: capi.tm_op_unary(trace, op, value), x,
                      what=f"tinymlir.{name}")
    unary.__name__ = unary.__qualname__ = name
    unary.__doc__ = f"Elementwise {name}(x) (tm_op_unary with the library's op {op})."
    return unary


# One function per unary op of the loaded library's table (tm_unary_op_count and
# tm_unary_op_name: core/trace/unary_ops.def), named as the op: tinymlir.exp,
# tinymlir.sigmoid, ... An op added to the library needs no change here. (neg is also the
# unary minus of a Tracer; abs, as NumPy's, shadows the builtin here.)
UNARY_OPS = tuple(capi.tm_unary_op_name(i) for i in range(capi.tm_unary_op_count()))
for _op, _name in enumerate(UNARY_OPS):
    globals()[_name] = _unary_function(_op, _name)
del _op, _name

__all__ = list(UNARY_OPS) + [
    "maximum", "minimum", "where", "matmul", "softmax", "layer_norm", "gelu_tanh", "concat",
    "gather", "causal_mask", "reshape", "transpose", "sum", "max", "mean", "var"]


def maximum(a: Operand, b: Operand) -> Tracer:
    """Elementwise maximum; NaN propagates, as in NumPy."""
    return record(capi.tm_op_maximum, a, b, what="tinymlir.maximum")


def minimum(a: Operand, b: Operand) -> Tracer:
    return record(capi.tm_op_minimum, a, b, what="tinymlir.minimum")


def where(cond: Operand, a: Operand, b: Operand) -> Tracer:
    """a where cond (a bool tensor) is true, else b; all three broadcast together."""
    return record(capi.tm_op_where, cond, a, b, what="tinymlir.where")


def matmul(a: Operand, b: Operand) -> Tracer:
    return record(capi.tm_op_matmul, a, b, what="tinymlir.matmul")


def softmax(x: Operand, axis: int = -1) -> Tracer:
    """Numerically stable softmax along one axis."""
    return record(capi.tm_op_softmax, x, args=(index_arg(axis, "axis"),),
                  what="tinymlir.softmax")


def layer_norm(x: Operand, gamma: Operand, beta: Operand, eps: float = 1e-5) -> Tracer:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis."""
    return record(capi.tm_op_layer_norm, x, gamma, beta, args=(real_arg(eps, "eps"),),
                  what="tinymlir.layer_norm")


def gelu_tanh(x: Operand) -> Tracer:
    """GELU, tanh approximation (GPT-2's gelu_new)."""
    return record(capi.tm_op_gelu_tanh, x, what="tinymlir.gelu_tanh")


def concat(xs: Iterable[Operand], axis: int = 0) -> Tracer:
    """Joins tensors along an existing axis (NumPy's concatenate); dtypes are promoted."""
    xs = list(xs)
    axis = index_arg(axis, "axis")
    state = state_of(xs, "tinymlir.concat")
    return Tracer(state, capi.tm_op_concat(state.ptr, lift_all(state, xs), axis))


def gather(table: Operand, ids: Union[Operand, Sequence[int]]) -> Tracer:
    """Rows of a table: out[i..., :] = table[ids[i...], :] (ids: int32 or int64). ids known
    at trace time (an array, a list, an int) are checked as NumPy indexes: negative ones
    count from the end, and one outside the rows raises IndexError."""
    if not isinstance(ids, Tracer) and isinstance(table, (Tracer, np.ndarray)):
        ids = constant_rows(table, ids, "tinymlir.gather")
    return record(capi.tm_op_gather, table, ids, what="tinymlir.gather")


def causal_mask(rows: int, cols: int, offset: int = 0, dtype: Any = np.float32) -> Tracer:
    """A (rows, cols) additive mask: 0 where col <= row + offset, the dtype's lowest finite
    value elsewhere. Needs a current trace, since it has no tensor operand."""
    rows, cols = index_arg(rows, "rows"), index_arg(cols, "cols")
    offset = index_arg(offset, "offset")
    state = state_of((), "tinymlir.causal_mask")
    value = capi.tm_op_causal_mask(state.ptr, rows, cols, offset, to_tm(dtype, "causal_mask"))
    return Tracer(state, value)


def reshape(x: Operand, shape: Sequence[int]) -> Tracer:
    return _as_tracer(x, "tinymlir.reshape").reshape(shape)


def transpose(x: Operand, axes: Optional[Sequence[int]] = None) -> Tracer:
    return _as_tracer(x, "tinymlir.transpose").transpose(axes)


def sum(x: Operand, axis: Axis = None, keepdims: bool = False) -> Tracer:  # noqa: A001 (as np.sum)
    return _as_tracer(x, "tinymlir.sum").sum(axis, keepdims=keepdims)


def max(x: Operand, axis: Axis = None, keepdims: bool = False) -> Tracer:  # noqa: A001 (as np.max)
    return _as_tracer(x, "tinymlir.max").max(axis, keepdims=keepdims)


def mean(x: Operand, axis: Axis = None, keepdims: bool = False) -> Tracer:
    return _as_tracer(x, "tinymlir.mean").mean(axis, keepdims=keepdims)


def var(x: Operand, axis: Axis = None, keepdims: bool = False) -> Tracer:
    return _as_tracer(x, "tinymlir.var").var(axis, keepdims=keepdims)


def _as_tracer(x: Operand, what: str) -> Tracer:
    """x itself if traced; a constant or scalar of the current trace otherwise."""
    if isinstance(x, Tracer):
        return x
    state = state_of((), what)
    return Tracer(state, lift(state, x))
