"""Imports the tinymlir package from an install prefix, as a user's interpreter would, and
runs a program with it (CTest `python_installed_package`; not a pytest module).

    /usr/bin/python3 -I -B check_installed.py PREFIX INSTALL_DIR

Run in isolated mode (-I), so neither PYTHONPATH nor the user site can supply the package:
the only directories added are the site directories Python itself names for PREFIX
(site.getsitepackages([PREFIX]); with Debian's python3 these include
PREFIX/lib/python3.X/dist-packages, which for the prefix /usr/local is on sys.path as it
is). INSTALL_DIR is where CMake was told to install the package (TINYMLIR_PYTHON_INSTALL_DIR).
Checks: the package imported is the installed one; its extension loaded libtinymlir.so from
PREFIX (its install RPATH, not the build tree's); __version__ is the library's; a traced
program compiles and runs.
"""
import os
import site
import sys


def fail(message):
    sys.exit(f"check_installed.py: {message}")


def main(prefix, install_dir):
    prefix = os.path.realpath(prefix)
    expected = os.path.join(prefix, install_dir)
    site_dirs = [os.path.realpath(d) for d in site.getsitepackages([prefix])]
    if os.path.realpath(expected) not in site_dirs:
        fail(f"{expected} is not a site directory of {sys.executable} for the prefix {prefix} "
             f"(those are: {', '.join(site_dirs)})")
    # In front, so that a tinymlir installed elsewhere (/usr/local) cannot answer instead.
    sys.path[:0] = [d for d in site_dirs if os.path.isdir(d)]

    import numpy as np
    import tinymlir as tm

    package = os.path.realpath(os.path.dirname(tm.__file__))
    if package != os.path.join(os.path.realpath(expected), "tinymlir"):
        fail(f"imported tinymlir from {package}, not from the install in {expected}")
    with open("/proc/self/maps") as f:
        libraries = {line.split()[-1] for line in f if "libtinymlir.so" in line}
    if not libraries or not all(os.path.realpath(p).startswith(prefix + os.sep)
                                for p in libraries):
        fail(f"libtinymlir.so was loaded from {sorted(libraries)}, not from {prefix}")
    if tm.__version__ != tm.capi.tm_version() or tm.__version__ != tm.capi.TM_VERSION_STRING:
        fail(f"__version__ {tm.__version__!r}, library {tm.capi.tm_version()!r}, header "
             f"{tm.capi.TM_VERSION_STRING!r}")

    @tm.jit
    def affine(x, g, b):
        return (x * g + b) * 0.5

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    g, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    np.testing.assert_allclose(affine(x, g, b), (x * g + b) * 0.5)
    print(f"tinymlir {tm.__version__} from {package}, libtinymlir from {sorted(libraries)[0]}: ok")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: check_installed.py PREFIX INSTALL_DIR")
    main(sys.argv[1], sys.argv[2])
