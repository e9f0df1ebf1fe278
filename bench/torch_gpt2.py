"""GPT-2 forward pass with a KV cache written directly in PyTorch (CPU, float32, no_grad).

Same checkpoint, prompts and measurement protocol as numpy_gpt2.py (whose generate and
benchmark it reuses: forward takes NumPy ids and returns NumPy logits, a zero-copy view).

  torch_gpt2.py --model DIR --prompts FILE [--threads 2] [--decode-tokens 64] [--reps 5]
prints one JSON object. Run it with OMP_WAIT_POLICY=PASSIVE (see docs/ARCHITECTURE.md, "Pitfalls"): otherwise
PyTorch's spinning OpenMP threads fight OpenBLAS's threads for the cores.
"""
import json
import os

import torch
import torch.nn.functional as F

from checkpoint import read_safetensors
from numpy_gpt2 import run_reference


class TorchGPT2:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
        w = read_safetensors(os.path.join(folder, "model.safetensors"))
        w = {k[len("transformer."):] if k.startswith("transformer.") else k: torch.from_numpy(v)
             for k, v in w.items()}
        self.n_layer, self.n_head, self.d = c["n_layer"], c["n_head"], c["n_embd"]
        self.n_ctx = c.get("n_positions") or c["n_ctx"]
        self.eps = c.get("layer_norm_epsilon", 1e-5)
        self.wte, self.wpe = w["wte.weight"], w["wpe.weight"]  # (V, d), (n_ctx, d)
        self.ln_f = (w["ln_f.weight"], w["ln_f.bias"])
        names = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                 "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                 "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]
        self.layers = [[w[f"h.{i}.{n}"] for n in names] for i in range(self.n_layer)]
        hd = self.d // self.n_head
        self.scale = 1.0 / hd ** 0.5
        # KV cache per layer: (n_head, n_ctx, head_dim)
        self.k_cache = [torch.zeros(self.n_head, self.n_ctx, hd) for _ in self.layers]
        self.v_cache = [torch.zeros(self.n_head, self.n_ctx, hd) for _ in self.layers]

    def ln(self, x, g, b):  # x: (..., d)
        return F.layer_norm(x, (self.d,), g, b, self.eps)

    @torch.no_grad()
    def forward(self, ids, pos):
        """ids: NumPy array of T new tokens at positions pos..pos+T-1.
        Returns the last position's logits as a NumPy (V,) array."""
        x = self.hidden(ids, pos)
        last = x if x.dim() == 1 else x[-1]  # (d,)
        return torch.mv(self.wte, self.ln(last, *self.ln_f)).numpy()  # (V,) tied LM head

    @torch.no_grad()
    def score(self, ids):
        """Log-probabilities (float64 NumPy, natural log) of ids[1:], each given the ids
        before it, from one forward pass over all positions (as tm_model_score)."""
        x = self.hidden(ids, 0)  # (T, d)
        logits = self.ln(x[:-1], *self.ln_f) @ self.wte.T  # (T - 1, V)
        logprobs = torch.log_softmax(logits.double(), dim=-1)
        return logprobs.gather(1, torch.from_numpy(ids[1:]).long()[:, None])[:, 0].numpy()

    def hidden(self, ids, pos):
        """The final hidden states (T, d) of ids at positions pos..pos+T-1, filling the KV
        cache; (d,) for one token."""
        T, H, d = len(ids), self.n_head, self.d
        hd, L = d // H, pos + len(ids)
        x = self.wte[torch.from_numpy(ids)] + self.wpe[pos:L]  # (T, d)
        if T == 1:
            x = x[0]  # (d,): products below are matrix-vector (gemv)
        for li, (g1, b1, wa, ba, wp, bp, g2, b2, wf, bf, wm, bm) in enumerate(self.layers):
            qkv = self.ln(x, g1, b1) @ wa + ba  # (T, 3d) or (3d,)
            q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(T, H, hd).transpose(0, 1)
                       for i in range(3))  # each (H, T, hd)
            kc, vc = self.k_cache[li], self.v_cache[li]
            kc[:, pos:L] = k
            vc[:, pos:L] = v
            scores = (q @ kc[:, :L].transpose(1, 2)) * self.scale  # (H, T, L)
            if T > 1:  # causal: row i sees cache rows <= pos + i
                scores += torch.full((T, L), float("-inf")).triu(pos + 1)
            att = (torch.softmax(scores, dim=-1) @ vc[:, :L]).transpose(0, 1).reshape(T, d)
            if T == 1:
                att = att[0]  # (d,)
            x = x + (att @ wp + bp)
            h = F.gelu(self.ln(x, g2, b2) @ wf + bf, approximate="tanh")  # (T, 4d) or (4d,)
            x = x + (h @ wm + bm)
        return x


def main():
    def configure(a):
        torch.set_num_threads(a.threads)
        return {"threads": torch.get_num_threads(),
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}

    run_reference(TorchGPT2, f"pytorch {torch.__version__}",
                  extra_args=[("--threads", {"type": int, "default": 2})], configure=configure)


if __name__ == "__main__":
    main()
