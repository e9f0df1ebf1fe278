"""A random-weight GPT-2 checkpoint in Hugging Face layout, and a tiny safetensors reader/writer.
NumPy is imported only by the functions that need it (the GPU machine may have none).

The folder holds config.json + model.safetensors (F32, hub key layout without the
"transformer." prefix, Conv1D weights stored [in, out]) and bench_meta.json, which records
what was generated so a later run can reuse the folder instead of regenerating 500 MB.
"""
import json
import math
import os
import sys

FORMAT_VERSION = 1  # bump when the generated weights change

GPT2_124M = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
# GPT-2 XL's shapes (1.56 B parameters, 6.2 GB in F32): the load-time and memory figures of a
# large model.
GPT2_XL = dict(vocab_size=50257, n_positions=1024, n_embd=1600, n_layer=48, n_head=25)
# Rows of a tensor generated and written at a time (at most this many float32 values): a
# tensor is never whole in memory, so a 6 GB checkpoint is written in a few tens of MB.
CHUNK_VALUES = 1 << 22


def hf_config(vocab_size, n_positions, n_embd, n_layer, n_head):
    """config.json as transformers writes it for GPT2LMHeadModel."""
    return {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1, "bos_token_id": vocab_size - 1, "embd_pdrop": 0.1,
        "eos_token_id": vocab_size - 1,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
        "n_ctx": n_positions, "n_embd": n_embd, "n_head": n_head, "n_inner": None,
        "n_layer": n_layer, "n_positions": n_positions, "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
        "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
        "summary_type": "cls_index", "summary_use_proj": True, "tie_word_embeddings": True,
        "use_cache": True, "vocab_size": vocab_size,
    }


def tensor_shapes(c):
    """(name, shape) of every tensor, hub layout, in file order."""
    d, inner = c["n_embd"], 4 * c["n_embd"]
    out = [("wte.weight", (c["vocab_size"], d)), ("wpe.weight", (c["n_positions"], d))]
    for i in range(c["n_layer"]):
        h = f"h.{i}."
        out += [(h + "ln_1.weight", (d,)), (h + "ln_1.bias", (d,)),
                (h + "attn.c_attn.weight", (d, 3 * d)), (h + "attn.c_attn.bias", (3 * d,)),
                (h + "attn.c_proj.weight", (d, d)), (h + "attn.c_proj.bias", (d,)),
                (h + "ln_2.weight", (d,)), (h + "ln_2.bias", (d,)),
                (h + "mlp.c_fc.weight", (d, inner)), (h + "mlp.c_fc.bias", (inner,)),
                (h + "mlp.c_proj.weight", (inner, d)), (h + "mlp.c_proj.bias", (d,))]
    return out + [("ln_f.weight", (d,)), ("ln_f.bias", (d,))]


MATRICES = ("wte.weight", "attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
            "mlp.c_proj.weight")


def decode_bytes_per_token(c, matrix_bytes=4):
    """Weight bytes one decode step reads: every tensor except wpe, plus one wpe row; the
    weight matrices (MATRICES: what tm_model_options.weights applies to) at matrix_bytes per
    element, the rest F32. wte is read twice (embedding row + tied LM head); the row is
    negligible and not counted."""
    total = 4 * c["n_embd"]
    for name, s in tensor_shapes(c):
        if name != "wpe.weight":
            total += (matrix_bytes if name.endswith(MATRICES) else 4) * math.prod(s)
    return total


def weight_bytes(c, matrix_bytes=4):
    """Bytes of every weight in memory, the matrices at matrix_bytes per element."""
    return sum((matrix_bytes if name.endswith(MATRICES) else 4) * math.prod(s)
               for name, s in tensor_shapes(c))


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, make) with make() -> a float32 array of that shape (NumPy),
    its little-endian float32 bytes, or an iterator over consecutive row blocks of it (arrays
    or bytes, written as they come).
    Layout: 8-byte little-endian header length, JSON header (space-padded to 8 bytes), data."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in tensors:
        nbytes = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name, shape, make in tensors:
            data = make()
            parts = [data] if isinstance(data, (bytes, bytearray)) or hasattr(data, "shape") else data
            written = 0
            for part in parts:
                if not isinstance(part, (bytes, bytearray)):
                    import numpy as np  # here, not at the top: the GPU machine may have no NumPy

                    a = np.ascontiguousarray(part, dtype="<f4")
                    assert part is not data or a.shape == tuple(shape), (name, a.shape, shape)
                    part = memoryview(a).cast("B")
                f.write(part)
                written += len(part)
            assert written == 4 * math.prod(shape), (name, written, shape)
    return 8 + len(text) + offset


