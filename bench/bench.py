"""Runs the GPT-2 124M benchmark side by side: tinymlir, NumPy, PyTorch, the memory-bandwidth
ceiling and the prefill's GEMM floor, each in its own subprocess, one at a time, with the same
thread count.
Prints a table and writes the JSON results. Normally started by bench/run.sh.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import sys
import time

import numpy as np

import artifacts
import checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # Debian's python: has numpy and torch
# A fixed 16-token prompt (GPT-2 ids of "The quick brown fox jumps over the lazy dog. The
# quick is a test,") and a deterministic 128-token one.
PROMPT16 = [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 383, 2068, 318, 257, 1332, 11]
PROMPT128 = [(1000 + 7919 * i) % 50257 for i in range(128)]
# --smoke: a small random model and a few tokens, so that CI runs every path of the
# benchmark in seconds (its figures mean nothing).
SMOKE = dict(vocab_size=1024, n_positions=256, n_embd=64, n_layer=2, n_head=2)
RTOL = 1e-3  # cross-check: max |a - b| <= RTOL * max |b|


def run_json(name, cmd, env_extra):
    """Runs one measurement subprocess; its stdout is one JSON object."""
    env = dict(os.environ, **env_extra)
    print(f"[bench] {name}: {' '.join(f'{k}={v}' for k, v in env_extra.items())} {' '.join(cmd)}",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"[bench] {name} failed with exit code {p.returncode}")
    res = json.loads(p.stdout)
    res["wall_seconds"] = time.perf_counter() - t0
    res["command"] = " ".join(f"{k}={v}" for k, v in env_extra.items()) + " " + " ".join(cmd)
    return res


def compare(name, got_path, ref_path):
    a, b = np.fromfile(got_path, "<f4"), np.fromfile(ref_path, "<f4")
    diff = float(np.abs(a - b).max())
    rel = diff / float(np.abs(b).max())
    return {"pair": name, "max_abs_diff": diff, "max_abs_ref": float(np.abs(b).max()),
            "relative": rel, "same_argmax": bool(a.argmax() == b.argmax()), "ok": rel <= RTOL}


def leading_equal(a, b):
    """How many ids the two sequences share before the first difference."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def environment(args):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lib = args.library
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpu": cpu,
            "cpus": os.cpu_count(), "kernel": platform.release(), "threads": args.threads,
            "library": lib, "library_mtime": datetime.datetime.fromtimestamp(
                os.path.getmtime(lib)).isoformat(timespec="seconds") if os.path.exists(lib) else None,
            "library_sha256": sha256_prefix(lib), "loadavg_start": os.getloadavg()}


def sha256_prefix(path):
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def fmt(x, spec):
    return format("-", spec.split(".")[0]) if x is None else format(x, spec)


