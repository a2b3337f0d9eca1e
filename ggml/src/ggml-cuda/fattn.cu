// fattn.cu - flash_attn_ext as one fused kernel, and flash_attn_back (its gradient, at the end of
// the file). Forward: per query row and head,
// softmax(scale K^T q + slope mask) V (logits soft-capped when asked) with an online softmax, so
// the n_q x n_kv scores are never stored. q F32 [D, n_q, H, B]; k [D, n_kv, Hkv, B] and v [Dv,
// n_kv, Hkv, B] F16, BF16, F32, Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 with contiguous rows (a KV cache
// view as it is stored, quantized caches read block by block); mask
// F32/F16 [n_kv, >= n_q, 1 or H, 1 or B]. Result F32 [Dv, H, n_q, B]; a query that sees no key
// gets zeros, as the CPU's.
//
// Few queries (generation), or head sizes other than 16..128 and powers of two: a block (kWarps
// warps) takes one (query, head, batch). Each warp takes 32 keys at a time, a key
// per lane: the lane computes its key's logit over the whole of D (q sits in shared memory), the
// warp updates its running max and sum once per 32 keys, then adds the 32 weighted value rows
// with lanes along Dv (coalesced). Keys hidden by the mask (-inf) cost one mask read. The warps'
// partial results (max, sum, accumulator) are merged at the end. Prompts take query tiles
// (k_flash_attn_tiled): 32 queries share each tile of keys and values read into shared memory;
// with F16 caches and heads of 64 or 128 on sm_80 and later, fattn-mma.cu's tensor-core kernel.
#include "fattn-common.cuh"
#include "ops.cuh"
#include "quant.cuh"

namespace {

constexpr int kWarps = 4;
constexpr int kMaxD = 256;  // D and Dv: at most kMaxD / 32 accumulator registers per lane

// Element d of a key or value row of type KT (a plain float type, or 32-value blocks).
template <int KT>
__device__ __forceinline__ float kv_load(const char * row, int64_t d) {
    if constexpr (KT == GGML_TYPE_F32) return ((const float *) row)[d];
    if constexpr (KT == GGML_TYPE_F16) return h2f(((const uint16_t *) row)[d]);
    if constexpr (KT == GGML_TYPE_BF16) return bf2f(((const uint16_t *) row)[d]);
    return dequant1(row, d, KT);
}

// q . k for one key row: 16-byte loads (8 halves or 4 floats at a time) where the rows allow;
// Q8_0 a block at a time (one scale per 32 products).
template <int KT>
__device__ __forceinline__ float key_dot(const float * qs, const char * kr, int64_t D, bool vec) {
    float dot = 0.0f;
    if constexpr (KT == GGML_TYPE_F32) {
        if (vec) {
            for (int64_t d = 0; d < D; d += 4) {
                const float4 k4 = *(const float4 *) ((const float *) kr + d);
                dot += qs[d] * k4.x + qs[d + 1] * k4.y + qs[d + 2] * k4.z + qs[d + 3] * k4.w;
            }
            return dot;
        }
    } else if constexpr (KT == GGML_TYPE_F16 || KT == GGML_TYPE_BF16) {
        if (vec) {
            for (int64_t d = 0; d < D; d += 8) {
                const uint4 raw = *(const uint4 *) ((const uint16_t *) kr + d);
                uint16_t k8[8];
                memcpy(k8, &raw, sizeof(k8));  // not a pointer cast: that breaks strict aliasing (read as zeros)
#pragma unroll
                for (int e = 0; e < 8; e++) dot += qs[d + e] * (KT == GGML_TYPE_F16 ? h2f(k8[e]) : bf2f(k8[e]));
            }
            return dot;
        }
    } else if constexpr (KT == GGML_TYPE_Q8_0) {
        const block_q8_0 * b = (const block_q8_0 *) kr;  // a block at a time: one scale per 32 products
        for (int64_t i = 0; i < D / QK8_0; i++) {
            float acc = 0.0f;
#pragma unroll
            for (int e = 0; e < QK8_0; e++) acc += qs[QK8_0 * i + e] * (float) b[i].qs[e];
            dot += load_h(&b[i].d) * acc;
        }
    }
    if constexpr (KT != GGML_TYPE_Q8_0) {
        for (int64_t d = 0; d < D; d++) dot += qs[d] * kv_load<KT>(kr, d);  // value by value
    }
    return dot;
}

// acc[t] += w * row[lane + 32 t] over the row's n elements: a warp adds one weighted key or value
// row to its accumulators, lanes along the row (coalesced).
template <int KT>
__device__ __forceinline__ void add_weighted_row(float * acc, float w, const char * row, int64_t n, int lane) {
#pragma unroll
    for (int t = 0; t < kMaxD / WARP; t++) {
        const int64_t d = lane + WARP * t;
        if (d < n) acc[t] += w * kv_load<KT>(row, d);
    }
}


// Generation: the block's finished output row (Dv values of head h, query c) in the form the
// output projection that reads it next takes (Q8_0 units, a unit of 32 per thread, or halves for
// cuBLAS), as its own conversion would.
__device__ __forceinline__ void quantize_head_row(const FaArgs & a, const float * out, int64_t c, int64_t h) {
    __syncthreads();  // out was written by every thread of the block
    if (a.act.form == kActF16) {
        write_halves(a.act, out, c, h * a.Dv, a.Dv);
    } else {
        quantize_units<32>(a.act, out, c, h * (a.Dv / 32), a.Dv / 32);
    }
}

// A finished output row (head h of column c) for a product that reads Q8_K blocks of 256 values,
// 256 / Dv heads each, written by as many blocks: each block, its row written and fenced, counts
// itself done on the group's counter; the last to come quantizes the group (reading the others'
// rows past L1) and sets the counter back to zero. Other forms: quantize_head_row.
__device__ __forceinline__ void finish_head_row(const FaArgs & a, const float * out, int64_t c, int64_t h) {
    if (a.act.form != 256) {
        quantize_head_row(a, out, c, h);
        return;
    }
    __shared__ int last;
    __shared__ float group[256];
    const int64_t per = 256 / a.Dv, g = (c * a.H + h) / per, h0 = h - h % per;
    __syncthreads();  // out was written by every thread of the block
    if (threadIdx.x == 0) {
        __threadfence();  // this row before the count
        last = atomicAdd(a.group_done + g, 1) == (int) per - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float * base = a.dst + (c * a.H + h0) * a.Dv;
    for (int i = threadIdx.x; i < 256; i += blockDim.x) group[i] = __ldcg(base + i);
    __syncthreads();
    quantize_units<256>(a.act, group, c, h0 * a.Dv / 32, 8);
    if (threadIdx.x == 0) a.group_done[g] = 0;
}

template <int KT>
__global__ void __launch_bounds__(kWarps * WARP) k_flash_attn(FaArgs a) {
    GGML_CUDA_DYN_SMEM(float, smem);  // q [D], then per warp: max, sum, acc [Dv]
    float * qs = smem;
    float * part = smem + a.D;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int64_t iq = blockIdx.x / a.n_split, sp = blockIdx.x % a.n_split, h = blockIdx.y, i3 = blockIdx.z, hk = h / a.G;
    const int64_t k0 = sp * a.chunk, k1 = k0 + a.chunk < a.n_kv ? k0 + a.chunk : a.n_kv;

    const char * qrow = elem_ptr(a.q, 0, iq, h, i3);
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) qs[d] = *(const float *) (qrow + d * a.q.nb[0]);
    __syncthreads();

    const char * kbase = a.k.data + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vbase = a.v.data + hk * a.v.nb[2] + i3 * a.v.nb[3];
    const char * mrow = a.has_mask ? row_ptr(a.mask, iq, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const int mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;
    const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);

    constexpr int NA = kMaxD / WARP;
    float acc[NA];
#pragma unroll
    for (int t = 0; t < NA; t++) acc[t] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    for (int64_t j0 = k0 + (int64_t) warp * WARP; j0 < k1; j0 += (int64_t) kWarps * WARP) {
        const int64_t j = j0 + lane;
        float s = -INFINITY;
        if (j < k1) {
            const float mv = mrow ? slope * load_f(mrow + j * mes, a.mask.type) : 0.0f;
            if (mv != -INFINITY) {
                const float dot = key_dot<KT>(qs, kbase + j * a.k.nb[1], a.D, a.k_vec != 0);
                s = a.softcap > 0.0f ? a.softcap * tanhf(dot * a.scale / a.softcap) : dot * a.scale;
                s += mv;
            }
        }
        const float mb = warp_max(s);
        if (mb == -INFINITY) continue;  // every key of these 32 is hidden (uniform across the warp)
        const float m_new = fmaxf(m, mb);
        const float corr = expf(m - m_new);  // 0 while m is still -inf
        const float p = expf(s - m_new);     // 0 for hidden keys
        l = l * corr + warp_sum(p);
#pragma unroll
        for (int t = 0; t < NA; t++) acc[t] *= corr;
        const int nk = k1 - j0 < WARP ? (int) (k1 - j0) : WARP;
        for (int jj = 0; jj < nk; jj++) {
            const float pj = __shfl_sync(0xffffffffu, p, jj);
            if (pj == 0.0f) continue;  // uniform: every lane got the same pj
            add_weighted_row<KT>(acc, pj, vbase + (j0 + jj) * a.v.nb[1], a.Dv, lane);
        }
        m = m_new;
    }

    // merge the warps: out = sum_w acc_w e^(m_w - M) / sum_w l_w e^(m_w - M)
    float * mine = part + warp * (2 + a.Dv);
    if (lane == 0) {
        mine[0] = m;
        mine[1] = l;
    }
#pragma unroll
    for (int t = 0; t < NA; t++) {
        const int64_t d = lane + WARP * t;
        if (d < a.Dv) mine[2 + d] = acc[t];
    }
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < kWarps; w++) M = fmaxf(M, part[w * (2 + a.Dv)]);
    float L = 0.0f;
    for (int w = 0; w < kWarps; w++) {
        const float mw = part[w * (2 + a.Dv)];
        if (mw != -INFINITY) L += part[w * (2 + a.Dv) + 1] * expf(mw - M);
    }
    const int64_t row = (i3 * a.n_q + iq) * a.H + h;  // the output row: [Dv, H, n_q, B]
    if (a.n_split > 1) {  // this range's share, combined by k_flash_attn_combine
        float * pp = a.partial + (row * a.n_split + sp) * (2 + a.Dv);
        if (threadIdx.x == 0) {
            pp[0] = M;
            pp[1] = L;
        }
        for (int64_t d = threadIdx.x; d < a.Dv; d += blockDim.x) {
            float o = 0.0f;
            for (int w = 0; w < kWarps; w++) {
                const float mw = part[w * (2 + a.Dv)];
                if (mw != -INFINITY) o += part[w * (2 + a.Dv) + 2 + d] * expf(mw - M);
            }
            pp[2 + d] = o;
        }
        return;
    }
    float * out = a.dst + row * a.Dv;
    for (int64_t d = threadIdx.x; d < a.Dv; d += blockDim.x) {
        float o = 0.0f;
        if (M != -INFINITY && L > 0.0f) {
            for (int w = 0; w < kWarps; w++) {
                const float mw = part[w * (2 + a.Dv)];
                if (mw != -INFINITY) o += part[w * (2 + a.Dv) + 2 + d] * expf(mw - M);
            }
            o /= L;
        }
        out[d] = o;
    }
    if (a.act.qs) finish_head_row(a, out, i3 * a.n_q + iq, h);
}

