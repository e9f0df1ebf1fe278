"""Functions for traced code: tm.exp(x), tm.softmax(x), tm.where(c, a, b), ...

Every op of the loaded library's tables is a function here, made at import: the unary ops
(tm_unary_op_count, tm_unary_op_name) and the ops of tm_op, from their signatures
(tm_op_count, tm_op_signature: "softmax(x, axis: int = -1)" is tinymlir.softmax(x, axis=-1)).
An op added to the library needs no change here. Composites such as softmax, layer_norm and
gelu_tanh are expanded by the library into primitives that fusion sees. The functions work
on tracers, Python scalars and NumPy arrays, inside a function being traced by
@tinymlir.jit. There is no NumPy fallback outside a trace: calling them there raises a
TypeError. A few take NumPy's spelling instead (reshape, transpose, sum, max, mean, var:
the Tracer methods of the same name), and gather checks indices known at trace time.
"""
import inspect
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import capi
from ._args import flag_arg, index_arg, real_arg
from ._dtypes import to_tm
from .tracer import (Axis, Operand, Tracer, constant_rows, lift, lift_all, promote, record,
                     state_of)


def _unary_function(op, name):
    """tinymlir.<name>(x): records the library's unary op `op` (tm_op_unary)."""
    def unary(x: Operand) -> Tracer:
        return record(lambda trace, value: capi.tm_op_unary(trace, op, value), x,
                      what=f"tinymlir.{name}")
    unary.__name__ = unary.__qualname__ = name
    unary.__doc__ = f"Elementwise {name}(x) (tm_op_unary with the library's op {op})."
    return unary


def _parameters(signature):
    """[(name, kind, default text or None)] of a signature; kind "value" for a bare name."""
    inside = signature[signature.index("(") + 1:-1]
    out = []
    for item in filter(None, (p.strip() for p in inside.split(","))):
        default = None
        if "=" in item:
            item, default = (x.strip() for x in item.split("=", 1))
        name, _, kind = (x.strip() for x in item.partition(":"))
        out.append((name, kind or "value", default))
    return out


# The dtype names of the signatures' defaults ("dtype: dtype = f32").
_DTYPE_NAMES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32,
                "i64": np.int64, "bool": np.bool_}


def _default(kind, text):
    if kind == "dtype":
        return np.dtype(_DTYPE_NAMES[text])
    if kind == "ints":
        return ()
    if kind == "real":
        return float(text)
    return int(text)


# Comparisons lift a Python int by what it is compared with (tracer.py's _lift_int).
_COMPARISONS = ("less", "greater", "equal")
# The elementwise ops whose operands promote together as the installed NumPy promotes them
# (tracer.promote); where's last two operands too.
_PROMOTING = _COMPARISONS + ("add", "sub", "mul", "div", "pow", "maximum", "minimum")

# The annotation of each kind of parameter of a signature.
_ANNOTATIONS = {"value": Operand, "values": Sequence[Operand], "int": int, "bool": bool,
                "dtype": Any, "ints": Sequence[int], "real": float}


def _table_function(kind, signature):
    """tinymlir.<name>(...): records op `kind` of the library's table through tm_op, its
    parameters those of its signature."""
    name = signature[:signature.index("(")]
    params = _parameters(signature)
    what = f"tinymlir.{name}"

    def op(*args, **kwargs):
        if len(args) > len(params):
            raise TypeError(f"{what}() takes {len(params)} arguments ({signature}), "
                            f"{len(args)} given")
        bound = dict(zip((p[0] for p in params), args))
        for key, value in kwargs.items():
            if key not in (p[0] for p in params):
                raise TypeError(f"{what}() got an unexpected argument '{key}' ({signature})")
            if key in bound:
                raise TypeError(f"{what}() got two values for '{key}'")
            bound[key] = value
        operands, scalars, lists, real = [], [], [], 0.0
        for pname, pkind, default in params:
            if pname not in bound:
                if default is None:
                    raise TypeError(f"{what}() needs '{pname}' ({signature})")
                bound[pname] = _default(pkind, default)
            value = bound[pname]
            if pkind == "value":
                operands.append(value)
            elif pkind == "values":
                operands.extend(list(value))
            elif pkind == "int":
                scalars.append(index_arg(value, pname))
            elif pkind == "bool":
                scalars.append(flag_arg(value, pname))
            elif pkind == "dtype":
                scalars.append(to_tm(value, name))
            elif pkind == "ints":
                lists.append([index_arg(v, pname) for v in value])
            elif pkind == "real":
                real = real_arg(value, pname)
        if len(lists) > 1 and len({len(v) for v in lists}) > 1:
            raise ValueError(f"{what}: " + " and ".join(
                f"{p[0]} has {len(v)} entries" for p, v in
                zip((p for p in params if p[1] == "ints"), lists)))
        state = state_of(operands, what)
        if name in _PROMOTING:
            operands = promote(state, operands, what, name in _COMPARISONS)
        elif name == "where":
            operands = [operands[0], *promote(state, operands[1:], what, False)]
        values = lift_all(state, operands, compare=name in _COMPARISONS)
        ints = scalars + [v for lst in lists for v in lst]
        return Tracer(state, capi.tm_op(state.ptr, kind, values, ints, real))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"{signature} (tm_op with the library's op {kind})."
    # The signature's parameters, annotated, for help() and type checks.
    op.__signature__ = inspect.Signature(
        [inspect.Parameter(pname, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                           default=(inspect.Parameter.empty if default is None
                                    else _default(pkind, default)),
                           annotation=_ANNOTATIONS[pkind])
         for pname, pkind, default in params], return_annotation=Tracer)
    op.__annotations__ = {**{p[0]: _ANNOTATIONS[p[1]] for p in params}, "return": Tracer}
    return op


# One function per unary op of the loaded library's table (core/trace/unary_ops.def), named
# as the op: tinymlir.exp, tinymlir.sigmoid, ... (neg is also the unary minus of a Tracer;
# abs, as NumPy's, shadows the builtin here).
UNARY_OPS = tuple(capi.tm_unary_op_name(i) for i in range(capi.tm_unary_op_count()))
for _op, _name in enumerate(UNARY_OPS):
    globals()[_name] = _unary_function(_op, _name)

# One function per op of tm_op (core/trace/ops.def), from its signature.
TABLE_OPS = tuple(capi.tm_op_signature(i) for i in range(capi.tm_op_count()))
for _op, _signature in enumerate(TABLE_OPS):
    globals()[_signature[:_signature.index("(")]] = _table_function(_op, _signature)
del _op, _name, _signature

__all__ = list(UNARY_OPS) + [s[:s.index("(")] for s in TABLE_OPS] + [
    "sum", "max", "mean", "var"]


def gather(table: Operand, ids: Union[Operand, Sequence[int]]) -> Tracer:
    """Rows of a table: out[i..., :] = table[ids[i...], :] (ids: int32 or int64). ids known
    at trace time (an array, a list, an int) are checked as NumPy indexes: negative ones
    count from the end, and one outside the rows raises IndexError."""
    if not isinstance(ids, Tracer) and isinstance(table, (Tracer, np.ndarray)):
        ids = constant_rows(table, ids, "tinymlir.gather")
    return record(capi.tm_op_gather, table, ids, what="tinymlir.gather")


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