def table(r):
    rows = [r["tinymlir"], r["numpy"]] + ([r["pytorch"]] if r.get("pytorch") else [])
    e, c = r["environment"], r["ceiling"]
    out = [f"{r['model']}, random F32 weights ({r['checkpoint']}), {e['threads']} threads, "
           f"median of {r['config']['reps']} runs after 1 warm-up; decode = "
           f"{r['config']['decode_tokens']} tokens after a 16-token prompt",
           f"{'':24}{'prefill-16 ms':>14}{'prefill-128 ms':>16}{'decode tok/s':>14}"
           f"{'peak RSS MB':>13}{'load s':>8}{'compile s':>11}"]
    for x in rows:
        out.append(f"{x['implementation']:24}{x['prefill16_ms_median']:>14.1f}"
                   f"{x['prefill128_ms_median']:>16.1f}{x['decode_tokens_per_s_median']:>14.1f}"
                   f"{x['peak_rss_mb']:>13.0f}{x['load_seconds']:>8.2f}"
                   f"{fmt(x.get('total_compile_seconds'), '>11.2f')}")
    out += [f"{'bandwidth ceiling':24}{'':30}{c['tokens_per_s']:>14.1f}   "
            f"(read {c['read_gb_per_s']:.1f} GB/s, {e['threads']} threads, best of "
            f"{len(c['read_gb_per_s_runs'])} measurements (before and after) / "
            f"{c['weight_mb_per_token']:.1f} MB per token)",
            f"{'  (cross-checks)':24}{'':30}{'':>14}   STREAM triad {max(c['triad_gb_per_s_runs']):.1f} "
            f"GB/s, copy {max(c['copy_gb_per_s_runs']):.1f} GB/s (read + written)"]
    q = r["ratios"]
    npy_nc = r["numpy"]["no_cache_decode_tokens_per_s_median"]
    out += ["",
            f"decode  tinymlir / numpy   = {q['decode_tinymlir_over_numpy']:.2f}x"
            + (f"   tinymlir / pytorch = {q['decode_tinymlir_over_pytorch']:.2f}x"
               if "decode_tinymlir_over_pytorch" in q else ""),
            f"decode  tinymlir = {100 * q['decode_tinymlir_fraction_of_ceiling']:.0f}% of the "
            f"bandwidth ceiling (numpy {100 * q['decode_numpy_fraction_of_ceiling']:.0f}%)",
            f"decode without the KV cache ({r['tinymlir']['no_cache_decode_tokens']} steps, each "
            f"recomputing the sequence): tinymlir {r['tinymlir']['no_cache_decode_tokens_per_s_median']:.1f}"
            f" tok/s, numpy {npy_nc:.1f} tok/s = {q['no_cache_decode_tinymlir_over_numpy']:.2f}x",
            f"prefill tinymlir / numpy time: 16 tokens {q['prefill16_tinymlir_over_numpy']:.2f}x, "
            f"128 tokens {q['prefill128_tinymlir_over_numpy']:.2f}x (below 1 = tinymlir faster)",
            f"prefill-128 tinymlir / its GEMM floor = {q['prefill128_tinymlir_over_gemm_floor']:.2f}x "
            f"(the same products through OpenBLAS alone: {r['gemm_floor']['gemm_floor_ms_median']:.1f} ms); "
            f"in tinymlir's timed runs: matrix kernels {r['tinymlir']['prefill128_matrix_ms_median']:.1f} ms, "
            f"the rest {r['tinymlir']['prefill128_other_ms_median']:.1f} ms",
            breakdown(r["tinymlir"]),
            half_weights(r),
            *([deployment(r)] if "deployment" in r else []),
            small_model(r),
            side_by_side(r),
            f"tinymlir cold compile {r['tinymlir']['cold_compile_seconds']:.2f} s "
            f"({r['tinymlir']['cold_programs_compiled']} programs for prefill-16 + decode), "
            f"+{r['tinymlir']['compile_prefill128_seconds']:.2f} s for prefill-128",
            f"tinymlir compile from the disk cache {r['tinymlir']['disk_cache_compile_seconds']:.3f} s "
            f"({r['tinymlir']['disk_cache_programs_read']} programs read, "
            f"{r['tinymlir']['disk_cache_programs_compiled']} compiled): "
            f"{r['tinymlir']['cold_compile_seconds'] / max(r['tinymlir']['disk_cache_compile_seconds'], 1e-9):.0f}x "
            f"faster than cold"]
    for x in r["cross_check"]:
        out.append(f"cross-check {x['pair']}: max |diff| = {x['max_abs_diff']:.3g} "
                   f"(max |logit| {x['max_abs_ref']:.3g}, relative {x['relative']:.2g}) "
                   f"{'OK' if x['ok'] else 'FAIL'}; same argmax: {x['same_argmax']}")
    g, g16 = r["tinymlir"]["gemv_vs_gemm_row"], r["tinymlir"]["gemv_vs_prompt16_row"]
    out.append(f"KV cache vs recompute, a row alone (decode) against the same row in a 16-row "
               f"prompt, 768 x 2304: with an f16 weight (the GEMV kernels for both) "
               f"{100 * g16['fraction_differing']:.0f}% of outputs differ in their bits; with an "
               f"f32 weight (OpenBLAS's GEMM for the prompt) {100 * g['fraction_differing']:.0f}%, "
               f"by at most {g['max_abs_diff']:.2g} (outputs up to {g['max_abs']:.2g})")
    out.append(f"greedy ids equal to numpy's: tinymlir {r['same_generated_ids']['tinymlir']}"
               + (f", pytorch {r['same_generated_ids']['pytorch']}" if r.get("pytorch") else ""))
    if r.get("artifacts"):
        out.append(artifacts.table(r["artifacts"]))
    la = e["loadavg_start"], e["loadavg_end"]
    out.append(f"load average at start {la[0][0]:.2f}, at end {la[1][0]:.2f} (counts this run) "
               f"(on {e['cpus']} CPUs; other work on the machine skews every figure)")
    return "\n".join(out)


