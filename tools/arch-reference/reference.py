#!/usr/bin/python3
"""Float64 reference forward pass for small GGUF models of several architectures.

An offline developer tool (tests and CI never run it). It computes the logits of every position
of a token list, written from the published model definitions (Hugging Face transformers'
modeling_llama / modeling_mixtral / modeling_qwen2 / modeling_qwen2_moe / modeling_qwen3 /
modeling_qwen3_moe / modeling_gemma2 / modeling_gemma3 (text) / modeling_phi3 semantics), applied
to the weights as llama.cpp's converters store them in GGUF:

  - a ggml matrix with ne = [in, out] is a PyTorch Linear weight of shape (out, in);
  - llama: the converter permutes the rows of Q and K so that RoPE rotates adjacent pairs
    (2i, 2i+1) ("normal" rope); every other family here rotates (i, i + n_rot/2) ("neox"), which
    is HF's rotate_half on unpermuted weights;
  - gemma: RMSNorm weights are stored with HF's "+1" already added, so the norm multiplies by w;
  - phi3: Q, K, V are one fused attn_qkv matrix (rows q | k | v) and ffn_up stacks gate over up;
  - mixture of experts (llama with expert_count > 0 = Mixtral, qwen2moe, qwen3moe): the experts of a
    layer are stacked in 3-d tensors, ffn_{gate,up}_exps ne = [n_embd, n_ff, n_expert] (torch
    (n_expert, n_ff, n_embd): expert e's Linear weight is [e]) and ffn_down_exps ne = [n_ff,
    n_embd, n_expert]; the router ffn_gate_inp ne = [n_embd, n_expert] (see moe_ffn).

Usage (Debian's /usr/bin/python3 with python3-torch and python3-numpy):

    /usr/bin/python3 tools/arch-reference/reference.py MODEL.gguf --tokens 1,2,3 -o OUT.logits

The tokens given are the whole input (no BOS is added): one sequence, positions 0..n-1, causal.
OUT (little-endian, the format of llama-logits): int32 n_tokens, int32 n_vocab,
int32 tokens[n_tokens], float32 logits[n_tokens][n_vocab].

Supported tensor types: F32, F16, BF16, Q8_0 (dequantized, then everything runs in float64).
"""
import argparse
import math
import os
import struct
import sys

import numpy as np
import torch

F64 = torch.float64

# --------------------------------------------------------------------------------------------
# GGUF reader (GGUF v2/v3)
# --------------------------------------------------------------------------------------------

# metadata value types: id -> (struct format, size); 8 = string, 9 = array
_GGUF_SCALARS = {
    0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
    6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8),
}
_GGUF_NUMPY = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32,
               6: np.float32, 7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}

# ggml tensor types this reader decodes: id -> (name, elements per block, bytes per block)
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
_GGML_TYPES = {GGML_F32: ("F32", 1, 4), GGML_F16: ("F16", 1, 2),
               GGML_Q8_0: ("Q8_0", 32, 34), GGML_BF16: ("BF16", 1, 2)}


