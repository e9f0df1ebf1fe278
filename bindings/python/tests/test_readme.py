"""The README's Python examples run as written (from the repository root)."""
import os
import re

import numpy as np

from conftest import SOURCE_DIR

README = os.path.join(SOURCE_DIR, "bindings", "python", "README.md")


def test_readme_examples(capsys, monkeypatch):
    with open(README) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) == 2
    assert len(blocks[0].strip().splitlines()) <= 11   # "in ten lines", give or take a blank
    monkeypatch.chdir(SOURCE_DIR)
    namespace = {"__name__": "readme"}
    exec(compile(blocks[0], "README.md[0]", "exec"), namespace)
    out = capsys.readouterr().out
    assert "misses=1" in out and "linalg.generic" in out

    q, k, v = (namespace[n] for n in "qkv")
    scores = q @ k.T * 8 ** -0.5 + np.where(np.tril(np.ones((4, 4), bool)), 0, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(namespace["attention"](q, k, v, scale=8 ** -0.5), want,
                               rtol=1e-5, atol=1e-6)

    exec(compile(blocks[1], "README.md[1]", "exec"), namespace)
    assert capsys.readouterr().out.startswith(" of the first year of Darius")
