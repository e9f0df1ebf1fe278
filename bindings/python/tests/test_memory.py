"""Aliasing and strided arrays: NumPy views go to the library as tm_tensor views (element
strides) of the caller's memory, and the answers equal those of fresh contiguous arrays."""
import numpy as np
import pytest

import tinymlir as tm
from tinymlir import capi

RTOL = dict(rtol=1e-6, atol=1e-6)


def test_same_array_passed_twice(rng):
    x = rng.standard_normal((4, 4)).astype(np.float32)
    before = x.copy()
    f = tm.jit(lambda a, b: a @ b + a * b)
    np.testing.assert_allclose(f(x, x), before @ before + before * before, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x, before)                    # inputs are never written
    # Overlapping views of one buffer.
    np.testing.assert_allclose(tm.jit(lambda a, b: a - b)(x[1:], x[:-1]), before[1:] - before[:-1])


def test_same_array_in_a_tree_twice(rng):
    w = rng.standard_normal(3).astype(np.float32)
    out = tm.jit(lambda p: p["a"] * p["b"])({"a": w, "b": w})
    np.testing.assert_allclose(out, w * w, **RTOL)


def test_outputs_are_fresh_arrays(rng):
    x = rng.standard_normal(3).astype(np.float32)
    f = tm.jit(lambda a: a + 1)
    y1, y2 = f(x), f(x)
    assert y1 is not y2 and not np.shares_memory(y1, y2) and not np.shares_memory(y1, x)
    assert y1.flags.c_contiguous and y1.flags.writeable and y1.flags.owndata


def _double_program(shape, dtype=capi.TM_F32):
    ctx = tm.Context()
    with tm.Trace(ctx, "double") as trace:
        x = capi.tm_op_input(trace.ptr, dtype, list(shape))
        trace.end([capi.tm_op_mul(trace.ptr, x, capi.tm_op_scalar(trace.ptr, dtype, 2.0))])
        return tm.Program.compile(ctx, trace)


def test_output_aliasing_an_input_in_place(rng):
    # In-place through the C API: the input is copied first, so the answer is right.
    program = _double_program((3, 4))
    x = rng.standard_normal((3, 4)).astype(np.float32)
    want = x * 2
    program.invoke([x], [x])
    np.testing.assert_array_equal(x, want)


def test_outputs_overlapping_each_other_are_refused():
    ctx = tm.Context()
    with tm.Trace(ctx, "two") as trace:
        x = capi.tm_op_input(trace.ptr, capi.TM_F32, [4])
        trace.end([x, capi.tm_op_neg(trace.ptr, x)])
        program = tm.Program.compile(ctx, trace)
    buf = np.zeros(4, np.float32)
    with pytest.raises(tm.InvalidArgumentError, match="overlap"):
        program.invoke([np.ones(4, np.float32)], [buf, buf])


def test_strided_output_through_the_c_api(rng):
    program = _double_program((3, 2))
    x = rng.standard_normal((3, 2)).astype(np.float32)
    out = np.zeros((3, 4), np.float32)
    program.invoke([x], [out[:, ::2]])
    np.testing.assert_array_equal(out[:, ::2], x * 2)
    np.testing.assert_array_equal(out[:, 1::2], 0)


STRIDED = {
    "transposed": lambda a: a.T,
    "fortran_order": lambda a: np.asfortranarray(a),
    "step_slices": lambda a: a[::2, 1::3],
    "reversed": lambda a: a[::-1, ::-1],
    "reversed_rows_only": lambda a: a[::-1],
    "broadcast_zero_stride": lambda a: np.broadcast_to(a[0], a.shape),
    "column": lambda a: a[:, 2:3],
    "diagonal_view": lambda a: np.lib.stride_tricks.as_strided(
        a, shape=(4, 4), strides=(a.strides[0] + a.strides[1], a.strides[1])),
}


@pytest.mark.parametrize("name", list(STRIDED))
def test_strided_inputs(name, rng):
    base = rng.standard_normal((8, 6)).astype(np.float32)
    view = STRIDED[name](base)
    assert not view.flags.c_contiguous or name == "column"
    w = rng.standard_normal((view.shape[1], 3)).astype(np.float32)
    f = tm.jit(lambda v, w: tm.exp(v) @ w + v.sum(axis=1, keepdims=True))
    want = np.exp(view) @ w + view.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(f(view, w), want, rtol=1e-5, atol=1e-5)


def test_strided_gather_indices_are_range_checked(rng):
    table = rng.standard_normal((5, 2)).astype(np.float32)
    ids = np.array([[0, 99], [4, 99], [1, 99]], np.int32)[:, 0]       # strided, in range
    f = tm.jit(lambda t, i: t[i])
    np.testing.assert_array_equal(f(table, ids), table[[0, 4, 1]])
    bad = np.array([[0, 1], [7, 1]], np.int64)[:, 0]
    with pytest.raises(tm.OutOfRangeError):
        f(table, bad)


