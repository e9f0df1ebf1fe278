"""`tinymlir perplexity` and Model.score against an independent double-precision computation.

The reference takes each scored token's logits from Model.logits of its prefix (the
library's last-position program, not the all-position one perplexity uses), computes the
log-softmax in float64 with NumPy, and windows a text longer than the context as Hugging
Face's "perplexity of fixed-length models" does: windows of n_ctx tokens every `stride`
tokens, each scoring only the tokens no earlier window scored. Perplexities must agree
within 1e-4 relative, log-probabilities within 1e-4 absolute.

Usage: perplexity.py path/to/tinymlir models/kjv-tiny path/to/build/python
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, sys.argv[3])
import tinymlir  # noqa: E402

# Genesis 1:1-13 (King James Version, public domain): over 256 tokens, kjv-tiny's context.
PASSAGE = (
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
    "the face of the waters. And God said, Let there be light: and there was light. And God "
    "saw the light, that it was good: and God divided the light from the darkness. And God "
    "called the light Day, and the darkness he called Night. And the evening and the morning "
    "were the first day. And God said, Let there be a firmament in the midst of the waters, "
    "and let it divide the waters from the waters. And God made the firmament, and divided "
    "the waters which were under the firmament from the waters which were above the "
    "firmament: and it was so. And God called the firmament Heaven. And the evening and the "
    "morning were the second day. And God said, Let the waters under the heaven be gathered "
    "together unto one place, and let the dry land appear: and it was so. And God called the "
    "dry land Earth; and the gathering together of the waters called he Seas: and God saw "
    "that it was good. And God said, Let the earth bring forth grass, the herb yielding seed, "
    "and the fruit tree yielding fruit after his kind, whose seed is in itself, upon the "
    "earth: and it was so. And the earth brought forth grass, and herb yielding seed after "
    "his kind, and the tree yielding fruit, whose seed was in itself, after his kind: and God "
    "saw that it was good. And the evening and the morning were the third day.\n")

REL = 1e-4
ABS_LOGPROB = 1e-4


def log_softmax_at(logits, token):
    x = logits.astype(np.float64)
    top = x.max()
    return x[token] - top - math.log(np.exp(x - top).sum())


def reference_perplexity(model, ids, stride):
    ctx = model.info.n_ctx
    nll, scored, done_end, begin = 0.0, 0, 0, 0
    while True:
        end = min(begin + ctx, len(ids))
        for k in range(max(done_end, begin + 1), end):
            nll -= log_softmax_at(model.logits(ids[begin:k]), ids[k])
            scored += 1
        done_end = end
        if end == len(ids):
            return math.exp(nll / scored), scored
        begin += stride


def run(cli, args, stdin=None):
    return subprocess.run([cli, "perplexity", *args], input=stdin, capture_output=True,
                          text=True)


def cli_perplexity(cli, args, stdin=None):
    out = run(cli, args, stdin)
    if out.returncode != 0:
        sys.exit(f"tinymlir perplexity {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
    lines = out.stdout.splitlines()
    if len(lines) != 2 or not lines[0].startswith("perplexity ") or not lines[1].startswith("tokens "):
        sys.exit(f"tinymlir perplexity {' '.join(args)} printed:\n{out.stdout}")
    return float(lines[0].split()[1]), int(lines[1].split()[1]), lines[1]


def expect_close(what, got, want):
    if not abs(got - want) <= REL * want:
        sys.exit(f"{what}: tinymlir says {got:.6f}, the reference {want:.6f} "
                 f"(relative difference {abs(got - want) / want:.2e}, bound {REL})")
    print(f"{what}: {got:.6f} against {want:.6f}")


def expect_refused(cli, args, words, stdin=None):
    out = run(cli, args, stdin)
    if out.returncode != 1 or out.stdout or words not in out.stderr:
        sys.exit(f"tinymlir perplexity {' '.join(args)}: status {out.returncode}, stdout "
                 f"{out.stdout!r}, stderr {out.stderr!r}; expected status 1 saying {words!r}")


def main():
    cli, model_dir = sys.argv[1], sys.argv[2]
    model = tinymlir.Model.load(model_dir)
    ids = model.tokenize(PASSAGE.rstrip("\n"))
    ctx = model.info.n_ctx
    assert len(ids) > ctx + 64, f"the passage has {len(ids)} tokens, the context {ctx}"

    with tempfile.TemporaryDirectory() as work:
        text_file = os.path.join(work, "passage.txt")
        with open(text_file, "w") as f:
            f.write(PASSAGE)
        ids_file = os.path.join(work, "passage.ids")
        with open(ids_file, "w") as f:
            f.write("\n".join(" ".join(map(str, ids[i:i + 16])) for i in range(0, len(ids), 16)))

        # Windows of the context every half context (the default), then every 200 tokens.
        want, scored = reference_perplexity(model, ids, ctx // 2)
        got, tokens, line = cli_perplexity(cli, ["-f", text_file])
        expect_close("default stride", got, want)
        if tokens != len(ids) or f"({scored} scored" not in line or f"stride {ctx // 2}" not in line:
            sys.exit(f"the tokens line says '{line}': {len(ids)} tokens, {scored} scored expected")
        want200, _ = reference_perplexity(model, ids, 200)
        got, _, _ = cli_perplexity(cli, ["--stride", "200", "-f", text_file])
        expect_close("--stride 200", got, want200)
        # The same text from standard input, and as ids.
        got, _, _ = cli_perplexity(cli, ["-f", "-"], stdin=PASSAGE)
        expect_close("-f -", got, want)
        got, _, _ = cli_perplexity(cli, ["--ids", "-f", ids_file])
        expect_close("--ids", got, want)
        # A text within one window: every token after the first, all context.
        short = ids[:100]
        want_short, _ = reference_perplexity(model, short, ctx // 2)
        got, tokens, _ = cli_perplexity(cli, ["--ids", " ".join(map(str, short))])
        expect_close("one window", got, want_short)

        # Model.score: each log-probability, and every position's logits.
        logprobs = model.score(short)
        assert logprobs.dtype == np.float64 and logprobs.shape == (99,), logprobs.shape
        for k in range(1, len(short)):
            want_lp = log_softmax_at(model.logits(short[:k]), short[k])
            if abs(logprobs[k - 1] - want_lp) > ABS_LOGPROB:
                sys.exit(f"Model.score position {k - 1}: {logprobs[k - 1]} against {want_lp}")
        again, logits = model.score(short, logits=True)
        assert logits.shape == (100, model.info.vocab_size) and logits.dtype == np.float32
        np.testing.assert_array_equal(again, logprobs)
        for k in (1, 50, 99):
            np.testing.assert_allclose(logits[k - 1], model.logits(short[:k]), rtol=1e-4,
                                       atol=1e-4)
        if not math.isclose(math.exp(-logprobs.mean()), want_short, rel_tol=REL):
            sys.exit("exp(-mean(Model.score)) is not the one-window perplexity")
        assert model.score("In").shape == (0,)  # one token: nothing to score, no error
        print("Model.score: 99 log-probabilities and 3 logits rows agree")

        # Bad input: each one line naming what was wrong, status 1, nothing on stdout.
        empty = os.path.join(work, "empty.txt")
        open(empty, "w").close()
        expect_refused(cli, ["-f", empty], "perplexity needs a text of 2 tokens at least")
        expect_refused(cli, ["In"], "perplexity needs a text of 2 tokens at least")
        expect_refused(cli, ["--stride", str(ctx), "-f", text_file],
                       f"--stride must be less than the model's context of {ctx} tokens")
        expect_refused(cli, ["--ids", "1 2 50257"], "outside the vocabulary")
        expect_refused(cli, ["-f", os.path.join(work, "missing.txt")], "cannot open")
        expect_refused(cli, [], "perplexity needs a text")
        expect_refused(cli, ["-n", "3", "x y"], "--tokens goes with generate, not perplexity")
    print("ok")


if __name__ == "__main__":
    main()
