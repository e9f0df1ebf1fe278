#!/bin/sh
# The conventions people type without reading the help: --opt=value, short options, the
# prompt from -p, from a file or from standard input (-f FILE, -f -), --threads, options
# after the prompt, and an empty prompt, which starts from <|endoftext|>. Each spelling must
# give the same text as the long form (kjv-tiny's greedy golden continuation).
# Usage: conventions.sh path/to/tinymlir path/to/python3 path/to/build/python models/kjv-tiny
set -eu
cli="$1"
python="$2"
python_path="$3"
model="$4"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR="$work/cache"

# kjv-tiny's first golden case, 4 greedy tokens.
golden="In the beginning of the first year"

# same WHAT ARGS...: `tinymlir generate ARGS` succeeds and prints exactly $expected.
same() {
  what="$1"
  shift
  if ! out=$("$cli" generate "$@" 2>"$work/err"); then
    echo "$what: tinymlir generate $* failed:" >&2
    cat "$work/err" >&2
    exit 1
  fi
  if [ "$out" != "$expected" ]; then
    echo "$what: tinymlir generate $* printed '$out', expected '$expected'" >&2
    exit 1
  fi
}

expected="$golden"
same "long options" --tokens 4 --greedy "In the beginning"
same "--opt=value" --tokens=4 --greedy "In the beginning"
same "-n 4" -n 4 --greedy "In the beginning"
same "-n4" -n4 --greedy "In the beginning"
same "-m DIR" -m "$model" -n 4 --greedy "In the beginning"
same "--model=DIR" --model="$model" -n 4 --greedy "In the beginning"
same "options after the prompt" "In the beginning" -n 4 --greedy
same "-p" -p "In the beginning" -n 4 --greedy
same "--prompt=" --prompt="In the beginning" -n 4 --greedy
printf 'In the beginning\n' >"$work/prompt.txt"
same "-f FILE (its final newline dropped)" -f "$work/prompt.txt" -n 4 --greedy
same "--file=FILE" --file="$work/prompt.txt" -n 4 --greedy
# -f - reads standard input.
out=$(printf 'In the beginning\n' | "$cli" generate -f - -n 4 --greedy 2>"$work/err") || {
  cat "$work/err" >&2; exit 1; }
[ "$out" = "$golden" ] || { echo "-f -: printed '$out'" >&2; exit 1; }
same "--threads 1" --threads 1 -n 4 --greedy "In the beginning"
same "-t 2" -t 2 -n 4 --greedy "In the beginning"
# --threads sets the library's TINYMLIR_NUM_THREADS before the library reads it: a value
# the library would refuse is replaced, so the run succeeds.
out=$(TINYMLIR_NUM_THREADS=many "$cli" generate -t 1 -n 4 --greedy "In the beginning" \
      2>"$work/err") || { echo "--threads did not replace TINYMLIR_NUM_THREADS:" >&2
                          cat "$work/err" >&2; exit 1; }
[ "$out" = "$golden" ] || { echo "-t 1 over TINYMLIR_NUM_THREADS: printed '$out'" >&2; exit 1; }
if TINYMLIR_NUM_THREADS=many "$cli" generate -n 4 --greedy "x" >/dev/null 2>&1; then
  echo "TINYMLIR_NUM_THREADS=many was accepted: the check above proves nothing" >&2
  exit 1
fi
# The seed, long and short.
expected=$("$cli" generate --seed 7 -n 8 "And God said" 2>/dev/null)
same "-s 7" -s 7 -n 8 "And God said"
same "--seed=7" --seed=7 -n 8 "And God said"

# An empty prompt starts from <|endoftext|> (id 50256), as Hugging Face and llama.cpp do:
# the same text as the model gives after that one token (asked through the Python binding).
expected=$(PYTHONPATH="$python_path" "$python" -c '
import sys, tinymlir
m = tinymlir.Model.load(sys.argv[1])
print(m.detokenize(m.generate([50256], max_new_tokens=8)))' "$model")
[ -n "$expected" ] || { echo "the binding generated nothing after <|endoftext|>" >&2; exit 1; }
same "an empty prompt" -n 8 --greedy ""
same "-p ''" -p "" -n 8 --greedy
: >"$work/empty.txt"
same "an empty file" -f "$work/empty.txt" -n 8 --greedy
out=$(printf '' | "$cli" generate -f - -n 8 --greedy 2>"$work/err") || {
  cat "$work/err" >&2; exit 1; }
[ "$out" = "$expected" ] || { echo "-f - with nothing on stdin: printed '$out'" >&2; exit 1; }
# Token ids: an empty list starts from <|endoftext|> too, and the ids printed start with it.
out=$("$cli" generate --ids -n 3 --greedy "" 2>"$work/err") || { cat "$work/err" >&2; exit 1; }
first=$("$cli" generate --ids -n 3 --greedy "50256" 2>/dev/null)
[ "$out" = "$first" ] && [ "${out%% *}" = 50256 ] ||
  { echo "--ids '': printed '$out'; from 50256: '$first'" >&2; exit 1; }
echo "ok"
