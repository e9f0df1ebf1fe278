#!/bin/sh
# A user whose process limit (RLIMIT_NPROC, ulimit -u) refuses the threads a generation's
# parallel compile starts: with 1 the first thread is refused, with 2 the second (which once
# threw through a vector of joinable threads: "terminate called", SIGABRT). The programs
# come from a warm disk cache on the calling thread, and the tokens are those of a run
# without the limit. The limit does not bind root, so this runs as `nobody`; it is skipped
# (status 77) where that cannot be done (not root, no runuser or prlimit, a build tree
# `nobody` cannot read).
# Usage: process_limit.sh path/to/tinymlir path/to/tests/data/tiny-a
set -eu
cli="$1"
model="$2"
if [ "$(id -u)" != 0 ] || ! command -v runuser >/dev/null || ! command -v prlimit >/dev/null ||
   ! runuser -u nobody -- test -x "$cli" || ! runuser -u nobody -- test -r "$model/config.json"; then
  echo "skipped: needs root, runuser, prlimit and a build tree the user nobody can read"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -m 700 "$work/cache"
chown nobody "$work/cache"
# LeakSanitizer (the sanitizer suite) needs a thread of its own at exit, which the limit
# refuses: leak checking is off here.
as_nobody() {  # as_nobody [prlimit options] -- ARGS...: the CLI as nobody, the cache warm
  runuser -u nobody -- prlimit "$@" env TINYMLIR_CACHE_DIR="$work/cache" \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    "$cli" generate --greedy --ids --tokens 6 --model "$model" "1 2 3"
}
as_nobody -- >"$work/want" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
for limit in 1 2; do
  if ! as_nobody --nproc=$limit -- >"$work/got" 2>"$work/err"; then
    echo "generate under a process limit of $limit failed:" >&2
    cat "$work/err" >&2
    exit 1
  fi
  cmp -s "$work/want" "$work/got" || {
    echo "under a process limit of $limit the tokens differ: $(cat "$work/got") instead of $(cat "$work/want")" >&2
    exit 1
  }
done
echo "process_limit: the tokens under process limits of 1 and 2 equal the unlimited run's"