// out = sum_s O_s e^(M_s - M) / sum_s L_s e^(M_s - M) over the key ranges s of a row.
__global__ void k_flash_attn_combine(float * dst, const float * partial, int n_split, int64_t Dv, FaArgs a) {
    const int64_t row = blockIdx.x;
    const float * pp = partial + row * n_split * (2 + Dv);
    float M = -INFINITY;
    for (int s = 0; s < n_split; s++) M = fmaxf(M, pp[s * (2 + Dv)]);
    float L = 0.0f;
    for (int s = 0; s < n_split; s++) {
        const float ms = pp[s * (2 + Dv)];
        if (ms != -INFINITY) L += pp[s * (2 + Dv) + 1] * expf(ms - M);
    }
    for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
        float o = 0.0f;
        if (M != -INFINITY && L > 0.0f) {
            for (int s = 0; s < n_split; s++) {
                const float ms = pp[s * (2 + Dv)];
                if (ms != -INFINITY) o += pp[s * (2 + Dv) + 2 + d] * expf(ms - M);
            }
            o /= L;
        }
        dst[row * Dv + d] = o;
    }
    if (a.act.qs) finish_head_row(a, dst + row * Dv, row / a.H, row % a.H);
}

// ---- prompts: query tiles ------------------------------------------------------------------
// With many queries (a prompt), k_flash_attn would read every key and value row once per query.
// Here a block takes kTileQ queries of one head and walks the keys in tiles of kTileK: the
// queries and each tile's keys and values (as F32) sit in shared memory, so a row read from the
// cache serves kTileQ queries. Four threads share a query: each computes kTileK / 4 of the tile's
// logits (keys r4, r4 + 4, ...), the four exchange their maxima, sums and probabilities by
// shuffles, and each accumulates a quarter of the output (elements r4, r4 + 4, ...). Rows in
// shared memory are rotated by their index (element d of row r at (d + r) mod D) so that threads
// reading different rows at the same d hit different banks; D and Dv are powers of two up to 128.
// Tiles of keys that every query of the block has masked are skipped (a causal mask: half).
constexpr int kTileQ = 32, kTileK = 16, kTileThreads = 4 * kTileQ;