def safetensors_entries(f):
    """(name, dtype, shape, file offset, bytes) of every tensor of the open safetensors file f."""
    f.seek(0)
    n = int.from_bytes(f.read(8), "little")
    header = json.loads(f.read(n))
    for name, info in header.items():
        if name != "__metadata__":
            b, e = info["data_offsets"]
            yield name, info["dtype"], info["shape"], 8 + n + b, e - b


def read_safetensors(path):
    """{name: float32 array} (F32 only), each read into its own owned, aligned array."""
    import numpy as np

    out = {}
    with open(path, "rb") as f:
        for name, dtype, shape, offset, nbytes in list(safetensors_entries(f)):
            assert dtype == "F32", (name, dtype)
            f.seek(offset)
            out[name] = np.fromfile(f, dtype="<f4", count=nbytes // 4).reshape(shape)
    return out


def numpy_random(seed):
    """make(shape) and full(shape, value) for ensure_checkpoint: NumPy's generator."""
    import numpy as np

    rng = np.random.default_rng(seed)

    def normal(shape):
        # HF init: N(0, 0.02); biases random too so the cross-check covers them. Drawn in row
        # blocks of at most CHUNK_VALUES values: the generator fills values in order, so the
        # blocks are the values one draw of the whole tensor gives.
        def blocks():
            rows = max(1, CHUNK_VALUES // max(1, math.prod(shape[1:])))
            for lo in range(0, shape[0], rows):
                part = rng.standard_normal((min(rows, shape[0] - lo), *shape[1:]), dtype=np.float32)
                part *= np.float32(0.02)
                yield part
        return blocks

    return normal, (lambda shape, value: lambda: np.full(shape, value, np.float32))


def ensure_checkpoint(folder, seed=0, config=GPT2_124M, random=None, generator="numpy"):
    """Creates the folder unless a valid one with the same seed, shape and generator is already
    there. random: (normal, full) as numpy_random returns (the default), made from `seed`."""
    meta = {"format_version": FORMAT_VERSION, "seed": seed, **config}
    if generator != "numpy":
        meta["generator"] = generator
    cfg = hf_config(**config)
    st_path = os.path.join(folder, "model.safetensors")
    meta_path = os.path.join(folder, "bench_meta.json")
    try:
        with open(meta_path) as f:
            old = json.load(f)
        if old.get("meta") == meta and os.path.getsize(st_path) == old.get("safetensors_bytes"):
            with open(os.path.join(folder, "config.json")) as f:
                if json.load(f) == cfg:
                    return False  # reused
    except (OSError, ValueError):
        pass
    os.makedirs(folder, exist_ok=True)
    if os.path.exists(meta_path):
        os.remove(meta_path)  # invalid until rewritten below
    normal, full = random or numpy_random(seed)
    tensors = []
    for name, shape in tensor_shapes(config):
        if ".ln_" in name or name.startswith("ln_f"):  # layer norm: weight 1, bias 0
            tensors.append((name, shape, full(shape, 1.0 if name.endswith("weight") else 0.0)))
        else:
            tensors.append((name, shape, normal(shape)))
    size = write_safetensors(st_path + ".tmp", tensors)
    os.replace(st_path + ".tmp", st_path)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(meta_path, "w") as f:
        json.dump({"meta": meta, "safetensors_bytes": size}, f, indent=2)
    return True


def add_run_arguments(ap):
    """The options of a bench that runs the Python package on bench.py's checkpoint:
    --build, --threads, --cache, --smoke."""
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(os.path.dirname(here), "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", default=os.environ.get("TINYMLIR_BENCH_CACHE", "/tmp/tinymlir-bench"))
    ap.add_argument("--smoke", action="store_true")


def prepare_run(args, smoke_config):
    """For add_run_arguments' options: the checkpoint's folder and config (GPT-2 124M with
    random weights, or smoke_config with --smoke), made once into --cache; the thread count
    set and the build's Python package first on the path, before tinymlir is imported."""
    config, name = GPT2_124M, "gpt2-124m-random"
    if args.smoke:
        config, name = smoke_config, "gpt2-smoke-random"
    os.environ["TINYMLIR_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    folder = os.path.join(args.cache, name)
    ensure_checkpoint(folder, config=config)
    return folder, config
