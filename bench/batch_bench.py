#!/usr/bin/env python3
"""Many sequences at once: tinymlir's decode throughput for 1, 4, 8 and 16 sequences
generated together (tm_generate_batch, through Model.generate with a list of prompts), per
weight dtype, in one run.

    bench/batch_bench.py [--build build] [--rounds 3] [--tokens 64] [--threads 2]
                         [--sizes 1,4,8,16] [--dtypes f32,f16,q8_0]
                         [--cache /tmp/tinymlir-bench] [--smoke]

The checkpoint is bench.py's GPT-2 124M with random weights (made once into --cache). A
batch of B sequences has B prompts of 8 to 15 tokens and generates --tokens tokens for each
(greedy); its decode throughput is the tokens of every sequence made by decode steps over
the decode steps' time (tm_model_stats). One sequence runs through tm_generate (what a
single prompt runs), more through tm_generate_batch. Rounds interleave the sizes (the order
alternates), and the medians are printed with each size's speed-up over one sequence of
the same dtype, measured in the same rounds (the first of --sizes should be 1). Every round also checks that each sequence's tokens are those
it gets alone (greedy), and the bench fails when one is not. --smoke runs every path on
bench.py's small model in seconds (for CI; its figures mean nothing).
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checkpoint  # noqa: E402
from bench import SMOKE  # noqa: E402


def prompts_for(size, vocab):
    return [[(500 + 7919 * (s * 31 + i)) % vocab for i in range(8 + s % 8)] for s in range(size)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    checkpoint.add_run_arguments(ap)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--sizes", default="1,4,8,16")
    ap.add_argument("--dtypes", default="f32,f16,q8_0")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.tokens = 1, min(args.tokens, 8)
    sizes = [int(s) for s in args.sizes.split(",")]
    dtypes = args.dtypes.split(",")
    folder, config = checkpoint.prepare_run(args, SMOKE)
    import tinymlir

    vocab = config["vocab_size"]
    models = {w: tinymlir.Model.load(folder, weights=w) for w in dtypes}
    alone = {}  # (dtype, prompt) -> its greedy tokens alone
    for w in dtypes:
        for p in prompts_for(max(sizes), vocab):
            alone[w, tuple(p)] = models[w].generate(p, max_new_tokens=args.tokens)
        models[w].generate(prompts_for(max(sizes), vocab), max_new_tokens=2)  # compile

    rate = {(w, b): [] for w in dtypes for b in sizes}
    for r in range(args.rounds):
        for w in dtypes:
            for b in (sizes if r % 2 == 0 else sizes[::-1]):
                prompts = prompts_for(b, vocab)
                if b == 1:  # one sequence: tm_generate, what a single prompt runs
                    outs = [models[w].generate(prompts[0], max_new_tokens=args.tokens)]
                else:
                    outs = models[w].generate(prompts, max_new_tokens=args.tokens)
                for p, out in zip(prompts, outs):
                    if out != alone[w, tuple(p)]:
                        sys.exit(f"batch_bench: {w}, {b} sequences: a sequence's tokens differ "
                                 f"from its own alone: {out} against {alone[w, tuple(p)]}")
                st = models[w].stats
                rate[w, b].append(st["decode_tokens"] / st["decode_seconds"])
        print(f"[batch_bench] round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    print(f"{'the smoke model' if args.smoke else 'GPT-2 124M'} (random weights), "
          f"{args.threads} threads, {args.tokens} new tokens per sequence, medians of "
          f"{args.rounds} interleaved rounds; every sequence's tokens equal its own alone")
    print("sequences  " + "  ".join(f"{w + ' tok/s':>12s} {'x one':>6s}" for w in dtypes))
    for b in sizes:
        cells = []
        for w in dtypes:
            m = statistics.median(rate[w, b])
            one = statistics.median(rate[w, sizes[0]])
            cells.append(f"{m:12.1f} {m / one:6.2f}")
        print(f"{b:9d}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
