// fattn-mma.cu - flash_attn_ext for prompts on tensor cores (mma.cuh): F16 keys and values (the
// default KV cache), head sizes 64 and 128 (Dv = D), sm_80 and later. fattn.cu takes every other
// case and describes the op.
//
// A block takes kMmaQ queries of one head, a warp 16 of them, and walks the keys in tiles of
// kMmaK held in shared memory as F16. Per tile a warp computes its 16 x kMmaK logits S = Q K^T
// with m16n8k16 products, the online softmax on them in registers (a thread holds two query
// rows; the four threads of a row exchange maxima by shuffles), then O += P V, P taken from S's
// registers as the A operand (mma.cuh's layout note). Q and P go in as F16 hi + lo pairs (two
// products each), so the logits and the weighted sums keep about F32 accuracy: the keys and
// values are exact in F16, and the CPU computes in F32. Tiles every query of the block has
// masked are skipped (a causal mask: half of them).
#include "fattn-common.cuh"
#include "mma.cuh"
#include "ops.cuh"

namespace {

constexpr int kMmaWarps = 4, kMmaQ = 16 * kMmaWarps, kMmaK = 32;

// Shared memory: the K and V tiles, rows of D halves padded by 8 (D / 2 + 4 words), so that the
// fragment loads of a warp hit 32 different banks.
template <int D>
constexpr int mma_row_words() { return D / 2 + 4; }

template <int D>
size_t mma_smem_bytes() { return (size_t) 2 * kMmaK * mma_row_words<D>() * sizeof(uint32_t) + 16; }

template <int D>
__global__ void __launch_bounds__(kMmaWarps * WARP) k_flash_attn_mma(FaArgs a) {
    constexpr int RW = mma_row_words<D>();
    constexpr int NK = D / 16;  // k-steps of a logit
    constexpr int NO = D / 8;   // column tiles of the output
    constexpr int NS = kMmaK / 8, NP = kMmaK / 16;  // column tiles of S, k-steps of P V
    GGML_CUDA_DYN_SMEM(uint32_t, smem);
    uint32_t * ks = smem;               // [kMmaK][RW]: two halves a word
    uint32_t * vs = ks + kMmaK * RW;

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
            split_h2(x0, x1, qh[s][r], ql[s][r]);
        }
    }
    const char * kbase = a.k.data + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vbase = a.v.data + hk * a.v.nb[2] + i3 * a.v.nb[3];
    const char * mrow0 = a.has_mask && valid0 ? row_ptr(a.mask, r0, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const char * mrow1 = a.has_mask && valid1 ? row_ptr(a.mask, r1, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const int mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;
    const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);

    float o[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this thread's part of the row sums

    for (int64_t k0 = 0; k0 < a.n_kv; k0 += kMmaK) {
        // the mask (times the ALiBi slope) at this thread's elements of S: c 0, 1 row r0; 2, 3 row r1
        float mv[NS][4];
        bool vis = false;
#pragma unroll
        for (int j = 0; j < NS; j++) {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int64_t key = k0 + 8 * j + 2 * t + (c & 1);
                const bool valid = c < 2 ? valid0 : valid1;
                const char * mrow = c < 2 ? mrow0 : mrow1;
                float v = -INFINITY;
                if (valid && key < a.n_kv) v = mrow ? slope * load_f(mrow + key * mes, a.mask.type) : 0.0f;
                mv[j][c] = v;
                vis = vis || v != -INFINITY;
            }
        }
        if (!__syncthreads_or(vis)) continue;  // uniform; and the last tile's readers are done
        // the tile's keys and values, 16 bytes a load (keys past n_kv: zeros)
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
                mma_16x8x16(sc[j], qh[s], b);
                mma_16x8x16(sc[j], ql[s], b);
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
                split_h2(p0, p1, ph[s][r], pl[s][r]);
            }
        }
        // O += P V: B[k][n] = V[key k][dim n], the two keys of a register from two rows
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
    if (ctx.cc < 80 || ctx.no_mma_fa || k->type != GGML_TYPE_F16 || v->type != GGML_TYPE_F16) return false;
    const int64_t D = q->ne[0];
    return (D == 64 || D == 128) && v->ne[0] == D && q->ne[1] >= 16 && rows_vec(k, D) && rows_vec(v, D);
}

void ggml_cuda_fattn_mma(ggml_cuda_ctx & ctx, ggml_tensor * dst, const ActArgs & act) {
    FaArgs a = fa_args(dst);
    a.act = act;
    if (ggml_nelements(dst) == 0) return;
    const dim3 grid((unsigned int) ((a.n_q + kMmaQ - 1) / kMmaQ), (unsigned int) a.H, (unsigned int) dst->src[0]->ne[3]);
    if (a.D == 64) {
        GGML_CUDA_LAUNCH(k_flash_attn_mma<64>, grid, kMmaWarps * WARP, mma_smem_bytes<64>(), ctx.stream)(a);
    } else {
        GGML_CUDA_LAUNCH(k_flash_attn_mma<128>, grid, kMmaWarps * WARP, mma_smem_bytes<128>(), ctx.stream)(a);
    }
    CUDA_CHECK_LAUNCH();
}
