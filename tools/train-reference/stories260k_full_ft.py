#!/usr/bin/python3
"""PyTorch reference loss curve: full fine-tuning of stories260K with AdamW on one fixed sequence.

An offline tool (tests and CI never run it): it wrote tests/data/stories260k-full-ft-adamw.txt,
which tests/llama/test-train-llama.cpp holds the library's training loop to.

  - The weights come from the GGUF file (parsed in llama_ref.py, shared with stories260k_lora.py:
    header, key-value pairs, tensor infos, aligned F32 data), the same file the test loads.
  - The llama forward (llama_ref.forward) is written out in float32: RMSNorm (eps from the file),
    RoPE on adjacent pairs (2i, 2i+1) as llama2.c and ggml's normal mode, grouped-query attention
    (query head h reads key/value head h // (n_head / n_head_kv)), SwiGLU, untied or tied output
    as the file has.
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

import torch

from llama_ref import adamw_curve, config, forward, read_gguf, read_ids


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
    cfg = config(meta)
    n_embd, n_head = cfg["n_embd"], cfg["n_head"]
    W.pop("rope_freqs.weight", None)  # constants, not weights (stories260K has none)
    assert "rope_freqs.weight" not in W
    P = {name: torch.nn.Parameter(torch.from_numpy(a).to(dtype)) for name, a in W.items()}

    ids = read_ids(args.ids)
    tokens = torch.tensor(ids, dtype=torch.long)
    inp, tgt = tokens[:-1], tokens[1:]

    # mean cross-entropy over the targets
    losses = adamw_curve(P.values(), lambda: torch.nn.functional.cross_entropy(forward(P, inp, cfg), tgt), args.steps)

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