template <int KT, int DV4>  // DV4: output elements per thread, Dv / 4 rounded up to 16 or 32
__global__ void __launch_bounds__(kTileThreads) k_flash_attn_tiled(FaArgs a) {
    GGML_CUDA_DYN_SMEM(float, smem);
    float * qs = smem;                  // [kTileQ][D]
    float * ks = qs + kTileQ * a.D;     // [kTileK][D]
    float * vs = ks + kTileK * a.D;     // [kTileK][Dv]
    const int t = threadIdx.x, lane = t % WARP, g = t / 4, r4 = t % 4;
    const int64_t q0 = (int64_t) blockIdx.x * kTileQ, h = blockIdx.y, i3 = blockIdx.z, hk = h / a.G;
    const int64_t iq = q0 + g;
    const bool valid = iq < a.n_q;
    const int64_t D = a.D, Dv = a.Dv, Dm = a.D - 1, Dvm = a.Dv - 1;

    for (int64_t e = t; e < kTileQ * D; e += kTileThreads) {
        const int64_t r = e / D, d = e % D;
        qs[r * D + ((d + r) & Dm)] = q0 + r < a.n_q ? *(const float *) elem_ptr(a.q, d, q0 + r, h, i3) : 0.0f;
    }
    const char * kbase = a.k.data + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vbase = a.v.data + hk * a.v.nb[2] + i3 * a.v.nb[3];
    const char * mrow = a.has_mask && valid ? row_ptr(a.mask, iq, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const int mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;
    const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);
    const float * qrow = qs + g * D;

    constexpr int NS = kTileK / 4;  // logits per thread per tile
    float o[DV4];
#pragma unroll
    for (int i = 0; i < DV4; i++) o[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    for (int64_t k0 = 0; k0 < a.n_kv; k0 += kTileK) {
        float mv[NS];
        bool vis = false;
#pragma unroll
        for (int i = 0; i < NS; i++) {
            const int64_t j = k0 + r4 + 4 * i;
            mv[i] = valid && j < a.n_kv ? (mrow ? slope * load_f(mrow + j * mes, a.mask.type) : 0.0f) : -INFINITY;
            vis = vis || mv[i] != -INFINITY;
        }
        if (!__syncthreads_or(vis)) continue;  // uniform; and the last tile's readers are done
        for (int64_t e = t; e < kTileK * D; e += kTileThreads) {
            const int64_t r = e / D, d = e % D;
            ks[r * D + ((d + r) & Dm)] = k0 + r < a.n_kv ? kv_load<KT>(kbase + (k0 + r) * a.k.nb[1], d) : 0.0f;
        }
        for (int64_t e = t; e < kTileK * Dv; e += kTileThreads) {
            const int64_t r = e / Dv, d = e % Dv;
            vs[r * Dv + ((d + r) & Dvm)] = k0 + r < a.n_kv ? kv_load<KT>(vbase + (k0 + r) * a.v.nb[1], d) : 0.0f;
        }
        __syncthreads();

        float s[NS];
        float mt = -INFINITY;
#pragma unroll
        for (int i = 0; i < NS; i++) {
            s[i] = -INFINITY;
            if (mv[i] == -INFINITY) continue;
            const int64_t kj = r4 + 4 * i;
            const float * krow = ks + kj * D;
            float dot = 0.0f;
            for (int64_t d = 0; d < D; d++) dot += qrow[(d + g) & Dm] * krow[(d + kj) & Dm];
            s[i] = (a.softcap > 0.0f ? a.softcap * tanhf(dot * a.scale / a.softcap) : dot * a.scale) + mv[i];
            mt = fmaxf(mt, s[i]);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        const float m_new = fmaxf(m, mt);
        const float corr = m_new == -INFINITY ? 1.0f : expf(m - m_new);  // 0 while m is -inf
        float p[NS], ls = 0.0f;
#pragma unroll
        for (int i = 0; i < NS; i++) {
            p[i] = s[i] == -INFINITY ? 0.0f : expf(s[i] - m_new);
            ls += p[i];
        }
        ls += __shfl_xor_sync(0xffffffffu, ls, 1);
        ls += __shfl_xor_sync(0xffffffffu, ls, 2);
        l = l * corr + ls;
        m = m_new;
#pragma unroll
        for (int i = 0; i < DV4; i++) o[i] *= corr;
        // O += P V: key kk's probability is held by thread kk % 4 of the query's four, at kk / 4
#pragma unroll
        for (int kk = 0; kk < kTileK; kk++) {
            const float pk = __shfl_sync(0xffffffffu, p[kk / 4], (lane & ~3) | (kk & 3));
            const float * vrow = vs + kk * Dv;
#pragma unroll
            for (int i = 0; i < DV4; i++) {
                const int64_t d = r4 + 4 * i;
                if (d < Dv) o[i] += pk * vrow[(d + kk) & Dvm];
            }
        }
    }
    if (!valid) return;
    const int64_t row = ((i3 * a.n_q + iq) * a.H + h) * Dv;  // [Dv, H, n_q, B]
    const bool sees = m != -INFINITY && l > 0.0f;
#pragma unroll
    for (int i = 0; i < DV4; i++) {
        const int64_t d = r4 + 4 * i;
        if (d < Dv) {
            const float v = sees ? o[i] / l : 0.0f;
            a.dst[row + d] = v;
            if (a.act.qs) ((uint16_t *) a.act.qs)[row + d] = f2h(v);  // halves for the output projection
        }
    }
}

bool pow2_upto_128(int64_t n) { return n >= 16 && n <= 128 && (n & (n - 1)) == 0; }

}  // namespace

bool ggml_cuda_flash_attn_supported(const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * mask = dst->src[3];
    if (!q || !k || !v || q->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(dst)) return false;
    // keys and values of one type: a plain float type, or a 32-value block type of a quantized cache
    const bool blocks = k->type == GGML_TYPE_Q8_0 || k->type == GGML_TYPE_Q4_0 || k->type == GGML_TYPE_Q4_1 ||
                        k->type == GGML_TYPE_Q5_0 || k->type == GGML_TYPE_Q5_1 || k->type == GGML_TYPE_IQ4_NL;
    if (k->type != v->type || !(is_float_type(k->type) || blocks)) return false;
    if (blocks && (q->ne[0] % 32 != 0 || v->ne[0] % 32 != 0)) return false;
    if (k->nb[0] != ggml_type_size(k->type) || v->nb[0] != ggml_type_size(v->type)) return false;
    if (q->ne[0] > kMaxD || v->ne[0] > kMaxD || k->ne[0] != q->ne[0] || k->ne[1] != v->ne[1] || k->ne[2] != v->ne[2]) return false;
    if (k->ne[2] == 0 || q->ne[2] % k->ne[2] != 0 || k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3]) return false;
    if (q->ne[1] > INT32_MAX || q->ne[2] > 65535 || q->ne[3] > 65535) return false;
    if (mask) {
        if (mask->type != GGML_TYPE_F32 && mask->type != GGML_TYPE_F16) return false;
        if (mask->nb[0] != ggml_type_size(mask->type) || mask->ne[0] < k->ne[1] || mask->ne[1] < q->ne[1]) return false;
        if (mask->ne[2] == 0 || mask->ne[3] == 0 || q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0) return false;
    }
    return true;
}

