"""Traced ops against NumPy.

Tolerances: float32 results within rtol 1e-5 / atol 1e-6 of NumPy's float32 (transcendental
functions come from different libms; matmuls and reductions sum in another order), float64
within rtol 1e-12 / atol 1e-12. Integer and bool results are exact. Result dtypes must equal
NumPy's (1.24 value-based promotion for Python scalars).
"""
import math

import numpy as np
import pytest

import tinymlir as tm
from conftest import check_like_numpy

F32 = dict(rtol=1e-5, atol=1e-6)
F64 = dict(rtol=1e-12, atol=1e-12)


def check(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == np.float32:
        np.testing.assert_allclose(got, want, **F32)
    elif want.dtype == np.float64:
        np.testing.assert_allclose(got, want, **F64)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.fixture(params=[np.float32, np.float64])
def fdtype(request):
    return request.param


# (name, traced function, NumPy function); both take (x, y, i) with x, y float (3, 4) and
# i int32 (3, 4).
ELEMENTWISE = [
    ("add", lambda x, y, i: x + y, None),
    ("sub", lambda x, y, i: x - y, None),
    ("mul", lambda x, y, i: x * y, None),
    ("div", lambda x, y, i: x / (y + 3), None),
    ("pow", lambda x, y, i: abs(x) ** y, None),
    ("neg", lambda x, y, i: -x, None),
    ("scalar_f", lambda x, y, i: (x * 2.5 + 1) / 4, None),
    ("scalar_rsub", lambda x, y, i: 1 - x, None),
    ("scalar_rdiv", lambda x, y, i: 1 / (abs(x) + 1), None),
    ("square", lambda x, y, i: x ** 2, None),
    ("rpow", lambda x, y, i: 2 ** x, None),
    ("int_plus_float_scalar", lambda x, y, i: i + 0.5, None),
    ("int_plus_int_scalar", lambda x, y, i: i * 3 - 1, None),
    ("int_true_div", lambda x, y, i: i / (i * i + 1), None),
    ("int_plus_float", lambda x, y, i: i + x, None),
    ("bool_plus_int", lambda x, y, i: (x > 0) + i, None),
    ("less", lambda x, y, i: x < y, None),
    ("greater", lambda x, y, i: x > 0.5, None),
    ("equal", lambda x, y, i: i == 1, None),
    ("not_equal", lambda x, y, i: i != 1, None),
    ("less_equal", lambda x, y, i: i <= 0, None),
    ("greater_equal", lambda x, y, i: x >= y, None),
    ("exp", lambda x, y, i: tm.exp(x), lambda x, y, i: np.exp(x)),
    ("log", lambda x, y, i: tm.log(abs(x) + 1), lambda x, y, i: np.log(abs(x) + 1)),
    ("tanh", lambda x, y, i: tm.tanh(x), lambda x, y, i: np.tanh(x)),
    ("sqrt", lambda x, y, i: tm.sqrt(abs(x)), lambda x, y, i: np.sqrt(abs(x))),
    ("rsqrt", lambda x, y, i: tm.rsqrt(abs(x) + 1), lambda x, y, i: 1 / np.sqrt(abs(x) + 1)),
    ("erf", lambda x, y, i: tm.erf(x),
     lambda x, y, i: np.vectorize(math.erf, otypes=[x.dtype])(x)),
    ("abs", lambda x, y, i: tm.abs(x), lambda x, y, i: np.abs(x)),
    ("exp_of_int", lambda x, y, i: tm.exp(i), lambda x, y, i: np.exp(i)),
    ("maximum", lambda x, y, i: tm.maximum(x, y), lambda x, y, i: np.maximum(x, y)),
    ("minimum", lambda x, y, i: tm.minimum(x, 0.0), lambda x, y, i: np.minimum(x, 0.0)),
    ("where", lambda x, y, i: tm.where(x > y, x, -1.0), lambda x, y, i: np.where(x > y, x, -1.0)),
    ("astype_int", lambda x, y, i: (x * 10).astype(np.int64), None),
    ("astype_bool", lambda x, y, i: i.astype(bool), None),
    ("astype_f32", lambda x, y, i: i.astype(np.float32), None),
    ("int_pow", lambda x, y, i: i ** 2, None),
    ("broadcast_row", lambda x, y, i: x + y[0], None),
    ("broadcast_col", lambda x, y, i: x * y[:, :1], None),
    ("constant_array", lambda x, y, i: x * np.arange(4, dtype=x.dtype), None),
    ("array_on_left", lambda x, y, i: np.ones(4, x.dtype) - x, None),
]


@pytest.mark.parametrize("name,traced,numpy_fn", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise(name, traced, numpy_fn, fdtype, rng):
    x = rng.standard_normal((3, 4)).astype(fdtype)
    y = rng.standard_normal((3, 4)).astype(fdtype)
    i = rng.integers(-5, 6, (3, 4)).astype(np.int32)
    check(tm.jit(traced)(x, y, i), (numpy_fn or traced)(x, y, i))


# NumPy's value of every unary op the library knows (tinymlir.ops.UNARY_OPS, read from the
# library's op table), and the interval its inputs are drawn from: an op the library adds
# without an entry here fails test_every_unary_op_is_checked.
NUMPY_UNARY = {
    "neg": (np.negative, (-3, 3)),
    "exp": (np.exp, (-5, 5)),
    "log": (np.log, (0.01, 10)),
    "tanh": (np.tanh, (-4, 4)),
    "sqrt": (np.sqrt, (0, 10)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 10)),
    "erf": (lambda x: np.vectorize(math.erf, otypes=[x.dtype])(x), (-3, 3)),
    "abs": (np.abs, (-3, 3)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-12, 12)),
}


