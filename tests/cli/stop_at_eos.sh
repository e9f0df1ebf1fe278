#!/bin/sh
# `tinymlir generate --stop-at-eos`: the output stops right after the first generated token
# that is the model's eos_token_id (config.json), and without the flag generation goes on to
# --tokens. With it, any run prints what the run without it prints, cut right after the first
# generated eos; an eos in the prompt stops nothing.
# tiny-a's eos (511) is no token its greedy decoding reaches (no prompt of one token, nor
# 3000 of two, produces it within 60 tokens): the stop is checked on a copy of tiny-a whose
# config.json names as eos the third token of a greedy continuation (same weights, so the
# same tokens up to the stop), and on tiny-a itself the flag must change nothing.
# Usage: stop_at_eos.sh path/to/tinymlir path/to/tests/data/tiny-a
set -eu
cli="$1"
tiny=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TINYMLIR_CACHE_DIR="$work/cache"
tokens=24
prompt="1 2 3"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# ids MODEL [OPTIONS] PROMPT: the greedy ids (prompt and continuation); exit status 0 required.
ids() {
  model=$1
  shift
  status=0
  "$cli" generate --model "$model" --greedy --ids --tokens $tokens "$@" >"$work/out" 2>"$work/err" ||
    status=$?
  [ $status -eq 0 ] || { cat "$work/err" >&2; fail "tinymlir generate --model $model $*: exit status $status"; }
  cat "$work/out"
}

# cut_after_eos EOS PROMPT_LENGTH IDS...: IDS cut right after the first eos past the prompt.
cut_after_eos() {
  eos=$1 skip=$2
  shift 2
  result= i=0
  for id in "$@"; do
    result="${result:+$result }$id"
    i=$((i + 1))
    if [ $i -gt "$skip" ] && [ "$id" = "$eos" ]; then break; fi
  done
  echo "$result"
}

# check MODEL EOS PROMPT: with --stop-at-eos = without, cut after the first generated eos.
# Writes "stopped" to $work/result when the eos came before --tokens, "went on" otherwise.
check() {
  model=$1 eos=$2 p=$3
  without=$(ids "$model" "$p")
  with=$(ids "$model" --stop-at-eos "$p")
  prompt_length=$(echo $p | wc -w)
  # shellcheck disable=SC2086  # the ids, split on purpose
  want=$(cut_after_eos "$eos" "$prompt_length" $without)
  [ "$(echo $without | wc -w)" -eq $((prompt_length + tokens)) ] ||
    fail "without --stop-at-eos, $model '$p' did not generate $tokens tokens: $without"
  [ "$with" = "$want" ] || fail "--stop-at-eos on $model (eos $eos), prompt '$p':
  without the flag: $without
  with the flag:    $with
  expected:         $want"
  if [ "$want" = "$without" ]; then echo "went on" >"$work/result"; else echo stopped >"$work/result"; fi
}

eos=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1] + "/config.json"))["eos_token_id"])' "$tiny")
# tiny-a as it is: its eos never comes, and the flag changes nothing, with the eos in the
# prompt too.
for p in "$prompt" "$eos" "$eos 0 7 7 7 300" "100"; do
  check "$tiny" "$eos" "$p"
  [ "$(cat "$work/result")" = "went on" ] ||
    fail "tiny-a's eos $eos came in the greedy continuation of '$p' (this test assumes it does not: it could use it directly)"
done
echo "ok: tiny-a (eos $eos): --stop-at-eos changes nothing where the eos does not come, in the prompt or not"

# A copy of tiny-a whose eos is the third token of the greedy continuation of "$prompt", a
# token that does not come before it there.
continuation=$(ids "$tiny" "$prompt")
prompt_length=$(echo $prompt | wc -w)
# shellcheck disable=SC2086  # the ids, split on purpose
new_eos=$(echo $continuation | cut -d' ' -f$((prompt_length + 3)))
first=$(echo $continuation | tr ' ' '\n' | tail -n +$((prompt_length + 1)) | grep -nx -- "$new_eos" | head -1 | cut -d: -f1)
[ "$first" = 3 ] || fail "the third token of tiny-a's continuation of '$prompt' comes before: $continuation"
mkdir "$work/tiny-eos"
for f in "$tiny"/*; do ln -s "$f" "$work/tiny-eos/"; done
rm "$work/tiny-eos/config.json"
/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
c["eos_token_id"] = int(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=1)' "$tiny/config.json" "$work/tiny-eos/config.json" "$new_eos"
# The same weights: without the flag, the same tokens as tiny-a.
same=$(ids "$work/tiny-eos" "$prompt")
[ "$same" = "$continuation" ] ||
  fail "tiny-a with eos $new_eos does not generate tiny-a's tokens without --stop-at-eos: $same"
check "$work/tiny-eos" "$new_eos" "$prompt"
[ "$(cat "$work/result")" = stopped ] ||
  fail "tiny-a with eos $new_eos, prompt '$prompt': --stop-at-eos did not stop"
stopped=$(ids "$work/tiny-eos" --stop-at-eos "$prompt")
[ "$(echo $stopped | wc -w)" -eq $((prompt_length + 3)) ] ||
  fail "--stop-at-eos did not stop right after the third token ($new_eos): $stopped"
# The eos in the prompt stops nothing (check cuts after the first eos past the prompt).
check "$work/tiny-eos" "$new_eos" "$new_eos $prompt"
echo "ok: tiny-a with eos $new_eos: --stop-at-eos stops right after it ($stopped); without, $tokens tokens ($continuation)"
