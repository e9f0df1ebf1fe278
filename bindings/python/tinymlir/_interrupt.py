"""Ctrl-C during the library's long calls.

Python runs signal handlers in the main thread, between bytecodes: while a C call that
released the GIL runs (a compile, up to a minute for GPT-2's programs on a small machine; a
generation of many tokens), a KeyboardInterrupt waited for it to return. From the main
thread, such calls run on a helper thread while the main thread waits, interruptibly: a
signal's exception is raised at once. The call is then asked to stop where it can (`stop`:
a generation stops after its current token) and otherwise finishes in the background, its
result dropped (a program is released; a model stays busy until its call returns).
"""
import threading


def call_interruptibly(call, stop=None):
    """call() (which must own everything it returns: a Program, not a bare pointer); from the
    main thread, on a helper thread, so that a signal's exception is raised without waiting
    for it."""
    if threading.current_thread() is not threading.main_thread():
        return call()
    outcome = []
    done = threading.Event()

    def work():
        try:
            outcome.append((call(), None))
        except BaseException as e:   # re-raised in the caller's thread
            outcome.append((None, e))
        finally:
            done.set()

    try:
        threading.Thread(target=work, name="tinymlir-call", daemon=True).start()
    except RuntimeError:   # no thread to be had (a process limit): wait uninterruptibly
        return call()
    try:
        done.wait()
    except BaseException:
        if stop is not None:
            stop()
        raise
    value, error = outcome.pop()
    if error is not None:
        raise error
    return value
