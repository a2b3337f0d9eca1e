// fattn-mma.cu - flash_attn_ext for prompts on tensor cores (mma.cuh): F16 keys and values (the
// default KV cache), or F32 and BF16 ones (training's), head sizes 64 and 128 (Dv = D), sm_80 and
// later; and at the end its gradient, flash_attn_back, for training's many query rows. fattn.cu
// takes every other case and describes the op.
//
// A block takes kMmaQ queries of one head, a warp 16 of them, and walks the keys in tiles of
// kMmaK held in shared memory. Per tile a warp computes its 16 x kMmaK logits S = Q K^T with
// m16n8k16 products, the online softmax on them in registers (a thread holds two query rows; the
// four threads of a row exchange maxima by shuffles), then O += P V, P taken from S's registers
// as the A operand (mma.cuh's layout note). With F16 keys and values, exact in F16, Q and P go in
// as F16 hi + lo pairs (two products each), so the logits and the weighted sums keep about F32
// accuracy, as the CPU computes them; F32 and BF16 tiles are held as BF16 hi + lo planes and
// every product is mma_bf16x3 (about 2^-17 of each product lost). Tiles every query of the block
// has masked are skipped (a causal mask: half of them).
#include "fattn-common.cuh"
#include "mma.cuh"
#include "ops.cuh"

namespace {

constexpr int kMmaWarps = 4, kMmaQ = 16 * kMmaWarps, kMmaK = 32;

// Shared memory: the K and V tiles, rows of D halves padded by 8 (D / 2 + 4 words), so that the
// fragment loads of a warp hit 32 different banks (F32 and BF16 caches: hi and lo planes of each).
template <int D>
constexpr int mma_row_words() { return D / 2 + 4; }

template <int D, int KT>
size_t mma_smem_bytes() { return (size_t) (KT == GGML_TYPE_F16 ? 2 : 4) * kMmaK * mma_row_words<D>() * sizeof(uint32_t); }

// The tiles of F32 and BF16 keys and values (and the gradient's operands) as BF16 hi + lo
// planes, for mma_bf16x3 products.

// 16 bytes of a float row of type KT from element e0 on (F32: 4 values; F16, BF16: 8) as BF16
// hi + lo pairs, into word e0 / 2 of a tile row's hi and lo planes.
template <int KT>
__device__ __forceinline__ void split_chunk(const char * row, int64_t e0, uint32_t * hi, uint32_t * lo) {
    if constexpr (KT == GGML_TYPE_F32) {
        const float4 x = *(const float4 *) ((const float *) row + e0);
        uint32_t h0, l0, h1, l1;
        split_bf2(x.x, x.y, h0, l0);
        split_bf2(x.z, x.w, h1, l1);
        *(uint2 *) hi = make_uint2(h0, h1);
        *(uint2 *) lo = make_uint2(l0, l1);
    } else {
        const uint4 raw = *(const uint4 *) ((const uint16_t *) row + e0);
        uint16_t e[8];
        memcpy(e, &raw, sizeof(e));
        uint32_t h[4], l[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float x0 = KT == GGML_TYPE_F16 ? h2f(e[2 * i]) : bf2f(e[2 * i]);
            const float x1 = KT == GGML_TYPE_F16 ? h2f(e[2 * i + 1]) : bf2f(e[2 * i + 1]);
            split_bf2(x0, x1, h[i], l[i]);
        }
        *(uint4 *) hi = make_uint4(h[0], h[1], h[2], h[3]);
        *(uint4 *) lo = make_uint4(l[0], l[1], l[2], l[3]);
    }
}

// Row r of a tile (row_of(r): its data, nullptr past the end: zeros) into the hi and lo planes;
// the block's threads share the tile's 16-byte chunks.
template <int D, int KT, typename F>
__device__ __forceinline__ void load_split_tile(uint32_t * hi, uint32_t * lo, F row_of) {
    constexpr int VPL = KT == GGML_TYPE_F32 ? 4 : 8, CH = D / VPL, RW = mma_row_words<D>();
    for (int e = threadIdx.x; e < kMmaK * CH; e += blockDim.x) {
        const int r = e / CH, c = e % CH;
        const char * row = row_of(r);
        uint32_t * h = hi + r * RW + c * (VPL / 2), * l = lo + r * RW + c * (VPL / 2);
        if (row) {
            split_chunk<KT>(row, (int64_t) c * VPL, h, l);
        } else {
#pragma unroll
            for (int i = 0; i < VPL / 2; i++) h[i] = l[i] = 0;
        }
    }
}

// acc[j] += W X over the tile's rows, W the warp's 16 x kMmaK weights as A fragments (hi, lo:
// k-step s is the tile's rows 16 s .. 16 s + 15), X the tile (planes xh, xl): column tile j of
// the result is columns 8j .. 8j + 7 of X.
template <int D>
__device__ __forceinline__ void weights_times_tile(float (&acc)[D / 8][4], const uint32_t (&wh)[kMmaK / 16][4],
                                                      const uint32_t (&wl)[kMmaK / 16][4], const uint32_t * xh, const uint32_t * xl) {
    constexpr int RW = mma_row_words<D>();
    const int lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3, sh = 16 * (g & 1);
#pragma unroll
    for (int j = 0; j < D / 8; j++) {
        const int cw = 4 * j + (g >> 1);  // B[k][n] = X[row k][column n]: two rows a register
#pragma unroll
        for (int s = 0; s < kMmaK / 16; s++) {
            const int kr = 16 * s + 2 * t;
            const uint32_t bh[2] = { pack_h2((uint16_t) (xh[kr * RW + cw] >> sh), (uint16_t) (xh[(kr + 1) * RW + cw] >> sh)),
                                     pack_h2((uint16_t) (xh[(kr + 8) * RW + cw] >> sh), (uint16_t) (xh[(kr + 9) * RW + cw] >> sh)) };
            const uint32_t bl[2] = { pack_h2((uint16_t) (xl[kr * RW + cw] >> sh), (uint16_t) (xl[(kr + 1) * RW + cw] >> sh)),
                                     pack_h2((uint16_t) (xl[(kr + 8) * RW + cw] >> sh), (uint16_t) (xl[(kr + 9) * RW + cw] >> sh)) };
            mma_bf16x3(acc[j], wh[s], wl[s], bh, bl);
        }
    }
}

// The weights of a 16 x kMmaK product's result (registers as mma.cuh's D layout) as A
// fragments for the next product, hi and lo.
__device__ __forceinline__ void weights_as_frags(const float (&w)[kMmaK / 8][4], uint32_t (&wh)[kMmaK / 16][4],
                                                    uint32_t (&wl)[kMmaK / 16][4]) {
#pragma unroll
    for (int s = 0; s < kMmaK / 16; s++) {
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int j = 2 * s + (r >> 1), c = 2 * (r & 1);
            split_bf2(w[j][c], w[j][c + 1], wh[s][r], wl[s][r]);
        }
    }
}

