#!/usr/bin/python3
"""Writes tiny random-weight GGUF models of several architectures for reference.py / lcpp-logits.

An offline developer tool (tests and CI never run it). It needs llama.cpp's gguf-py (any recent
llama.cpp source tree; checked with build 4747), given by path, and a SentencePiece llama GGUF
to copy the tokenizer from (stories260K.gguf: vocab of 512):

    /usr/bin/python3 tools/arch-reference/make-test-models.py --gguf-py /path/to/llama.cpp/gguf-py \
        --tokenizer-from /work/shared/models/stories260K.gguf -o /tmp/arch-models [--only gemma2,phi3]

Models written (F32, weights ~N(0, sigma), norm weights 1 + N(0, 0.1), fixed seeds):

  qwen2.gguf   3 layers, n_embd 128, 4 heads / 2 kv heads of 32, q/k/v biases, tied output
  phi3.gguf    3 layers, n_embd 192, 4 heads / 2 kv heads of 48, fused qkv and gate|up,
               sliding window 8 (on every layer)
  gemma2.gguf  26 layers (llama.cpp 4747 only accepts gemma2 with 26/42/46 layers; 26 = "2B"),
               n_embd 64, 4 heads / 2 kv heads of 32 (key_length != n_embd / n_head),
               sliding window 8 on the even layers, attention softcap 2, final softcap 5
  qwen3.gguf   3 layers, n_embd 96, 4 heads / 2 kv heads of 32 (n_head * head_dim != n_embd),
               q/k norms (not supported by llama.cpp 4747)
  gemma3.gguf  7 layers (layer 5 global, the rest local), n_embd 64, 4 heads / 2 kv heads of 32,
               q/k norms, sliding window 8, rope base 1e6 with linear scaling 8 on global layers,
               10000 unscaled on local ones (not supported by llama.cpp 4747)
  llama-f16.gguf, llama-bf16.gguf, llama-q8_0.gguf
               the tokenizer model's own weights (a llama GGUF) with its 2-D matrices stored as
               F16 / BF16 / Q8_0 (Q8_0 only where a row is whole blocks of 32; the rest stay F32,
               as llama.cpp's quantizer does), to exercise reference.py's tensor decoding

Use prompts longer than the sliding window (20+ tokens) so that the windows matter.
"""
import argparse
import os
import sys
import types

import numpy as np


def import_gguf(path):
    # gguf-py's vocab module imports sentencepiece, which writing a model does not need
    if "sentencepiece" not in sys.modules:
        try:
            import sentencepiece  # noqa: F401
        except ImportError:
            stub = types.ModuleType("sentencepiece")
            stub.SentencePieceProcessor = object
            sys.modules["sentencepiece"] = stub
    sys.path.insert(0, path)
    import gguf
    return gguf


