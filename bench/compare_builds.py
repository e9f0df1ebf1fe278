#!/usr/bin/env python3
"""Two builds of tinymlir on the same GPT-2 decode and prefill, interleaved in one run.

    bench/compare_builds.py --a OLD_BUILD --b NEW_BUILD [--rounds 5] [--weights f32 q8_0]
                            [--decode-tokens 64] [--threads 2] [--cache DIR]

Each round runs `gpt2_bench --core-only` of build A and of build B for every weight dtype,
A first in even rounds and B first in odd ones (so that a drift within a round favours
neither); this machine's memory bandwidth moves by a factor of two within minutes, so only
runs made side by side compare. Prints, per dtype, each build's median decode tokens/s and
prefill-16/128 milliseconds, the ratio B / A of the medians, and the per-round ratios'
spread; exits 1 if the two builds generate different tokens. The checkpoint is bench.py's
GPT-2 124M with random weights (made once into --cache), the prompts its PROMPT16 and
PROMPT128. Each build compiles into a cache of its own.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checkpoint  # noqa: E402
from bench import PROMPT16, PROMPT128  # noqa: E402

FIGURES = (("decode_tokens_per_s_median", "decode tok/s"),
           ("prefill16_ms_median", "prefill-16 ms"),
           ("prefill128_ms_median", "prefill-128 ms"))


def run(build, model, prompts, weights, args):
    cmd = [os.path.join(build, "bench", "gpt2_bench"), "--model", model, "--prompts", prompts,
           "--weights", weights, "--core-only", "--reps", str(args.reps),
           "--decode-tokens", str(args.decode_tokens)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads),
               OMP_NUM_THREADS=str(args.threads), TINYMLIR_NUM_THREADS=str(args.threads),
               TINYMLIR_CACHE_DIR=os.path.join(os.path.abspath(build), "compare-cache"))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare_builds: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="the reference build directory (the old one)")
    ap.add_argument("--b", required=True, help="the build directory compared with it")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3, help="gpt2_bench's repetitions per run")
    ap.add_argument("--weights", nargs="+", default=["f32", "q8_0"])
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", default=os.environ.get("TINYMLIR_BENCH_CACHE", "/tmp/tinymlir-bench"))
    args = ap.parse_args()

    model = os.path.join(args.cache, "gpt2-124m-random")
    checkpoint.ensure_checkpoint(model)
    prompts = os.path.join(args.cache, "compare-prompts.txt")
    with open(prompts, "w") as f:
        f.write(" ".join(map(str, PROMPT16)) + "\n" + " ".join(map(str, PROMPT128)) + "\n")

    builds = {"A": args.a, "B": args.b}
    results = {w: {"A": [], "B": []} for w in args.weights}
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        for w in args.weights:
            for name in order:
                results[w][name].append(run(builds[name], model, prompts, w, args))
        print(f"[compare] round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    same = True
    print(f"A = {args.a}, B = {args.b}: {args.rounds} interleaved rounds, medians, "
          f"{args.threads} threads, {args.decode_tokens} decode tokens")
    for w in args.weights:
        a, b = results[w]["A"], results[w]["B"]
        ids = {json.dumps(x["generated_ids"]) for x in a + b}
        same &= len(ids) == 1
        print(f"{w}: tokens {'equal' if len(ids) == 1 else 'DIFFER'}")
        for key, label in FIGURES:
            ma = statistics.median(x[key] for x in a)
            mb = statistics.median(x[key] for x in b)
            ratios = sorted(y[key] / x[key] for x, y in zip(a, b))
            print(f"  {label:15s} A {ma:9.2f}  B {mb:9.2f}  B/A {mb / ma:.3f} "
                  f"(rounds {ratios[0]:.3f}..{ratios[-1]:.3f})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
