// quant-repack-k.cpp - the layouts of the types with Q8_K activations, Q4_K, Q5_K, Q6_K and IQ4_XS
// x16 (quant-repack.h): packing, the way back, and the scalar reference kernel, one template over
// the type. Per super-block, row r and column, with the values taken unsigned (integers, exact in
// any order):
//   Q4_K, Q5_K: 8 sub-blocks of 32 with 6-bit scales sc_j and mins m_j,
//     msum = sum_j m_j * (bsums[2j] + bsums[2j + 1]), isum = sum_j sc_j * dot32_j, then
//     acc = fma(-(dmin * d_a), msum, acc); acc = fma(d * d_a, isum, acc)
//     in that order: the mins first, so that kernels need not keep them in registers.
//   Q6_K: 16 sub-blocks of 16 with int8 scales, u = q in 0..63, the offset of 32 taken out
//     through Q8_K's 16-value sums:
//     isum = sum_j sc_j * dot16_j - 32 * sum_j sc_j * bsums[j], then acc = fma(d * d_a, isum, acc).
//   IQ4_XS: 8 sub-blocks of 32 with scales sc_j = ls_j - 32, u = kvalues_iq4nl[q] + 128 in 1..241
//     (the levels -127..113 made unsigned, as vpdpbusd takes them), the offset of 128 taken out
//     through the 32-value sums as Q6_K's: isum = sum_j sc_j * dot32_j - 128 * sum_j sc_j *
//     bsum32_j (at most 8 * 32 * 32 * 241 * 127 in magnitude: no overflow), then as Q6_K. The
//     integer is the plain dot's sum_j sc_j * (levels . q8), so only the float steps differ.
// super-block after super-block. The SIMD kernels (arch/, quant-repack-k-<isa>.cpp) compute the
// same integers and float steps, so the same bits.
//
// Where the values live in the x16 groups:
//   Q4_K: sub-block j is nibble j % 2 of bytes 32 (j / 2) .. 32 (j / 2) + 31, qs column byte / 4.
//   Q5_K: as Q4_K, with a fifth bit: for sub-block pair c (sub-blocks 2c, 2c + 1) and byte l of
//     32, the low-nibble value is (qs[32c + l] & 15) | bit 2c of qh[l] << 4 and the high-nibble
//     value (qs[32c + l] >> 4) | bit 2c + 1 of qh[l] << 4 (0..31). In the x16 layout byte 32c + l
//     is qs column (32c + l) / 4, and its high bits are qh column (l / 4) = (qs column) % 8.
//   Q6_K: value v = 128h + 32t + l (h half, t quarter 0..3, l 0..31) has its low 4 bits in ql byte
//     64h + 32(t & 1) + l (low nibble for t < 2, high nibble otherwise), its high 2 bits in qh
//     byte 32h + l at bit 2t. In 4-byte columns: l = 4g + b, ql column 16h + 8(t & 1) + g, qh
//     column 8h + g, byte b of each; ggml_q6_Kx16_ql / _qh say where a column is stored.
//   IQ4_XS: value 32j + l of sub-block j is nibble l / 16 of byte 16j + l % 16: qs column
//     4j + (l % 16) / 4.
#include "quant-repack.h"
#include "kernels.h"

#include <math.h>
#include <string.h>

namespace {

// ---- Q4_K / Q5_K scales and mins: row r's 12 packed bytes <-> the group's sm and mlo ----------
// The 6-bit min of sub-block j of row r (its scale is sm[j][r] & 63).
inline int k4_min(const uint8_t (*sm)[GGML_REPACK_ROWS], const uint8_t (*mlo)[GGML_REPACK_ROWS], int j, int r) {
    return ((sm[j][r] >> 6) << 4) | ((mlo[j / 2][r] >> (4 * (j & 1))) & 15);
}

void k4_scales_in(const uint8_t * scales, int r, uint8_t (*sm)[GGML_REPACK_ROWS], uint8_t (*mlo)[GGML_REPACK_ROWS]) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales, &sc, &m);
        const int shift = 4 * (j & 1);
        sm[j][r] = (uint8_t) (sc | ((m >> 4) << 6));
        mlo[j / 2][r] = (uint8_t) ((mlo[j / 2][r] & ~(15 << shift)) | ((m & 15) << shift));
    }
}

