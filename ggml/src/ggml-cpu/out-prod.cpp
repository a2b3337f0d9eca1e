// out-prod.cpp - out_prod on the CPU, the backward product of mul_mat.
//
// out_prod(a, b): a is [K, M] (any type with to_float, possibly repacked), b is F32 [N, M], dst
// is F32 [K, N] with dst[k, n] = sum_m a[k, m] * b[n, m], planes broadcasting a over b as in
// mul_mat. With a the weights of y = mul_mat(a, x), out_prod(a, transpose(grad_y)) is grad_x.
//
// a is never dequantized whole: blocks of its rows, restricted to a range of k of a few hundred
// elements (whole quant blocks), are converted to F32 into per-thread scratch from the work buffer.
//  - Large N: the packed GEMM of vec.h (the build's F32 kernel), with GEMM rows i = k, the
//    reduction over m and GEMM columns j = n. Unit m of an A panel is a contiguous slice of a's
//    row m, so packing a block of A is converting a block of a's rows, over the block's k
//    range, straight into the panel layout. b is packed whole once (B row n is b's row of
//    elements n, contiguous over m when b is a transposed contiguous gradient).
//    With GGML_PREC_BF16 (opt-in) and a build with a BF16 kernel, the panels hold pairs of m
//    rounded to bf16 instead (vdpbf16ps: twice the F32 rate, F32 sums).
//  - GGML_PREC_BF16 on a build with AMX-BF16 tiles (tiles_bf16): b's rows of elements n rounded
//    to bf16 once (shared), then per range of k (a multiple of 32 and of a's block) and chunk of
//    m, a's rows converted and rounded into pairs of m (the tiles' B operand); 2 x 2 tiles of
//    16 n x 16 k accumulate in the tile registers over the chunk, in a per-thread F32 buffer over
//    the chunks, which is copied to dst at the end of the range.
//  - GGML_PREC_INT8 (opt-in, builds with a Q8_0 x16 kernel, M % 32 == 0, K % 16 == 0): slabs of
//    16 values of k of a (along m: a's rows, converted 32 at a time) quantized to Q8_0 straight
//    into the forward's Q8_0 x16 groups, against b's rows of elements quantized as the forward's
//    activations.
//  - Small N: each row of dst accumulates the converted rows of a, 16 at a time (axpy).
// Either way each output is one sequential chain of F32 additions over m from zero, so results do
// not depend on the thread count or blocking (and the F32 paths agree where the kernels' FMAs do).
#include "cpu-ops.h"
#include "quant-dot.h"
#include "quant-repack.h"
#include "kernels.h"

#include <algorithm>
#include <string.h>

int ggml_out_prod_gemm_min_n = 0;

namespace {

using namespace ggml_mm_buf;  // ALIGN, align_up, align_ptr, ceil_div (vec.h)

constexpr int64_t ROWS = GGML_REPACK_ROWS;  // rows of a converted per call (one repacked group)
constexpr int64_t KBLK = 256;               // k ranges of a start at multiples of this (>= every block size)
constexpr int64_t AXPY_KCH = 256;           // axpy path: elements of a row of dst per chunk
constexpr int64_t AXPY_NB = 16;             // axpy path: rows of dst sharing each converted block of a
// From how many rows of b the GEMM beats the axpy path (measured on AVX512; tests override it).
constexpr int64_t GEMM_MIN_N = 16;
constexpr int64_t GEMM_MIN_M = 16;  // ... and from how long a reduction
// GEMM: at most this many units of the reduction per cache block, so that the packed block of a
// takes 256 KiB per thread with AVX512's 256 rows of k (as fast as the kernel's 512 there).
constexpr int64_t GEMM_KC_MAX = 256;

const ggml_gemm_kernel * f32_gemm() {
    const ggml_mm_type_kernels * k = ggml_cpu()->mm_type(GGML_TYPE_F32);
    return k && k->gemm ? k->gemm : ggml_cpu_kernels_scalar.mm_type(GGML_TYPE_F32)->gemm;
}

// Reads rows of a as F32, a block of rows over a range of k at a time.
struct RowReader {
    const ggml_tensor * a;
    ggml_to_float_t to_float;          // a row's contiguous elements (NULL: gathered one by one)
    const ggml_repack_traits * rt;     // the layout of a repacked a
    bool direct;                       // F32 with contiguous rows: read in place
    int64_t blck;
    size_t bsize;

    explicit RowReader(const ggml_tensor * t) : a(t), to_float(nullptr), rt(nullptr), direct(false) {
        blck = ggml_blck_size(t->type);
        bsize = ggml_type_size(t->type);
        const bool rows = t->nb[0] == bsize;
        const ggml_cpu_kernels * vk = ggml_cpu();
        if (t->flags & GGML_TENSOR_FLAG_REPACKED) {
            rt = ggml_repack_get_traits(t->type);
            GGML_ASSERT(rt && "out_prod: no layout for this repacked type");
            GGML_ASSERT(t->ne[1] % ROWS == 0 && t->nb[1] == ggml_row_size(t->type, t->ne[0]));
        }
        switch (t->type) {
            case GGML_TYPE_F32:  direct = rows; break;
            case GGML_TYPE_F16:  to_float = rows ? vk->fp16_to_fp32 : nullptr; break;
            case GGML_TYPE_BF16: to_float = rows ? vk->bf16_to_fp32 : nullptr; break;
            default:
                to_float = vk->dequant(t->type);
                GGML_ASSERT(to_float && "out_prod: a's type has no conversion to F32");
                GGML_ASSERT(rows && "out_prod: a quantized a must have contiguous rows");
                break;
        }
    }

