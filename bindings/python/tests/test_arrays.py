"""Arguments from any producer (Python scalars, __array__, DLPack, buffers), read in place
where possible, and results into out=. NumPy (and PyTorch for DLPack) are the oracles."""
import array

import numpy as np
import pytest

import tinymlir as tm
from tinymlir._arrays import as_argument

torch = pytest.importorskip("torch")   # Debian's python3-torch (scripts/install-deps.sh)


def affine(x, s):
    return x * s + 1


class WithArray:
    """An object NumPy reads through __array__ only (no buffer, no DLPack)."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values


def test_a_jitted_function_takes_a_scalar_an_array_object_dlpack_and_a_memoryview():
    f = tm.jit(affine)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = affine(x, 3.0)
    np.testing.assert_array_equal(f(x, 3.0), expected)                    # Python scalar
    np.testing.assert_array_equal(f(WithArray(x), 3.0), expected)         # __array__
    np.testing.assert_array_equal(f(torch.from_numpy(x.copy()), 3.0), expected)  # DLPack
    np.testing.assert_array_equal(f(memoryview(x), 3.0), expected)        # buffer
    flat = array.array("f", x.ravel())
    np.testing.assert_array_equal(f(flat, 3.0), affine(np.asarray(flat), 3.0))
    assert f(x, 3.0).dtype == expected.dtype == np.float32


def test_python_scalars_are_typed_as_numpy_types_them():
    for value in (True, 7, -2**40, 2.5, float("inf")):
        got = tm.jit(lambda s: s)(value)
        assert got.dtype == np.asarray(value).dtype and got.shape == ()
        assert got == np.asarray(value)
    with pytest.raises(OverflowError, match="outside int64"):
        tm.jit(lambda s: s)(2**63)
    with pytest.raises(tm.DtypeError, match="complex128"):
        tm.jit(lambda s: s)(1j)


def test_memory_is_shared_where_it_is_contiguous_and_aligned():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert np.shares_memory(as_argument(t, "t").array, t.numpy())          # DLPack
    x = np.arange(12, dtype=np.float64)
    assert np.shares_memory(as_argument(memoryview(x), "m").array, x)
    assert np.shares_memory(as_argument(WithArray(x), "w").array, x)
    assert as_argument(x, "x").array is x
    # A strided view is passed with its strides (the library copies it once), not copied.
    assert np.shares_memory(as_argument(t.t(), "t").array, t.numpy())
    np.testing.assert_array_equal(tm.jit(lambda a: a * 2)(t.t()), t.t().numpy() * 2)
    # Unaligned memory is copied: tm_invoke reads elements at their alignment.
    raw = bytearray(4 * 5 + 1)
    unaligned = np.frombuffer(raw, dtype=np.float32, offset=1, count=5)
    assert not unaligned.flags.aligned
    converted = as_argument(memoryview(unaligned), "u").array
    assert converted.flags.aligned and not np.shares_memory(converted, unaligned)


def test_producers_that_cannot_be_read_say_why():
    f = tm.jit(lambda a: a + 1)
    with pytest.raises(TypeError, match=r"argument 0: NumPy cannot read this Tensor through "
                                        r"DLPack \(.*detach"):
        f(torch.ones(2, requires_grad=True))

    class OnTheGpu:
        def __dlpack__(self, stream=None):
            raise AssertionError("not to be asked")

        def __dlpack_device__(self):
            return (2, 0)   # kDLCUDA

    with pytest.raises(TypeError, match=r"argument 0 is a OnTheGpu in device memory .*copy "
                                        r"it to the CPU"):
        f(OnTheGpu())
    with pytest.raises(TypeError, match="argument 0 is a str, not an array"):
        f("1.5")
    with pytest.raises(tm.DtypeError, match="argument 0 has dtype uint8"):
        f(memoryview(b"abc"))
    with pytest.raises(TypeError, match="Python objects"):
        f(WithArray(np.array([object()])))


def test_results_go_into_out():
    f = tm.jit(lambda a, b: (a + b, a * b))
    a, b = np.arange(4.0), np.full(4, 2.0)
    out = (np.empty(4), np.empty(4))
    got = f(a, b, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    np.testing.assert_array_equal(out[0], a + b)
    np.testing.assert_array_equal(out[1], a * b)
    one = tm.jit(lambda a: a * 3)
    buf = np.zeros(4)
    assert one(a, out=buf) is buf
    np.testing.assert_array_equal(buf, a * 3)
    with pytest.raises(ValueError, match=r"out\[1\] has dtype float32 and shape \(4,\); the "
                                         r"result has dtype float64 and shape \(4,\)"):
        f(a, b, out=(np.empty(4), np.empty(4, np.float32)))
    with pytest.raises(ValueError, match="out= has the structure"):
        f(a, b, out=np.empty(4))
    readonly = np.empty(4)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        one(a, out=readonly)
    with pytest.raises(TypeError, match="out is a WithArray; out= takes NumPy arrays"):
        one(a, out=WithArray(np.zeros(4)))
    with pytest.raises(ValueError, match=r"out= has the structure \[\*, \*\]; the results have \*"):
        one(a, out=[np.zeros(2), np.zeros(2)])

