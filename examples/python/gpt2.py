#!/usr/bin/python3
"""GPT-2 inference written as Python formulas and compiled with @tinymlir.jit.

The forward pass is four plain functions over NumPy-style values (embed, block, head,
and the attention inside block); GPT2 wraps them with tinymlir.jit for one target. The
weights are a tree of arrays (a dataclass of per-layer dataclasses), passed as arguments, so
every transformer block runs the same compiled program. Generation is greedy and recomputes
the whole prefix every step, the simplest decoding loop (no KV cache): each new length is a
new specialisation, compiled once.

    /usr/bin/python3 examples/python/gpt2.py "In the beginning"
    /usr/bin/python3 examples/python/gpt2.py --model tests/data/tiny-a --ids "1 2 3"
    /usr/bin/python3 examples/python/gpt2.py --target gpu "..."   # same formulas, GPU target

(with PYTHONPATH=<build>/python, where the tinymlir package is built.)
"""
import argparse
import dataclasses
import json
import math
import os
import struct
import sys
from typing import List

import numpy as np

import tinymlir as tm

# ---- Checkpoint -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Config:
    vocab_size: int
    n_ctx: int
    n_embd: int
    n_head: int
    n_layer: int
    eps: float


@dataclasses.dataclass
class LayerNorm:
    g: np.ndarray
    b: np.ndarray


@dataclasses.dataclass
class Linear:
    """A GPT-2 Conv1D: y = x @ w + b, w stored (in, out)."""
    w: np.ndarray
    b: np.ndarray


@dataclasses.dataclass
class Block:
    ln_1: LayerNorm
    attn: Linear          # c_attn: (d, 3d), q | k | v
    attn_proj: Linear     # c_proj: (d, d)
    ln_2: LayerNorm
    fc: Linear            # mlp.c_fc: (d, inner)
    mlp_proj: Linear      # mlp.c_proj: (inner, d)


@dataclasses.dataclass
class Params:
    wte: np.ndarray       # (vocab, d), also the LM head (tied)
    wpe: np.ndarray       # (n_ctx, d)
    blocks: List[Block]
    ln_f: LayerNorm


_SAFETENSORS_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}


def read_safetensors(path):
    """{name: float32 array} from a .safetensors file: an 8-byte little-endian header size,
    a JSON header (dtype, shape, data_offsets per tensor), then the data."""
    with open(path, "rb") as f:
        (header_size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_size))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: {name} has dtype {info['dtype']} (F32, F16, BF16 only)")
        begin, end = info["data_offsets"]
        raw = np.frombuffer(data, dtype, (end - begin) // dtype.itemsize, begin)
        if info["dtype"] == "BF16":  # the upper half of a float32
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = raw.astype(np.float32).reshape(info["shape"])
    return tensors


def load(directory):
    """(Config, Params) of a Hugging Face GPT-2 folder (config.json, model.safetensors)."""
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    config = Config(vocab_size=c["vocab_size"], n_ctx=c.get("n_positions", c.get("n_ctx")),
                    n_embd=c["n_embd"], n_head=c["n_head"], n_layer=c["n_layer"],
                    eps=c.get("layer_norm_epsilon") or 1e-5)
    raw = read_safetensors(os.path.join(directory, "model.safetensors"))
    # save_pretrained prefixes the keys with "transformer."; the hub layout does not.
    t = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in raw.items()}

    def ln(prefix):
        return LayerNorm(t[prefix + ".weight"], t[prefix + ".bias"])

    def linear(prefix):
        return Linear(t[prefix + ".weight"], t[prefix + ".bias"])

    blocks = [Block(ln_1=ln(f"h.{i}.ln_1"), attn=linear(f"h.{i}.attn.c_attn"),
                    attn_proj=linear(f"h.{i}.attn.c_proj"), ln_2=ln(f"h.{i}.ln_2"),
                    fc=linear(f"h.{i}.mlp.c_fc"), mlp_proj=linear(f"h.{i}.mlp.c_proj"))
              for i in range(config.n_layer)]
    return config, Params(wte=t["wte.weight"], wpe=t["wpe.weight"], blocks=blocks,
                          ln_f=ln("ln_f"))


