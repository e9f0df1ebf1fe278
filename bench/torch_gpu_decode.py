"""GPT-2 decode speed in PyTorch on a CUDA GPU: the reference for tinymlir's GPU bundles
(scripts/gpu-check.sh). Same checkpoint format (Hugging Face folder, F32 safetensors),
greedy decoding of `--tokens` tokens after a prompt, two ways:

  eager         the KV cache grows with torch.cat each step (what a plain loop does);
  static cache  preallocated (n_ctx, d) K and V per layer, written in place, attention
                over the filled prefix (what a serving loop does).

  torch_gpu_decode.py --model DIR [--tokens 64] [--device cuda] [--golden FILE]
prints one line per way: tokens/s (median of 3 runs after a warm-up), and the ids; with
--golden (a golden.json of models/), fails unless both ways' ids are the golden greedy ids
of its first case (whose prompt it then uses).
  torch_gpu_decode.py --ensure-random DIR
writes GPT-2 124M-shaped random weights to DIR (bench/checkpoint.py's, with NumPy; where
there is none, the same shapes from PyTorch's generator: the speed is the same).

Needs PyTorch only: no NumPy (the GPU machine may have none). On PyTorch before 2.0 (no
scaled_dot_product_attention) the attention is written out; --device cpu runs it here.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch

import checkpoint

TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    """{name: float32 tensor} from a safetensors file, without NumPy."""
    out = {}
    with open(path, "rb") as f:
        for name, dtype, shape, offset, nbytes in list(checkpoint.safetensors_entries(f)):
            data = bytearray(nbytes)
            f.seek(offset)
            f.readinto(data)
            t = torch.frombuffer(data, dtype=TORCH_DTYPES[dtype]) if data else \
                torch.zeros(0, dtype=TORCH_DTYPES[dtype])
            out[name] = t.float().reshape(shape)
    return out


def load(folder, device):
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    w = {k[len("transformer."):] if k.startswith("transformer.") else k: v.to(device)
         for k, v in read_safetensors(os.path.join(folder, "model.safetensors")).items()}
    return c, w


def torch_random(seed):
    """checkpoint.numpy_random's (normal, full) from PyTorch's generator: bytes, not arrays."""
    generator = torch.Generator().manual_seed(seed)

    def as_bytes(t):  # little-endian float32 on x86 and ARM
        t = t.contiguous()
        return ctypes.string_at(t.data_ptr(), 4 * t.numel())

    return ((lambda shape: lambda: as_bytes(torch.randn(shape, generator=generator) * 0.02)),
            (lambda shape, value: lambda: as_bytes(torch.full(shape, value))))


def ensure_random(folder, seed=0):
    """The bench's random 124M-shaped checkpoint: NumPy's values where there is NumPy, else the
    same layout from PyTorch's generator (the speed is the same)."""
    try:
        import numpy  # noqa: F401
        return checkpoint.ensure_checkpoint(folder, seed)
    except ImportError:
        return checkpoint.ensure_checkpoint(folder, seed, random=torch_random(seed),
                                            generator="torch")


def attention(q, k, v, causal):
    """softmax(q k^T / sqrt(dh), causal) v over heads; PyTorch's fused kernel where it has one."""
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=causal)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        t, n = scores.shape[-2:]
        mask = torch.ones(t, n, dtype=torch.bool, device=q.device).tril(n - t)
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class Gpt2:
    def __init__(self, c, w):
        self.c, self.w = c, w
        self.n_layer, self.n_head, self.d = c["n_layer"], c["n_head"], c["n_embd"]
        self.n_ctx = c.get("n_positions") or c["n_ctx"]
        self.eps = c.get("layer_norm_epsilon", 1e-5)

    def ln(self, x, p):
        return torch.nn.functional.layer_norm(x, (self.d,), self.w[p + ".weight"],
                                              self.w[p + ".bias"], self.eps)

    def lin(self, x, p):
        return torch.addmm(self.w[p + ".bias"], x, self.w[p + ".weight"])

    def step(self, ids, pos, cache, static):
        """Logits of the last of `ids` at positions [pos, pos + len(ids))."""
        w, h, d = self.w, self.n_head, self.d
        t = ids.shape[0]
        x = w["wte.weight"][ids] + w["wpe.weight"][pos:pos + t]
        for i in range(self.n_layer):
            p = f"h.{i}."
            q, k, v = self.lin(self.ln(x, p + "ln_1"), p + "attn.c_attn").split(d, dim=1)
            if static:
                cache[i][0][pos:pos + t] = k
                cache[i][1][pos:pos + t] = v
                k, v = cache[i][0][:pos + t], cache[i][1][:pos + t]
            else:
                if cache[i] is not None:
                    k = torch.cat([cache[i][0], k])
                    v = torch.cat([cache[i][1], v])
                cache[i] = (k, v)
            n = k.shape[0]
            qh = q.view(t, h, d // h).transpose(0, 1)
            kh = k.view(n, h, d // h).transpose(0, 1)
            vh = v.view(n, h, d // h).transpose(0, 1)
            a = attention(qh, kh, vh, causal=t > 1)
            x = x + self.lin(a.transpose(0, 1).reshape(t, d), p + "attn.c_proj")
            m = torch.nn.functional.gelu(self.lin(self.ln(x, p + "ln_2"), p + "mlp.c_fc"),
                                         approximate="tanh")
            x = x + self.lin(m, p + "mlp.c_proj")
        return self.ln(x[-1:], "ln_f") @ w["wte.weight"].T

    @torch.no_grad()
    def generate(self, prompt, tokens, static):
        dev = self.w["wte.weight"].device
        cache = ([(torch.zeros(self.n_ctx, self.d, device=dev),
                   torch.zeros(self.n_ctx, self.d, device=dev)) for _ in range(self.n_layer)]
                 if static else [None] * self.n_layer)
        ids = torch.tensor(prompt, device=dev)
        logits = self.step(ids, 0, cache, static)
        out, pos = [], len(prompt)
        synchronize(dev)
        start = time.perf_counter()
        for _ in range(tokens):
            nxt = logits.argmax(-1)
            out.append(nxt)
            logits = self.step(nxt, pos, cache, static)
            pos += 1
        synchronize(dev)
        return tokens / (time.perf_counter() - start), [int(i) for i in torch.cat(out).tolist()]


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--golden", help="golden.json: check the ids against its first case")
    ap.add_argument("--ensure-random", metavar="DIR", help="write 124M-shaped random weights")
    args = ap.parse_args()
    if args.ensure_random:
        ensure_random(args.ensure_random)
        return 0
    if not args.model:
        ap.error("--model or --ensure-random is required")
    prompt, want = [818, 262, 3726, 11], None
    if args.golden:
        with open(args.golden) as f:
            case = json.load(f)["cases"][0]
        prompt, want = case["prompt_ids"], case["greedy_ids"][:args.tokens]
    c, w = load(args.model, args.device)
    model = Gpt2(c, w)
    name = os.path.basename(os.path.normpath(args.model))
    where = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    failed = False
    for static in (False, True):
        model.generate(prompt, 4, static)  # warm-up
        runs = [model.generate(prompt, args.tokens, static) for _ in range(3)]
        speed = statistics.median(r[0] for r in runs)
        way = "static cache" if static else "eager"
        print(f"pytorch {torch.__version__} {name} ({way}): "
              f"decode {speed:.1f} tokens/s on {where}; "
              f"ids {' '.join(map(str, runs[0][1][:8]))} ...")
        if want is not None and any(r[1][:len(want)] != want for r in runs):
            print(f"FAIL pytorch {way}: ids {runs[0][1]} are not the golden {want}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
