#!/usr/bin/env python3
"""Writes a copy of a GGUF model in which every F16 matrix carries a little Gaussian noise: value
x of a row becomes x + FRAC * rms(row) * N(0, 1), rounded to F16 again. draws.sh quantizes such
copies to measure how much a quantized file's KL divergence owes to chance: the noise moves the
few values that sit next to a rounding boundary across it, so each copy is another draw of the
same quantizer's rounding decisions, while its own error is small (FRAC^2 of the row's mean
square: 2.5e-5 at the default 0.005, beside 5e-3 for Q4_K).

usage: perturb.py IN.gguf OUT.gguf SEED [FRAC]   (needs numpy)
"""
import shutil
import struct
import sys

import numpy as np

GGML_TYPE_F16 = 1
# GGUF metadata value types -> struct format of a scalar (8: string, 9: array)
SCALAR = {0: '<B', 1: '<b', 2: '<H', 3: '<h', 4: '<I', 5: '<i', 6: '<f', 7: '<?', 10: '<Q', 11: '<q', 12: '<d'}


class Reader:
    def __init__(self, f):
        self.f = f

    def get(self, fmt):
        return struct.unpack(fmt, self.f.read(struct.calcsize(fmt)))[0]

    def string(self):
        return self.f.read(self.get('<Q')).decode('utf-8')

    def value(self, vtype):
        if vtype == 8:
            return self.string()
        if vtype == 9:
            itype, n = self.get('<I'), self.get('<Q')
            return [self.value(itype) for _ in range(n)]
        return self.get(SCALAR[vtype])


def f16_matrices(path):
    """(name, absolute offset, row length, row count) of every F16 tensor of 2 or more dims."""
    with open(path, 'rb') as f:
        r = Reader(f)
        if f.read(4) != b'GGUF' or r.get('<I') not in (2, 3):
            sys.exit(f'{path}: not a GGUF file of version 2 or 3')
        n_tensors, n_kv = r.get('<Q'), r.get('<Q')
        alignment = 32
        for _ in range(n_kv):
            key = r.string()
            val = r.value(r.get('<I'))
            if key == 'general.alignment':
                alignment = val
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            dims = [r.get('<Q') for _ in range(r.get('<I'))]
            ttype, offset = r.get('<I'), r.get('<Q')
            infos.append((name, dims, ttype, offset))
        data = (f.tell() + alignment - 1) // alignment * alignment
    return [(name, data + off, dims[0], int(np.prod(dims[1:])))
            for name, dims, ttype, off in infos if ttype == GGML_TYPE_F16 and len(dims) >= 2]


def main():
    src, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    frac = float(sys.argv[4]) if len(sys.argv) > 4 else 0.005
    matrices = f16_matrices(src)
    shutil.copyfile(src, out)
    rng = np.random.default_rng(seed)
    with open(out, 'r+b') as f:
        for name, offset, ne0, nrows in matrices:
            f.seek(offset)
            rows = np.frombuffer(f.read(2 * ne0 * nrows), dtype='<f2').astype(np.float32).reshape(nrows, ne0)
            rms = np.sqrt((rows * rows).mean(axis=1, keepdims=True))
            noisy = rows + rng.standard_normal(rows.shape, dtype=np.float32) * (frac * rms)
            f.seek(offset)
            f.write(noisy.astype('<f2').tobytes())
    n = len(matrices)
    print(f'{out}: {n} F16 matrices perturbed by {frac} x row rms, seed {seed}')


if __name__ == '__main__':
    main()