// The inverse of get_scale_min_k4: the 96 bits of the 12 bytes hold each scale and min once.
void k4_scales_out(const uint8_t (*sm)[GGML_REPACK_ROWS], const uint8_t (*mlo)[GGML_REPACK_ROWS], int r, uint8_t * q) {
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = sm[j][r] & 63;
        m[j] = (uint8_t) k4_min(sm, mlo, j, r);
    }
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t) ((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t) ((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t) ((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

// ---- groups <-> 16 GGUF rows of nb blocks ---------------------------------------------------
// A row's bytes in 4-byte columns, column c at col[c][r] (and back): the quant bytes of every layout.
inline void columns_in(const uint8_t * src, int ncol, uint8_t (*col)[GGML_REPACK_ROWS][4], int r) {
    for (int c = 0; c < ncol; c++) memcpy(col[c][r], src + 4 * c, 4);
}
inline void columns_out(const uint8_t (*col)[GGML_REPACK_ROWS][4], int ncol, int r, uint8_t * dst) {
    for (int c = 0; c < ncol; c++) memcpy(dst + 4 * c, col[c][r], 4);
}

// Q4_K / Q5_K: the same fields, plus Q5_K's high bits.
inline void k4_qh_in(const block_q4_K &, int, block_q4_Kx16 &) {}
inline void k4_qh_in(const block_q5_K & src, int r, block_q5_Kx16 & g) {
    columns_in(src.qh, QK_K / 32, g.qh, r);
}
inline void k4_qh_out(const block_q4_Kx16 &, int, block_q4_K &) {}
inline void k4_qh_out(const block_q5_Kx16 & g, int r, block_q5_K & dst) {
    columns_out(g.qh, QK_K / 32, r, dst.qh);
}

template <typename Row, typename Group>
void k4_pack_group(const void * vrows, int64_t nb, void * vout) {
    const Row * rows = (const Row *) vrows;
    Group * out = (Group *) vout;
    for (int64_t i = 0; i < nb; i++) {
        Group & g = out[i];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            const Row & src = rows[r * nb + i];
            g.d[r] = src.d;
            g.dmin[r] = src.dmin;
            k4_scales_in(src.scales, r, g.sm, g.mlo);
            k4_qh_in(src, r, g);
            columns_in(src.qs, QK_K / 8, g.qs, r);
        }
    }
}

template <typename Row, typename Group>
void k4_unpack_group(const void * vin, int64_t nb, void * vrows) {
    const Group * in = (const Group *) vin;
    Row * rows = (Row *) vrows;
    for (int64_t i = 0; i < nb; i++) {
        const Group & g = in[i];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            Row & dst = rows[r * nb + i];
            dst.d = g.d[r];
            dst.dmin = g.dmin[r];
            k4_scales_out(g.sm, g.mlo, r, dst.scales);
            k4_qh_out(g, r, dst);
            columns_out(g.qs, QK_K / 8, r, dst.qs);
        }
    }
}

void q6_K_pack_group(const void * vrows, int64_t nb, void * vout) {
    const block_q6_K * rows = (const block_q6_K *) vrows;
    block_q6_Kx16 * out = (block_q6_Kx16 *) vout;
    for (int64_t i = 0; i < nb; i++) {
        block_q6_Kx16 & g = out[i];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            const block_q6_K & src = rows[r * nb + i];
            g.d[r] = src.d;
            for (int j = 0; j < QK_K / 16; j++) g.scales[j][r] = src.scales[j];
            for (int k = 0; k < QK_K / 8; k++) memcpy(g.q[ggml_q6_Kx16_ql(k)][r], src.ql + 4 * k, 4);
            for (int k = 0; k < QK_K / 16; k++) memcpy(g.q[ggml_q6_Kx16_qh(k)][r], src.qh + 4 * k, 4);
        }
    }
}

void q6_K_unpack_group(const void * vin, int64_t nb, void * vrows) {
    const block_q6_Kx16 * in = (const block_q6_Kx16 *) vin;
    block_q6_K * rows = (block_q6_K *) vrows;
    for (int64_t i = 0; i < nb; i++) {
        const block_q6_Kx16 & g = in[i];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            block_q6_K & dst = rows[r * nb + i];
            dst.d = g.d[r];
            for (int j = 0; j < QK_K / 16; j++) dst.scales[j] = g.scales[j][r];
            for (int k = 0; k < QK_K / 8; k++) memcpy(dst.ql + 4 * k, g.q[ggml_q6_Kx16_ql(k)][r], 4);
            for (int k = 0; k < QK_K / 16; k++) memcpy(dst.qh + 4 * k, g.q[ggml_q6_Kx16_qh(k)][r], 4);
        }
    }
}

// IQ4_XS: d and the scales' bytes as they are, the quant bytes in columns.
void iq4_xs_pack_group(const void * vrows, int64_t nb, void * vout) {
    const block_iq4_xs * rows = (const block_iq4_xs *) vrows;
    block_iq4_xsx16 * out = (block_iq4_xsx16 *) vout;
    for (int64_t i = 0; i < nb; i++) {
        block_iq4_xsx16 & g = out[i];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            const block_iq4_xs & src = rows[r * nb + i];
            g.d[r] = src.d;
            g.scales_h[0][r] = (uint8_t) (src.scales_h & 0xFF);
            g.scales_h[1][r] = (uint8_t) (src.scales_h >> 8);
            for (int k = 0; k < QK_K / 64; k++) g.scales_l[k][r] = src.scales_l[k];
            columns_in(src.qs, QK_K / 8, g.qs, r);
        }
    }
}

