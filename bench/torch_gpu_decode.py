"""GPT-2 decode speed in PyTorch on a CUDA GPU: the reference for tinymlir's GPU bundles
(scripts/gpu-check.sh). Same checkpoint format (Hugging Face folder, F32/F16 safetensors read
as float32), greedy decoding of `--tokens` tokens after a 4-token prompt, two ways:

  eager         the KV cache grows with torch.cat each step (what a plain loop does);
  static cache  preallocated (n_ctx, d) K and V per layer, written in place, attention
                over the filled prefix (what a serving loop does).

  torch_gpu_decode.py --model DIR [--tokens 64]
prints one line per way: tokens/s (median of 3 runs after a warm-up), and the ids.
"""
import argparse
import json
import os
import statistics
import time

import torch

from checkpoint import read_safetensors


def load(folder, device):
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    w = {k[len("transformer."):] if k.startswith("transformer.") else k:
         torch.from_numpy(v.astype("float32")).to(device)
         for k, v in read_safetensors(os.path.join(folder, "model.safetensors")).items()}
    return c, w


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
            a = torch.nn.functional.scaled_dot_product_attention(
                qh, kh, vh, is_causal=t > 1)
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
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(tokens):
            nxt = logits.argmax(-1)
            out.append(nxt)
            logits = self.step(nxt, pos, cache, static)
            pos += 1
        torch.cuda.synchronize()
        return tokens / (time.perf_counter() - start), [int(i) for i in torch.cat(out).tolist()]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    c, w = load(args.model, "cuda")
    model = Gpt2(c, w)
    prompt = [818, 262, 3726, 11][:4]
    name = os.path.basename(os.path.normpath(args.model))
    for static in (False, True):
        model.generate(prompt, 4, static)  # warm-up
        runs = [model.generate(prompt, args.tokens, static) for _ in range(3)]
        speed = statistics.median(r[0] for r in runs)
        print(f"pytorch {torch.__version__} {name} ({'static cache' if static else 'eager'}): "
              f"decode {speed:.1f} tokens/s on {torch.cuda.get_device_name()}; "
              f"ids {' '.join(map(str, runs[0][1][:8]))} ...")


if __name__ == "__main__":
    main()
