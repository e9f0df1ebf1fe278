#!/usr/bin/env bash
# Configures and builds tinymlir into a build directory (default: build/), reusing what is
# already built. Usage: scripts/build.sh [build-dir] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift || true
"$(dirname "$0")/install-deps.sh"
# ccache (CMakeLists.txt uses it when present): paths relative to the checkout and the
# working directory left out of the hash, so another clone reuses the same objects.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
fi
ninja -C "$dir" -j"$(nproc)"
