"""The package's type hints (PEP 561), checked without a type checker: every public function,
method and property of tinymlir's __all__ is annotated, every annotation resolves
(typing.get_type_hints evaluates the names a checker would look up), and py.typed ships."""
import enum
import importlib
import inspect
import os
import typing

import pytest

import tinymlir as tm


def ours(obj):
    return getattr(obj, "__module__", "").startswith("tinymlir")


def public_callables():
    """(name, function) for every public function of the package and every public method and
    property of its public classes."""
    for name in tm.__all__:
        obj = getattr(tm, name)
        if inspect.ismodule(obj):
            continue                      # tinymlir.capi: SWIG's, untyped
        if inspect.isclass(obj):
            if issubclass(obj, (BaseException, enum.Enum)) and obj.__module__ != "tinymlir.jit":
                members = {k: v for k, v in vars(obj).items() if k in ("__init__", "of")}
            else:
                members = {}
                for klass in reversed(obj.__mro__):
                    if ours(klass):
                        members.update(vars(klass))
            for attr, member in members.items():
                dunder = attr.startswith("__") and attr.endswith("__")
                if attr.startswith("_") and not dunder:
                    continue
                if isinstance(member, property):
                    yield f"{name}.{attr}", member.fget
                elif isinstance(member, (classmethod, staticmethod)):
                    yield f"{name}.{attr}", member.__func__
                elif inspect.isfunction(member) and ours(member):
                    yield f"{name}.{attr}", member
        elif callable(obj):
            yield name, obj


CALLABLES = sorted(public_callables(), key=lambda item: item[0])


def test_the_package_is_marked_typed():
    assert os.path.isfile(os.path.join(os.path.dirname(tm.__file__), "py.typed"))


def test_every_public_callable_is_checked():
    names = {name for name, _ in CALLABLES}
    for expected in ("jit", "JittedFunction.__call__", "JittedFunction.lower", "Model.generate",
                     "Model.load", "Model.info", "Stream.__next__", "Program.invoke",
                     "Context.set_cache_dir", "Tracer.sum", "Tracer.__add__", "exp", "softmax",
                     "where", "Lowered.optimized"):
        assert expected in names
    assert len(CALLABLES) > 100


@pytest.mark.parametrize("name,fn", CALLABLES, ids=[name for name, _ in CALLABLES])
def test_annotations_are_complete_and_resolve(name, fn):
    hints = typing.get_type_hints(fn)      # raises NameError for a name nothing defines
    signature = inspect.signature(fn)
    for parameter in signature.parameters.values():
        if parameter.name in ("self", "cls", "_cls"):   # _cls: a NamedTuple's own __new__
            continue
        assert parameter.name in hints, f"{name}: parameter {parameter.name} has no annotation"
    if not name.endswith(("__init__", "__new__")):
        assert "return" in hints, f"{name}: no return annotation"


def test_module_level_annotations_resolve():
    for name in ("tinymlir", "tinymlir.jit", "tinymlir.model", "tinymlir._handles",
                 "tinymlir._stream", "tinymlir.tracer", "tinymlir.ops"):
        typing.get_type_hints(importlib.import_module(name))
