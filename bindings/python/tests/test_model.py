"""tinymlir.Model against the Hugging Face goldens."""
import ctypes
import json
import os
import threading

import numpy as np
import pytest

import raw_capi as raw
import tinymlir as tm
from conftest import KJV_TINY, MARGIN, SOURCE_DIR, TINY_A, check_greedy, golden_cases


@pytest.fixture(scope="module")
def kjv():
    model = tm.Model.load(KJV_TINY)
    yield model
    model.close()


def test_info_and_repr(kjv):
    assert kjv.info == tm.ModelInfo(vocab_size=50257, n_ctx=256, n_layer=4, n_embd=128)
    assert "vocab_size=50257" in repr(kjv)


@pytest.mark.parametrize("case", golden_cases(KJV_TINY), ids=lambda c: c["prompt"][:20])
def test_generate_matches_golden_greedy(kjv, case, report):
    assert kjv.tokenize(case["prompt"]) == case["prompt_ids"]
    # Free-running: exact up to the first tiny margin (check_greedy); every token after it is
    # checked by test_every_golden_token_under_teacher_forcing.
    n = len(case["greedy_ids"])
    got = kjv.generate(case["prompt"], max_new_tokens=n)          # str prompt, KV cache
    check_greedy(got, case, report)
    recomputed = kjv.generate(case["prompt_ids"], max_new_tokens=n, use_kv_cache=False)
    check_greedy(recomputed, case, report)
    streamed = list(kjv.generate(case["prompt"], max_new_tokens=n, stream="tokens"))
    assert [piece.id for piece in streamed] == got
    text = "".join(kjv.generate(case["prompt"], max_new_tokens=n, stream=True))
    assert text == kjv.detokenize(got)
    if "text" in case and got == case["greedy_ids"]:
        assert kjv.detokenize(got) == case["text"]


# Tolerances of tests/model/gpt2_golden_test.cpp (tests/data/README.md): a logit within 1e-4
# relative (absolute floor 1e-4) of Hugging Face's; two logits' error for an ordering or a
# lead; margins are rounded to 5 decimals in the golden.
def _logit_tolerance(x):
    return 1e-4 * max(1.0, abs(float(x)))


def test_every_golden_token_under_teacher_forcing(kjv, report):
    """Each step on the prompt + the golden's own tokens before it: the argmax is the golden
    token where its margin is >= MARGIN; below, the golden token is in our top 2 and at most
    two logits' error behind our top 1; everywhere, its lead over every other token is the
    golden margin within two logits' error; and first_steps_top5's logits within one."""
    checked = total = 0
    for case in golden_cases(KJV_TINY):
        ids, greedy, margins = list(case["prompt_ids"]), case["greedy_ids"], case["margins"]
        assert len(margins) == len(greedy)
        total += len(greedy)
        for i, want in enumerate(greedy):
            logits = kjv.logits(ids).astype(np.float64)
            first, second = np.argsort(-logits, kind="stable")[:2]
            where = f"prompt {case['prompt']!r} step {i} (golden margin {margins[i]:.5f})"
            if margins[i] >= MARGIN:
                assert first == want, where
            else:
                behind = logits[first] - logits[want]
                assert want in (first, second), where
                assert behind <= 2 * _logit_tolerance(logits[first]), (where, behind)
                if first != want:
                    report(f"{where}: argmax {first}, golden {want}, {behind:.3g} behind")
            lead = logits[want] - np.max(np.delete(logits, want))
            assert abs(lead - margins[i]) <= 2 * _logit_tolerance(logits[first]) + 5e-6, (
                where, lead)
            if i < len(case["first_steps_top5"]):
                step = case["first_steps_top5"][i]
                for rank, (t, value) in enumerate(zip(step["ids"], step["logits"])):
                    assert abs(logits[t] - value) <= _logit_tolerance(value), (where, rank)
            checked += 1
            ids.append(want)
    assert checked == total == 4 * 32


def test_prompt_logits_match_golden(kjv):
    for case in golden_cases(KJV_TINY):
        logits = kjv.logits(case["prompt_ids"])
        assert logits.dtype == np.float32 and logits.shape == (50257,)
        np.testing.assert_allclose(logits[:16], case["prompt_logits_last_first16"], atol=1e-4)