class GGUF:
    """Metadata (dict key -> python value; arrays as lists, numeric arrays as numpy arrays) and
    tensor infos (name -> (ggml type, ne list, absolute byte offset)) of one GGUF file."""

    def __init__(self, path):
        self.path = path
        self.buf = np.memmap(path, dtype=np.uint8, mode="r")
        self.pos = 0
        magic = bytes(self.buf[0:4])
        if magic != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (magic {magic!r})")
        self.pos = 4
        self.version = self._scalar(4)
        if self.version not in (2, 3):
            raise ValueError(f"{path}: unsupported GGUF version {self.version}")
        n_tensors = self._scalar(10)
        n_kv = self._scalar(10)
        self.meta = {}
        for _ in range(n_kv):
            key = self._string()
            vtype = self._scalar(4)
            self.meta[key] = self._value(vtype)
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._scalar(4)
            ne = [self._scalar(10) for _ in range(n_dims)]
            ttype = self._scalar(4)
            offset = self._scalar(10)
            infos.append((name, ttype, ne, offset))
        align = int(self.meta.get("general.alignment", 32))
        data_start = (self.pos + align - 1) // align * align
        self.tensors = {name: (ttype, ne, data_start + off) for name, ttype, ne, off in infos}

    # -- primitive readers
    def _scalar(self, vtype):
        fmt, size = _GGUF_SCALARS[vtype]
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return v

    def _string(self):
        n = self._scalar(10)
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return s

    def _value(self, vtype):
        if vtype == 8:
            return self._string()
        if vtype == 9:
            etype = self._scalar(4)
            count = self._scalar(10)
            if etype in _GGUF_NUMPY:
                dt = np.dtype(_GGUF_NUMPY[etype]).newbyteorder("<")
                arr = np.frombuffer(self.buf, dtype=dt, count=count, offset=self.pos).copy()
                self.pos += count * dt.itemsize
                return arr
            return [self._value(etype) for _ in range(count)]
        if vtype in _GGUF_SCALARS:
            return self._scalar(vtype)
        raise ValueError(f"{self.path}: unknown metadata value type {vtype}")

    # -- tensors
    def has(self, name):
        return name in self.tensors

    def tensor(self, name):
        """The tensor as float64 torch, in PyTorch's row-major shape (ne reversed)."""
        ttype, ne, off = self.tensors[name]
        if ttype not in _GGML_TYPES:
            raise NotImplementedError(f"{name}: ggml type {ttype} is not supported "
                                      f"(only F32, F16, BF16, Q8_0)")
        _, blk, blk_bytes = _GGML_TYPES[ttype]
        n = int(np.prod(ne)) if ne else 1
        if n % blk:
            raise ValueError(f"{name}: {n} elements is not a whole number of blocks")
        raw = self.buf[off:off + n // blk * blk_bytes]
        if ttype == GGML_F32:
            a = raw.view("<f4").astype(np.float64)
        elif ttype == GGML_F16:
            a = raw.view("<f2").astype(np.float64)
        elif ttype == GGML_BF16:
            a = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:  # Q8_0: per block of 32, an f16 scale d and 32 int8 q; x = d * q
            b = np.asarray(raw).reshape(-1, 34)
            d = b[:, :2].copy().view("<f2").astype(np.float64)
            q = b[:, 2:].copy().view(np.int8).astype(np.float64)
            a = (d * q).reshape(-1)
        return torch.from_numpy(a.reshape(list(reversed(ne)))).to(F64)

    def get(self, name):
        """The tensor if present, else None."""
        return self.tensor(name) if self.has(name) else None


# --------------------------------------------------------------------------------------------
# Hyper-parameters (GGUF keys as llama.cpp names them)
# --------------------------------------------------------------------------------------------

class HParams:
    def __init__(self, g):
        m = g.meta
        self.arch = a = m["general.architecture"]

        def key(k, default=None):
            return m.get(f"{a}.{k}", default)

        def per_layer(v):  # llama.cpp allows head counts / n_ff as scalars or per-layer arrays
            if isinstance(v, np.ndarray):
                vals = set(int(x) for x in v)
                if len(vals) != 1:
                    raise NotImplementedError("per-layer head counts are not supported")
                return vals.pop()
            return int(v)

        self.n_embd = int(key("embedding_length"))
        self.n_layer = int(key("block_count"))
        self.n_ff = per_layer(key("feed_forward_length", 0))
        self.n_head = per_layer(key("attention.head_count"))
        self.n_head_kv = per_layer(key("attention.head_count_kv", self.n_head))
        self.head_dim_k = int(key("attention.key_length", self.n_embd // self.n_head))
        self.head_dim_v = int(key("attention.value_length", self.n_embd // self.n_head))
        self.n_rot = int(key("rope.dimension_count", self.head_dim_k))
        self.rope_base = float(key("rope.freq_base", 10000.0))
        self.rope_base_swa = float(key("rope.freq_base_swa", 10000.0))  # gemma3 local layers
        stype = key("rope.scaling.type", "linear")
        factor = float(key("rope.scaling.factor", key("rope.scale_linear", 0.0)) or 0.0)
        if stype not in ("none", "linear") and factor not in (0.0, 1.0):
            raise NotImplementedError(f"rope scaling type {stype!r} is not supported")
        self.rope_freq_scale = 1.0 / factor if stype == "linear" and factor else 1.0
        # LongRoPE (phi3 128k): the original context and the magnitude factor of cos / sin.
        self.n_ctx_orig = int(key("rope.scaling.original_context_length", key("context_length", 0)) or 0)
        self.rope_attn_factor = float(key("rope.scaling.attn_factor", 1.0))
        self.eps = float(key("attention.layer_norm_rms_epsilon", 1e-5))
        self.ln_eps = float(key("attention.layer_norm_epsilon", 1e-12))  # bert's LayerNorms
        self.sliding_window = int(key("attention.sliding_window", 0) or 0)
        # mixture of experts (0 = dense); the experts' own n_ff is read from the tensors' shapes
        self.n_expert = int(key("expert_count", 0) or 0)
        self.n_expert_used = int(key("expert_used_count", 0) or 0)
        self.n_ff_exp = int(key("expert_feed_forward_length", 0) or 0)
        self.n_ff_shexp = int(key("expert_shared_feed_forward_length", 0) or 0)
        self.attn_softcap = key("attn_logit_softcapping")
        self.final_softcap = key("final_logit_softcapping")


# --------------------------------------------------------------------------------------------
# Shared building blocks (float64 torch; activations are (T, C), heads are (T, H, D))
# --------------------------------------------------------------------------------------------

def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def rms_norm(x, w, eps):
    """HF LlamaRMSNorm / Qwen2RMSNorm / Qwen3RMSNorm; also Gemma's with the +1 folded into w."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_angles(n_tokens, n_rot, base, freq_scale=1.0, freq_factors=None):
    """(T, n_rot/2) angles pos * freq_scale * base^(-2i/n_rot) [/ freq_factors[i]]:
    HF's default / linear-scaled rotary embedding (and llama3's per-frequency factors)."""
    inv_freq = base ** (-torch.arange(0, n_rot, 2, dtype=F64) / n_rot)
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors
    pos = torch.arange(n_tokens, dtype=F64) * freq_scale
    return pos[:, None] * inv_freq[None, :]


def rope_neox(x, ang):
    """HF's apply_rotary_pos_emb (rotate_half): pairs (i, i + n_rot/2) of the first n_rot dims."""
    n_rot = 2 * ang.shape[-1]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2, rest = x[..., :n_rot // 2], x[..., n_rot // 2:n_rot], x[..., n_rot:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def rope_norm(x, ang):
    """RoPE on adjacent pairs (2i, 2i+1): HF's rotate_half applied to the llama converter's
    permuted Q/K rows (ggml's 'normal' rope mode)."""
    n_rot = 2 * ang.shape[-1]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    xr, rest = x[..., :n_rot], x[..., n_rot:]
    x1, x2 = xr[..., 0::2], xr[..., 1::2]
    rot = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
    return torch.cat([rot, rest], dim=-1)


def attention(q, k, v, scale, softcap=None, window=None, causal=True):
    """Causal grouped-query attention. q (T, H, Dk), k (T, Hkv, Dk), v (T, Hkv, Dv) -> (T, H*Dv).
    Query head h reads key/value head h // (H / Hkv) (HF repeat_kv). scores = q.k * scale, then
    optional soft-capping cap * tanh(s / cap) (Gemma 2), then the mask: key j is visible to query
    i when j <= i (every key without causal) and, with a sliding window W, i - j < W (HF's
    sliding_window mask)."""
    T, H, _ = q.shape
    rep = H // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("ihd,jhd->hij", q, k) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    visible = (j <= i) if causal else torch.ones(T, T, dtype=torch.bool)
    if window:
        visible = visible & (i - j < window)
    s = s.masked_fill(~visible, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("hij,jhd->ihd", p, v).reshape(T, -1)


def silu(x):
    return x * torch.sigmoid(x)


def gelu_erf(x):
    """The exact GELU, x Phi(x): HF's "gelu" activation (BERT's hidden_act)."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def layer_norm(x, w, b, eps):
    """torch.nn.LayerNorm over the last dimension (biased variance), times w plus b."""
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gelu_tanh(x):
    """HF's gelu_pytorch_tanh (Gemma's hidden_activation)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def gelu_tanh_ggml_f16(x):
    """ggml's CPU GELU as llama.cpp build 4747 computes it (GGML_GELU_FP16): the input is rounded
    to f16 and looked up in a table of f16 results (|x| >= 10: 0 or x). Only for diagnosing
    differences against llama.cpp (--emulate-ggml-gelu); not part of any model definition."""
    xh = x.to(torch.float16).to(torch.float32)
    y = (0.5 * xh * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * xh * (1.0 + 0.044715 * xh * xh))))
    y = y.to(torch.float16).to(F64)
    y = torch.where(x <= -10.0, torch.zeros_like(x), y)
    return torch.where(x >= 10.0, x, y)


def ffn_gated(x, w_gate, w_up, w_down, act):
    """down(act(gate(x)) * up(x)): SwiGLU (llama, qwen, phi3) or GeGLU (gemma)."""
    return linear(act(linear(x, w_gate)) * linear(x, w_up), w_down)


def moe_ffn(x, router, gate_exps, up_exps, down_exps, k, renorm):
    """Sparse mixture-of-experts SwiGLU FFN: transformers' MixtralSparseMoeBlock,
    Qwen2MoeSparseMoeBlock (its routed part) and Qwen3MoeSparseMoeBlock, and llama.cpp's
    llm_build_moe_ffn with softmax gating.

    x (T, C); router (E, C) (ffn_gate_inp); gate_exps, up_exps (E, F, C); down_exps (E, C, F).
    Per token: p = softmax(router x) over all E experts; the k largest p_e are selected; with
    renorm (Mixtral; Qwen3-MoE, norm_topk_prob=True) their weights are p_e / sum of the k selected
    p (= softmax over the selected logits), without (Qwen2-MoE, norm_topk_prob=False) they are the
    p_e themselves (summing to less than 1). out = sum over the selected e of
    w_e * down_e(silu(gate_e x) * up_e x). Like HF, a loop over experts on the tokens routed to
    each (unselected experts contribute nothing, not even 0 * inf)."""
    E = router.shape[0]
    if not 1 <= k <= E:
        raise ValueError(f"expert_used_count {k} not in 1..{E}")
    probs = torch.softmax(linear(x, router), dim=-1)           # (T, E)
    w, sel = torch.topk(probs, k, dim=-1)                      # (T, k), (T, k)
    if renorm:
        w = w / w.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(E):
        rows, slot = (sel == e).nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        y = ffn_gated(x[rows], gate_exps[e], up_exps[e], down_exps[e], silu)
        out.index_add_(0, rows, y * w[rows, slot, None])
    return out


def moe_layer_ffn(L, h, hp, renorm):
    """moe_ffn on block L's router and stacked experts (ffn_gate_inp, ffn_{gate,up,down}_exps),
    with top-k = expert_used_count; checks the shapes against expert_count (and, when the file
    has it, expert_feed_forward_length)."""
    router = L("ffn_gate_inp.weight")
    gate, up, down = L("ffn_gate_exps.weight"), L("ffn_up_exps.weight"), L("ffn_down_exps.weight")
    E, C = router.shape
    F = gate.shape[1]
    if (E != hp.n_expert or gate.shape != (E, F, C) or up.shape != (E, F, C)
            or down.shape != (E, C, F) or (hp.n_ff_exp and F != hp.n_ff_exp)):
        raise ValueError(f"MoE tensor shapes do not fit expert_count {hp.n_expert}, expert_feed_forward_length "
                         f"{hp.n_ff_exp}: router {tuple(router.shape)} gate {tuple(gate.shape)} "
                         f"up {tuple(up.shape)} down {tuple(down.shape)}")
    return moe_ffn(h, router, gate, up, down, hp.n_expert_used, renorm)


# --------------------------------------------------------------------------------------------
# Model families
# --------------------------------------------------------------------------------------------

class Layer:
    """The tensors of block il that exist in the file, by their short name (attn_q, ...)."""

    def __init__(self, g, il):
        prefix = f"blk.{il}."
        self.t = {}
        for name in g.tensors:
            if name.startswith(prefix):
                self.t[name[len(prefix):]] = name
        self.g = g

    def __call__(self, short, required=True):
        name = self.t.get(short)
        if name is None:
            if required:
                raise KeyError(f"missing tensor {short}")
            return None
        return self.g.tensor(name)


def embed(g, tokens):
    tok_embd = g.tensor("token_embd.weight")
    return tok_embd, tok_embd[torch.tensor(tokens, dtype=torch.long)]


def lm_head(g, x, tok_embd, norm_eps):
    """Final RMSNorm and output projection (tied to the embeddings when output.weight is absent)."""
    x = rms_norm(x, g.tensor("output_norm.weight"), norm_eps)
    w = g.get("output.weight")
    return linear(x, tok_embd if w is None else w, g.get("output.bias"))


def qkv_separate(L, x, hp):
    """Q, K, V as (T, H, D) from separate projections with optional biases."""
    T = x.shape[0]
    q = linear(x, L("attn_q.weight"), L("attn_q.bias", False)).view(T, hp.n_head, hp.head_dim_k)
    k = linear(x, L("attn_k.weight"), L("attn_k.bias", False)).view(T, hp.n_head_kv, hp.head_dim_k)
    v = linear(x, L("attn_v.weight"), L("attn_v.bias", False)).view(T, hp.n_head_kv, hp.head_dim_v)
    return q, k, v


def forward_llama(g, hp, tokens, opts):
    """LlamaForCausalLM (transformers modeling_llama): pre-norm decoder, RoPE (adjacent pairs on
    the GGUF's permuted Q/K), GQA, SwiGLU; optional q/k/v/o biases; llama3 rope_freqs.
    With llama.expert_count > 0 it is MixtralForCausalLM (modeling_mixtral, which llama.cpp runs as
    the llama architecture): every layer's FFN is a sparse MoE, softmax router, top
    expert_used_count experts, their weights renormalized to sum 1 (llama.cpp 4747 build_llama:
    llm_build_moe_ffn(..., norm_w = true, softmax gating))."""
    T = len(tokens)
    tok_embd, x = embed(g, tokens)
    ang = rope_angles(T, hp.n_rot, hp.rope_base, hp.rope_freq_scale, g.get("rope_freqs.weight"))
    scale = 1.0 / math.sqrt(hp.head_dim_k)
    for il in range(hp.n_layer):
        L = Layer(g, il)
        h = rms_norm(x, L("attn_norm.weight"), hp.eps)
        q, k, v = qkv_separate(L, h, hp)
        q, k = rope_norm(q, ang), rope_norm(k, ang)
        x = x + linear(attention(q, k, v, scale), L("attn_output.weight"), L("attn_output.bias", False))
        h = rms_norm(x, L("ffn_norm.weight"), hp.eps)
        if hp.n_expert:
            x = x + moe_layer_ffn(L, h, hp, renorm=True)
        else:
            x = x + ffn_gated(h, L("ffn_gate.weight"), L("ffn_up.weight"), L("ffn_down.weight"), silu)
    return lm_head(g, x, tok_embd, hp.eps)


def forward_qwen2(g, hp, tokens, opts):
    """Qwen2ForCausalLM (modeling_qwen2): llama's layout with q/k/v biases and rotate_half RoPE.
    (HF's use_sliding_window is off for released Qwen2 models; the GGUF carries no window.)"""
    T = len(tokens)
    tok_embd, x = embed(g, tokens)
    ang = rope_angles(T, hp.n_rot, hp.rope_base, hp.rope_freq_scale)
    scale = 1.0 / math.sqrt(hp.head_dim_k)
    for il in range(hp.n_layer):
        L = Layer(g, il)
        h = rms_norm(x, L("attn_norm.weight"), hp.eps)
        q, k, v = qkv_separate(L, h, hp)
        q, k = rope_neox(q, ang), rope_neox(k, ang)
        x = x + linear(attention(q, k, v, scale), L("attn_output.weight"))
        h = rms_norm(x, L("ffn_norm.weight"), hp.eps)
        x = x + ffn_gated(h, L("ffn_gate.weight"), L("ffn_up.weight"), L("ffn_down.weight"), silu)
    return lm_head(g, x, tok_embd, hp.eps)


def forward_qwen3(g, hp, tokens, opts):
    """Qwen3ForCausalLM (modeling_qwen3): like Qwen2 without biases (unless present), with an
    RMSNorm over head_dim on every query and key head (q_norm / k_norm) before RoPE, and an
    explicit head_dim (key_length) that need not be n_embd / n_head."""
    T = len(tokens)
    tok_embd, x = embed(g, tokens)
    ang = rope_angles(T, hp.n_rot, hp.rope_base, hp.rope_freq_scale)
    scale = 1.0 / math.sqrt(hp.head_dim_k)
    for il in range(hp.n_layer):
        L = Layer(g, il)
        h = rms_norm(x, L("attn_norm.weight"), hp.eps)
        q, k, v = qkv_separate(L, h, hp)
        q = rms_norm(q, L("attn_q_norm.weight"), hp.eps)
        k = rms_norm(k, L("attn_k_norm.weight"), hp.eps)
        q, k = rope_neox(q, ang), rope_neox(k, ang)
        x = x + linear(attention(q, k, v, scale), L("attn_output.weight"), L("attn_output.bias", False))
        h = rms_norm(x, L("ffn_norm.weight"), hp.eps)
        x = x + ffn_gated(h, L("ffn_gate.weight"), L("ffn_up.weight"), L("ffn_down.weight"), silu)
    return lm_head(g, x, tok_embd, hp.eps)


def forward_qwen2moe(g, hp, tokens, opts):
    """Qwen2MoeForCausalLM (modeling_qwen2_moe): Qwen2's attention (q/k/v biases, rotate_half RoPE,
    head_dim n_embd / n_head) and in every layer a Qwen2MoeSparseMoeBlock: the routed experts
    (softmax, top expert_used_count, NOT renormalized: norm_topk_prob=False; expert n_ff =
    qwen2moe.expert_feed_forward_length) plus a shared expert (ffn_{gate,up,down}_shexp, n_ff =
    expert_shared_feed_forward_length) scaled per token by sigmoid(ffn_gate_inp_shexp . x)
    (HF's shared_expert_gate, Linear(n_embd, 1); in the GGUF a vector ne = [n_embd]).
    Released checkpoints use every layer sparse (decoder_sparse_step 1, no mlp_only_layers), as
    llama.cpp assumes."""
    T = len(tokens)
    tok_embd, x = embed(g, tokens)
    ang = rope_angles(T, hp.n_rot, hp.rope_base, hp.rope_freq_scale)
    scale = 1.0 / math.sqrt(hp.head_dim_k)
    for il in range(hp.n_layer):
        L = Layer(g, il)
        h = rms_norm(x, L("attn_norm.weight"), hp.eps)
        q, k, v = qkv_separate(L, h, hp)
        q, k = rope_neox(q, ang), rope_neox(k, ang)
        x = x + linear(attention(q, k, v, scale), L("attn_output.weight"), L("attn_output.bias", False))
        h = rms_norm(x, L("ffn_norm.weight"), hp.eps)
        y = moe_layer_ffn(L, h, hp, renorm=False)
        if L.t.get("ffn_up_shexp.weight"):
            sg, su, sd = L("ffn_gate_shexp.weight"), L("ffn_up_shexp.weight"), L("ffn_down_shexp.weight")
            if hp.n_ff_shexp and sg.shape[0] != hp.n_ff_shexp:
                raise ValueError(f"ffn_gate_shexp {tuple(sg.shape)} does not fit "
                                 f"expert_shared_feed_forward_length {hp.n_ff_shexp}")
            shared = ffn_gated(h, sg, su, sd, silu)
            y = y + torch.sigmoid(h @ L("ffn_gate_inp_shexp.weight").reshape(-1))[:, None] * shared
        x = x + y
    return lm_head(g, x, tok_embd, hp.eps)


def forward_qwen3moe(g, hp, tokens, opts):
    """Qwen3MoeForCausalLM (modeling_qwen3_moe): Qwen3's attention (per-head q/k RMSNorm before
    RoPE, explicit head_dim = qwen3moe.attention.key_length, rotate_half RoPE) and in every layer
    a Qwen3MoeSparseMoeBlock: softmax router, top expert_used_count experts, renormalized
    (norm_topk_prob=True in the released checkpoints; llama.cpp's build_qwen3moe passes norm_w =
    true), expert n_ff = qwen3moe.expert_feed_forward_length, no shared expert."""
    T = len(tokens)
    tok_embd, x = embed(g, tokens)
    ang = rope_angles(T, hp.n_rot, hp.rope_base, hp.rope_freq_scale)
    scale = 1.0 / math.sqrt(hp.head_dim_k)
    for il in range(hp.n_layer):
        L = Layer(g, il)
        h = rms_norm(x, L("attn_norm.weight"), hp.eps)
        q, k, v = qkv_separate(L, h, hp)
        q = rms_norm(q, L("attn_q_norm.weight"), hp.eps)
        k = rms_norm(k, L("attn_k_norm.weight"), hp.eps)
        q, k = rope_neox(q, ang), rope_neox(k, ang)
        x = x + linear(attention(q, k, v, scale), L("attn_output.weight"), L("attn_output.bias", False))
        h = rms_norm(x, L("ffn_norm.weight"), hp.eps)
        x = x + moe_layer_ffn(L, h, hp, renorm=True)
    return lm_head(g, x, tok_embd, hp.eps)


def forward_phi3(g, hp, tokens, opts):
    """Phi3ForCausalLM (modeling_phi3): fused qkv_proj (rows q | k | v), rotate_half RoPE on the
    first n_rot dims, fused gate_up_proj (gate rows first, then up: up * silu(gate)), and a
    sliding window of `phi3.attention.sliding_window` keys on every layer."""
    T = len(tokens)
    # LongRoPE (Phi3LongRoPEScaledRotaryEmbedding): frequencies divided by the long factors when
    # the context is longer than the original one, else by the short ones, and cos / sin scaled
    # by rope.scaling.attn_factor. HF picks by the sequence length, llama.cpp by the context
    # size (--n-ctx, default the token count).
    ff, mscale = None, 1.0
    if g.has("rope_factors_long.weight") or g.has("rope_factors_short.weight"):
        n_ctx = opts.n_ctx or T
        ff = g.get("rope_factors_long.weight" if n_ctx > hp.n_ctx_orig else "rope_factors_short.weight")
        mscale = hp.rope_attn_factor
        if hp.n_rot != hp.head_dim_k:
            raise NotImplementedError("LongRoPE with partial rotation")
    tok_embd, x = embed(g, tokens)
    ang = rope_angles(T, hp.n_rot, hp.rope_base, hp.rope_freq_scale, ff)
    scale = 1.0 / math.sqrt(hp.head_dim_k)
    nq, nkv = hp.n_head * hp.head_dim_k, hp.n_head_kv * hp.head_dim_k
    for il in range(hp.n_layer):
        L = Layer(g, il)
        h = rms_norm(x, L("attn_norm.weight"), hp.eps)
        if L.t.get("attn_qkv.weight"):
            qkv = linear(h, L("attn_qkv.weight"), L("attn_qkv.bias", False))
            q = qkv[:, :nq].reshape(T, hp.n_head, hp.head_dim_k)
            k = qkv[:, nq:nq + nkv].reshape(T, hp.n_head_kv, hp.head_dim_k)
            v = qkv[:, nq + nkv:].reshape(T, hp.n_head_kv, hp.head_dim_v)
        else:
            q, k, v = qkv_separate(L, h, hp)
        q, k = rope_neox(q, ang) * mscale, rope_neox(k, ang) * mscale
        attn = attention(q, k, v, scale, window=hp.sliding_window or None)
        x = x + linear(attn, L("attn_output.weight"), L("attn_output.bias", False))
        h = rms_norm(x, L("ffn_norm.weight"), hp.eps)
        gate_up = linear(h, L("ffn_up.weight"))
        gate, up = gate_up.chunk(2, dim=-1)
        x = x + linear(up * silu(gate), L("ffn_down.weight"))
    return lm_head(g, x, tok_embd, hp.eps)


def gemma_query_scale(hp, opts, n_layer_27b):
    """1/sqrt(query_pre_attn_scalar). The GGUF carries no query_pre_attn_scalar: released Gemma 2/3
    use head_dim (key_length) except the 27B models, where it is n_embd / n_head (Gemma 2 27B: 144;
    Gemma 3 27B: 168); llama.cpp recognizes those by their layer count, and so does this."""
    if opts.query_pre_attn_scalar:
        return 1.0 / math.sqrt(opts.query_pre_attn_scalar)
    if hp.n_layer == n_layer_27b:
        return 1.0 / math.sqrt(hp.n_embd / hp.n_head)
    return 1.0 / math.sqrt(hp.head_dim_k)


def forward_gemma2(g, hp, tokens, opts):
    """Gemma2ForCausalLM (modeling_gemma2): embeddings * sqrt(n_embd); per layer
    x += post_attention_norm(attn(input_norm(x))); x += post_ffw_norm(mlp(pre_ffw_norm(x)));
    GeGLU with the tanh GELU; attention logits soft-capped (default 50) after the query scale;
    sliding window on the even layers (HF: layer_idx % 2 == 0); tied lm head; final logits
    soft-capped (default 30)."""
    T = len(tokens)
    tok_embd, x = embed(g, tokens)
    x = x * math.sqrt(hp.n_embd)
    ang = rope_angles(T, hp.n_rot, hp.rope_base, hp.rope_freq_scale)
    scale = gemma_query_scale(hp, opts, 46)
    attn_cap = float(hp.attn_softcap if hp.attn_softcap is not None else 50.0)
    final_cap = float(hp.final_softcap if hp.final_softcap is not None else 30.0)
    window = hp.sliding_window or 4096
    act = gelu_tanh_ggml_f16 if opts.emulate_ggml_gelu else gelu_tanh
    for il in range(hp.n_layer):
        L = Layer(g, il)
        h = rms_norm(x, L("attn_norm.weight"), hp.eps)
        q, k, v = qkv_separate(L, h, hp)
        q, k = rope_neox(q, ang), rope_neox(k, ang)
        attn = attention(q, k, v, scale, softcap=attn_cap, window=window if il % 2 == 0 else None)
        attn = linear(attn, L("attn_output.weight"))
        x = x + rms_norm(attn, L("post_attention_norm.weight"), hp.eps)
        h = rms_norm(x, L("ffn_norm.weight"), hp.eps)
        h = ffn_gated(h, L("ffn_gate.weight"), L("ffn_up.weight"), L("ffn_down.weight"), act)
        x = x + rms_norm(h, L("post_ffw_norm.weight"), hp.eps)
    out = lm_head(g, x, tok_embd, hp.eps)
    return final_cap * torch.tanh(out / final_cap) if final_cap else out


GEMMA3_SLIDING_WINDOW_PATTERN = 6  # HF Gemma3TextConfig.sliding_window_pattern: 5 local : 1 global


def forward_gemma3(g, hp, tokens, opts):
    """Gemma3ForCausalLM, text part (modeling_gemma3): Gemma 2's block (pre/post norms around
    attention and MLP, GeGLU tanh, embeddings * sqrt(n_embd), tied lm head) plus RMSNorm over
    head_dim on queries and keys (q_norm / k_norm, stored with the +1 added) before RoPE; no
    soft-capping; layer il is global when (il + 1) % 6 == 0, otherwise it attends within the
    sliding window and uses RoPE base rope_local_base_freq (10000, unscaled), while global
    layers use rope.freq_base with the file's (linear) rope scaling."""
    T = len(tokens)
    tok_embd, x = embed(g, tokens)
    x = x * math.sqrt(hp.n_embd)
    ang_global = rope_angles(T, hp.n_rot, hp.rope_base, hp.rope_freq_scale)
    ang_local = rope_angles(T, hp.n_rot, hp.rope_base_swa, 1.0)
    scale = gemma_query_scale(hp, opts, 62)
    act = gelu_tanh_ggml_f16 if opts.emulate_ggml_gelu else gelu_tanh
    for il in range(hp.n_layer):
        L = Layer(g, il)
        is_global = (il + 1) % GEMMA3_SLIDING_WINDOW_PATTERN == 0
        ang = ang_global if is_global else ang_local
        h = rms_norm(x, L("attn_norm.weight"), hp.eps)
        q, k, v = qkv_separate(L, h, hp)
        q = rms_norm(q, L("attn_q_norm.weight"), hp.eps)
        k = rms_norm(k, L("attn_k_norm.weight"), hp.eps)
        q, k = rope_neox(q, ang), rope_neox(k, ang)
        attn = attention(q, k, v, scale, window=None if is_global else hp.sliding_window or None)
        attn = linear(attn, L("attn_output.weight"))
        x = x + rms_norm(attn, L("post_attention_norm.weight"), hp.eps)
        h = rms_norm(x, L("ffn_norm.weight"), hp.eps)
        h = ffn_gated(h, L("ffn_gate.weight"), L("ffn_up.weight"), L("ffn_down.weight"), act)
        x = x + rms_norm(h, L("post_ffw_norm.weight"), hp.eps)
    return lm_head(g, x, tok_embd, hp.eps)


def forward_bert(g, hp, tokens, opts):
    """BertModel (transformers modeling_bert), the encoder's last hidden states (T, n_embd): no
    LM head, so the output file holds them in place of logits. Embeddings: word + learned
    position (0..T-1) + token type 0, then LayerNorm; each layer: bidirectional multi-head
    self-attention with biases (scale 1/sqrt(head)), output dense + bias, LayerNorm of the
    residual sum; intermediate dense + GELU (erf), output dense, LayerNorm of the residual sum.
    GGUF names as llama.cpp's converter writes them (token_types, position_embd,
    token_embd_norm, attn_output_norm, layer_output_norm)."""
    T = len(tokens)
    ids = torch.tensor(tokens, dtype=torch.long)
    x = g.tensor("token_embd.weight")[ids] + g.tensor("position_embd.weight")[:T] + g.tensor("token_types.weight")[0]
    x = layer_norm(x, g.tensor("token_embd_norm.weight"), g.tensor("token_embd_norm.bias"), hp.ln_eps)
    scale = 1.0 / math.sqrt(hp.head_dim_k)
    for il in range(hp.n_layer):
        L = Layer(g, il)
        q, k, v = qkv_separate(L, x, hp)
        a = linear(attention(q, k, v, scale, causal=False), L("attn_output.weight"), L("attn_output.bias"))
        x = layer_norm(x + a, L("attn_output_norm.weight"), L("attn_output_norm.bias"), hp.ln_eps)
        f = linear(gelu_erf(linear(x, L("ffn_up.weight"), L("ffn_up.bias"))), L("ffn_down.weight"), L("ffn_down.bias"))
        x = layer_norm(x + f, L("layer_output_norm.weight"), L("layer_output_norm.bias"), hp.ln_eps)
    return x


def forward_nomic_bert(g, hp, tokens, opts):
    """NomicBertModel (nomic-ai's modeling_hf_nomic_bert, as nomic-embed-text runs it), the last
    hidden states (T, n_embd). Embeddings: word + token type 0 (no learned positions), then
    LayerNorm (emb_ln); each layer (prenorm false): Wqkv (rows q | k | v, no bias), rotary
    embeddings on whole heads in halves (rotary_emb_interleaved false, base
    `nomic-bert.rope.freq_base`), bidirectional attention (scale 1/sqrt(head)), out_proj, norm1 of
    the residual sum; the gated MLP fc2(fc11(x) * silu(fc12(x))) (GGUF ffn_up = fc11, ffn_gate =
    fc12, ffn_down = fc2), norm2 of the residual sum."""
    T = len(tokens)
    ids = torch.tensor(tokens, dtype=torch.long)
    x = g.tensor("token_embd.weight")[ids] + g.tensor("token_types.weight")[0]
    x = layer_norm(x, g.tensor("token_embd_norm.weight"), g.tensor("token_embd_norm.bias"), hp.ln_eps)
    ang = rope_angles(T, hp.head_dim_k, hp.rope_base)
    scale = 1.0 / math.sqrt(hp.head_dim_k)
    nq = hp.n_head * hp.head_dim_k
    for il in range(hp.n_layer):
        L = Layer(g, il)
        qkv = linear(x, L("attn_qkv.weight"))
        q = qkv[:, :nq].reshape(T, hp.n_head, hp.head_dim_k)
        k = qkv[:, nq:2 * nq].reshape(T, hp.n_head, hp.head_dim_k)
        v = qkv[:, 2 * nq:].reshape(T, hp.n_head, hp.head_dim_v)
        a = linear(attention(rope_neox(q, ang), rope_neox(k, ang), v, scale, causal=False), L("attn_output.weight"))
        x = layer_norm(x + a, L("attn_output_norm.weight"), L("attn_output_norm.bias"), hp.ln_eps)
        f = ffn_gated(x, L("ffn_gate.weight"), L("ffn_up.weight"), L("ffn_down.weight"), silu)
        x = layer_norm(x + f, L("layer_output_norm.weight"), L("layer_output_norm.bias"), hp.ln_eps)
    return x


FAMILIES = {
    "bert": forward_bert,
    "nomic-bert": forward_nomic_bert,
    "llama": forward_llama,
    "qwen2": forward_qwen2,
    "qwen3": forward_qwen3,
    "qwen2moe": forward_qwen2moe,
    "qwen3moe": forward_qwen3moe,
    "phi3": forward_phi3,
    "gemma2": forward_gemma2,
    "gemma3": forward_gemma3,
}


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

def write_logits(path, tokens, logits):
    n, v = logits.shape
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(np.array([n, v], dtype="<i4").tobytes())
        f.write(np.asarray(tokens, dtype="<i4").tobytes())
        f.write(np.ascontiguousarray(logits, dtype="<f4").tobytes())
    os.replace(tmp, path)


def run(model_path, tokens, opts):
    g = GGUF(model_path)
    hp = HParams(g)
    if hp.arch not in FAMILIES:
        raise NotImplementedError(f"architecture {hp.arch!r} is not supported "
                                  f"(supported: {', '.join(sorted(FAMILIES))})")
    n_vocab = g.tensors["token_embd.weight"][1][1]
    bad = [t for t in tokens if t < 0 or t >= n_vocab]
    if bad:
        raise ValueError(f"token ids out of range (n_vocab {n_vocab}): {bad}")
    with torch.no_grad():
        return FAMILIES[hp.arch](g, hp, tokens, opts).numpy()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="GGUF model (F32, F16, BF16 or Q8_0 tensors)")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids (the whole input)")
    ap.add_argument("-o", "--out", required=True, help="logits file to write")
    ap.add_argument("--query-pre-attn-scalar", type=float, default=0.0,
                    help="gemma2/gemma3: override query_pre_attn_scalar (default: see gemma_query_scale)")
    ap.add_argument("--emulate-ggml-gelu", action="store_true",
                    help="diagnostic: use ggml's f16-table GELU instead of the exact tanh GELU")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    ap.add_argument("--n-ctx", type=int, default=0,
                    help="context size deciding phi3's LongRoPE factors, as llama.cpp's n_ctx (default: the token count)")
    opts = ap.parse_args(argv)
    if opts.threads:
        torch.set_num_threads(opts.threads)
    try:
        tokens = [int(t) for t in opts.tokens.split(",") if t.strip()]
    except ValueError:
        ap.error("--tokens takes comma-separated integers")
    if not tokens:
        ap.error("--tokens is empty")
    logits = run(opts.model, tokens, opts)
    write_logits(opts.out, tokens, logits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