namespace {

// f(std::integral_constant<int, T>) for the key / value type T (the types of the kernels' KT).
template <typename F>
void fa_dispatch_type(ggml_type t, F f) {
    switch (t) {
#define FA_CASE(T) case T: f(std::integral_constant<int, T>{}); break;
        FA_CASE(GGML_TYPE_F32)
        FA_CASE(GGML_TYPE_F16)
        FA_CASE(GGML_TYPE_BF16)
        FA_CASE(GGML_TYPE_Q8_0)
        FA_CASE(GGML_TYPE_Q4_0)
        FA_CASE(GGML_TYPE_Q4_1)
        FA_CASE(GGML_TYPE_Q5_0)
        FA_CASE(GGML_TYPE_Q5_1)
        FA_CASE(GGML_TYPE_IQ4_NL)
#undef FA_CASE
        default: GGML_ABORT("flash attention on CUDA: unsupported K/V type %s", ggml_type_name(t));
    }
}

}  // namespace

void ggml_cuda_op_flash_attn_ext(ggml_cuda_ctx & ctx, ggml_tensor * dst, const ggml_tensor * product) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1];
    FaArgs a = fa_args(dst);
    if (ggml_nelements(dst) == 0) return;
    // Prompts: the output rows also as halves where the output projection multiplies in F16.
    const ggml_tensor * f16_product = product;  // written element by element: heads of any size
    if (ggml_cuda_fattn_mma_usable(ctx, dst)) {  // on tensor cores
        ggml_cuda_launch_quantizing(ctx, dst, f16_product, [&](auto, const ActArgs & act) { ggml_cuda_fattn_mma(ctx, dst, act); }, kFormF16 | kFormAnyRows);
        return;
    }
    if (a.n_q >= kTileQ / 2 && pow2_upto_128(a.D) && pow2_upto_128(a.Dv)) {  // query tiles
        const dim3 grid((unsigned int) ((a.n_q + kTileQ - 1) / kTileQ), (unsigned int) a.H, (unsigned int) q->ne[3]);
        const size_t smem = (size_t) (kTileQ * a.D + kTileK * (a.D + a.Dv)) * sizeof(float) + 16;
        ggml_cuda_launch_quantizing(ctx, dst, f16_product, [&](auto, const ActArgs & act) {
            a.act = act;
            fa_dispatch_type(k->type, [&](auto kt) {
                if (a.Dv <= 64) {
                    GGML_CUDA_LAUNCH(k_flash_attn_tiled<decltype(kt)::value GGML_COMMA 16>, grid, kTileThreads, smem, ctx.stream)(a);
                } else {
                    GGML_CUDA_LAUNCH(k_flash_attn_tiled<decltype(kt)::value GGML_COMMA 32>, grid, kTileThreads, smem, ctx.stream)(a);
                }
            });
            CUDA_CHECK_LAUNCH();
        }, kFormF16 | kFormAnyRows);
        return;
    }
    // Split-KV: with fewer rows (queries x heads) than about two blocks per SM, as in generation,
    // each row's keys are cut into ranges of at least 256 that separate blocks take, and a second
    // kernel merges the ranges' softmax statistics.
    const int64_t rows = a.n_q * a.H * q->ne[3];
    if (rows < 2 * (int64_t) ctx.n_sm && a.n_kv >= 512) {
        const int64_t want = (2 * (int64_t) ctx.n_sm + rows - 1) / rows, most = a.n_kv / 256;
        a.n_split = (int) std::min<int64_t>(std::min<int64_t>(want, most), 32);
    }
    a.chunk = ((a.n_kv + a.n_split - 1) / a.n_split + WARP - 1) / WARP * WARP;
    const size_t partial_bytes = a.n_split > 1 ? (size_t) rows * a.n_split * (2 + a.Dv) * sizeof(float) : 0;
    const dim3 grid((unsigned int) (a.n_q * a.n_split), (unsigned int) a.H, (unsigned int) q->ne[3]);
    const size_t smem = (size_t) (a.D + kWarps * (2 + a.Dv)) * sizeof(float);
    // the output projection's activations quantized by whichever kernel finishes the rows (heads
    // of whole Q8_0 units, or groups of heads making Q8_K blocks: finish_head_row; the ranges'
    // partial results in scratch after the activations)
    // (a token's heads one column of the product: query c's unit u at c * K + 32 u)
    const bool token_columns = product && a.Dv % 32 == 0 && product->src[1]->ne[0] == a.Dv * a.H;
    const bool q8_k_groups = 256 % a.Dv == 0 && ctx.group_done && rows * a.Dv / 256 <= ggml_cuda_ctx::kGroupCounters;
    a.group_done = ctx.group_done;
    ggml_cuda_launch_quantizing(ctx, dst, token_columns ? product : nullptr, [&](auto qb, const ActArgs & act) {
        a.act = act;  // qs nullptr where nothing is quantized
        a.partial = (float *) act.extra;
        fa_dispatch_type(k->type, [&](auto kt) {
            GGML_CUDA_LAUNCH(k_flash_attn<decltype(kt)::value>, grid, kWarps * WARP, smem, ctx.stream)(a);
        });
        CUDA_CHECK_LAUNCH();
        if (a.n_split > 1) {
            GGML_CUDA_LAUNCH(k_flash_attn_combine, (unsigned int) rows, 128, 0, ctx.stream)(a.dst, a.partial, a.n_split, a.Dv, a);
            CUDA_CHECK_LAUNCH();
        }
    }, kFormQ32 | kFormF16 | kFormAnyRows | (q8_k_groups ? kFormQ256 : 0u), partial_bytes);
}

