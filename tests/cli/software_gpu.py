"""`tinymlir generate --target gpu` on the software CUDA device (TINYMLIR_CUDA_DRIVER=software),
against the same command on the CPU target.

- kjv-tiny, 32 tokens, greedy (with f32, f16 and bf16 weights) and sampled with a seed: the
  same output as the CPU's.
- GPT-2 124M shapes (random weights, made once into the cache folder), 8 greedy tokens: the
  CPU's; on a 64 MiB device: exit status 1 within 60 seconds, naming the bytes asked,
  CUDA_ERROR_OUT_OF_MEMORY and the bytes free; within TINYMLIR_GPU_MEMORY_BUDGET, the budget's
  message.
- `--verbose`: one line of what a decode token asked of the device, from the engine's
  counters (none on the CPU).
- A driver library that is not there, and a software memory size that is not a size: exit
  status 1, naming them.
Nothing is printed on stdout by a failed run.

Usage: software_gpu.py path/to/tinymlir models/kjv-tiny CACHE_FOLDER
"""
import os
import re
import subprocess
import sys
import time

CLI, MODEL, CACHE = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import checkpoint  # noqa: E402

SOFTWARE = {"TINYMLIR_CUDA_DRIVER": "software"}
failures = []


def run(args, env=None, model=MODEL, timeout=900):
    full_env = dict(os.environ)
    for name in ("TINYMLIR_CUDA_DRIVER", "TINYMLIR_SOFTWARE_GPU_MEMORY", "TINYMLIR_GPU_EMULATE"):
        full_env.pop(name, None)
    full_env.update(env or {})
    return subprocess.run([CLI, "generate", "--model", model, *args], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def same_as_the_cpu(options, what, model=MODEL,
                    prompt="In the beginning God created the heaven and the earth."):
    options = ["-n", "32", *options]  # a later -n wins
    cpu = run([*options, prompt], model=model)
    gpu = run(["--target", "gpu", *options, prompt], env=SOFTWARE, model=model)
    for result, where in ((cpu, "cpu"), (gpu, "software gpu")):
        if result.returncode != 0:
            failures.append(f"{what} on the {where}: exit {result.returncode}: {result.stderr}")
            return
    if not cpu.stdout.strip():
        failures.append(f"{what}: the CPU printed nothing")
    if gpu.stdout != cpu.stdout:
        failures.append(f"{what}: the software GPU gave {gpu.stdout!r}, the CPU {cpu.stdout!r}")


def expect_failure(result, patterns, what):
    if result.returncode != 1:
        failures.append(f"{what}: exit {result.returncode}, not 1: {result.stderr}")
    if result.stdout:
        failures.append(f"{what}: printed {result.stdout!r} on stdout")
    for pattern in patterns:
        if not re.search(pattern, result.stderr):
            failures.append(f"{what}: {pattern!r} not in {result.stderr!r}")


same_as_the_cpu(["--greedy"], "greedy")
same_as_the_cpu(["--greedy", "--weights", "f16"], "greedy with f16 weights")
same_as_the_cpu(["--greedy", "--weights", "bf16"], "greedy with bf16 weights")
same_as_the_cpu(["--seed", "7", "--temperature", "0.9", "--top-k", "20"], "sampled")

# --verbose: what a decode token asks of the device, from the engine's counters. kjv-tiny's
# greedy token is chosen on the device and waited for once; the CPU asks nothing and prints no
# such line.
LINE = re.compile(r"\[tinymlir\] device per decode token: (\S+) graph launch(?:es)?, (\S+) "
                  r"kernels?, (\S+) host syncs?, (\S+) allocations?, (\S+) B to device, "
                  r"(\S+) B from device\n")
verbose = run(["--target", "gpu", "--verbose", "--greedy", "-n", "8", "And"], env=SOFTWARE)
found = LINE.findall(verbose.stderr)
if verbose.returncode != 0 or len(found) != 1:
    failures.append(f"--verbose on the software GPU: exit {verbose.returncode}, lines {found}: "
                    f"{verbose.stderr}")
else:
    graphs, kernels, syncs, allocations, to_device, from_device = map(float, found[0])
    if not (kernels >= 10 and allocations >= 0 and to_device >= 4):
        failures.append(f"--verbose on the software GPU: implausible figures {found[0]}")
    # The calls queue on one stream; the host waits once a token, for the token it reads.
    if syncs != 1:
        failures.append(f"--verbose: {syncs} host syncs per decode token, not 1")
    # Greedy: the token is chosen on the device; its id and the count of non-finite logits
    # come back, not the logits.
    if from_device != 8:
        failures.append(f"--verbose: {from_device} B from device per token, not 8")
cpu_verbose = run(["--verbose", "--greedy", "-n", "4", "And"])
if "device per decode token" in cpu_verbose.stderr or cpu_verbose.returncode != 0:
    failures.append(f"--verbose on the CPU: {cpu_verbose.stderr}")

folder = os.path.join(CACHE, "gpt2-124m-random")
checkpoint.ensure_checkpoint(folder)
# The 124M run takes minutes in a sanitizer build (the device's code is unoptimised there);
# the normal build runs it.
if not os.environ.get("TM_SANITIZER_BUILD"):
    same_as_the_cpu(["--greedy", "--ids", "-n", "8"], "GPT-2 124M shapes, greedy", model=folder,
                    prompt="464 3290 318 257")
start = time.monotonic()
result = run(["--target", "gpu", "--ids", "-n", "4", "1 2 3"], model=folder,
             env={**SOFTWARE, "TINYMLIR_SOFTWARE_GPU_MEMORY": "64M"})
seconds = time.monotonic() - start
expect_failure(result, [r"\d{6,} bytes of GPU memory were asked for", "CUDA_ERROR_OUT_OF_MEMORY",
                        r"\d+ of the device's 67108864 bytes are free"],
               "124M on a 64 MiB software GPU")
if seconds > 60:
    failures.append(f"124M on a 64 MiB software GPU took {seconds:.1f} s to fail")

# The same model within a budget of 100 MiB of the device's 4 GiB: refused by the engine, the
# message naming the bytes asked for and what the budget has left; a budget that is not a
# size is named.
expect_failure(run(["--target", "gpu", "--ids", "-n", "4", "1 2 3"], model=folder,
                   env={**SOFTWARE, "TINYMLIR_GPU_MEMORY_BUDGET": "100M"}),
               [r"\d{6,} bytes of GPU memory were asked for",
                r"only \d+ of the 104857600 bytes of TINYMLIR_GPU_MEMORY_BUDGET are free"],
               "124M within a 100 MiB budget")
expect_failure(run(["--target", "gpu", "--ids", "-n", "4", "1 2 3"],
                   env={**SOFTWARE, "TINYMLIR_GPU_MEMORY_BUDGET": "lots"}),
               ["TINYMLIR_GPU_MEMORY_BUDGET is 'lots'"], "a budget that is not a size")

expect_failure(run(["--target", "gpu", "--greedy", "-n", "2", "And"],
                   env={"TINYMLIR_CUDA_DRIVER": "/no/such/libcuda.so.1"}),
               ["no CUDA driver: /no/such/libcuda.so.1", "TINYMLIR_CUDA_DRIVER names it"],
               "a driver library that is not there")
expect_failure(run(["--target", "gpu", "--greedy", "-n", "2", "And"],
                   env={**SOFTWARE, "TINYMLIR_SOFTWARE_GPU_MEMORY": "lots"}),
               ["TINYMLIR_SOFTWARE_GPU_MEMORY is 'lots'"], "a memory size that is not a size")

for failure in failures:
    print("FAIL:", failure)
print("software GPU CLI:", "failed" if failures else "passed")
sys.exit(1 if failures else 0)