def side_by_side_ratios(sbs, bytes_per_token, separate_runs):
    """Per round of gpt2_bench --side-by-side: each model's decode as a fraction of its read
    ceiling (the better of the reads before and after the round, over the model's bytes per
    token) and the half-precision models against F32 in the same round; the medians over the
    rounds, and whether each model's tokens equal its separate run's."""
    read = sbs["read_bytes_per_s"]
    rounds = sbs["rounds"]
    per_round = []
    for i in range(rounds):
        ceiling = max(read[i], read[i + 1])
        x = {"read_gb_per_s": ceiling / 1e9}
        for m, b in bytes_per_token.items():
            x[f"{m}_fraction_of_ceiling"] = sbs[m]["decode_tokens_per_s"][i] / (ceiling / b)
        for m in ("f16", "bf16"):
            x[f"{m}_over_f32"] = sbs[m]["decode_tokens_per_s"][i] / sbs["f32"]["decode_tokens_per_s"][i]
        per_round.append(x)
    median = {k: float(np.median([x[k] for x in per_round])) for k in per_round[0]}
    spread = {k: [min(x[k] for x in per_round), max(x[k] for x in per_round)] for k in per_round[0]}
    same = {m: sbs[m]["generated_ids"] == separate_runs[m]["generated_ids"] for m in separate_runs}
    return {"per_round": per_round, "median": median, "range": spread, "same_ids_as_separate_runs": same}


def side_by_side(r):
    """The decode ratios from interleaved rounds in one process (gpt2_bench --side-by-side)."""
    sbs = r["side_by_side"]
    m, lo_hi = sbs["ratios"]["median"], sbs["ratios"]["range"]

    def pct(k):
        return f"{100 * m[k]:.0f}% (rounds {100 * lo_hi[k][0]:.0f}-{100 * lo_hi[k][1]:.0f}%)"

    def times(k):
        return f"{m[k]:.2f}x (rounds {lo_hi[k][0]:.2f}-{lo_hi[k][1]:.2f}x)"

    same = all(sbs["ratios"]["same_ids_as_separate_runs"].values())
    return (f"decode side by side: one process holding F32, F16, BF16 and kjv-tiny, {sbs['rounds']} "
            f"rounds of (read bandwidth, then each model's decode, order alternating); medians of "
            f"the rounds' ratios, each round against its own read ceiling "
            f"(median {m['read_gb_per_s']:.1f} GB/s):\n"
            f"  F32 {pct('f32_fraction_of_ceiling')} of the read ceiling; F16 {times('f16_over_f32')} "
            f"F32 ({pct('f16_fraction_of_ceiling')} of its ceiling); BF16 {times('bf16_over_f32')} F32; "
            f"kjv-tiny {pct('small_fraction_of_ceiling')} of its ceiling; tokens equal to the "
            f"separate runs': {same}")


