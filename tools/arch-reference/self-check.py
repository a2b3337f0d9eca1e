#!/usr/bin/python3
"""Self-consistency checks of reference.py, for the architectures llama.cpp 4747 cannot run
(qwen3, gemma3, qwen3moe) and, as controls, the ones it can. An offline developer tool (tests and
CI never run it). Give it the models test-arch writes (LLAMA_ARCH_WRITE_MODELS=DIR test-arch
--gtest_filter=ArchReference.WriteModels):

    /usr/bin/python3 tools/arch-reference/self-check.py /tmp/arch-models [--tokens 1,2,3,...]

First, without any file, checks of moe_ffn on random tensors: with all experts identical it is
the dense FFN (renorm) or the dense FFN times the sum of the k selected probabilities (no
renorm); with k = n_expert it is the softmax-weighted mixture of all experts (either way); renorm
equals a softmax over the selected logits; k = 1 with renorm is the arg-max expert alone.

For each of llama / llama-moe / qwen2 / qwen2moe / qwen3 / qwen3moe / phi3 / gemma2 / gemma3
found there (NAME-f32.gguf; llama-moe is the llama architecture with llama.expert_count > 0) it
checks:
  1. causality: the logits of every prefix equal the first rows of the full prompt's logits;
  2. an independent second implementation (plain numpy, loops over heads and positions,
     explicit rotations and window tests, per-token expert routing) gives the same logits (max
     abs < 1e-9);
  3. qwen3 / gemma3 / qwen3moe: per-head q/k RMSNorm -> the logits do not change when each query/key head's
     rows of attn_q / attn_k are scaled by its own positive constant; qwen2 (no q/k norm) is the
     negative control and must change;
  4. gemma3: the local/global split matters: computing with every layer global (or every layer
     local, or the local rope base on global layers) changes the logits of a prompt longer than
     the window;
  5. MoE against the dense families: llama-moe / qwen3moe with every expert replaced by expert 0
     equal llama / qwen3 with that expert as the dense FFN (top-k renormalized); qwen2moe with
     identical experts and the shared expert switched off equals qwen2 only with top-k =
     n_expert, and differs with its own top-k (no renormalization); qwen2moe with the routed
     experts switched off and the shared-expert gate weights zero (sigmoid 0.5) equals qwen2
     with the shared expert as the FFN and ffn_down halved.
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


def np_silu(z):
    return z / (1.0 + np.exp(-z))


def np_moe(W, has, p, h, k, renorm):
    """MoE FFN token by token: softmax over the router logits, the k most probable experts (by a
    sort), weights renormalized to sum 1 or not, plus qwen2moe's sigmoid-gated shared expert."""
    router = W(p + "ffn_gate_inp.weight")
    gates, ups, downs = (W(p + f"ffn_{n}_exps.weight") for n in ("gate", "up", "down"))
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        z = router @ h[t]
        pr = np.exp(z - z.max())
        pr /= pr.sum()
        chosen = sorted(range(len(pr)), key=lambda e: -pr[e])[:k]
        total = sum(pr[e] for e in chosen)
        for e in chosen:
            w = pr[e] / total if renorm else pr[e]
            out[t] += w * (downs[e] @ (np_silu(gates[e] @ h[t]) * (ups[e] @ h[t])))
        if has(p + "ffn_up_shexp.weight"):
            s = 1.0 / (1.0 + math.exp(-float(W(p + "ffn_gate_inp_shexp.weight") @ h[t])))
            f = np_silu(W(p + "ffn_gate_shexp.weight") @ h[t]) * (W(p + "ffn_up_shexp.weight") @ h[t])
            out[t] += s * (W(p + "ffn_down_shexp.weight") @ f)
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
        if arch in ("llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe"):
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
        if has(p + "ffn_gate_inp.weight"):
            x = x + np_moe(W, has, p, h, int(m[f"{arch}.expert_used_count"]), arch != "qwen2moe")
            continue
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


