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
    with pytest.raises(TypeError, match=r"argument 0\['x'\] is a float"):
        f({"x": 1.5})
    np.testing.assert_allclose(f({"x": np.float32(1.5)}), 3.0)   # NumPy scalars are arrays
