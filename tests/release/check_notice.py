"""NOTICE names everything tinymlir ships or links that was made elsewhere (CTest
release_notice):

- every file under models/ (installed as share/tinymlir/models), by its path;
- every Debian package whose library the installed libraries and commands load (ldd, then
  dpkg -S), by the package's name;
- the packages compiled in (static libraries, header-only libraries: CMake passes them);

and LICENSE is the licence every manifest names (SPDX: Apache-2.0 WITH LLVM-exception).

    check_notice.py SOURCE_DIR PREFIX PACKAGE...
"""
import glob
import os
import re
import subprocess
import sys
import tomllib

SPDX = "Apache-2.0 WITH LLVM-exception"
# The sanitizers' runtimes, which only a sanitizer build (scripts/test.sh --sanitize, --tsan)
# links: nothing that is shipped loads them.
SANITIZER_RUNTIME = re.compile(r"^lib(a|ub|t|l|hwa)san\.so")


def package_of(path):
    """The Debian package that ships `path` (with /usr merged or not), or None."""
    # The file itself first: a symbolic link may come from another package (a -dev one).
    real = os.path.realpath(path)
    candidates = []
    for p in (real, path):
        candidates += [p, p[len("/usr"):] if p.startswith("/usr/") else "/usr" + p]
    for p in candidates:
        out = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.split(":")[0].strip()
    return None


def main():
    source, prefix, *compiled_in = sys.argv[1:]
    notice = open(os.path.join(source, "NOTICE")).read()
    words = set(re.findall(r"[\w.+-]+", notice))
    failures = []

    for root, _, files in os.walk(os.path.join(source, "models")):
        for name in files:
            path = os.path.relpath(os.path.join(root, name), source)
            if path not in notice:
                failures.append(f"{path} is shipped but NOTICE does not name it")

    binaries = (glob.glob(os.path.join(prefix, "lib*", "**", "*.so.*"), recursive=True)
                + glob.glob(os.path.join(prefix, "lib*", "tinymlir-compiler"))
                + glob.glob(os.path.join(prefix, "bin", "*")))
    libraries = set()
    for binary in binaries:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        libraries.update(m for m in re.findall(r"=> (/\S+)", out)
                         if not os.path.realpath(m).startswith(os.path.realpath(prefix))
                         and not SANITIZER_RUNTIME.search(os.path.basename(m)))
    if not libraries:
        failures.append(f"ldd found no libraries for {binaries}")
    for library in sorted(libraries):
        package = package_of(library)
        if package is None:
            failures.append(f"{library} is loaded, and no Debian package ships it")
        elif package.split(":")[0] not in words:
            failures.append(f"{library} (Debian package {package}) is loaded but NOTICE does "
                            "not name the package")
    for package in compiled_in:
        if package not in words:
            failures.append(f"{package} is compiled in but NOTICE does not name it")

    licence = open(os.path.join(source, "LICENSE")).read()
    if f"SPDX-License-Identifier: {SPDX}" not in licence or "LLVM Exceptions" not in licence:
        failures.append(f"LICENSE is not {SPDX}")
    manifests = {
        "bindings/rust/Cargo.toml": lambda t: t["workspace"]["package"]["license"],
        "examples/rust/Cargo.toml": lambda t: t["package"]["license"],
        "bindings/python/pyproject.toml": lambda t: t["project"]["license"]["text"],
    }
    for path, read in manifests.items():
        with open(os.path.join(source, path), "rb") as f:
            if read(tomllib.load(f)) != SPDX:
                failures.append(f"{path} does not name the licence {SPDX}")
    for crate in ("tinymlir", "tinymlir-sys"):
        with open(os.path.join(source, "bindings", "rust", crate, "Cargo.toml"), "rb") as f:
            if tomllib.load(f)["package"].get("license") != {"workspace": True}:
                failures.append(f"bindings/rust/{crate} does not take the workspace's licence")
    for path in glob.glob(os.path.join(prefix, "lib*", "**", "tinymlir.pc"), recursive=True) + \
            glob.glob(os.path.join(prefix, "lib*", "**", "tinymlirConfig.cmake"), recursive=True):
        if f"SPDX-License-Identifier: {SPDX}" not in open(path).read():
            failures.append(f"{path} has no SPDX-License-Identifier: {SPDX}")

    if failures:
        print("NOTICE and the licences are incomplete:\n  " + "\n  ".join(failures),
              file=sys.stderr)
        sys.exit(1)
    print(f"ok: {len(libraries)} libraries loaded, each package named in NOTICE")


if __name__ == "__main__":
    main()
