"""The SWIG layer and the handle objects: one C function per Python function, handles freed
exactly once."""
import ctypes
import gc
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import raw_capi as raw
import tinymlir as tm
from conftest import KJV_TINY
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
    assert (lambda i: (i.hits, i.misses, i.entries))(capi.tm_cache_get_info(ctx)) == (0, 1, 1)
    with pytest.raises(tm.OutOfRangeError):
        capi.tm_program_input_type(prog, 3)
    capi.tm_program_release(prog)
    capi.tm_trace_destroy(tr)
    capi.tm_context_release(ctx)


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
    capi.tm_context_release(None)          # accepts NULL, as documented
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


def test_a_model_outlives_its_context(count_frees):
    # The model keeps its own reference to the context (tm_context_retain): the context may
    # be closed, and collected, first.
    from conftest import TINY_A
    ctx = tm.Context()
    model = tm.Model.load(TINY_A, context=ctx)
    ctx.close()
    assert ctx.closed and count_frees == ["Context"]
    del ctx
    gc.collect()
    assert len(model.generate([1, 2, 3], max_new_tokens=4)) == 4
    assert model.logits([1, 2]).shape == (model.info.vocab_size,)
    model.close()
    model.close()
    assert count_frees == ["Context", "Model"]


def test_program_cache_hit():
    ctx = tm.Context()
    with tm.Trace(ctx, "twice") as trace:
        x = capi.tm_op_input(trace.ptr, capi.TM_F32, [3])
        trace.end([capi.tm_op_exp(trace.ptr, x)])
        first = tm.Program.compile(ctx, trace)
        second = tm.Program.compile(ctx, trace)
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.retain().cache_hit is True
    assert capi.tm_program_cache_hit(None) == 0
    # Through @jit: the second function's specialisation is found in the shared context.
    ctx2 = tm.Context()
    a = tm.jit(lambda v: v * 3 + 1, context=ctx2).lower(np.ones(2, np.float32))
    b = tm.jit(lambda v: v * 3 + 1, context=ctx2).lower(np.ones(2, np.float32))
    assert (a.cache_hit, b.cache_hit) == (False, True)


# The first published layouts of the options structs (tinymlir.h, gpt2.h).
FIRST_LAYOUT = {"compile": 20, "generate": 40, "model": 8, "stats": 64}


def check_struct_sizes(call, buf, size, first_layout, output=False):
    """call(buf) -> status of a call given the struct in buf, `size` the library's own
    layout. Options (input): the first layout and a larger size with zero tail are
    accepted, a non-zero tail is UNSUPPORTED (a field this library does not know), a size
    below the first layout INVALID_ARGUMENT. Stats (output, `output`): any size from the
    first layout up is accepted; the library fills the fields it has and leaves a newer
    caller's extra bytes alone."""
    raw.set_size(buf, first_layout)
    assert call(buf) == capi.TM_OK, raw.last_error()
    raw.set_size(buf, size + 8)
    assert call(buf) == capi.TM_OK, raw.last_error()
    buf[size + 5] = b"\x01"
    if output:
        assert call(buf) == capi.TM_OK, raw.last_error()
        assert buf[size + 5] == b"\x01" and struct.unpack_from("=I", buf, 0)[0] == size + 8
    else:
        assert call(buf) == capi.TM_ERROR_UNSUPPORTED
        assert str(size + 8) in raw.last_error()
    buf[size + 5] = b"\x00"
    raw.set_size(buf, first_layout - 4)
    assert call(buf) == capi.TM_ERROR_INVALID_ARGUMENT
    assert "struct_size" in raw.last_error()