def small_model(r):
    """kjv-tiny's decode against the same read ceiling, held as stored (F16), in F32, in BF16."""
    sm, c, w = r["small"], r["ceiling"], r["small_weights"]
    ceiling = c["read_gb_per_s"] * 1e9 / sm["bytes_per_token"]
    b = sm["decode_ms_per_token"]
    f32, bf16 = w["f32"], w["bf16"]
    return (f"kjv-tiny (the main job's model, F16 weights, {sm['bytes_per_token'] / 1e6:.1f} MB per "
            f"token): decode {sm['decode_tokens_per_s_median']:.0f} tok/s = "
            f"{100 * sm['decode_tokens_per_s_median'] / ceiling:.0f}% of its read ceiling "
            f"({ceiling:.0f} tok/s); {b['total']:.2f} ms per token, GEMV {b['gemv']:.2f}, "
            f"everything else in the programs {b['other_in_programs']:.2f}, {b['invokes']:.0f} "
            f"invokes, model's own work {b['host']:.2f}\n"
            f"  held in F32 instead: {f32['decode_tokens_per_s_median']:.0f} tok/s (F16 = "
            f"{sm['decode_tokens_per_s_median'] / f32['decode_tokens_per_s_median']:.2f}x), same ids: "
            f"{f32['generated_ids'] == sm['generated_ids']}; in BF16: "
            f"{bf16['decode_tokens_per_s_median']:.0f} tok/s, greedy ids equal to F16's for "
            f"{leading_equal(bf16['generated_ids'], sm['generated_ids'])} of {len(sm['generated_ids'])}")


def half_weights(r):
    """The F32 checkpoint held in F16 and BF16 (tm_model_options.weights) against F32."""
    tm, q, h = r["tinymlir"], r["ratios"], r["half_weights"]
    out = [f"half-precision weights (the same checkpoint converted at load; matrices "
           f"{h['f16']['weights_mb']:.0f} MB of weights in memory against "
           f"{h['f32_weights_mb']:.0f} MB in F32):"]
    for w, x in r["half"].items():
        a = h[w]
        out.append(
            f"  {w}: decode {x['decode_tokens_per_s_median']:.1f} tok/s = "
            f"{q[f'decode_{w}_over_f32']:.2f}x F32's {tm['decode_tokens_per_s_median']:.1f} "
            f"({100 * q[f'decode_{w}_fraction_of_ceiling']:.0f}% of its read ceiling), GEMV "
            f"{x['decode_ms_per_token']['gemv']:.2f} ms of {x['decode_ms_per_token']['total']:.2f} "
            f"per token; prefill-16 {x['prefill16_ms_median']:.1f} ms, prefill-128 "
            f"{x['prefill128_ms_median']:.1f} ms; peak RSS {x['peak_rss_mb']:.0f} MB; logits vs "
            f"F32: max |diff| {a['max_abs_diff']:.3g} (relative {a['relative']:.2g}), same "
            f"argmax {a['same_argmax']}, greedy ids equal to F32's for "
            f"{a['greedy_ids_equal']} of {len(tm['generated_ids'])}")
    return "\n".join(out)


