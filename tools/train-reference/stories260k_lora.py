#!/usr/bin/python3
"""PyTorch reference loss curve: LoRA fine-tuning of stories260K with AdamW on one fixed sequence.

An offline tool (tests and CI never run it): it wrote tests/data/stories260k-lora-adamw.txt (the
curve) and tests/data/stories260k-lora-init/ (the adapter it starts from, as a PEFT adapter
directory), which the library's LoRA training test is held to.

  - The weights and the llama forward are those of stories260k_full_ft.py, shared in llama_ref.py
    (GGUF reader; float32 forward: RMSNorm with the file's eps, RoPE on adjacent pairs as ggml's
    normal mode, grouped-query attention, SwiGLU).
  - The base weights are frozen. LoRA r 8, alpha 16 (scale alpha/r = 2) on wq, wk, wv, wo of every
    layer (PEFT's q_proj, k_proj, v_proj, o_proj): y = x W^T + (alpha/r) (x A^T) B^T, with A (r, in)
    and B (out, r) as PEFT stores lora_A.weight and lora_B.weight.
  - A is initialised as PEFT does (torch.nn.init.kaiming_uniform_(A, a=sqrt(5)) on a float32 tensor
    of shape (r, in), i.e. uniform in +-1/sqrt(in)), drawn after torch.manual_seed(seed) in the order
    layer 0..n-1, and within a layer q, k, v, o; B is zero, so step 0 is the base model.
  - torch.optim.AdamW over the LoRA tensors only (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay
    0.01 on every A and B), every step on the whole sequence: the loss is the mean cross-entropy of
    the n-1 next tokens. Line k of the output is the loss after k optimizer steps (line 0: the base
    model).
  - The token ids come from our own tokenizer (the text is the shared lora-sentences.txt):
        build/bin/llama-tokenize -m ../shared/models/stories260K.gguf \
            -f ../shared/reference/lora-sentences.txt --ids > /tmp/ids.txt
  - --init-out DIR writes the initial adapter (A as drawn, B zeros, float32) as PEFT saves one:
    adapter_config.json and adapter_model.safetensors (written here by hand, then read back and
    compared), tensor names base_model.model.model.layers.{i}.self_attn.{q,k,v,o}_proj.lora_{A,B}.weight.

Usage (Debian's python3-torch and python3-numpy):
    /usr/bin/python3 tools/train-reference/stories260k_lora.py \
        --model ../shared/models/stories260K.gguf --ids /tmp/ids.txt --seed 0 --steps 200 \
        --out tests/data/stories260k-lora-adamw.txt --init-out tests/data/stories260k-lora-init
--dtype float64 runs the same curve (same initial A, drawn in float32) in double precision, to see
how far float32 rounding alone moves it; --seed picks the draw of A (0).
"""
import argparse
import json
import math
import os
import shlex
import struct
import sys

import numpy as np
import torch

from llama_ref import adamw_curve, config, forward, read_gguf, read_ids

# GGUF projection -> PEFT / Hugging Face module name, in the order A is drawn within a layer.
TARGETS = (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "o_proj"))


def init_lora(W, cfg, r, seed):
    """{GGUF weight name: (A, B)} in float32, A drawn as PEFT does (after torch.manual_seed(seed))."""
    torch.manual_seed(seed)
    lora = {}
    for il in range(cfg["n_layer"]):
        for gguf_name, _ in TARGETS:
            name = f"blk.{il}.{gguf_name}.weight"
            n_out, n_in = W[name].shape
            A = torch.empty((r, n_in), dtype=torch.float32)
            torch.nn.init.kaiming_uniform_(A, a=math.sqrt(5))  # PEFT's reset_lora_parameters
            B = torch.zeros((n_out, r), dtype=torch.float32)
            lora[name] = (A, B)
    return lora


def peft_tensors(lora, cfg):
    """{PEFT tensor name: float32 numpy array} of the adapter.

    lora_A is never permuted. Our GGUF stores the rows of wq and wk in llama.cpp's permuted order
    (convert_hf_to_gguf's permute for RoPE on adjacent pairs), while PEFT's q_proj/k_proj lora_B rows
    are in Hugging Face order; B is zero here, so the order does not matter for this file, but a
    nonzero q/k lora_B would need its rows un-permuted before saving it for PEFT.
    """
    out = {}
    for il in range(cfg["n_layer"]):
        for gguf_name, hf_name in TARGETS:
            A, B = lora[f"blk.{il}.{gguf_name}.weight"]
            prefix = f"base_model.model.model.layers.{il}.self_attn.{hf_name}"
            out[f"{prefix}.lora_A.weight"] = A.detach().to(torch.float32).numpy()
            out[f"{prefix}.lora_B.weight"] = B.detach().to(torch.float32).numpy()
    return out


