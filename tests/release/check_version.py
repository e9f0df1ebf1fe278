"""One version everywhere (CTest release_version_agrees): the project's version is
TINYMLIR_ABI_VERSION.TINYMLIR_ABI_MINOR.TINYMLIR_VERSION_PATCH (CMakeLists.txt), and every
place a user reads a version says the same:

- the generated version.h (TM_VERSION_STRING; TM_API_VERSION = 1000 * major + minor);
- `tinymlir --version` and `tinymlir-run --version` (the library's tm_version());
- pkg-config on the installed tinymlir.pc (--modversion, and --atleast-version=MAJOR.MINOR
  accepts it);
- the installed CMake package: find_package(tinymlir MAJOR.MINOR) finds it at that version,
  find_package(tinymlir MAJOR.MINOR+1) does not;
- Python: tinymlir.__version__, and the version pip records in the package's metadata
  (setup.py --version, which asks pkg-config);
- Rust: every Cargo.toml and Cargo.lock of the crates and their example;
- Go: the module has no version of its own to disagree (Go modules take theirs from tags):
  its HeaderVersion is the header's TM_VERSION_STRING and Version() the library's, which
  go_binding_tests compare; here, no .go file or go.mod may spell a version;
- CHANGELOG.md: the newest release is this version.

    check_version.py VERSION ABI_MAJOR ABI_MINOR BUILD_DIR SOURCE_DIR PREFIX CMAKE
"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib

failures = []


def agree(what, got, want):
    if got != want:
        failures.append(f"{what} says {got!r}, the project's version is {want!r}")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main():
    version, abi_major, abi_minor, build, source, prefix, cmake = sys.argv[1:8]
    build, source, prefix = (os.path.abspath(p) for p in (build, source, prefix))
    major, minor = version.split(".")[:2]
    agree("CMake's project version (major.minor)", f"{major}.{minor}",
          f"{abi_major}.{abi_minor}")

    header = open(os.path.join(build, "include", "tinymlir", "version.h")).read()
    agree("version.h TM_VERSION_STRING",
          re.search(r'#define TM_VERSION_STRING "([^"]*)"', header).group(1), version)
    agree("version.h TM_API_VERSION",
          re.search(r"#define TM_API_VERSION (\d+)u", header).group(1),
          str(1000 * int(abi_major) + int(abi_minor)))

    for name in ("tinymlir", "tinymlir-run"):
        out = run([os.path.join(build, "bin", name), "--version"]).stdout.strip()
        agree(f"{name} --version", out, f"{name} {version}")

    env = dict(os.environ)
    pc_dirs = glob.glob(os.path.join(prefix, "lib*", "**", "pkgconfig"), recursive=True)
    env["PKG_CONFIG_PATH"] = os.pathsep.join(pc_dirs)
    agree("pkg-config --modversion tinymlir",
          run(["pkg-config", "--modversion", "tinymlir"], env=env).stdout.strip(), version)
    if run(["pkg-config", f"--atleast-version={major}.{minor}", "tinymlir"], env=env).returncode:
        failures.append(f"pkg-config --atleast-version={major}.{minor} refuses tinymlir")

    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.20)\nproject(v NONE)\n"
                    "find_package(tinymlir ${WANT} CONFIG)\n"
                    'message(STATUS "found=${tinymlir_FOUND} version=${tinymlir_VERSION}")\n')
        for want, found in ((f"{major}.{minor}", True), (f"{major}.{int(minor) + 1}", False)):
            out = run([cmake, "-S", work, "-B", os.path.join(work, want), f"-DWANT={want}",
                       f"-DCMAKE_PREFIX_PATH={prefix}"]).stdout
            if found:
                agree(f"find_package(tinymlir {want})",
                      re.search(r"found=(\S*) version=(\S*)", out).groups(), ("1", version))
            elif "found=1" in out:
                failures.append(f"find_package(tinymlir {want}) accepts tinymlir {version}")

    py = run([sys.executable, "-c", "import tinymlir; print(tinymlir.__version__)"],
             env=dict(env, PYTHONPATH=os.path.join(build, "python")))
    agree("Python tinymlir.__version__", py.stdout.strip() or py.stderr.strip(), version)
    meta = run([sys.executable, "setup.py", "--version"], env=env,
               cwd=os.path.join(source, "bindings", "python"))
    agree("Python metadata (setup.py --version)",
          meta.stdout.strip().splitlines()[-1] if meta.stdout.strip() else meta.stderr, version)

    rust = os.path.join(source, "bindings", "rust")
    manifests = {
        "bindings/rust/Cargo.toml [workspace.package]":
            lambda t: t["workspace"]["package"]["version"],
        "bindings/rust/tinymlir/Cargo.toml tinymlir-sys dependency":
            lambda t: t["dependencies"]["tinymlir-sys"]["version"],
        "examples/rust/Cargo.toml": lambda t: t["package"]["version"],
    }
    paths = {"bindings/rust/Cargo.toml": os.path.join(rust, "Cargo.toml"),
             "bindings/rust/tinymlir/Cargo.toml": os.path.join(rust, "tinymlir", "Cargo.toml"),
             "examples/rust/Cargo.toml": os.path.join(source, "examples", "rust", "Cargo.toml")}
    for what, read in manifests.items():
        with open(paths[what.split(" ")[0]], "rb") as f:
            agree(what, read(tomllib.load(f)), version)
    for lock in ("bindings/rust/Cargo.lock", "examples/rust/Cargo.lock"):
        with open(os.path.join(source, lock), "rb") as f:
            for package in tomllib.load(f)["package"]:
                if package["name"].startswith("tinymlir"):
                    agree(f"{lock} {package['name']}", package["version"], version)

    go = os.path.join(source, "bindings", "go")
    for path in glob.glob(os.path.join(go, "*.go")) + [os.path.join(go, "go.mod")]:
        if path.endswith("_test.go"):
            continue
        for line in open(path):
            if re.search(r'"v?\d+\.\d+\.\d+"', line) and not line.lstrip().startswith("//"):
                failures.append(f"{os.path.relpath(path, source)} spells a version: "
                                f"{line.strip()} (Go's is the header's)")
    if "const HeaderVersion = C.TM_VERSION_STRING" not in open(os.path.join(go, "tinymlir.go")).read():
        failures.append("bindings/go: HeaderVersion is no longer the header's TM_VERSION_STRING")

    changelog = open(os.path.join(source, "CHANGELOG.md")).read()
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    agree("CHANGELOG.md's newest release", releases[0] if releases else None, version)

    if failures:
        print("The versions disagree:\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"ok: {version} everywhere")


if __name__ == "__main__":
    main()