def test_tokenizer_round_trip(kjv):
    path = os.path.join(SOURCE_DIR, "tests", "data", "gpt2-tokenizer-golden.json")
    with open(path) as f:
        cases = json.load(f)["cases"]
    for case in cases:
        assert kjv.tokenize(case["text"]) == case["ids"], case["text"][:40]
        assert kjv.detokenize(case["ids"]) == case["text"]
        assert kjv.tokenize(case["text"].encode()) == case["ids"]
    # A piece may end inside a UTF-8 character: the bytes are exact, the str is replaced.
    ids = kjv.tokenize("🙂")
    assert b"".join(kjv.detokenize_bytes([i]) for i in ids) == "🙂".encode()


def test_stream_yields_tokens_as_they_come(kjv):
    seen = []
    stream = kjv.generate("In the beginning", max_new_tokens=12, stream=True,
                          callback=seen.append)
    first = next(stream)
    assert first == " of"
    stream.close()                       # stops the generation early
    assert 1 <= len(seen) < 12


def test_callback_true_stops_after_that_token(kjv):
    # One meaning in every binding: a true result stops the generation after the token
    # (which is kept); False or None goes on.
    got = kjv.generate("In the beginning", max_new_tokens=10, callback=lambda t: t == 262)
    assert got == [286, 262]
    assert kjv.generate("In the beginning", max_new_tokens=10, callback=lambda t: True) == [286]
    seen = []
    got = kjv.generate("In the beginning", max_new_tokens=5, callback=seen.append)  # None
    assert len(got) == 5 and got == seen
    assert len(kjv.generate("In the beginning", max_new_tokens=5,
                            callback=lambda t: False)) == 5
    streamed = list(kjv.generate("In the beginning", max_new_tokens=10, stream="tokens",
                                 callback=lambda t: t == 262))
    assert streamed == [(286, " of"), (262, " the")]


def test_callback_exception_stops_and_is_reraised(kjv):
    calls = []

    def callback(token):
        calls.append(token)
        if len(calls) == 3:
            raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        kjv.generate("In the beginning", max_new_tokens=20, callback=callback)
    assert len(calls) == 3
    with pytest.raises(KeyError, match="stop here"):
        calls.clear()
        list(kjv.generate("In the beginning", max_new_tokens=20, stream=True,
                          callback=callback))
    assert len(calls) == 3
    assert kjv.generate("In the beginning", max_new_tokens=2) == [286, 262]   # still usable


def test_sampling_options_are_passed_through(kjv):
    a = kjv.generate("Blessed are", max_new_tokens=8, temperature=0.8, top_k=40, seed=7)
    b = kjv.generate("Blessed are", max_new_tokens=8, temperature=0.8, top_k=40, seed=7)
    assert a == b and len(a) == 8
    # top_p reaches the sampler: at a high temperature the full distribution wanders, while
    # a nucleus this small holds only the most likely token, which is greedy decoding.
    greedy = kjv.generate("Blessed are", max_new_tokens=12)
    hot = kjv.generate("Blessed are", max_new_tokens=12, temperature=2.0, seed=8)
    nucleus = kjv.generate("Blessed are", max_new_tokens=12, temperature=2.0, top_p=1e-6, seed=8)
    assert nucleus == greedy and hot != greedy
    with pytest.raises(tm.InvalidArgumentError, match="top_p"):
        kjv.generate("Blessed are", top_p=0.0)


def test_stop_at_eos_stops_after_the_first_eos():
    # tiny-a's eos_token_id is 511 of 512 tokens: find a seed whose sampled continuation
    # holds it, then the same generation with stop_at_eos ends right after it.
    model = tm.Model.load(TINY_A)
    try:
        for seed in range(200):
            free = model.generate([1, 2, 3], max_new_tokens=60, temperature=1.0, seed=seed)
            if 511 in free[:-1]:
                break
        else:
            pytest.fail("no seed in 0..199 sampled the end-of-text token")
        stopped = model.generate([1, 2, 3], max_new_tokens=60, temperature=1.0, seed=seed,
                                 stop_at_eos=True)
        assert stopped == free[:free.index(511) + 1]
    finally:
        model.close()


