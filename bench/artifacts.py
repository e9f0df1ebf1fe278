"""Compiled artifacts, measured on the main job (the embedded kjv-tiny, through the CLI):
cold vs disk-cache compile, `generate --tokens 50` wall time with a warm cache, the bundle
(`tinymlir compile --out`: size, and `tinymlir-run generate --bundle` wall time), and the two
libraries' stripped size and dlopen time. Each figure is the median of `reps` fresh
processes. Called by bench.py; runnable alone:

    /usr/bin/python3 bench/artifacts.py --build build [--reps 5]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PROMPT = "In the beginning"
COMPILE = re.compile(r"compile (\d+) ms \((\d+) programs compiled, (\d+) (?:read from the disk cache|loaded from the bundle)\)")
PY = "/usr/bin/python3"


def run_cli(cmd, env):
    """Runs the CLI; returns (wall seconds, compile ms, programs compiled, programs read)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"[artifacts] {' '.join(cmd)} failed:\n{p.stderr}")
    m = COMPILE.search(p.stderr)
    if not m:
        sys.exit(f"[artifacts] no compile report in:\n{p.stderr}")
    return wall, int(m.group(1)) / 1e3, int(m.group(2)), int(m.group(3))


def dlopen_seconds(path):
    """dlopen time of `path` in a fresh interpreter (its start-up not counted)."""
    code = ("import ctypes, time; t = time.perf_counter(); "
            f"ctypes.CDLL({path!r}); print(time.perf_counter() - t)")
    return float(subprocess.run([PY, "-c", code], stdout=subprocess.PIPE, text=True,
                                check=True).stdout)


def stripped_bytes(path, work):
    out = os.path.join(work, os.path.basename(path) + ".stripped")
    subprocess.run(["strip", "-o", out, path], check=True)
    return os.path.getsize(out)


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def measure(build, reps):
    cli, run_cli_path = os.path.join(build, "bin", "tinymlir"), os.path.join(build, "bin", "tinymlir-run")
    libs = {"libtinymlir.so": os.path.join(build, "capi", "libtinymlir.so"),
            "libtinymlir_runtime.so": os.path.join(build, "capi", "libtinymlir_runtime.so"),
            "libtinymlir_compiler.so": os.path.join(build, "capi", "libtinymlir_compiler.so")}
    generate = ["generate", "--greedy", "--tokens", "50", PROMPT]
    work = tempfile.mkdtemp(prefix="tinymlir-artifacts-")
    try:
        cache = os.path.join(work, "cache")
        env = dict(os.environ, TINYMLIR_CACHE_DIR=cache)
        cold, disk, warm_wall = [], [], []
        for _ in range(reps):
            shutil.rmtree(cache, ignore_errors=True)
            _, seconds, compiled, _ = run_cli([cli, *generate], env)
            cold.append(seconds)
            wall, seconds, compiled_again, read = run_cli([cli, *generate], env)
            disk.append(seconds)
            warm_wall.append(wall)
            if compiled_again != 0:
                sys.exit("[artifacts] the second process compiled despite the disk cache")
        no_cache = dict(os.environ, TINYMLIR_CACHE_DIR="off")
        bundle = os.path.join(work, "bundle")
        t0 = time.perf_counter()
        subprocess.run([cli, "compile", "--out", bundle], env=no_cache, check=True,
                       stderr=subprocess.DEVNULL)
        bundle_seconds = time.perf_counter() - t0
        bundle_wall = [run_cli([run_cli_path, *generate[:-1], "--bundle", bundle, PROMPT],
                               no_cache)[0] for _ in range(reps)]
        r = {"model": "kjv-tiny (embedded)", "reps": reps,
             "cold_compile_seconds_median": statistics.median(cold),
             "cold_compile_seconds_runs": cold, "cold_programs_compiled": compiled,
             "disk_cache_compile_seconds_median": statistics.median(disk),
             "disk_cache_programs_read": read,
             "generate50_warm_cache_wall_seconds_median": statistics.median(warm_wall),
             "bundle_programs": len([f for f in os.listdir(bundle) if f.endswith(".tmp")]),
             "bundle_bytes": dir_bytes(bundle), "bundle_compile_seconds": bundle_seconds,
             "generate50_bundle_runtime_only_wall_seconds_median": statistics.median(bundle_wall),
             "libraries": {}}
        for name, path in libs.items():
            r["libraries"][name] = {"stripped_bytes": stripped_bytes(path, work),
                                    "dlopen_seconds_median": statistics.median(
                                        dlopen_seconds(path) for _ in range(reps))}
        r["disk_cache_speedup"] = r["cold_compile_seconds_median"] / max(
            r["disk_cache_compile_seconds_median"], 1e-9)
        return r
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(r):
    rt, full = r["libraries"]["libtinymlir_runtime.so"], r["libraries"]["libtinymlir.so"]
    compiler = r["libraries"].get("libtinymlir_compiler.so")
    return "\n".join([
        f"compiled artifacts, {r['model']}, median of {r['reps']} processes:",
        f"  cold compile {r['cold_compile_seconds_median']:.2f} s ({r['cold_programs_compiled']} "
        f"programs); from the disk cache {1e3 * r['disk_cache_compile_seconds_median']:.0f} ms "
        f"({r['disk_cache_programs_read']} read): {r['disk_cache_speedup']:.0f}x faster",
        f"  `tinymlir generate --tokens 50`, warm cache: "
        f"{r['generate50_warm_cache_wall_seconds_median']:.2f} s wall",
        f"  bundle: {r['bundle_programs']} programs, {r['bundle_bytes'] / 1e6:.1f} MB, written in "
        f"{r['bundle_compile_seconds']:.1f} s; `tinymlir-run generate --tokens 50 --bundle`: "
        f"{r['generate50_bundle_runtime_only_wall_seconds_median']:.2f} s wall",
        f"  libtinymlir_runtime.so {rt['stripped_bytes'] / 1e3:.0f} KB stripped, dlopen "
        f"{1e3 * rt['dlopen_seconds_median']:.1f} ms; libtinymlir.so "
        f"{full['stripped_bytes'] / 1e6:.1f} MB, dlopen {1e3 * full['dlopen_seconds_median']:.1f} ms"
        + (f"; libtinymlir_compiler.so (loaded by the compiler process on the first compile) "
           f"{compiler['stripped_bytes'] / 1e6:.1f} MB, dlopen with LLVM and MLIR "
           f"{1e3 * compiler['dlopen_seconds_median']:.1f} ms" if compiler else "")])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="the build tree (bin/tinymlir, capi/)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    r = measure(args.build, args.reps)
    print(json.dumps(r, indent=2))
    print(table(r), file=sys.stderr)


if __name__ == "__main__":
    main()
