"""Runs the GPT-2 124M benchmark side by side: tinymlir, NumPy, PyTorch, the memory-bandwidth
ceiling and the prefill's GEMM floor, each in its own subprocess, one at a time, with the same
thread count; tinymlir also with F16, BF16 and 8-bit (Q8_0) weights, in one process in rounds
with a read-bandwidth sample before each decode (gpt2_bench --side-by-side), and, with
--build, the load time of `tinymlir generate` (first and prepared loads, page cache cold and
warm) and a GPT-2 XL-shaped run (load, decode, peak memory; --no-xl skips it).
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
Q8_BYTES_PER_WEIGHT = 34 / 32  # Q8_0: a block of 32 int8 weights and its f16 scale
FAST_READ_GB_PER_S = 55  # the targets' "rounds where that bandwidth is above 55 GB/s"


def with_environment(env_extra):
    """The environment of every subprocess the bench starts: this process's, with env_extra
    over it. (Only env_extra, as the `tinymlir generate` runs once had, drops variables such
    as OPENBLAS_CORETYPE: OpenBLAS then picks another kernel for the prompt's attention, and
    the greedy ids on random weights parted from the driver's at token 59 of 65.)"""
    return dict(os.environ, **env_extra)


def run_json(name, cmd, env_extra):
    """Runs one measurement subprocess; its stdout is one JSON object."""
    env = with_environment(env_extra)
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
    rows = [r["tinymlir"], dict(r["q8_0"], implementation="tinymlir, q8_0 weights"),
            r["numpy"]] + ([r["pytorch"]] if r.get("pytorch") else [])
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
            f"{c['weight_mb_per_token']:.1f} MB per token; bench/read_ceiling.h over "
            f"{c['bandwidth_runs'][0]['buffer_mb']} MB, "
            f"{100 * c['bandwidth_runs'][0].get('read_buffer_huge_page_fraction', 0):.0f}% in huge pages)",
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
            q8_weights(r),
            *([deployment(r)] if "deployment" in r else []),
            small_model(r),
            side_by_side(r),
            *([load_table(r)] if "load" in r else []),
            *([xl_table(r)] if "xl" in r else []),
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
    out.append(targets_table(r))
    la = e["loadavg_start"], e["loadavg_end"]
    out.append(f"load average at start {la[0][0]:.2f}, at end {la[1][0]:.2f} (counts this run) "
               f"(on {e['cpus']} CPUs; other work on the machine skews every figure)")
    return "\n".join(out)


def side_by_side_ratios(sbs, bytes_per_token, separate_runs, fast=FAST_READ_GB_PER_S):
    """Per round of gpt2_bench --side-by-side: each model's decode as a fraction of its read
    ceiling, the read-bandwidth sample taken just before that decode over the model's bytes
    per token, and the F16, BF16 and Q8_0 models against F32 in the same round; the medians
    and ranges over the rounds; the F32 fraction again over the rounds whose F32 sample was
    above `fast` GB/s, and Q8_0 / F32 over the rounds where both samples were above it, both
    at or below it, and the mixed rest (the ratio depends on the regime: Q8_0's token has
    fixed costs that F32's hides, so it gains less when the bandwidth is high); whether each
    model's tokens equal its separate run's."""
    models = [m for m in bytes_per_token if m in sbs]
    per_round = []
    for i in range(sbs["rounds"]):
        x = {}
        for m in models:
            read = sbs[m]["read_bytes_per_s"][i]
            x[f"{m}_read_gb_per_s"] = read / 1e9
            x[f"{m}_fraction_of_ceiling"] = sbs[m]["decode_tokens_per_s"][i] / (read / bytes_per_token[m])
        for m in ("f16", "bf16", "q8_0"):
            if m in models:
                x[f"{m}_over_f32"] = (sbs[m]["decode_tokens_per_s"][i]
                                      / sbs["f32"]["decode_tokens_per_s"][i])
        per_round.append(x)
    median = {k: float(np.median([x[k] for x in per_round])) for k in per_round[0]}
    spread = {k: [min(x[k] for x in per_round), max(x[k] for x in per_round)] for k in per_round[0]}
    samples = [sbs[m]["read_bytes_per_s"][i] / 1e9 for m in models for i in range(sbs["rounds"])]
    median["read_gb_per_s"] = float(np.median(samples))
    spread["read_gb_per_s"] = [min(samples), max(samples)]
    # F32's fraction of its ceiling is judged by F32's own sample. A ratio of two decodes is
    # judged only where both ran in the same regime: the bandwidth can move between two
    # decodes of one round (F32 at 82 GB/s, Q8_0 at 50 a few seconds later), and such a
    # round's ratio belongs to neither regime, so it is counted apart ("mixed").
    fast_rounds = [x for x in per_round if x["f32_read_gb_per_s"] > fast]

    def regime(x, m):
        both = (x["f32_read_gb_per_s"], x[f"{m}_read_gb_per_s"])
        return "fast" if min(both) > fast else "slow" if max(both) <= fast else "mixed"

    def median_of(rounds, key):
        return float(np.median([x[key] for x in rounds])) if rounds and key in rounds[0] else None

    q8 = {r: [x for x in per_round if "q8_0_read_gb_per_s" in x and regime(x, "q8_0") == r]
          for r in ("fast", "slow", "mixed")}
    f32_fast = {"threshold_gb_per_s": fast, "rounds": len(fast_rounds),
                "f32_fraction_of_ceiling_median": median_of(fast_rounds, "f32_fraction_of_ceiling"),
                "q8_0_fast_rounds": len(q8["fast"]),
                "q8_0_over_f32_median": median_of(q8["fast"], "q8_0_over_f32"),
                "q8_0_slow_rounds": len(q8["slow"]),
                "slow_rounds_q8_0_over_f32_median": median_of(q8["slow"], "q8_0_over_f32"),
                "q8_0_mixed_rounds": len(q8["mixed"]),
                "highest_f32_sample_gb_per_s": max(x["f32_read_gb_per_s"] for x in per_round)}
    same = {m: sbs[m]["generated_ids"] == separate_runs[m]["generated_ids"] for m in separate_runs}
    return {"per_round": per_round, "median": median, "range": spread, "f32_fast_rounds": f32_fast,
            "same_ids_as_separate_runs": same}


def side_by_side(r):
    """The decode ratios from interleaved rounds in one process (gpt2_bench --side-by-side)."""
    sbs = r["side_by_side"]
    q = sbs["ratios"]
    m, lo_hi, fast = q["median"], q["range"], q["f32_fast_rounds"]

    def pct(k):
        return f"{100 * m[k]:.0f}% (rounds {100 * lo_hi[k][0]:.0f}-{100 * lo_hi[k][1]:.0f}%)"

    def times(k):
        return f"{m[k]:.2f}x (rounds {lo_hi[k][0]:.2f}-{lo_hi[k][1]:.2f}x)"

    same = all(q["same_ids_as_separate_runs"].values())
    if fast["rounds"]:
        fast_text = (f"in the {fast['rounds']} of {sbs['rounds']} rounds whose sample was above "
                     f"{fast['threshold_gb_per_s']} GB/s: {100 * fast['f32_fraction_of_ceiling_median']:.0f}%"
                     + (f" (Q8_0 / F32 in the {fast['q8_0_fast_rounds']} rounds where both "
                        f"samples were: {fast['q8_0_over_f32_median']:.2f}x)"
                        if fast["q8_0_over_f32_median"] is not None else ""))
    else:
        fast_text = (f"no round's sample was above {fast['threshold_gb_per_s']} GB/s (highest "
                     f"{fast['highest_f32_sample_gb_per_s']:.1f} GB/s)")
    rounds = ", ".join(f"{x['f32_read_gb_per_s']:.1f}: {100 * x['f32_fraction_of_ceiling']:.0f}%"
                       for x in q["per_round"])
    q8_rounds = ", ".join(f"{x['q8_0_over_f32']:.2f} ({x['f32_read_gb_per_s']:.0f}/"
                          f"{x['q8_0_read_gb_per_s']:.0f} GB/s)" for x in q["per_round"])
    return (f"decode side by side: one process holding F32, F16, BF16, Q8_0 and kjv-tiny, "
            f"{sbs['rounds']} rounds of one decode of each (order alternating), each decode just "
            f"after a read-bandwidth sample of its own (best of 3 passes over {sbs['buffer_mb']} MB "
            f"in huge pages: {100 * sbs.get('read_buffer_huge_page_fraction', 0):.0f}% of it in "
            f"huge pages; samples median {m['read_gb_per_s']:.1f} GB/s, "
            f"{lo_hi['read_gb_per_s'][0]:.1f}-{lo_hi['read_gb_per_s'][1]:.1f}); medians of the "
            f"rounds' ratios, each decode against its own sample at its bytes per token:\n"
            f"  F32 {pct('f32_fraction_of_ceiling')} of the read ceiling; {fast_text}\n"
            f"  F16 {times('f16_over_f32')} F32 ({pct('f16_fraction_of_ceiling')} of its ceiling); "
            f"BF16 {times('bf16_over_f32')} F32 ({pct('bf16_fraction_of_ceiling')})\n"
            f"  Q8_0 {times('q8_0_over_f32')} F32 ({pct('q8_0_fraction_of_ceiling')} of its ceiling); "
            f"kjv-tiny {pct('small_fraction_of_ceiling')} of its ceiling\n"
            f"  F32 by round (sample GB/s: fraction of it): {rounds}\n"
            f"  Q8_0 / F32 by round (F32's / Q8_0's sample): {q8_rounds}\n"
            f"  tokens the same in every round (checked by the driver) and equal to the separate "
            f"runs': {same}")


def q8_weights(r):
    """The F32 checkpoint quantized to Q8_0 at load, against F32 and NumPy."""
    tm, npy, q, x, a = r["tinymlir"], r["numpy"], r["ratios"], r["q8_0"], r["q8_weights"]
    return (f"8-bit weights (Q8_0, the same checkpoint quantized at load: 34 bytes per 32 weights; "
            f"{a['weights_mb']:.0f} MB of weights in memory, {a['mb_per_token']:.1f} MB read per "
            f"token, against {r['half_weights']['f32_weights_mb']:.0f} MB in F32):\n"
            f"  q8_0: decode {x['decode_tokens_per_s_median']:.1f} tok/s = "
            f"{q['decode_q8_0_over_f32']:.2f}x F32's {tm['decode_tokens_per_s_median']:.1f}, "
            f"{q['decode_q8_0_over_numpy']:.2f}x NumPy's {npy['decode_tokens_per_s_median']:.1f} "
            f"({100 * q['decode_q8_0_fraction_of_ceiling']:.0f}% of its read ceiling), GEMV "
            f"{x['decode_ms_per_token']['gemv']:.2f} ms of {x['decode_ms_per_token']['total']:.2f} "
            f"per token; peak RSS {x['peak_rss_mb']:.0f} MB\n"
            f"  prefill-16 {x['prefill16_ms_median']:.1f} ms ({q['prefill16_q8_0_over_f32']:.2f}x "
            f"F32's time), prefill-128 {x['prefill128_ms_median']:.1f} ms "
            f"({q['prefill128_q8_0_over_f32']:.2f}x; the target: at most 1.5x)\n"
            f"  logits vs F32: max |diff| {a['max_abs_diff']:.3g} (relative {a['relative']:.2g}), "
            f"same argmax {a['same_argmax']}; greedy ids equal to F32's for "
            f"{a['greedy_ids_equal']} of {len(tm['generated_ids'])}")


def load_table(r):
    """`tinymlir generate`'s load figure, first and prepared loads, cold and warm."""
    ld, probe = r["load"], r["load"]["eviction_probe"]

    def cell(x):
        cached = x.get("file_cached_before")
        return (f"{x['load_ms']:.0f} ms" + (f" ({100 * cached:.0f}%)" if cached is not None else ""))

    out = [f"load time, {r['model']} (`tinymlir generate`'s load figure: weights and model ready; "
           f"in parentheses the share of the file it reads that was in the page cache just before):",
           f"{'':8}{'first, cold':>16}{'first, warm':>16}{'prepared, warm':>26}"
           f"{'prepared, cold':>18}{'prepared file':>15}{'peak RSS':>10}"]
    for w in ("f32", "f16", "q8_0"):
        x = ld[w]
        warm = [y["load_ms"] for y in x["prepared_warm"]]
        out.append(f"  {w:6}{cell(x['first_cold']):>16}{cell(x['first_warm']):>16}"
                   f"{x['prepared_warm_load_ms_median']:>9.0f} ms ({min(warm):.0f}-{max(warm):.0f}, "
                   f"{len(warm)} runs){cell(x['prepared_cold']):>18}"
                   f"{x['prepared_file_bytes'] / 1e6:>12.0f} MB"
                   f"{x['prepared_warm'][-1]['peak_rss_mb']:>7.0f} MB")
    out.append(
        f"  eviction (posix_fadvise DONTNEED) of the checkpoint, timed: "
        f"{100 * (probe['cached_after_eviction'] or 0):.0f}% left cached, then read at "
        f"{probe['cold_read_gb_per_s']:.2f} GB/s against {probe['warm_read_gb_per_s']:.2f} GB/s "
        f"warm: {'eviction worked' if probe['worked'] else 'eviction did not show (the disk reads as fast as the cache)'}")
    out.append(
        "  weights came from the checkpoint, then the prepared file, as expected: "
        + ", ".join(f"{w} {ld[w]['weights_from_as_expected']}" for w in ("f32", "f16", "q8_0"))
        + "; ids equal in every load: "
        + ", ".join(f"{w} {ld[w]['same_ids_every_load']}" for w in ("f32", "f16", "q8_0"))
        + "; and to the driver's: "
        + ", ".join(f"{w} {ld[w]['generated_ids'] == ref['generated_ids'][:len(ld[w]['generated_ids'])]}"
                    for w, ref in (("f32", r["tinymlir"]), ("f16", r["half"]["f16"]),
                                   ("q8_0", r["q8_0"]))))
    return "\n".join(out)


def xl_table(r):
    """GPT-2 XL shapes through `tinymlir generate`."""
    xl = r["xl"]
    ws = [w for w in xl if isinstance(xl[w], dict) and "first" in xl[w]]
    first = xl[ws[0]]
    out = [f"GPT-2 XL shapes (random F32 checkpoint, {first['checkpoint_bytes'] / 1e9:.2f} GB; "
           f"`tinymlir generate`, prompt 16 tokens, {xl['decode_tokens']} decode tokens, a fresh "
           f"cache folder):"]
    for w in ws:
        x = xl[w]
        f, warm = x["first"], x["prepared_warm"]
        cached = f.get("file_cached_before")
        runs = ", ".join(f"{y['load_ms'] / 1e3:.2f}" for y in warm)
        out.append(
            f"  {w}: first load {f['load_ms'] / 1e3:.2f} s (converting"
            + (f"; checkpoint {100 * cached:.0f}% in the page cache" if cached is not None else "")
            + f"; prepared file {x['prepared_file_bytes'] / 1e9:.2f} GB written: {f['prepared_written']}), "
            f"second load {x['prepared_warm_load_ms_median'] / 1e3:.2f} s (prepared, warm page "
            f"cache; runs {runs})\n"
            f"      decode {warm[-1]['decode_tokens_per_s']:.2f} tok/s ({100 * x['decode_fraction_of_ceiling']:.0f}% "
            f"of the read ceiling at {x['mb_per_token']:.0f} MB per token), prefill-16 "
            f"{warm[-1]['prefill_ms']:.0f} ms, cold compile {f['compile_ms'] / 1e3:.2f} s; peak RSS "
            f"{warm[-1]['peak_rss_mb']:.0f} MB (first load {f['peak_rss_mb']:.0f} MB); "
            f"tokens equal between the loads: {x['same_ids']}")
    return "\n".join(out)


def targets(r):
    """The performance targets (docs/PERFORMANCE.md) of this run, each with its bound and whether it holds."""
    sbs = r["side_by_side"]["ratios"]
    fast = sbs["f32_fast_rounds"]
    out = [{"what": "F32 decode / read sample just before it (side by side, median)",
            "value": sbs["median"]["f32_fraction_of_ceiling"], "bound": ">= 0.80",
            "met": sbs["median"]["f32_fraction_of_ceiling"] >= 0.80},
           {"what": f"the same, rounds whose sample was above {fast['threshold_gb_per_s']} GB/s "
                    f"({fast['rounds']} of {r['side_by_side']['rounds']})",
            "value": fast["f32_fraction_of_ceiling_median"], "bound": ">= 0.80",
            "met": None if fast["rounds"] == 0 else fast["f32_fraction_of_ceiling_median"] >= 0.80},
           {"what": "Q8_0 decode / F32 decode (side by side, median)",
            "value": sbs["median"]["q8_0_over_f32"], "bound": ">= 3.0",
            "met": sbs["median"]["q8_0_over_f32"] >= 3.0},
           {"what": f"the same, rounds where both samples were above {fast['threshold_gb_per_s']} "
                    f"GB/s ({fast['q8_0_fast_rounds']} of {r['side_by_side']['rounds']})",
            "value": fast["q8_0_over_f32_median"], "bound": ">= 3.0",
            "met": None if fast["q8_0_over_f32_median"] is None else fast["q8_0_over_f32_median"] >= 3.0},
           {"what": f"the same, rounds where both were below ({fast['q8_0_slow_rounds']}; "
                    f"{fast['q8_0_mixed_rounds']} mixed, not judged)",
            "value": fast["slow_rounds_q8_0_over_f32_median"], "bound": "-", "met": None},
           # Separate runs are minutes apart, through bandwidths that differ by half: shown,
           # not judged (the side-by-side ratio above is the measure).
           {"what": "Q8_0 decode / F32 decode (separate runs, minutes apart: for reference)",
            "value": r["ratios"]["decode_q8_0_over_f32"], "bound": "-", "met": None},
           {"what": "Q8_0 prefill-128 / F32 prefill-128 (time)",
            "value": r["ratios"]["prefill128_q8_0_over_f32"], "bound": "<= 1.5",
            "met": r["ratios"]["prefill128_q8_0_over_f32"] <= 1.5}]
    if "load" in r:
        v = r["load"]["f32"]["prepared_warm_load_ms_median"]
        out.append({"what": f"{r['model']} F32 load, prepared file, warm page cache (ms)",
                    "value": v, "bound": "<= 150", "met": v <= 150})
    if "xl" in r and "f16" in r["xl"]:
        v = r["xl"]["f16"]["prepared_warm_load_ms_median"] / 1e3
        out.append({"what": "GPT-2 XL shapes F16 load, prepared file, warm page cache (s)",
                    "value": v, "bound": "<= 2", "met": v <= 2})
    same = (all(r["side_by_side"]["ratios"]["same_ids_as_separate_runs"].values())
            and all(r["load"][w]["same_ids_every_load"] for w in ("f32", "f16", "q8_0"))
            if "load" in r else all(r["side_by_side"]["ratios"]["same_ids_as_separate_runs"].values()))
    if "xl" in r:
        same = same and all(x["same_ids"] for x in r["xl"].values() if isinstance(x, dict) and "same_ids" in x)
    out.append({"what": "tokens unchanged (side by side vs separate runs, across loads)",
                "value": same, "bound": "True", "met": same})
    return out


def targets_table(r):
    lines = ["the targets, this run:"]
    for t in r["targets"]:
        v = t["value"]
        shown = ("-" if v is None else str(v) if isinstance(v, bool) else f"{v:.3g}")
        verdict = ("not judged" if t["bound"] == "-" else "not measured" if t["met"] is None
                   else "met" if t["met"] else "NOT MET")
        lines.append(f"  {t['what']}: {shown} (target {t['bound']}): {verdict}")
    return "\n".join(lines)


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
                        "--weights", weights, "--out", bundle], env=with_environment(env),
                       check=True,
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


