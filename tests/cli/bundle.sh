#!/bin/sh
# Bundles through the main job: `tinymlir compile` writes every program of the embedded
# model; `tinymlir generate --bundle` then compiles nothing (no disk cache either) and
# prints the golden greedy tokens, with and without the KV cache; a bundle made for
# another model is refused with a message.
# Usage: bundle.sh path/to/tinymlir path/to/tests/data/tiny-a
set -eu
cli="$1"
other_model="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
golden="In the beginning of the first year of Darius the son of Darius, the son of Darius"

"$cli" compile --out "$work/bundle" 2>"$work/compile.err"
test -f "$work/bundle/manifest.txt"

"$cli" generate --greedy --tokens 32 --bundle "$work/bundle" "In the beginning" \
  >"$work/kv.out" 2>"$work/kv.err"
grep -q "$golden" "$work/kv.out" || { echo "wrong tokens:" >&2; cat "$work/kv.out" >&2; exit 1; }
grep -Eq "\(0 programs compiled, [1-9][0-9]* loaded from the bundle\)" "$work/kv.err" ||
  { echo "compiled despite the bundle:" >&2; cat "$work/kv.err" >&2; exit 1; }

"$cli" generate --greedy --tokens 12 --no-kv-cache --bundle "$work/bundle" "In the beginning" \
  >"$work/nokv.out" 2>"$work/nokv.err"
grep -q "In the beginning of the first year of Darius" "$work/nokv.out" ||
  { echo "wrong tokens without the KV cache:" >&2; cat "$work/nokv.out" "$work/nokv.err" >&2; exit 1; }

if "$cli" generate --model "$other_model" --ids --bundle "$work/bundle" "1 2 3" \
  >/dev/null 2>"$work/other.err"; then
  echo "a bundle of another model was accepted" >&2
  exit 1
fi
grep -q "compiled for another model" "$work/other.err" || { cat "$work/other.err" >&2; exit 1; }
echo "ok: $(grep -o 'wrote .*' "$work/compile.err")"
