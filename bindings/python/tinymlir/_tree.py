"""Argument trees: nested tuples, named tuples, lists, dicts and dataclasses of arrays.

flatten(tree) gives the leaves in a fixed order and a TreeDef: a hashable description of
the containers (types, dict keys, field names, lengths) without the leaves. Two trees with
equal TreeDefs differ only in their leaves, which is what lets a jitted function reuse one
compiled program for, say, every transformer block: the weights are leaves, the block's
structure is the TreeDef. unflatten(treedef, leaves) rebuilds a tree of the same shape.

None is an empty container (no leaves), so optional fields may be left out.

canonical_key(value) is the one comparison of Python values used for cache keys (dict keys
here, @jit's static arguments): by type and exact value, where == would conflate values
that trace differently (1, 1.0 and True; 0.5 and np.float64(0.5); 0.0 and -0.0) or never
match (NaN).
"""
import dataclasses

import numpy as np


class TreeDef:
    """The structure of a tree. `kind` is "leaf", "none", "tuple", "namedtuple", "list",
    "dict" or "dataclass"; `meta` is the container type and its keys or field names."""

    __slots__ = ("kind", "meta", "children", "num_leaves", "_key", "_hash")

    def __init__(self, kind, meta, children):
        self.kind = kind
        self.meta = meta
        self.children = tuple(children)
        self.num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in self.children)
        # Dict keys compared by canonical_key: {True: x} is not the structure of {1: x}
        # (unflatten would give the other's keys back).
        meta_key = canonical_key(meta) if kind == "dict" else meta
        self._key = (kind, meta_key, self.children)
        self._hash = hash(self._key)

    def __eq__(self, other):
        return (isinstance(other, TreeDef) and self._hash == other._hash
                and self._key == other._key)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(map(repr, self.children))
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "tuple":
            return f"({inner})"
        if self.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.meta, self.children)) + "}"
        cls, names = self.meta
        return f"{cls.__name__}(" + ", ".join(
            f"{n}={c!r}" for n, c in zip(names, self.children)) + ")"


def canonical_key(value):
    """A hashable key for a Python value that equals another value's key only if the two
    are the same type and the same exact value, recursively: floats by their bits (so
    -0.0 is not 0.0, and NaN is NaN), NumPy scalars by dtype and bytes, containers by type
    and items. Other objects are keyed by type and themselves (their own == and hash)."""
    kind = type(value)
    if isinstance(value, float):   # np.float64 too; the type keeps them apart
        return (kind, value.hex())
    if isinstance(value, complex):
        return (kind, value.real.hex(), value.imag.hex())
    if isinstance(value, np.generic):
        return (kind, value.dtype.str, value.tobytes())
    if isinstance(value, (tuple, list)):   # named tuples included
        return (kind, tuple(canonical_key(v) for v in value))
    if isinstance(value, (frozenset, set)):
        return (kind, frozenset(canonical_key(v) for v in value))
    if isinstance(value, dict):
        return (kind, tuple((canonical_key(k), canonical_key(v)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (kind, tuple((f.name, canonical_key(getattr(value, f.name)))
                            for f in dataclasses.fields(value)))
    return (kind, value)


LEAF = TreeDef("leaf", None, ())


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(tree, is_leaf=None):
    """(leaves, treedef). Anything that is not a container is a leaf; `is_leaf(x)` may
    declare more things leaves."""
    leaves = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def _flatten(x, leaves, is_leaf):
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return LEAF
    if x is None:
        return TreeDef("none", None, ())
    if _is_namedtuple(x):
        return TreeDef("namedtuple", (type(x), type(x)._fields),
                       [_flatten(v, leaves, is_leaf) for v in x])
    if type(x) is tuple:
        return TreeDef("tuple", None, [_flatten(v, leaves, is_leaf) for v in x])
    if type(x) is list:
        return TreeDef("list", None, [_flatten(v, leaves, is_leaf) for v in x])
    if isinstance(x, dict):
        # Insertion order, as Python iterates dicts: the same keys in another order are
        # another structure (and another compiled program, with inputs in another order).
        keys = tuple(x.keys())
        return TreeDef("dict", keys, [_flatten(x[k], leaves, is_leaf) for k in keys])
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        names = tuple(f.name for f in dataclasses.fields(x))
        return TreeDef("dataclass", (type(x), names),
                       [_flatten(getattr(x, n), leaves, is_leaf) for n in names])
    leaves.append(x)
    return LEAF


def unflatten(treedef, leaves):
    """The tree of structure `treedef` with `leaves` in flatten's order."""
    it = iter(leaves)
    tree = _unflatten(treedef, it)
    if next(it, _END) is not _END:
        raise ValueError("unflatten: more leaves than the tree has")
    return tree


_END = object()


def _unflatten(td, it):
    if td.kind == "leaf":
        leaf = next(it, _END)
        if leaf is _END:
            raise ValueError("unflatten: fewer leaves than the tree has")
        return leaf
    if td.kind == "none":
        return None
    children = [_unflatten(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(children)
    if td.kind == "list":
        return children
    if td.kind == "namedtuple":
        return td.meta[0](*children)
    if td.kind == "dict":
        return dict(zip(td.meta, children))
    # A dataclass, rebuilt without calling __init__ (which may compute or validate fields
    # from arrays that are tracers here); works for frozen dataclasses too.
    cls, names = td.meta
    obj = cls.__new__(cls)
    for name, value in zip(names, children):
        object.__setattr__(obj, name, value)
    return obj


def leaf_paths(treedef, prefix=""):
    """Readable paths of the leaves, in flatten's order (for error messages):
    e.g. "[0].blocks[1].attn.w" or "['wte']"."""
    if treedef.kind == "leaf":
        return [prefix]
    if treedef.kind == "dict":
        steps = [f"[{k!r}]" for k in treedef.meta]
    elif treedef.kind in ("dataclass", "namedtuple"):
        steps = [f".{n}" for n in treedef.meta[1]]
    else:
        steps = [f"[{i}]" for i in range(len(treedef.children))]
    return [p for step, child in zip(steps, treedef.children)
            for p in leaf_paths(child, prefix + step)]


def map_leaves(fn, tree, is_leaf=None):
    leaves, treedef = flatten(tree, is_leaf)
    return unflatten(treedef, [fn(x) for x in leaves])
