"""Dtype promotion as the installed NumPy does it.

The library promotes as NumPy 2 does (NEP 50): typed operands (traced values, NumPy arrays
and scalars) by their dtypes, Python scalars weakly (they take the dtype they meet). NumPy
1.x promotes scalars and 0-d arrays by value instead ("value-based casting": float32 array
* np.float64(0.5) is float32, int32 array + 2**31 is int64), and Debian 12 ships NumPy
1.24. So the binding asks the installed NumPy, np.result_type, for the dtype each
elementwise op computes in, given what stands for each operand there (`stand_in`):

- a traced value: its dtype, which promotes as an array's, or, for a 0-d argument of the
  jitted function, the value of the call it was traced for (a Python scalar or a 0-d
  array: NumPy promotes those by value, or weakly);
- a NumPy array or scalar, and a Python number: itself.

Where NumPy's dtype is not the one the library would take, the operands that differ are cast
to it first (casts that NumPy itself makes: a float64 scalar met with a float32 array
becomes float32). A jitted function keys each 0-d argument by `scalar_class`, how it
promotes against every supported dtype, so that a program traced for one value serves only
values that promote alike. A 0-d value computed inside the function has no value at trace
time, and promotes by its dtype.
"""
import numpy as np

from ._dtypes import SUPPORTED, SUPPORTED_DTYPES
from ._errors import DtypeError


def scalar_class(value):
    """How a 0-d argument promotes: NumPy's result dtype against an array of each supported
    dtype (or the error NumPy raises). Two values of one class promote alike everywhere."""
    out = []
    for probe in SUPPORTED_DTYPES:
        try:
            out.append(np.result_type(probe, value).str)
        except (TypeError, ValueError, OverflowError) as e:
            out.append(type(e).__name__)
    return tuple(out)


def stand_in(x):
    """What stands for operand x in np.result_type (see the module docstring)."""
    scalar = getattr(x, "scalar", None)
    if scalar is not None:
        return scalar
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype) and not isinstance(x, (np.ndarray, np.generic)):
        return dtype                       # a traced value
    return x


def _library_dtype(operands):
    """The dtype the library computes an elementwise op in (NEP 50: typed operands by
    dtype, Python scalars weak), or None where NumPy's answer is to be taken as it is."""
    python = [x for x in operands if _is_python_scalar(x)]
    typed = [x.dtype for x in operands if not _is_python_scalar(x)]
    if not typed:
        return None
    dtype = np.result_type(*typed)
    if any(isinstance(x, float) for x in python) and dtype.kind in "biu":
        return np.dtype(np.float64)
    if any(not isinstance(x, (bool, float)) for x in python) and dtype.kind == "b":
        return np.dtype(np.int64)
    return dtype


def _is_python_scalar(x):
    """A Python bool, int or float (np.float64 subclasses float, but has a dtype)."""
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def numpy_dtype(operands, what):
    """The dtype the installed NumPy computes an elementwise op on `operands` in, or None
    when the library's promotion gives the same. Raises for a dtype tinymlir lacks; returns
    np.dtype(object) where NumPy would compute with Python objects (an int beyond int64)."""
    try:
        dtype = np.result_type(*[stand_in(x) for x in operands])
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: NumPy cannot promote these operands ({e})") from None
    if dtype == np.dtype(object):
        return dtype
    if dtype == _library_dtype(operands):
        return None
    if dtype not in SUPPORTED_DTYPES:
        raise DtypeError(f"{what}: NumPy computes this op in {dtype}, which tinymlir does not "
                         f"support ({SUPPORTED})")
    return dtype


def cast_constant(value, dtype):
    """A NumPy constant cast to the op's dtype, as NumPy casts it before computing."""
    return np.asarray(value).astype(dtype)

