"""Argument trees and the jit cache key: (structure with leaf shapes and dtypes, static
keyword arguments, target)."""
import collections
import dataclasses

import numpy as np
import pytest

import tinymlir as tm
from tinymlir import _tree

Pair = collections.namedtuple("Pair", "w b")


@dataclasses.dataclass
class Layer:
    w: np.ndarray
    b: np.ndarray
    extra: object = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: np.ndarray


def test_flatten_unflatten_round_trip():
    a, b, c, d = (np.full(2, k, np.float32) for k in range(4))
    tree = ({"x": a, "layers": [Layer(b, c), Layer(c, d, extra=None)]}, Pair(d, a),
            Frozen(b), None)
    leaves, treedef = _tree.flatten(tree)
    assert [x[0] for x in leaves] == [0, 1, 2, 2, 3, 3, 0, 1]
    rebuilt = _tree.unflatten(treedef, leaves)
    assert isinstance(rebuilt[0]["layers"][1], Layer) and rebuilt[0]["layers"][1].extra is None
    assert isinstance(rebuilt[1], Pair) and isinstance(rebuilt[2], Frozen)
    assert _tree.flatten(rebuilt)[1] == treedef
    assert _tree.leaf_paths(treedef)[:3] == ["[0]['x']", "[0]['layers'][0].w",
                                             "[0]['layers'][0].b"]


def test_structure_is_part_of_the_treedef():
    x = np.zeros(2)
    assert _tree.flatten((x, x))[1] != _tree.flatten([x, x])[1]
    assert _tree.flatten({"a": x, "b": x})[1] != _tree.flatten({"b": x, "a": x})[1]
    assert _tree.flatten(Pair(x, x))[1] != _tree.flatten((x, x))[1]
    assert _tree.flatten(Layer(x, x))[1] == _tree.flatten(Layer(x * 2, x))[1]


@tm.jit
def affine(params, x):
    return x @ params["w"] + params["b"]


def test_weights_of_equal_shapes_share_one_program(rng):
    affine.cache_clear()
    x = rng.standard_normal((3, 4)).astype(np.float32)
    for _ in range(3):
        p = {"w": rng.standard_normal((4, 5)).astype(np.float32),
             "b": rng.standard_normal(5).astype(np.float32)}
        np.testing.assert_allclose(affine(p, x), x @ p["w"] + p["b"], rtol=1e-5, atol=1e-6)
    info = affine.cache_info()
    assert (info.hits, info.misses, info.entries) == (2, 1, 1)


def test_new_shape_dtype_or_structure_is_a_new_program(rng):
    affine.cache_clear()
    x = rng.standard_normal((3, 4)).astype(np.float32)
    p = {"w": rng.standard_normal((4, 5)).astype(np.float32),
         "b": rng.standard_normal(5).astype(np.float32)}
    affine(p, x)
    affine(p, x[:2].copy())                                        # new shape
    affine({"w": p["w"].astype(np.float64), "b": p["b"]}, x)      # new dtype
    affine({"b": p["b"], "w": p["w"]}, x)                         # new structure (key order)
    affine(collections.OrderedDict(w=p["w"], b=p["b"]), x)        # a dict again: a hit
    info = affine.cache_info()
    assert (info.hits, info.misses, info.entries) == (1, 4, 4)


def test_static_keyword_arguments_are_python_values_and_part_of_the_key(rng):
    seen = []

    @tm.jit
    def scale(x, *, factor, name="x"):
        seen.append((factor, name))
        return x * factor

    x = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(scale(x, factor=2), x * 2)
    np.testing.assert_allclose(scale(x, factor=2), x * 2)
    np.testing.assert_allclose(scale(x, factor=3, name="y"), x * 3)
    assert seen == [(2, "x"), (3, "y")]          # traced once per static value
    assert scale.cache_info().misses == 2
    with pytest.raises(TypeError, match="hashable"):
        scale(x, factor=[1])


def test_target_is_part_of_the_key_and_gpu_reports_unsupported(rng):
    x = rng.standard_normal(3).astype(np.float32)

    def f(x):
        return tm.exp(x) + 1

    np.testing.assert_allclose(tm.jit(f)(x), np.exp(x) + 1, rtol=1e-6)
    gpu = tm.jit(f, target="gpu")
    assert gpu.target == tm.Target.GPU
    with pytest.raises(tm.UnsupportedError) as e:
        gpu(x)
    assert e.value.status == tm.Status.UNSUPPORTED


