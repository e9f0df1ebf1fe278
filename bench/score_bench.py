#!/usr/bin/env python3
"""Scoring and prefill, side by side in one process: tinymlir's tm_model_score (through
Model.score) against PyTorch's forward pass over the same weights, and tinymlir's
prefill-128 with each weight dtype.

    bench/score_bench.py [--build build] [--rounds 5] [--tokens 1024] [--threads 2]
                         [--cache /tmp/tinymlir-bench] [--smoke]

The checkpoint is bench.py's GPT-2 124M with random weights (made once into --cache).
Each round scores one sequence of --tokens ids with tinymlir (F32) and with PyTorch
(bench/torch_gpt2.py, float32, log-softmax in float64), then runs prefill-128 (the
logits of PROMPT128) with F32, F16, BF16 and Q8_0 weights; the order alternates between
rounds. Prints the medians: scored tokens per second and their ratio, prefill
milliseconds per dtype and their ratio to F32, and the largest difference between the two
implementations' log-probabilities, and fails when it exceeds 1e-3. --smoke runs every path
on bench.py's small model in seconds (for CI; its figures mean nothing). PyTorch runs with OMP_WAIT_POLICY=PASSIVE (set here,
before it loads) so that its idle threads do not spin beside tinymlir's.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402

import checkpoint  # noqa: E402
from bench import PROMPT128, SMOKE  # noqa: E402

DTYPES = ("f32", "f16", "bf16", "q8_0")


def timed(f):
    start = time.perf_counter()
    value = f()
    return time.perf_counter() - start, value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    checkpoint.add_run_arguments(ap)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=1024)
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.tokens = 2, min(args.tokens, 200)
    folder, config = checkpoint.prepare_run(args, SMOKE)
    import tinymlir
    import torch
    from torch_gpt2 import TorchGPT2
    torch.set_num_threads(args.threads)

    models = {w: tinymlir.Model.load(folder, weights=w) for w in DTYPES}
    reference = TorchGPT2(folder)
    vocab = config["vocab_size"]
    ids = np.array([(1000 + 7919 * i) % vocab for i in range(args.tokens)], np.int32)
    prompt128 = [i % vocab for i in PROMPT128]

    # Warm up: every program compiled, every page touched.
    ours = models["f32"].score(ids)
    theirs = reference.score(ids.astype(np.int64))
    for m in models.values():
        m.logits(prompt128)
    score_s = {"tinymlir": [], "pytorch": []}
    prefill_s = {w: [] for w in DTYPES}
    for r in range(args.rounds):
        order = ["tinymlir", "pytorch"] if r % 2 == 0 else ["pytorch", "tinymlir"]
        for who in order:
            if who == "tinymlir":
                seconds, ours = timed(lambda: models["f32"].score(ids))
            else:
                seconds, theirs = timed(lambda: reference.score(ids.astype(np.int64)))
            score_s[who].append(seconds)
        for w in (DTYPES if r % 2 == 0 else DTYPES[::-1]):
            prefill_s[w].append(timed(lambda: models[w].logits(prompt128))[0])
        print(f"[score_bench] round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    scored = args.tokens - 1
    med = {who: statistics.median(v) for who, v in score_s.items()}
    difference = float(np.max(np.abs(ours - theirs)))
    print(f"{'the smoke model' if args.smoke else 'GPT-2 124M'} (random weights), {args.threads} threads, medians of {args.rounds} "
          f"interleaved rounds")
    print(f"scoring {args.tokens} tokens: tinymlir {scored / med['tinymlir']:.0f} tok/s, "
          f"PyTorch {scored / med['pytorch']:.0f} tok/s, tinymlir / PyTorch "
          f"{med['pytorch'] / med['tinymlir']:.2f}x")
    print(f"  largest |log-probability difference|: {difference:.2e}")
    f32 = statistics.median(prefill_s["f32"])
    for w in DTYPES:
        m = statistics.median(prefill_s[w])
        print(f"prefill-128 {w:5s} {1e3 * m:7.1f} ms  / F32 {m / f32:.3f}")
    if not difference <= 1e-3:
        sys.exit(f"score_bench: tinymlir and PyTorch differ by {difference} in a log-probability")


if __name__ == "__main__":
    main()