def test_every_unary_op_is_checked():
    assert set(tm.ops.UNARY_OPS) == set(NUMPY_UNARY)
    assert all(name in tm.__all__ and callable(getattr(tm, name)) for name in tm.ops.UNARY_OPS)


@pytest.mark.parametrize("name", sorted(NUMPY_UNARY))
def test_unary_op_against_numpy(name, fdtype, rng):
    numpy_fn, (lo, hi) = NUMPY_UNARY[name]
    x = rng.uniform(lo, hi, (3, 5)).astype(fdtype)
    check(tm.jit(getattr(tm, name))(x), numpy_fn(x))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_abs_of_integers(dtype, rng):
    i = rng.integers(-5, 6, (3, 4)).astype(dtype)
    check(tm.jit(tm.abs)(i), np.abs(i))


REDUCTIONS = [
    ("sum", lambda x: x.sum(axis=1), lambda x: x.sum(axis=1)),
    ("sum_all", lambda x: x.sum(), lambda x: x.sum()),
    ("sum_keepdims", lambda x: x.sum(axis=-1, keepdims=True), lambda x: x.sum(-1, keepdims=True)),
    ("sum_two_axes", lambda x: x.sum(axis=(0, 2)), lambda x: x.sum(axis=(0, 2))),
    ("max", lambda x: x.max(axis=0), lambda x: x.max(axis=0)),
    ("max_all_keepdims", lambda x: x.max(keepdims=True), lambda x: x.max(keepdims=True)),
    ("mean", lambda x: x.mean(axis=2), lambda x: x.mean(axis=2)),
    ("mean_two_axes_keepdims", lambda x: x.mean(axis=(1, 2), keepdims=True),
     lambda x: x.mean(axis=(1, 2), keepdims=True)),
    ("var", lambda x: x.var(axis=-1), lambda x: x.var(axis=-1)),
    ("var_all", lambda x: x.var(), lambda x: x.var()),
    ("function_form", lambda x: tm.mean(x, 1), lambda x: np.mean(x, 1)),
]


