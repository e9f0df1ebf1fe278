"""`tinymlir generate --batch FILE` against the same command run on each prompt alone.

Eight prompts of different lengths, as text and as ids, greedy and sampled with a seed:
each output line must be exactly what that prompt gives alone with the same options (text
mode: the prompt and its continuation, newlines written as \\n). A file of more prompts than
one batch takes runs in batches. Bad input (an empty line, ids outside the vocabulary, a
prompt past the context, --batch with a prompt or --no-kv-cache) exits 1 with a message
naming the line, and prints nothing on stdout.

Usage: batch.py path/to/tinymlir models/kjv-tiny
"""
import os
import re
import subprocess
import sys
import tempfile

CLI, MODEL = sys.argv[1], sys.argv[2]

PROMPTS = [
    "And",
    "In the beginning God created the heaven and the earth.",
    "And God said, Let there be light",
    "Blessed are the meek: for they shall inherit the earth. Blessed are they which do",
    "The LORD is my shepherd;",
    "For God so loved the world,",
    "Thou shalt",
    "And the evening and the morning were the first day. And God said, Let there be a",
]
failures = []


def run(args, stdin=None):
    return subprocess.run([CLI, "generate", "--model", MODEL, *args], input=stdin,
                          capture_output=True, text=True, timeout=600)


def expect_ok(result, what):
    if result.returncode != 0:
        failures.append(f"{what}: exit {result.returncode}: {result.stderr}")
    return result.stdout


def one_line(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def write(lines):
    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    f.write("".join(line + "\n" for line in lines))
    f.close()
    return f.name


def check_batch(lines, options, ids, what):
    path = write(lines)
    try:
        result = run(["--batch", path, *options, *(["--ids"] if ids else [])])
        out = expect_ok(result, what).split("\n")
        if out[-1] != "":
            failures.append(f"{what}: the output does not end with a newline")
        out = out[:-1]
        if len(out) != len(lines):
            failures.append(f"{what}: {len(out)} lines for {len(lines)} prompts:\n{result.stdout}")
            return
        report = re.search(r"decode [0-9.]+ tokens/s \((\d+) tokens\)", result.stderr)
        if not report:
            failures.append(f"{what}: no report line in:\n{result.stderr}")
        for i, line in enumerate(lines):
            alone = run([*options, *(["--ids"] if ids else []), "--", line])
            expected = expect_ok(alone, f"{what}, prompt {i} alone").rstrip("\n")
            if not ids:
                expected = one_line(expected)
            if out[i] != expected:
                failures.append(f"{what}, line {i + 1}: the batch gave\n  {out[i]!r}\nalone:\n"
                                f"  {expected!r}")
    finally:
        os.unlink(path)


def check_fails(args, words, what, stdin=None):
    result = run(args, stdin)
    if result.returncode != 1 or words not in result.stderr or result.stdout:
        failures.append(f"{what}: expected exit 1, nothing on stdout and \"{words}\" on stderr; "
                        f"got {result.returncode}, stdout {result.stdout!r}, stderr "
                        f"{result.stderr!r}")


check_batch(PROMPTS, ["--greedy", "-n", "12"], False, "greedy text")
check_batch(PROMPTS, ["-n", "12", "--seed", "7"], False, "sampled text, seed 7")

# Prompts as ids, of 1 to 13 tokens.
id_lines = ["464 3726", "818 262 3726 1793 2727 262 9538", "5 6 7 8 9 10 11 12 13 14 15 16 17",
            "1"]
check_batch(id_lines, ["--greedy", "-n", "10"], True, "greedy ids")
check_batch(id_lines, ["-n", "10", "--seed", "3"], True, "sampled ids, seed 3")

# More prompts than a batch holds: they run in batches, each line still its prompt's.
many = [PROMPTS[i % len(PROMPTS)] for i in range(18)]
path = write(many)
result = run(["--batch", path, "--greedy", "-n", "4"])
lines = expect_ok(result, "18 prompts").split("\n")[:-1]
if len(lines) != 18 or any(lines[i] != lines[i % len(PROMPTS)] for i in range(18)):
    failures.append(f"18 prompts: expected 18 lines repeating the first 8:\n{result.stdout}")
os.unlink(path)

# Standard input.
result = run(["--batch", "-", "--greedy", "-n", "4"], stdin="\n".join(PROMPTS[:2]) + "\n")
if len(expect_ok(result, "stdin").split("\n")) != 3:
    failures.append(f"--batch -: expected 2 lines:\n{result.stdout}")

# Bad input.
path = write([PROMPTS[0], "", PROMPTS[1]])
check_fails(["--batch", path], "--batch: line 2 of", "an empty line")
os.unlink(path)
path = write(["1 2 3", "4 999999"])
check_fails(["--batch", path, "--ids"], "--batch line 2: token id 999999 is outside the vocabulary",
            "an id outside the vocabulary")
os.unlink(path)
path = write(["1 2", " ".join(["5"] * 250)])
check_fails(["--batch", path, "--ids", "-n", "10"],
            "--batch line 2: the prompt (250 tokens) plus --tokens 10 exceed", "a prompt past the context")
os.unlink(path)
path = write([])
check_fails(["--batch", path], "has no prompts", "an empty file")
check_fails(["--batch", path, "hello"], "--batch takes its prompts from its file", "a prompt too")
check_fails(["--batch", path, "--no-kv-cache"], "--batch decodes with the KV cache", "no KV cache")
os.unlink(path)
check_fails(["--batch", "/nonexistent/prompts.txt"], "--batch: cannot open", "a missing file")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("batch: every line is its prompt's alone")