// The mask (times the ALiBi slope) at this thread's elements of a 16 x kMmaK tile of logits
// from key k0 on: elements c 0, 1 of a column tile j in row r0 (mask row mrow0), c 2, 3 in r1;
// keys k0 + 8 j + 2 t + (c & 1); -inf past the rows and keys. Whether any is above -inf.
__device__ __forceinline__ bool mma_tile_mask(const FaArgs & a, const char * mrow0, const char * mrow1, bool valid0, bool valid1, int64_t k0,
                                              float slope, float (&mv)[kMmaK / 8][4]) {
    const int t = threadIdx.x % 4, mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;
    bool vis = false;
#pragma unroll
    for (int j = 0; j < kMmaK / 8; j++) {
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int64_t key = k0 + 8 * j + 2 * t + (c & 1);
            const char * mrow = c < 2 ? mrow0 : mrow1;
            float v = -INFINITY;
            if ((c < 2 ? valid0 : valid1) && key < a.n_kv) v = mrow ? slope * load_f(mrow + key * mes, a.mask.type) : 0.0f;
            mv[j][c] = v;
            vis = vis || v != -INFINITY;
        }
    }
    return vis;
}

// KT: F16 (the keys and values exact in F16: q and P as F16 hi + lo, two products each), F32 or
// BF16 (every operand as BF16 hi + lo, mma_bf16x3).
template <int D, int KT>
__global__ void __launch_bounds__(kMmaWarps * WARP) k_flash_attn_mma(FaArgs a) {
    constexpr bool X3 = KT != GGML_TYPE_F16;
    constexpr int RW = mma_row_words<D>();
    constexpr int NK = D / 16;  // k-steps of a logit
    constexpr int NO = D / 8;   // column tiles of the output
    constexpr int NS = kMmaK / 8, NP = kMmaK / 16;  // column tiles of S, k-steps of P V
    GGML_CUDA_DYN_SMEM(uint32_t, smem);
    uint32_t * ks = smem;               // [kMmaK][RW]: two halves a word
    uint32_t * vs = ks + kMmaK * RW;
    uint32_t * ksl = vs + kMmaK * RW;   // X3: the lo planes
    uint32_t * vsl = ksl + kMmaK * RW;

    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, g = lane >> 2, t = lane & 3;
    const int64_t h = blockIdx.y, i3 = blockIdx.z, hk = h / a.G;
    const int64_t r0 = (int64_t) blockIdx.x * kMmaQ + 16 * warp + g, r1 = r0 + 8;  // this thread's query rows
    const bool valid0 = r0 < a.n_q, valid1 = r1 < a.n_q;

    // q scaled, as hi + lo A fragments (rows past n_q: zeros)
    uint32_t qh[NK][4], ql[NK][4];
#pragma unroll
    for (int s = 0; s < NK; s++) {
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int64_t row = (r & 1) ? r1 : r0, col = 16 * s + 2 * t + 8 * (r >> 1);
            float x0 = 0.0f, x1 = 0.0f;
            if (row < a.n_q) {
                const char * p = elem_ptr(a.q, col, row, h, i3);
                x0 = *(const float *) p * a.scale;
                x1 = *(const float *) (p + a.q.nb[0]) * a.scale;
            }
            if constexpr (X3) {
                split_bf2(x0, x1, qh[s][r], ql[s][r]);
            } else {
                split_h2(x0, x1, qh[s][r], ql[s][r]);
            }
        }
    }
    const char * kbase = a.k.data + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vbase = a.v.data + hk * a.v.nb[2] + i3 * a.v.nb[3];
    const char * mrow0 = a.has_mask && valid0 ? row_ptr(a.mask, r0, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const char * mrow1 = a.has_mask && valid1 ? row_ptr(a.mask, r1, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);

    float o[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this thread's part of the row sums

    for (int64_t k0 = 0; k0 < a.n_kv; k0 += kMmaK) {
        float mv[NS][4];
        if (!__syncthreads_or(mma_tile_mask(a, mrow0, mrow1, valid0, valid1, k0, slope, mv))) continue;  // uniform; and the last tile's readers are done
        // the tile's keys and values, 16 bytes a load (keys past n_kv: zeros)
        if constexpr (X3) {
            load_split_tile<D, KT>(ks, ksl, [&](int r) { return k0 + r < a.n_kv ? kbase + (k0 + r) * a.k.nb[1] : nullptr; });
            load_split_tile<D, KT>(vs, vsl, [&](int r) { return k0 + r < a.n_kv ? vbase + (k0 + r) * a.v.nb[1] : nullptr; });
        } else {
            constexpr int CH = D / 8;
            for (int e = threadIdx.x; e < kMmaK * CH; e += kMmaWarps * WARP) {
                const int r = e / CH, c = e % CH;
                uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
                if (k0 + r < a.n_kv) {
                    kv = *(const uint4 *) (kbase + (k0 + r) * a.k.nb[1] + 16 * c);
                    vv = *(const uint4 *) (vbase + (k0 + r) * a.v.nb[1] + 16 * c);
                }
                *(uint4 *) (ks + r * RW + 4 * c) = kv;
                *(uint4 *) (vs + r * RW + 4 * c) = vv;
            }
        }
        __syncthreads();

        // S = Q K^T: B[k][n] = K[key n][dim k], two consecutive dims a word
        float sc[NS][4];
#pragma unroll
        for (int j = 0; j < NS; j++) {
            sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
            const uint32_t * krow = ks + (8 * j + g) * RW + t;
#pragma unroll
            for (int s = 0; s < NK; s++) {
                const uint32_t b[2] = { krow[8 * s], krow[8 * s + 4] };
                if constexpr (X3) {
                    const uint32_t * klrow = ksl + (8 * j + g) * RW + t;
                    const uint32_t bl[2] = { klrow[8 * s], klrow[8 * s + 4] };
                    mma_bf16x3(sc[j], qh[s], ql[s], b, bl);
                } else {
                    mma_16x8x16(sc[j], qh[s], b);
                    mma_16x8x16(sc[j], ql[s], b);
                }
            }
        }
        // online softmax over the tile, rows r0 (c 0, 1) and r1 (c 2, 3)
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int j = 0; j < NS; j++) {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float s = sc[j][c];
                if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
                s = mv[j][c] == -INFINITY ? -INFINITY : s + mv[j][c];
                sc[j][c] = s;
                if (c < 2) {
                    mx0 = fmaxf(mx0, s);
                } else {
                    mx1 = fmaxf(mx1, s);
                }
            }
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        const float c0 = mn0 == -INFINITY ? 1.0f : expf(m0 - mn0), c1 = mn1 == -INFINITY ? 1.0f : expf(m1 - mn1);
        m0 = mn0;
        m1 = mn1;
        l0 *= c0;
        l1 *= c1;
#pragma unroll
        for (int j = 0; j < NO; j++) {
            o[j][0] *= c0;
            o[j][1] *= c0;
            o[j][2] *= c1;
            o[j][3] *= c1;
        }
        // P as hi + lo A fragments: k-step s of P V is S's column tiles 2s and 2s + 1
        uint32_t ph[NP][4], pl[NP][4];
#pragma unroll
        for (int s = 0; s < NP; s++) {
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int j = 2 * s + (r >> 1), c = 2 * (r & 1);
                const float m = (r & 1) ? m1 : m0;
                const float p0 = sc[j][c] == -INFINITY ? 0.0f : expf(sc[j][c] - m);
                const float p1 = sc[j][c + 1] == -INFINITY ? 0.0f : expf(sc[j][c + 1] - m);
                if (r & 1) {
                    l1 += p0 + p1;
                } else {
                    l0 += p0 + p1;
                }
                if constexpr (X3) {
                    split_bf2(p0, p1, ph[s][r], pl[s][r]);
                } else {
                    split_h2(p0, p1, ph[s][r], pl[s][r]);
                }
            }
        }
        // O += P V: B[k][n] = V[key k][dim n], the two keys of a register from two rows
        if constexpr (X3) {
            weights_times_tile<D>(o, ph, pl, vs, vsl);
        } else {
            const int sh = 16 * (g & 1);
#pragma unroll
            for (int j = 0; j < NO; j++) {
                const uint32_t * vcol = vs + 4 * j + (g >> 1);
#pragma unroll
                for (int s = 0; s < NP; s++) {
                    const int kr = 16 * s + 2 * t;
                    uint32_t b[2];
                    b[0] = pack_h2((uint16_t) (vcol[kr * RW] >> sh), (uint16_t) (vcol[(kr + 1) * RW] >> sh));
                    b[1] = pack_h2((uint16_t) (vcol[(kr + 8) * RW] >> sh), (uint16_t) (vcol[(kr + 9) * RW] >> sh));
                    mma_16x8x16(o[j], ph[s], b);
                    mma_16x8x16(o[j], pl[s], b);
                }
            }
        }
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    // [Dv, H, n_q, B]; a row that saw no key gets zeros
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int64_t row = half ? r1 : r0;
        if (row >= a.n_q) continue;
        const float m = half ? m1 : m0, l = half ? l1 : l0;
        const float inv = m != -INFINITY && l > 0.0f ? 1.0f / l : 0.0f;
        const int64_t at = ((i3 * a.n_q + row) * a.H + h) * D + 2 * t;
        float * out = a.dst + at;
        uint32_t * out16 = a.act.qs ? (uint32_t *) ((uint16_t *) a.act.qs + at) : nullptr;  // halves for the output projection
#pragma unroll
        for (int j = 0; j < NO; j++) {
            const float v0 = o[j][2 * half] * inv, v1 = o[j][2 * half + 1] * inv;
            out[8 * j] = v0;
            out[8 * j + 1] = v1;
            if (out16) out16[4 * j] = pack_h2(f2h(v0), f2h(v1));
        }
    }
}

}  // namespace

