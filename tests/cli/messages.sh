#!/bin/sh
# The command's errors are in its own words: whatever fails (the command line, the model's
# files, a bundle, the environment, the GPU, the prompt), the message names what the user
# typed or has, never one of the library's C functions or fields (tm_*, options.*).
# Usage: messages.sh path/to/tinymlir path/to/tinymlir-run tests/data/tiny-a
set -eu
cli="$1"
run_cli="$2"
tiny="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR=off
checked=0

# fails ENV ARGS...: the command (with `env ENV` first, "-" for none) exits 1 and its
# stderr names nothing of the library's C API. says WORDS: and that stderr says WORDS.
fails() {
  setting="$1"
  shift
  if [ "$setting" = "-" ]; then set -- env "$@"; else set -- env "$setting" "$@"; fi
  if "$@" >/dev/null 2>"$work/err" </dev/null; then
    echo "succeeded, expected a failure: $*" >&2
    exit 1
  fi
  if grep -E "tm_[a-z]|options\.[a-z]" "$work/err" >&2; then
    echo "^ the library's names in the message of: $*" >&2
    exit 1
  fi
  checked=$((checked + 1))
}

says() {
  grep -qF -- "$1" "$work/err" || { echo "the message does not say '$1':" >&2
                                    cat "$work/err" >&2; exit 1; }
}

mkdir "$work/bad-json" && echo '{' >"$work/bad-json/config.json"
mkdir "$work/empty"
fails - "$cli" generate --model "$work/empty" x
fails - "$cli" generate --model "$work/bad-json" x
fails - "$cli" generate --model "$tiny" x                        # no tokenizer
fails - "$cli" generate --model "$tiny" ""                       # nothing to start from
fails - "$cli" generate --model "$tiny" --ids "1 2 512"         # outside the vocabulary
fails - "$cli" generate --model "$tiny" --ids --tokens 100 "1"   # beyond the context
fails - "$cli" generate -n 2 "$(printf 'a\377b')"                # invalid UTF-8
says "tokenizing the prompt: the text is invalid UTF-8 at byte offset 1"
fails TINYMLIR_GPU_EMULATE=fast "$cli" generate --weights q8_0 --target gpu -n 2 x
says "q8_0"
fails - "$cli" generate --target tpu -n 2 x
says "--target expects cpu or gpu, got 'tpu'"
fails TINYMLIR_NUM_THREADS=abc "$cli" generate -n 2 x
fails TINYMLIR_GPU_EMULATE=maybe "$cli" generate -n 2 x
fails TINYMLIR_CPU_EXCLUDE=nothing "$cli" generate -n 2 x
fails - "$cli" generate --bundle "$work/no-bundle" -n 2 x
fails - "$cli" generate --model "$tiny" --bundle "$work/empty" --ids "1"
# A bundle of another model, and of another weight dtype.
"$cli" compile --model "$tiny" --out "$work/bundle" >/dev/null 2>&1
fails - "$cli" generate --bundle "$work/bundle" -n 2 x
fails - "$run_cli" generate --bundle "$work/bundle" --model "$tiny" --weights f16 --ids "1 2"
says "compiled for another model or weight dtype (--weights)"
fails - "$run_cli" generate --model "$tiny" --ids "1 2"          # no bundle, no compiler
fails - "$cli" compile --model "$tiny" --out "$work/bad-json/config.json"
# The GPU target without a CUDA driver (where there is a GPU, this generates: not checked).
if ! "$cli" generate --target gpu --model "$tiny" --ids "1 2" >/dev/null 2>&1; then
  fails - "$cli" generate --target gpu --model "$tiny" --ids "1 2"
  says "--target gpu: no CUDA driver"
  # ... before the model loads or anything compiles.
  if grep -q "loading" "$work/err"; then cat "$work/err" >&2; exit 1; fi
  if grep -q "invoke" "$work/err"; then cat "$work/err" >&2; exit 1; fi
fi
echo "ok: $checked failures, each in the command's words"