def test_zero_dim_and_empty_arrays(rng):
    s = np.float64(2.5)
    np.testing.assert_allclose(tm.jit(lambda a, b: a * b)(np.asarray(s), np.ones(3)), s)
    empty = np.zeros((0, 3), np.float32)
    out = tm.jit(lambda a: a + 1)(empty)
    assert out.shape == (0, 3) and out.dtype == np.float32


def test_odd_layouts_are_copied_by_jit_and_refused_by_invoke():
    packed = np.zeros(4, dtype=[("a", "<f4"), ("b", "u1")])   # a 5-byte stride
    packed["a"] = [1, 2, 3, 4]
    # A jitted function copies memory it cannot read in place (not aligned to its elements).
    f = tm.jit(lambda a: a + 1)
    np.testing.assert_array_equal(f(packed["a"]), packed["a"] + 1)
    # tm_invoke itself takes only memory it can read in place, and says why not.
    program = f.lower(np.zeros(4, np.float32)).program
    with pytest.raises(tm.Error, match="stride|aligned"):
        program.invoke([packed["a"]], [np.empty(4, np.float32)])


def test_concurrent_calls_from_threads(rng):
    # Programs are invokable from several threads; each call gets its own outputs.
    import threading
    f = tm.jit(lambda a, b: tm.tanh(a @ b) + a.sum())
    inputs = [(rng.standard_normal((n, 8)).astype(np.float32),
               rng.standard_normal((8, 8)).astype(np.float32)) for n in (2, 3, 2, 3, 2, 3)]
    results = [None] * len(inputs)

    def run(i):
        for _ in range(20):
            results[i] = f(*inputs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (a, b), got in zip(inputs, results):
        np.testing.assert_allclose(got, np.tanh(a @ b) + a.sum(), rtol=1e-5, atol=1e-5)
    assert f.cache_info().entries == 2


def test_specializations_are_bounded_least_recently_used_first():
    # Each specialisation holds a program beyond the context's budget: a function called with
    # ever new shapes must not keep them all.
    f = tm.jit(lambda a: a * 2, max_specializations=2, context=tm.Context())
    for n in (1, 2, 1, 3):               # 2 is then the least recently used
        np.testing.assert_array_equal(f(np.ones(n, np.float32)), np.full(n, 2, np.float32))
    info = f.cache_info()
    assert (info.hits, info.misses, info.entries) == (1, 3, 2)
    f(np.ones(1, np.float32))            # kept
    f(np.ones(2, np.float32))            # dropped: traced again (its compile a context hit)
    info = f.cache_info()
    assert (info.hits, info.misses, info.entries) == (2, 4, 2)
    assert info.context.hits == 1


def test_default_bound_and_no_bound():
    from tinymlir.jit import DEFAULT_MAX_SPECIALIZATIONS
    f = tm.jit(lambda a: a + 1, context=tm.Context())
    for n in range(1, DEFAULT_MAX_SPECIALIZATIONS + 11):
        f(np.ones(n, np.float32))
    assert f.cache_info().entries == DEFAULT_MAX_SPECIALIZATIONS
    g = tm.jit(lambda a: a + 1, context=tm.Context(), max_specializations=None)
    for n in range(1, 140):
        g(np.ones(n, np.float32))
    assert g.cache_info().entries == 139


def test_a_dropped_static_instance_is_released():
    import gc
    import weakref

    class Scale:
        def __init__(self, k):
            self.k = k

        @tm.jit(max_specializations=1)
        def __call__(self, x):
            return x * self.k

    # An instance that is not a tree of arrays is static: part of the cache key.
    first = Scale(3.0)
    alive = weakref.ref(first)
    first(np.ones(2, np.float32))
    del first
    gc.collect()
    assert alive() is not None           # held by its specialisation
    np.testing.assert_array_equal(Scale(4.0)(np.ones(2, np.float32)), [4, 4])
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_max_specializations_is_checked(bad):
    with pytest.raises(ValueError, match="max_specializations"):
        tm.jit(lambda a: a, max_specializations=bad)


def test_a_finalizer_run_by_eviction_may_call_the_function():
    # Dropping a specialisation can run a static key's __del__, which may call the same
    # function: it must not wait for the lock held while dropping.
    f = tm.jit(lambda a, key: a + 1, max_specializations=1, context=tm.Context())

    class Key:
        def __del__(self):
            f(np.ones(2, np.float32), key=0)

        def __hash__(self):
            return 1

        def __eq__(self, other):
            return self is other

    f(np.ones(2, np.float32), key=Key())
    f(np.ones(3, np.float32), key=1)       # drops Key's specialisation: its __del__ calls f
    f.cache_clear()