@pytest.mark.parametrize("name,traced,numpy_fn", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
def test_reductions(name, traced, numpy_fn, fdtype, rng):
    x = rng.standard_normal((2, 3, 5)).astype(fdtype)
    check(tm.jit(traced)(x), numpy_fn(x))


def test_integer_reductions(rng):
    i = rng.integers(-9, 10, (4, 6)).astype(np.int64)
    check(tm.jit(lambda a: a.sum(axis=0))(i), i.sum(axis=0))
    check(tm.jit(lambda a: a.max(axis=1))(i), i.max(axis=1))
    check(tm.jit(lambda a: a.mean(axis=1))(i), i.mean(axis=1))   # float64, as NumPy


SHAPES = [
    ("reshape", lambda x: x.reshape(6, 5), lambda x: x.reshape(6, 5)),
    ("reshape_tuple_infer", lambda x: x.reshape((3, -1)), lambda x: x.reshape((3, -1))),
    ("T", lambda x: x.T, lambda x: x.T),
    ("transpose", lambda x: x.transpose(1, 0, 2), lambda x: x.transpose(1, 0, 2)),
    ("int_index", lambda x: x[1], lambda x: x[1]),
    ("negative_index", lambda x: x[-1, -2], lambda x: x[-1, -2]),
    ("slices", lambda x: x[:, 1:3, ::1], lambda x: x[:, 1:3, ::1]),
    ("negative_slice", lambda x: x[..., -2:], lambda x: x[..., -2:]),
    ("ellipsis_newaxis", lambda x: x[None, ..., 0], lambda x: x[None, ..., 0]),
    ("empty_slice", lambda x: x[:, 2:1], lambda x: x[:, 2:1]),
    ("concat", lambda x: tm.concat([x, x * 2], axis=1),
     lambda x: np.concatenate([x, x * 2], axis=1)),
    ("concat_last", lambda x: tm.concat([x[..., :1], x], -1),
     lambda x: np.concatenate([x[..., :1], x], -1)),
]


@pytest.mark.parametrize("name,traced,numpy_fn", SHAPES, ids=[c[0] for c in SHAPES])
def test_shapes_and_indexing(name, traced, numpy_fn, rng):
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    check(tm.jit(traced)(x), numpy_fn(x))


def test_iteration_over_first_axis(rng):
    x = rng.standard_normal((3, 2)).astype(np.float32)
    check(tm.jit(lambda a: sum(row * k for k, row in enumerate(a)))(x),
          sum(row * k for k, row in enumerate(x)))


@pytest.mark.parametrize("a_shape,b_shape", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                                             ((2, 2, 3, 4), (2, 2, 4, 5)), ((2, 3, 4), (4, 5)),
                                             ((1, 4), (4, 7)), ((6, 4), (4, 1))])
def test_matmul(a_shape, b_shape, fdtype, rng):
    a = rng.standard_normal(a_shape).astype(fdtype)
    b = rng.standard_normal(b_shape).astype(fdtype)
    check(tm.jit(lambda a, b: a @ b)(a, b), a @ b)
    check(tm.jit(tm.matmul)(a, b), np.matmul(a, b))


def test_integer_matmul(rng):
    a = rng.integers(-4, 5, (3, 4)).astype(np.int32)
    b = rng.integers(-4, 5, (4, 2)).astype(np.int32)
    check(tm.jit(lambda a, b: a @ b)(a, b), a @ b)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_composites(fdtype, rng):
    x = rng.standard_normal((4, 6)).astype(fdtype)
    g = rng.standard_normal(6).astype(fdtype)
    b = rng.standard_normal(6).astype(fdtype)
    check(tm.jit(tm.softmax)(x), np_softmax(x))
    check(tm.jit(lambda x: tm.softmax(x, axis=0))(x), np_softmax(x, axis=0))
    ln = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
    check(tm.jit(tm.layer_norm)(x, g, b), ln.astype(fdtype))
    c = math.sqrt(2 / math.pi)
    gelu = 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3)))
    check(tm.jit(tm.gelu_tanh)(x), gelu.astype(fdtype))


def test_causal_mask_and_masked_softmax(rng):
    x = rng.standard_normal((4, 4)).astype(np.float32)
    mask = tm.jit(lambda x: tm.causal_mask(4, 6, 2) + 0 * x[0, 0])(x)
    lowest = np.finfo(np.float32).min
    want = np.where(np.arange(6)[None, :] <= np.arange(4)[:, None] + 2, 0, lowest)
    check(mask, want.astype(np.float32))
    got = tm.jit(lambda x: tm.softmax(x + tm.causal_mask(4, 4)))(x)
    want = np_softmax(np.where(np.tril(np.ones((4, 4), bool)), x, -np.inf))
    check(got, want.astype(np.float32))


