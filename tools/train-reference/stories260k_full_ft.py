#!/usr/bin/python3
"""PyTorch reference loss curve: full fine-tuning of stories260K with AdamW on one fixed sequence.

An offline tool (tests and CI never run it): it wrote tests/data/stories260k-full-ft-adamw.txt,
which tests/test-train-llama.cpp holds the library's training loop to.

  - The weights come from the GGUF file (parsed here: header, key-value pairs, tensor infos,
    aligned F32 data), the same file the test loads.
  - The llama forward is written out in float32: RMSNorm (eps from the file), RoPE on adjacent
    pairs (2i, 2i+1) as llama2.c and ggml's normal mode, grouped-query attention (query head h
    reads key/value head h // (n_head / n_head_kv)), SwiGLU, untied or tied output as the file has.
  - The token ids come from our own tokenizer (the text is the shared lora-sentences.txt):
        build/bin/llama-tokenize -m ../shared/models/stories260K.gguf \
            -f ../shared/reference/lora-sentences.txt --ids > /tmp/ids.txt
  - Every weight is trained (norm weights too) with torch.optim.AdamW(lr 1e-3, betas 0.9/0.999,
    eps 1e-8, weight decay 0.01, which torch applies to every parameter), every step on the whole
    sequence: the loss is the mean cross-entropy of the n-1 next tokens. Line k of the output is
    the loss after k optimizer steps (line 0: the base model).

Usage (Debian's python3-torch and python3-numpy):
    /usr/bin/python3 tools/train-reference/stories260k_full_ft.py \
        --model ../shared/models/stories260K.gguf --ids /tmp/ids.txt \
        --out tests/data/stories260k-full-ft-adamw.txt
--dtype float64 runs the same curve in double precision (to see how far float32 rounding alone
moves it); --steps sets the number of optimizer steps (30).
"""
import argparse
import math
import re
import struct

import numpy as np
import torch


