"""Shared parts of the PyTorch training references: a GGUF reader and the llama forward pass.

An offline tool (tests and CI never run it), imported by stories260k_full_ft.py (full fine-tuning)
and stories260k_lora.py (LoRA), which wrote the curves in tests/data/.

  - read_gguf: header, key-value pairs, tensor infos, aligned F32 data; every tensor comes back as a
    float32 numpy array in PyTorch's row-major shape (a ggml matrix ne = [in, out] is (out, in)).
  - config: the llama hyper-parameters the forward needs, from the GGUF metadata.
  - forward: the llama forward written out in plain torch (float32 or float64, as the weights are):
    RMSNorm (eps from the file), RoPE on adjacent pairs (2i, 2i+1) as llama2.c and ggml's normal
    mode, grouped-query attention (query head h reads key/value head h // (n_head / n_head_kv)),
    SwiGLU, untied or tied output as the file has; optionally LoRA on any of the projections.
  - read_ids: token ids as llama-tokenize --ids prints them.

Usage: import it from a script in this folder (Debian's /usr/bin/python3 with python3-torch and
python3-numpy), e.g.
    from llama_ref import read_gguf, config, forward, read_ids
"""
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


def config(meta):
    """The llama hyper-parameters forward() needs (plus n_embd), from the GGUF metadata."""
    arch = meta["general.architecture"]
    assert arch == "llama", arch
    n_embd, n_head = meta["llama.embedding_length"], meta["llama.attention.head_count"]
    cfg = dict(
        n_layer=meta["llama.block_count"], n_head=n_head,
        n_head_kv=meta.get("llama.attention.head_count_kv", n_head), head_dim=n_embd // n_head,
        eps=meta.get("llama.attention.layer_norm_rms_epsilon", 1e-5),
        rope_base=meta.get("llama.rope.freq_base", 10000.0), n_embd=n_embd)
    assert meta.get("llama.rope.dimension_count", cfg["head_dim"]) == cfg["head_dim"]
    return cfg


def read_ids(path):
    """Token ids from a file as llama-tokenize --ids prints them ([1, 291, ...]) or whitespace-separated."""
    return [int(t) for t in re.findall(r"-?\d+", open(path).read())]


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def forward(P, tokens, cfg, lora=None, lora_scale=1.0):
    """Logits [T, n_vocab] of every position of tokens (causal).

    P: {GGUF tensor name: torch tensor}, matrices as (out, in). lora (optional): {GGUF weight name,
    e.g. "blk.0.attn_q.weight": (A, B)} with A (r, in) and B (out, r) as PEFT stores lora_A.weight
    and lora_B.weight; a projection W with an adapter computes
        y = x W^T + lora_scale * (x A^T) B^T        (lora_scale = alpha / r)
    in PEFT's order: the base product first, then (x A^T) B^T, scaled, added. Without lora (or for a
    weight not in it) the operations are exactly those of the plain forward.
    """
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

    def lin(h, name):  # h W^T (+ the adapter's term)
        y = h @ P[name].T
        if lora is not None and name in lora:
            A, B = lora[name]
            y = y + ((h @ A.T) @ B.T) * lora_scale
        return y

    mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    x = P["token_embd.weight"][tokens]
    for il in range(cfg["n_layer"]):
        L = lambda n: P[f"blk.{il}.{n}.weight"]
        M = lambda h, n: lin(h, f"blk.{il}.{n}.weight")
        h = rms_norm(x, L("attn_norm"), eps)
        q = rope(M(h, "attn_q").view(T, n_head, hd))
        k = rope(M(h, "attn_k").view(T, n_kv, hd))
        v = M(h, "attn_v").view(T, n_kv, hd)
        k = k.repeat_interleave(n_head // n_kv, dim=1)  # query head h reads kv head h // group
        v = v.repeat_interleave(n_head // n_kv, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
        o = torch.einsum("hts,shd->thd", att.softmax(-1), v).reshape(T, n_head * hd)
        x = x + M(o, "attn_output")
        h = rms_norm(x, L("ffn_norm"), eps)
        x = x + M(torch.nn.functional.silu(M(h, "ffn_gate")) * M(h, "ffn_up"), "ffn_down")
    x = rms_norm(x, P["output_norm.weight"], eps)
    out = P["output.weight"] if "output.weight" in P else P["token_embd.weight"]
    return x @ out.T


def adamw_curve(params, loss_fn, steps):
    """torch.optim.AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01) on params for
    `steps` steps; returns the losses after 0..steps steps (loss_fn() recomputes the loss)."""
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for step in range(steps + 1):
        loss = loss_fn()
        losses.append(loss.item())
        print(f"step {step:3d}  loss {losses[-1]:.9g}")
        if step == steps:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses
