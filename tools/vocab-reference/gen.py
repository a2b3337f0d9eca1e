#!/usr/bin/env python3
"""Vocabulary test files for the tokenizers whose real vocabularies are not at hand here: a
Gemma-style SentencePiece vocabulary and a Qwen2/Qwen3-style byte-level BPE vocabulary, each
trained on a fixed corpus, written as metadata-only GGUF files as llama.cpp's
models/ggml-vocab-*.gguf are, with the texts to tokenize (.inp) and llama.cpp's ids for them
(.out, from lcpp-tokenize, llama.cpp build 4747).

    tools/vocab-reference/gen.py LLAMA_CPP_SRC LCPP_TOKENIZE OUTDIR

LLAMA_CPP_SRC: a llama.cpp source tree at build 4747: the corpus is its prompts/*.txt and
models/*.inp (sorted by name), the texts are its models/ggml-vocab-{llama-spm,qwen2}.gguf.inp
plus the cases in EXTRA below. LCPP_TOKENIZE: tools/vocab-reference/lcpp-tokenize built against
that tree (build-lcpp-tokenize.sh). Writes OUTDIR/ggml-vocab-{gemma-spm,qwen-bpe}.gguf{,.inp,.out}.

What each vocabulary carries of its family (what llama.cpp's tokenizer looks at):
- gemma-spm: tokenizer.ggml.model "llama" (SentencePiece) with add_space_prefix false, pieces
  scored by merge rank, byte fallback <0x00>..<0xFF>, control <pad> <eos> <bos>, <unk>,
  user-defined <start_of_turn> <end_of_turn> (matched in plain text too), an unused token, runs of
  spaces and newlines as pieces; architecture gemma2.
- qwen-bpe: tokenizer.ggml.model "gpt2" with pre-tokenizer "qwen2" (what Qwen2 and Qwen3 files
  say: digits one at a time, contractions case-insensitive), the 256 byte characters, merges by
  rank, control <|endoftext|> <|im_start|> <|im_end|>, user-defined <think> </think>; architecture
  qwen2.
"""
import glob
import os
import re
import struct
import subprocess
import sys
from collections import Counter

import regex  # \p{L}, \p{N}

N_MERGES = 1200
SEP = "\n__ggml_vocab_test__\n"

# Cases beyond llama.cpp's own texts: user-defined and control tokens inside text, runs of
# spaces and newlines, digits, contractions in capitals, scripts without pieces (byte fallback).
EXTRA = [
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos>not parsed<eos> <pad>",
    "a<start_of_turn><start_of_turn>b <end_of_turn>",
    "<think>\nplan</think>\n\nanswer",
    "<|im_start|>system\nYou are<|im_end|>",
    "I'M HERE, YOU'RE THERE, WE'LL SEE, it'S",
    "12345 67.89 1,000,000 3rd 2nd",
    "x    y\t\tz\n\n\n  w   ",
    "tab\there\r\nwindows line\r\n",
    "日本語のテキスト and 한국어 and עברית",
    "emoji 🦙🦙 and 👍🏽 and ⌘",
    "    leading spaces",
    "trailing spaces    ",
    "\n\nleading newlines",
    "mixed\u00a0nbsp\u2009thin\u3000ideographic",
]

# ---- GGUF (v3), metadata only -----------------------------------------------------------------
U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9


def gguf_bytes(kv):
    def s(x):
        b = x.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for key, (typ, val) in kv:
        out += s(key) + struct.pack("<I", typ)
        if typ == ARR:
            et, items = val
            out += struct.pack("<IQ", et, len(items))
            for it in items:
                out += s(it) if et == STR else struct.pack({I32: "<i", F32: "<f"}[et], it)
        elif typ == STR:
            out += s(val)
        elif typ == BOOL:
            out += struct.pack("<?", val)
        else:
            out += struct.pack({U32: "<I", I32: "<i", F32: "<f"}[typ], val)
    return out + b"\0" * (-len(out) % 32)


def hparams(arch, extra):
    kv = [("general.architecture", (STR, arch)), ("general.name", (STR, "vocab-reference")),
          (f"{arch}.context_length", (U32, 256)), (f"{arch}.embedding_length", (U32, 64)),
          (f"{arch}.block_count", (U32, 1)), (f"{arch}.feed_forward_length", (U32, 128)),
          (f"{arch}.attention.head_count", (U32, 4)), (f"{arch}.attention.head_count_kv", (U32, 4)),
          (f"{arch}.attention.layer_norm_rms_epsilon", (F32, 1e-6))]
    return kv + [(f"{arch}.{k}", v) for k, v in extra]


# ---- training ---------------------------------------------------------------------------------
def bpe_merges(words, n_merges):
    """Merges by frequency over a Counter of symbol tuples; ties broken by the pair's text."""
    words = {tuple(w): c for w, c in words.items()}
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        merges.append(best)
        merged = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return merges


