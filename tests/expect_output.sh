#!/bin/sh
# A CTest check that counts the exit status and the output together (CTest's
# PASS_REGULAR_EXPRESSION alone ignores the exit status: a crash after the right line passes).
# Usage: expect_output.sh [OPTIONS] STATUS REGEX -- COMMAND [ARG...]
# Runs COMMAND and exits 0 when it exits with STATUS and a line of its output (stdout and
# stderr, unless --stdout or --stderr) matches REGEX (grep -E); otherwise prints what it
# expected and what came, and exits 1. The command's output is printed either way (the test's
# log). Options:
#   --stdout, --stderr     match REGEX (and --absent) against that stream only
#   --stdout-is TEXT       stdout must be exactly TEXT and one newline
#   --no-stdout            stdout must be empty (a refused command prints nothing there)
#   --no-stderr            stderr must be empty
#   --absent REGEX         no line of the output may match REGEX (repeatable)
#   --ignore-case          REGEX and --absent ignore case
#   --skip STATUS REGEX    when the command exits with this STATUS and a line of its output
#                          matches this REGEX, it could not run here (no GPU, no CUDA
#                          toolkit): exit 77 (the test's SKIP_RETURN_CODE), the matching line
#                          as the reason
#   --skip-failure-without PART
#                          when the check fails and PART of the CUDA toolkit (ptxas,
#                          libdevice: tests/cuda_toolkit.sh) is missing, exit 77 naming it:
#                          programs compiled without it cannot run where a GPU is
set -u
usage() {
  echo "usage: $0 [--stdout|--stderr] [--stdout-is TEXT] [--no-stdout] [--no-stderr]" \
       "[--absent REGEX]..." \
       "[--ignore-case] [--skip STATUS REGEX] [--skip-failure-without PART]..." \
       "STATUS REGEX -- COMMAND [ARG...]" >&2
  exit 2
}
stream=both stdout_is= has_stdout_is=no no_stdout=no no_stderr=no case_flag= skip_status= skip_regex=
toolkit_parts=
absent_file=$(mktemp)
out=$(mktemp) err=$(mktemp) both=$(mktemp)
trap 'rm -f "$absent_file" "$out" "$err" "$both"' EXIT
while [ $# -gt 0 ]; do
  case "$1" in
    --stdout) stream=stdout; shift ;;
    --stderr) stream=stderr; shift ;;
    --stdout-is) [ $# -ge 2 ] || usage; stdout_is=$2; has_stdout_is=yes; shift 2 ;;
    --no-stdout) no_stdout=yes; shift ;;
    --no-stderr) no_stderr=yes; shift ;;
    --absent) [ $# -ge 2 ] || usage; printf '%s\n' "$2" >>"$absent_file"; shift 2 ;;
    --ignore-case) case_flag=-i; shift ;;
    --skip) [ $# -ge 3 ] || usage; skip_status=$2; skip_regex=$3; shift 3 ;;
    --skip-failure-without) [ $# -ge 2 ] || usage; toolkit_parts="$toolkit_parts $2"; shift 2 ;;
    --) usage ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ $# -ge 4 ] && [ "$3" = "--" ] || usage
want_status=$1 regex=$2
shift 3
case "$want_status" in *[!0-9]* | "") usage ;; esac

"$@" >"$out" 2>"$err"
status=$?
cat "$out"
cat "$err" >&2
case $stream in
  stdout) cp "$out" "$both" ;;
  stderr) cp "$err" "$both" ;;
  both) cat "$out" "$err" >"$both" ;;
esac

if [ -n "$skip_status" ] && [ "$status" = "$skip_status" ] &&
   line=$(grep -E $case_flag -m1 -- "$skip_regex" "$both"); then
  printf 'SKIPPED: %s\n' "$line"
  exit 77
fi
failed=no
fail() {
  printf 'expect_output: %s\n' "$*" >&2
  failed=yes
}
[ "$status" = "$want_status" ] ||
  fail "exit status $status, expected $want_status, from: $*"
grep -Eq $case_flag -- "$regex" "$both" ||
  fail "no line of the $stream output matches '$regex'"
while IFS= read -r bad; do
  if grep -E $case_flag -- "$bad" "$both" >/dev/null; then
    fail "the $stream output has what it must not, '$bad':"
    grep -E $case_flag -- "$bad" "$both" | sed 's/^/  /' >&2
  fi
done <"$absent_file"
if [ $has_stdout_is = yes ] && ! printf '%s\n' "$stdout_is" | cmp -s - "$out"; then
  fail "stdout is not exactly '$stdout_is' and a newline"
fi
if [ $no_stdout = yes ] && [ -s "$out" ]; then
  fail "stdout is not empty"
fi
if [ $no_stderr = yes ] && [ -s "$err" ]; then
  fail "stderr is not empty"
fi
if [ $failed = yes ] && [ -n "$toolkit_parts" ] &&
   ! missing=$(sh "$(dirname "$0")/cuda_toolkit.sh" missing $toolkit_parts); then
  printf '%s\n' "$missing" | awk 'BEGIN { printf "SKIPPED: " } NR > 1 { printf "; " } { printf "%s", $0 } END { print "" }'
  exit 77
fi
[ $failed = no ] || exit 1
exit 0