class View:
    """A GGUF stand-in: g's tensors and metadata with some tensors replaced (name -> torch tensor,
    or None to drop it) and some metadata keys set (value None: removed); with arch, the
    architecture is renamed (its keys arch_old.* become arch.*)."""

    def __init__(self, g, tensors=None, meta=None, arch=None):
        self.g = g
        self.over = dict(tensors or {})
        old = g.meta["general.architecture"]
        m = dict(g.meta)
        if arch:
            m = {(arch + k[len(old):] if k.startswith(old + ".") else k): v for k, v in m.items()}
            m["general.architecture"] = arch
        for k, v in (meta or {}).items():
            k = k.replace("ARCH", m["general.architecture"])
            if v is None:
                m.pop(k, None)
            else:
                m[k] = v
        self.meta = m
        self.tensors = {n: i for n, i in g.tensors.items() if self.over.get(n, 0) is not None}
        for n, t in self.over.items():
            if t is not None:
                self.tensors[n] = (None, list(reversed(t.shape)), None)

    def has(self, name):
        return name in self.tensors

    def tensor(self, name):
        return self.over[name].clone() if name in self.over else self.g.tensor(name)

    def get(self, name):
        return self.tensor(name) if self.has(name) else None


def identical_experts(g, dense_arch=None, shared_off=False, routed_off=False, dense_from_shared=False):
    """(MoE view, dense view): the MoE file with every expert set to expert 0 (or, routed_off, all
    experts' ffn_down zero) and optionally the shared expert off (ffn_down_shexp = 0); the dense
    view has the same attention and ffn_{gate,up,down} = expert 0 (or, dense_from_shared, the
    shared expert with ffn_down halved), no MoE tensors and no expert keys."""
    hp = ref.HParams(g)
    moe, dense = {}, {}
    for il in range(hp.n_layer):
        p = f"blk.{il}."
        exps = {n: g.tensor(p + f"ffn_{n}_exps.weight") for n in ("gate", "up", "down")}
        for n, t in exps.items():
            moe[p + f"ffn_{n}_exps.weight"] = torch.zeros_like(t) if routed_off and n == "down" else t[:1].repeat(t.shape[0], 1, 1)
            dense[p + f"ffn_{n}.weight"] = t[0].clone()
        if dense_from_shared:
            for n in ("gate", "up", "down"):
                dense[p + f"ffn_{n}.weight"] = g.tensor(p + f"ffn_{n}_shexp.weight") * (0.5 if n == "down" else 1.0)
            moe[p + "ffn_gate_inp_shexp.weight"] = torch.zeros_like(g.tensor(p + "ffn_gate_inp_shexp.weight"))
        if shared_off:
            moe[p + "ffn_down_shexp.weight"] = torch.zeros_like(g.tensor(p + "ffn_down_shexp.weight"))
        for n in g.tensors:
            if n.startswith(p) and ("_exps." in n or "_shexp." in n or "ffn_gate_inp." in n):
                dense[n] = None
    no_experts = {f"ARCH.{k}": None for k in ("expert_count", "expert_used_count", "expert_feed_forward_length",
                                              "expert_shared_feed_forward_length")}
    return View(g, moe), View(g, dense, no_experts, dense_arch)


