#!/bin/sh
# The command line, checked strictly: every bad argument is one line on stderr naming the
# option and the value, exit status 1, and nothing on stdout (the prompt is printed with the
# first token, not before the work that can fail); help and version go to stdout with status
# 0; a failed write to stdout is an error, not a silent success.
# Usage: arguments.sh path/to/tinymlir path/to/tinymlir-run path/to/tests/data/tiny-a
set -eu
cli="$1"
run_cli="$2"
model="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off

# refused WORDS ARGS...: `tinymlir ARGS` exits 1, prints nothing to stdout, and says WORDS.
refused() {
  words="$1"
  shift
  if "$cli" "$@" >"$work/out" 2>"$work/err"; then
    echo "accepted: tinymlir $*" >&2
    exit 1
  fi
  if [ -s "$work/out" ]; then
    echo "tinymlir $* printed to stdout before failing:" >&2
    cat "$work/out" >&2
    exit 1
  fi
  grep -qF -- "$words" "$work/err" || {
    echo "tinymlir $*: the message does not say '$words':" >&2
    cat "$work/err" >&2
    exit 1
  }
}

# Numbers: whole numbers in digits for counts and seeds, finite decimals for the rest.
for bad in 1.5 nan 0x3 -1 "" " 3" 2147483648 1e3; do
  refused "--tokens" generate --tokens "$bad" x
done
refused "--top-k expects a whole number" generate --top-k 1.9 x
refused "--seed expects a whole number from 0 to 18446744073709551615, got '1.5'" generate --seed 1.5 x
refused "--seed expects" generate --seed 18446744073709551616 x
refused "--temperature expects a number" generate --temperature nan x
refused "--temperature expects a number" generate --temperature 0x1p3 x
refused "--top-p expects a number" generate --top-p inf x
refused "--top-p expects a number" generate --top-p 1e-50 x
# Empty values are not the default; options of the other subcommand are errors.
refused "--model needs a value, got an empty string" generate --model "" x
refused "--bundle needs a value" generate --bundle
refused "--out goes with compile, not generate" generate --out "$work/b" x
refused "--emit-ir goes with compile" generate --emit-ir "$work/ir" x
refused "--tokens goes with generate, not compile" compile --tokens 3 --out "$work/b"
refused "--bundle goes with generate" compile --bundle "$work/b" --out "$work/c"
refused "--stride goes with perplexity, not generate" generate --stride 3 x
refused "--greedy goes with generate, not perplexity" perplexity --greedy x
# Options that contradict each other.
refused "--greedy does not sample: it cannot go with --temperature" generate --greedy --temperature 0.5 x
refused "--greedy does not sample: it cannot go with --seed" generate --seed 3 --greedy x
refused "--target cannot go with --bundle" generate --bundle "$work/b" --target cpu x
# Token ids: whole numbers separated by spaces or commas, checked before anything loads.
refused "'1+2' is not a token id" generate --model "$model" --ids "1+2"
refused "'-1' is not a token id" generate --model "$model" --ids "1 -1"
refused "'--x' is not a token id" generate --model "$model" --ids -- --x
refused "id 512" generate --model "$model" --ids --tokens 2 "1 2 512"
refused "unknown command 'frobnicate'" frobnicate
refused "unknown option --frobnicate" generate --frobnicate x
refused "unknown option --frobnicate" generate --frobnicate=3 x
refused "unknown option -x" generate -x y
# The conventional spellings are checked as strictly: --opt=value, short options (-n 4,
# -n4), the prompt from -p or -f. An abbreviation is not an option.
for bad in 1.5 "" -1; do
  refused "--tokens" generate --tokens="$bad" x
  refused "--tokens" generate -n "$bad" x
