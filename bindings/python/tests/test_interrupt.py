"""Ctrl-C (or any signal whose handler raises) during the library's long calls from the main
thread: the exception is raised without waiting for the call. A compile finishes in the
background; a generation stops after its current token, and the model is free again."""
import os
import signal
import threading
import time

import numpy as np
import pytest

import tinymlir as tm
from conftest import KJV_TINY


class Interrupted(Exception):
    pass


def helper_threads():
    return [t for t in threading.enumerate() if t.name == "tinymlir-call" and t.is_alive()]


@pytest.fixture
def raising_alarm():
    """SIGALRM raises Interrupted while a library call runs on its helper thread. One that
    comes before (while @jit still traces the function, on this thread) is put off by 10 ms:
    the test is about the call, not about how long tracing takes on a loaded machine."""
    def raise_interrupted(*_):
        if not helper_threads():
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            return
        raise Interrupted()
    previous = signal.signal(signal.SIGALRM, raise_interrupted)
    yield
    # A handler that neither raises nor re-arms first: a signal already on its way would
    # otherwise re-arm the timer for after the default action (the process's end) is back.
    signal.signal(signal.SIGALRM, lambda *_: None)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_a_signal_interrupts_a_compile_without_waiting_for_it(raising_alarm):
    context = tm.Context()
    context.set_cache_dir(None)   # compiled here, not read from disk

    @tm.jit(context=context)
    def long_compile(x):   # ~1 s to compile on this project's 2-core machines
        for i in range(120):
            x = tm.ops.tanh(x @ x * (1.0 + i * 0.013)) + x.sum(axis=0) * 0.013
        return x

    x = np.ones((4, 4), np.float32)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    with pytest.raises(Interrupted):
        long_compile(x)
    busy = helper_threads()
    assert busy, "the exception waited for the compile to end"
    for thread in busy:
        thread.join()
    # The abandoned compile's program went to the context's cache; nothing else was kept.
    assert long_compile.cache_info().entries == 0
    assert long_compile.lower(x).program.cache_hit


def test_a_signal_stops_a_generation_after_its_token(raising_alarm):
    model = tm.Model.load(KJV_TINY)
    prompt = [818, 262, 3726]
    full = model.generate(prompt, max_new_tokens=250)   # compiles every program it needs
    assert model.stats["decode_tokens"] == 249   # the first token is the prefill's

    # The signal is sent from the generation's own callback at its 50th token, which then
    # waits until this thread has caught it: where it lands depends neither on how fast this
    # machine generates nor on when this thread is scheduled.
    main = threading.main_thread().ident
    caught = threading.Event()
    tokens = []

    def signal_at_the_50th_token(token):
        tokens.append(token)
        if len(tokens) == 50:
            signal.pthread_kill(main, signal.SIGALRM)
            caught.wait(60)
    with pytest.raises(Interrupted):
        model.generate(prompt, max_new_tokens=250, callback=signal_at_the_50th_token)
    caught.set()
    deadline = time.monotonic() + 60
    while helper_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not helper_threads()
    assert len(tokens) == 50, "the generation did not stop after the token it was interrupted at"
    assert model.stats["decode_tokens"] == 49   # the first of the 50 is the prefill's
    np.testing.assert_array_equal(tokens, full[:50])
    np.testing.assert_array_equal(model.generate(prompt, max_new_tokens=5), full[:5])


def test_calls_from_other_threads_run_on_their_thread():
    model = tm.Model.load(KJV_TINY)
    threads = []

    def generate():
        model.generate([818], max_new_tokens=2,
                       callback=lambda token: threads.append(threading.current_thread().name))
    caller = threading.Thread(target=generate, name="caller")
    caller.start()
    caller.join()
    assert threads == ["caller", "caller"]
