#!/usr/bin/env python3
"""The type llama.cpp's llama-quantize gives each tensor of a model, for every mix: the reference
tests/tools/test-llama-quantize.cpp (MixesAreLlamaCppsTensorForTensor) holds our quantizer's choices to.

    tools/quant-reference/gen.py LLAMA_CPP_QUANTIZE MODEL.gguf OUT.types [--imatrix]

MODEL.gguf: an F16 model of tiny::quant_mix_specs (test-arch --gtest_filter=ArchReference.WriteModels
with LLAMA_ARCH_WRITE_MODELS=DIR LLAMA_ARCH_WRITE_QUANT_MIX=1). LLAMA_CPP_QUANTIZE: llama.cpp's
llama-quantize (build 4747). OUT.types, a text file:

    targets Q2_K Q3_K_S ...
    info arch llama n_layer 16 n_head 8 n_head_kv 2 n_expert 0 has_output 1 has_imatrix 0
    tensor NAME N_DIMS NE0 NE1 NE2 TYPE-FOR-EACH-TARGET...

With --imatrix, every target is made with an importance matrix (all weights 1, an entry for
every matrix: some of llama.cpp's rules change with one, and its very-low-bit targets need one);
without, the targets that need one are left out.

Only the tensors' headers are read (GGUF v3: the key-value pairs are skipped by their types)."""
import os
import struct
import subprocess
import sys
import tempfile

TARGETS = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
           "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ3_XS", "IQ3_S", "IQ3_M", "TQ1_0", "TQ2_0"]
# The targets llama.cpp makes only with an importance matrix (IQ3_XXS: its attention K is IQ2_S).
IMATRIX_TARGETS = ["IQ3_XXS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "Q2_K_S"]
# ggml type ids (ggml.h) to the names ggml_type_name gives.
TYPE_NAMES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 9: "q8_1", 10: "q2_K",
              11: "q3_K", 12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K", 16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs",
              19: "iq1_s", 20: "iq4_nl", 21: "iq3_s", 22: "iq2_s", 23: "iq4_xs", 29: "iq1_m", 30: "bf16", 34: "tq1_0",
              35: "tq2_0"}
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.o)[0]
        self.o += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.o:self.o + n].decode("utf-8")
        self.o += n
        return s

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError("unknown GGUF value type %d" % t)


def read_gguf(path):
    """The key-value pairs and the tensors (name, ne, type name) of a GGUF file."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # the header is at the start
    r = Reader(data)
    if r.take("<I") != 0x46554747 or r.take("<I") != 3:
        raise ValueError(path + ": not a GGUF v3 file")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    kv = {}
    for _ in range(n_kv):
        k = r.string()
        kv[k] = r.value(r.take("<I"))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        ne = [r.take("<Q") for _ in range(r.take("<I"))]
        t = r.take("<I")
        r.take("<Q")  # offset
        tensors.append((name, ne, TYPE_NAMES.get(t, "type%d" % t)))
    return kv, tensors


def write_imatrix(path, tensors):
    """llama.cpp's .dat: every matrix (a stacked expert tensor: ne0 x n_expert values) weighted 1."""
    entries = [(name, ne) for name, ne, _ in tensors if len(ne) >= 2 and name.endswith(".weight")]
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(entries)))
        for name, ne in entries:
            n = ne[0] * (ne[2] if len(ne) > 2 else 1)
            f.write(struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", 1, n) + struct.pack("<%df" % n, *([1.0] * n)))
        f.write(struct.pack("<i", 1) + struct.pack("<i", 4) + b"ones")


def main():
    if len(sys.argv) not in (4, 5) or (len(sys.argv) == 5 and sys.argv[4] != "--imatrix"):
        sys.exit(__doc__)
    quantize, model, out = sys.argv[1:4]
    with_imatrix = len(sys.argv) == 5
    targets = TARGETS + (IMATRIX_TARGETS if with_imatrix else [])
    kv, tensors = read_gguf(model)
    arch = kv["general.architecture"]
    info = [("arch", arch), ("n_layer", kv[arch + ".block_count"]), ("n_head", kv[arch + ".attention.head_count"]),
            ("n_head_kv", kv.get(arch + ".attention.head_count_kv", kv[arch + ".attention.head_count"])),
            ("n_expert", kv.get(arch + ".expert_count", 0)),
            ("has_output", int(any(t[0] == "output.weight" for t in tensors))), ("has_imatrix", int(with_imatrix))]
    types = {t[0]: [] for t in tensors}
    with tempfile.TemporaryDirectory() as tmp:
        imatrix = []
        if with_imatrix:
            write_imatrix(os.path.join(tmp, "ones.dat"), tensors)
            imatrix = ["--imatrix", os.path.join(tmp, "ones.dat")]
        for target in targets:
            q = os.path.join(tmp, target + ".gguf")
            subprocess.run([quantize] + imatrix + [model, q, target, "2"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, _, t in read_gguf(q)[1]:
                types[name].append(t)
            os.remove(q)
    with open(out, "w") as f:
        f.write("# llama.cpp build 4747's llama-quantize on %s (tools/quant-reference/gen.py)\n" % os.path.basename(model))
        f.write("targets " + " ".join(targets) + "\n")
        f.write("info " + " ".join("%s %s" % p for p in info) + "\n")
        for name, ne, _ in tensors:
            full = ne + [1] * (3 - len(ne))
            f.write("tensor %s %d %d %d %d %s\n" % (name, len(ne), full[0], full[1], full[2], " ".join(types[name])))


if __name__ == "__main__":
    main()