def moe_unit_checks(report):
    """moe_ffn on random tensors against explicit formulas."""
    rng = torch.Generator().manual_seed(0)
    T, C, F, E = 16, 24, 40, 5
    x = torch.randn(T, C, generator=rng, dtype=ref.F64)
    router = torch.randn(E, C, generator=rng, dtype=ref.F64) * 0.5
    gate, up = (torch.randn(E, F, C, generator=rng, dtype=ref.F64) / math.sqrt(C) for _ in range(2))
    down = torch.randn(E, C, F, generator=rng, dtype=ref.F64) / math.sqrt(F)
    experts = torch.stack([ref.ffn_gated(x, gate[e], up[e], down[e], ref.silu) for e in range(E)], 1)  # (T, E, C)
    probs = torch.softmax(x @ router.T, -1)
    mixture = (probs[:, :, None] * experts).sum(1)
    dense = experts[:, 0]
    same = [t[:1].repeat(E, 1, 1) for t in (gate, up, down)]
    for k in (1, 2, 3):
        d = (ref.moe_ffn(x, router, *same, k, True) - dense).abs().max()
        report(f"moe_ffn identical experts, k={k}, renorm = dense FFN", d < 1e-12, f"max abs diff {d:.2e}")
        topsum = probs.topk(k, -1).values.sum(-1, keepdim=True)
        d = (ref.moe_ffn(x, router, *same, k, False) - topsum * dense).abs().max()
        report(f"moe_ffn identical experts, k={k}, no renorm = sum(top-k p) * dense", d < 1e-12, f"max abs diff {d:.2e}")
    for renorm in (True, False):
        d = (ref.moe_ffn(x, router, gate, up, down, E, renorm) - mixture).abs().max()
        report(f"moe_ffn k=n_expert, renorm={renorm} = softmax mixture", d < 1e-12, f"max abs diff {d:.2e}")
    k = 2
    logits = x @ router.T
    sel = logits.topk(k, -1).indices
    w = torch.softmax(logits.gather(1, sel), -1)
    explicit = sum(w[:, j, None] * experts[torch.arange(T), sel[:, j]] for j in range(k))
    d = (ref.moe_ffn(x, router, gate, up, down, k, True) - explicit).abs().max()
    report("moe_ffn k=2 renorm = softmax over the selected logits", d < 1e-12, f"max abs diff {d:.2e}")
    explicit = sum(probs.gather(1, sel)[:, j, None] * experts[torch.arange(T), sel[:, j]] for j in range(k))
    d = (ref.moe_ffn(x, router, gate, up, down, k, False) - explicit).abs().max()
    report("moe_ffn k=2 no renorm = full-softmax p of the selected", d < 1e-12, f"max abs diff {d:.2e}")
    d = (ref.moe_ffn(x, router, gate, up, down, 1, True) - experts[torch.arange(T), logits.argmax(-1)]).abs().max()
    report("moe_ffn k=1 renorm = arg-max expert", d < 1e-12, f"max abs diff {d:.2e}")
    counts = torch.bincount(sel.flatten(), minlength=E)
    report("moe_ffn test routes tokens to every expert", bool((counts > 0).all()), f"tokens per expert {counts.tolist()}")


def moe_model_checks(name, g, tokens, full, report):
    arch = g.meta["general.architecture"]
    std = full.std()
    if arch in ("llama", "qwen3moe"):
        moe, dense = identical_experts(g, "qwen3" if arch == "qwen3moe" else None)
        d = np.abs(forward(moe, tokens) - forward(dense, tokens)).max() / std
        report(f"{name} identical experts = dense {dense.meta['general.architecture']} (renorm)", d < 1e-10,
               f"max rel diff {d:.2e}")
    if arch == "qwen2moe":
        moe, dense = identical_experts(g, "qwen2", shared_off=True)
        ref_dense = forward(dense, tokens)
        n_expert = int(g.meta["qwen2moe.expert_count"])
        d = np.abs(forward(View(moe, meta={"qwen2moe.expert_used_count": n_expert}), tokens) - ref_dense).max() / std
        report(f"{name} identical experts, shared off, top-k = n_expert = dense qwen2", d < 1e-10, f"max rel diff {d:.2e}")
        d = np.abs(forward(moe, tokens) - ref_dense).max() / std
        report(f"{name} identical experts, shared off, own top-k != dense qwen2 (no renorm)", d > 1e-3,
               f"max rel diff {d:.2e}")
        moe, dense = identical_experts(g, "qwen2", routed_off=True, dense_from_shared=True)
        d = np.abs(forward(moe, tokens) - forward(dense, tokens)).max() / std
        report(f"{name} routed off, shared gate sigmoid(0) = dense qwen2 with down/2", d < 1e-10, f"max rel diff {d:.2e}")


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

    moe_unit_checks(report)
    for name in ["llama", "llama-moe", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3"]:
        path = os.path.join(args.models, name + "-f32.gguf")  # test-arch's ArchReference.WriteModels
        if not os.path.exists(path):
            continue
        g = ref.GGUF(path)
        arch = g.meta["general.architecture"]
        full = forward(g, tokens)
        std = full.std()
        report(f"{name} runs", np.isfinite(full).all() and std > 0.05, f"logit std {std:.3g}")
        worst = max(np.abs(forward(g, tokens[:k]) - full[:k]).max() for k in (1, 5, 9, 13))
        report(f"{name} causality", worst < 1e-10, f"max |prefix - full| {worst:.2e}")
        d = np.abs(np_forward(g, tokens) - full).max()
        report(f"{name} second implementation", d < 1e-9, f"max abs diff {d:.2e}")
        if "_exps." in " ".join(g.tensors):
            moe_model_checks(name, g, tokens, full, report)
        if arch in ("qwen2", "qwen3", "gemma3", "qwen3moe"):
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