def test_model_errors(kjv, tmp_path):
    with pytest.raises(tm.LoadError) as e:
        tm.Model.load(tmp_path / "missing")
    assert isinstance(e.value, OSError) and e.value.status == tm.Status.IO
    with pytest.raises(tm.OutOfRangeError, match="outside the vocabulary"):
        kjv.logits([1, 50257])
    with pytest.raises(tm.OutOfRangeError, match="context"):
        kjv.generate([1] * 250, max_new_tokens=10)
    with pytest.raises(tm.InvalidArgumentError, match="empty"):
        kjv.generate([])
    # The GPU target loads everywhere; it runs where there is a CUDA driver and a GPU, and
    # says so clearly where there is none (CI).
    gpu = tm.Model.load(TINY_A, target="gpu")
    try:
        assert gpu.generate([1, 2, 3], max_new_tokens=4) == tm.Model.load(TINY_A).generate(
            [1, 2, 3], max_new_tokens=4)
    except tm.UnsupportedError as e:
        assert "CUDA" in str(e)
    gpu.close()
    tiny = tm.Model.load(TINY_A)
    with pytest.raises(tm.UnsupportedError, match="tokenizer"):
        tiny.tokenize("hello")
    assert len(tiny.generate([1, 2, 3], max_new_tokens=4)) == 4
    tiny.close()
    with pytest.raises(tm.InvalidArgumentError, match="closed"):
        tiny.logits([1])


def test_busy_model_from_inside_the_callback(kjv):
    # Re-entering the model from its own generate() callback: the library answers BUSY at
    # once (no deadlock, nothing changed); the tokenizer is always available.
    outcomes = []

    def callback(token):
        for name, call in (("logits", lambda: kjv.logits([1, 2])),
                           ("generate", lambda: kjv.generate([1], max_new_tokens=1)),
                           ("stats", lambda: kjv.stats)):
            try:
                call()
                outcomes.append((name, None))
            except tm.BusyError as e:
                outcomes.append((name, e))
        outcomes.append(("detokenize", kjv.detokenize([token])))
        return True

    assert kjv.generate("In the beginning", max_new_tokens=5, callback=callback) == [286]
    assert [name for name, _ in outcomes] == ["logits", "generate", "stats", "detokenize"]
    for name, error in outcomes[:3]:
        assert isinstance(error, tm.BusyError), name
        assert error.status == tm.Status.BUSY and isinstance(error, RuntimeError)
    assert outcomes[3][1] == " of"
    assert kjv.logits([1, 2]).shape == (50257,)          # free again afterwards


def test_open_stream_keeps_the_model_busy(kjv):
    stream = kjv.generate("In the beginning", max_new_tokens=5, stream="tokens")
    assert next(stream).id == 286
    # The BusyError says why: a stream of this model is open.
    with pytest.raises(tm.BusyError, match=r"open stream \(generate\(\.\.\., stream=True\)\)"):
        kjv.logits([1])
    with pytest.raises(tm.BusyError, match="close it"):
        kjv.generate([1], max_new_tokens=1)
    with pytest.raises(tm.BusyError, match="open stream"):
        kjv.stats
    assert kjv.detokenize([286]) == " of"            # the tokenizer is always available
    assert len(list(stream)) == 4
    kjv.logits([1])
    stream = kjv.generate("In the beginning", max_new_tokens=5, stream=True)
    next(stream)
    stream.close()                                   # stops the generation
    kjv.logits([1])


def test_closing_a_model_inside_its_callback_waits_for_the_call():
    model = tm.Model.load(TINY_A)
    got = model.generate([1, 2, 3], max_new_tokens=4, callback=lambda t: model.close())
    assert len(got) == 4 and model.closed
    with pytest.raises(tm.InvalidArgumentError, match="closed"):
        model.logits([1])


