"""The C ABI itself, through ctypes, on the library that tinymlir.capi loaded: for the checks
that need raw memory the SWIG layer never hands out (options structs of another layout's
size, buffers of a chosen capacity). Handles come from tinymlir.capi (int(ptr) is the
address). Not a test module; used by test_capi.py and test_model.py.
"""
import ctypes
import struct

import tinymlir  # noqa: F401 (loads libtinymlir)
from tinymlir import capi


def _loaded_library():
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "/libtinymlir.so" in line})
    assert paths, "libtinymlir.so is not loaded"
    return ctypes.CDLL(paths[0])   # the same, already loaded object


lib = _loaded_library()
P = ctypes.c_void_p
SIZE = ctypes.c_size_t
for name, restype, argtypes in [
    ("tm_last_error", ctypes.c_char_p, []),
    ("tm_compile_options_init_size", ctypes.c_int, [P, SIZE]),
    ("tm_generate_options_init_size", ctypes.c_int, [P, SIZE]),
    ("tm_model_options_init_size", ctypes.c_int, [P, SIZE]),
    ("tm_compile", ctypes.c_int, [P, P, P, ctypes.POINTER(P)]),
    ("tm_program_release", None, [P]),
    ("tm_model_load", ctypes.c_int, [P, ctypes.c_char_p, P, ctypes.POINTER(P)]),
    ("tm_model_destroy", None, [P]),
    ("tm_model_get_stats", ctypes.c_int, [P, P]),
    ("tm_generate", ctypes.c_int, [P, P, SIZE, P, P, P, P, SIZE, ctypes.POINTER(SIZE)]),
    ("tm_tokenize", ctypes.c_int, [P, ctypes.c_char_p, SIZE, P, SIZE, ctypes.POINTER(SIZE)]),
    ("tm_detokenize", ctypes.c_int, [P, P, SIZE, P, SIZE, ctypes.POINTER(SIZE)]),
]:
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = restype, argtypes


def addr(swig_pointer):
    """The address behind a tinymlir.capi handle."""
    return P(int(swig_pointer))


def options(init, size, extra=0):
    """A zeroed buffer filled by a *_options_init_size function for a struct of `size` bytes
    (a published layout's, TM_<STRUCT>_SIZE_V<n>), with `extra` spare bytes after it;
    returns (buffer, size)."""
    buf = ctypes.create_string_buffer(256)
    assert init(buf, size) == 0, last_error()
    assert struct.unpack_from("=I", buf, 0)[0] == size
    assert size + extra <= len(buf)
    return buf, size


def set_size(buf, size):
    struct.pack_into("=I", buf, 0, size)


def status_name(status):
    return capi.tm_status_string(status)


def last_error():
    return lib.tm_last_error().decode()


def int32s(values):
    return (ctypes.c_int32 * max(len(values), 1))(*values)
