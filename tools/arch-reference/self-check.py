#!/usr/bin/python3
"""Self-consistency checks of reference.py, for the architectures llama.cpp 4747 cannot run
(qwen3, gemma3) and, as controls, the ones it can. An offline developer tool (tests and CI never
run it). Give it the models test-arch writes (LLAMA_ARCH_WRITE_MODELS=DIR test-arch
--gtest_filter=ArchReference.WriteModels):

    /usr/bin/python3 tools/arch-reference/self-check.py /tmp/arch-models [--tokens 1,2,3,...]

For each of llama / qwen2 / qwen3 / phi3 / gemma2 / gemma3 found there (NAME-f32.gguf) it checks:
  1. causality: the logits of every prefix equal the first rows of the full prompt's logits;
  2. an independent second implementation (plain numpy, loops over heads and positions,
     explicit rotations and window tests) gives the same logits (max abs < 1e-9);
  3. qwen3 / gemma3: per-head q/k RMSNorm -> the logits do not change when each query/key head's
     rows of attn_q / attn_k are scaled by its own positive constant; qwen2 (no q/k norm) is the
     negative control and must change;
  4. gemma3: the local/global split matters: computing with every layer global (or every layer
     local, or the local rope base on global layers) changes the logits of a prompt longer than
     the window.
Prints one line per check and exits 1 if any fails.
"""
import argparse
import importlib.util
import math
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("reference", os.path.join(HERE, "reference.py"))
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)


class Opts:
    query_pre_attn_scalar = 0.0
    emulate_ggml_gelu = False


def forward(g, tokens):
    hp = ref.HParams(g)
    with torch.no_grad():
        return ref.FAMILIES[hp.arch](g, hp, tokens, Opts()).numpy()


# ---------------- independent numpy implementation ----------------

