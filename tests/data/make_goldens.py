#!/usr/bin/env python3
"""Makes and checks the Hugging Face goldens: tests/data/{tiny-a,tiny-b}/golden.json,
models/kjv-tiny/golden.json and tests/data/gpt2-tokenizer-golden.json (tests/data/README.md).

This script was written after the committed goldens were made, to reproduce their format field
by field; the committed numbers came from the run the goldens' "source" field names
(transformers 5.17.0 GPT2LMHeadModel in float32, torch 2.11.0; tokenizers 0.23.2), not from
this script. Making goldens needs torch, transformers and tokenizers; --check needs only the
standard library.

  # A model's golden, with the prompts, step counts, name and layout of an existing golden:
  make_goldens.py model tests/data/tiny-a --like tests/data/tiny-a/golden.json --out tiny-a.json
  # ... or given explicitly (--prompt TEXT needs vocab.json and merges.txt in the checkpoint):
  make_goldens.py model CHECKPOINT --name NAME --layout TEXT --steps 20 \\
      --prompt-ids 1,2,3 --prompt-ids 100 --out golden.json
  # The tokenizer golden (texts from an existing golden, or --text TEXT...):
  make_goldens.py tokenizer --vocab models/kjv-tiny/vocab.json \\
      --merges models/kjv-tiny/merges.txt --like tests/data/gpt2-tokenizer-golden.json --out t.json
  # Structure and internal consistency of goldens (no third-party packages):
  make_goldens.py --check models/kjv-tiny/golden.json tests/data/*/golden.json \\
      tests/data/gpt2-tokenizer-golden.json

A model golden holds "model", "layout", "source" and "cases"; each case, in this order:
  prompt            the text, or the list of ids for a model without tokenizer files
  prompt_ids        the prompt's ids
  greedy_ids        argmax decoding that recomputes the whole prefix every step (no KV cache)
  text              (models with a tokenizer) the decoded greedy_ids
  min_margin        the smallest top-1 minus top-2 logit over the steps (not rounded)
  margins           top-1 minus top-2 logit at each step, rounded to 5 decimals
  first_steps_top5  for the first 3 steps: {"ids": top-5 ids, "logits": their logits (float32)}
  prompt_logits_last_first16       the first 16 logits at the prompt's last position (5 dec.)
  prompt_logits_all_positions_sum  for every prompt position, the sum of its logits (4 dec.)
Files are written as json.dumps(..., indent=1, ensure_ascii=False) and a final newline.
"""
import argparse
import hashlib
import json
import math
import os
import re
import struct
import sys

TOP5_STEPS = 3          # first_steps_top5 covers this many steps
TOP_K = 5
FIRST_LOGITS = 16       # prompt_logits_last_first16
MARGIN_DECIMALS = 5
LOGIT_DECIMALS = 5
SUM_DECIMALS = 4

MODEL_SOURCE = ("Hugging Face transformers {transformers} GPT2LMHeadModel in float32 (torch {torch}); "
                "greedy = argmax of the last position's logits, recomputing the whole prefix each "
                "step. margins[i] = top1 - top2 logit at step i.")
TOKENIZER_SOURCE = ("Hugging Face tokenizers {tokenizers}: BPE(vocab.json, merges.txt) with the "
                    "ByteLevel pre-tokenizer (GPT-2 regex, add_prefix_space=False); ids exclude "
                    "special tokens.")
MODEL_SOURCE_RE = re.compile(
    r"^Hugging Face transformers [0-9][^ ]* GPT2LMHeadModel in float32 \(torch [^)]+\); greedy = ")
TOKENIZER_SOURCE_RE = re.compile(r"^Hugging Face tokenizers [0-9][^:]*: BPE\(vocab\.json, merges\.txt\)")
CASE_KEYS = ["prompt", "prompt_ids", "greedy_ids", "text", "min_margin", "margins",
             "first_steps_top5", "prompt_logits_last_first16", "prompt_logits_all_positions_sum"]