class Model:
    """Collects keys and tensors of one model, then writes them with gguf-py."""

    def __init__(self, gguf, arch, seed):
        self.gguf = gguf
        self.arch = arch
        self.rng = np.random.default_rng(seed)
        self.kv = []        # (key, value, GGUFValueType)
        self.tensors = []   # (name, np.ndarray float32 in PyTorch shape, ggml type or None)

    def key(self, name, value, vtype):
        self.kv.append((name.format(arch=self.arch), value, vtype))

    def u32(self, name, v):
        self.key(name, int(v), self.gguf.GGUFValueType.UINT32)

    def f32(self, name, v):
        self.key(name, float(v), self.gguf.GGUFValueType.FLOAT32)

    def string(self, name, v):
        self.key(name, v, self.gguf.GGUFValueType.STRING)

    def mat(self, name, rows, cols, sigma):
        self.tensors.append((name, (self.rng.standard_normal((rows, cols)) * sigma).astype(np.float32), None))

    def vec(self, name, n, mean=0.0, sigma=0.1):
        self.tensors.append((name, (mean + self.rng.standard_normal(n) * sigma).astype(np.float32), None))

    def norm(self, name, n):
        self.vec(name, n, 1.0, 0.1)

    def write(self, path, tokenizer_kv):
        gguf = self.gguf
        w = gguf.GGUFWriter(path, self.arch)
        # a neutral name: llama.cpp keys vocabulary fix-ups on general.name ("phi3" would make
        # 4747 look up Phi-3's special tokens, absent from this vocabulary, and fail to load)
        w.add_string("general.name", "arch-reference test model")
        for k, v, t in self.kv:
            w.add_key_value(k, v, t)
        for k, v, t in tokenizer_kv:
            w.add_key_value(k, v, t)
        for name, a, qtype in self.tensors:
            if qtype is None:
                w.add_tensor(name, a)
            else:
                w.add_tensor(name, a, raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def read_tokenizer(gguf, path):
    """The tokenizer.* keys of a GGUF as (key, value, type) for GGUFWriter.add_key_value."""
    r = gguf.GGUFReader(path)
    T = gguf.GGUFValueType
    out = []
    n_vocab = 0
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        t = f.types[0]
        if t == T.ARRAY:
            sub = f.types[1]
            if sub == T.STRING:
                val = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
            else:
                val = [f.parts[i][0].item() for i in f.data]
            out.append((key, val, T.ARRAY))
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(val)
        elif t == T.STRING:
            out.append((key, bytes(f.parts[f.data[0]]).decode("utf-8"), t))
        else:
            out.append((key, f.parts[f.data[0]][0].item(), t))
    return out, n_vocab


def common_keys(m, n_layer, n_embd, n_ff, n_head, n_head_kv, eps=1e-6, ctx=4096):
    m.u32("{arch}.context_length", ctx)
    m.u32("{arch}.embedding_length", n_embd)
    m.u32("{arch}.block_count", n_layer)
    m.u32("{arch}.feed_forward_length", n_ff)
    m.u32("{arch}.attention.head_count", n_head)
    m.u32("{arch}.attention.head_count_kv", n_head_kv)
    m.f32("{arch}.attention.layer_norm_rms_epsilon", eps)


def make_qwen2(gguf, n_vocab):
    m = Model(gguf, "qwen2", 1002)
    L, E, F, H, HKV, D = 3, 128, 192, 4, 2, 32
    common_keys(m, L, E, F, H, HKV)
    m.f32("{arch}.rope.freq_base", 10000.0)
    m.mat("token_embd.weight", n_vocab, E, 0.5)
    m.norm("output_norm.weight", E)
    # no output.weight: the lm head is tied to token_embd (llama.cpp's fallback, HF tie_word_embeddings)
    for il in range(L):
        p = f"blk.{il}."
        m.norm(p + "attn_norm.weight", E)
        m.mat(p + "attn_q.weight", H * D, E, 0.08)
        m.mat(p + "attn_k.weight", HKV * D, E, 0.08)
        m.mat(p + "attn_v.weight", HKV * D, E, 0.08)
        m.vec(p + "attn_q.bias", H * D, 0.0, 0.2)
        m.vec(p + "attn_k.bias", HKV * D, 0.0, 0.2)
        m.vec(p + "attn_v.bias", HKV * D, 0.0, 0.2)
        m.mat(p + "attn_output.weight", E, H * D, 0.08)
        m.norm(p + "ffn_norm.weight", E)
        m.mat(p + "ffn_gate.weight", F, E, 0.08)
        m.mat(p + "ffn_up.weight", F, E, 0.08)
        m.mat(p + "ffn_down.weight", E, F, 0.08)
    return m


def make_phi3(gguf, n_vocab):
    m = Model(gguf, "phi3", 1003)
    L, E, F, H, HKV = 3, 192, 256, 4, 2
    D = E // H  # 48: llama.cpp 4747's phi3 takes head_dim = n_embd / n_head
    common_keys(m, L, E, F, H, HKV, eps=1e-5)
    m.u32("{arch}.rope.dimension_count", D)
    m.f32("{arch}.rope.freq_base", 10000.0)
    m.u32("{arch}.attention.sliding_window", 8)
    m.mat("token_embd.weight", n_vocab, E, 0.5)
    m.norm("output_norm.weight", E)
    m.mat("output.weight", n_vocab, E, 0.08)
    for il in range(L):
        p = f"blk.{il}."
        m.norm(p + "attn_norm.weight", E)
        m.mat(p + "attn_qkv.weight", H * D + 2 * HKV * D, E, 0.08)  # rows: q | k | v
        m.mat(p + "attn_output.weight", E, H * D, 0.08)
        m.norm(p + "ffn_norm.weight", E)
        m.mat(p + "ffn_up.weight", 2 * F, E, 0.08)  # rows: gate | up
        m.mat(p + "ffn_down.weight", E, F, 0.08)
    return m


def make_gemma2(gguf, n_vocab):
    m = Model(gguf, "gemma2", 1004)
    L, E, F, H, HKV, D = 26, 64, 128, 4, 2, 32
    common_keys(m, L, E, F, H, HKV)
    m.u32("{arch}.attention.key_length", D)
    m.u32("{arch}.attention.value_length", D)
    m.f32("{arch}.rope.freq_base", 10000.0)
    m.u32("{arch}.attention.sliding_window", 8)
    m.f32("{arch}.attn_logit_softcapping", 2.0)
    m.f32("{arch}.final_logit_softcapping", 5.0)
    m.mat("token_embd.weight", n_vocab, E, 0.1)  # tied lm head; embeddings scaled by sqrt(64)
    m.norm("output_norm.weight", E)
    for il in range(L):
        p = f"blk.{il}."
        m.norm(p + "attn_norm.weight", E)  # stored with HF's +1 added, as the converter does
        m.mat(p + "attn_q.weight", H * D, E, 0.2)
        m.mat(p + "attn_k.weight", HKV * D, E, 0.2)
        m.mat(p + "attn_v.weight", HKV * D, E, 0.1)
        m.mat(p + "attn_output.weight", E, H * D, 0.1)
        m.norm(p + "post_attention_norm.weight", E)
        m.norm(p + "ffn_norm.weight", E)
        m.mat(p + "ffn_gate.weight", F, E, 0.15)
        m.mat(p + "ffn_up.weight", F, E, 0.15)
        m.mat(p + "ffn_down.weight", E, F, 0.1)
        m.norm(p + "post_ffw_norm.weight", E)
    return m


def make_qwen3(gguf, n_vocab):
    m = Model(gguf, "qwen3", 1005)
    L, E, F, H, HKV, D = 3, 96, 192, 4, 2, 32
    common_keys(m, L, E, F, H, HKV)
    m.u32("{arch}.attention.key_length", D)
    m.u32("{arch}.attention.value_length", D)
    m.f32("{arch}.rope.freq_base", 1000000.0)
    m.mat("token_embd.weight", n_vocab, E, 0.5)
    m.norm("output_norm.weight", E)
    m.mat("output.weight", n_vocab, E, 0.08)
    for il in range(L):
        p = f"blk.{il}."
        m.norm(p + "attn_norm.weight", E)
        m.mat(p + "attn_q.weight", H * D, E, 0.08)
        m.mat(p + "attn_k.weight", HKV * D, E, 0.08)
        m.mat(p + "attn_v.weight", HKV * D, E, 0.08)
        m.norm(p + "attn_q_norm.weight", D)
        m.norm(p + "attn_k_norm.weight", D)
        m.mat(p + "attn_output.weight", E, H * D, 0.08)
        m.norm(p + "ffn_norm.weight", E)
        m.mat(p + "ffn_gate.weight", F, E, 0.08)
        m.mat(p + "ffn_up.weight", F, E, 0.08)
        m.mat(p + "ffn_down.weight", E, F, 0.08)
    return m


def make_gemma3(gguf, n_vocab):
    m = Model(gguf, "gemma3", 1006)
    L, E, F, H, HKV, D = 7, 64, 128, 4, 2, 32
    common_keys(m, L, E, F, H, HKV)
    m.u32("{arch}.attention.key_length", D)
    m.u32("{arch}.attention.value_length", D)
    m.f32("{arch}.rope.freq_base", 1000000.0)
    m.string("{arch}.rope.scaling.type", "linear")
    m.f32("{arch}.rope.scaling.factor", 8.0)
    m.u32("{arch}.attention.sliding_window", 8)
    m.mat("token_embd.weight", n_vocab, E, 0.1)
    m.norm("output_norm.weight", E)
    for il in range(L):
        p = f"blk.{il}."
        m.norm(p + "attn_norm.weight", E)
        m.mat(p + "attn_q.weight", H * D, E, 0.2)
        m.mat(p + "attn_k.weight", HKV * D, E, 0.2)
        m.mat(p + "attn_v.weight", HKV * D, E, 0.1)
        m.norm(p + "attn_q_norm.weight", D)
        m.norm(p + "attn_k_norm.weight", D)
        m.mat(p + "attn_output.weight", E, H * D, 0.1)
        m.norm(p + "post_attention_norm.weight", E)
        m.norm(p + "ffn_norm.weight", E)
        m.mat(p + "ffn_gate.weight", F, E, 0.15)
        m.mat(p + "ffn_up.weight", F, E, 0.15)
        m.mat(p + "ffn_down.weight", E, F, 0.1)
        m.norm(p + "post_ffw_norm.weight", E)
    return m


def make_llama_variant(gguf, src, qtype_name):
    """The llama model at src with its 2-D matrices stored as qtype_name (F16, BF16 or Q8_0)."""
    r = gguf.GGUFReader(src)
    T = gguf.GGUFValueType
    m = Model(gguf, "llama", 0)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key.startswith("tokenizer.") or key in ("general.architecture", "general.name"):
            continue
        t = f.types[0]
        if t == T.STRING:
            m.key(key, bytes(f.parts[f.data[0]]).decode("utf-8"), t)
        elif t != T.ARRAY:
            m.key(key, f.parts[f.data[0]][0].item(), t)
    qt = getattr(gguf.GGMLQuantizationType, qtype_name)
    for t in r.tensors:
        a = np.array(t.data, dtype=np.float32).reshape(list(reversed([int(x) for x in t.shape])))
        if a.ndim == 2 and (qtype_name != "Q8_0" or a.shape[1] % 32 == 0):  # Q8_0: rows of whole blocks
            if qtype_name == "F16":
                m.tensors.append((t.name, a.astype(np.float16), None))
            else:
                m.tensors.append((t.name, gguf.quants.quantize(a, qt), qt))
        else:
            m.tensors.append((t.name, a, None))
    return m


MAKERS = {"qwen2": make_qwen2, "phi3": make_phi3, "gemma2": make_gemma2,
          "qwen3": make_qwen3, "gemma3": make_gemma3}
VARIANTS = {"llama-f16": "F16", "llama-bf16": "BF16", "llama-q8_0": "Q8_0"}


def main():
    ap = argparse.ArgumentParser(description="write tiny random-weight GGUF test models")
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    ap.add_argument("--tokenizer-from", required=True, help="GGUF (llama, F32) whose tokenizer.* keys to copy")
    ap.add_argument("-o", "--out-dir", required=True)
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(list(MAKERS) + list(VARIANTS)))
    args = ap.parse_args()
    gguf = import_gguf(args.gguf_py)
    os.makedirs(args.out_dir, exist_ok=True)
    tok_kv, n_vocab = read_tokenizer(gguf, args.tokenizer_from)
    only = set(x for x in args.only.split(",") if x)
    for name, make in MAKERS.items():
        if only and name not in only:
            continue
        path = os.path.join(args.out_dir, name + ".gguf")
        make(gguf, n_vocab).write(path, tok_kv)
        print("wrote", path)
    for name, qtype in VARIANTS.items():
        if only and name not in only:
            continue
        path = os.path.join(args.out_dir, name + ".gguf")
        make_llama_variant(gguf, args.tokenizer_from, qtype).write(path, tok_kv)
        print("wrote", path)


if __name__ == "__main__":
    main()
