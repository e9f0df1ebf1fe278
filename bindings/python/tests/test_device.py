"""tinymlir.DeviceBuffer and DeviceTensor: bytes in and out, programs run on buffers in place
(against NumPy in float64), the errors named; on the GPU target, in a child process on the
software CUDA device (TINYMLIR_CUDA_DRIVER=software), two programs chained through buffers
without the host waiting."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinymlir as tm


def affine_program(target, n):
    """y = 3 x + 1 over n float32s, compiled for `target`."""
    with tm.Context() as ctx, tm.Trace(ctx, "affine") as tr:
        x = tm.capi.tm_op_input(tr.ptr, tm.capi.TM_F32, [n])
        three = tm.capi.tm_op_scalar(tr.ptr, tm.capi.TM_F32, 3.0)
        one = tm.capi.tm_op_scalar(tr.ptr, tm.capi.TM_F32, 1.0)
        y = tm.capi.tm_op_add(tr.ptr, tm.capi.tm_op_mul(tr.ptr, x, three), one)
        tr.end([y])
        return tm.Program.compile(ctx, tr, tm.compile_options(target))


def test_a_buffer_starts_at_zero_and_takes_bytes_in_out_copied_and_filled():
    a, b = tm.DeviceBuffer(64), tm.DeviceBuffer(64, target="cpu")
    assert a.nbytes == 64 and a.target == tm.Target.CPU
    assert a.read() == bytes(64)
    a.write(bytes(range(1, 9)), offset=8)
    a.fill(0x5A, nbytes=4, offset=20)
    b.copy_from(a, 16, offset=32, src_offset=8)
    want = bytearray(64)
    want[32:40] = bytes(range(1, 9))
    want[44:48] = b"\x5a" * 4
    assert b.read() == bytes(want)
    assert b.read(4, offset=44) == b"\x5a" * 4


def test_a_program_runs_on_device_tensors_in_place():
    n = 1000
    program = affine_program("cpu", n)
    buf = tm.DeviceBuffer(8 * n + 64)
    x, y = buf.tensor(np.float32, (n,), offset=64), buf.tensor(np.float32, (n,), offset=64 + 4 * n)
    values = (np.arange(n) % 97 * 0.25 - 3.0).astype(np.float32)
    x.write(values)
    program.invoke([x], [y])
    np.testing.assert_array_equal(y.numpy(), (3.0 * values.astype(np.float64) + 1.0).astype(np.float32))
    assert buf.read(64) == bytes(64)
    # A DeviceTensor and an array mix in one call.
    out = np.empty(n, np.float32)
    program.invoke([y], [out])
    np.testing.assert_array_equal(out, (3.0 * y.numpy().astype(np.float64) + 1.0).astype(np.float32))


def test_errors_are_named():
    buf = tm.DeviceBuffer(64)
    with pytest.raises(tm.OutOfRangeError, match=r"bytes \[60, 60 \+ 8\) of the buffer lie outside it"):
        buf.write(bytes(8), offset=60)
    with pytest.raises(tm.InvalidArgumentError, match="bytes is 0"):
        tm.DeviceBuffer(0)
    with pytest.raises(tm.InvalidArgumentError, match="runs past the end of its buffer of 64 bytes"):
        buf.tensor(np.float32, (16,), offset=4)
    with pytest.raises(tm.InvalidArgumentError, match="overlap"):
        buf.copy_from(buf, 8, offset=0, src_offset=4)
    with pytest.raises(tm.DtypeError):
        buf.tensor(np.uint8, (4,))
    with pytest.raises(tm.InvalidArgumentError, match="an array of shape \\(3,\\)"):
        buf.tensor(np.float32, (4,)).write(np.zeros(3, np.float32))
    program = affine_program("cpu", 4)
    x = buf.tensor(np.float32, (4,))
    buf.close()
    with pytest.raises(tm.InvalidArgumentError, match="this device buffer is closed"):
        buf.read()
    with pytest.raises(tm.InvalidArgumentError, match="this device buffer is closed"):
        program.invoke([x], [np.empty(4, np.float32)])


GPU_CHILD = textwrap.dedent("""
    import numpy as np
    import tinymlir as tm
    from test_device import affine_program

    n = 4096
    program = affine_program("gpu", n)
    buf = tm.DeviceBuffer(3 * 4 * n, target="gpu")
    x, y, z = (buf.tensor(np.float32, (n,), offset=4 * n * i) for i in range(3))
    values = (np.arange(n) % 13 - 6).astype(np.float32)
    program.invoke([x], [y])  # compiled, and the pool warmed
    before = tm.capi.tm_target_get_device_counters(tm.capi.TM_TARGET_GPU)
    x.write(values)
    program.invoke([x], [y])
    program.invoke([y], [z])
    queued = tm.capi.tm_target_get_device_counters(tm.capi.TM_TARGET_GPU)
    got = z.numpy()
    after = tm.capi.tm_target_get_device_counters(tm.capi.TM_TARGET_GPU)
    want = (3.0 * (3.0 * values.astype(np.float64) + 1.0) + 1.0).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert queued.host_syncs == before.host_syncs, (before.host_syncs, queued.host_syncs)
    assert after.host_syncs == before.host_syncs + 1
    try:
        tm.DeviceBuffer(64, target="gpu").read(1 << 20)
    except tm.OutOfRangeError as e:
        assert "the buffer has 64 bytes" in str(e), e
    else:
        raise AssertionError("a read past the end was taken")
    print("ok")
""")


def test_gpu_programs_chain_through_buffers_on_the_software_device():
    env = dict(os.environ, TINYMLIR_CUDA_DRIVER="software", TINYMLIR_SOFTWARE_GPU_MEMORY="256M")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", GPU_CHILD], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