def byte_chars():
    """GPT-2's byte-to-character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


QWEN2_RE = regex.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen_bpe(corpus):
    bc = byte_chars()
    words = Counter()
    for pre in QWEN2_RE.findall(corpus):
        words[tuple(bc[b] for b in pre.encode("utf-8"))] += 1
    merges = bpe_merges(words, N_MERGES)
    tokens = [bc[b] for b in range(256)] + [a + b for a, b in merges]
    types = [1] * len(tokens)
    first_special = len(tokens)
    for t, ty in [("<|endoftext|>", 3), ("<|im_start|>", 3), ("<|im_end|>", 3), ("<think>", 4), ("</think>", 4)]:
        tokens.append(t)
        types.append(ty)
    kv = hparams("qwen2", []) + [
        ("tokenizer.ggml.model", (STR, "gpt2")), ("tokenizer.ggml.pre", (STR, "qwen2")),
        ("tokenizer.ggml.tokens", (ARR, (STR, tokens))), ("tokenizer.ggml.token_type", (ARR, (I32, types))),
        ("tokenizer.ggml.merges", (ARR, (STR, [a + " " + b for a, b in merges]))),
        ("tokenizer.ggml.eos_token_id", (U32, first_special)), ("tokenizer.ggml.padding_token_id", (U32, first_special)),
        ("tokenizer.ggml.bos_token_id", (U32, first_special)), ("tokenizer.ggml.add_bos_token", (BOOL, False)),
    ]
    return gguf_bytes(kv)


def gemma_spm(corpus):
    text = corpus.replace(" ", "\u2581")
    # SentencePiece's units: a run of pieces starting at a space marker (newlines kept whole).
    words = Counter(re.findall("\u2581*[^\u2581\n]+|\u2581+|\n+", text))
    chars = Counter(ch for w, c in words.items() for ch in w for _ in range(c))
    merges = bpe_merges(Counter({tuple(w): c for w, c in words.items()}), N_MERGES)
    tokens, types, scores = [], [], []

    def add(t, ty, sc=0.0):
        tokens.append(t)
        types.append(ty)
        scores.append(sc)

    for t, ty in [("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 2), ("<mask>", 4),
                  ("<start_of_turn>", 4), ("<end_of_turn>", 4), ("<unused0>", 5)]:
        add(t, ty)
    for b in range(256):
        add("<0x%02X>" % b, 6)
    seen = set(tokens)
    # Whitespace runs as Gemma has them (up to 8 spaces, newlines up to 4, tabs), then the
    # pieces in merge order (higher score merges first), then the corpus's characters.
    rank = 0
    for t in ["\u2581" * n for n in range(2, 9)] + ["\n" * n for n in range(1, 5)] + ["\t", "\t\t"]:
        add(t, 1, -float(rank))
        seen.add(t)
        rank += 1
    for a, b in merges:
        if a + b not in seen:
            add(a + b, 1, -float(rank))
            seen.add(a + b)
            rank += 1
    for ch, c in sorted(chars.items(), key=lambda kv: (-kv[1], kv[0])):
        if c >= 2 and ch not in seen:
            add(ch, 1, -1e4 - len(tokens))
            seen.add(ch)
    kv = hparams("gemma2", [("attention.key_length", (U32, 16)), ("attention.value_length", (U32, 16)),
                            ("attention.sliding_window", (U32, 64)), ("attn_logit_softcapping", (F32, 50.0)),
                            ("final_logit_softcapping", (F32, 30.0))]) + [
        ("tokenizer.ggml.model", (STR, "llama")), ("tokenizer.ggml.pre", (STR, "default")),
        ("tokenizer.ggml.tokens", (ARR, (STR, tokens))), ("tokenizer.ggml.scores", (ARR, (F32, scores))),
        ("tokenizer.ggml.token_type", (ARR, (I32, types))),
        ("tokenizer.ggml.bos_token_id", (U32, 2)), ("tokenizer.ggml.eos_token_id", (U32, 1)),
        ("tokenizer.ggml.unknown_token_id", (U32, 3)), ("tokenizer.ggml.padding_token_id", (U32, 0)),
        ("tokenizer.ggml.add_bos_token", (BOOL, True)), ("tokenizer.ggml.add_eos_token", (BOOL, False)),
        ("tokenizer.ggml.add_space_prefix", (BOOL, False)),
    ]
    return gguf_bytes(kv)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, tok, outdir = sys.argv[1:]
    files = sorted(glob.glob(os.path.join(src, "prompts", "*.txt"))) + sorted(glob.glob(os.path.join(src, "models", "*.inp")))
    corpus = "".join(open(f, encoding="utf-8", errors="replace").read().replace(SEP, "\n") + "\n" for f in files)
    os.makedirs(outdir, exist_ok=True)
    for name, build, texts_from in [("gemma-spm", gemma_spm, "llama-spm"), ("qwen-bpe", qwen_bpe, "qwen2")]:
        path = os.path.join(outdir, f"ggml-vocab-{name}.gguf")
        with open(path, "wb") as f:
            f.write(build(corpus))
        inp = open(os.path.join(src, "models", f"ggml-vocab-{texts_from}.gguf.inp"), encoding="utf-8").read()
        texts = inp.split(SEP)
        if texts and texts[-1] == "":
            texts.pop()
        with open(path + ".inp", "w", encoding="utf-8", newline="") as f:
            f.write("".join(t + SEP for t in texts + EXTRA))
        subprocess.run([tok, path, path + ".inp", path + ".out"], check=True)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