def test_argmax_is_numpys(rng):
    # An op of the library's table, with no code of its own in the binding.
    x = rng.integers(-3, 3, (5, 7)).astype(np.float32)  # ties: the first wins
    x[2, 4] = np.nan                                      # a NaN wins its row
    for axis in (-1, 0):
        got = tm.jit(lambda a: tm.argmax(a, axis=axis))(x)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.argmax(x, axis=axis))
    got = tm.jit(lambda a: tm.argmax(a, 1, keepdims=True))(x)
    np.testing.assert_array_equal(got, np.argmax(x, axis=1, keepdims=True))
    with pytest.raises(tm.ShapeError, match=r"tm_op\(argmax\).*empty"):
        tm.jit(lambda a: tm.argmax(a, axis=0))(np.zeros((0, 3), np.float32))


def test_gather(rng):
    table = rng.standard_normal((10, 3)).astype(np.float32)
    ids = np.array([[0, 9], [3, 3]], np.int64)
    check(tm.jit(lambda t, i: t[i])(table, ids), table[ids])
    check(tm.jit(tm.gather)(table, ids.astype(np.int32)), table[ids])
    # Constant index arrays are gathered too.
    check(tm.jit(lambda t: t[np.array([2, 1], np.int32)])(table), table[[2, 1]])


def test_gather_index_out_of_range_is_checked_before_running(rng):
    table = rng.standard_normal((10, 3)).astype(np.float32)
    with pytest.raises(tm.OutOfRangeError, match="outside the table"):
        tm.jit(lambda t, i: t[i])(table, np.array([1, 10], np.int32))


def test_tree_outputs_and_repeated_outputs(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)

    @tm.jit
    def f(x):
        y = x * 2
        return {"y": y, "pair": (y, x.sum()), "same": y, "input": x, "const": 1.5}

    out = f(x)
    check(out["y"], x * 2)
    check(out["pair"][0], x * 2)
    check(out["pair"][1], x.sum())
    check(out["same"], x * 2)
    assert out["same"] is not out["y"]          # every output is its own new array
    check(out["input"], x)
    assert out["input"] is not x
    check(out["const"], np.asarray(1.5))


def test_nested_jit_is_traced_inline(rng):
    inner = tm.jit(lambda a: a * 2)
    outer = tm.jit(lambda a: inner(a) + 1)
    x = rng.standard_normal(3).astype(np.float32)
    check(outer(x), x * 2 + 1)
    assert inner.cache_info().misses == 0


def test_lower_exposes_every_stage(rng):
    x, g, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4), 4, 4))
    affine = tm.jit(lambda x, g, b: (x * g + b) * 0.5)
    lowered = affine.lower(x, g, b)
    # The affine example, (x * gain + bias) * 0.5: three elementwise generics fused into one.
    assert lowered.traced.count("linalg.generic") == 3
    assert lowered.optimized.count("linalg.generic") == 1
    assert "memref" in lowered.bufferized
    assert "llvm." in lowered.lowered
    assert "define" in lowered.llvm_ir
    assert lowered.assembly.strip()
    assert lowered.ir("optimized") == lowered.ir(tm.Stage.OPTIMIZED)
    affine.cache_clear()  # the Lowered object keeps its own program reference
    assert "linalg.generic" in lowered.optimized