def test_size_queries(kjv):
    # The C contract (snprintf-style), through the raw ABI: capacity 0 asks for the size;
    # a small buffer gets what fits and the size needed; neither is an error.
    model = raw.addr(kjv.ptr)
    text = "And God said, Let there be light: and there was light.".encode()
    want = kjv.tokenize(text)
    n = raw.SIZE(12345)
    assert raw.lib.tm_tokenize(model, text, len(text), None, 0, ctypes.byref(n)) == 0
    assert n.value == len(want)
    small = raw.int32s([-1] * 4)
    assert raw.lib.tm_tokenize(model, text, len(text), small, 3, ctypes.byref(n)) == 0
    assert n.value == len(want) and list(small) == want[:3] + [-1]

    ids = raw.int32s(want)
    text_back = kjv.detokenize_bytes(want)
    assert text_back == text
    assert raw.lib.tm_detokenize(model, ids, len(want), None, 0, ctypes.byref(n)) == 0
    assert n.value == len(text)
    buf = ctypes.create_string_buffer(b"#" * 8, 8)
    assert raw.lib.tm_detokenize(model, ids, len(want), buf, 5, ctypes.byref(n)) == 0
    assert n.value == len(text) and buf.raw == text[:5] + b"###"

    # The binding asks for the size first: long pieces and long texts come back whole.
    dashes = "-" * 256
    assert kjv.detokenize(kjv.tokenize(dashes)) == dashes
    long = "And God said, Let there be light: and there was light. " * 40
    assert kjv.detokenize(kjv.tokenize(long)) == long
    assert kjv.tokenize("") == [] and kjv.detokenize([]) == ""


def test_generate_releases_the_gil(kjv):
    # A Python thread keeps running while the model generates in another.
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        kjv.generate("In the beginning", max_new_tokens=64, use_kv_cache=False)
    finally:   # a failed generate must not leave the thread running (the process would wait)
        done.set()
        t.join()
    assert len(ticks) > 20   # 64 full forward passes take far longer than 20 ms


def test_stats(kjv):
    kjv.generate("In the beginning", max_new_tokens=4)
    stats = kjv.stats
    assert stats["decode_tokens"] == 3 and stats["load_seconds"] > 0


def test_weights_dtype_option(kjv):
    """kjv-tiny is stored in F16 and held so by default: a one-token step's logits are bit for
    bit those of the model held in F32, a longer prompt's agree to f32 rounding (other
    product kernels). An F32 checkpoint held in F16 or BF16 stays close to F32."""
    wide = tm.Model.load(KJV_TINY, weights="f32")
    np.testing.assert_array_equal(kjv.logits([464]), wide.logits([464]))
    prompt = [464, 262, 3726, 1793]
    want = wide.logits(prompt)
    assert np.abs(kjv.logits(prompt) - want).max() <= 1e-5 * np.abs(want).max()
    wide.close()
    f32 = tm.Model.load(TINY_A)
    want = f32.logits([1, 2, 3])
    # q8_0: 8-bit blocks, ~1% of the largest logit on this random model (measured 0.6%).
    for weights, tolerance in (("f16", 2e-3), ("bf16", 1.2e-2), ("q8_0", 3e-2)):
        half = tm.Model.load(TINY_A, weights=weights)
        got = half.logits([1, 2, 3])
        assert 0 < np.abs(got - want).max() <= tolerance * np.abs(want).max(), weights
        half.close()
    f32.close()
    with pytest.raises(ValueError, match="weights must be None, 'f32', 'f16', 'bf16' or 'q8_0'"):
        tm.Model.load(TINY_A, weights="f8")


def test_load_checks_the_directory(tmp_path):
    # A C string ends at its first NUL: "dir\0junk" would load "dir".
    with pytest.raises(ValueError, match="directory: embedded null byte"):
        tm.Model.load(KJV_TINY + "\0junk")
    with pytest.raises(TypeError, match="directory must be a str, bytes or .*, not NoneType"):
        tm.Model.load(None)
    with pytest.raises(ValueError, match="directory .* is not valid UTF-8"):
        tm.Model.load(os.fsencode(str(tmp_path)) + b"/model-\xff")
    model = tm.Model.load(os.fsencode(TINY_A))    # bytes, as open() takes them
    assert model.info.vocab_size > 0
    model.close()
    with pytest.raises(tm.LoadError) as e:
        tm.Model.load(os.fsencode(str(tmp_path)))
    assert "b'" not in str(e.value) and str(tmp_path) in str(e.value)