def test_options_struct_sizes():
    from conftest import TINY_A
    ctx = capi.tm_context_create()
    tr = capi.tm_trace_begin(ctx, "sizes")
    capi.tm_trace_end(tr, [capi.tm_op_input(tr, capi.TM_F32, [2])])

    def compile_with(buf):
        out = raw.P()
        status = raw.lib.tm_compile(raw.addr(ctx), raw.addr(tr), buf, ctypes.byref(out))
        raw.lib.tm_program_release(out)
        return status

    buf, size = raw.options(raw.lib.tm_compile_options_init_size, capi.TM_COMPILE_OPTIONS_SIZE_V2, extra=8)
    assert size >= FIRST_LAYOUT["compile"]
    check_struct_sizes(compile_with, buf, size, FIRST_LAYOUT["compile"])

    def load_with(buf):
        out = raw.P()
        status = raw.lib.tm_model_load(raw.addr(ctx), TINY_A.encode(), buf, ctypes.byref(out))
        raw.lib.tm_model_destroy(out)
        return status

    buf, size = raw.options(raw.lib.tm_model_options_init_size, capi.TM_MODEL_OPTIONS_SIZE_V3, extra=8)
    check_struct_sizes(load_with, buf, size, FIRST_LAYOUT["model"])

    model = capi.tm_model_load(ctx, TINY_A, None)
    prompt = raw.int32s([1, 2, 3])
    ids = raw.int32s([0] * 4)

    def generate_with(buf):
        n = raw.SIZE()
        return raw.lib.tm_generate(raw.addr(model), prompt, 3, buf, None, None, ids, 4,
                                   ctypes.byref(n))

    buf, size = raw.options(raw.lib.tm_generate_options_init_size, capi.TM_GENERATE_OPTIONS_SIZE_V2, extra=8)
    struct.pack_into("=i", buf, 4, 2)   # max_new_tokens, right after struct_size
    check_struct_sizes(generate_with, buf, size, FIRST_LAYOUT["generate"])

    def stats_with(buf):
        return raw.lib.tm_model_get_stats(raw.addr(model), buf)

    buf = ctypes.create_string_buffer(256)
    size = capi.tm_model_get_stats(model).struct_size   # the SWIG layer's: sizeof
    check_struct_sizes(stats_with, buf, size, FIRST_LAYOUT["stats"], output=True)
    load_seconds = struct.unpack_from("=d", buf, 32)[0]   # offsetof(tm_model_stats, load_seconds)
    assert load_seconds > 0

    capi.tm_model_destroy(model)
    capi.tm_trace_destroy(tr)
    capi.tm_context_release(ctx)


def test_export_and_load_a_program(tmp_path):
    # tm_program_export / tm_program_load: the loaded program (linked without the compiler)
    # gives the compiled one's results bit for bit.
    ctx = tm.Context()
    trace = tm.Trace(ctx, "f")
    x = capi.tm_op_input(trace.ptr, capi.TM_F32, [3, 4])
    w = capi.tm_op_input(trace.ptr, capi.TM_F32, [4, 5])
    trace.end([capi.tm_op_tanh(trace.ptr, capi.tm_op_matmul(trace.ptr, x, w))])
    compiled = tm.Program.compile(ctx, trace)
    path = tmp_path / "f.tmp"
    compiled.export(path)
    loaded = tm.Program.load(path)
    assert loaded.input_types == compiled.input_types
    assert loaded.output_types == compiled.output_types
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((3, 4)).astype(np.float32)
    ws = rng.standard_normal((4, 5)).astype(np.float32)
    want, got = np.zeros((3, 5), np.float32), np.zeros((3, 5), np.float32)
    compiled.invoke([xs, ws], [want])
    loaded.invoke([xs, ws], [got])
    assert np.array_equal(got, want)
    np.testing.assert_allclose(want, np.tanh(xs.astype(np.float64) @ ws), rtol=1e-5, atol=1e-6)
    with pytest.raises(tm.LoadError, match="missing.tmp"):
        tm.Program.load(tmp_path / "missing.tmp")
    path.write_bytes(b"not a program")
    with pytest.raises(tm.LoadError, match="not a tinymlir program file"):
        tm.Program.load(path)


def run_isolated(code):
    """Runs `code` in a fresh interpreter: a crash or hang there fails the test instead of
    taking pytest down."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def test_a_pointer_from_ptr_keeps_its_owner_alive():
    # Each owner below is garbage as soon as .ptr has returned; the pointer must keep it
    # (and its C handle) alive, or these calls read freed memory (they crashed or hung).
    result = run_isolated(f"""
import gc
import numpy as np
import tinymlir as tm
from tinymlir import capi
print(capi.tm_model_info(tm.Model.load({KJV_TINY!r}).ptr))
print(capi.tm_cache_get_info(tm.Context().ptr).hits)
trace = tm.Trace(tm.Context(), "t").ptr
gc.collect()
x = capi.tm_op_input(trace, capi.TM_F32, [3])
capi.tm_trace_end(trace, [capi.tm_op_neg(trace, x)])
ctx = tm.Context()
program = capi.tm_compile(ctx.ptr, trace, None)
ptr = tm.Program(program).ptr
del trace, program
ctx.close()
gc.collect()
out = np.empty(3, np.float32)
capi.tm_invoke(ptr, [np.ones(3, np.float32)], [out])
print(out.tolist())
ptr = tm.jit(lambda a: a * 2, context=tm.Context()).lower(np.ones(3, np.float32)).program.ptr
gc.collect()
capi.tm_invoke(ptr, [np.ones(3, np.float32)], [out])
print(out.tolist())
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:4] == [
        "(50257, 256, 4, 128)", "0", "[-1.0, -1.0, -1.0]", "[2.0, 2.0, 2.0]"]


