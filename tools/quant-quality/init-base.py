#!/usr/bin/env python3
"""Writes a llama2.c legacy (version 0) checkpoint initialized for training: weight matrices
N(0, 0.02), token embeddings N(0, 1), norms one. train.sh trains a LoRA adapter of full rank
(rank = the matrices' smaller side, alpha = rank) on every matrix of it and merges it: the
merged W0 + B A is what full training from this initialization gives, reparametrized. (The base
cannot be zero: two zero matrices in a row, V then O or up then down, give each other zero
gradients, and only the output matrix would learn.)

usage: init-base.py OUT dim hidden layers heads kv_heads vocab seq_len [seed]
"""
import array
import os
import random
import struct
import sys

MATRIX_STD = 0.02


def main():
    if len(sys.argv) not in (9, 10):
        sys.exit(__doc__)
    out = sys.argv[1]
    dim, hid, layers, heads, kv_heads, vocab, seq = (int(a) for a in sys.argv[2:9])
    seed = int(sys.argv[9]) if len(sys.argv) == 10 else 0
    hd = dim // heads
    rng = random.Random(seed)
    normal = lambda n, std: array.array("f", (rng.gauss(0.0, std) for _ in range(n)))
    zeros = lambda n: array.array("f", bytes(4 * n))
    ones = lambda n: array.array("f", [1.0]) * n
    w = lambda n: normal(n, MATRIX_STD)
    parts = [
        normal(vocab * dim, 1.0),                  # token embeddings
        ones(layers * dim),                        # attention norms
        w(layers * dim * dim),                     # wq
        w(layers * dim * kv_heads * hd),           # wk
        w(layers * dim * kv_heads * hd),           # wv
        w(layers * dim * dim),                     # wo
        ones(layers * dim),                        # ffn norms
        w(layers * dim * hid),                     # w1 (gate)
        w(layers * hid * dim),                     # w2 (down)
        w(layers * dim * hid),                     # w3 (up)
        ones(dim),                                 # final norm
        zeros(seq * hd // 2), zeros(seq * hd // 2),  # freq_cis (legacy, unused)
        w(vocab * dim),                            # classifier (separate: vocab < 0)
    ]
    with open(out + ".tmp", "wb") as f:
        f.write(struct.pack("7i", dim, hid, layers, heads, kv_heads, -vocab, seq))
        for p in parts:
            f.write(p.tobytes())
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
