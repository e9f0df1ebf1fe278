"""The GEMM floor of a GPT-2 prefill: the matrix products of one forward pass over T tokens,
timed through OpenBLAS alone (NumPy's float32 matmul into preallocated outputs), with the
same shapes as tinymlir's programs: per layer x @ c_attn, the attention's Q K^T and P V
per head, x @ c_proj, x @ c_fc, h @ mlp.c_proj; then the LM head's one row (wte @ x).
Prints one JSON object. Thread count: OPENBLAS_NUM_THREADS, set by the caller.
"""
import argparse
import json
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    a = ap.parse_args()
    t, d, h, hd = a.tokens, a.d, a.heads, a.d // a.heads
    rng = np.random.default_rng(0)

    def rand(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * 0.02

    # Distinct weights per layer, as in the model: the products stream them from memory.
    layers = [dict(attn=rand(d, 3 * d), proj=rand(d, d), fc=rand(d, 4 * d), mp=rand(4 * d, d))
              for _ in range(a.layers)]
    wte = rand(a.vocab, d)
    x, hidden = rand(t, d), rand(t, 4 * d)
    q, k, v, p = rand(h, t, hd), rand(h, hd, t), rand(h, t, hd), rand(h, t, t)
    out = dict(qkv=np.empty((t, 3 * d), np.float32), d=np.empty((t, d), np.float32),
               fc=np.empty((t, 4 * d), np.float32), s=np.empty((h, t, t), np.float32),
               o=np.empty((h, t, hd), np.float32), logits=np.empty(a.vocab, np.float32))

    def forward():
        for w in layers:
            np.matmul(x, w["attn"], out=out["qkv"])
            np.matmul(q, k, out=out["s"])
            np.matmul(p, v, out=out["o"])
            np.matmul(x, w["proj"], out=out["d"])
            np.matmul(x, w["fc"], out=out["fc"])
            np.matmul(hidden, w["mp"], out=out["d"])
        np.matmul(wte, x[-1], out=out["logits"])

    forward()  # warm-up
    ms = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        forward()
        ms.append(1e3 * (time.perf_counter() - t0))
    print(json.dumps({"implementation": f"OpenBLAS through numpy {np.__version__}",
                      "tokens": t, "gemm_floor_ms": ms,
                      "gemm_floor_ms_median": float(np.median(ms))}))


if __name__ == "__main__":
    main()
