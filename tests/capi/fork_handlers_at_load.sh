#!/usr/bin/env bash
# The libraries callers load register their fork handlers when they are loaded (in a static
# initialiser), never at first use: glibc runs fork handlers without its handler lock and, in
# the child, skips those registered after the fork began, so a handler another thread
# registered at first use could miss a fork under way, and the child would keep a lock that
# thread held (fork_while_library_starts_test makes that window certain). Each call of
# pthread_atfork is found in the disassembly and named by the function that makes it; a
# library with no call at all fails too, so the check cannot pass on a disassembly it
# misread. Usage: fork_handlers_at_load.sh LIBRARY...
set -u
status=0
for library in "$@"; do
  # Demangled: a sanitizer build's static initialiser can be a C++ function
  # (__static_initialization_and_destruction_0(int, int)), which _GLOBAL__sub_I_ calls.
  callers=$(objdump -d --no-show-raw-insn "$library" |
    awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 }
         /(call|jmp) +[0-9a-f]+ <(__)?pthread_atfork(@plt)?>/ { print fn }' | c++filt)
  if [ -z "$callers" ]; then
    echo "$library: no call of pthread_atfork found"
    status=1
    continue
  fi
  late=$(echo "$callers" | grep -v -E '^<(_GLOBAL__sub_I_|__static_initialization_and_destruction)')
  if [ -n "$late" ]; then
    echo "$library: fork handlers registered outside a static initialiser (register them at load):"
    echo "$late" | sed 's/^/  /'
    status=1
  else
    echo "$library: $(echo "$callers" | wc -l) fork handler registrations, all at load"
  fi
done
exit $status