def write_safetensors(path, tensors):
    """safetensors file: u64 LE header length, JSON header (padded with spaces to a multiple of 8),
    then the raw little-endian data. Tensors in name order, as safetensors orders same-dtype ones."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, pos = [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        data = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [pos, pos + len(data)]}
        blobs.append(data)
        pos += len(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for data in blobs:
            f.write(data)


def read_safetensors(path):
    """(metadata, {name: numpy array}) of a safetensors file with F32 tensors; checks the layout."""
    buf = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    assert n % 8 == 0 and 8 + n <= len(buf), n
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None)
    data = buf[8 + n:]
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        assert info["dtype"] == "F32", (name, info["dtype"])
        b, e = info["data_offsets"]
        assert b == end and e - b == 4 * math.prod(info["shape"]), (name, info)  # contiguous, no gaps
        tensors[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"])
        end = e
    assert end == len(data), (end, len(data))
    return meta, tensors


def write_adapter(out_dir, lora, cfg, r, alpha):
    os.makedirs(out_dir, exist_ok=True)
    adapter_config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": r,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "target_modules": [hf for _, hf in TARGETS],
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "modules_to_save": None,
        "use_rslora": False,
        "base_model_name_or_path": "stories260K",
    }
    with open(os.path.join(out_dir, "adapter_config.json"), "w") as f:
        json.dump(adapter_config, f, indent=2)
        f.write("\n")
    tensors = peft_tensors(lora, cfg)
    path = os.path.join(out_dir, "adapter_model.safetensors")
    write_safetensors(path, tensors)
    # read it back: same names, shapes and bits
    meta, back = read_safetensors(path)
    assert meta == {"format": "pt"}, meta
    assert sorted(back) == sorted(tensors), (sorted(back), sorted(tensors))
    for name, a in tensors.items():
        assert back[name].shape == a.shape and np.array_equal(back[name].view(np.uint32), a.view(np.uint32)), name
    n_values = sum(a.size for a in tensors.values())
    print(f"wrote {out_dir}: {len(tensors)} tensors ({n_values} values), read back and compared: identical")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="../shared/models/stories260K.gguf")
    ap.add_argument("--ids", required=True, help="token ids (BOS first), as llama-tokenize --ids prints them")
    ap.add_argument("--out", help="where to write the curve (default: print only)")
    ap.add_argument("--init-out", help="directory for the initial adapter (PEFT layout)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    r, alpha = 8, 16

    meta, W = read_gguf(args.model)
    cfg = config(meta)
    n_embd, n_head = cfg["n_embd"], cfg["n_head"]
    W.pop("rope_freqs.weight", None)  # constants, not weights (stories260K has none)
    P = {name: torch.from_numpy(a).to(dtype) for name, a in W.items()}  # frozen: no gradients

    lora32 = init_lora(W, cfg, r, args.seed)
    if args.init_out:
        write_adapter(args.init_out, lora32, cfg, r, alpha)
    lora = {name: (torch.nn.Parameter(A.to(dtype)), torch.nn.Parameter(B.to(dtype)))
            for name, (A, B) in lora32.items()}
    params = [p for AB in lora.values() for p in AB]

    ids = read_ids(args.ids)
    tokens = torch.tensor(ids, dtype=torch.long)
    inp, tgt = tokens[:-1], tokens[1:]

    # mean cross-entropy over the targets
    losses = adamw_curve(params, lambda: torch.nn.functional.cross_entropy(
        forward(P, inp, cfg, lora=lora, lora_scale=alpha / r), tgt), args.steps)

    if args.out:
        n_params = sum(p.numel() for p in params)
        fmt = ".9g" if dtype == torch.float32 else ".17g"  # enough digits to give back the value
        command = " ".join(shlex.quote(a) for a in ["/usr/bin/python3"] + sys.argv)
        with open(args.out, "w") as f:
            f.write("# PyTorch reference loss curve (tools/train-reference/stories260k_lora.py): LoRA fine-tuning.\n"
                    f"# command: {command}\n"
                    f"# model: stories260K.gguf, base weights frozen, {args.dtype}\n"
                    f"#   (dim {n_embd}, {cfg['n_layer']} layers, {n_head} heads, {cfg['n_head_kv']} KV heads, rms eps {cfg['eps']:g},"
                    f" rope base {cfg['rope_base']:g}, adjacent pairs)\n"
                    f"# LoRA: r {r}, alpha {alpha} (scale {alpha / r:g}) on wq, wk, wv, wo of every layer (PEFT q_proj, k_proj, v_proj, o_proj),"
                    f" {len(params)} tensors ({n_params} values) trained\n"
                    f"#   A (r, in): torch.manual_seed({args.seed}), then kaiming_uniform_(A, a=sqrt(5)) in float32, layers 0..{cfg['n_layer'] - 1},"
                    " q, k, v, o within a layer (as tests/data/stories260k-lora-init holds it for seed 0); B (out, r) zeros\n"
                    f"# text: shared/reference/lora-sentences.txt, tokenized with BOS first: {len(ids)} tokens,"
                    f" loss = mean cross-entropy of the {len(ids) - 1} next tokens\n"
                    "# optimizer: torch.optim.AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01) over the LoRA tensors only"
                    " (weight decay on every A and B), the whole sequence every step\n"
                    f"# torch {torch.__version__}, CPU, {args.threads} threads\n"
                    f"# line k after the comments: the loss after k optimizer steps (k = 0..{args.steps}; 0 = the base model)\n"
                    f"# tokens: {' '.join(map(str, ids))}\n")
            for x in losses:
                f.write(f"{x:{fmt}}\n")


if __name__ == "__main__":
    main()