bool ggml_cuda_fattn_mma_usable(const ggml_cuda_ctx & ctx, const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2];
    if (ctx.cc < 80 || ctx.no_mma_fa || !is_float_type(k->type) || v->type != k->type) return false;
    const int64_t D = q->ne[0];
    return (D == 64 || D == 128) && v->ne[0] == D && q->ne[1] >= 16 && rows_vec(k, D) && rows_vec(v, D);
}

void ggml_cuda_fattn_mma(ggml_cuda_ctx & ctx, ggml_tensor * dst, const ActArgs & act) {
    FaArgs a = fa_args(dst);
    a.act = act;
    if (ggml_nelements(dst) == 0) return;
    ctx.n_mma_attn++;
    const dim3 grid((unsigned int) ((a.n_q + kMmaQ - 1) / kMmaQ), (unsigned int) a.H, (unsigned int) dst->src[0]->ne[3]);
    auto launch = [&](auto d, auto kt) {
        constexpr int D = decltype(d)::value, KT = decltype(kt)::value;
        GGML_CUDA_LAUNCH(k_flash_attn_mma<D GGML_COMMA KT>, grid, kMmaWarps * WARP, mma_smem_bytes<D GGML_COMMA KT>(), ctx.stream)(a);
    };
    auto by_type = [&](auto d) {
        switch (dst->src[1]->type) {
            case GGML_TYPE_F16: launch(d, std::integral_constant<int, GGML_TYPE_F16>{}); break;
            case GGML_TYPE_F32: launch(d, std::integral_constant<int, GGML_TYPE_F32>{}); break;
            default: launch(d, std::integral_constant<int, GGML_TYPE_BF16>{}); break;
        }
    };
    if (a.D == 64) {
        by_type(std::integral_constant<int, 64>{});
    } else {
        by_type(std::integral_constant<int, 128>{});
    }
    CUDA_CHECK_LAUNCH();
}

