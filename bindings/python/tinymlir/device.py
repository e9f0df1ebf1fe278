"""Device buffers (tm_device_buffer): memory on a target's device that programs read and
write in place, for tensors that stay there across calls.

    buf = tinymlir.DeviceBuffer(4 * 1024, target="gpu")
    x = buf.tensor(np.float32, (1024,))
    x.write(np.arange(1024, dtype=np.float32))
    program.invoke([x], [y])        # a DeviceTensor goes where an array would
    y.numpy()                       # waits for the device, then copies the floats back

The host reaches a buffer's bytes only through write, read, copy_from and fill: on the GPU
its memory is the device's. Everything on a device happens in the order it was asked for;
only reads wait.
"""
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import capi
from ._dtypes import from_tm, to_tm
from ._errors import InvalidArgumentError
from ._handles import Target, _Handle


class DeviceBuffer(_Handle):
    """`nbytes` zero bytes on `target`'s device (tm_device_buffer_create)."""

    _free = staticmethod(capi.tm_device_buffer_destroy)
    _kind = "device buffer"

    def __init__(self, nbytes: int, target: Union[Target, str, int] = Target.CPU):
        super().__init__(capi.tm_device_buffer_create(int(Target.of(target)), int(nbytes)))

    @property
    def nbytes(self) -> int:
        return capi.tm_device_buffer_size(self._live_ptr())

    @property
    def target(self) -> Target:
        return Target(capi.tm_device_buffer_target(self._live_ptr()))

    def _address(self) -> int:
        return capi.tmpy_device_buffer_address(self._live_ptr())

    def write(self, data: Any, offset: int = 0) -> None:
        """Copies the bytes of `data` (a C-contiguous array, bytes, ...) in from `offset`."""
        with self._using() as ptr:
            capi.tm_device_buffer_write(ptr, int(offset), _contiguous(data))

    def read(self, nbytes: Optional[int] = None, offset: int = 0) -> bytes:
        """`nbytes` bytes from `offset` (to the end when None), once the device is done."""
        n = self.nbytes - int(offset) if nbytes is None else int(nbytes)
        out = bytearray(max(n, 0))
        with self._using() as ptr:
            capi.tm_device_buffer_read(ptr, int(offset), out)
        return bytes(out)

    def copy_from(self, src: "DeviceBuffer", nbytes: int, offset: int = 0,
                  src_offset: int = 0) -> None:
        """Copies `nbytes` from `src` at `src_offset` to `offset`, on the device."""
        with self._using() as dst, src._using() as source:
            capi.tm_device_buffer_copy(dst, int(offset), source, int(src_offset), int(nbytes))

    def fill(self, value: int = 0, nbytes: Optional[int] = None, offset: int = 0) -> None:
        """Sets `nbytes` bytes from `offset` (to the end when None) to `value`."""
        n = self.nbytes - int(offset) if nbytes is None else int(nbytes)
        with self._using() as ptr:
            capi.tm_device_buffer_fill(ptr, int(offset), int(value), n)

    def tensor(self, dtype: Any, shape: Sequence[int], offset: int = 0) -> "DeviceTensor":
        """A C-contiguous tensor of this buffer from byte `offset`, for program calls."""
        return DeviceTensor(self, dtype, shape, offset)


class DeviceTensor:
    """A tensor in a DeviceBuffer: Program.invoke takes it in place of an array, and the
    program reads or writes the buffer where it is. It keeps the buffer alive."""

    def __init__(self, buffer: DeviceBuffer, dtype: Any, shape: Sequence[int], offset: int = 0):
        self.buffer = buffer
        self.dtype = np.dtype(dtype)
        self._tm_dtype = to_tm(self.dtype, "a device tensor")
        self.shape: Tuple[int, ...] = tuple(int(d) for d in shape)
        self.offset = int(offset)
        if any(d < 0 for d in self.shape) or self.offset < 0:
            raise InvalidArgumentError(f"a device tensor of shape {self.shape} at byte "
                                       f"{self.offset}: sizes and offsets are not negative")
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        if self.offset + self.nbytes > buffer.nbytes:
            raise InvalidArgumentError(
                f"a device tensor of {self.nbytes} bytes at byte {self.offset} runs past the "
                f"end of its buffer of {buffer.nbytes} bytes")

    @property
    def _tm_tensor(self) -> Tuple[int, int, Tuple[int, ...]]:
        return (self.buffer._address() + self.offset, self._tm_dtype, self.shape)

    def write(self, array: Any) -> None:
        """Copies `array` (converted to this tensor's dtype and shape) in."""
        a = np.ascontiguousarray(array, dtype=self.dtype)
        if a.shape != self.shape:
            raise InvalidArgumentError(f"an array of shape {a.shape} written to a device "
                                       f"tensor of shape {self.shape}")
        self.buffer.write(a, self.offset)

    def numpy(self) -> np.ndarray:
        """The tensor's elements, copied to a new array once the device is done."""
        out = np.empty(self.shape, dtype=from_tm(self._tm_dtype))
        with self.buffer._using() as ptr:
            capi.tm_device_buffer_read(ptr, self.offset, out)
        return out

    def __repr__(self) -> str:
        return (f"DeviceTensor({self.dtype}, {self.shape}, byte {self.offset} of a "
                f"{self.buffer.target.name.lower()} buffer)")


def _contiguous(data: Any) -> Any:
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data)
    return data
