#!/usr/bin/env bash
# Sets up, builds and runs the main job: `tinymlir generate` on the embedded GPT-2 model
# (models/kjv-tiny). Arguments are passed to `tinymlir generate`; without any, a default
# prompt is used.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build >&2
if [ $# -eq 0 ]; then
  set -- "In the beginning God created"
fi
exec build/bin/tinymlir generate "$@"
