"""The exception hierarchy: one class per tm_status, all under tinymlir.Error.

The SWIG module raises these for every failed call (its tm_status typemap calls
error_from_status with the library's tm_last_error() message), and the package raises them
for the checks it makes itself. Each class also derives from the closest built-in exception,
so that `except ValueError` or `except OSError` code written for NumPy or files keeps working.
"""
import enum
from typing import Optional

from . import capi


class Status(enum.IntEnum):
    """tm_status, with the values of the C header."""

    OK = capi.TM_OK
    INVALID_ARGUMENT = capi.TM_ERROR_INVALID_ARGUMENT
    SHAPE = capi.TM_ERROR_SHAPE
    DTYPE = capi.TM_ERROR_DTYPE
    OUT_OF_RANGE = capi.TM_ERROR_OUT_OF_RANGE
    COMPILE = capi.TM_ERROR_COMPILE
    RUNTIME = capi.TM_ERROR_RUNTIME
    UNSUPPORTED = capi.TM_ERROR_UNSUPPORTED
    IO = capi.TM_ERROR_IO
    OUT_OF_MEMORY = capi.TM_ERROR_OUT_OF_MEMORY
    BUSY = capi.TM_ERROR_BUSY


class Error(Exception):
    """A failed tinymlir call. `status` is the tm_status; str(error) is the message."""

    status: Optional["Status"] = None

    def __init__(self, message: str, status: Optional[int] = None):
        # Only the message goes to the built-in base: OSError would read a second argument
        # as a strerror.
        super().__init__(message)
        if status is not None:
            self.status = Status(status)

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class InvalidArgumentError(Error, ValueError):
    status = Status.INVALID_ARGUMENT


class ShapeError(Error, ValueError):
    status = Status.SHAPE


class DtypeError(Error, TypeError):
    status = Status.DTYPE


class OutOfRangeError(Error, IndexError):
    status = Status.OUT_OF_RANGE


class CompileError(Error):
    status = Status.COMPILE


class ExecutionError(Error, RuntimeError):
    """TM_ERROR_RUNTIME: compiled code failed while running."""

    status = Status.RUNTIME


class UnsupportedError(Error, NotImplementedError):
    status = Status.UNSUPPORTED


class LoadError(Error, OSError):
    """TM_ERROR_IO: a file is missing, unreadable or malformed."""

    status = Status.IO


class OutOfMemoryError(Error, MemoryError):
    status = Status.OUT_OF_MEMORY


class BusyError(Error, RuntimeError):
    """TM_ERROR_BUSY: the object is in use by another call (a model generating on another
    thread, or the model of the generate() whose callback made this call); nothing was
    changed. Try again once that call has returned."""

    status = Status.BUSY


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, ShapeError, DtypeError, OutOfRangeError, CompileError,
    ExecutionError, UnsupportedError, LoadError, OutOfMemoryError, BusyError)}


def error_from_status(status: int, message: str) -> Error:
    """The exception for a failed tm_status (called from the SWIG module)."""
    try:
        status = Status(status)
    except ValueError:  # a status newer than this package: still an Error
        error = Error(f"{message} (tm_status {status})")
        error.status = status
        return error
    return _BY_STATUS.get(status, Error)(message, status)
