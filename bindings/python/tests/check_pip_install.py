"""pip installs the package into a virtual environment, offline, as the README says:

    python3 -m venv --system-site-packages VENV
    PKG_CONFIG_PATH=PREFIX/lib/pkgconfig VENV/bin/pip install --no-build-isolation --no-index DIR

against the install in PREFIX, from a copy of bindings/python (so that nothing is written
into the sources). Then, in VENV's interpreter without PYTHONPATH: importlib.metadata sees
the package at the library's version and licence, py.typed is installed, the extension
loads PREFIX's libtinymlir.so through its rpath, and a jitted function runs.

    PKG_CONFIG_PATH=PREFIX/lib/pkgconfig check_pip_install.py PREFIX SOURCE_DIR VERSION
"""
import os
import shutil
import subprocess
import sys
import tempfile

CHECK = r"""
import importlib.metadata as metadata, os, sys
import numpy as np
import tinymlir
prefix, version, venv = sys.argv[1:4]
dist = metadata.distribution("tinymlir")
assert dist.version == version == tinymlir.__version__, (dist.version, version, tinymlir.__version__)
assert dist.metadata["License"] == "Apache-2.0 WITH LLVM-exception", dist.metadata["License"]
assert dist.metadata["Name"] == "tinymlir"
files = {str(f) for f in dist.files}
assert "tinymlir/py.typed" in files and "tinymlir/capi.py" in files, sorted(files)
package = os.path.dirname(tinymlir.__file__)
assert package.startswith(os.path.realpath(venv)) or package.startswith(venv), package
assert os.path.isfile(os.path.join(package, "py.typed"))
with open("/proc/self/maps") as maps:
    libraries = {line.split()[-1] for line in maps if "libtinymlir.so" in line}
assert libraries and all(l.startswith(os.path.realpath(prefix)) for l in libraries), libraries
f = tinymlir.jit(lambda x, s: x * s + 1)
np.testing.assert_array_equal(f(np.arange(3.0), 2.0), np.arange(3.0) * 2 + 1)
print("ok:", dist.version, package)
"""


def main():
    prefix, source, version = sys.argv[1:4]
    work = tempfile.mkdtemp(prefix="tinymlir-pip-")
    try:
        src = os.path.join(work, "python")
        shutil.copytree(os.path.join(source, "bindings", "python"), src,
                        ignore=shutil.ignore_patterns("tests", "__pycache__", "build",
                                                      "*.egg-info"))
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                       check=True)
        env = dict(os.environ)
        for name in ("PYTHONPATH", "LD_LIBRARY_PATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
            env.pop(name, None)
        # PKG_CONFIG_PATH (set by CTest) names PREFIX's pkg-config folder.
        env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PIP_NO_CACHE_DIR="1", PYTHONDONTWRITEBYTECODE="1")
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet",
                        "--no-build-isolation", "--no-index", src], check=True, env=env)
        subprocess.run([os.path.join(venv, "bin", "python"), "-I", "-c", CHECK, prefix,
                        version, venv], check=True, env=env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