void iq4_xs_unpack_group(const void * vin, int64_t nb, void * vrows) {
    const block_iq4_xsx16 * in = (const block_iq4_xsx16 *) vin;
    block_iq4_xs * rows = (block_iq4_xs *) vrows;
    for (int64_t i = 0; i < nb; i++) {
        const block_iq4_xsx16 & g = in[i];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            block_iq4_xs & dst = rows[r * nb + i];
            dst.d = g.d[r];
            dst.scales_h = (uint16_t) (g.scales_h[0][r] | (g.scales_h[1][r] << 8));
            for (int k = 0; k < QK_K / 64; k++) dst.scales_l[k] = g.scales_l[k][r];
            columns_out(g.qs, QK_K / 8, r, dst.qs);
        }
    }
}

// ---- the reference kernel -------------------------------------------------------------------
// Per type: SUB values per sub-block, value v (0..255) of row r unsigned, sub-block j's scale,
// and either its min (MINS) or the offset taken out through the sub-block's sums (OFFSET).
struct RefQ4K {
    typedef block_q4_Kx16 G;
    static constexpr int SUB = 32, OFFSET = 0;
    static constexpr bool MINS = true;
    static int value(const G & g, int r, int v) {
        const int j = v / 32, byte = 32 * (j / 2) + v % 32;
        const uint8_t q = g.qs[byte / 4][r][byte % 4];
        return (j & 1) ? (q >> 4) : (q & 15);
    }
    static int scale(const G & g, int r, int j) { return g.sm[j][r] & 63; }
    static int min(const G & g, int r, int j) { return k4_min(g.sm, g.mlo, j, r); }
};

struct RefQ5K {
    typedef block_q5_Kx16 G;
    static constexpr int SUB = 32, OFFSET = 0;
    static constexpr bool MINS = true;
    static int value(const G & g, int r, int v) {
        const int j = v / 32, l = v % 32, byte = 32 * (j / 2) + l;
        const uint8_t q = g.qs[byte / 4][r][byte % 4];
        const uint8_t h = g.qh[l / 4][r][l % 4];
        return ((j & 1) ? (q >> 4) : (q & 15)) | (((h >> j) & 1) << 4);
    }
    static int scale(const G & g, int r, int j) { return g.sm[j][r] & 63; }
    static int min(const G & g, int r, int j) { return k4_min(g.sm, g.mlo, j, r); }
};

struct RefQ6K {
    typedef block_q6_Kx16 G;
    static constexpr int SUB = 16, OFFSET = 32;
    static constexpr bool MINS = false;
    static int value(const G & g, int r, int v) {
        const int h = v / 128, t = (v % 128) / 32, l = v % 32;
        const int bl = 64 * h + 32 * (t & 1) + l, bh = 32 * h + l;
        const int lo = (g.q[ggml_q6_Kx16_ql(bl / 4)][r][bl % 4] >> (4 * (t >> 1))) & 15;
        const int hi = (g.q[ggml_q6_Kx16_qh(bh / 4)][r][bh % 4] >> (2 * t)) & 3;
        return lo | (hi << 4);
    }
    static int scale(const G & g, int r, int j) { return g.scales[j][r]; }
};

struct RefIQ4XS {
    typedef block_iq4_xsx16 G;
    static constexpr int SUB = 32, OFFSET = 128;
    static constexpr bool MINS = false;
    static int value(const G & g, int r, int v) {
        const int l = v % 32, byte = 16 * (v / 32) + l % 16;
        const uint8_t q = g.qs[byte / 4][r][byte % 4];
        return kvalues_iq4nl[l < 16 ? q & 15 : q >> 4] + 128;
    }
    static int scale(const G & g, int r, int j) {
        const int lo = (g.scales_l[j / 2][r] >> (4 * (j % 2))) & 15, hi = (g.scales_h[j / 4][r] >> (2 * (j % 4))) & 3;
        return (lo | (hi << 4)) - 32;
    }
};