def deployment_rss(build, folder, prompt, tokens, weights, env):
    """Peak RSS of the deployment path: a bundle compiled ahead of time (`tinymlir compile
    --weights W`), run by `tinymlir-run` over libtinymlir_runtime.so (no LLVM, no compiler)
    for the same greedy generation as the driver. Returns the peak resident memory it
    reports (`--verbose`: its VmHWM; a child's ru_maxrss would also count this Python
    process, which spawns it through vfork) and the ids it printed."""
    bundle = tempfile.mkdtemp(prefix=f"tinymlir-bundle-{weights}-")
    try:
        subprocess.run([os.path.join(build, "bin", "tinymlir"), "compile", "--model", folder,
                        "--weights", weights, "--out", bundle], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return generate_rss(os.path.join(build, "bin", "tinymlir-run"), folder, prompt, tokens,
                            weights, env, ["--bundle", bundle])
    finally:
        shutil.rmtree(bundle, ignore_errors=True)


def warm_cache_rss(build, folder, prompt, tokens, weights, env):
    """Peak RSS of `tinymlir generate` (libtinymlir.so) with a warm disk cache: a first run
    compiles into an empty cache directory, the second, measured, reads every program from
    it and so never loads the compiler library (LLVM, MLIR)."""
    cache = tempfile.mkdtemp(prefix=f"tinymlir-cache-{weights}-")
    try:
        cli = os.path.join(build, "bin", "tinymlir")
        env = dict(env, TINYMLIR_CACHE_DIR=cache)
        generate_rss(cli, folder, prompt, tokens, weights, env, [])
        return generate_rss(cli, folder, prompt, tokens, weights, env, [])
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def generate_rss(cli, folder, prompt, tokens, weights, env, extra):
    """Runs `cli generate` greedily on the prompt's ids; returns the peak resident memory it
    reports (`--verbose`: its VmHWM; a child's ru_maxrss would also count this Python
    process, which spawns it through vfork) and the ids it printed."""
    p = subprocess.run(
        [cli, "generate", "--greedy", "--ids", "--verbose", "--tokens", str(tokens), "--model",
         folder, "--weights", weights] + extra + [" ".join(map(str, prompt))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = re.search(r"peak resident memory: ([0-9.]+) MB", p.stderr)
    if p.returncode != 0 or not peak:
        sys.exit(f"[bench] {os.path.basename(cli)} generate {' '.join(extra)} ({weights}) "
                 f"failed:\n{p.stderr}")
    printed = [int(x) for x in p.stdout.split()]
    return {"peak_rss_mb": float(peak.group(1)), "generated_ids": printed[len(prompt):]}


def deployment(r):
    """Peak RSS of the deployment path (bundle + runtime library) and of libtinymlir.so with
    a warm disk cache, against the weights held."""
    def parts(d):
        return "; ".join(
            f"{w.upper()} {x['peak_rss_mb']:.0f} MB for {x['weights_mb']:.0f} MB of weights "
            f"(+{100 * (x['peak_rss_mb'] / x['weights_mb'] - 1):.0f}%, ids equal to the "
            f"driver's: {x['same_ids']})" for w, x in d.items())
    lines = ["peak RSS, bundle + runtime library (tinymlir-run, no compiler in the process; "
             "prompt-16 and the same decode): " + parts(r["deployment"])]
    if "warm_cache" in r:
        lines.append("peak RSS, libtinymlir.so with a warm disk cache (tinymlir generate, "
                     "second run; the compiler is not started): " + parts(r["warm_cache"]))
    # The driver compiles cold: in its compiler processes, children that exit after 5 s idle.
    tm, h = r["tinymlir"], r.get("half", {})
    f16 = h.get("f16")
    lines.append(
        "peak RSS, the driver compiling cold (compiler processes apart): "
        f"F32 {tm['peak_rss_mb']:.0f} MB for {r['half_weights']['f32_weights_mb']:.0f} MB "
        f"of weights (+{100 * (tm['peak_rss_mb'] / r['half_weights']['f32_weights_mb'] - 1):.0f}%)"
        + (f"; F16 {f16['peak_rss_mb']:.0f} MB for {r['half_weights']['f16']['weights_mb']:.0f} "
           f"MB (+{100 * (f16['peak_rss_mb'] / r['half_weights']['f16']['weights_mb'] - 1):.0f}%)"
           if f16 else "")
        + f"; its largest compiler process peaked at {tm['compiler_process_peak_rss_mb']:.0f} MB")
    return "\n".join(lines)


def breakdown(tm):
    """One decode token of tinymlir, by part (gpt2_bench's decode_ms_per_token)."""
    b = tm["decode_ms_per_token"]
    overhead = b["invokes"] * tm["invoke_overhead_us"] / 1e3
    return "\n".join([
        f"tinymlir decode, ms per token (median of timed runs): {b['total']:.2f} =",
        f"  in programs: embed {b['embed']:.2f}, qkv {b['qkv']:.2f}, attn_mlp {b['attn_mlp']:.2f}, "
        f"head {b['head']:.2f}; the model's own work between them {b['host']:.2f}",
        f"  by kernel: GEMV {b['gemv']:.2f} (of which waiting for the other thread "
        f"{b['gemv_pool_wait']:.2f}), BLAS {b['blas']:.2f}, everything else in the programs "
        f"(attention glue, softmax, layer norm, GELU, adds) {b['other_in_programs']:.2f}",
        f"  per-invoke overhead: {tm['invoke_overhead_us']:.2f} us per call (a 4-element add), "
        f"x {b['invokes']:.0f} calls = {overhead:.3f} ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--driver", required=True, help="the gpt2_bench executable")
    ap.add_argument("--library", default="", help="libtinymlir.so used (reported only)")
    ap.add_argument("--cache", default="/tmp/tinymlir-bench", help="checkpoint cache root")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--bandwidth-mb", type=int, default=512)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--build", default="", help="build tree: also measure compiled artifacts "
                    "(bench/artifacts.py) on the embedded kjv-tiny")
    ap.add_argument("--out", default=os.path.join(HERE, "results.json"))
    ap.add_argument("--smoke", action="store_true",
                    help="a 2-layer d=64 random model, 8 decode tokens, 1 rep, 64 MB bandwidth "
                    "buffers: checks that every part of the benchmark runs (CI)")
    args = ap.parse_args()
    config, model_name, name = checkpoint.GPT2_124M, "GPT-2 124M", "gpt2-124m-random"
    if args.smoke:
        config, model_name, name = SMOKE, "smoke model (2 layers, d = 64)", "gpt2-smoke-random"
        args.reps, args.decode_tokens, args.bandwidth_mb = 1, 8, 64
    prompt16 = [i % config["vocab_size"] for i in PROMPT16]
    prompt128 = [i % config["vocab_size"] for i in PROMPT128]

    folder = os.path.join(args.cache, name)
    t0 = time.perf_counter()
    made = checkpoint.ensure_checkpoint(folder, args.seed, config)
    print(f"[bench] checkpoint {folder}: {'generated' if made else 'reused'} "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    work = os.path.join(args.cache, "run")
    os.makedirs(work, exist_ok=True)
    prompts = os.path.join(work, "prompts.txt")
    with open(prompts, "w") as f:
        f.write(" ".join(map(str, prompt16)) + "\n" + " ".join(map(str, prompt128)) + "\n")

    n = str(args.threads)
    blas_env = {"OPENBLAS_NUM_THREADS": n, "OMP_NUM_THREADS": n}
    common = ["--model", folder, "--prompts", prompts, "--decode-tokens", str(args.decode_tokens),
              "--reps", str(args.reps)]
    logits = {k: os.path.join(work, f"logits_{k}.f32")
              for k in ("tinymlir", "numpy", "pytorch", "tinymlir_f16", "tinymlir_bf16")}
    bw_cmd = [args.driver, "--bandwidth-mb", str(args.bandwidth_mb), "--threads", n, "--reps", "10"]
    r = {"model": model_name, "checkpoint": folder, "environment": environment(args),
         "config": {"reps": args.reps, "decode_tokens": args.decode_tokens, "seed": args.seed,
                    "prompt16": prompt16, "prompt128": prompt128}}
    bw = [run_json("bandwidth", bw_cmd, {})]
    # An empty disk cache, so that the cold compile is one; the driver then measures a
    # second context reading it.
    disk_cache = os.path.join(work, "disk-cache")
    shutil.rmtree(disk_cache, ignore_errors=True)
    r["tinymlir"] = run_json("tinymlir", [args.driver, *common, "--logits-out", logits["tinymlir"]],
                             dict(blas_env, TINYMLIR_CACHE_DIR=disk_cache))
    # Half-precision weights: the same F32 checkpoint converted at load (tm_model_options
    # .weights), its decode against the F32 one's and its logits and tokens against them.
    r["half"] = {w: run_json(f"tinymlir --weights {w}", [
        args.driver, *common, "--weights", w, "--core-only", "--logits-out",
        logits[f"tinymlir_{w}"]], dict(blas_env, TINYMLIR_CACHE_DIR=disk_cache))
        for w in ("f16", "bf16")}
    r["numpy"] = run_json("numpy", [PY, os.path.join(HERE, "numpy_gpt2.py"), *common,
                                    "--logits-out", logits["numpy"]], blas_env)
    if not args.no_torch:
        r["pytorch"] = run_json("pytorch", [PY, os.path.join(HERE, "torch_gpt2.py"), *common,
                                            "--threads", n, "--logits-out", logits["pytorch"]],
                                dict(blas_env, OMP_WAIT_POLICY="PASSIVE"))
    # The small model: the main job's kjv-tiny (F16 on disk, held in F16), same driver, same
    # prompts (GPT-2's vocabulary), its decode against the same ceiling; then held in F32
    # (the speed-up of half weights on a small model) and in BF16 (its tokens against F16's).
    small_dir = os.path.join(HERE, "..", "models", "kjv-tiny")
    small_cmd = [args.driver, "--model", small_dir, "--prompts", prompts, "--decode-tokens",
                 str(args.decode_tokens), "--reps", str(args.reps)]
    small_env = dict(blas_env, TINYMLIR_CACHE_DIR=os.path.join(work, "disk-cache-small"))
    r["small"] = run_json("tinymlir kjv-tiny", small_cmd, small_env)
    r["small_weights"] = {w: run_json(f"tinymlir kjv-tiny --weights {w}",
                                      small_cmd + ["--weights", w, "--core-only"], small_env)
                          for w in ("f32", "bf16")}
    with open(os.path.join(small_dir, "config.json")) as f:
        c = json.load(f)
    small_config = dict(vocab_size=c["vocab_size"], n_positions=c["n_positions"],
                        n_embd=c["n_embd"], n_layer=c["n_layer"], n_head=c["n_head"])
    r["small"]["bytes_per_token"] = checkpoint.decode_bytes_per_token(small_config, 2)
    # The decode ratios once more, from one process: F32, F16, BF16 and kjv-tiny decoded in
    # interleaved rounds, each round next to its own read-bandwidth measurement.
    r["side_by_side"] = run_json("side by side", [
        args.driver, "--side-by-side", str(2 * args.reps + 1), "--model", folder, "--small",
        small_dir, "--prompts", prompts, "--decode-tokens", str(args.decode_tokens),
        "--bandwidth-mb", str(args.bandwidth_mb), "--threads", n],
        dict(blas_env, TINYMLIR_CACHE_DIR=disk_cache))
    r["gemm_floor"] = run_json("gemm floor", [
        PY, os.path.join(HERE, "gemm_floor.py"), "--tokens", str(len(prompt128)), "--reps",
        str(args.reps), "--layers", str(config["n_layer"]), "--d", str(config["n_embd"]),
        "--heads", str(config["n_head"]), "--vocab", str(config["vocab_size"])], blas_env)
    if args.build:
        print("[bench] compiled artifacts (bench/artifacts.py)", file=sys.stderr, flush=True)
        r["artifacts"] = artifacts.measure(args.build, args.reps)
        print("[bench] peak RSS of the deployment path (tinymlir-run --bundle)", file=sys.stderr,
              flush=True)
        r["deployment"] = {}
        for w, bytes_per, ids in (("f32", 4, r["tinymlir"]["generated_ids"]),
                                  ("f16", 2, r["half"]["f16"]["generated_ids"])):
            x = deployment_rss(args.build, folder, prompt16, args.decode_tokens + 1, w,
                               dict(blas_env, TINYMLIR_CACHE_DIR="off"))
            x["weights_mb"] = checkpoint.weight_bytes(config, bytes_per) / 1e6
            x["same_ids"] = x["generated_ids"] == ids[:len(x["generated_ids"])]
            r["deployment"][w] = x
        print("[bench] peak RSS of tinymlir generate with a warm disk cache", file=sys.stderr,
              flush=True)
        r["warm_cache"] = {}
        for w, bytes_per, ids in (("f32", 4, r["tinymlir"]["generated_ids"]),
                                  ("f16", 2, r["half"]["f16"]["generated_ids"])):
            x = warm_cache_rss(args.build, folder, prompt16, args.decode_tokens + 1, w, blas_env)
            x["weights_mb"] = checkpoint.weight_bytes(config, bytes_per) / 1e6
            x["same_ids"] = x["generated_ids"] == ids[:len(x["generated_ids"])]
            r["warm_cache"][w] = x
    bw.append(run_json("bandwidth (again)", bw_cmd, {}))
    r["environment"]["loadavg_end"] = os.getloadavg()

    # Ceiling: the best read bandwidth of the two measurements over the weight bytes one
    # decode step must read (a decode step reads its weights and writes almost nothing).
    per_token = checkpoint.decode_bytes_per_token(config)
    read = [x["read_bytes_per_s"] for x in bw]
    r["ceiling"] = {"weight_mb_per_token": per_token / 1e6, "read_gb_per_s": max(read) / 1e9,
                    "read_gb_per_s_runs": [x / 1e9 for x in read],
                    "copy_gb_per_s_runs": [x["copy_bytes_per_s"] / 1e9 for x in bw],
                    "triad_gb_per_s_runs": [x["triad_bytes_per_s"] / 1e9 for x in bw],
                    "tokens_per_s": max(read) / per_token,
                    "bandwidth_runs": bw}
    tm, npy, pt = r["tinymlir"], r["numpy"], r.get("pytorch")
    q = {"decode_tinymlir_over_numpy": tm["decode_tokens_per_s_median"] / npy["decode_tokens_per_s_median"],
         "decode_tinymlir_fraction_of_ceiling": tm["decode_tokens_per_s_median"] / r["ceiling"]["tokens_per_s"],
         "decode_numpy_fraction_of_ceiling": npy["decode_tokens_per_s_median"] / r["ceiling"]["tokens_per_s"],
         "prefill16_tinymlir_over_numpy": tm["prefill16_ms_median"] / npy["prefill16_ms_median"],
         "prefill128_tinymlir_over_numpy": tm["prefill128_ms_median"] / npy["prefill128_ms_median"],
         "no_cache_decode_tinymlir_over_numpy": tm["no_cache_decode_tokens_per_s_median"]
             / npy["no_cache_decode_tokens_per_s_median"],
         "prefill128_tinymlir_over_gemm_floor":
             tm["prefill128_ms_median"] / r["gemm_floor"]["gemm_floor_ms_median"]}
    for w, x in r["half"].items():
        q[f"decode_{w}_over_f32"] = x["decode_tokens_per_s_median"] / tm["decode_tokens_per_s_median"]
        q[f"decode_{w}_fraction_of_ceiling"] = x["decode_tokens_per_s_median"] / (
            max(read) / checkpoint.decode_bytes_per_token(config, 2))
    r["half_weights"] = {
        w: dict(compare(f"tinymlir {w} vs tinymlir f32", logits[f"tinymlir_{w}"], logits["tinymlir"]),
                greedy_ids_equal=leading_equal(x["generated_ids"], tm["generated_ids"]),
                weights_mb=checkpoint.weight_bytes(config, 2) / 1e6)
        for w, x in r["half"].items()}
    r["half_weights"]["f32_weights_mb"] = checkpoint.weight_bytes(config, 4) / 1e6
    if pt:
        q["decode_tinymlir_over_pytorch"] = tm["decode_tokens_per_s_median"] / pt["decode_tokens_per_s_median"]
        q["prefill16_tinymlir_over_pytorch"] = tm["prefill16_ms_median"] / pt["prefill16_ms_median"]
        q["prefill128_tinymlir_over_pytorch"] = tm["prefill128_ms_median"] / pt["prefill128_ms_median"]
    r["ratios"] = q
    r["side_by_side"]["ratios"] = side_by_side_ratios(
        r["side_by_side"], {"f32": per_token, "f16": checkpoint.decode_bytes_per_token(config, 2),
                            "bf16": checkpoint.decode_bytes_per_token(config, 2),
                            "small": r["small"]["bytes_per_token"]},
        {"f32": tm, "f16": r["half"]["f16"], "bf16": r["half"]["bf16"], "small": r["small"]})
    r["cross_check"] = [compare("tinymlir vs numpy", logits["tinymlir"], logits["numpy"])]
    if pt:
        r["cross_check"].append(compare("pytorch vs numpy", logits["pytorch"], logits["numpy"]))
    r["same_generated_ids"] = {k: r[k]["generated_ids"] == npy["generated_ids"]
                               for k in ("tinymlir", "pytorch") if r.get(k)}
    with open(args.out, "w") as f:  # first without the table, in case rendering fails
        json.dump(r, f, indent=2)
    text = table(r)
    r["table"] = text.splitlines()
    with open(args.out, "w") as f:
        json.dump(r, f, indent=2)
    print(text)
    print(f"[bench] results written to {args.out}", file=sys.stderr)
    if not all(x["ok"] for x in r["cross_check"]):
        sys.exit("[bench] cross-check FAILED: the implementations disagree; figures are not comparable")


if __name__ == "__main__":
    main()