// ---- backward ------------------------------------------------------------------------------
// flash_attn_back, FlashAttention-2's equations with P recomputed from the logits:
//   dP_ij = dO_i . v_j, D_i = sum_j P_ij dP_ij, dS_ij = P_ij (dP_ij - D_i) s'_ij,
//   dQ_i = sum_j dS_ij k_j, dK_j = sum_i dS_ij q_i, dV_j = sum_i P_ij dO_i,
// s' the derivative of a logit in q.k: scale, or scale (1 - tanh^2) with a softcap. Two kernels:
// one block per query row (its softmax statistics and D_i in one online pass, a key per lane, then
// dQ_i in a second), one block per key of a kv head (dK_j and dV_j over the G heads x n_q query
// rows that read it, a row per lane). Every result is written by one block, the warps' partial sums
// merged in warp order: no atomics, the same bits on every run. Many query rows take the tiled
// kernels below, or with heads of 64 or 128 on sm_80 and later fattn-mma.cu's tensor-core ones.
namespace {

template <int KT>
__global__ void __launch_bounds__(kWarps * WARP) k_flash_attn_back_rows(FaBackArgs b) {
    const FaArgs & a = b.f;
    GGML_CUDA_DYN_SMEM(float, smem);  // q [D], dO [Dv], per warp: max, sum, sum of P dP; per warp dQ [D]
    float * qs = smem;
    float * dos = qs + a.D;
    float * part = dos + a.Dv;
    float * dqp = part + 3 * kWarps;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int64_t iq = blockIdx.x, h = blockIdx.y, i3 = blockIdx.z, hk = h / a.G;

    const char * qrow = elem_ptr(a.q, 0, iq, h, i3);
    const float * dorow = b.dO + ((i3 * a.n_q + iq) * a.H + h) * a.Dv;
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) qs[d] = *(const float *) (qrow + d * a.q.nb[0]);
    for (int64_t d = threadIdx.x; d < a.Dv; d += blockDim.x) dos[d] = dorow[d];
    __syncthreads();

    const char * kbase = a.k.data + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vbase = a.v.data + hk * a.v.nb[2] + i3 * a.v.nb[3];
    const char * mrow = a.has_mask ? row_ptr(a.mask, iq, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const int mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;
    const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);

    // Pass 1: max m, sum l of e^(s - m) and u = sum e^(s - m) dP, online over the warp's keys.
    float m = -INFINITY, l = 0.0f, u = 0.0f;
    for (int64_t j0 = (int64_t) warp * WARP; j0 < a.n_kv; j0 += (int64_t) kWarps * WARP) {
        const int64_t j = j0 + lane;
        float s = -INFINITY, dp = 0.0f;
        if (j < a.n_kv) {
            const float mv = mrow ? slope * load_f(mrow + j * mes, a.mask.type) : 0.0f;
            if (mv != -INFINITY) {
                s = fa_logit(a, key_dot<KT>(qs, kbase + j * a.k.nb[1], a.D, a.k_vec != 0), mv).s;
                dp = key_dot<KT>(dos, vbase + j * a.v.nb[1], a.Dv, b.v_vec != 0);
            }
        }
        const float mb = warp_max(s);
        if (mb == -INFINITY) continue;  // uniform across the warp
        const float m_new = fmaxf(m, mb);
        const float corr = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * corr + warp_sum(p);
        u = u * corr + warp_sum(p * dp);
        m = m_new;
    }
    if (lane == 0) {
        part[3 * warp] = m;
        part[3 * warp + 1] = l;
        part[3 * warp + 2] = u;
    }
    __syncthreads();
    float M = -INFINITY, L = 0.0f, U = 0.0f;
    for (int w = 0; w < kWarps; w++) M = fmaxf(M, part[3 * w]);
    for (int w = 0; w < kWarps; w++) {
        if (part[3 * w] == -INFINITY) continue;
        const float c = expf(part[3 * w] - M);
        L += part[3 * w + 1] * c;
        U += part[3 * w + 2] * c;
    }
    const bool sees = M != -INFINITY && L > 0.0f;  // a row that sees no key has zero gradients
    const float inv_l = sees ? 1.0f / L : 0.0f, Di = sees ? U / L : 0.0f;

    // Pass 2: dQ = sum_j dS_j k_j, lanes along D.
    constexpr int NA = kMaxD / WARP;
    float acc[NA];
#pragma unroll
    for (int t = 0; t < NA; t++) acc[t] = 0.0f;
    for (int64_t j0 = (int64_t) warp * WARP; sees && j0 < a.n_kv; j0 += (int64_t) kWarps * WARP) {
        const int64_t j = j0 + lane;
        float ds = 0.0f;
        if (j < a.n_kv) {
            const float mv = mrow ? slope * load_f(mrow + j * mes, a.mask.type) : 0.0f;
            if (mv != -INFINITY) {
                const Logit lg = fa_logit(a, key_dot<KT>(qs, kbase + j * a.k.nb[1], a.D, a.k_vec != 0), mv);
                const float dp = key_dot<KT>(dos, vbase + j * a.v.nb[1], a.Dv, b.v_vec != 0);
                ds = expf(lg.s - M) * inv_l * (dp - Di) * lg.ds;
            }
        }
        const int nk = a.n_kv - j0 < WARP ? (int) (a.n_kv - j0) : WARP;
        for (int jj = 0; jj < nk; jj++) {
            const float dsj = __shfl_sync(0xffffffffu, ds, jj);
            if (dsj == 0.0f) continue;  // uniform: every lane got the same value
            add_weighted_row<KT>(acc, dsj, kbase + (j0 + jj) * a.k.nb[1], a.D, lane);
        }
    }
#pragma unroll
    for (int t = 0; t < NA; t++) {
        const int64_t d = lane + WARP * t;
        if (d < a.D) dqp[warp * a.D + d] = acc[t];
    }
    __syncthreads();
    float * dq = b.dq + ((i3 * a.H + h) * a.n_q + iq) * a.D;  // dQ has q's shape, contiguous
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < kWarps; w++) o += dqp[w * a.D + d];
        dq[d] = o;
    }
    if (threadIdx.x == 0) {
        float * st = b.stats + ((i3 * a.H + h) * a.n_q + iq) * 3;
        st[0] = sees ? M : -INFINITY;
        st[1] = inv_l;
        st[2] = Di;
    }
}

template <int KT>
__global__ void __launch_bounds__(kWarps * WARP) k_flash_attn_back_keys(FaBackArgs b) {
    const FaArgs & a = b.f;
    GGML_CUDA_DYN_SMEM(float, smem);  // k_j [D], v_j [Dv], per warp dK [D] and dV [Dv]
    float * ks = smem;
    float * vs = ks + a.D;
    float * dkp = vs + a.Dv;
    float * dvp = dkp + kWarps * a.D;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int64_t j = blockIdx.x, hk = blockIdx.y, i3 = blockIdx.z;

    const char * kr = a.k.data + j * a.k.nb[1] + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vr = a.v.data + j * a.v.nb[1] + hk * a.v.nb[2] + i3 * a.v.nb[3];
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) ks[d] = kv_load<KT>(kr, d);
    for (int64_t d = threadIdx.x; d < a.Dv; d += blockDim.x) vs[d] = kv_load<KT>(vr, d);
    __syncthreads();
    const int mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;

    constexpr int NA = kMaxD / WARP;
    float acck[NA], accv[NA];
