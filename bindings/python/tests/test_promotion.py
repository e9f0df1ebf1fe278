"""Promotion as the installed NumPy does it: every result of a jitted function has the dtype
and the values NumPy computes eagerly for the same operands (NumPy 1.24 on Debian 12
promotes scalars and 0-d arrays by value; NumPy 2 by NEP 50: the oracle is whichever runs)."""
import operator

import numpy as np
import pytest

import tinymlir as tm
from conftest import check_like_numpy

ARRAYS = {
    "float32": np.array([0.5, 1.5, -2.0], np.float32),
    "float64": np.array([0.5, 1.5, -2.0]),
    "int32": np.array([1, -2, 3], np.int32),
    "int64": np.array([1, -2, 3], np.int64),
}
# The other operand: Python scalars (weak, or promoted by value), NumPy scalars and 0-d
# arrays (typed, or promoted by value), values that fit the narrow dtypes and values that
# do not.
OTHERS = {
    "True": True, "3": 3, "2**31": 2**31, "2**40": 2**40, "0.25": 0.25, "1e300": 1e300,
    "np.float64(0.25)": np.float64(0.25), "np.float64(1e300)": np.float64(1e300),
    "np.float32(2)": np.float32(2), "np.int64(5)": np.int64(5),
    "np.int64(2**40)": np.int64(2**40), "np.int32(3)": np.int32(3),
    "np.asarray(0.25)": np.asarray(0.25), "np.asarray(7)": np.asarray(7),
}
OPS = {"+": operator.add, "<": operator.lt}


@pytest.mark.parametrize("op", OPS, ids=list(OPS))
@pytest.mark.parametrize("other", OTHERS, ids=list(OTHERS))
@pytest.mark.parametrize("dtype", ARRAYS, ids=list(ARRAYS))
def test_a_constant_promotes_as_numpy_promotes_it(dtype, other, op):
    fn, value = OPS[op], OTHERS[other]
    check_like_numpy(tm.jit(lambda x: fn(x, value)), lambda x: fn(x, value), ARRAYS[dtype])
    check_like_numpy(tm.jit(lambda x: fn(value, x)), lambda x: fn(value, x), ARRAYS[dtype])


@pytest.mark.parametrize("other", OTHERS, ids=list(OTHERS))
@pytest.mark.parametrize("dtype", ARRAYS, ids=list(ARRAYS))
def test_an_argument_promotes_as_numpy_promotes_it(dtype, other):
    # A scalar passed to the jitted function promotes as NumPy promotes that scalar in the
    # same expression run eagerly (its class of values is part of the cache key).
    def fn(x, s):
        return x * s - (x < s)
    check_like_numpy(tm.jit(fn), fn, ARRAYS[dtype], OTHERS[other])


def test_arguments_of_one_dtype_but_other_promotions_are_other_specialisations():
    f = tm.jit(lambda x, s: x + s)
    x = np.ones(2, np.int32)
    for s in (1, 2**31, 2, 2**40):
        check_like_numpy(f, lambda x, s: x + s, x, s)
    info = f.cache_info()
    legacy = np.result_type(np.int32, 2**31) != np.int32   # value-based: two classes
    assert (info.misses, info.hits) == ((2, 2) if legacy else (1, 3))


def test_maximum_division_and_where_promote_too():
    x = np.array([0.5, 3.0], np.float32)
    i = np.array([1, 4], np.int32)
    for s in (0.25, np.float64(0.25), np.asarray(2.0), 2**40, np.int64(3)):
        check_like_numpy(tm.jit(lambda x: tm.maximum(x, s)), lambda x: np.maximum(x, s), x)
        check_like_numpy(tm.jit(lambda i: i / s), lambda i: i / s, i)
        check_like_numpy(tm.jit(lambda x: tm.where(x > 1, x, s)),
                         lambda x: np.where(x > 1, x, s), x)


def test_a_value_computed_in_the_function_promotes_by_its_dtype():
    # Its value is unknown when the function is traced: a float64 sum stays float64.
    f = tm.jit(lambda x, y: x * y.sum())
    got = f(np.ones(2, np.float32), np.ones(3))
    assert got.dtype == np.float64