template <typename T>
void gemm_ref(int64_t nb, const void * va, const void * vb, size_t ldb, int nc, float * s, size_t lds) {
    const typename T::G * a = (const typename T::G *) va;
    for (int c = 0; c < nc; c++) {
        const block_q8_Kx * y = (const block_q8_Kx *) ((const char *) vb + c * ldb);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < nb; i++) {
                const typename T::G & g = a[i];
                int32_t isum = 0, msum = 0, bsum = 0;
                for (int j = 0; j < QK_K / T::SUB; j++) {
                    int32_t dot = 0;
                    for (int l = 0; l < T::SUB; l++) dot += T::value(g, r, T::SUB * j + l) * y[i].qs[T::SUB * j + l];
                    isum += T::scale(g, r, j) * dot;
                    if constexpr (T::MINS) msum += T::min(g, r, j) * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
                    else bsum += T::scale(g, r, j) * (T::SUB == 16 ? y[i].bsums[j] : y[i].bsums32[j]);
                }
                isum -= T::OFFSET * bsum;
                if constexpr (T::MINS) acc = fmaf(-(GGML_FP16_TO_FP32(g.dmin[r]) * y[i].d), (float) msum, acc);
                acc = fmaf(GGML_FP16_TO_FP32(g.d[r]) * y[i].d, (float) isum, acc);
            }
            s[c * lds + r] = acc;
        }
    }
}

// Q8_K blocks (a chunk at a time, on the stack) to block_q8_Kx.
template <typename Quantize>
void act_q8_Kx(const float * x, void * vy, int64_t n, Quantize quantize) {
    block_q8_Kx * y = (block_q8_Kx *) vy;
    const int64_t CH = 8;
    block_q8_K q[CH];
    for (int64_t i0 = 0; i0 < n / QK_K; i0 += CH) {
        const int64_t nc = n / QK_K - i0 < CH ? n / QK_K - i0 : CH;
        quantize(x + i0 * QK_K, q, nc * QK_K);
        for (int64_t i = 0; i < nc; i++) {
            block_q8_Kx & o = y[i0 + i];
            o.d = q[i].d;
            memcpy(o.bsums, q[i].bsums, sizeof(o.bsums));
            for (int j = 0; j < QK_K / 32; j++) o.bsums32[j] = (int16_t) (q[i].bsums[2 * j] + q[i].bsums[2 * j + 1]);
            memset(o.pad, 0, sizeof(o.pad));
            memcpy(o.qs, q[i].qs, sizeof(o.qs));
        }
    }
}

}  // namespace

void ggml_repack_quantize_q8_K_ref(const float * x, void * y, int64_t n) { quantize_row_q8_K_ref(x, (block_q8_K *) y, n); }

void ggml_repack_act_q8_K_ref(const float * x, void * y, int64_t n) {
    act_q8_Kx(x, y, n, [](const float * xs, block_q8_K * q, int64_t m) { quantize_row_q8_K_ref(xs, q, m); });
}
void ggml_repack_act_q8_K(const float * x, void * y, int64_t n) {
    act_q8_Kx(x, y, n, [](const float * xs, block_q8_K * q, int64_t m) { ggml_cpu()->repack.quantize_row_q8_K(xs, q, m); });
}


void ggml_repack_pack_group_q4_K(const void * rows, int64_t nb, void * out) { k4_pack_group<block_q4_K, block_q4_Kx16>(rows, nb, out); }
void ggml_repack_unpack_group_q4_K(const void * in, int64_t nb, void * rows) { k4_unpack_group<block_q4_K, block_q4_Kx16>(in, nb, rows); }
void ggml_repack_pack_group_q5_K(const void * rows, int64_t nb, void * out) { k4_pack_group<block_q5_K, block_q5_Kx16>(rows, nb, out); }
void ggml_repack_unpack_group_q5_K(const void * in, int64_t nb, void * rows) { k4_unpack_group<block_q5_K, block_q5_Kx16>(in, nb, rows); }
void ggml_repack_pack_group_q6_K(const void * rows, int64_t nb, void * out) { q6_K_pack_group(rows, nb, out); }
void ggml_repack_unpack_group_q6_K(const void * in, int64_t nb, void * rows) { q6_K_unpack_group(in, nb, rows); }
void ggml_repack_pack_group_iq4_xs(const void * rows, int64_t nb, void * out) { iq4_xs_pack_group(rows, nb, out); }
void ggml_repack_unpack_group_iq4_xs(const void * in, int64_t nb, void * rows) { iq4_xs_unpack_group(in, nb, rows); }

void ggml_repack_gemm_q4_Kx16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    gemm_ref<RefQ4K>(nb, a, b, ldb, nc, s, lds);
}
void ggml_repack_gemm_q5_Kx16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    gemm_ref<RefQ5K>(nb, a, b, ldb, nc, s, lds);
}
void ggml_repack_gemm_q6_Kx16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    gemm_ref<RefQ6K>(nb, a, b, ldb, nc, s, lds);
}
void ggml_repack_gemm_iq4_xsx16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    gemm_ref<RefIQ4XS>(nb, a, b, ldb, nc, s, lds);
}