#pragma unroll
    for (int t = 0; t < NA; t++) acck[t] = accv[t] = 0.0f;
    // The query rows that read key j: r = g * n_q + iq for the G heads h = hk * G + g.
    const int64_t n_rows = a.G * a.n_q;
    for (int64_t r0 = (int64_t) warp * WARP; r0 < n_rows; r0 += (int64_t) kWarps * WARP) {
        const int64_t r = r0 + lane;
        float p = 0.0f, ds = 0.0f;
        if (r < n_rows) {
            const int64_t iq = r % a.n_q, h = hk * a.G + r / a.n_q;
            const float * st = fa_stats(b, iq, h, i3);
            float mv = 0.0f;
            if (a.has_mask) {
                const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);
                mv = slope * load_f(row_ptr(a.mask, iq, h % a.mask.ne[2], i3 % a.mask.ne[3]) + j * mes, a.mask.type);
            }
            if (st[0] != -INFINITY && mv != -INFINITY) {
                const Logit lg = fa_logit(a, key_dot<GGML_TYPE_F32>(ks, elem_ptr(a.q, 0, iq, h, i3), a.D, b.q_vec != 0), mv);
                const float dp = key_dot<GGML_TYPE_F32>(vs, (const char *) (b.dO + ((i3 * a.n_q + iq) * a.H + h) * a.Dv), a.Dv,
                                                        b.do_vec != 0);
                p = expf(lg.s - st[0]) * st[1];
                ds = p * (dp - st[2]) * lg.ds;
            }
        }
        const int nr = n_rows - r0 < WARP ? (int) (n_rows - r0) : WARP;
        for (int rr = 0; rr < nr; rr++) {
            const float pr = __shfl_sync(0xffffffffu, p, rr);
            const float dsr = __shfl_sync(0xffffffffu, ds, rr);
            if (pr == 0.0f && dsr == 0.0f) continue;  // uniform
            const int64_t iq = (r0 + rr) % a.n_q, h = hk * a.G + (r0 + rr) / a.n_q;
            const float * qrow = (const float *) elem_ptr(a.q, 0, iq, h, i3);
            const float * dorow = b.dO + ((i3 * a.n_q + iq) * a.H + h) * a.Dv;
#pragma unroll
            for (int t = 0; t < NA; t++) {
                const int64_t d = lane + WARP * t;
                if (d < a.D) acck[t] += dsr * qrow[d];
                if (d < a.Dv) accv[t] += pr * dorow[d];
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NA; t++) {
        const int64_t d = lane + WARP * t;
        if (d < a.D) dkp[warp * a.D + d] = acck[t];
        if (d < a.Dv) dvp[warp * a.Dv + d] = accv[t];
    }
    __syncthreads();
    const int64_t row = (i3 * a.k.ne[2] + hk) * a.n_kv + j;  // dK, dV have k's and v's shapes, contiguous
    for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < kWarps; w++) o += dkp[w * a.D + d];
        b.dk[row * a.D + d] = o;
    }
    for (int64_t d = threadIdx.x; d < a.Dv; d += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < kWarps; w++) o += dvp[w * a.Dv + d];
        b.dv[row * a.Dv + d] = o;
    }
}

// ---- the gradient in tiles (training: many query rows) --------------------------------------
// The kernels above read every key and value row once per query row, and every query and dO row
// once per key. Here a block of kBackTile query rows (one head) walks the keys in tiles that sit
// in shared memory, and a block of kBackTile keys (one kv head) walks the query rows of its G
// heads in tiles likewise. TPR threads share a row (or key), 4 for heads up to 64, 8 up to 128:
// each holds kBackPart of its elements in registers (r, r + TPR, ...) and accumulates those of
// the gradient row; they add their partial dot products by shuffles (a butterfly), which leaves
// the same sum, bit for bit, in all of them, so each keeps the row's softmax statistics itself.
// A tile's mask values (with the rows that see nothing as masked) are read once into shared
// memory, where the block's vote on the tile reads them; tiles that every row of the block has
// masked are skipped (a causal mask: half). Still no atomics: one block writes each result.
constexpr int kBackTile = 32, kBackPart = 16;
constexpr int kMaskStride = kBackTile + 1;  // the tiles' mask values a row apart: other banks

// The sum of v over the TPR threads of a row (every lane of the warp calls it).
template <int TPR>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int o = 1; o < TPR; o *= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// x . row over n elements, x the thread's part (elements r + TPR i) of the other row.
template <int TPR>
__device__ __forceinline__ float part_dot(const float (&x)[kBackPart], const float * row, int r, int64_t n) {
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kBackPart; i++) {
        const int64_t d = r + TPR * i;
        if (d < n) dot += x[i] * row[d];
    }
    return group_sum<TPR>(dot);
}

// The calling row's (or key's) slice of a tile of mask values into its row of ms_row (its TPR
// threads, TPR apart; mask_of(base + i) gives value i), then whether any thread of the block saw
// a value above -inf: the same answer in every thread, with the tile written. Every thread
// calls it, after the previous tile's last reads of ms.
template <int TPR, typename F>
__device__ __forceinline__ bool mask_tile_visible(float * ms_row, int part, int64_t base, F mask_of) {
    bool vis = false;
    for (int i = part; i < kBackTile; i += TPR) {
        ms_row[i] = mask_of(base + i);
        vis = vis || ms_row[i] != -INFINITY;
    }
    return __syncthreads_or(vis) != 0;
}

