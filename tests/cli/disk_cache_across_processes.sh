#!/bin/sh
# The disk cache across processes, through the main job: two processes compiling the same
# programs at once both succeed with the same tokens (atomic writes, no torn entry), and a
# third process reads every program from disk, compiles none, and prints the same tokens.
# A cache folder that cannot be used is said on stderr (not only with --verbose); one turned
# off on purpose is not.
# Usage: disk_cache_across_processes.sh path/to/tinymlir
set -eu
cli="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR="$work/cache"
prompt="In the beginning"

"$cli" generate --tokens 24 "$prompt" >"$work/a.out" 2>"$work/a.err" &
first=$!
"$cli" generate --tokens 24 "$prompt" >"$work/b.out" 2>"$work/b.err"
wait "$first"
cmp "$work/a.out" "$work/b.out"

"$cli" generate --tokens 24 "$prompt" >"$work/c.out" 2>"$work/c.err"
cmp "$work/a.out" "$work/c.out"
if ! grep -Eq "compile [0-9]+ ms \(0 programs compiled, [1-9][0-9]* read from the disk cache\)" "$work/c.err"; then
  echo "the third process did not read its programs from the disk cache:" >&2
  cat "$work/c.err" >&2
  exit 1
fi
ls "$work/cache"/*.tmc >/dev/null

touch "$work/a-file"
TINYMLIR_CACHE_DIR="$work/a-file" "$cli" generate --tokens 2 "$prompt" >/dev/null 2>"$work/d.err"
grep -q "disk cache: the cache path $work/a-file is not a directory" "$work/d.err" ||
  { echo "an unusable cache folder was not said:" >&2; cat "$work/d.err" >&2; exit 1; }
TINYMLIR_CACHE_DIR=off "$cli" generate --tokens 2 "$prompt" >/dev/null 2>"$work/e.err"
if grep -q "disk cache:" "$work/e.err"; then
  echo "a cache turned off on purpose was reported:" >&2; cat "$work/e.err" >&2; exit 1
fi
echo "ok: $(ls "$work/cache" | wc -l) entries; $(grep -o 'compile [0-9]* ms[^|]*' "$work/c.err")"
