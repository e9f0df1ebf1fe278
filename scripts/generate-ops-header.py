#!/usr/bin/env python3
"""Writes, from core/trace/ops.def, capi/include/tinymlir/ops.h (the C API's tm_op_kind: one
enumerator per row, with its signature and what it computes) and capi/include/tinymlir/
ops.hpp (a method per row for tinymlir.hpp's Tracer, typed from the signature). Run it after
adding a row; `--check` exits 1 (naming the file) when a header is not what the table makes,
which the CTest test ops_headers_are_generated runs.

    scripts/generate-ops-header.py [--check]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEF = os.path.join(ROOT, "core", "trace", "ops.def")
HEADER = os.path.join(ROOT, "capi", "include", "tinymlir", "ops.h")
CPP_HEADER = os.path.join(ROOT, "capi", "include", "tinymlir", "ops.hpp")

# TM_OP(Name, C_ENUMERATOR, c_value, "signature", "doc" "doc"..., rule, lowering, bound)
ROW = re.compile(r'^TM_OP\(\s*(\w+),\s*(\w+),\s*(\d+),\s*"([^"]*)",\s*((?:"[^"]*"\s*)+),', re.M)


def rows(text):
    out = []
    for m in ROW.finditer(text):
        doc = "".join(re.findall(r'"([^"]*)"', m.group(5)))
        out.append((m.group(2), int(m.group(3)), m.group(4), doc))
    return out


def wrap(text, indent, width=92):
    lines, line = [], ""
    for word in text.split():
        if line and len(indent) + len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return lines


def header(table):
    out = [
        "/* The ops of tm_op, one per row of tinymlir's op table: generated from",
        " * core/trace/ops.def by scripts/generate-ops-header.py; DO NOT EDIT. Included by",
        " * <tinymlir/tinymlir.h>, which says how tm_op takes each op's parameters. Each",
        " * enumerator's comment is the op's signature, then what it computes. Values are fixed",
        " * forever; new ops are appended. */",
        "#ifndef TINYMLIR_OPS_H",
        "#define TINYMLIR_OPS_H",
        "",
        "typedef TM_ENUM(tm_op_kind) {",
    ]
    for i, (enumerator, value, signature, doc) in enumerate(table):
        comma = "," if i + 1 < len(table) else ""
        out.append(f"  {enumerator} = {value}{comma}")
        for j, line in enumerate(wrap(f"{signature}: {doc}", "      ")):
            out.append(("    /* " if j == 0 else "     * ") + line)
        out[-1] += " */"
    out += ["} tm_op_kind;", "", "#endif  /* TINYMLIR_OPS_H */", ""]
    return "\n".join(out)


def parameters(signature):
    """[(name, kind, default)] of a signature; kind is "value" for a bare name."""
    inside = signature[signature.index("(") + 1:-1]
    out = []
    for item in filter(None, (p.strip() for p in inside.split(","))):
        default = None
        if "=" in item:
            item, default = (x.strip() for x in item.split("=", 1))
        name, _, kind = (x.strip() for x in item.partition(":"))
        out.append((name, kind or "value", default))
    return out


CPP_TYPES = {"value": "tm_value", "values": "const std::vector<tm_value> &", "int": "int64_t",
             "bool": "bool", "dtype": "tm_dtype", "ints": "const std::vector<int64_t> &",
             "real": "double"}


def cpp_default(kind, default):
    if default is None:
        return ""
    if kind == "dtype":
        return " = TM_" + default.upper()
    if kind == "ints":
        return " = {}"
    if kind == "bool":
        return " = " + ("true" if default not in ("0", "false") else "false")
    return " = " + default


def cpp_method(enumerator, signature):
    name = signature[:signature.index("(")]
    params = parameters(signature)
    args = ", ".join(f"{CPP_TYPES[k]}{'' if CPP_TYPES[k].endswith('&') else ' '}{n}"
                     f"{cpp_default(k, d)}" for n, k, d in params)
    values = [n for n, k, _ in params if k == "value"]
    listed = [n for n, k, _ in params if k == "values"]
    scalars = [n for n, k, _ in params if k in ("int", "bool", "dtype")]
    lists = [n for n, k, _ in params if k == "ints"]
    real = next((n for n, k, _ in params if k == "real"), "0.0")
    operands = listed[0] if listed else "{" + ", ".join(values) + "}"
    ints = "{" + ", ".join(f"static_cast<int64_t>({n})" for n in scalars) + "}"
    body = []
    if len(lists) > 1:
        sizes = " || ".join(f"{lists[0]}.size() != {n}.size()" for n in lists[1:])
        body.append(f"    if ({sizes}) return self().Refuse(\"{name}: {', '.join(lists)} differ in length\");")
    if lists:
        body.append(f"    std::vector<int64_t> ints = {ints};")
        for n in lists:
            body.append(f"    ints.insert(ints.end(), {n}.begin(), {n}.end());")
        ints = "ints"
    body.append(f"    return self().op({enumerator}, {operands}, {ints}, {real});")
    return [f"  // {signature}", f"  tm_value {name}({args}) {{"] + body + ["  }"]


def cpp_header(table):
    out = [
        "// The op table's ops as methods of tinymlir.hpp's Tracer, each recording its op",
        "// through tm_op (<tinymlir/ops.h> says what each computes): generated from",
        "// core/trace/ops.def by scripts/generate-ops-header.py; DO NOT EDIT.",
        "#ifndef TINYMLIR_OPS_HPP",
        "#define TINYMLIR_OPS_HPP",
        "",
        "#include <cstdint>",
        "#include <vector>",
        "",
        "#include \"tinymlir/tinymlir.h\"",
        "",
        "namespace tinymlir {",
        "",
        "// Tracer derives from OpMethods<Tracer>, which calls its op() and Refuse().",
        "template <typename Tracer>",
        "class OpMethods {",
        " public:",
    ]
    for enumerator, _, signature, _ in table:
        out += cpp_method(enumerator, signature)
    out += [
        "",
        " private:",
        "  Tracer &self() { return static_cast<Tracer &>(*this); }",
        "};",
        "",
        "}  // namespace tinymlir",
        "",
        "#endif  // TINYMLIR_OPS_HPP",
        "",
    ]
    return "\n".join(out)


def main():
    with open(DEF) as f:
        table = rows(f.read())
    if [value for _, value, _, _ in table] != list(range(len(table))):
        sys.exit("generate-ops-header: ops.def's C values are not 0, 1, 2, ... in order")
    made = {HEADER: header(table), CPP_HEADER: cpp_header(table)}
    if sys.argv[1:] == ["--check"]:
        for path, text in made.items():
            with open(path) as f:
                if f.read() != text:
                    sys.exit(f"{path} is stale: run scripts/generate-ops-header.py")
        print(f"{', '.join(made)}: as ops.def makes them ({len(table)} ops)")
        return
    for path, text in made.items():
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path} ({len(table)} ops)")


if __name__ == "__main__":
    main()
