#!/usr/bin/env python3
"""Doxygen's input filter for the public headers: their comments are plain C comments (the
headers are read by people first), and Doxygen reads only its own. Each comment becomes the
documentation of what it is written above or beside:

- the file's opening comment documents the file (/** \\file NAME);
- a comment on lines of its own documents the declaration after it (/**), and all of the
  functions declared right after it, without a blank line, when there are several (a
  member group whose documentation Doxygen gives every member: DISTRIBUTE_GROUP_DOC);
- a comment after code on the same line, or on the lines right after it and indented
  deeper (ops.h's style), documents that code (/**<: a field, an enum value, a macro);
- a divider (/* ---- Title ---- */) stays a plain comment.

Line numbers are kept, so Doxygen's warnings point at the header's own lines.

    doxygen_filter.py HEADER    (the converted text on standard output)
"""
import os
import re
import sys

DIVIDER = re.compile(r"^\s*/\* -{2,}")
OWN_LINE = re.compile(r"^(\s*)/\*(?!\*)")
TRAILING = re.compile(r"^(\s*\S.*?)(\s)/\*(?!\*)")


def convert(text, name):
    lines = text.splitlines(keepends=True)
    comments = []          # (first, last) line of each own-line documentation comment
    first_comment = True
    in_comment = False
    previous = ""          # the last line of code before this one
    for i, line in enumerate(lines):
        if in_comment:
            in_comment = "*/" not in line
            if not in_comment and comments and comments[-1][1] is None:
                comments[-1] = (comments[-1][0], i)
            continue
        opened = None
        if first_comment and line.startswith("/*"):
            line = f"/** \\file {name}" + line[2:]
            first_comment = False
        elif DIVIDER.match(line):
            pass
        elif OWN_LINE.match(line) and previous.rstrip().endswith((",", ";")) and \
                _indent(line) > _indent(previous):
            line = OWN_LINE.sub(r"\1/**<", line, count=1)
        elif OWN_LINE.match(line):
            line = OWN_LINE.sub(r"\1/**", line, count=1)
            opened = i
        elif "/*" in line and not line.lstrip().startswith(("#include", "//")):
            line = TRAILING.sub(r"\1\2/**<", line, count=1)
        start = line.rfind("/*")
        in_comment = start >= 0 and "*/" not in line[start:]
        if opened is not None:
            comments.append((opened, None if in_comment else i))
        if line.strip() and not line.lstrip().startswith("/*"):
            previous = line
        lines[i] = line
    for first, last in comments:
        if last is None:
            continue
        end, functions = last, 0
        while end + 1 < len(lines) and lines[end + 1].strip() and \
                not lines[end + 1].lstrip().startswith("/*"):
            end += 1
            functions += lines[end].startswith("TM_API")
        if functions >= 2:
            lines[first] = "/**@{*/ " + lines[first]
            lines[end] = lines[end].rstrip("\n") + " /**@}*/\n"
    return "".join(lines)


def _indent(line):
    return len(line) - len(line.lstrip())


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(convert(f.read(), os.path.basename(sys.argv[1])))
