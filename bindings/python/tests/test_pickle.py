"""Objects handed to other processes: a jitted function pickles as its function and options
(by name when defined at module level, as a function does), so multiprocessing's spawn start
can run it; handles of native state (contexts, traces, programs, models) refuse pickling and
copying with a message that says what to do instead."""
import copy
import multiprocessing
import pickle

import numpy as np
import pytest

import tinymlir as tm
from conftest import KJV_TINY


@tm.jit
def double(a):
    return a * 2.0


def triple(a):
    return a * 3.0


class Layer:
    @tm.jit
    def shift(self, a):
        return a + 1.0


X = np.arange(4, dtype=np.float32)


def test_a_module_level_jitted_function_pickles_by_name():
    assert pickle.loads(pickle.dumps(double)) is double
    assert copy.deepcopy(double) is double
    assert pickle.loads(pickle.dumps(Layer.shift)) is Layer.shift


def test_any_other_jitted_function_pickles_as_its_function_and_options():
    jitted = tm.jit(triple, max_specializations=3, opt_level=1)
    copied = pickle.loads(pickle.dumps(jitted))
    assert copied is not jitted
    np.testing.assert_array_equal(copied(X), X * 3)
    assert copied._options == jitted._options and copied._max_specializations == 3
    assert copied.cache_info().entries == 1   # its own programs, not the original's


def test_a_lambda_is_refused_by_pickle_as_for_any_function():
    # pickle's own error, naming the function (PicklingError at module level,
    # AttributeError for a local one).
    with pytest.raises((pickle.PicklingError, AttributeError), match="lambda"):
        pickle.dumps(tm.jit(lambda a: a))


def test_spawned_processes_run_a_jitted_function():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        results = pool.map(double, [X, X + 1])
    np.testing.assert_array_equal(results[0], X * 2)
    np.testing.assert_array_equal(results[1], (X + 1) * 2)


@pytest.mark.parametrize("make, hint, attempts", [
    (lambda: tm.Context(), "create a Context", (pickle.dumps, copy.copy, copy.deepcopy)),
    (lambda: tm.Model.load(KJV_TINY), r"Model.load\(\) its directory again",
     (pickle.dumps, copy.copy, copy.deepcopy)),
    (lambda: tm.jit(triple).lower(X).program, r"export\(\) it to a file",
     (pickle.dumps, copy.copy, copy.deepcopy)),
    # A shallow copy of a jitted function shares its context, as it may.
    (lambda: tm.jit(triple, context=tm.Context()), "a tinymlir context",
     (pickle.dumps, copy.deepcopy)),
])
def test_handles_refuse_pickling_and_copying_with_what_to_do(make, hint, attempts):
    obj = make()
    for attempt in attempts:
        with pytest.raises(TypeError, match="cannot be pickled or copied") as e:
            attempt(obj)
        assert e.match(hint)