// ---- the gradient on tensor cores (training) -------------------------------------------------
// flash_attn_back with fattn.cu's equations and its two kernels (the rows' statistics and dQ;
// dK and dV), every product on tensor cores. Training's queries, keys, values and dO are F32 and
// its gradients lie far below F16's smallest normal, so the operands go in as BF16 hi + lo pairs
// (mma_bf16x3: about 2^-17 of each product lost). Heads of 64 and 128 (Dv = D), F32 keys and
// values with 16-byte rows, sm_80 and later.
//
// Rows: a block takes kBwRows query rows of one head, a warp 16, and walks the keys in tiles of
// kBwTile twice: first the max, the sum of e^(s - max) and of e^(s - max) dP (S = Q K^T and
// dP = dO V^T), then dQ += dS K, dS taken from the logits' registers as the A operand. Keys: a
// block takes kBwRows keys of a kv head, a warp 16, and walks query rows in tiles of kBwTile:
// S^T = K Q^T and dP^T = V dO^T, then dV += P^T dO and dK += dS^T Q. With grouped heads each
// query head's rows are a block of their own, whose share goes to scratch and is summed in head
// order after (a kv head's keys alone would be too few blocks to fill the GPU). A warp's A
// operands (its q and dO rows, or k and v rows) wait in shared memory in fragment order, a
// 16-byte load per lane and k-step (registers hold the gradients' accumulators); a tile's rows
// sit there as hi and lo planes, padded so that the fragment loads hit 32 banks. Tiles every
// row of the block has masked are skipped. One block writes each result: no atomics.
namespace {

constexpr int kBwWarps = kMmaWarps, kBwRows = 16 * kBwWarps, kBwTile = kMmaK;

template <int D>
constexpr int bw_frag_words() { return D / 16 * WARP * 4; }  // one plane of a warp's A fragments

// K and V tiles (or Q and dO), hi and lo planes, then per warp its A fragments' four planes.
template <int D>
constexpr size_t bw_smem_bytes() {
    return ((size_t) 4 * kBwTile * mma_row_words<D>() + (size_t) kBwWarps * 4 * bw_frag_words<D>() + 3 * kBwTile) * sizeof(uint32_t);
}

// This lane's A fragments of 16 rows (elem(row 0 or 1, column): row g or g + 8 of the warp's)
// into its slots of a warp's hi and lo planes, k-step s at word 128 s + 4 lane.
template <int D, typename F>
__device__ __forceinline__ void bw_store_frags(uint32_t * hi, uint32_t * lo, F elem) {
    const int lane = threadIdx.x % WARP, t = lane & 3;
#pragma unroll
    for (int s = 0; s < D / 16; s++) {
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int col = 16 * s + 2 * t + 8 * (r >> 1);
            split_bf2(elem(r & 1, col), elem(r & 1, col + 1), hi[s * 4 * WARP + 4 * lane + r], lo[s * 4 * WARP + 4 * lane + r]);
        }
    }
}

__device__ __forceinline__ void bw_load_frag(const uint32_t * plane, int s, uint32_t f[4]) {
    const uint4 v = *(const uint4 *) (plane + s * 4 * WARP + 4 * (threadIdx.x % WARP));
    f[0] = v.x;
    f[1] = v.y;
    f[2] = v.z;
    f[3] = v.w;
}

// acc[j] += A X^T over the D columns, for the warp's 16 A rows (fragments in planes ah, al) and
// the tile's rows X (planes xh, xl): column tile j of the result is tile rows 8j .. 8j + 7.
template <int D>
__device__ __forceinline__ void bw_rows_times_tile(float (&acc)[kBwTile / 8][4], const uint32_t * ah, const uint32_t * al,
                                                   const uint32_t * xh, const uint32_t * xl) {
    constexpr int RW = mma_row_words<D>();
    const int lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int s = 0; s < D / 16; s++) {
        uint32_t fh[4], fl[4];
        bw_load_frag(ah, s, fh);
        bw_load_frag(al, s, fl);
#pragma unroll
        for (int j = 0; j < kBwTile / 8; j++) {
            const int w = (8 * j + g) * RW + 8 * s + t;  // B[k][n] = X[row n][column k], two columns a word
            const uint32_t bh[2] = { xh[w], xh[w + 4] }, bl[2] = { xl[w], xl[w + 4] };
            mma_bf16x3(acc[j], fh, fl, bh, bl);
        }
    }
}

