"""Arrays from any producer: what a jitted function takes as an argument, and where its
results go.

An argument becomes a NumPy array that tm_invoke reads in place:

- a NumPy array as it is; a NumPy scalar as a 0-d array;
- a Python bool, int or float as NumPy types it (np.asarray: bool, int64, float64), keeping
  the scalar itself for promotion (tinymlir._promotion: it promotes as NumPy promotes that
  scalar, not as a typed array);
- a DLPack producer (`__dlpack__`: PyTorch, JAX, CuPy on the CPU) through np.from_dlpack,
  which shares its memory;
- an object with `__array__` through np.asarray (a PyTorch CPU tensor shares its memory);
- a buffer (`memoryview`, `array.array`, ...) through np.asarray of a memoryview, which shares
  it too.

The memory is used in place wherever it is aligned to its element size (strided memory is
passed with its strides; the library copies it once for the call); an unaligned buffer is
copied. Dtypes are checked by the caller (tinymlir._dtypes): nothing is converted silently.

Results are new NumPy arrays, or, with `out=`, written into the caller's NumPy arrays.
"""
from typing import Any, NamedTuple

import numpy as np

from ._dtypes import to_tm

# What DLPack calls the host's memory (kDLCPU); pinned host memory (kDLCUDAHost) is
# readable by the CPU too.
_HOST_DEVICES = (1, 3)
_INT64 = np.iinfo(np.int64)


class Argument(NamedTuple):
    """One argument, converted: `array` is what tm_invoke reads; `scalar` is the value that
    stands for a 0-d argument in promotion (the Python scalar, or the 0-d array), else None."""

    array: np.ndarray
    scalar: Any


def as_argument(x: Any, where: str) -> Argument:
    """The argument `x` (named `where` in messages) as an array; see the module docstring."""
    if isinstance(x, np.ndarray):
        return _checked(x, x, where)
    if isinstance(x, np.generic):
        return _checked(np.asarray(x), x, where)
    if isinstance(x, (bool, int, float, complex)):
        if isinstance(x, int) and not isinstance(x, bool) and not _INT64.min <= x <= _INT64.max:
            raise OverflowError(f"{where} is the Python int {x}, outside int64 (the dtype "
                                "NumPy gives a Python int)")
        return _checked(np.asarray(x), x, where)
    if hasattr(x, "__dlpack__"):
        return _checked(_from_dlpack(x, where), None, where)
    if hasattr(x, "__array__"):
        return _checked(np.asarray(x), None, where)
    try:
        view = memoryview(x)
    except TypeError:
        raise TypeError(
            f"{where} is a {type(x).__name__}, not an array: pass arrays (NumPy arrays, "
            "objects with __array__ or __dlpack__, buffers such as memoryview) or Python "
            "numbers positionally, and other values as static keyword arguments") from None
    return _checked(np.asarray(view), None, where)


def _from_dlpack(x, where):
    device = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else None
    if device is not None and int(device[0]) not in _HOST_DEVICES:
        raise TypeError(f"{where} is a {type(x).__name__} in device memory (DLPack device "
                        f"{tuple(int(d) for d in device)}); tinymlir reads host memory: copy "
                        "it to the CPU first (for PyTorch, tensor.cpu())")
    try:
        return np.from_dlpack(x)
    except (RuntimeError, TypeError, BufferError, ValueError) as e:
        raise TypeError(f"{where}: NumPy cannot read this {type(x).__name__} through DLPack "
                        f"({e})") from None


def _checked(array, scalar, where):
    """The array with a dtype tinymlir has, aligned (copied if it is not)."""
    if array.dtype == np.dtype(object):
        raise TypeError(f"{where} converts to a NumPy array of Python objects, not numbers")
    to_tm(array.dtype, where)
    if not array.flags.aligned:
        array = array.copy()
    return Argument(array, scalar if array.ndim == 0 else None)


def check_out(out: Any, where: str, dtype: np.dtype, shape: tuple) -> np.ndarray:
    """An `out=` array for a result of `dtype` and `shape`: a writable NumPy array of exactly
    those (NumPy's out= rule: no cast, no broadcast), aligned to its element size."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{where} is a {type(out).__name__}; out= takes NumPy arrays "
                        "(writable, of the result's dtype and shape)")
    if out.dtype != dtype or out.shape != tuple(shape):
        raise ValueError(f"{where} has dtype {out.dtype} and shape {out.shape}; the result "
                         f"has dtype {dtype} and shape {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError(f"{where} is read-only")
    if not out.flags.aligned:
        raise ValueError(f"{where} is not aligned to its element size")
    return out