def test_bytes_like_prompts_are_text(kjv):
    text = "In the beginning"
    want = kjv.generate(text, max_new_tokens=3)
    for prompt in (text.encode(), bytearray(text.encode()), memoryview(text.encode())):
        assert kjv.tokenize(prompt) == kjv.tokenize(text)
        assert kjv.generate(prompt, max_new_tokens=3) == want
    ids = kjv.tokenize(text)                      # sequences and arrays of ints are ids
    assert kjv.generate(np.array(ids, np.int32), max_new_tokens=3) == want
    assert kjv.generate(tuple(ids), max_new_tokens=3) == want
    with pytest.raises(TypeError, match="text must be a str or a bytes-like object"):
        kjv.tokenize(memoryview(np.array(ids, np.int32)))


def test_generate_options_are_checked(kjv):
    for name, value in [("max_new_tokens", 1.9), ("max_new_tokens", "3"), ("seed", 1.5),
                        ("top_k", 2.7), ("top_k", True), ("temperature", "hot"),
                        ("top_p", "0.5"), ("use_kv_cache", "no"),
                        ("stop_at_eos", 0.5)]:
        with pytest.raises(TypeError, match=f"{name} must be"):
            kjv.generate([1, 2], **{name: value})
    for value in (-1, 2):
        with pytest.raises(ValueError, match="use_kv_cache must be a bool"):
            kjv.generate([1, 2], max_new_tokens=2, use_kv_cache=value)
    with pytest.raises(OverflowError, match="seed=-1 is outside"):
        kjv.generate([1, 2], max_new_tokens=2, seed=-1)
    # NumPy numbers are numbers; 0 and 1 are flags.
    want = kjv.generate([1, 2], max_new_tokens=2, use_kv_cache=False)
    assert kjv.generate([1, 2], max_new_tokens=np.int64(2), use_kv_cache=0,
                        temperature=np.float32(0)) == want


def test_a_batch_gives_each_prompt_its_tokens_alone(kjv):
    prompts = ["And", "In the beginning God created", "Thou shalt",
               kjv.tokenize("The LORD is my shepherd; I shall not want.")]
    seen = [[] for _ in prompts]

    def record(sequence, token):
        seen[sequence].append(token)
    outs = kjv.generate(prompts, max_new_tokens=8, temperature=0.8, top_k=40,
                        seed=[3, 4, 5, 6], callback=record)
    assert len(outs) == len(prompts)
    for i, prompt in enumerate(prompts):
        alone = kjv.generate(prompt, max_new_tokens=8, temperature=0.8, top_k=40, seed=3 + i)
        assert outs[i] == alone == seen[i], i
    greedy = kjv.generate(prompts, max_new_tokens=5)
    assert greedy == [kjv.generate(p, max_new_tokens=5) for p in prompts]
    # A list of ints stays one prompt's ids.
    assert kjv.generate([818, 262, 3726], max_new_tokens=3) == kjv.generate(
        np.array([818, 262, 3726]), max_new_tokens=3)


def test_batch_errors_name_the_prompt(kjv):
    with pytest.raises(tm.InvalidArgumentError, match="sequence 1: the prompt is empty"):
        kjv.generate(["And", []], max_new_tokens=2)
    with pytest.raises(tm.InvalidArgumentError, match="at most 16"):
        kjv.generate(["And"] * 17, max_new_tokens=2)
    with pytest.raises(ValueError, match="2 seeds for 3 prompts"):
        kjv.generate(["a", "b", "c"], max_new_tokens=2, seed=[1, 2])
    with pytest.raises(ValueError, match="not streamed"):
        kjv.generate(["a", "b"], stream=True)
    with pytest.raises(tm.OutOfRangeError, match="sequence 0: token id 99999"):
        kjv.generate([[1, 99999]], max_new_tokens=2)
