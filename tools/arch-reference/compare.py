#!/usr/bin/python3
"""compare.py A.logits B.logits: compares two logits files (int32 n_tokens, int32 n_vocab,
int32 tokens[n], float32 logits[n][n_vocab]) and prints max |a-b|, max |a-b| / std(a),
mean KL(softmax(a) || softmax(b)) in nats over positions, top-1 agreement.
An offline developer tool (tests and CI never run it). Exit status 1 if the token lists differ."""
import sys

import numpy as np


def load(path):
    d = open(path, "rb").read()
    n, v = np.frombuffer(d[:8], "<i4")
    toks = np.frombuffer(d[8:8 + 4 * n], "<i4")
    logits = np.frombuffer(d[8 + 4 * n:8 + 4 * n + 4 * n * v], "<f4").reshape(n, v)
    return toks, logits.astype(np.float64)


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def compare(a, b):
    ta, la = load(a)
    tb, lb = load(b)
    if la.shape != lb.shape or not np.array_equal(ta, tb):
        return None
    pa, pb = log_softmax(la), log_softmax(lb)
    diff = np.abs(la - lb)
    return dict(n_tokens=la.shape[0], n_vocab=la.shape[1], max_abs=diff.max(),
                max_rel=diff.max() / la.std(), logit_std=la.std(),
                kl=(np.exp(pa) * (pa - pb)).sum(-1).mean(),
                top1=(la.argmax(-1) == lb.argmax(-1)).mean())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    r = compare(sys.argv[1], sys.argv[2])
    if r is None:
        print("token lists or shapes differ")
        sys.exit(1)
    print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
