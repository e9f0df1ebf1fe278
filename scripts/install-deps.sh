#!/usr/bin/env bash
# Installs the Debian packages tinymlir needs, only those missing. Idempotent; needs root
# (or sudo) when something is missing.
#   scripts/install-deps.sh           what building and testing need
#   scripts/install-deps.sh --bench   the same (the benchmark's references, PyTorch among them,
#                                     are the tests' too; bench/run.sh still passes it)
set -euo pipefail

packages=(
  # build
  cmake ninja-build pkg-config g++ ccache
  # compiler core; OpenBLAS's single-threaded static library, linked in privately
  llvm-22-dev libmlir-22-dev mlir-22-tools libopenblas-serial-dev
  # NumPy's BLAS: the threaded OpenBLAS (the bench's references and GEMM floor)
  libopenblas-dev
  # model
  nlohmann-json3-dev libpcre2-dev
  # tests (clang with its runtime libraries builds the libFuzzer targets; llvm-22-tools has
  # lit and FileCheck for the passes' tests; abigail-tools checks the C ABI)
  libgtest-dev clang libclang-rt-14-dev llvm-22-tools abigail-tools
  # bindings: Python (SWIG, Debian's python3 with numpy/pytest), Rust (bindgen), Go
  swig python3-dev python3-numpy python3-pytest bindgen golang-go
  # the Python package through pip, offline, into a virtual environment (python_pip_install)
  python3-venv python3-pip python3-setuptools python3-wheel
  # PyTorch (1.13, CPU): a DLPack producer for the Python tests, and the bench's reference
  python3-torch
  # the C API reference (docs_c_api_reference)
  doxygen
)

case "${1:-}" in
  "") ;;
  # What the benchmark needs beyond the tests (PyTorch, its second reference beside NumPy,
  # is installed for the tests already).
  --bench) ;;
  *) echo "install-deps.sh: unknown option '$1' (it takes --bench or nothing)" >&2; exit 2 ;;
esac

missing=()
# Rust's cargo may come from rustup rather than Debian; only install Debian's if none.
command -v cargo >/dev/null 2>&1 || packages+=(cargo)
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "Installing: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