def cli_generate(cli, folder, prompt, tokens, weights, env, extra=()):
    """Runs `cli generate --verbose` greedily on the prompt's ids and parses what it prints:
    the figures of its summary line (load ms: the weights and the model ready; compile ms;
    prefill ms; decode tokens/s), where the weights came from (`weights:` lines), the peak
    resident memory it reports (its VmHWM; a child's ru_maxrss would also count this Python
    process, which spawns it through vfork), the ids it printed after the prompt."""
    t0 = time.perf_counter()
    p = subprocess.run(
        [cli, "generate", "--greedy", "--ids", "--verbose", "--tokens", str(tokens), "--model",
         folder, "--weights", weights] + list(extra) + [" ".join(map(str, prompt))],
        env=with_environment(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    peak = re.search(r"peak resident memory: ([0-9.]+) MB", p.stderr)
    if p.returncode != 0 or not peak:
        sys.exit(f"[bench] {os.path.basename(cli)} generate {' '.join(extra)} ({weights}) "
                 f"failed:\n{p.stderr}")
    printed = [int(x) for x in p.stdout.split()]
    out = {"peak_rss_mb": float(peak.group(1)), "generated_ids": printed[len(prompt):],
           "wall_seconds": wall}
    summary = re.search(r"load ([0-9.]+) ms \| compile ([0-9.]+) ms .*\| prefill ([0-9.]+) ms \| "
                        r"decode ([0-9.]+) tokens/s \(([0-9]+) tokens\)", p.stderr)
    if summary:
        out.update(load_ms=float(summary.group(1)), compile_ms=float(summary.group(2)),
                   prefill_ms=float(summary.group(3)),
                   decode_tokens_per_s=float(summary.group(4)),
                   decode_tokens=int(summary.group(5)))
    notes = re.findall(r"\[tinymlir\] (weights: .*)", p.stderr)
    out["weights_notes"] = notes
    source = next((n for n in notes if "read from" in n or "converted from" in n), "")
    out["weights_from"] = ("prepared" if "read from" in source else
                           "converted" if "converted from" in source else "?")
    out["prepared_written"] = "written" in source and "not written" not in source
    return out


def generate_rss(cli, folder, prompt, tokens, weights, env, extra):
    """Peak RSS and ids of one `cli generate` (cli_generate)."""
    x = cli_generate(cli, folder, prompt, tokens, weights, env, extra)
    return {"peak_rss_mb": x["peak_rss_mb"], "generated_ids": x["generated_ids"]}


def page_cache_fraction(path):
    """The fraction of the file's pages in the page cache: mincore over a read-only mapping
    of it (mapping reads nothing). None where that fails."""
    import ctypes
    import mmap

    size = os.path.getsize(path)
    if size == 0:
        return 0.0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            return None
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * pages)()
        rc = libc.mincore(ctypes.c_void_p(addr), size, vec)
        libc.munmap(ctypes.c_void_p(addr), size)
        if rc != 0:
            return None
        return float((np.frombuffer(vec, np.uint8) & 1).mean())
    finally:
        os.close(fd)


def evict(path, flush=False):
    """Drops the file's pages from the page cache (posix_fadvise DONTNEED on a plain read-only
    open); returns the fraction still cached. DONTNEED drops clean pages only: a file written
    seconds ago (the prepared file) is flushed first (flush: fdatasync), the checkpoint,
    written long before, is not."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if flush:
            os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return page_cache_fraction(path)


def read_file_seconds(path):
    """Seconds to read the whole file (64 MB reads into one buffer)."""
    buf = bytearray(64 << 20)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return time.perf_counter() - t0


def eviction_probe(path):
    """Does eviction work here? The file evicted, then read twice, timed: a cold read well
    slower than the warm one says the first came from the disk."""
    left = evict(path)
    cold = read_file_seconds(path)
    warm = read_file_seconds(path)
    size = os.path.getsize(path)
    return {"bytes": size, "cached_after_eviction": left, "cold_read_gb_per_s": size / cold / 1e9,
            "warm_read_gb_per_s": size / warm / 1e9, "worked": cold > 1.5 * warm}


def load_times(cli, folder, prompt, tokens, weights, env, runs, work):
    """The `load` figure of `tinymlir generate` (the weights and the model ready), with a
    fresh cache folder of its own (TINYMLIR_CACHE_DIR: programs and prepared weights):
      first_cold    no prepared file, the checkpoint evicted from the page cache;
      first_warm    no prepared file (removed), the checkpoint in the page cache: reading,
                    converting, writing the prepared file;
      prepared_warm the prepared file, in the page cache (`runs` runs; the target figure);
      prepared_cold the prepared file evicted from the page cache.
    Also the fraction of each file cached just before the run, and every run's ids."""
    cache = os.path.join(work, f"load-cache-{weights}")
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(env, TINYMLIR_CACHE_DIR=cache)
    ckpt = os.path.join(folder, "model.safetensors")
    weights_dir = os.path.join(cache, "weights")

    def run(cached_file):
        x = cli_generate(cli, folder, prompt, tokens, weights, env)
        x["file_cached_before"] = cached_file
        return x

    out = {"first_cold": run(evict(ckpt))}
    shutil.rmtree(weights_dir, ignore_errors=True)
    out["first_warm"] = run(page_cache_fraction(ckpt))
    prepared = sorted(os.path.join(weights_dir, n) for n in os.listdir(weights_dir)
                      if n.endswith(".tmweights")) if os.path.isdir(weights_dir) else []
    out["prepared_file_bytes"] = os.path.getsize(prepared[0]) if prepared else 0
    out["prepared_warm"] = [run(page_cache_fraction(prepared[0]) if prepared else None)
                            for _ in range(runs)]
    out["prepared_cold"] = run(evict(prepared[0], flush=True) if prepared else None)
    out["prepared_warm_load_ms_median"] = float(np.median(
        [x["load_ms"] for x in out["prepared_warm"]]))
    every = [out["first_cold"], out["first_warm"], *out["prepared_warm"], out["prepared_cold"]]
    out["same_ids_every_load"] = all(x["generated_ids"] == every[0]["generated_ids"] for x in every)
    out["generated_ids"] = every[0]["generated_ids"]
    out["weights_from_as_expected"] = (
        [x["weights_from"] for x in every] ==
        ["converted", "converted"] + ["prepared"] * (len(every) - 2))
    shutil.rmtree(cache, ignore_errors=True)
    return out


def xl_run(cli, folder, prompt, tokens, weights, env, work, warm_runs=2):
    """GPT-2 XL shapes through `tinymlir generate` with a fresh cache folder: the first load
    (reading and converting the checkpoint, writing the prepared file), then `warm_runs`
    loads of the prepared file from a warm page cache; decode over `tokens` - 1 tokens, peak
    RSS, and whether every run gave the same ids."""
    cache = os.path.join(work, f"xl-cache-{weights}")
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(env, TINYMLIR_CACHE_DIR=cache)
    ckpt = os.path.join(folder, "model.safetensors")
    try:
        cached = page_cache_fraction(ckpt)
        first = cli_generate(cli, folder, prompt, tokens, weights, env)
        first["file_cached_before"] = cached
        warm = [cli_generate(cli, folder, prompt, tokens, weights, env) for _ in range(warm_runs)]
        weights_dir = os.path.join(cache, "weights")
        prepared = [os.path.join(weights_dir, n) for n in os.listdir(weights_dir)
                    if n.endswith(".tmweights")] if os.path.isdir(weights_dir) else []
        return {"first": first, "prepared_warm": warm,
                "prepared_warm_load_ms_median": float(np.median([x["load_ms"] for x in warm])),
                "prepared_file_bytes": os.path.getsize(prepared[0]) if prepared else 0,
                "checkpoint_bytes": os.path.getsize(ckpt),
                "same_ids": all(x["generated_ids"] == first["generated_ids"] for x in warm),
                "weights_from": [first["weights_from"]] + [x["weights_from"] for x in warm]}
    finally:
        shutil.rmtree(cache, ignore_errors=True)


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
                    "buffers, no GPT-2 XL run: checks that every part of the benchmark runs (CI)")
    ap.add_argument("--no-xl", action="store_true",
                    help="skip the GPT-2 XL-shaped run (a 6.2 GB checkpoint generated once into "
                    "the cache; load, decode and peak memory through `tinymlir generate`)")
    ap.add_argument("--xl-weights", default="f16,f32",
                    help="the dtypes of the GPT-2 XL-shaped run (default f16,f32)")
    ap.add_argument("--load-runs", type=int, default=5,
                    help="runs of the warm prepared load, whose median is reported (default 5)")
    args = ap.parse_args()
    config, model_name, name = checkpoint.GPT2_124M, "GPT-2 124M", "gpt2-124m-random"
    if args.smoke:
        config, model_name, name = SMOKE, "smoke model (2 layers, d = 64)", "gpt2-smoke-random"
        args.reps, args.decode_tokens, args.bandwidth_mb = 1, 8, 64
        args.no_xl, args.load_runs = True, 2
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
              for k in ("tinymlir", "numpy", "pytorch", "tinymlir_f16", "tinymlir_bf16",
                        "tinymlir_q8_0")}
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
    # 8-bit weights: the same checkpoint quantized at load (Q8_0 blocks), likewise.
    r["q8_0"] = run_json("tinymlir --weights q8_0", [
        args.driver, *common, "--weights", "q8_0", "--core-only", "--logits-out",
        logits["tinymlir_q8_0"]], dict(blas_env, TINYMLIR_CACHE_DIR=disk_cache))
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
    # The decode ratios once more, from one process: F32, F16, BF16, Q8_0 and kjv-tiny decoded
    # in interleaved rounds, each decode just after a read-bandwidth sample of its own.
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
        # Load time: `tinymlir generate`'s load figure, first (converting) and second
        # (prepared) loads, each with the file it reads cold and warm in the page cache.
        cli = os.path.join(args.build, "bin", "tinymlir")
        ckpt = os.path.join(folder, "model.safetensors")
        print("[bench] load time cold/warm (tinymlir generate)", file=sys.stderr, flush=True)
        r["load"] = {"eviction_probe": eviction_probe(ckpt), "tokens": args.decode_tokens + 1,
                     "runs": args.load_runs}
        for w in ("f32", "f16", "q8_0"):
            r["load"][w] = load_times(cli, folder, prompt16, args.decode_tokens + 1, w, blas_env,
                                      args.load_runs, work)
        if not args.no_xl:
            xl_folder = os.path.join(args.cache, "gpt2-xl-random")
            t0 = time.perf_counter()
            made = checkpoint.ensure_checkpoint(xl_folder, args.seed, checkpoint.GPT2_XL)
            print(f"[bench] checkpoint {xl_folder}: {'generated' if made else 'reused'} "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
            r["xl"] = {"checkpoint": xl_folder, "decode_tokens": 16}
            for w in args.xl_weights.split(","):
                print(f"[bench] GPT-2 XL shapes, {w} (tinymlir generate)", file=sys.stderr,
                      flush=True)
                r["xl"][w] = xl_run(cli, xl_folder, PROMPT16, 17, w, blas_env, work)
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
    q8, q8_bytes = r["q8_0"], Q8_BYTES_PER_WEIGHT
    q.update({
        "decode_q8_0_over_f32": q8["decode_tokens_per_s_median"] / tm["decode_tokens_per_s_median"],
        "decode_q8_0_over_numpy": q8["decode_tokens_per_s_median"] / npy["decode_tokens_per_s_median"],
        "decode_q8_0_fraction_of_ceiling": q8["decode_tokens_per_s_median"] / (
            max(read) / checkpoint.decode_bytes_per_token(config, q8_bytes)),
        "prefill16_q8_0_over_f32": q8["prefill16_ms_median"] / tm["prefill16_ms_median"],
        "prefill128_q8_0_over_f32": q8["prefill128_ms_median"] / tm["prefill128_ms_median"]})
    r["q8_weights"] = dict(
        compare("tinymlir q8_0 vs tinymlir f32", logits["tinymlir_q8_0"], logits["tinymlir"]),
        greedy_ids_equal=leading_equal(q8["generated_ids"], tm["generated_ids"]),
        weights_mb=checkpoint.weight_bytes(config, q8_bytes) / 1e6,
        mb_per_token=checkpoint.decode_bytes_per_token(config, q8_bytes) / 1e6)
    if pt:
        q["decode_tinymlir_over_pytorch"] = tm["decode_tokens_per_s_median"] / pt["decode_tokens_per_s_median"]
        q["prefill16_tinymlir_over_pytorch"] = tm["prefill16_ms_median"] / pt["prefill16_ms_median"]
        q["prefill128_tinymlir_over_pytorch"] = tm["prefill128_ms_median"] / pt["prefill128_ms_median"]
    r["ratios"] = q
    r["side_by_side"]["ratios"] = side_by_side_ratios(
        r["side_by_side"], {"f32": per_token, "f16": checkpoint.decode_bytes_per_token(config, 2),
                            "bf16": checkpoint.decode_bytes_per_token(config, 2),
                            "q8_0": checkpoint.decode_bytes_per_token(config, Q8_BYTES_PER_WEIGHT),
                            "small": r["small"]["bytes_per_token"]},
        {"f32": tm, "f16": r["half"]["f16"], "bf16": r["half"]["bf16"], "q8_0": r["q8_0"],
         "small": r["small"]})
    if "xl" in r:
        for w in args.xl_weights.split(","):
            x = r["xl"][w]
            x["mb_per_token"] = checkpoint.decode_bytes_per_token(
                checkpoint.GPT2_XL, {"f32": 4, "f16": 2, "bf16": 2}.get(w, Q8_BYTES_PER_WEIGHT)) / 1e6
            x["decode_fraction_of_ceiling"] = x["prepared_warm"][-1]["decode_tokens_per_s"] / (
                max(read) / (x["mb_per_token"] * 1e6))
    r["targets"] = targets(r)
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
