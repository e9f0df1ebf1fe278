"""Shared fixtures: the source tree's models and goldens, and the GPT-2 example module.

CTest sets PYTHONPATH to the built package; the example lives in examples/python/.
"""
import json
import os
import sys

import numpy as np
import pytest

SOURCE_DIR = os.environ.get("TINYMLIR_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TINY_A = os.path.join(SOURCE_DIR, "tests", "data", "tiny-a")
TINY_B = os.path.join(SOURCE_DIR, "tests", "data", "tiny-b")
KJV_TINY = os.path.join(SOURCE_DIR, "models", "kjv-tiny")
sys.path.insert(0, os.path.join(SOURCE_DIR, "examples", "python"))

# The goldens' rule for free-running greedy tokens (tests/data/README.md): exact up to the
# first step whose top-1 minus top-2 margin is below this; a later divergence is reported.
# test_model.py's teacher-forced test checks every golden token, those after it included.
MARGIN = 0.01


def golden_cases(model_dir):
    with open(os.path.join(model_dir, "golden.json")) as f:
        return json.load(f)["cases"]


def check_greedy(got, case, report):
    """Asserts that `got` equals the golden greedy ids up to the first step whose margin is
    below MARGIN (all of them if none is); reports a divergence from that step on."""
    want, margins = case["greedy_ids"], case["margins"]
    low = next((i for i, m in enumerate(margins) if m < MARGIN), len(want))
    assert got[:low] == want[:low], (case["prompt"], got, want)
    if got != want:
        first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        report(f"prompt {case['prompt']!r}: diverges from the golden at step {first} "
               f"(margin there {margins[first]:.5f}; first margin < {MARGIN} at step {low})")


@pytest.fixture
def report(request):
    """Prints a note into pytest's output (shown with -rA or on failure)."""
    notes = []
    yield notes.append
    for note in notes:
        print(f"NOTE {request.node.name}: {note}")
        request.node.user_properties.append(("note", note))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# NumPy as the oracle of promotion: what it computes eagerly for the same operands.
def numpy_or_error(fn, *args):
    with np.errstate(all="ignore"):
        try:
            return fn(*args), None
        except Exception as e:   # what NumPy raises, the jitted function must raise too
            return None, e


def check_like_numpy(jitted, eager, *args):
    want, error = numpy_or_error(eager, *args)
    if error is not None:
        with pytest.raises(type(error)):
            jitted(*args)
        return
    want = np.asarray(want)
    if want.dtype == object:
        # NumPy 1.x computes with an int beyond int64 as a Python object. Integer arithmetic
        # cannot be traced (OverflowError); with floats the values are float64's.
        try:
            got = jitted(*args)
        except OverflowError:
            return
        np.testing.assert_array_equal(got, want.astype(np.float64))
        return
    with np.errstate(all="ignore"):
        got = jitted(*args)
    assert got.dtype == want.dtype, (args, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)