def read_gguf(path):
    """Returns (metadata dict, {tensor name: float32 numpy array in PyTorch's row-major shape})."""
    buf = open(path, "rb").read()
    off = 0

    def take(fmt):
        nonlocal off
        vals = struct.unpack_from("<" + fmt, buf, off)
        off += struct.calcsize("<" + fmt)
        return vals[0] if len(vals) == 1 else vals

    def string():
        nonlocal off
        n = take("Q")
        s = buf[off:off + n].decode("utf-8")
        off += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t in scalar:
            return take(scalar[t])
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        raise ValueError(f"GGUF value type {t}")

    magic, version, n_tensors, n_kv = take("4sIQQ")
    assert magic == b"GGUF" and version >= 2, (magic, version)
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        n_dims = take("I")
        dims = [take("Q") for _ in range(n_dims)]
        ggml_type, offset = take("I"), take("Q")
        assert ggml_type == 0, f"{name}: only F32 tensors are read here (type {ggml_type})"
        infos.append((name, dims, offset))
    align = meta.get("general.alignment", 32)
    data_start = (off + align - 1) // align * align
    tensors = {}
    for name, dims, offset in infos:
        n = math.prod(dims)
        a = np.frombuffer(buf, dtype="<f4", count=n, offset=data_start + offset)
        tensors[name] = a.reshape(list(reversed(dims))).copy()  # ggml's ne[0] is the fastest dimension
    return meta, tensors


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def forward(P, tokens, cfg):
    """Logits [T, n_vocab] of every position of tokens (causal)."""
    T = tokens.shape[0]
    n_head, n_kv, hd, eps = cfg["n_head"], cfg["n_head_kv"], cfg["head_dim"], cfg["eps"]
    dtype = P["token_embd.weight"].dtype
    # RoPE angles pos * base^(-2i/hd), i < hd/2, in double, then rounded to the working type.
    inv = cfg["rope_base"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = torch.tensor(np.outer(np.arange(T, dtype=np.float64), inv))
    cos, sin = ang.cos().to(dtype)[:, None, :], ang.sin().to(dtype)[:, None, :]

    def rope(x):  # [T, heads, hd], pairs (2i, 2i+1) rotated by angle i
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)

    mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    x = P["token_embd.weight"][tokens]
    for il in range(cfg["n_layer"]):
        L = lambda n: P[f"blk.{il}.{n}.weight"]
        h = rms_norm(x, L("attn_norm"), eps)
        q = rope((h @ L("attn_q").T).view(T, n_head, hd))
        k = rope((h @ L("attn_k").T).view(T, n_kv, hd))
        v = (h @ L("attn_v").T).view(T, n_kv, hd)
        k = k.repeat_interleave(n_head // n_kv, dim=1)  # query head h reads kv head h // group
        v = v.repeat_interleave(n_head // n_kv, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
        o = torch.einsum("hts,shd->thd", att.softmax(-1), v).reshape(T, n_head * hd)
        x = x + o @ L("attn_output").T
        h = rms_norm(x, L("ffn_norm"), eps)
        x = x + (torch.nn.functional.silu(h @ L("ffn_gate").T) * (h @ L("ffn_up").T)) @ L("ffn_down").T
    x = rms_norm(x, P["output_norm.weight"], eps)
    out = P["output.weight"] if "output.weight" in P else P["token_embd.weight"]
    return x @ out.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="../shared/models/stories260K.gguf")
    ap.add_argument("--ids", required=True, help="token ids (BOS first), as llama-tokenize --ids prints them")
    ap.add_argument("--out", help="where to write the curve (default: print only)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)

    meta, W = read_gguf(args.model)
    arch = meta["general.architecture"]
    assert arch == "llama", arch
    n_embd, n_head = meta["llama.embedding_length"], meta["llama.attention.head_count"]
    cfg = dict(
        n_layer=meta["llama.block_count"], n_head=n_head,
        n_head_kv=meta.get("llama.attention.head_count_kv", n_head), head_dim=n_embd // n_head,
        eps=meta.get("llama.attention.layer_norm_rms_epsilon", 1e-5),
        rope_base=meta.get("llama.rope.freq_base", 10000.0))
    assert meta.get("llama.rope.dimension_count", cfg["head_dim"]) == cfg["head_dim"]
    W.pop("rope_freqs.weight", None)  # constants, not weights (stories260K has none)
    assert "rope_freqs.weight" not in W
    P = {name: torch.nn.Parameter(torch.from_numpy(a).to(dtype)) for name, a in W.items()}

    ids = [int(t) for t in re.findall(r"-?\d+", open(args.ids).read())]
    tokens = torch.tensor(ids, dtype=torch.long)
    inp, tgt = tokens[:-1], tokens[1:]

    opt = torch.optim.AdamW(P.values(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for step in range(args.steps + 1):
        loss = torch.nn.functional.cross_entropy(forward(P, inp, cfg), tgt)  # mean over the targets
        losses.append(loss.item())
        print(f"step {step:3d}  loss {losses[-1]:.9g}")
        if step == args.steps:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()

    if args.out:
        n_params = sum(p.numel() for p in P.values())
        with open(args.out, "w") as f:
            f.write("# PyTorch reference loss curve (tools/train-reference/stories260k_full_ft.py).\n"
                    f"# model: stories260K.gguf, all {len(P)} weight tensors ({n_params} values) trained, {args.dtype}\n"
                    f"#   (dim {n_embd}, {cfg['n_layer']} layers, {n_head} heads, {cfg['n_head_kv']} KV heads, rms eps {cfg['eps']:g},"
                    f" rope base {cfg['rope_base']:g}, adjacent pairs)\n"
                    f"# text: shared/reference/lora-sentences.txt, tokenized with BOS first: {len(ids)} tokens,"
                    f" loss = mean cross-entropy of the {len(ids) - 1} next tokens\n"
                    "# optimizer: torch.optim.AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),"
                    " weight decay on every weight (norms included), the whole sequence every step\n"
                    f"# torch {torch.__version__}, CPU, {args.threads} threads\n"
                    f"# line k after the comments: the loss after k optimizer steps (k = 0..{args.steps}; 0 = the base model)\n"
                    f"# tokens: {' '.join(map(str, ids))}\n")
            for x in losses:
                f.write(f"{x:.9g}\n")


if __name__ == "__main__":
    main()