def dump(data):
    """The goldens' serialisation."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def write(path, data):
    with open(path, "w", encoding="utf-8") as f:
        f.write(dump(data))
    print(f"wrote {path}")


# --- making (torch, transformers, tokenizers) ----------------------------------------------

def hf_tokenizer(vocab, merges):
    """GPT-2's byte-level BPE as Hugging Face `tokenizers` builds it from the two files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    tok = Tokenizer(models.BPE.from_file(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def encode(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def model_golden(args):
    import torch
    import transformers
    from transformers import GPT2LMHeadModel

    like = read_json(args.like) if args.like else None
    name = args.name or (like["model"] if like else os.path.basename(os.path.normpath(args.checkpoint)))
    layout = args.layout or (like["layout"] if like else None)
    if layout is None:
        sys.exit("--layout (or --like) is required: it says how the checkpoint stores its weights")
    prompts = [json.loads("[" + p + "]") for p in args.prompt_ids] + list(args.prompt)
    if like:
        prompts += [c["prompt"] for c in like["cases"]]
    if not prompts:
        sys.exit("no prompt: give --prompt, --prompt-ids or --like")
    steps = [args.steps] * (len(prompts) - (len(like["cases"]) if like else 0))
    if like:
        steps += [len(c["greedy_ids"]) for c in like["cases"]]
    if any(s is None for s in steps):
        sys.exit("--steps is required for prompts not taken from --like")

    vocab = os.path.join(args.checkpoint, "vocab.json")
    merges = os.path.join(args.checkpoint, "merges.txt")
    tok = hf_tokenizer(vocab, merges) if os.path.exists(vocab) and os.path.exists(merges) else None

    torch.backends.cuda.matmul.allow_tf32 = False   # float32 means float32, on a GPU too
    torch.backends.cudnn.allow_tf32 = False
    # float32 whatever the checkpoint stores: kjv-tiny's float16 values are upcast exactly.
    model = GPT2LMHeadModel.from_pretrained(args.checkpoint, dtype=torch.float32)
    model.to(args.device).eval()

    @torch.no_grad()
    def logits_of(ids):
        x = torch.tensor([ids], dtype=torch.long, device=args.device)
        return model(input_ids=x, use_cache=False).logits[0].float().cpu()   # [len(ids), vocab]

    cases = []
    for prompt, n in zip(prompts, steps):
        if isinstance(prompt, str):
            if tok is None:
                sys.exit(f"a text prompt needs vocab.json and merges.txt in {args.checkpoint}")
            prompt_ids = encode(tok, prompt)
        else:
            prompt_ids = [int(i) for i in prompt]
        every = logits_of(prompt_ids)
        ids, greedy, margins, top5 = list(prompt_ids), [], [], []
        for step in range(n):
            values, indices = torch.topk(logits_of(ids)[-1], TOP_K)   # full recompute
            token = int(indices[0])
            margins.append((values[0] - values[1]).item())            # float32 difference
            if step < TOP5_STEPS:
                top5.append({"ids": [int(i) for i in indices], "logits": [v.item() for v in values]})
            greedy.append(token)
            ids.append(token)
        case = {"prompt": prompt, "prompt_ids": prompt_ids, "greedy_ids": greedy}
        if tok is not None:
            case["text"] = tok.decode(greedy, skip_special_tokens=False)
        case["min_margin"] = min(margins)
        case["margins"] = [round(m, MARGIN_DECIMALS) for m in margins]
        case["first_steps_top5"] = top5
        case["prompt_logits_last_first16"] = [round(v.item(), LOGIT_DECIMALS)
                                              for v in every[-1, :FIRST_LOGITS]]
        case["prompt_logits_all_positions_sum"] = [round(every[p].sum().item(), SUM_DECIMALS)
                                                   for p in range(len(prompt_ids))]
        cases.append(case)
        print(f"{name}: prompt {prompt!r}: {n} steps, min margin {case['min_margin']:.5g}")

    source = MODEL_SOURCE.format(transformers=transformers.__version__, torch=torch.__version__)
    write(args.out, {"model": name, "layout": layout, "source": source, "cases": cases})