def test_compile_options_are_passed_through(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    f = tm.jit(lambda x, w: x @ w, use_blas=False, optimize=False, opt_level=0)
    check(f(x, w), x @ w)
    lowered = f.lower(x, w).lowered
    assert "tm_rt_gem" not in lowered
    # With the rewrite (the default): one row goes to tinymlir's GEMV kernels, 3 to OpenBLAS.
    assert "tm_rt_gemm" in tm.jit(lambda x, w: x @ w).lower(x, w).lowered
    assert "tm_rt_gemv_rows" in tm.jit(lambda x, w: x @ w).lower(x[:1], w).lowered


def test_scalars_promote_as_the_installed_numpy_promotes_them():
    # Python scalars are weak (NEP 50) or promoted by value (NumPy 1.x); NumPy scalars and
    # 0-d arrays are typed (NEP 50) or promoted by value (NumPy 1.x): the installed NumPy's
    # eager result is the oracle (tests/test_promotion.py covers every pairing).
    x = np.ones(3, np.float32)

    @tm.jit
    def times(x, s):
        return x * s

    for s in (0.5, np.float64(0.5), np.float32(0.5), np.int64(2), np.float64(1e300)):
        check_like_numpy(lambda x: times(x, s=s), lambda x: x * s, x)

    @tm.jit
    def times_array(x):
        return x * np.asarray(0.5)

    assert times_array(x).dtype == (x * np.asarray(0.5)).dtype
    np.testing.assert_array_equal(times(x, s=np.float64(0.5)), x * np.float64(0.5))


@pytest.mark.parametrize("v", [2**53 - 1, 2**53 + 1, 2**62 + 3, 2**63 - 1,
                               -(2**53 + 1), -(2**62 + 3), -2**63])
def test_python_ints_beyond_a_double_are_exact(v):
    # A double holds ints exactly only up to 2**53: bigger ones go in as exact int64s.
    a = np.array([0, 1, 2**53, 7], np.int64) * (1 if v < 0 else -1)   # a + v: no overflow
    check(tm.jit(lambda a, *, v: a + v)(a, v=v), a + v)
    check(tm.jit(lambda a, *, v: v + a * 0)(a, v=v), np.full(4, v))
    near = v + 1 if v < 0 else v - 1
    check(tm.jit(lambda a, *, v: a == v)(np.array([v, near], np.int64), v=v),
          np.array([True, False]))
    check(tm.jit(lambda a, *, v: (a < v, a > v))(a, v=v), (a < v, a > v))


def test_python_ints_outside_the_dtype_follow_numpy():
    i32, i64 = np.array([1, -1], np.int32), np.array([0, 2**62], np.int64)
    # Arithmetic: NumPy 2 raises OverflowError for an int its dtype cannot hold; NumPy 1.x
    # promotes by value (int32 + 2**31 is int64) or, beyond int64, computes with Python
    # objects, which cannot be traced (OverflowError here).
    check_like_numpy(tm.jit(lambda a: a + 2**31), lambda a: a + 2**31, i32)
    times = tm.jit(lambda a, *, v: a * v)
    for v in (2**63, -2**63 - 1, 10**30):
        check_like_numpy(lambda a: times(a, v=v), lambda a: a * v, i64)
    # Comparisons have an exact answer: every element is below a bigger int.
    for a in (i32, i64):
        for v in (2**31, 2**63, 2**70, -2**31 - 1, -2**64 - 5):
            got = tm.jit(lambda a, *, v: (a < v, a > v, a == v, a != v))(a, v=v)
            check(got, ([int(e) < v for e in a], [int(e) > v for e in a], [False] * 2, [True] * 2))
    # With floats the int becomes that float (np.ones(2) * 2**64 holds float64's values).
    check(tm.jit(lambda a: a * 2**64)(np.ones(2)), np.full(2, 2.0**64))
    check_like_numpy(tm.jit(lambda a: a * (2**53 + 1)), lambda a: a * (2**53 + 1),
                     np.ones(2, np.float32))
    with pytest.raises(OverflowError):
        tm.jit(lambda a: a * 10**400)(np.ones(2))


def test_constant_gather_indices_are_numpy_indices(rng):
    table = rng.standard_normal((3, 2)).astype(np.float32)
    for ids in ([-1], [0, -3, 2], np.array([-1, -2], np.int32), np.array([[2, -1]], np.int64),
                np.array(-1), [], np.array([2], np.uint8)):
        check(tm.jit(lambda t: t[ids])(table), table[ids])
        check(tm.jit(lambda t: tm.gather(t, ids))(table), table[np.asarray(ids, np.int64)])
    for ids in (np.array([5]), [3], [-4], np.array([0, 9], np.uint8)):
        bad = np.asarray(ids)[(np.asarray(ids) >= 3) | (np.asarray(ids) < -3)][0]
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for axis 0 with "
                                              "size 3"):
            tm.jit(lambda t: t[ids])(table)
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
            tm.jit(lambda t: tm.gather(t, ids))(table)
    with pytest.raises(IndexError, match="arrays used as indices must be of integer type"):
        tm.jit(lambda t: t[np.array([0.0, 1.0])])(table)
    with pytest.raises(IndexError, match="boolean masks"):
        tm.jit(lambda t: t[np.array([True, False, True])])(table)


