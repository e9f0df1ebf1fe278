#!/usr/bin/env python3
"""Makes the C API reference and fails on what must not be in it: a public function
without documentation, or any Doxygen warning other than an undocumented type, macro,
field or value (those are listed, not fatal: the headers document several of them in the
comment of the group they belong to).

    check_reference.py DOXYGEN DOXYFILE WARNINGS_FILE
"""
import subprocess
import sys


def main():
    doxygen, doxyfile, warnings_file = sys.argv[1:4]
    run = subprocess.run([doxygen, doxyfile], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"doxygen failed ({run.returncode}):\n{run.stdout}{run.stderr}")
    with open(warnings_file) as f:
        warnings = [line.rstrip() for line in f if line.strip()]
    undocumented = [w for w in warnings if "is not documented" in w]
    functions = [w for w in undocumented if "(function)" in w]
    others = [w for w in warnings if "is not documented" not in w and ": " in w]
    for w in undocumented:
        if w not in functions:
            print("note:", w)
    if functions or others:
        sys.exit("The C API reference:\n  " + "\n  ".join(functions + others))
    print(f"ok: every public function documented ({len(undocumented)} other entities "
          "documented only by their group's comment)")


if __name__ == "__main__":
    main()