def tokenizer_golden(args):
    import tokenizers
    tok = hf_tokenizer(args.vocab, args.merges)
    texts = list(args.text)
    if args.like:
        texts += [c["text"] for c in read_json(args.like)["cases"]]
    cases = [{"text": t, "ids": encode(tok, t)} for t in texts]
    write(args.out, {"source": TOKENIZER_SOURCE.format(tokenizers=tokenizers.__version__),
                     "cases": cases})


# --- checking (standard library only) ------------------------------------------------------

def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def bytes_to_unicode():
    """GPT-2's map from bytes to the printable characters its vocabulary spells them with."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class Decoder:
    """Byte-level BPE decoding from vocab.json alone (ids to bytes to text)."""

    def __init__(self, vocab_path):
        byte_of = {c: b for b, c in bytes_to_unicode().items()}
        self.pieces = {i: bytes(byte_of[c] for c in s) for s, i in read_json(vocab_path).items()}

    def __call__(self, ids):
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", errors="replace")


def is_int_list(v):
    return isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def is_float32(v):
    return struct.unpack("f", struct.pack("f", v))[0] == v


def rounded(v, decimals):
    return round(v, decimals) == v


class Problems(list):
    def check(self, ok, where, what):
        if not ok:
            self.append(f"{where}: {what}")
        return ok


def check_model_golden(path, data, p):
    folder = os.path.dirname(os.path.abspath(path))
    config = os.path.join(folder, "config.json")
    config = read_json(config) if os.path.exists(config) else {}
    vocab_size, n_positions = config.get("vocab_size"), config.get("n_positions")
    vocab, merges = os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
    decode = Decoder(vocab) if os.path.exists(vocab) and os.path.exists(merges) else None

    p.check(list(data) == ["model", "layout", "source", "cases"], path,
            f"top-level keys {list(data)}, want model, layout, source, cases")
    p.check(isinstance(data.get("model"), str) and data.get("model"), path, "no model name")
    p.check(isinstance(data.get("layout"), str) and data.get("layout"), path, "no layout")
    p.check(MODEL_SOURCE_RE.match(str(data.get("source", ""))), path,
            "source does not name transformers' GPT2LMHeadModel in float32 and torch")
    cases = data.get("cases")
    if not p.check(isinstance(cases, list) and cases, path, "no cases"):
        return 0
    tokens = 0
    for k, c in enumerate(cases):
        at = f"{path} case {k}"
        keys = [key for key in CASE_KEYS if key != "text" or decode is not None]
        if not p.check(list(c) == keys, at, f"keys {list(c)}, want {keys}"):
            continue
        prompt, prompt_ids, greedy = c["prompt"], c["prompt_ids"], c["greedy_ids"]
        margins, top5 = c["margins"], c["first_steps_top5"]
        p.check(is_int_list(prompt_ids) and prompt_ids, at, "prompt_ids: not a non-empty id list")
        p.check(is_int_list(greedy) and greedy, at, "greedy_ids: not a non-empty id list")
        if isinstance(prompt, str):
            p.check(decode is not None, at, "a text prompt without vocab.json and merges.txt")
            if decode is not None:
                p.check(decode(prompt_ids) == prompt, at, "prompt_ids do not decode to the prompt")
        else:
            p.check(prompt == prompt_ids, at, "an id-list prompt differs from prompt_ids")
        if decode is not None:
            p.check(decode(greedy) == c["text"], at, "text is not the decoded greedy_ids")
        if vocab_size is not None:
            p.check(all(0 <= i < vocab_size for i in prompt_ids + greedy), at,
                    f"an id outside the vocabulary ({vocab_size})")
        if n_positions is not None:
            p.check(len(prompt_ids) + len(greedy) <= n_positions, at,
                    f"prompt + greedy longer than n_positions ({n_positions})")
        tokens += len(greedy)
        # margins: one per step, >= 0, rounded; min_margin their unrounded minimum.
        if p.check(isinstance(margins, list) and all(is_num(m) for m in margins), at,
                   "margins: not a list of numbers"):
            p.check(len(margins) == len(greedy), at,
                    f"{len(margins)} margins for {len(greedy)} greedy ids")
            p.check(all(m >= 0 for m in margins), at, "a negative margin")
            p.check(all(rounded(m, MARGIN_DECIMALS) for m in margins), at,
                    f"a margin not rounded to {MARGIN_DECIMALS} decimals")
            mm = c["min_margin"]
            if p.check(is_num(mm) and margins, at, "min_margin: not a number"):
                p.check(round(mm, MARGIN_DECIMALS) == min(margins), at,
                        f"min_margin {mm} does not round to min(margins) {min(margins)}")
                p.check(is_float32(mm), at, "min_margin is not a float32 value")
        # first_steps_top5: the first steps' top 5, consistent with greedy_ids and margins.
        if p.check(isinstance(top5, list) and len(top5) == min(TOP5_STEPS, len(greedy)), at,
                   f"first_steps_top5: want {min(TOP5_STEPS, len(greedy))} steps"):
            for s, step in enumerate(top5):
                sat = f"{at} first_steps_top5[{s}]"
                if not p.check(isinstance(step, dict) and list(step) == ["ids", "logits"], sat,
                               "want keys ids, logits"):
                    continue
                ids, values = step["ids"], step["logits"]
                if not p.check(is_int_list(ids) and len(ids) == TOP_K and len(set(ids)) == TOP_K
                               and isinstance(values, list) and len(values) == TOP_K
                               and all(is_num(v) for v in values), sat,
                               f"want {TOP_K} distinct ids and {TOP_K} logits"):
                    continue
                p.check(all(a >= b for a, b in zip(values, values[1:])), sat,
                        "logits not in descending order")
                p.check(all(is_float32(v) for v in values), sat, "a logit is not a float32 value")
                if s < len(greedy):
                    p.check(ids[0] == greedy[s], sat, f"top-1 {ids[0]} is not greedy_ids[{s}]")
                if s < len(margins):
                    top_gap = struct.unpack("f", struct.pack("f", values[0] - values[1]))[0]
                    p.check(round(top_gap, MARGIN_DECIMALS) == margins[s], sat,
                            f"top-1 minus top-2 {top_gap} is not margins[{s}] {margins[s]}")
        first16 = c["prompt_logits_last_first16"]
        if p.check(isinstance(first16, list) and all(is_num(v) for v in first16)
                   and len(first16) == min(FIRST_LOGITS, vocab_size or FIRST_LOGITS), at,
                   f"prompt_logits_last_first16: want {FIRST_LOGITS} numbers"):
            p.check(all(rounded(v, LOGIT_DECIMALS) for v in first16), at,
                    f"a prompt logit not rounded to {LOGIT_DECIMALS} decimals")
            # The first step's top 5 are logits of the same position.
            if top5 and isinstance(top5[0], dict):
                for i, v in zip(top5[0].get("ids", []), top5[0].get("logits", [])):
                    if isinstance(i, int) and 0 <= i < len(first16) and is_num(v):
                        p.check(round(v, LOGIT_DECIMALS) == first16[i], at,
                                f"logit {i}: {first16[i]} here, {v} in first_steps_top5[0]")
        sums = c["prompt_logits_all_positions_sum"]
        if p.check(isinstance(sums, list) and all(is_num(v) for v in sums), at,
                   "prompt_logits_all_positions_sum: not a list of numbers"):
            p.check(len(sums) == len(prompt_ids), at,
                    f"{len(sums)} logit sums for {len(prompt_ids)} prompt positions")
            p.check(all(rounded(v, SUM_DECIMALS) for v in sums), at,
                    f"a logit sum not rounded to {SUM_DECIMALS} decimals")
    return tokens


def check_tokenizer_golden(path, data, p, vocab):
    p.check(list(data) == ["source", "cases"], path, f"top-level keys {list(data)}, want source, cases")
    p.check(TOKENIZER_SOURCE_RE.match(str(data.get("source", ""))), path,
            "source does not name Hugging Face tokenizers' BPE(vocab.json, merges.txt)")
    decode = Decoder(vocab) if vocab and os.path.exists(vocab) else None
    p.check(decode is not None, path, f"no vocab.json to decode the ids with ({vocab})")
    cases = data.get("cases")
    if not p.check(isinstance(cases, list) and cases, path, "no cases"):
        return 0
    for k, c in enumerate(cases):
        at = f"{path} case {k}"
        if not p.check(isinstance(c, dict) and list(c) == ["text", "ids"], at, "want keys text, ids"):
            continue
        p.check(isinstance(c["text"], str), at, "text is not a string")
        if p.check(is_int_list(c["ids"]), at, "ids: not a list of ids") and decode is not None:
            p.check(all(i in decode.pieces for i in c["ids"]), at, "an id outside vocab.json")
            if all(i in decode.pieces for i in c["ids"]):
                p.check(decode(c["ids"]) == c["text"], at, "ids do not decode to the text")
    return len(cases)


def check(paths, vocab):
    failed = False
    for path in paths:
        p = Problems()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = json.loads(text)
        p.check(text == dump(data), path,
                "not serialised as json.dumps(indent=1, ensure_ascii=False) and a newline")
        if isinstance(data, dict) and "model" in data:
            tokens = check_model_golden(path, data, p)
            summary = (f"model golden {data['model']!r}: {len(data.get('cases', []))} cases, "
                       f"{tokens} greedy tokens")
            margins = [m for c in data.get("cases", []) for m in c.get("margins", [])]
            tiny = sum(1 for m in margins if m < 0.01)
            summary += f", {tiny} step(s) with a margin below 0.01"
        else:
            n = check_tokenizer_golden(path, data, p, vocab)
            summary = f"tokenizer golden: {n} texts"
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        print(f"{path}: {summary} (sha256 {sha}...): {'OK' if not p else 'PROBLEMS'}")
        for problem in p:
            print(f"  {problem}")
        failed |= bool(p)
    return 1 if failed else 0


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    default_vocab = os.path.join(here, "..", "..", "models", "kjv-tiny", "vocab.json")
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", nargs="+", metavar="FILE",
                    help="check existing goldens' structure and consistency, then exit")
    ap.add_argument("--vocab", default=default_vocab,
                    help="vocab.json for --check of a tokenizer golden (default: kjv-tiny's)")
    sub = ap.add_subparsers(dest="command")
    m = sub.add_parser("model", help="a model's golden.json")
    m.add_argument("checkpoint", help="a Hugging Face GPT-2 folder (config.json, model.safetensors)")
    m.add_argument("--out", required=True)
    m.add_argument("--like", help="take name, layout, prompts and step counts from this golden")
    m.add_argument("--name", help="the golden's model field (default: the folder's name)")
    m.add_argument("--layout", help="the golden's layout field: how the checkpoint stores weights")
    m.add_argument("--prompt", action="append", default=[], help="a text prompt (repeatable)")
    m.add_argument("--prompt-ids", action="append", default=[], metavar="ID,ID,...",
                   help="a prompt of ids (repeatable)")
    m.add_argument("--steps", type=int, help="greedy steps per prompt")
    m.add_argument("--device", default="cpu", help="torch device (default cpu)")
    t = sub.add_parser("tokenizer", help="gpt2-tokenizer-golden.json")
    t.add_argument("--vocab", required=True)
    t.add_argument("--merges", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--like", help="take the texts of this tokenizer golden")
    t.add_argument("--text", action="append", default=[], help="a text (repeatable)")
    args = ap.parse_args(argv)
    if args.check:
        return check(args.check, args.vocab)
    if args.command == "model":
        model_golden(args)
    elif args.command == "tokenizer":
        tokenizer_golden(args)
    else:
        ap.error("give --check FILE..., or the command model or tokenizer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