// dQ and the rows' statistics: pass 0 the max, the sum of e^(s - max) and of e^(s - max) dP
// (online), pass 1 dQ.
template <int KT, int TPR>  // TPR: threads a row, max(D, Dv) <= TPR * kBackPart
__global__ void __launch_bounds__(kBackTile * TPR, 16 / TPR) k_flash_attn_back_rows_tiled(FaBackArgs b) {
    const FaArgs & a = b.f;
    GGML_CUDA_DYN_SMEM(float, smem);
    float * ks = smem;                  // [kBackTile][D]
    float * vs = ks + kBackTile * a.D;  // [kBackTile][Dv]
    float * ms = vs + kBackTile * a.Dv; // [kBackTile rows][kMaskStride]: the tile's mask values
    constexpr int NT = kBackTile * TPR;
    const int t = threadIdx.x, part = t % TPR;
    const int64_t iq = (int64_t) blockIdx.x * kBackTile + t / TPR, h = blockIdx.y, i3 = blockIdx.z, hk = h / a.G;
    const bool valid = iq < a.n_q;
    const float * dorow = b.dO + ((i3 * a.n_q + iq) * a.H + h) * a.Dv;
    float qr[kBackPart], dor[kBackPart], dq[kBackPart];
#pragma unroll
    for (int i = 0; i < kBackPart; i++) {
        const int64_t d = part + TPR * i;
        qr[i] = valid && d < a.D ? *(const float *) elem_ptr(a.q, d, iq, h, i3) : 0.0f;
        dor[i] = valid && d < a.Dv ? dorow[d] : 0.0f;
        dq[i] = 0.0f;
    }
    const char * kbase = a.k.data + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vbase = a.v.data + hk * a.v.nb[2] + i3 * a.v.nb[3];
    const char * mrow = a.has_mask && valid ? row_ptr(a.mask, iq, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
    const int mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;
    const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);
    auto mask_of = [&](int64_t j) { return !valid || j >= a.n_kv ? -INFINITY : mrow ? slope * load_f(mrow + j * mes, a.mask.type) : 0.0f; };

    float m = -INFINITY, l = 0.0f, u = 0.0f, inv_l = 0.0f, Di = 0.0f;
    bool sees = false;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t k0 = 0; k0 < a.n_kv; k0 += kBackTile) {
            // the row's mask values, read by its TPR threads
            if (!mask_tile_visible<TPR>(ms + (t / TPR) * kMaskStride, part, k0, mask_of)) continue;
            for (int64_t e = t; e < kBackTile * a.D; e += NT) {
                const int64_t r = e / a.D, d = e % a.D;
                ks[e] = k0 + r < a.n_kv ? kv_load<KT>(kbase + (k0 + r) * a.k.nb[1], d) : 0.0f;
            }
            for (int64_t e = t; e < kBackTile * a.Dv; e += NT) {
                const int64_t r = e / a.Dv, d = e % a.Dv;
                vs[e] = k0 + r < a.n_kv ? kv_load<KT>(vbase + (k0 + r) * a.v.nb[1], d) : 0.0f;
            }
            __syncthreads();
            for (int kk = 0; kk < kBackTile; kk++) {
                const float dot = part_dot<TPR>(qr, ks + kk * a.D, part, a.D);  // every lane: shuffles
                const float dp = part_dot<TPR>(dor, vs + kk * a.Dv, part, a.Dv);
                const float mv = ms[(t / TPR) * kMaskStride + kk];
                if (mv == -INFINITY) continue;
                const Logit lg = fa_logit(a, dot, mv);
                if (pass == 0) {
                    if (lg.s > m) {
                        const float c = expf(m - lg.s);  // 0 while m is -inf
                        l *= c;
                        u *= c;
                        m = lg.s;
                    }
                    const float p = expf(lg.s - m);
                    l += p;
                    u += p * dp;
                } else if (sees) {
                    const float ds = expf(lg.s - m) * inv_l * (dp - Di) * lg.ds;
                    const float * krow = ks + kk * a.D;
#pragma unroll
                    for (int i = 0; i < kBackPart; i++) {
                        const int64_t d = part + TPR * i;
                        if (d < a.D) dq[i] += ds * krow[d];
                    }
                }
            }
            __syncthreads();  // the tile is read before the next one overwrites it
        }
        if (pass == 0) {
            sees = m != -INFINITY && l > 0.0f;  // a row that sees no key has zero gradients
            inv_l = sees ? 1.0f / l : 0.0f;
            Di = sees ? u / l : 0.0f;
            if (valid && part == 0) {
                float * st = b.stats + ((i3 * a.H + h) * a.n_q + iq) * 3;
                st[0] = sees ? m : -INFINITY;
                st[1] = inv_l;
                st[2] = Di;
            }
        }
    }
    if (!valid) return;
    float * dqrow = b.dq + ((i3 * a.H + h) * a.n_q + iq) * a.D;  // dQ has q's shape, contiguous
#pragma unroll
    for (int i = 0; i < kBackPart; i++) {
        const int64_t d = part + TPR * i;
        if (d < a.D) dqrow[d] = dq[i];
    }
}

// dK and dV of kBackTile keys of one kv head over the query rows r = g * n_q + iq of its G heads
// (the rows' statistics from k_flash_attn_back_rows_tiled).
template <int KT, int TPR>
__global__ void __launch_bounds__(kBackTile * TPR, 16 / TPR) k_flash_attn_back_keys_tiled(FaBackArgs b) {
    const FaArgs & a = b.f;
    GGML_CUDA_DYN_SMEM(float, smem);
    float * qs = smem;                    // [kBackTile][D]
    float * dos = qs + kBackTile * a.D;   // [kBackTile][Dv]
    float * sts = dos + kBackTile * a.Dv; // [kBackTile][3]: max, 1 / sum, D
    float * ms = sts + 3 * kBackTile;     // [kBackTile keys][kMaskStride]: the tile's mask values
    constexpr int NT = kBackTile * TPR;
    const int t = threadIdx.x, part = t % TPR;
    const int64_t j = (int64_t) blockIdx.x * kBackTile + t / TPR, hk = blockIdx.y, i3 = blockIdx.z;
    const bool valid = j < a.n_kv;
    const char * kr = a.k.data + j * a.k.nb[1] + hk * a.k.nb[2] + i3 * a.k.nb[3];
    const char * vr = a.v.data + j * a.v.nb[1] + hk * a.v.nb[2] + i3 * a.v.nb[3];
    float kq[kBackPart], vq[kBackPart], dk[kBackPart], dv[kBackPart];
#pragma unroll
    for (int i = 0; i < kBackPart; i++) {
        const int64_t d = part + TPR * i;
        kq[i] = valid && d < a.D ? kv_load<KT>(kr, d) : 0.0f;
        vq[i] = valid && d < a.Dv ? kv_load<KT>(vr, d) : 0.0f;
        dk[i] = dv[i] = 0.0f;
    }
    const int mes = a.mask.type == GGML_TYPE_F16 ? 2 : 4;
    const int64_t n_rows = a.G * a.n_q;
    // key j's mask value in row r (-inf where the row does not see it or sees nothing at all)
    auto mask_of = [&](int64_t r) {
        if (!valid || r >= n_rows) return -INFINITY;
        const int64_t iq = r % a.n_q, h = hk * a.G + r / a.n_q;
        if (fa_stats(b, iq, h, i3)[0] == -INFINITY) return -INFINITY;
        if (!a.has_mask) return 0.0f;
        const float slope = alibi_slope((uint32_t) h, (uint32_t) a.H, a.max_bias);
        return slope * load_f(row_ptr(a.mask, iq, h % a.mask.ne[2], i3 % a.mask.ne[3]) + j * mes, a.mask.type);
    };

    for (int64_t r0 = 0; r0 < n_rows; r0 += kBackTile) {
        // the key's mask values in the tile's rows, read by its TPR threads
        if (!mask_tile_visible<TPR>(ms + (t / TPR) * kMaskStride, part, r0, mask_of)) continue;
        for (int64_t e = t; e < kBackTile * a.D; e += NT) {
            const int64_t r = r0 + e / a.D, d = e % a.D;
            qs[e] = r < n_rows ? *(const float *) elem_ptr(a.q, d, r % a.n_q, hk * a.G + r / a.n_q, i3) : 0.0f;
        }
        for (int64_t e = t; e < kBackTile * a.Dv; e += NT) {
            const int64_t r = r0 + e / a.Dv, d = e % a.Dv;
            dos[e] = r < n_rows ? b.dO[((i3 * a.n_q + r % a.n_q) * a.H + hk * a.G + r / a.n_q) * a.Dv + d] : 0.0f;
        }
        if (t < kBackTile) {
            const int64_t r = r0 + t;
            const float * st = r < n_rows ? fa_stats(b, r % a.n_q, hk * a.G + r / a.n_q, i3) : nullptr;
            sts[3 * t] = st ? st[0] : -INFINITY;
            sts[3 * t + 1] = st ? st[1] : 0.0f;
            sts[3 * t + 2] = st ? st[2] : 0.0f;
        }
        __syncthreads();
        for (int rr = 0; rr < kBackTile; rr++) {
            const float * qrow = qs + rr * a.D, * dorow = dos + rr * a.Dv;
            const float dot = part_dot<TPR>(kq, qrow, part, a.D);  // every lane: shuffles
            const float dp = part_dot<TPR>(vq, dorow, part, a.Dv);
            const float mv = ms[(t / TPR) * kMaskStride + rr];
            if (mv == -INFINITY) continue;
            const Logit lg = fa_logit(a, dot, mv);
            const float p = expf(lg.s - sts[3 * rr]) * sts[3 * rr + 1];
            const float ds = p * (dp - sts[3 * rr + 2]) * lg.ds;
#pragma unroll
            for (int i = 0; i < kBackPart; i++) {
                const int64_t d = part + TPR * i;
                if (d < a.D) dk[i] += ds * qrow[d];
                if (d < a.Dv) dv[i] += p * dorow[d];
            }
        }
        __syncthreads();  // the tile is read before the next one overwrites it
    }
    if (!valid) return;
    const int64_t row = (i3 * a.k.ne[2] + hk) * a.n_kv + j;  // dK, dV have k's and v's shapes, contiguous
#pragma unroll
    for (int i = 0; i < kBackPart; i++) {
        const int64_t d = part + TPR * i;
        if (d < a.D) b.dk[row * a.D + d] = dk[i];
        if (d < a.Dv) b.dv[row * a.Dv + d] = dv[i];
    }
}

}  // namespace