    // Bytes of scratch read() needs for ranges of up to nk elements.
    size_t scratch_size(int64_t nk) const { return rt ? align_up(ROWS * ggml_row_size(a->type, nk)) : 0; }

    const float * row_in_place(const char * plane, int64_t m, int64_t k0) const {
        return (const float *) (plane + m * a->nb[1]) + k0;
    }

    // Rows [m0, m0 + nr) of a plane, elements [k0, k0 + nk) -> out[r * ldo + e]. k0 and nk are
    // multiples of the block size; for a repacked a m0 % 16 == 0 and nr == 16.
    void read(const char * plane, int64_t m0, int64_t nr, int64_t k0, int64_t nk, float * out, int64_t ldo, char * scratch) const {
        if (rt) {
            // The group's blocks [k0 / blck, ...) back to 16 GGUF rows of nk / blck blocks.
            const int64_t nb = nk / blck;
            rt->unpack_group(plane + m0 * a->nb[1] + (k0 / blck) * ROWS * bsize, nb, scratch);
            for (int64_t r = 0; r < ROWS; r++) to_float(scratch + r * nb * bsize, out + r * ldo, nk);
            return;
        }
        for (int64_t r = 0; r < nr; r++) {
            const char * row = plane + (m0 + r) * a->nb[1];
            float * o = out + r * ldo;
            if (direct) {
                memcpy(o, (const float *) row + k0, nk * sizeof(float));
            } else if (to_float) {
                to_float(row + (k0 / blck) * bsize, o, nk);
            } else {
                for (int64_t e = 0; e < nk; e++) {
                    const char * p = row + (k0 + e) * a->nb[0];
                    switch (a->type) {
                        case GGML_TYPE_F16:  o[e] = GGML_FP16_TO_FP32(*(const ggml_fp16_t *) p); break;
                        case GGML_TYPE_BF16: o[e] = GGML_BF16_TO_FP32(*(const ggml_bf16_t *) p); break;
                        default:             o[e] = *(const float *) p; break;
                    }
                }
            }
        }
    }
};

struct Dims {
    int64_t K, M, N, B2, B3, r2, r3;
    size_t ldd;  // floats between rows of dst

    explicit Dims(const ggml_tensor * dst) {
        const ggml_tensor * a = dst->src[0];
        K = dst->ne[0];
        M = a->ne[1];
        N = dst->ne[1];
        B2 = dst->ne[2];
        B3 = dst->ne[3];
        r2 = B2 / a->ne[2];
        r3 = B3 / a->ne[3];
        ldd = dst->nb[1] / sizeof(float);
    }
    int64_t planes() const { return B2 * B3; }
};

const char * a_plane(const ggml_tensor * a, const Dims & d, int64_t p) {
    return (const char *) a->data + ((p % d.B2) / d.r2) * a->nb[2] + ((p / d.B2) / d.r3) * a->nb[3];
}
const char * b_plane(const ggml_tensor * b, const Dims & d, int64_t p) {
    return (const char *) b->data + (p % d.B2) * b->nb[2] + (p / d.B2) * b->nb[3];
}
float * d_plane(ggml_tensor * dst, const Dims & d, int64_t p) {
    return (float *) ((char *) dst->data + (p % d.B2) * dst->nb[2] + (p / d.B2) * dst->nb[3]);
}

// ---- work buffer layout (shared by the size query and the kernel) ---------------------------
struct Plan {
    bool tiles;         // the bf16 tile path (GGML_PREC_BF16 with tiles_bf16), sizes below
    size_t bcopy_size;  // tiles: b's rows of elements in bf16 (shared)
    size_t tiles_thread;// tiles: per thread, TileSizes::thread()
    const ggml_repack_traits * q8;  // non-NULL: the int8 path (GGML_PREC_INT8), the fields below unused but sizes
    size_t act_size;    // int8: Q8_0 activations of all of b's rows of elements (shared)
    size_t q8_thread;   // int8: per thread, the F32 tile, the quantized rows and the packed group
    const ggml_gemm_kernel * g;  // NULL: axpy path
    ggml_bf16_pairs_fn pairs;    // GEMM in bf16 pairs (k_unit 2): the conversion of a's and b's values
    int64_t units;      // GEMM: units of the reduction (m, or pairs of m)
    int64_t tile;       // GEMM: k granularity of the work split (a multiple of mr and of a's block)
    int64_t mc;         // GEMM: rows of A (elements of k) per packed block, a multiple of KBLK
    int64_t kc;         // GEMM: units per cache block (a multiple of 16 rows of a)
    int64_t n_panels;   // GEMM: panels of nr rows of B per plane
    size_t b_panel_size, b_pack_size;
    size_t a_pack_size; // GEMM: per thread
    size_t rows_size;   // per thread: converted rows of a (16 x a range of k)
    size_t scratch_size;// per thread: a repacked group's blocks

