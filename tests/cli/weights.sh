#!/bin/sh
# `tinymlir generate --weights f32|f16|bf16|q8_0`: each dtype runs (exit status 0) and, with
# --greedy --ids, prints the prompt and the number of tokens asked for, every one an id of the
# vocabulary. The embedded kjv-tiny (an F16 checkpoint) gives its golden greedy tokens
# (models/kjv-tiny/golden.json, case 0) by default, and exactly the same with --weights f32
# (F16 widens to F32 exactly) and --weights f16 (as stored). tests/data/tiny-a (F32) gives its
# golden tokens by default and with --weights f32. `tinymlir compile --weights W` writes W in
# the bundle's manifest (the option reaches the model). An unknown dtype is one line on
# stderr naming the option and the value, exit status 1, nothing on stdout.
# Usage: weights.sh path/to/tinymlir path/to/models/kjv-tiny path/to/tests/data/tiny-a
set -eu
cli="$1"
kjv="$2"
tiny="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR="$work/cache"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# golden FILE FIELD: the ids of the golden file's case 0, space-separated.
golden() {
  /usr/bin/python3 -c 'import json, sys
print(" ".join(map(str, json.load(open(sys.argv[1]))["cases"][0][sys.argv[2]])))' "$1" "$2"
}
# vocab MODEL: the model's vocabulary size (config.json).
vocab() {
  /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1] + "/config.json"))["vocab_size"])' "$1"
}

# generate NAME ARGS...: runs `tinymlir generate ARGS`; it must exit 0 and print one line,
# left in $work/NAME.out (stderr in $work/NAME.err).
generate() {
  name=$1
  shift
  status=0
  "$cli" generate "$@" >"$work/$name.out" 2>"$work/$name.err" || status=$?
  [ $status -eq 0 ] || { cat "$work/$name.err" >&2; fail "tinymlir generate $* exited with status $status"; }
  [ "$(wc -l <"$work/$name.out")" -eq 1 ] || { cat "$work/$name.out" >&2; fail "tinymlir generate $*: not one line"; }
}

# check_ids NAME PROMPT COUNT VOCAB: $work/NAME.out is PROMPT and COUNT ids below VOCAB.
check_ids() {
  out=$(cat "$work/$1.out")
  case "$out" in
    "$2 "*) ;;
    *) fail "$1: the output does not start with the prompt '$2': $out" ;;
  esac
  n=0
  for id in ${out#"$2 "}; do
    case "$id" in *[!0-9]* | "") fail "$1: '$id' is not a token id: $out" ;; esac
    [ "$id" -lt "$4" ] || fail "$1: id $id is not below the vocabulary's $4: $out"
    n=$((n + 1))
  done
  [ $n -eq "$3" ] || fail "$1: $n tokens generated, not $3: $out"
}

# same A B: the two runs printed the same bytes.
same() {
  cmp -s "$work/$1.out" "$work/$2.out" ||
    fail "$2 differs from $1:
  $1: $(cat "$work/$1.out")
  $2: $(cat "$work/$2.out")"
}

# kjv-tiny, embedded (no --model): the golden case 0.
prompt=$(golden "$kjv/golden.json" prompt_ids)
want=$(golden "$kjv/golden.json" greedy_ids)
tokens=$(echo $want | wc -w)
kjv_vocab=$(vocab "$kjv")
generate kjv-default --greedy --ids --tokens "$tokens" "$prompt"
[ "$(cat "$work/kjv-default.out")" = "$prompt $want" ] ||
  fail "kjv-tiny's greedy tokens are not the golden ones:
  got:  $(cat "$work/kjv-default.out")
  want: $prompt $want"
for w in f32 f16 bf16 q8_0; do
  generate "kjv-$w" --weights $w --greedy --ids --tokens "$tokens" "$prompt"
  check_ids "kjv-$w" "$prompt" "$tokens" "$kjv_vocab"
done
same kjv-default kjv-f32
same kjv-default kjv-f16
echo "ok: kjv-tiny (F16): golden greedy tokens by default, with --weights f32 and f16; bf16: $(cat "$work/kjv-bf16.out"); q8_0: $(cat "$work/kjv-q8_0.out")"

# tiny-a (F32): its golden case 0.
prompt=$(golden "$tiny/golden.json" prompt_ids)
want=$(golden "$tiny/golden.json" greedy_ids)
tokens=$(echo $want | wc -w)
tiny_vocab=$(vocab "$tiny")
generate tiny-default --model "$tiny" --greedy --ids --tokens "$tokens" "$prompt"
[ "$(cat "$work/tiny-default.out")" = "$prompt $want" ] ||
  fail "tiny-a's greedy tokens are not the golden ones:
  got:  $(cat "$work/tiny-default.out")
  want: $prompt $want"
for w in f32 f16 bf16 q8_0; do
  generate "tiny-$w" --model "$tiny" --weights $w --greedy --ids --tokens "$tokens" "$prompt"
  check_ids "tiny-$w" "$prompt" "$tokens" "$tiny_vocab"
done
same tiny-default tiny-f32
echo "ok: tiny-a (F32): golden greedy tokens by default and with --weights f32; f16: $(cat "$work/tiny-f16.out"); bf16: $(cat "$work/tiny-bf16.out"); q8_0: $(cat "$work/tiny-q8_0.out")"

# The option reaches the model: the bundle's manifest names the weights' dtype.
for w in default f32 f16 bf16 q8_0; do
  option=
  [ $w = default ] || option="--weights $w"
  status=0
  # shellcheck disable=SC2086  # the option and its value, split on purpose
  "$cli" compile --model "$tiny" $option --out "$work/bundle-$w" 2>"$work/compile-$w.err" ||
    status=$?
  [ $status -eq 0 ] ||
    { cat "$work/compile-$w.err" >&2; fail "tinymlir compile $option exited with status $status"; }
  expected=$w
  [ $w = default ] && expected=f32  # as tiny-a stores them
  grep -Eq "^weights $expected( |$)" "$work/bundle-$w/manifest.txt" ||
    { cat "$work/bundle-$w/manifest.txt" >&2; fail "compile $option: the manifest does not say 'weights $expected'"; }
done
echo "ok: tinymlir compile --weights f32|f16|bf16|q8_0 writes that dtype in the bundle's manifest"

# An unknown dtype: one line on stderr naming the option and the value, status 1, no stdout.
# (An empty value: "--weights needs a value, got an empty string".)
for bad in q8 F16 ""; do
  status=0
  "$cli" generate --weights "$bad" --greedy --ids "1 2 3" >"$work/bad.out" 2>"$work/bad.err" || status=$?
  [ $status -eq 1 ] || { cat "$work/bad.err" >&2; fail "--weights '$bad': exit status $status, not 1"; }
  [ ! -s "$work/bad.out" ] || { cat "$work/bad.out" >&2; fail "--weights '$bad' printed to stdout"; }
  [ "$(wc -l <"$work/bad.err")" -eq 1 ] || { cat "$work/bad.err" >&2; fail "--weights '$bad': not one line on stderr"; }
  named="'$bad'"
  [ -n "$bad" ] || named="an empty string"
  grep -q -- "--weights" "$work/bad.err" && grep -qF -- "$named" "$work/bad.err" ||
    { cat "$work/bad.err" >&2; fail "--weights '$bad': the message does not name the option and the value"; }
done
echo "ok: --weights q8, F16 and '' refused, one line each on stderr"