# ---- The formulas (no target in sight) --------------------------------------------------------


def linear(x, p):
    return x @ p.w + p.b


def embed(ids, wte, wpe):
    """Token plus position embeddings of ids (t,): (t, d)."""
    return wte[ids] + wpe[:ids.shape[0]]


def attention(x, p, n_head):
    """Causal multi-head self-attention of x (t, d)."""
    t, d = x.shape
    hd = d // n_head
    qkv = linear(x, p.attn)                                             # (t, 3d)
    q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]

    def heads(z):                                                       # (h, t, hd)
        return z.reshape(t, n_head, hd).transpose(1, 0, 2)

    scores = heads(q) @ heads(k).transpose(0, 2, 1) * (1.0 / math.sqrt(hd))  # (h, t, t)
    probs = tm.softmax(scores + tm.causal_mask(t, t))
    merged = (probs @ heads(v)).transpose(1, 0, 2).reshape(t, d)
    return linear(merged, p.attn_proj)


def block(x, p, *, n_head, eps):
    """One transformer block (pre-norm): attention and feed-forward, each residual."""
    x = x + attention(tm.layer_norm(x, p.ln_1.g, p.ln_1.b, eps), p, n_head)
    hidden = tm.gelu_tanh(linear(tm.layer_norm(x, p.ln_2.g, p.ln_2.b, eps), p.fc))
    return x + linear(hidden, p.mlp_proj)


def head(x_last, ln_f, wte, *, eps):
    """Logits (vocab,) of one position x_last (1, d): the tied LM head, wte @ h^T (no
    transposed copy of the table)."""
    h = tm.layer_norm(x_last, ln_f.g, ln_f.b, eps)
    return (wte @ h.T).reshape(-1)


# ---- The model: the formulas jitted for one target ---------------------------------------------


class GPT2:
    def __init__(self, config, params, target="cpu", context=None):
        self.config, self.params = config, params
        jit = lambda f: tm.jit(f, target=target, context=context)  # noqa: E731
        self.embed, self.block, self.head = jit(embed), jit(block), jit(head)

    def hidden(self, ids):
        """The last layer's activations (t, d) for ids."""
        c, p = self.config, self.params
        x = self.embed(np.asarray(ids, np.int32), p.wte, p.wpe)
        for weights in p.blocks:  # one compiled program for every block
            x = self.block(x, weights, n_head=c.n_head, eps=c.eps)
        return x

    def logits(self, ids):
        """Logits (vocab,) of the last position, recomputing the whole prefix."""
        x = self.hidden(ids)
        return self.head(x[-1:], self.params.ln_f, self.params.wte, eps=self.config.eps)

    def greedy(self, ids, max_new_tokens, on_step=None):
        """Greedy decoding with full-prefix recompute. on_step(ids, logits) sees each step."""
        ids, new = list(ids), []
        for _ in range(max_new_tokens):
            logits = self.logits(ids)
            if on_step is not None:
                on_step(list(ids), logits)
            token = int(np.argmax(logits))
            ids.append(token)
            new.append(token)
        return new


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("prompt")
    parser.add_argument("--model", default=os.path.join(here, "..", "..", "models", "kjv-tiny"))
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--target", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--ids", action="store_true", help="the prompt is token ids")
    args = parser.parse_args(argv)

    config, params = load(args.model)
    model = GPT2(config, params, target=args.target)
    try:
        tokenizer = None if args.ids else tm.Model.load(args.model)  # the library's BPE
        prompt = ([int(s) for s in args.prompt.split()] if args.ids
                  else tokenizer.tokenize(args.prompt))
        new = model.greedy(prompt, args.tokens)
    except tm.Error as e:  # e.g. UnsupportedError for --target gpu in a CPU-only build
        sys.exit(f"gpt2.py: {type(e).__name__}: {e}")
    print(" ".join(map(str, new)) if args.ids else args.prompt + tokenizer.detokenize(new))
    info = model.block.cache_info()
    print(f"[gpt2.py] block: {info.misses} programs compiled for {info.hits + info.misses} "
          f"calls; context cache: {info.context}", file=sys.stderr)


if __name__ == "__main__":
    main()