// Heads of 64: at most 128 registers, so that the four blocks its shared memory allows fit too.
template <int D, int KT>
__global__ void __launch_bounds__(kBwWarps * WARP, D == 64 ? 4 : 1) k_flash_attn_back_mma_rows(FaBackArgs b) {
    const FaArgs & a = b.f;
    constexpr int RW = mma_row_words<D>(), FW = bw_frag_words<D>(), NS = kBwTile / 8, NO = D / 8;
    GGML_CUDA_DYN_SMEM(uint32_t, smem);
    uint32_t * kh = smem, * kl = kh + kBwTile * RW, * vh = kl + kBwTile * RW, * vl = vh + kBwTile * RW;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, g = lane >> 2, t = lane & 3;
    uint32_t * qfh = vl + kBwTile * RW + warp * 4 * FW, * qfl = qfh + FW, * dofh = qfl + FW, * dofl = dofh + FW;
    const int64_t h = blockIdx.y, i3 = blockIdx.z, hk = h / a.G;
    const int64_t r0 = (int64_t) blockIdx.x * kBwRows + 16 * warp + g, r1 = r0 + 8;  // this thread's query rows
    const bool valid0 = r0 < a.n_q, valid1 = r1 < a.n_q;

    bw_store_frags<D>(qfh, qfl, [&](int i, int col) {
        const int64_t row = i ? r1 : r0;
        return row < a.n_q ? *(const float *) elem_ptr(a.q, col, row, h, i3) : 0.0f;
    });
    bw_store_frags<D>(dofh, dofl, [&](int i, int col) {
        const int64_t row = i ? r1 : r0;
        return row < a.n_q ? b.dO[((i3 * a.n_q + row) * a.H + h) * D + col] : 0.0f;
    });
    const char * kbase = a.k.data + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vbase = a.v.data + hk * a.v.nb[2] + i3 * a.v.nb[3];
    const char * mrow0 = a.has_mask && valid0 ? row_ptr(a.mask, r0, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const char * mrow1 = a.has_mask && valid1 ? row_ptr(a.mask, r1, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);

    float dq[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
    // rows r0 (elements c 0, 1 of a result tile) and r1 (c 2, 3): max, this thread's part of the
    // sums of e^(s - max) and of e^(s - max) dP, then 1 / sum and D
    float m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f }, u[2] = { 0.0f, 0.0f }, inv_l[2] = { 0.0f, 0.0f }, Di[2] = { 0.0f, 0.0f };
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t k0 = 0; k0 < a.n_kv; k0 += kBwTile) {
            float mv[NS][4];
            if (!__syncthreads_or(mma_tile_mask(a, mrow0, mrow1, valid0, valid1, k0, slope, mv))) continue;  // uniform; the last tile read
            load_split_tile<D, KT>(kh, kl, [&](int r) { return k0 + r < a.n_kv ? kbase + (k0 + r) * a.k.nb[1] : nullptr; });
            load_split_tile<D, KT>(vh, vl, [&](int r) { return k0 + r < a.n_kv ? vbase + (k0 + r) * a.v.nb[1] : nullptr; });
            __syncthreads();

            float sc[NS][4] = {}, dp[NS][4] = {};
            bw_rows_times_tile<D>(sc, qfh, qfl, kh, kl);   // q . k
            bw_rows_times_tile<D>(dp, dofh, dofl, vh, vl); // dO . v
            if (pass == 0) {
                float mx[2] = { -INFINITY, -INFINITY };
#pragma unroll
                for (int j = 0; j < NS; j++) {
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        sc[j][c] = mv[j][c] == -INFINITY ? -INFINITY : fa_logit(a, sc[j][c], mv[j][c]).s;
                        mx[c >> 1] = fmaxf(mx[c >> 1], sc[j][c]);
                    }
                }
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                    const float mn = fmaxf(m[i], mx[i]);
                    const float corr = mn == -INFINITY ? 1.0f : expf(m[i] - mn);  // 0 while m is -inf
                    l[i] *= corr;
                    u[i] *= corr;
                    m[i] = mn;
                }
#pragma unroll
                for (int j = 0; j < NS; j++) {
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const float p = sc[j][c] == -INFINITY ? 0.0f : expf(sc[j][c] - m[c >> 1]);
                        l[c >> 1] += p;
                        u[c >> 1] += p * dp[j][c];
                    }
                }
            } else {
                // dS = P (dP - D) s', then dQ += dS K
#pragma unroll
                for (int j = 0; j < NS; j++) {
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        float ds = 0.0f;
                        if (mv[j][c] != -INFINITY && inv_l[c >> 1] != 0.0f) {
                            const Logit lg = fa_logit(a, sc[j][c], mv[j][c]);
                            ds = expf(lg.s - m[c >> 1]) * inv_l[c >> 1] * (dp[j][c] - Di[c >> 1]) * lg.ds;
                        }
                        sc[j][c] = ds;
                    }
                }
                uint32_t wh[kBwTile / 16][4], wl[kBwTile / 16][4];
                weights_as_frags(sc, wh, wl);
                weights_times_tile<D>(dq, wh, wl, kh, kl);
            }
        }
        if (pass == 0) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
                l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
                u[i] += __shfl_xor_sync(0xffffffffu, u[i], 1);
                u[i] += __shfl_xor_sync(0xffffffffu, u[i], 2);
                const bool sees = m[i] != -INFINITY && l[i] > 0.0f;  // a row that sees no key has zero gradients
                inv_l[i] = sees ? 1.0f / l[i] : 0.0f;
                Di[i] = sees ? u[i] / l[i] : 0.0f;
                const int64_t row = i ? r1 : r0;
                if (row < a.n_q && t == 0) {
                    float * st = b.stats + ((i3 * a.H + h) * a.n_q + row) * 3;
                    st[0] = sees ? m[i] : -INFINITY;
                    st[1] = inv_l[i];
                    st[2] = Di[i];
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int64_t row = i ? r1 : r0;
        if (row >= a.n_q) continue;
        float * out = b.dq + ((i3 * a.H + h) * a.n_q + row) * D + 2 * t;  // dQ has q's shape, contiguous
#pragma unroll
        for (int j = 0; j < NO; j++) *(float2 *) (out + 8 * j) = make_float2(dq[j][2 * i], dq[j][2 * i + 1]);
    }
}

