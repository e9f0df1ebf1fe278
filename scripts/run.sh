#!/usr/bin/env bash
# Sets up, builds and runs the main job: the seed chapter's affine_activation example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build >&2
exec build/examples/affine_example "$@"
