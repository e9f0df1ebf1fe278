"""GPT-2 forward pass with a KV cache in NumPy (float32), and its benchmark.

Reference for tinymlir's numbers: same checkpoint, same prompts, same measurements.
Decode products take a 1-D x (x @ W, wte @ x) so NumPy calls BLAS sgemv, not sgemm with M = 1.

  numpy_gpt2.py --model DIR --prompts FILE [--decode-tokens 64] [--reps 5] [--logits-out F]
prints one JSON object. Threads come from OPENBLAS_NUM_THREADS (set by the caller).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

from checkpoint import read_safetensors


class NumpyGPT2:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
        w = read_safetensors(os.path.join(folder, "model.safetensors"))
        w = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in w.items()}
        self.n_layer, self.n_head, self.d = c["n_layer"], c["n_head"], c["n_embd"]
        self.n_ctx = c.get("n_positions") or c["n_ctx"]
        self.eps = np.float32(c.get("layer_norm_epsilon", 1e-5))
        self.wte, self.wpe = w["wte.weight"], w["wpe.weight"]  # (V, d), (n_ctx, d)
        self.ln_f = (w["ln_f.weight"], w["ln_f.bias"])
        names = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                 "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                 "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]
        self.layers = [[w[f"h.{i}.{n}"] for n in names] for i in range(self.n_layer)]
        hd = self.d // self.n_head
        self.scale = np.float32(1.0 / np.sqrt(hd))
        # KV cache per layer: (n_head, n_ctx, head_dim), so k[:, :L] is one strided view
        self.k_cache = [np.zeros((self.n_head, self.n_ctx, hd), np.float32) for _ in self.layers]
        self.v_cache = [np.zeros((self.n_head, self.n_ctx, hd), np.float32) for _ in self.layers]

    def layer_norm(self, x, g, b):  # x: (..., d)
        mean = x.mean(axis=-1, keepdims=True)
        xc = x - mean
        var = (xc * xc).mean(axis=-1, keepdims=True)
        return xc * (1.0 / np.sqrt(var + self.eps)) * g + b

    @staticmethod
    def gelu(x):  # gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        inner = x * x
        inner *= np.float32(0.044715)
        inner += 1.0
        inner *= x
        inner *= np.float32(np.sqrt(2.0 / np.pi))
        np.tanh(inner, out=inner)
        inner += 1.0
        inner *= x
        inner *= np.float32(0.5)
        return inner

    def forward(self, ids, pos):
        """ids: T new tokens at positions pos..pos+T-1, attending to the cache.
        Returns the logits of the last position, (V,)."""
        T, H, d = len(ids), self.n_head, self.d
        hd, L = d // H, pos + len(ids)
        x = self.wte[ids] + self.wpe[pos:L]  # (T, d)
        if T == 1:
            x = x[0]  # (d,): every product below becomes a gemv
        for li, (g1, b1, wa, ba, wp, bp, g2, b2, wf, bf, wm, bm) in enumerate(self.layers):
            qkv = self.layer_norm(x, g1, b1) @ wa + ba  # (T, 3d) or (3d,)
            q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(T, H, hd).transpose(1, 0, 2)
                       for i in range(3))  # each (H, T, hd)
            kc, vc = self.k_cache[li], self.v_cache[li]
            kc[:, pos:L] = k
            vc[:, pos:L] = v
            scores = (q @ kc[:, :L].transpose(0, 2, 1)) * self.scale  # (H, T, L)
            if T > 1:  # causal: row i sees cache rows <= pos + i
                scores += np.triu(np.full((T, L), -np.inf, np.float32), k=pos + 1)
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            att = (scores @ vc[:, :L]).transpose(1, 0, 2).reshape(T, d)  # (T, d)
            if T == 1:
                att = att[0]  # (d,)
            x = x + (att @ wp + bp)
            h = self.gelu(self.layer_norm(x, g2, b2) @ wf + bf)  # (T, 4d) or (4d,)
            x = x + (h @ wm + bm)
        last = x if T == 1 else x[-1]  # (d,)
        return self.wte @ self.layer_norm(last, *self.ln_f)  # (V,): gemv on the tied table


def generate(model, prompt, new_tokens):
    """Greedy; returns (ids, prefill seconds, per-step decode seconds)."""
    t0 = time.perf_counter()
    logits = model.forward(np.asarray(prompt), 0)
    prefill = time.perf_counter() - t0
    out, steps = [int(np.argmax(logits))], []
    for _ in range(new_tokens - 1):
        pos = len(prompt) + len(out) - 1
        t0 = time.perf_counter()
        logits = model.forward(np.asarray(out[-1:]), pos)
        steps.append(time.perf_counter() - t0)
        out.append(int(np.argmax(logits)))
    return out, prefill, steps


def generate_recomputing(model, prompt, new_tokens):
    """Greedy without a KV cache, the simplest loop: every step runs the whole sequence again.
    Returns the per-step seconds."""
    out, steps = [int(np.argmax(model.forward(np.asarray(prompt), 0)))], []
    for _ in range(new_tokens - 1):
        t0 = time.perf_counter()
        logits = model.forward(np.asarray(list(prompt) + out), 0)
        steps.append(time.perf_counter() - t0)
        out.append(int(np.argmax(logits)))
    return steps


# Decode steps timed without the KV cache (each recomputes up to 16 + this many positions).
NO_CACHE_TOKENS = 16


def benchmark(model, p16, p128, decode_tokens, reps):
    """The same protocol as gpt2_bench.cpp: one warm-up, then `reps` timed runs."""
    res = {}
    for name, prompt in (("prefill16", p16), ("prefill128", p128)):
        generate(model, prompt, 1)
        ms = [1e3 * generate(model, prompt, 1)[1] for _ in range(reps)]
        res[name + "_ms"], res[name + "_ms_median"] = ms, float(np.median(ms))
    generate(model, p16, decode_tokens + 1)
    tps = []
    for _ in range(reps):
        ids, _, steps = generate(model, p16, decode_tokens + 1)
        tps.append(len(steps) / sum(steps))
    res.update(decode_tokens=decode_tokens, decode_tokens_per_s=tps,
               decode_tokens_per_s_median=float(np.median(tps)), generated_ids=ids)
    n = min(decode_tokens, NO_CACHE_TOKENS)
    generate_recomputing(model, p16, n + 1)
    no_cache = []
    for _ in range(reps):
        steps = generate_recomputing(model, p16, n + 1)
        no_cache.append(len(steps) / sum(steps))
    res.update(no_cache_decode_tokens=n, no_cache_decode_tokens_per_s=no_cache,
               no_cache_decode_tokens_per_s_median=float(np.median(no_cache)))
    return res


def read_prompts(path):
    with open(path) as f:
        lines = [[int(t) for t in line.split()] for line in f if line.strip()]
    return lines[0], lines[1]


def run_reference(make_model, implementation, extra_args=(), configure=None):
    """The command line every reference implementation shares: loads the model, optionally
    dumps the 16-token prompt's logits, runs the benchmark and prints one JSON object."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--logits-out", help="write the 16-token prompt's logits (raw f32)")
    for name, kwargs in extra_args:
        ap.add_argument(name, **kwargs)
    a = ap.parse_args()
    res = {"implementation": implementation}
    if configure:
        res.update(configure(a))
    p16, p128 = read_prompts(a.prompts)
    t0 = time.perf_counter()
    model = make_model(a.model)
    res["load_seconds"] = time.perf_counter() - t0
    if a.logits_out:
        model.forward(np.asarray(p16), 0).astype("<f4").tofile(a.logits_out)
    res.update(benchmark(model, p16, p128, a.decode_tokens, a.reps))
    import resource
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    json.dump(res, sys.stdout)
    print()


def main():
    run_reference(NumpyGPT2, f"numpy {np.__version__}")


if __name__ == "__main__":
    main()