// dK and dV of kBwRows keys of kv head hk over query rows: those of the G heads of hk
// (r = g n_q + iq; part nullptr: the results written directly), or with part those of query head
// blockIdx.y alone, its share written to part (dK's, then dV's: [D, n_kv, H, B] each).
template <int D, int KT>
__global__ void __launch_bounds__(kBwWarps * WARP) k_flash_attn_back_mma_keys(FaBackArgs b, float * part) {
    const FaArgs & a = b.f;
    constexpr int RW = mma_row_words<D>(), FW = bw_frag_words<D>(), NS = kBwTile / 8, NO = D / 8;
    GGML_CUDA_DYN_SMEM(uint32_t, smem);
    uint32_t * qh = smem, * ql = qh + kBwTile * RW, * doh = ql + kBwTile * RW, * dol = doh + kBwTile * RW;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, g = lane >> 2, t = lane & 3;
    uint32_t * kfh = dol + kBwTile * RW + warp * 4 * FW, * kfl = kfh + FW, * vfh = kfl + FW, * vfl = vfh + FW;
    float * sts = (float *) (smem + 4 * kBwTile * RW + kBwWarps * 4 * FW);  // [kBwTile][3]: the tile's rows' statistics
    const int64_t i3 = blockIdx.z;
    const int64_t h0 = part ? blockIdx.y : (int64_t) blockIdx.y * a.G, hk = h0 / a.G;  // the rows' first head
    const int64_t n_rows = (part ? 1 : a.G) * a.n_q;
    const int64_t j0 = (int64_t) blockIdx.x * kBwRows + 16 * warp + g, j1 = j0 + 8;  // this thread's keys
    const char * kbase = a.k.data + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vbase = a.v.data + hk * a.v.nb[2] + i3 * a.v.nb[3];

    bw_store_frags<D>(kfh, kfl, [&](int i, int col) {
        const int64_t j = i ? j1 : j0;
        return j < a.n_kv ? load_f(kbase + j * a.k.nb[1] + col * a.k.nb[0], a.k.type) : 0.0f;
    });
    bw_store_frags<D>(vfh, vfl, [&](int i, int col) {
        const int64_t j = i ? j1 : j0;
        return j < a.n_kv ? load_f(vbase + j * a.v.nb[1] + col * a.v.nb[0], a.v.type) : 0.0f;
    });
    const int mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;
    // key j's mask value in row r (-inf where the row does not see it or sees nothing at all)
    auto mask_of = [&](int64_t j, int64_t r) {
        if (j >= a.n_kv || r >= n_rows) return -INFINITY;
        const int64_t iq = r % a.n_q, h = h0 + r / a.n_q;
        if (fa_stats(b, iq, h, i3)[0] == -INFINITY) return -INFINITY;
        if (!a.has_mask) return 0.0f;
        const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);
        return slope * load_f(row_ptr(a.mask, iq, h % a.mask.ne[2], i3 % a.mask.ne[3]) + j * mes, a.mask.type);
    };

    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) dk[j][0] = dk[j][1] = dk[j][2] = dk[j][3] = dv[j][0] = dv[j][1] = dv[j][2] = dv[j][3] = 0.0f;
    for (int64_t q0 = 0; q0 < n_rows; q0 += kBwTile) {
        // the result's elements: c 0, 1 key j0, c 2, 3 key j1; tile row 8 j + 2 t + (c & 1)
        float mv[NS][4];
        bool vis = false;
#pragma unroll
        for (int j = 0; j < NS; j++) {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                mv[j][c] = mask_of(c < 2 ? j0 : j1, q0 + 8 * j + 2 * t + (c & 1));
                vis = vis || mv[j][c] != -INFINITY;
            }
        }
        if (!__syncthreads_or(vis)) continue;  // uniform; and the last tile's readers are done
        load_split_tile<D, GGML_TYPE_F32>(qh, ql, [&](int r) {
            const int64_t row = q0 + r;
            return row < n_rows ? (const char *) elem_ptr(a.q, 0, row % a.n_q, h0 + row / a.n_q, i3) : nullptr;
        });
        load_split_tile<D, GGML_TYPE_F32>(doh, dol, [&](int r) {
            const int64_t row = q0 + r;
            return row < n_rows ? (const char *) (b.dO + ((i3 * a.n_q + row % a.n_q) * a.H + h0 + row / a.n_q) * D) : nullptr;
        });
        if (threadIdx.x < kBwTile) {
            const int64_t row = q0 + threadIdx.x;
            const float * st = row < n_rows ? fa_stats(b, row % a.n_q, h0 + row / a.n_q, i3) : nullptr;
            sts[3 * threadIdx.x] = st ? st[0] : -INFINITY;
            sts[3 * threadIdx.x + 1] = st ? st[1] : 0.0f;
            sts[3 * threadIdx.x + 2] = st ? st[2] : 0.0f;
        }
        __syncthreads();

        float sc[NS][4] = {}, dp[NS][4] = {};
        bw_rows_times_tile<D>(sc, kfh, kfl, qh, ql);    // k . q
        bw_rows_times_tile<D>(dp, vfh, vfl, doh, dol);  // v . dO
        // P and dS = P (dP - D) s' in place of the dot products
#pragma unroll
        for (int j = 0; j < NS; j++) {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const float * st = sts + 3 * (8 * j + 2 * t + (c & 1));
                float p = 0.0f, ds = 0.0f;
                if (mv[j][c] != -INFINITY) {
                    const Logit lg = fa_logit(a, sc[j][c], mv[j][c]);
                    p = expf(lg.s - st[0]) * st[1];
                    ds = p * (dp[j][c] - st[2]) * lg.ds;
                }
                sc[j][c] = p;
                dp[j][c] = ds;
            }
        }
        uint32_t wh[kBwTile / 16][4], wl[kBwTile / 16][4];
        weights_as_frags(sc, wh, wl);
        weights_times_tile<D>(dv, wh, wl, doh, dol);  // dV += P^T dO
        weights_as_frags(dp, wh, wl);
        weights_times_tile<D>(dk, wh, wl, qh, ql);    // dK += dS^T Q
    }
    const int64_t H_out = part ? a.H : a.k.ne[2], head = part ? h0 : hk;
    float * out_k = part ? part : b.dk, * out_v = part ? part + a.k.ne[3] * a.H * a.n_kv * D : b.dv;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int64_t j = i ? j1 : j0;
        if (j >= a.n_kv) continue;
        const int64_t at = ((i3 * H_out + head) * a.n_kv + j) * D + 2 * t;  // dK, dV have k's and v's shapes, contiguous