done
refused "--tokens expects a whole number from 0 to 2147483647, got '1.5'" generate -n1.5 x
refused "--tok: write the option in full (--tokens)" generate --tok 4 x
refused "--greedy takes no value, got '--greedy=1'" generate --greedy=1 x
refused "-n needs a value" generate x -n
refused "--model needs a value, got an empty string" generate --model= x
refused "--model needs a value, got an empty string" generate -m "" x
refused "--out goes with compile, not generate" generate --out="$work/b" x
refused "--seed expects a whole number" generate -s 1.5 x
refused "--threads expects a whole number from 1 to 4096, got '0'" generate -t 0 x
refused "--threads expects a whole number" generate --threads=two x
refused "more than one prompt given (quote the prompt)" generate a b
refused "more than one prompt given: -p and the prompt argument" generate -p a b
refused "more than one prompt given: -p and -f" generate -p a -f /dev/null
refused "-f: cannot open $work/none: No such file or directory" generate -f "$work/none"
refused "--file needs a value, got an empty string" generate -f ""
refused "no prompt given (\"\" starts the text from <|endoftext|>)" generate -n 3
refused "--prompt goes with generate or perplexity, not compile" compile --out "$work/b" -p x
refused "compile takes no prompt" compile --out "$work/b" x
# A folder for --out or --emit-ir that cannot be written fails before anything compiles.
touch "$work/a-file"
refused "a-file: cannot use as the bundle folder: not a folder" compile --model "$model" --out "$work/a-file"
refused "--emit-ir: $work/a-file exists and is not a folder" compile --model "$model" --out "$work/b" --emit-ir "$work/a-file"

# Help and version: stdout, status 0, nothing on stderr.
# shown WORDS ARGS...: `ARGS` exits 0, prints nothing to stderr, and a line of its stdout
# matches WORDS (grep -E).
shown() {
  words="$1"
  shift
  status=0
  "$@" >"$work/out" 2>"$work/err" || status=$?
  if [ $status -ne 0 ] || [ -s "$work/err" ] || ! grep -Eq -- "$words" "$work/out"; then
    echo "$*: exit status $status (expected 0), stdout not matching '$words' or stderr not empty:" >&2
    cat "$work/out" "$work/err" >&2
    exit 1
  fi
}
shown "^usage: tinymlir generate" "$cli" --help
shown "^usage: tinymlir generate" "$cli" -h
shown "^usage: tinymlir generate" "$cli" generate --help
shown "^tinymlir [0-9]+\.[0-9]+\.[0-9]+$" "$cli" --version
shown "^tinymlir [0-9]+\.[0-9]+\.[0-9]+$" "$cli" -V
shown "^tinymlir [0-9]+\.[0-9]+\.[0-9]+$" "$cli" generate -V
shown "^usage: tinymlir generate" "$cli" generate -n 4 -h
shown "^usage: tinymlir-run generate" "$run_cli" --help
if grep -E -- "--out|--emit-ir|tinymlir compile \[" "$work/out"; then
  echo "tinymlir-run's usage lists what only tinymlir compile takes" >&2
  exit 1
fi
shown "^tinymlir-run [0-9]+\.[0-9]+\.[0-9]+$" "$run_cli" --version

# What works: the largest seed, `--` before the prompt, ids separated by commas.
out=$("$cli" generate --model "$model" --ids --tokens 5 --greedy -- "1,2 3" 2>/dev/null)
[ "$out" = "1,2 3 19 407 371 380 25" ] || { echo "-- then ids: got '$out'" >&2; exit 1; }
"$cli" generate --model "$model" --ids --tokens 2 --seed 18446744073709551615 "1 2" >/dev/null 2>&1

# A write that fails is an error: a full disk, a closed stdout.
if "$cli" generate --model "$model" --ids --tokens 3 "1 2" >/dev/full 2>"$work/err"; then
  echo "a write to /dev/full succeeded" >&2
  exit 1
fi
grep -q "cannot write the output: No space left on device" "$work/err" || { cat "$work/err" >&2; exit 1; }
if "$cli" generate --model "$model" --ids --tokens 3 "1 2" >&- 2>"$work/err"; then
  echo "generating with stdout closed succeeded" >&2
  exit 1
fi
grep -q "cannot write the output: Bad file descriptor" "$work/err" || { cat "$work/err" >&2; exit 1; }
echo "ok"