def test_a_pointer_from_ptr_acts_as_the_swig_pointer():
    ctx = tm.Context()
    ptr = ctx.ptr
    assert int(ptr) == int(ctx.ptr) and ptr == ctx.ptr and ptr != tm.Context().ptr
    assert (lambda i: (i.hits, i.misses, i.entries))(capi.tm_cache_get_info(ptr)) == (0, 0, 0)
    ctx.close()
    with pytest.raises(TypeError):      # refused by the wrapper, never passed to C
        capi.tm_cache_get_info(ptr)
    with pytest.raises(tm.InvalidArgumentError, match="closed"):
        ctx.ptr
    assert "closed" in repr(ptr)


def test_strings_for_the_c_api_are_checked(tmp_path):
    # The C API takes char *: a NUL ends the string there, so "victim\0.tmp" would name
    # "victim". Refused, as open() refuses it; str, bytes and os.PathLike paths work.
    victim = tmp_path / "victim"
    victim.write_text("precious")
    ctx = tm.Context()
    with tm.Trace(ctx, "f") as trace:
        x = capi.tm_op_input(trace.ptr, capi.TM_F32, [2])
        trace.end([capi.tm_op_neg(trace.ptr, x)])
        program = tm.Program.compile(ctx, trace)
    for bad in (f"{victim}\0.tmp", os.fsencode(f"{victim}\0.tmp")):
        with pytest.raises(ValueError, match="path: embedded null byte"):
            program.export(bad)
        with pytest.raises(ValueError, match="path: embedded null byte"):
            tm.Program.load(bad)
    assert victim.read_text() == "precious"
    with pytest.raises(ValueError, match="name: embedded null byte"):
        tm.Trace(ctx, "f\0g")
    with pytest.raises(TypeError, match="name must be a str"):
        tm.Trace(ctx, b"f")
    with pytest.raises(ValueError, match="directory: embedded null byte"):
        ctx.set_cache_dir(f"{tmp_path}\0x")
    with pytest.raises(TypeError, match="path must be a str, bytes or os.PathLike, not NoneType"):
        program.export(None)
    # A file name that is not UTF-8 cannot cross SWIG's char * unchanged: a clear error.
    with pytest.raises(ValueError, match="path .* is not valid UTF-8"):
        program.export(os.fsencode(str(tmp_path)) + b"/p-\xff.tmp")
    with pytest.raises(ValueError, match="path .* is not valid UTF-8"):
        program.export(os.fsdecode(os.fsencode(str(tmp_path)) + b"/p-\xff.tmp"))

    for path in (tmp_path / "a.tmp", str(tmp_path / "b.tmp"), os.fsencode(tmp_path / "c.tmp")):
        program.export(path)
        assert tm.Program.load(path).input_types == program.input_types
    assert sorted(os.listdir(tmp_path)) == ["a.tmp", "b.tmp", "c.tmp", "victim"]
    ctx.set_cache_dir(tmp_path / "cache")
    ctx.set_cache_dir(None)
    # tinymlir.capi itself, for those who call it directly (swig/values.i).
    with pytest.raises(ValueError, match="tm_program_export: embedded null byte in path"):
        capi.tm_program_export(program.ptr, f"{victim}\0.tmp")
    with pytest.raises(ValueError, match="tm_cache_set_dir: embedded null byte in dir"):
        capi.tm_cache_set_dir(ctx.ptr, f"{tmp_path}\0x", 0)
    with pytest.raises(ValueError, match="tm_trace_begin: embedded null byte in name"):
        capi.tm_trace_begin(ctx.ptr, "f\0g")
    with pytest.raises(ValueError, match="tm_model_load: embedded null byte in dir"):
        capi.tm_model_load(ctx.ptr, f"{tmp_path}\0x", None)
    with pytest.raises(TypeError, match="tm_program_load: path must be a str or None, not bytes"):
        capi.tm_program_load(b"x")
    assert victim.read_text() == "precious"