#pragma unroll
        for (int c = 0; c < NO; c++) {
            *(float2 *) (out_k + at + 8 * c) = make_float2(dk[c][2 * i], dk[c][2 * i + 1]);
            *(float2 *) (out_v + at + 8 * c) = make_float2(dv[c][2 * i], dv[c][2 * i + 1]);
        }
    }
}

// dK and dV as the sums of the G query heads' shares, in head order.
__global__ void k_flash_attn_back_sum_heads(FaBackArgs b, const float * part, int64_t n_per_tensor) {
    const FaArgs & a = b.f;
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 2 * n_per_tensor) return;
    const int64_t e = i % n_per_tensor, row_elems = a.n_kv * a.D;
    const int64_t in_head = e % row_elems, kv_head = e / row_elems;  // kv_head: i3 * Hkv + hk
    const float * src = part + (i / n_per_tensor) * (n_per_tensor * a.G) + kv_head * a.G * row_elems + in_head;
    float s = 0.0f;
    for (int64_t gi = 0; gi < a.G; gi++) s += src[gi * row_elems];
    (i < n_per_tensor ? b.dk : b.dv)[e] = s;
}

}  // namespace

bool ggml_cuda_fattn_back_mma(ggml_cuda_ctx & ctx, ggml_tensor * dst, FaBackArgs b) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * grad = dst->src[4];
    const FaArgs & a = b.f;
    // F32 keys and values: training's (F16 and BF16 ones take the tiled CUDA-core kernels, as
    // nothing trains through them: each type would add four heavy kernels to the build)
    if (ctx.cc < 80 || ctx.no_mma_fa || k->type != GGML_TYPE_F32 || (a.D != 64 && a.D != 128) || a.Dv != a.D) return false;
    if (a.n_q < kBwTile / 2 || !rows_vec(k, a.D) || !rows_vec(v, a.D) || !rows_vec(q, a.D) || !rows_vec(grad, a.D)) return false;
    const int64_t B = q->ne[3], rows = a.n_q * a.H * B;
    const bool split = a.G > 1;  // each query head's share of dK and dV in scratch, summed after
    const int64_t n_per_tensor = ggml_nelements(k);  // = ggml_nelements(v): Dv = D
    const size_t stats_bytes = ((size_t) rows * 3 * sizeof(float) + 255) / 256 * 256;
    const size_t part_bytes = split ? (size_t) 2 * n_per_tensor * a.G * sizeof(float) : 0;
    ctx.n_mma_attn++;
    char * scratch = (char *) ctx.scratch(stats_bytes + part_bytes);
    b.stats = (float *) scratch;
    float * part = split ? (float *) (scratch + stats_bytes) : nullptr;
    const dim3 grid_q((unsigned int) ((a.n_q + kBwRows - 1) / kBwRows), (unsigned int) a.H, (unsigned int) B);
    const dim3 grid_k((unsigned int) ((a.n_kv + kBwRows - 1) / kBwRows), (unsigned int) (split ? a.H : k->ne[2]), (unsigned int) B);
    auto launch = [&](auto d, auto kt) {
        constexpr int D = decltype(d)::value, KT = decltype(kt)::value;
        constexpr size_t smem = bw_smem_bytes<D>();
        auto * rows_kernel = &k_flash_attn_back_mma_rows<D, KT>;
        auto * keys_kernel = &k_flash_attn_back_mma_keys<D, KT>;
        GGML_CUDA_SMEM_OPT_IN_ONCE(ctx, rows_kernel, smem);
        GGML_CUDA_LAUNCH(k_flash_attn_back_mma_rows<D GGML_COMMA KT>, grid_q, kBwWarps * WARP, smem, ctx.stream)(b);
        CUDA_CHECK_LAUNCH();
        if (a.n_kv == 0) return;
        GGML_CUDA_SMEM_OPT_IN_ONCE(ctx, keys_kernel, smem);
        GGML_CUDA_LAUNCH(k_flash_attn_back_mma_keys<D GGML_COMMA KT>, grid_k, kBwWarps * WARP, smem, ctx.stream)(b, part);
        CUDA_CHECK_LAUNCH();
        if (split) {
            GGML_CUDA_LAUNCH(k_flash_attn_back_sum_heads, n_blocks(2 * n_per_tensor), 256, 0, ctx.stream)(b, part, n_per_tensor);
            CUDA_CHECK_LAUNCH();
        }
    };
    const std::integral_constant<int, GGML_TYPE_F32> f32;
    if (a.D == 64) {
        launch(std::integral_constant<int, 64>{}, f32);
    } else {
        launch(std::integral_constant<int, 128>{}, f32);
    }
    return true;
}