def test_integer_parameters_are_integers():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for fn, name in [
            (lambda a: a.reshape(6.9), "shape"),
            (lambda a: a.reshape((2, "3")), "shape"),
            (lambda a: a.reshape(True), "shape"),
            (lambda a: a.transpose(1.9, 0.2), "axes"),
            (lambda a: a.sum(axis=1.7), "axis"),
            (lambda a: a.sum(axis="1"), "axis"),
            (lambda a: a.sum(axis=True), "axis"),
            (lambda a: a.mean(axis=(0, 1.0)), "axis"),
            (lambda a: tm.softmax(a, axis=0.5), "axis"),
            (lambda a: tm.concat([a, a], axis="1"), "axis"),
            (lambda a: tm.causal_mask("3", 3) + a[0, 0], "rows"),
            (lambda a: tm.causal_mask(3, 3, offset=0.5) + a[0, 0], "offset"),
            (lambda a: a.sum(keepdims="no"), "keepdims"),
            (lambda a: tm.layer_norm(a, a[0], a[0], eps="1e-5"), "eps")]:
        with pytest.raises(TypeError, match=f"{name} must be"):
            tm.jit(fn)(x)
    # NumPy integers are integers.
    check(tm.jit(lambda a: a.sum(axis=np.int64(1)))(x), x.sum(axis=1))
    check(tm.jit(lambda a: a.reshape(np.int32(6)))(x), x.reshape(6))
    check(tm.jit(lambda a: tm.softmax(a, axis=np.int32(0)))(x) * 0, x * 0)
    with pytest.raises(TypeError, match="opt_level must be an integer"):
        tm.jit(lambda a: a, opt_level=2.5)
    with pytest.raises(TypeError, match="optimize must be a bool"):
        tm.jit(lambda a: a, optimize="no")


def test_numpy_functions_on_traced_values(rng):
    x = rng.standard_normal((2, 3))
    check(tm.jit(lambda a: np.sum(a))(x), np.sum(x))
    check(tm.jit(lambda a: np.sum(a, axis=1, keepdims=True))(x), np.sum(x, axis=1, keepdims=True))
    check(tm.jit(lambda a: np.sum(a, dtype=np.float32))(x), np.sum(x, dtype=np.float32))
    check(tm.jit(lambda a: np.max(a, axis=0))(x), np.max(x, axis=0))
    check(tm.jit(lambda a: np.mean(a, axis=-1))(x), np.mean(x, axis=-1))
    check(tm.jit(lambda a: np.var(a, ddof=1))(x), np.var(x, ddof=1))
    check(tm.jit(lambda a: np.reshape(a, (3, 2)))(x), np.reshape(x, (3, 2)))
    check(tm.jit(lambda a: np.transpose(a))(x), np.transpose(x))
    check(tm.jit(lambda a: a * (np.shape(a)[1] * np.ndim(a) * np.size(a)))(x), x * 36)
    with pytest.raises(TypeError, match="np.concatenate on a traced value.*tinymlir.concat"):
        tm.jit(lambda a: np.concatenate([a, a]))(x)
    with pytest.raises(TypeError, match="np.where on a traced value.*tinymlir.where"):
        tm.jit(lambda a: np.where(a > 0, a, 0))(x)
    with pytest.raises(TypeError, match="out= cannot be traced"):
        tm.jit(lambda a: np.sum(a, out=np.empty(())))(x)
    with pytest.raises(TypeError, match="initial= cannot be traced"):
        tm.jit(lambda a: np.max(a, initial=0))(x)
