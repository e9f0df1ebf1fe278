"""NumPy dtypes <-> tm_dtype.

NumPy's float16 is tinymlir's f16, a storage type (arrays of it pass in and out, casts and
matmuls with float32 promote it; arithmetic on it is refused). tinymlir's bf16 has no NumPy
dtype: a program with a bf16 input or output cannot be called from NumPy. Everything else
(unsigned ints, complex, ...) is refused with a DtypeError that says what is supported,
rather than converted silently.
"""
import numpy as np

from . import capi
from ._errors import DtypeError

_TO_TM = {
    np.dtype(np.float16): capi.TM_F16,
    np.dtype(np.float32): capi.TM_F32,
    np.dtype(np.float64): capi.TM_F64,
    np.dtype(np.int32): capi.TM_I32,
    np.dtype(np.int64): capi.TM_I64,
    np.dtype(np.bool_): capi.TM_BOOL,
}
_FROM_TM = {v: k for k, v in _TO_TM.items()}
SUPPORTED_DTYPES = tuple(_TO_TM)

SUPPORTED = "float16, float32, float64, int32, int64 and bool"


def to_tm(dtype, what="array"):
    """The tm_dtype of a NumPy dtype (or anything np.dtype accepts)."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise DtypeError(f"{what}: {dtype!r} is not a dtype ({e})") from None
    # np.dtype('<f4') == np.float32 on little-endian machines; a swapped order is not.
    if dt.isnative and dt in _TO_TM:
        return _TO_TM[dt]
    raise DtypeError(f"{what} has dtype {dt}, which tinymlir does not support ({SUPPORTED})")


def from_tm(tm_dtype):
    """The NumPy dtype of a tm_dtype."""
    if tm_dtype not in _FROM_TM:
        names = {capi.TM_BF16: "bf16", capi.TM_Q8_0: "q8_0"}
        raise DtypeError(f"tinymlir dtype {tm_dtype} ({names.get(tm_dtype, '?')}) "
                         "has no NumPy dtype")
    return _FROM_TM[tm_dtype]
