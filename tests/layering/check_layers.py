#!/usr/bin/env python3
"""The layering check, derived from the build: reads <build>/layering/targets.json (written
by cmake/layering.cmake) and the sources, and fails on any of

  * a folder of core/, capi/ or gpt2/ whose sources go into more than one library, or a
    source file there that no target compiles;
  * a project include ("core/...", "capi/...", "gpt2/...", "tinymlir/...") of a header whose
    folder belongs to a library the including file's target neither is nor uses (links
    directly, or through the public link interface of what it links);
  * an LLVM or MLIR include in a target that does not link LLVM or MLIR.

A target may name other libraries whose headers it reads without linking them, in its
TINYMLIR_MAY_INCLUDE property (the profiler reads the model's program definitions).
Usage: check_layers.py <build-dir>. Prints every violation; exits 1 if there is one."""
import json
import os
import re
import sys

LIBRARY_TYPES = {"STATIC_LIBRARY", "SHARED_LIBRARY", "OBJECT_LIBRARY", "MODULE_LIBRARY",
                 "INTERFACE_LIBRARY"}
CHECKED_ROOTS = ("core", "capi", "gpt2")  # folders that must each be one library
SOURCE_SUFFIXES = (".c", ".cc", ".cpp")
FILE_SUFFIXES = SOURCE_SUFFIXES + (".h", ".hpp", ".inc", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')
LINK_ONLY = re.compile(r"^\$<LINK_ONLY:(.*)>$")


def load(build_dir):
    with open(os.path.join(build_dir, "layering", "targets.json")) as f:
        data = json.load(f)
    targets = {t["name"]: t for t in data["targets"] if t}
    for t in targets.values():
        for key in ("sources", "links", "interface_links", "may_include"):
            t[key] = [x for x in t[key] if x]
    return data["source_dir"], targets


def relative_sources(root, target):
    """The target's own source files (headers of header sets too), relative to root."""
    out = []
    for s in target["sources"]:
        path = os.path.normpath(s if os.path.isabs(s) else os.path.join(target["dir"], s))
        if path.startswith(root + os.sep) and os.path.exists(path):
            out.append(os.path.relpath(path, root))
    return out


def owners_of_folders(root, targets):
    """folder -> the library targets (and core's executables) whose sources are in it."""
    owners = {}
    for t in targets.values():
        target_dir = os.path.relpath(t["dir"], root)
        if t["type"] not in LIBRARY_TYPES and target_dir.split(os.sep)[0] != "core":
            continue
        for src in relative_sources(root, t):
            folder = os.path.dirname(src)
            # A library owns files below its own CMakeLists only (a test or a tool may
            # compile a library's file again; that does not make the folder theirs).
            if target_dir != "." and not (folder + os.sep).startswith(target_dir + os.sep):
                continue
            owners.setdefault(folder, set()).add(t["name"])
    return owners


def uses(targets, name):
    """What `name` may include: itself, what it links, and, through those, their public link
    interface (usage requirements; LINK_ONLY entries are not usage)."""
    t = targets[name]
    seen = {name}
    todo = list(t["links"]) + list(t["may_include"])
    while todo:
        dep = todo.pop()
        m = LINK_ONLY.match(dep)
        if m:
            dep = m.group(1)
        if dep in seen:
            continue
        seen.add(dep)
        if dep in targets:
            todo.extend(x for x in targets[dep]["interface_links"] if not LINK_ONLY.match(x))
    return seen


def owner_of(folder, owners):
    """The library a header's folder belongs to: its own folder's, else the nearest
    enclosing folder's."""
    while True:
        if folder in owners and len(owners[folder]) == 1:
            return next(iter(owners[folder]))
        if not folder:
            return None
        folder = os.path.dirname(folder)


def main():
    root, targets = load(sys.argv[1])
    owners = owners_of_folders(root, targets)
    problems = []

    # Each folder is one library; every source file in one is compiled.
    compiled = set()
    for t in targets.values():
        compiled.update(relative_sources(root, t))
    for top in CHECKED_ROOTS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            folder = os.path.relpath(dirpath, root)
            names = owners.get(folder, set())
            if len(names) > 1:
                problems.append(f"{folder}/ compiles into {len(names)} libraries: "
                                f"{', '.join(sorted(names))}")
            for f in files:
                path = os.path.join(folder, f)
                if f.endswith(SOURCE_SUFFIXES) and path not in compiled:
                    problems.append(f"{path} is compiled by no target")

    # Includes: only headers of the target's own folders and of what it uses.
    public_owner = owner_of("capi/include/tinymlir", owners)
    for name, t in sorted(targets.items()):
        if os.path.relpath(t["dir"], root).split(os.sep)[0] == "tests":
            continue  # tests compile what they test; their includes are theirs
        allowed = uses(targets, name)
        llvm = bool({"LLVM", "MLIR"} & allowed)
        files = set(relative_sources(root, t))
        for folder, names in owners.items():  # headers beside the target's sources
            if names == {name}:
                for f in os.listdir(os.path.join(root, folder)):
                    if f.endswith(FILE_SUFFIXES):
                        files.add(os.path.join(folder, f))
        for path in sorted(files):
            with open(os.path.join(root, path), errors="replace") as f:
                for line_no, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    first = inc.split("/")[0]
                    if first in ("llvm", "mlir", "llvm-c", "mlir-c"):
                        if not llvm:
                            problems.append(f"{path}:{line_no}: includes {inc}, but {name} "
                                            "does not link LLVM or MLIR")
                        continue
                    if first == "tinymlir":
                        owner = public_owner
                    elif first in CHECKED_ROOTS and os.path.exists(os.path.join(root, inc)):
                        owner = owner_of(os.path.dirname(inc), owners)
                    else:
                        continue
                    if owner is None:
                        problems.append(f"{path}:{line_no}: includes {inc}, whose folder "
                                        "belongs to no library")
                    elif owner not in allowed:
                        problems.append(f"{path}:{line_no}: includes {inc} (of {owner}), "
                                        f"but {name} does not link {owner}")

    for p in problems:
        print("layering: " + p)
    if problems:
        return 1
    print(f"layering: ok ({len(owners)} folders, {len(targets)} targets: each folder is one "
          "library, each include is of a library its target uses)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
