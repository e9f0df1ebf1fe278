"""examples/python/gpt2.py: GPT-2 as Python formulas under @jit, against the C++ model
(Model.logits) and the Hugging Face goldens.

Logits tolerance: |python - c++| <= 1e-5 * max(|c++|, 1) for every vocabulary entry, i.e.
1e-5 relative, with an absolute floor of 1e-5 where |logit| < 1 (near 0 a relative bound
means nothing: both sides are float32 sums of hundreds of products). Checked at every step of
greedy generation, on the exact prefix the step sees.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpt2
import tinymlir as tm
from conftest import KJV_TINY, TINY_A, check_greedy, golden_cases

REL = 1e-5
ABS_FLOOR = 1e-5


def assert_logits_close(got, want, where):
    assert got.shape == want.shape and got.dtype == np.float32
    bound = np.maximum(REL * np.abs(want), ABS_FLOOR)
    err = np.abs(got - want)
    worst = int(np.argmax(err / bound))
    assert np.all(err <= bound), (
        f"{where}: logit {worst} differs by {err[worst]:.3g} (python {got[worst]!r}, "
        f"C++ {want[worst]!r}; bound {bound[worst]:.3g})")


@pytest.fixture(scope="module", params=[TINY_A, KJV_TINY], ids=["tiny-a", "kjv-tiny"])
def models(request):
    config, params = gpt2.load(request.param)
    reference = tm.Model.load(request.param)
    yield request.param, gpt2.GPT2(config, params), reference
    reference.close()


def test_blocks_share_one_compiled_program(models):
    model_dir, _, _ = models
    config, params = gpt2.load(model_dir)
    model = gpt2.GPT2(config, params, context=tm.Context())
    model.logits([1, 2, 3, 4, 5])
    info = model.block.cache_info()
    assert config.n_layer > 1
    assert (info.misses, info.hits, info.entries) == (1, config.n_layer - 1, 1)
    # A new length is a new specialisation, shared again by every block.
    model.logits([1, 2, 3, 4, 5, 6])
    info = model.block.cache_info()
    assert (info.misses, info.hits, info.entries) == (2, 2 * config.n_layer - 2, 2)
    # The head always sees one position: one program for every length.
    assert model.head.cache_info().misses == 1


def test_greedy_and_logits_match_the_cpp_model_and_goldens(models, report):
    model_dir, model, reference = models
    for case in golden_cases(model_dir):
        steps = []

        def on_step(prefix, logits):
            want = reference.logits(prefix)
            assert_logits_close(logits, want, f"prompt {case['prompt']!r}, step {len(steps)}")
            steps.append(prefix)

        got = model.greedy(case["prompt_ids"], len(case["greedy_ids"]), on_step=on_step)
        assert len(steps) == len(case["greedy_ids"])
        check_greedy(got, case, report)
        first = model.logits(case["prompt_ids"])
        np.testing.assert_allclose(first[:16], case["prompt_logits_last_first16"], atol=1e-4)


def test_changing_the_target_changes_no_formula(models):
    model_dir, cpu_model, _ = models
    config, params = gpt2.load(model_dir)
    gpu_model = gpt2.GPT2(config, params, target="gpu")
    for name, formula in (("embed", gpt2.embed), ("block", gpt2.block), ("head", gpt2.head)):
        cpu, gpu = getattr(cpu_model, name), getattr(gpu_model, name)
        assert cpu.__wrapped__ is gpu.__wrapped__ is formula
        assert (cpu.target, gpu.target) == (tm.Target.CPU, tm.Target.GPU)
    with pytest.raises(tm.UnsupportedError):     # what this build of the library says today
        gpu_model.logits([1, 2, 3])


def test_the_gpu_target_runs_the_same_formulas_emulated():
    """--target gpu with TINYMLIR_GPU_EMULATE=1: the GPU lowering's kernels run on the CPU,
    checked for races (a fresh process: the variable is read once per process)."""
    case = golden_cases(TINY_A)[0]
    env = dict(os.environ, TINYMLIR_GPU_EMULATE="1")
    run = subprocess.run(
        [sys.executable, gpt2.__file__, "--target", "gpu", "--model", TINY_A, "--ids",
         "--tokens", "5", " ".join(map(str, case["prompt_ids"]))],
        env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(t) for t in case["greedy_ids"][:5]]


def test_command_line(capsys):
    case = golden_cases(TINY_A)[0]
    gpt2.main(["--model", TINY_A, "--ids", "--tokens", "5",
               " ".join(map(str, case["prompt_ids"]))])
    assert capsys.readouterr().out.split() == [str(t) for t in case["greedy_ids"][:5]]
    kjv = golden_cases(KJV_TINY)[0]
    gpt2.main(["--model", KJV_TINY, "--tokens", "8", kjv["prompt"]])
    out = capsys.readouterr().out
    assert out.startswith(kjv["prompt"] + " of the first year of Darius")


def test_safetensors_reader_dtypes(tmp_path):
    import json
    import struct
    values = np.array([[1.5, -2.0], [0.25, 3.0]], np.float32)
    blobs = {"F32": values.tobytes(), "F16": values.astype(np.float16).tobytes(),
             "BF16": (values.view(np.uint32) >> 16).astype(np.uint16).tobytes()}
    header, data = {}, b""
    for name, blob in blobs.items():
        header[name] = {"dtype": name, "shape": [2, 2],
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    for name, array in gpt2.read_safetensors(str(path)).items():
        assert array.dtype == np.float32
        np.testing.assert_array_equal(array, values, err_msg=name)