    size_t thread_size() const { return tiles ? tiles_thread : q8 ? q8_thread : a_pack_size + rows_size + scratch_size; }
    size_t shared_size() const { return tiles ? bcopy_size : q8 ? act_size : b_pack_size; }
    size_t total(int nth) const { return ALIGN + shared_size() + (size_t) nth * thread_size(); }
};

// ---- int8 path (GGML_PREC_INT8) sizes ----------------------------------------------------------
// Per thread: for a range [lo, hi) of at most I8_KB values of k (whole blocks of a), `rows` holds
// 32 rows of m of a converted (a repacked group's blocks through `scratch`), from which every
// slab of 16 k in the range quantizes its Q8_0 x16 block of those 32 m straight into `packed`
// (one group per slab, I8_KB / 16 of them); `col`: one of b's rows of elements.
constexpr int64_t I8_KB = 256;
struct Int8Sizes {
    int64_t nb;            // Q8_0 blocks along m
    int64_t kb;            // k per range
    size_t act_row;        // bytes of one column's activations
    size_t group;          // bytes of one slab's packed group
    size_t rows, scratch, packed, col;
    Int8Sizes(const RowReader & rd, const Dims & d, const ggml_repack_traits * q8) {
        nb = d.M / QK8_0;
        act_row = (size_t) nb * q8->act_size;
        kb = std::max<int64_t>(I8_KB, rd.blck);
        group = (size_t) nb * sizeof(block_q8_0x16);
        rows = align_up((size_t) 2 * ROWS * kb * sizeof(float));
        scratch = rd.scratch_size(kb);
        packed = align_up(group * (size_t) (kb / ROWS));
        col = align_up((size_t) d.M * sizeof(float));
    }
    size_t thread() const { return rows + scratch + packed + col; }
};

// ---- bf16 tile path sizes ----------------------------------------------------------------------
// k goes in ranges of kr (32, or a's block if larger), m in chunks of TILE_MC; b's rows of
// elements are padded to 32 n and to 32 m (zeros), the last chunk of m to 32 (zero pairs).
constexpr int64_t TILE_MC = 512;
struct TileSizes {
    int64_t kr, npad, mpad;
    size_t rows, scratch, slab, cbuf;
    TileSizes(const RowReader & rd, const Dims & d) {
        kr = std::max<int64_t>(32, rd.blck);
        npad = ceil_div(d.N, 32) * 32;
        mpad = ceil_div(d.M, 32) * 32;
        rows = align_up((size_t) ROWS * kr * sizeof(float));
        scratch = rd.scratch_size(kr);
        slab = 2 * align_up((size_t) (kr / 16) * (TILE_MC / 2) * 16 * sizeof(uint32_t));  // two of: per 16 k, pairs of m x 16 k
        cbuf = align_up((size_t) npad * kr * sizeof(float));
    }
    // Bytes between bf16 rows of b: a cache line more than a multiple of 4 KiB away, so that the
    // 16 rows a tile load reads do not all fall in one set of L1.
    size_t ldx() const {
        const size_t row = (size_t) mpad * sizeof(uint16_t);
        return row % 4096 == 0 ? row + 64 : row;
    }
    size_t bcopy(const Dims & d) const { return align_up((size_t) d.planes() * npad * ldx()); }
    size_t thread() const { return rows + scratch + slab + cbuf; }
};

Plan plan_out_prod(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const Dims d(dst);
    const RowReader rd(a);
    Plan p = {};
    if (ggml_get_op_params_i32(dst, 0) == GGML_PREC_BF16 && ggml_cpu()->tiles_bf16 && d.N >= GEMM_MIN_N && d.M >= GEMM_MIN_M &&
        d.K > 0 && ggml_out_prod_gemm_min_n == 0) {
        const TileSizes z(rd, d);
        p.tiles = true;
        p.bcopy_size = z.bcopy(d);
        p.tiles_thread = z.thread();
        return p;
    }
    if (ggml_get_op_params_i32(dst, 0) == GGML_PREC_INT8) {
        const ggml_repack_traits * q8 = ggml_repack_get_traits(GGML_TYPE_Q8_0);
        if (q8 && q8->gemm && d.M > 0 && d.K > 0 && d.N > 0 && d.M % QK8_0 == 0 && d.K % ROWS == 0 && q8->act_blck == QK8_0) {
            const Int8Sizes z(rd, d, q8);
            p.q8 = q8;
            p.act_size = align_up(z.act_row * (size_t) (d.N * d.planes()));
            p.q8_thread = z.thread();
            return p;
        }
    }
    // A short reduction (a LoRA rank) makes the GEMM mostly packing: the axpy path is faster.
    const bool gemm = ggml_out_prod_gemm_min_n > 0 ? d.N >= ggml_out_prod_gemm_min_n : (d.N >= GEMM_MIN_N && d.M >= GEMM_MIN_M);
    if (gemm && d.K > 0 && d.M > 0) {
        const ggml_cpu_kernels * vk = ggml_cpu();
        const ggml_gemm_kernel * g = f32_gemm();
        if (ggml_get_op_params_i32(dst, 0) == GGML_PREC_BF16 && vk->gemm_bf16_pairs) {
            g = vk->gemm_bf16_pairs;
            p.pairs = vk->bf16_pairs;
        }
        GGML_ASSERT(g->k_unit == (p.pairs ? 2 : 1) && KBLK % g->mr == 0 && g->nr <= 64);
        p.g = g;
        p.units = ceil_div(d.M, g->k_unit);
        p.tile = std::max<int64_t>(g->mr, rd.blck);  // both divide KBLK
        p.mc = ceil_div(std::max<int64_t>(g->mc, KBLK), KBLK) * KBLK;
        p.kc = ceil_div(std::min<int64_t>(g->kc, GEMM_KC_MAX) * g->k_unit, ROWS) * ROWS / g->k_unit;
        p.n_panels = ceil_div(d.N, g->nr);
        // F32 units of all of m (bf16 pairs are converted in place from them).
        p.b_panel_size = align_up((size_t) d.M * g->nr * sizeof(float));
        p.b_pack_size = p.b_panel_size * (size_t) (p.n_panels * d.planes());
        p.a_pack_size = align_up((size_t) p.mc * std::min(p.kc, p.units) * sizeof(float));
        p.rows_size = rd.direct ? 0 : align_up((size_t) ROWS * p.mc * sizeof(float));
        p.scratch_size = rd.scratch_size(p.mc);
    } else {
        p.rows_size = align_up((size_t) ROWS * AXPY_KCH * sizeof(float));
        p.scratch_size = rd.scratch_size(AXPY_KCH);
    }
    return p;
}

// ---- GEMM path -----------------------------------------------------------------------------
// Packs the B panels of (plane, panel) items [q0, q1): B[n, m] = b[n, m] (n-th element of b's
// row m), nr rows of n per panel, zeros past N.
void pack_b_panels(const ggml_tensor * b, const Dims & d, const Plan & pl, char * b_pack, int64_t q0, int64_t q1) {
    const ggml_gemm_kernel * g = pl.g;
    const int nr = g->nr;
    for (int64_t q = q0; q < q1; q++) {
        const int64_t p = q / pl.n_panels, n0 = (q % pl.n_panels) * nr;
        const int rows = (int) std::min<int64_t>(nr, d.N - n0);
        const char * src = b_plane(b, d, p) + n0 * b->nb[0];
        float * out = (float *) (b_pack + q * pl.b_panel_size);
        if (b->nb[1] == sizeof(float)) {
            f32_gemm()->pack_b(src, b->nb[0], rows, nr, 0, d.M, out);  // b = transpose(contiguous grad)
        } else {
            for (int64_t u = 0; u < d.M; u++) {
                const char * bu = src + u * b->nb[1];
                float * o = out + u * nr;
                if (b->nb[0] == sizeof(float)) {
                    memcpy(o, bu, rows * sizeof(float));
                } else {
                    for (int j = 0; j < rows; j++) o[j] = *(const float *) (bu + j * b->nb[0]);
                }
                for (int j = rows; j < nr; j++) o[j] = 0.0f;
            }
        }
        if (!pl.pairs) continue;
        // Units m (nr floats each) -> pairs of m, in place: unit u is written after units 2u and
        // 2u + 1 were read, and never over a unit not read yet.
        uint32_t pair[64];
        for (int64_t u = 0; u < pl.units; u++) {
            const float * x0 = out + 2 * u * nr;
            pl.pairs(x0, 2 * u + 1 < d.M ? x0 + nr : nullptr, nr, pair);
            memcpy(out + u * nr, pair, nr * sizeof(uint32_t));
        }
    }
}

// Unit u of the A panels of a block: row elements src[0, nk) into panel i / mr, lane i % mr.
inline void scatter_unit(const float * src, int64_t nk, int mr, size_t panel_floats, int64_t u, float * a_pack) {
    float * out = a_pack + u * mr;
    int64_t i = 0;
    for (; i + mr <= nk; i += mr, out += panel_floats) memcpy(out, src + i, mr * sizeof(float));
    if (i < nk) {
        const int64_t n = nk - i;
        memcpy(out, src + i, n * sizeof(float));
        memset(out + n, 0, (mr - n) * sizeof(float));
    }
}

struct ThreadBufs {
    char * a_pack;
    float * rows;
    char * scratch;
};

// The same for bf16 pairs: rows x0 and x1 (NULL: zeros) make unit u.
inline void scatter_pair(ggml_bf16_pairs_fn pairs, const float * x0, const float * x1, int64_t nk, int mr,
                         size_t panel_units, int64_t u, uint32_t * a_pack) {
    uint32_t * out = a_pack + u * mr;
    for (int64_t i = 0; i < nk; i += mr, out += panel_units) {
        const int64_t n = std::min<int64_t>(mr, nk - i);
        pairs(x0 + i, x1 ? x1 + i : nullptr, n, out);
        if (n < mr) memset(out + n, 0, (mr - n) * sizeof(uint32_t));
    }
}

// Packs the A block of k in [k0, k0 + nk) and units [u0, u0 + nu) (panels of mr rows of k).
void pack_a_block(const RowReader & rd, const char * ap, const Plan & pl, const ThreadBufs & tb, int64_t k0, int64_t nk,
                  int64_t u0, int64_t nu) {
    const int mr = pl.g->mr, ku = pl.g->k_unit;
    const size_t panel_units = (size_t) nu * mr;
    const int64_t m_begin = u0 * ku, m_end = std::min(rd.a->ne[1], (u0 + nu) * ku);
    for (int64_t r0 = m_begin; r0 < m_end; r0 += ROWS) {
        const int64_t nr = std::min<int64_t>(ROWS, m_end - r0);
        const float * rows[ROWS];
        if (rd.direct) {
            for (int64_t r = 0; r < nr; r++) rows[r] = rd.row_in_place(ap, r0 + r, k0);
        } else {
            rd.read(ap, r0, nr, k0, nk, tb.rows, pl.mc, tb.scratch);
            for (int64_t r = 0; r < nr; r++) rows[r] = tb.rows + r * pl.mc;
        }
        const int64_t u = (r0 - m_begin) / ku;  // ROWS is even: pairs never straddle two reads
        if (!pl.pairs) {
            for (int64_t r = 0; r < nr; r++) scatter_unit(rows[r], nk, mr, panel_units, u + r, (float *) tb.a_pack);
            continue;
        }
        for (int64_t r = 0; r < nr; r += 2) {
            scatter_pair(pl.pairs, rows[r], r + 1 < nr ? rows[r + 1] : nullptr, nk, mr, panel_units, u + r / 2, (uint32_t *) tb.a_pack);
        }
    }
}

// One run of work: plane p, B panels [jp0, jp1), k in [k_begin, k_end).
void gemm_run(const RowReader & rd, ggml_tensor * dst, const Dims & d, const Plan & pl, const char * b_pack,
              const ThreadBufs & tb, int64_t p, int64_t jp0, int64_t jp1, int64_t k_begin, int64_t k_end) {
    const ggml_gemm_kernel * g = pl.g;
    const int mr = g->mr, nr = g->nr;
    const char * ap = a_plane(rd.a, d, p);
    float * dp = d_plane(dst, d, p);
    float edge[1024] = {};  // an edge tile, computed whole then copied out
    GGML_ASSERT(mr * nr <= 1024);

    for (int64_t u0 = 0; u0 < pl.units; u0 += pl.kc) {
        const int64_t nu = std::min<int64_t>(pl.kc, pl.units - u0);
        const bool acc = u0 > 0;
        const size_t a_panel = (size_t) nu * mr * 4;  // 32-bit units
        for (int64_t ic = k_begin; ic < k_end; ic += pl.mc) {
            const int64_t mcur = std::min<int64_t>(pl.mc, k_end - ic);
            pack_a_block(rd, ap, pl, tb, ic, mcur, u0, nu);
            for (int64_t jp = jp0; jp < jp1; jp++) {
                const int64_t n0 = jp * nr;
                const int ncur = (int) std::min<int64_t>(nr, d.N - n0);
                const char * bp = b_pack + (p * pl.n_panels + jp) * pl.b_panel_size + (size_t) u0 * nr * 4;
                for (int64_t ir = 0; ir < mcur; ir += mr) {
                    const int mrows = (int) std::min<int64_t>(mr, mcur - ir);
                    float * c = dp + n0 * d.ldd + ic + ir;
                    const char * apk = tb.a_pack + (ir / mr) * a_panel;
                    if (mrows == mr && ncur == nr) {
                        g->micro(nu, apk, bp, c, d.ldd, acc);
                        continue;
                    }
                    if (acc) {
                        for (int j = 0; j < ncur; j++) memcpy(edge + j * mr, c + j * d.ldd, mrows * sizeof(float));
                    }
                    g->micro(nu, apk, bp, edge, mr, acc);
                    for (int j = 0; j < ncur; j++) memcpy(c + j * d.ldd, edge + j * mr, mrows * sizeof(float));
                }
            }
        }
    }
}

// b is packed (split by panels, then a barrier); items (plane, chunk of B panels, tile of k) are
// split in contiguous ranges, each range cut into runs sharing plane and chunk.
void out_prod_gemm(const RowReader & rd, const ggml_tensor * b, ggml_tensor * dst, const Dims & d, const Plan & pl,
                   char * b_pack, const ThreadBufs & tb, const ggml_compute_params * params) {
    const int ith = params->ith, nth = params->nth;
    const int64_t planes = d.planes();
    int64_t q0, q1;
    ggml_cpu_split_rows(planes * pl.n_panels, ith, nth, &q0, &q1);
    pack_b_panels(b, d, pl, b_pack, q0, q1);
    ggml_cpu_barrier(params);

    // Few tiles of k: split B's panels too, so that every thread has work.
    const int64_t k_tiles = ceil_div(d.K, pl.tile);
    int64_t n_chunks = 1;
    if (planes * k_tiles < 4 * nth) n_chunks = std::min(pl.n_panels, ceil_div(4 * nth, planes * k_tiles));
    const int64_t chunk_panels = ceil_div(pl.n_panels, n_chunks);
    n_chunks = ceil_div(pl.n_panels, chunk_panels);

    int64_t it0, it1;
    ggml_cpu_split_rows(planes * n_chunks * k_tiles, ith, nth, &it0, &it1);
    for (int64_t it = it0; it < it1;) {
        const int64_t p = it / (n_chunks * k_tiles), ch = (it / k_tiles) % n_chunks, t0 = it % k_tiles;
        const int64_t t1 = std::min(k_tiles, t0 + (it1 - it));
        const int64_t jp0 = ch * chunk_panels, jp1 = std::min(pl.n_panels, jp0 + chunk_panels);
        gemm_run(rd, dst, d, pl, b_pack, tb, p, jp0, jp1, t0 * pl.tile, std::min(d.K, t1 * pl.tile));
        it += t1 - t0;
    }
}

// ---- axpy path (small N) -------------------------------------------------------------------
// Items (plane, block of AXPY_NB rows of dst, chunk of AXPY_KCH elements of k): each row of the
// block accumulates the chunk of the converted rows of a, 16 terms per axpy call.
void out_prod_axpy(const RowReader & rd, const ggml_tensor * b, ggml_tensor * dst, const Dims & d, const ThreadBufs & tb,
                   int ith, int nth) {
    const ggml_axpy_fn axpy = ggml_cpu()->axpy;
    const int64_t n_blocks = ceil_div(d.N, AXPY_NB), k_chunks = ceil_div(d.K, AXPY_KCH);
    int64_t it0, it1;
    ggml_cpu_split_rows(d.planes() * n_blocks * k_chunks, ith, nth, &it0, &it1);
    for (int64_t it = it0; it < it1; it++) {
        const int64_t p = it / (n_blocks * k_chunks), n0 = ((it / k_chunks) % n_blocks) * AXPY_NB;
        const int64_t k0 = (it % k_chunks) * AXPY_KCH;
        const int64_t nn = std::min(AXPY_NB, d.N - n0), nk = std::min(AXPY_KCH, d.K - k0);
        const char * ap = a_plane(rd.a, d, p);
        const char * bp = b_plane(b, d, p);
        float * dp = d_plane(dst, d, p);
        for (int64_t n = n0; n < n0 + nn; n++) memset(dp + n * d.ldd + k0, 0, nk * sizeof(float));
        for (int64_t m0 = 0; m0 < d.M; m0 += ROWS) {
            const int64_t nr = std::min(ROWS, d.M - m0);
            const float * x[ROWS];
            if (rd.direct) {
                for (int64_t r = 0; r < nr; r++) x[r] = rd.row_in_place(ap, m0 + r, k0);
            } else {
                rd.read(ap, m0, nr, k0, nk, tb.rows, AXPY_KCH, tb.scratch);
                for (int64_t r = 0; r < nr; r++) x[r] = tb.rows + r * AXPY_KCH;
            }
            for (int64_t n = n0; n < n0 + nn; n++) {
                float s[ROWS];
                for (int64_t r = 0; r < nr; r++) s[r] = *(const float *) (bp + n * b->nb[0] + (m0 + r) * b->nb[1]);
                axpy(nk, (int) nr, s, x, dp + n * d.ldd + k0);
            }
        }
    }
}

// ---- int8 path (GGML_PREC_INT8) ------------------------------------------------------------
// GEMM rows are slabs of 16 values of k: rows T[k] = a[k, 0..M) quantized to Q8_0 along m and
// packed as one Q8_0 x16 group of the forward's layout; columns are b's rows of elements n,
// quantized once as the forward's activations. A slab's group is quantized from a's converted
// rows directly (ggml_repack_quantize_q8_0x16: 32 rows of m, 16 k each, one block), or for a
// repacked Q4_0 a from its blocks (ggml_repack_q4_0x16_to_q8_0x16t). Each output
// is one call of the forward's kernel, whose value does not depend on the columns beside it:
// results do not depend on the threads.
void out_prod_int8(const RowReader & rd, const ggml_tensor * b, ggml_tensor * dst, const Dims & d, const Plan & pl,
                   char * act, char * tw, const ggml_compute_params * params) {
    const ggml_repack_traits * q8 = pl.q8;
    const int ith = params->ith, nth = params->nth;
    const Int8Sizes z(rd, d, q8);
    const int64_t kb = z.kb;
    float * rows = (float *) tw;
    char * scratch = tw + z.rows;
    char * packed = scratch + z.scratch;
    float * col = (float *) (packed + z.packed);
    // A repacked Q4_0 a: its blocks quantize straight into the slabs (the same bytes).
    const bool q4_0x16 = rd.rt && rd.a->type == GGML_TYPE_Q4_0;

    // Activations: column (plane p, n) at act + (p * N + n) * act_row.
    {
        int64_t c0, c1;
        ggml_cpu_split_rows(d.planes() * d.N, ith, nth, &c0, &c1);
        for (int64_t c = c0; c < c1; c++) {
            const int64_t p = c / d.N, n = c % d.N;
            const char * src = b_plane(b, d, p) + n * b->nb[0];
            if (b->nb[1] == sizeof(float)) {
                q8->act_from_float((const float *) src, act + c * z.act_row, d.M);
            } else {
                for (int64_t m = 0; m < d.M; m++) col[m] = *(const float *) (src + m * b->nb[1]);
                q8->act_from_float(col, act + c * z.act_row, d.M);
            }
        }
    }
    ggml_cpu_barrier(params);

    // Columns in blocks that stay in L2 while every packed slab of the range passes over them.
    const int64_t col_block = ggml_repack_col_block(q8, z.act_row, d.N);
    const int64_t slabs = d.K / ROWS;
    int64_t s0, s1;
    ggml_cpu_split_rows(d.planes() * slabs, ith, nth, &s0, &s1);
    for (int64_t s = s0; s < s1;) {
        // This thread's slabs [k0, k1) of plane p within k's block of kb, read over [lo, hi)
        // (whole blocks of a).
        const int64_t p = s / slabs, k0 = (s % slabs) * ROWS;
        const int64_t k1 = std::min((s1 - p * slabs) * ROWS, std::min(d.K, (k0 / kb) * kb + kb));
        const int64_t lo = k0 / rd.blck * rd.blck;
        const int64_t hi = std::min(d.K, ceil_div(k1, rd.blck) * rd.blck);
        const int64_t ns = (k1 - k0) / ROWS;
        const char * ap = a_plane(rd.a, d, p);
        for (int64_t m0 = 0; m0 < d.M; m0 += 2 * ROWS) {
            char * out = packed + (m0 / QK8_0) * sizeof(block_q8_0x16);
            if (q4_0x16) {  // straight from the groups of rows m0 and m0 + 16
                const block_q4_0x16 * g0 = (const block_q4_0x16 *) (ap + m0 * rd.a->nb[1]);
                const block_q4_0x16 * g1 = (const block_q4_0x16 *) (ap + (m0 + ROWS) * rd.a->nb[1]);
                for (int64_t j = 0; j < ns; j++) {
                    const int64_t k = k0 + j * ROWS;
                    ggml_repack_q4_0x16_to_q8_0x16t(g0 + k / QK4_0, g1 + k / QK4_0, (int) (k % QK4_0 / ROWS), out + j * z.group);
                }
                continue;
            }
            rd.read(ap, m0, ROWS, lo, hi - lo, rows, kb, scratch);
            rd.read(ap, m0 + ROWS, ROWS, lo, hi - lo, rows + ROWS * kb, kb, scratch);
            for (int64_t j = 0; j < ns; j++) {
                ggml_repack_quantize_q8_0x16(rows + (k0 - lo) + j * ROWS, kb, out + j * z.group);
            }
        }
        float * dp = d_plane(dst, d, p);
        const char * ac = act + p * d.N * z.act_row;
        for (int64_t c0 = 0; c0 < d.N; c0 += col_block) {
            const int64_t c1 = std::min(d.N, c0 + col_block);
            for (int64_t j = 0; j < ns; j++) {
                ggml_repack_gemm_cols(q8, z.nb, packed + j * z.group, ac + c0 * z.act_row, z.act_row, c1 - c0,
                                      dp + c0 * d.ldd + k0 + j * ROWS, d.ldd);
            }
        }
        s += ns;
    }
}

// ---- bf16 tile path (GGML_PREC_BF16 with tiles_bf16) -----------------------------------------
// Items are (plane, range of kr values of k). Each output is the tiles' sum over m in chunks of
// TILE_MC taken in order, whatever the thread: results do not depend on the threads.
void out_prod_tiles(const RowReader & rd, const ggml_tensor * b, ggml_tensor * dst, const Dims & d, char * bcopy, char * tw,
                    const ggml_compute_params * params) {
    const ggml_cpu_kernels * vk = ggml_cpu();
    const TileSizes z(rd, d);
    const int ith = params->ith, nth = params->nth;
    const int64_t kr = z.kr, npad = z.npad, mpad = z.mpad;
    float * rows = (float *) tw;
    char * scratch = tw + z.rows;
    uint32_t * slab = (uint32_t *) (scratch + z.scratch);
    float * cbuf = (float *) ((char *) slab + z.slab);
    const size_t ldx = z.ldx();
    const bool q4_0x16 = rd.rt && rd.a->type == GGML_TYPE_Q4_0 && vk->q4_0x16_to_bf16_pairs && kr == QK4_0;

    // b's rows of elements (plane p, n) to bf16 at bcopy + (p * npad + n) * ldx, zeros past N and M.
    {
        int64_t r0, r1;
        ggml_cpu_split_rows(d.planes() * npad, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            const int64_t p = r / npad, n = r % npad;
            uint16_t * out = (uint16_t *) (bcopy + r * ldx);
            if (n >= d.N) {
                memset(out, 0, (size_t) mpad * sizeof(uint16_t));
                continue;
            }
            const char * src = b_plane(b, d, p) + n * b->nb[0];
            if (b->nb[1] == sizeof(float)) {
                vk->f32_to_bf16_row((const float *) src, out, d.M);
            } else {
                for (int64_t m0 = 0; m0 < d.M; m0 += ROWS * 16) {  // gathered in pieces through `rows`
                    const int64_t nm = std::min<int64_t>(ROWS * 16, d.M - m0);
                    for (int64_t m = 0; m < nm; m++) rows[m] = *(const float *) (src + (m0 + m) * b->nb[1]);
                    vk->f32_to_bf16_row(rows, out + m0, nm);
                }
            }
            memset(out + d.M, 0, (mpad - d.M) * sizeof(uint16_t));
        }
    }
    ggml_cpu_barrier(params);

    const int64_t ranges = ceil_div(d.K, kr), sub_pairs = kr / 32, n_pairs = npad / 32;
    const size_t slab_sub = (size_t) (TILE_MC / 2) * 16;  // uint32 units per 16 k of the slab
    uint32_t * slabs[2] = { slab, (uint32_t *) ((char *) slab + z.slab / 2) };

    // Steps: (item, chunk of m), items (plane, range of k) in this thread's contiguous share.
    struct Step {
        int64_t p, k0, nk, mc0, mlen32;
        const char * ap;
    };
    const int64_t chunks = ceil_div(d.M, TILE_MC);
    int64_t it0, it1;
    ggml_cpu_split_rows(d.planes() * ranges, ith, nth, &it0, &it1);
    const int64_t n_steps = (it1 - it0) * chunks;
    auto step_at = [&](int64_t s) {
        Step st;
        const int64_t it = it0 + s / chunks;
        st.p = it / ranges;
        st.k0 = (it % ranges) * kr;
        st.nk = std::min(kr, d.K - st.k0);
        st.mc0 = (s % chunks) * TILE_MC;
        st.mlen32 = ceil_div(std::min<int64_t>(TILE_MC, d.M - st.mc0), 32) * 32;
        st.ap = a_plane(rd.a, d, st.p);
        return st;
    };
    // Rows [m0, m0 + 16) of a step's slab (group g of its chunk), over k [k0, k0 + kr): pairs of
    // m per 16 k. A repacked Q4_0 a's blocks go there directly (the same bits); rows past M are
    // zeros (the last chunk is padded to 32 rows).
    auto convert_group = [&](const Step & st, int64_t g, uint32_t * sl) {
        const int64_t m0 = st.mc0 + g * ROWS;
        uint32_t * out = sl + g * (ROWS / 2) * 16;
        if (q4_0x16) {
            if (m0 >= d.M) {
                for (int64_t s = 0; s < 2; s++) memset(out + s * slab_sub, 0, ROWS / 2 * 16 * sizeof(uint32_t));
                return;
            }
            vk->q4_0x16_to_bf16_pairs(st.ap + m0 * rd.a->nb[1] + (st.k0 / QK4_0) * sizeof(block_q4_0x16), out, slab_sub);
            return;
        }
        const int64_t nr = std::max<int64_t>(0, std::min<int64_t>(ROWS, d.M - m0));
        if (st.nk < kr || nr < ROWS) memset(rows, 0, (size_t) ROWS * kr * sizeof(float));
        if (nr > 0) rd.read(st.ap, m0, nr, st.k0, st.nk, rows, kr, scratch);
        for (int64_t i = 0; i < ROWS / 2; i++) {
            for (int64_t s = 0; s < kr / 16; s++) {
                vk->bf16_pairs(rows + 2 * i * kr + 16 * s, rows + (2 * i + 1) * kr + 16 * s, 16, out + s * slab_sub + i * 16);
            }
        }
    };

    // The slab of step s + 1 is made while the tiles of step s run (two slabs in turn): the
    // vector units convert while the tile unit multiplies.
    if (n_steps > 0) {
        const Step st = step_at(0);
        for (int64_t g = 0; g < st.mlen32 / ROWS; g++) convert_group(st, g, slabs[0]);
    }
    for (int64_t s = 0; s < n_steps; s++) {
        const Step st = step_at(s);
        const uint32_t * cur = slabs[s % 2];
        const bool more = s + 1 < n_steps;
        const Step nx = more ? step_at(s + 1) : st;
        const int64_t ng = more ? nx.mlen32 / ROWS : 0;
        int64_t done = 0;
        if (st.mc0 == 0) memset(cbuf, 0, (size_t) npad * kr * sizeof(float));
        const char * bp = bcopy + st.p * npad * ldx;
        for (int64_t np = 0; np < n_pairs; np++) {
            const char * x0 = bp + np * 32 * ldx + st.mc0 * sizeof(uint16_t);
            for (int64_t sp = 0; sp < sub_pairs; sp++) {
                const uint32_t * w0 = cur + 2 * sp * slab_sub;
                vk->tiles_bf16(st.mlen32 / 32, x0, x0 + 16 * ldx, ldx, w0, w0 + slab_sub, cbuf + (np * sub_pairs + sp) * 1024);
            }
            for (const int64_t upto = ng * (np + 1) / n_pairs; done < upto; done++) convert_group(nx, done, slabs[(s + 1) % 2]);
        }
        if (st.mc0 + TILE_MC < d.M) continue;
        // The item's last chunk: cbuf holds per (pair of 16 n, pair of 16 k) four tiles
        // [n half][k half][16 n][16 k].
        float * dp = d_plane(dst, d, st.p);
        for (int64_t n = 0; n < d.N; n++) {
            float * out = dp + n * d.ldd + st.k0;
            const float * c = cbuf + (n / 32) * sub_pairs * 1024 + (n % 32 / 16) * 512 + (n % 16) * 16;
            for (int64_t k = 0; k < st.nk; k += 16) {
                const float * t = c + (k / 32) * 1024 + (k % 32 / 16) * 256;
                memcpy(out + k, t, std::min<int64_t>(16, st.nk - k) * sizeof(float));
            }
        }
    }
}

}  // namespace

size_t ggml_cpu_out_prod_work_size(const struct ggml_tensor * node, int n_threads) {
    return plan_out_prod(node).total(n_threads);
}

void ggml_cpu_forward_out_prod(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    GGML_ASSERT(b->type == GGML_TYPE_F32);
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float));
    GGML_ASSERT(a->ne[0] == dst->ne[0] && b->ne[0] == dst->ne[1] && a->ne[1] == b->ne[1]);
    GGML_ASSERT(b->ne[2] == dst->ne[2] && b->ne[3] == dst->ne[3]);
    GGML_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0);

    const RowReader rd(a);
    const Dims d(dst);
    const Plan pl = plan_out_prod(dst);
    GGML_ASSERT(params->wsize >= pl.total(params->nth) && "out_prod: work buffer too small");
    char * w = align_ptr(params->wdata);
    char * b_pack = w;
    char * t = w + pl.b_pack_size + (size_t) params->ith * pl.thread_size();
    const ThreadBufs tb = { t, (float *) (t + pl.a_pack_size), t + pl.a_pack_size + pl.rows_size };

    if (pl.tiles) {
        out_prod_tiles(rd, b, dst, d, w, w + pl.bcopy_size + (size_t) params->ith * pl.thread_size(), params);
    } else if (pl.q8) {
        out_prod_int8(rd, b, dst, d, pl, w, w + pl.act_size + (size_t) params->ith * pl.thread_size(), params);
    } else if (pl.g) {
        out_prod_gemm(rd, b, dst, d, pl, b_pack, tb, params);
    } else {
        out_prod_axpy(rd, b, dst, d, tb, params->ith, params->nth);
    }
}