def test_context_cache_is_shared_and_reported(rng):
    ctx = tm.Context()
    f = tm.jit(lambda x: x * 2 + 1, context=ctx)
    g = tm.jit(lambda x: x * 2 + 1, context=ctx)   # the same program, traced by another fn
    x = rng.standard_normal(3).astype(np.float32)
    f(x)
    g(x)
    assert f.cache_info().misses == 1 and g.cache_info().misses == 1
    assert ctx.cache_stats() == tm.CacheStats(hits=1, misses=1, entries=1)
    assert f.cache_info().context == ctx.cache_stats()


def test_non_array_leaves_are_refused(rng):
    f = tm.jit(lambda p: p["x"] * 2)
    with pytest.raises(TypeError, match=r"argument 0\['x'\] is a str, not an array"):
        f({"x": "1.5"})
    np.testing.assert_allclose(f({"x": np.float32(1.5)}), 3.0)   # NumPy scalars are arrays
    np.testing.assert_allclose(f({"x": 1.5}), 3.0)               # so are Python numbers


def test_static_values_are_keyed_by_type_and_exact_value():
    i32, f32 = np.ones(2, np.int32), np.ones(2, np.float32)
    plus_first = tm.jit(lambda a, *, s: a + s[0])
    # Nested 1, 1.0 and True are equal (and hash alike) but promote differently.
    assert plus_first(i32, s=(1,)).dtype == np.int32
    assert plus_first(i32, s=(1.0,)).dtype == np.float64
    assert plus_first(i32, s=(True,)).dtype == np.int32
    # 0.5 and np.float64(0.5) likewise where NumPy promotes them differently (NumPy 2: the
    # NumPy scalar is not weak; NumPy 1.x promotes both by value).
    assert plus_first(f32, s=(0.5,)).dtype == (f32 + 0.5).dtype
    assert plus_first(f32, s=(np.float64(0.5),)).dtype == (f32 + np.float64(0.5)).dtype
    assert plus_first.cache_info().misses == 5

    # 0.0 and -0.0 are equal, yet divide differently.
    divide = tm.jit(lambda a, *, s: a / s)
    x = np.ones(2)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(divide(x, s=0.0), x / 0.0)
        np.testing.assert_array_equal(divide(x, s=-0.0), x / -0.0)

    # NaN equals nothing, not even itself: without a canonical key it never hit, and each
    # call traced again and added an entry.
    times = tm.jit(lambda a, *, s: a * s[0])
    for _ in range(5):
        assert np.isnan(times(x, s=(float("nan"),))).all()
    info = times.cache_info()
    assert (info.hits, info.misses, info.entries) == (4, 1, 1)


def test_dict_keys_of_arguments_are_keyed_by_type():
    double = tm.jit(lambda p: {k: v * 2 for k, v in p.items()})
    x = np.ones(2, np.float32)
    assert list(double({1: x})) == [1]
    out = double({True: x})              # == 1, but another key: another structure
    assert [type(k) for k in out] == [bool]
    assert double({1.0: x}).keys() == {1.0} and double.cache_info().misses == 3
    assert _tree.flatten({1: x})[1] != _tree.flatten({True: x})[1]
    assert _tree.flatten({0.0: x})[1] != _tree.flatten({-0.0: x})[1]
    assert _tree.flatten({(1, 2): x})[1] == _tree.flatten({(1, 2): x})[1]


def test_jitted_methods_bind_like_functions(rng):
    class Scaler:
        def __init__(self, scale):
            self.scale = scale

        @tm.jit
        def __call__(self, x):
            return x * self.scale

        @staticmethod
        @tm.jit
        def double(x):
            return x * 2

    x = rng.standard_normal(3).astype(np.float32)
    two, three = Scaler(2.0), Scaler(3.0)
    np.testing.assert_allclose(two(x), x * 2)
    np.testing.assert_allclose(three(x), x * 3)   # its own program: self.scale is baked in
    np.testing.assert_allclose(two(x), x * 2)
    info = Scaler.__call__.cache_info()             # one cache, on the function
    assert (info.hits, info.misses) == (1, 2) and two.__call__.cache_info() == info
    assert "linalg.generic" in two.__call__.lower(x).traced    # lower binds too
    np.testing.assert_allclose(Scaler.double(x), x * 2)
    np.testing.assert_allclose(two.double(x), x * 2)

    # An instance that is a tree of arrays is traced like any argument: one program for
    # every instance of that structure.
    @dataclasses.dataclass
    class Linear:
        w: np.ndarray
        b: np.ndarray

        @tm.jit
        def apply(self, x):
            return x @ self.w + self.b

    w, b = rng.standard_normal((3, 2)).astype(np.float32), np.ones(2, np.float32)
    for layer in (Linear(w, b), Linear(2 * w, b)):
        np.testing.assert_allclose(layer.apply(x[None]), x[None] @ layer.w + b, rtol=1e-5)
    assert Linear.apply.cache_info().misses == 1