bool ggml_cuda_flash_attn_back_supported(const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0], * grad = dst->src[4];
    // the forward's operands, q rows of contiguous floats (read directly by the key blocks)
    return ggml_cuda_flash_attn_supported(dst) && q->nb[0] == sizeof(float) && grad && grad->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(grad) && q->ne[1] <= INT32_MAX && dst->src[1]->ne[1] <= INT32_MAX;
}

void ggml_cuda_op_flash_attn_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * grad = dst->src[4];
    FaBackArgs b;
    b.f = fa_args(dst);
    const FaArgs & a = b.f;
    b.dO = (const float *) grad->data;
    b.dq = (float *) dst->data;
    b.dk = b.dq + ggml_nelements(q);
    b.dv = b.dk + ggml_nelements(k);
    b.q_vec = rows_vec(q, a.D);
    b.v_vec = rows_vec(v, a.Dv);
    b.do_vec = rows_vec(grad, a.Dv);
    if (ggml_nelements(dst) == 0) return;
    if (ggml_cuda_fattn_back_mma(ctx, dst, b)) return;  // on tensor cores (fattn-mma.cu)
    const int64_t rows = a.n_q * a.H * q->ne[3];
    b.stats = (float *) ctx.scratch((size_t) std::max<int64_t>(rows, 1) * 3 * sizeof(float));
    const dim3 grid_rows((unsigned int) a.n_q, (unsigned int) a.H, (unsigned int) q->ne[3]);
    const dim3 grid_keys((unsigned int) a.n_kv, (unsigned int) k->ne[2], (unsigned int) q->ne[3]);
    const size_t smem_rows = (size_t) (a.D + a.Dv + 3 * kWarps + kWarps * a.D) * sizeof(float);
    const size_t smem_keys = (size_t) (a.D + a.Dv + kWarps * (a.D + a.Dv)) * sizeof(float);
    // Many query rows of a float cache, heads up to 128: the tiled kernels.
    if (a.n_q >= kBackTile / 2 && std::max(a.D, a.Dv) <= 8 * kBackPart && is_float_type(k->type)) {
        const dim3 grid_q((unsigned int) ((a.n_q + kBackTile - 1) / kBackTile), (unsigned int) a.H, (unsigned int) q->ne[3]);
        const dim3 grid_k((unsigned int) ((a.n_kv + kBackTile - 1) / kBackTile), (unsigned int) k->ne[2], (unsigned int) q->ne[3]);
        const size_t smem_q = (size_t) kBackTile * (a.D + a.Dv + kMaskStride) * sizeof(float) + 16;
        const size_t smem_k = (size_t) kBackTile * (a.D + a.Dv + 3 + kMaskStride) * sizeof(float) + 16;
        auto launch = [&](auto kt, auto tpr) {
            constexpr int KT = decltype(kt)::value, TPR = decltype(tpr)::value;
            GGML_CUDA_LAUNCH(k_flash_attn_back_rows_tiled<KT GGML_COMMA TPR>, grid_q, kBackTile * TPR, smem_q, ctx.stream)(b);
            CUDA_CHECK_LAUNCH();
            if (a.n_kv > 0) {
                GGML_CUDA_LAUNCH(k_flash_attn_back_keys_tiled<KT GGML_COMMA TPR>, grid_k, kBackTile * TPR, smem_k, ctx.stream)(b);
                CUDA_CHECK_LAUNCH();
            }
        };
        auto by_width = [&](auto kt) {
            if (std::max(a.D, a.Dv) <= 4 * kBackPart) launch(kt, std::integral_constant<int, 4>{});
            else launch(kt, std::integral_constant<int, 8>{});
        };
        switch (k->type) {
            case GGML_TYPE_F32: by_width(std::integral_constant<int, GGML_TYPE_F32>{}); break;
            case GGML_TYPE_F16: by_width(std::integral_constant<int, GGML_TYPE_F16>{}); break;
            default: by_width(std::integral_constant<int, GGML_TYPE_BF16>{}); break;
        }
        return;
    }
    fa_dispatch_type(k->type, [&](auto kt) {
        if (rows > 0) {
            GGML_CUDA_LAUNCH(k_flash_attn_back_rows<decltype(kt)::value>, grid_rows, kWarps * WARP, smem_rows, ctx.stream)(b);
            CUDA_CHECK_LAUNCH();
        }
        if (a.n_kv > 0 && k->ne[2] > 0) {
            GGML_CUDA_LAUNCH(k_flash_attn_back_keys<decltype(kt)::value>, grid_keys, kWarps * WARP, smem_keys, ctx.stream)(b);
            CUDA_CHECK_LAUNCH();
        }
    });
}
