#!/usr/bin/env bash
# The libraries callers load make their one-time set-up through ForkSafeOnce
# (core/support/fork_safe_once.h), never through a function-local static with a dynamic
# initialiser: such a static's guard stays taken in a child forked while another thread was
# making it. A guard variable in the library's symbols is one such static; each is listed.
# Usage: no_static_guards.sh LIBRARY...
set -u
status=0
for library in "$@"; do
  guards=$(nm -C "$library" | grep "guard variable for")
  if [ -n "$guards" ]; then
    echo "$library: function-local statics made under a guard (use ForkSafeOnce):"
    echo "$guards" | sed 's/^/  /'
    status=1
  fi
done
[ $status -eq 0 ] && echo "no guarded statics in: $*"
exit $status
