"""Builds the package's extension, tinymlir._capi, against an installed tinymlir.

pyproject.toml holds the package's metadata; this file adds what setuptools cannot read from
a table: the version and the compiler and linker flags, from the tinymlir that pkg-config
finds (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig for a prefix of your own), and SWIG's
generation of the extension from tinymlir.i. The extension records the library's folder as
its rpath, so `import tinymlir` finds that libtinymlir.so without LD_LIBRARY_PATH.

Nothing is downloaded: setuptools, wheel and NumPy come from the interpreter (Debian:
python3-setuptools, python3-wheel, python3-numpy; pip install --no-build-isolation), SWIG
and pkg-config from the system.
"""
import os
import shlex
import shutil
import subprocess
import sys

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def pkg_config(*args):
    """pkg-config's answer about tinymlir, or an exit naming what to install or set."""
    if shutil.which("pkg-config") is None:
        sys.exit("tinymlir's setup.py: pkg-config is not installed (Debian: apt-get install "
                 "pkg-config); it finds the installed tinymlir")
    result = subprocess.run(["pkg-config", *args, "tinymlir"], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("tinymlir's setup.py: pkg-config cannot find tinymlir "
                 f"({result.stderr.strip() or 'no message'}): install the library first "
                 "(cmake --install build --prefix P) and set PKG_CONFIG_PATH=P/lib/pkgconfig")
    return result.stdout.strip()


def flags(option, prefix):
    """The values of pkg-config's `option` (e.g. --cflags-only-I), without their prefix."""
    return [f[len(prefix):] for f in shlex.split(pkg_config(option)) if f.startswith(prefix)]


INCLUDE_DIRS = flags("--cflags-only-I", "-I")
LIBRARY_DIRS = flags("--libs-only-L", "-L")


class BuildSwigExtension(build_ext):
    """build_ext that runs SWIG itself: the wrapper goes to the build's temporary folder
    and the Python half (capi.py) into the package being built, beside the extension (not
    into the source folder, as setuptools' own SWIG step would put it)."""

    def swig_sources(self, sources, extension):
        interfaces = [s for s in sources if s.endswith(".i")]
        if not interfaces:
            return sources
        if shutil.which("swig") is None:
            sys.exit("tinymlir's setup.py: SWIG is not installed (Debian: apt-get install "
                     "swig); it generates the extension from tinymlir.i")
        package_dir = os.path.join(HERE if self.inplace else self.build_lib, "tinymlir")
        os.makedirs(package_dir, exist_ok=True)
        os.makedirs(self.build_temp, exist_ok=True)
        wrapper = os.path.join(self.build_temp, "tinymlirPYTHON_wrap.c")
        # int64_t is `long` on LP64 only with SWIGWORDSIZE64 (as CMake builds it).
        word_size = ["-DSWIGWORDSIZE64"] if sys.maxsize > 2**32 else []
        self.spawn(["swig", "-python", *word_size, f"-I{HERE}",
                    *[f"-I{d}" for d in INCLUDE_DIRS],
                    "-outdir", package_dir, "-o", wrapper, interfaces[0]])
        return [s for s in sources if not s.endswith(".i")] + [wrapper]


setup(
    version=pkg_config("--modversion"),
    ext_modules=[Extension(
        "tinymlir._capi",
        sources=["tinymlir.i"],
        include_dirs=INCLUDE_DIRS + [numpy.get_include()],
        library_dirs=LIBRARY_DIRS,
        libraries=flags("--libs-only-l", "-l"),
        runtime_library_dirs=LIBRARY_DIRS,
    )],
    cmdclass={"build_ext": BuildSwigExtension},
)