def np_rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def np_rope(vec, pos, n_rot, base, scale, neox):
    """Rotate one head vector at position pos, pair by pair."""
    out = vec.copy()
    for i in range(n_rot // 2):
        theta = pos * scale / (base ** (2.0 * i / n_rot))
        a, b = (i, i + n_rot // 2) if neox else (2 * i, 2 * i + 1)
        c, s = math.cos(theta), math.sin(theta)
        out[a] = vec[a] * c - vec[b] * s
        out[b] = vec[a] * s + vec[b] * c
    return out


def np_forward(g, tokens):
    m = g.meta
    arch = m["general.architecture"]
    cache = {}

    def W(name):
        if name not in cache:
            cache[name] = g.tensor(name).numpy()
        return cache[name]

    has = g.has
    E = int(m[f"{arch}.embedding_length"])
    NL = int(m[f"{arch}.block_count"])
    H = int(m[f"{arch}.attention.head_count"])
    HKV = int(m.get(f"{arch}.attention.head_count_kv", H))
    D = int(m.get(f"{arch}.attention.key_length", E // H))
    n_rot = int(m.get(f"{arch}.rope.dimension_count", D))
    eps = float(m[f"{arch}.attention.layer_norm_rms_epsilon"])
    base = float(m.get(f"{arch}.rope.freq_base", 10000.0))
    factor = float(m.get(f"{arch}.rope.scaling.factor", 0.0) or 0.0)
    window = int(m.get(f"{arch}.attention.sliding_window", 0) or 0)
    gemma = arch.startswith("gemma")
    T = len(tokens)
    emb = W("token_embd.weight")
    x = emb[tokens].copy()
    if gemma:
        x *= math.sqrt(E)
    for il in range(NL):
        p = f"blk.{il}."
        # per-layer attention settings
        l_base, l_scale, l_window, softcap = base, 1.0, 0, 0.0
        if arch == "llama" or arch == "qwen2" or arch == "qwen3":
            l_scale = 1.0 / factor if factor else 1.0
        elif arch == "phi3":
            l_window = window
        elif arch == "gemma2":
            l_window = window if il % 2 == 0 else 0
            softcap = float(m.get("gemma2.attn_logit_softcapping", 50.0))
        elif arch == "gemma3":
            if (il + 1) % 6 == 0:
                l_scale = 1.0 / factor if factor else 1.0
            else:
                l_base, l_window = 10000.0, window
        h = np_rms(x, W(p + "attn_norm.weight"), eps)
        if has(p + "attn_qkv.weight"):
            qkv = h @ W(p + "attn_qkv.weight").T
            q, k, v = qkv[:, :H * D], qkv[:, H * D:(H + HKV) * D], qkv[:, (H + HKV) * D:]
        else:
            q, k, v = (h @ W(p + f"attn_{n}.weight").T + (W(p + f"attn_{n}.bias") if has(p + f"attn_{n}.bias") else 0)
                       for n in "qkv")
        q = q.reshape(T, H, D)
        k = k.reshape(T, HKV, D)
        v = v.reshape(T, HKV, -1)
        out = np.zeros((T, H, v.shape[-1]))
        qscale = 1.0 / math.sqrt(D)
        for t in range(T):
            for hh in range(H):
                kvh = hh // (H // HKV)
                qv = q[t, hh]
                if has(p + "attn_q_norm.weight"):
                    qv = np_rms(qv, W(p + "attn_q_norm.weight"), eps)
                qv = np_rope(qv, t, n_rot, l_base, l_scale, arch != "llama")
                scores = np.full(T, -np.inf)
                for j in range(t + 1):
                    if l_window and t - j >= l_window:
                        continue
                    kv = k[j, kvh]
                    if has(p + "attn_k_norm.weight"):
                        kv = np_rms(kv, W(p + "attn_k_norm.weight"), eps)
                    kv = np_rope(kv, j, n_rot, l_base, l_scale, arch != "llama")
                    s = float(qv @ kv) * qscale
                    if softcap:
                        s = softcap * math.tanh(s / softcap)
                    scores[j] = s
                pr = np.exp(scores - scores.max())
                pr /= pr.sum()
                out[t, hh] = pr @ v[:, kvh]
        a = out.reshape(T, -1) @ W(p + "attn_output.weight").T
        if gemma:
            a = np_rms(a, W(p + "post_attention_norm.weight"), eps)
        x = x + a
        h = np_rms(x, W(p + "ffn_norm.weight"), eps)
        if arch == "phi3":
            gu = h @ W(p + "ffn_up.weight").T
            n_ff = gu.shape[1] // 2
            gate, up = gu[:, :n_ff], gu[:, n_ff:]
        else:
            gate, up = h @ W(p + "ffn_gate.weight").T, h @ W(p + "ffn_up.weight").T
        if gemma:
            act = 0.5 * gate * (1 + np.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate ** 3)))
        else:
            act = gate / (1 + np.exp(-gate))
        f = (act * up) @ W(p + "ffn_down.weight").T
        if gemma:
            f = np_rms(f, W(p + "post_ffw_norm.weight"), eps)
        x = x + f
    x = np_rms(x, W("output_norm.weight"), eps)
    out = x @ (W("output.weight") if has("output.weight") else emb).T
    if arch == "gemma2":
        cap = float(m.get("gemma2.final_logit_softcapping", 30.0))
        out = cap * np.tanh(out / cap)
    return out


# ---------------- checks ----------------

class Scaled:
    """A GGUF view whose attn_q / attn_k weights have each head's rows scaled by a constant."""

    def __init__(self, g, seed=0):
        self.g = g
        self.meta, self.tensors, self.has, self.get = g.meta, g.tensors, g.has, self.get_
        hp = ref.HParams(g)
        rng = np.random.default_rng(seed)
        self.scales = {}
        for il in range(hp.n_layer):
            self.scales[f"blk.{il}.attn_q.weight"] = rng.uniform(0.5, 2.0, hp.n_head)
            self.scales[f"blk.{il}.attn_k.weight"] = rng.uniform(0.5, 2.0, hp.n_head_kv)

    def tensor(self, name):
        t = self.g.tensor(name)
        if name in self.scales:
            c = torch.from_numpy(self.scales[name]).repeat_interleave(t.shape[0] // len(self.scales[name]))
            t = t * c[:, None]
        return t

    def get_(self, name):
        return self.tensor(name) if self.has(name) else None


def main():
    ap = argparse.ArgumentParser(description="self-consistency checks of reference.py")
    ap.add_argument("models", help="folder with NAME-f32.gguf from test-arch (LLAMA_ARCH_WRITE_MODELS)")
    ap.add_argument("--tokens", default="1,400,30,12,200,7,99,300,5,17,250,3,88,451,61,120,9,333,42,500")
    args = ap.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    failed = 0

    def report(name, ok, detail):
        nonlocal failed
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")

    for arch in ["llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"]:
        path = os.path.join(args.models, arch + "-f32.gguf")  # test-arch's ArchReference.WriteModels
        if not os.path.exists(path):
            continue
        g = ref.GGUF(path)
        full = forward(g, tokens)
        std = full.std()
        report(f"{arch} runs", np.isfinite(full).all() and std > 0.05, f"logit std {std:.3g}")
        worst = max(np.abs(forward(g, tokens[:k]) - full[:k]).max() for k in (1, 5, 9, 13))
        report(f"{arch} causality", worst < 1e-10, f"max |prefix - full| {worst:.2e}")
        d = np.abs(np_forward(g, tokens) - full).max()
        report(f"{arch} second implementation", d < 1e-9, f"max abs diff {d:.2e}")
        if arch in ("qwen2", "qwen3", "gemma3"):
            d = np.abs(forward(Scaled(g), tokens) - full).max() / std
            if arch == "qwen2":
                report(f"{arch} per-head q/k scaling changes logits (control)", d > 1e-2, f"max rel change {d:.2e}")
            else:
                report(f"{arch} per-head q/k scaling leaves logits (q/k norm)", d < 1e-4, f"max rel change {d:.2e}")
        if arch == "gemma3":
            saved = ref.GEMMA3_SLIDING_WINDOW_PATTERN
            try:
                for label, pattern in (("all layers global", 1), ("all layers local", 10 ** 9)):
                    ref.GEMMA3_SLIDING_WINDOW_PATTERN = pattern
                    d = np.abs(forward(g, tokens) - full).max() / std
                    report(f"{arch} local/global split matters ({label})", d > 1e-3, f"max rel change {d:.2e}")
            finally:
                ref.GEMMA3_SLIDING_WINDOW_PATTERN = saved
            hp = ref.HParams(g)
            saved_base = hp.rope_base_swa
            g.meta["gemma3.rope.freq_base_swa"] = float(g.meta["gemma3.rope.freq_base"])
            d = np.abs(forward(g, tokens) - full).max() / std
            del g.meta["gemma3.rope.freq_base_swa"]
            report(f"{arch} local rope base matters (10000 vs {hp.rope_base:g})", d > 1e-3 and saved_base == 10000.0,
                   f"max rel change {d:.2e}")
    if failed:
        print(f"{failed} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
