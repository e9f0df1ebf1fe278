"""The SWIG layer and the handle objects: one C function per Python function, handles freed
exactly once."""
import gc

import numpy as np
import pytest

import tinymlir as tm
from tinymlir import capi


def test_versions():
    assert capi.tm_api_version() == capi.TM_API_VERSION
    assert tm.__version__ == capi.tm_version() == capi.TM_VERSION_STRING


def test_the_c_api_in_ten_lines():
    # README's C example, call for call.
    ctx = capi.tm_context_create()
    tr = capi.tm_trace_begin(ctx, "affine")
    x = capi.tm_op_input(tr, capi.TM_F32, [2, 4])
    g = capi.tm_op_input(tr, capi.TM_F32, [4])
    b = capi.tm_op_input(tr, capi.TM_F32, [4])
    half = capi.tm_op_scalar(tr, capi.TM_F32, 0.5)
    y = capi.tm_op_mul(tr, capi.tm_op_add(tr, capi.tm_op_mul(tr, x, g), b), half)
    assert capi.tm_value_type(tr, y) == (capi.TM_F32, (2, 4))
    capi.tm_trace_end(tr, [y])
    prog = capi.tm_compile(ctx, tr, None)
    assert capi.tm_program_num_inputs(prog) == 3 and capi.tm_program_num_outputs(prog) == 1
    assert capi.tm_program_input_type(prog, 1) == (capi.TM_F32, (4,))
    xs = np.arange(8, dtype=np.float32).reshape(2, 4)
    gs, bs = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    out = np.empty((2, 4), np.float32)
    capi.tm_invoke(prog, [xs, gs, bs], [out])
    np.testing.assert_array_equal(out, (xs * gs + bs) * 0.5)
    assert capi.tm_cache_stats(ctx) == (0, 1, 1)
    with pytest.raises(tm.OutOfRangeError):
        capi.tm_program_input_type(prog, 3)
    capi.tm_program_release(prog)
    capi.tm_trace_destroy(tr)
    capi.tm_context_destroy(ctx)


def test_compile_options_struct():
    options = capi.tm_compile_options()
    capi.tm_compile_options_init(options)
    assert options.target == capi.TM_TARGET_CPU and options.optimize == 1
    assert options.use_blas == 1 and options.opt_level == 3 and options.struct_size > 0
    ctx = tm.Context()
    with tm.Trace(ctx) as trace:
        x = capi.tm_op_input(trace.ptr, capi.TM_F32, [2])
        trace.end([x])
        options.struct_size = 1
        with pytest.raises(tm.InvalidArgumentError, match="struct_size"):
            capi.tm_compile(ctx.ptr, trace.ptr, options)


def test_null_handles_are_library_errors():
    with pytest.raises(tm.InvalidArgumentError, match="NULL"):
        capi.tm_trace_begin(None, "x")
    capi.tm_context_destroy(None)          # accepts NULL, as documented
    with pytest.raises(TypeError):         # the wrong handle type never reaches C
        capi.tm_trace_begin(capi.tm_compile_options(), "x")


@pytest.fixture
def count_frees(monkeypatch):
    gc.collect()  # garbage of earlier tests is not ours to count
    freed = []

    def counting(cls):
        original = cls._free

        def free(ptr):
            freed.append(cls.__name__)
            original(ptr)

        monkeypatch.setattr(cls, "_free", staticmethod(free))

    for cls in (tm.Context, tm.Trace, tm.Program, tm.Model):
        counting(cls)
    return freed


def test_handles_are_freed_exactly_once(count_frees):
    ctx = tm.Context()
    trace = tm.Trace(ctx, "f")
    x = capi.tm_op_input(trace.ptr, capi.TM_F32, [2])
    trace.end([capi.tm_op_neg(trace.ptr, x)])
    program = tm.Program.compile(ctx, trace)
    trace.close()
    trace.close()
    assert trace.closed
    with pytest.raises(tm.InvalidArgumentError, match="closed"):
        trace.value_type(x)
    del trace
    gc.collect()
    assert count_frees == ["Trace"]

    # Two references to one program: each object releases its own, once.
    other = program.retain()
    program.close()
    out = np.empty(2, np.float32)
    other.invoke([np.array([1, -2], np.float32)], [out])
    np.testing.assert_array_equal(out, [-1, 2])
    del program, other
    gc.collect()
    assert count_frees == ["Trace", "Program", "Program"]

    with ctx:
        pass
    del ctx
    gc.collect()
    assert count_frees == ["Trace", "Program", "Program", "Context"]


def test_jit_releases_its_programs(count_frees):
    f = tm.jit(lambda a: a * 3, context=tm.Context())
    f(np.ones(2, np.float32))
    f(np.ones(3, np.float32))
    assert count_frees == ["Trace", "Trace"]          # traces end with the call
    f.cache_clear()
    assert count_frees.count("Program") == 2


def test_models_keep_their_context_open(count_frees):
    from conftest import TINY_A
    ctx = tm.Context()
    model = tm.Model.load(TINY_A, context=ctx)
    with pytest.raises(tm.InvalidArgumentError, match="open models"):
        ctx.close()
    model.close()
    model.close()
    ctx.close()
    assert count_frees == ["Model", "Context"]
