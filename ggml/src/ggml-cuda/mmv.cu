// mmv.cu - matrix products read straight from a's stored rows: mul_mat(a, b) with few columns
// of b for plain float a (generation, memory-bound on a's bytes), and with any number of
// columns for quantized a (GGUF blocks read directly, never dequantized to memory; b quantized
// to 8 bits first, as the CPU does). One warp per row (or per few rows) of a: lane l takes
// units (32 values) l, l + 32, ... of the row, decodes each into registers once and multiplies
// it with every column of b; the warp's partial sums are then reduced with shuffles. Planes
// broadcast as the CPU's mul_mat (b->ne[2] a multiple of a->ne[2], same for dim 3).
// mul_mat_id (a mixture's experts) runs the same kernels with a plane per (slot, token): the
// plane of a is the expert ids names, so only the chosen experts' rows are read. A prompt's
// planes go by expert instead (k_moe_groups, then k_mmvq_groups: the grouped product, each
// expert's rows read once per 8 of its columns, not once per column).
#include "ops.cuh"
#include "quant.cuh"

namespace {

constexpr int kWarpsPerBlock = 4;  // rows of a per block

struct MmvArgs {
    const char * a;
    int64_t a_nb1, a_nb2, a_nb3;
    const char * b;
    int64_t b_nb1, b_nb2, b_nb3;
    char * d;
    int64_t d_nb1, d_nb2, d_nb3;
    int64_t M, K, N, ne12, r2, r3;  // r2, r3: planes of b per plane of a
    int b_vec4;                     // b's rows are 16-byte aligned: float4 loads
    int L;                          // lanes per row of a: 32, or fewer for short rows (a warp then takes 32 / L rows)
    // mul_mat_id: plane (i12, i13) = (slot, token) takes a's plane ids[i12, i13] (nullptr: mul_mat)
    const char * ids;
    int64_t ids_nb0, ids_nb1;
    int64_t z0;                     // the first plane of this launch (grids hold at most 65535)
};

// The offset of plane (i12, i13)'s matrix in a: broadcast as mul_mat's planes, or the expert
// ids names for mul_mat_id.
template <typename P>
__device__ __forceinline__ int64_t a_plane(const P & p, int64_t i12, int64_t i13) {
    if (p.ids) return (int64_t) *(const int32_t *) (p.ids + i12 * p.ids_nb0 + i13 * p.ids_nb1) * p.a_nb2;
    return (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
}

// b's value as the CPU multiplies it with a row of type T: rounded to F16 / BF16 for those rows
// (their vec_dot_type), as it is for F32 rows. Attention's products in generation (an F16 cache)
// then see the CPU's values, and the next layer's 8-bit activations round the same way.
template <int T>
__device__ __forceinline__ float round_b(float x) {
    if constexpr (T == GGML_TYPE_F16) return h2f(f2h(x));
    if constexpr (T == GGML_TYPE_BF16) return bf2f(f2bf(x));
    return x;
}

// NC: columns of b per block (1 for generation: fewer registers, more loads in flight).
template <int T, int NC>
__global__ void __launch_bounds__(WARP * kWarpsPerBlock) k_mmv(MmvArgs p) {
    const int lane = threadIdx.x % WARP, li = lane % p.L;
    const int64_t m0 = ((int64_t) blockIdx.x * kWarpsPerBlock + threadIdx.x / WARP) * (WARP / p.L);
    if (m0 >= p.M) return;  // whole warps leave: the shuffles below see full warps
    const int64_t m = m0 + lane / p.L;
    const bool active = m < p.M;
    const int64_t z = p.z0 + blockIdx.z, i12 = z % p.ne12, i13 = z / p.ne12;
    const int64_t n0 = (int64_t) blockIdx.y * NC;
    const char * arow = p.a + (active ? m : m0) * p.a_nb1 + a_plane(p, i12, i13);
    const char * bbase = p.b + i12 * p.b_nb2 + i13 * p.b_nb3;

    float s[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) s[c] = 0.0f;

    const int64_t units = active ? p.K / 32 : 0;
    for (int64_t u = li; u < units; u += p.L) {
        float v[32];
        dequant_unit<T>(arow, u, v);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (n0 + c >= p.N) break;
            const float * bp = (const float *) (bbase + (n0 + c) * p.b_nb1) + 32 * u;
            float acc = 0.0f;
            if (p.b_vec4) {
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const float4 bv = ((const float4 *) bp)[k];
                    acc += v[4 * k] * round_b<T>(bv.x) + v[4 * k + 1] * round_b<T>(bv.y) + v[4 * k + 2] * round_b<T>(bv.z) +
                           v[4 * k + 3] * round_b<T>(bv.w);
                }
            } else {
#pragma unroll
                for (int l = 0; l < 32; l++) acc += v[l] * round_b<T>(bp[l]);
            }
            s[c] += acc;
        }
    }
    // plain float rows whose length is not a multiple of 32: the tail, an element per lane of the row
    if constexpr (T == GGML_TYPE_F32 || T == GGML_TYPE_F16 || T == GGML_TYPE_BF16) {
        for (int64_t j = (p.K / 32) * 32 + li; active && j < p.K; j += p.L) {
            const float av = load_f(arow + j * (T == GGML_TYPE_F32 ? 4 : 2), T);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (n0 + c >= p.N) break;
                s[c] += av * round_b<T>(((const float *) (bbase + (n0 + c) * p.b_nb1))[j]);
            }
        }
    }
#pragma unroll
    for (int c = 0; c < NC; c++) {
        if (n0 + c >= p.N) break;  // uniform across the warp
        float r = s[c];
        for (int o = p.L / 2; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);  // within each row's lanes
        if (active && li == 0) *(float *) (p.d + m * 4 + (n0 + c) * p.d_nb1 + i12 * p.d_nb2 + i13 * p.d_nb3) = r;
    }
}


// ---- quantized weights: 8-bit activations and integer products (quant.cuh's int_unit) ------------

template <int BS>
__global__ void __launch_bounds__(256) k_quantize_act(ActArgs p) {
    const int64_t g = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t upc = p.K / 32, c = g / upc, u = g % upc;
    const bool active = g < p.n_units;
    const int64_t n = c % p.N, i12 = (c / p.N) % p.ne12, i13 = c / (p.N * p.ne12);
    float x[32];
    load_unit(active ? (const float *) (p.b + n * p.b_nb1 + i12 * p.b_nb2 + i13 * p.b_nb3) + 32 * u : nullptr, active, x);
    quantize_unit<BS>(x, u, active, p.qs + c * p.K + 32 * u, p.ds + g);
}

struct MmvqArgs {
    const char * a;
    int64_t a_nb1, a_nb2, a_nb3;
    const int8_t * qs;  // k_quantize_act's output
    const float4 * ds;
    char * d;
    int64_t d_nb1, d_nb2, d_nb3;
    int64_t M, K, N, ne12, r2, r3;
    int L;  // lanes per row group: 32, or fewer for short rows
    // mul_mat_id, as MmvArgs; b's column of plane (slot, token) is slot % n_b1 + n_b1 * token
    const char * ids;
    int64_t ids_nb0, ids_nb1, n_b1;
    int64_t z0;
    // mul_mat_id by expert (prompts): k_moe_groups' groups, and how many it made
    const int32_t * groups;
    const int32_t * n_groups;
};

// mul_mat_id by expert: a group is up to kGroupCols (slot, token) planes that chose one expert,
// [expert, count, plane 0, plane 1, ...] (plane = slot + n_used * token), kGroupInts ints.
constexpr int kGroupCols = 8;
constexpr int kGroupInts = 2 + kGroupCols;

// The columns a block of the integer products multiplies, and where their results go.
// mul_mat's (and mul_mat_id's one-plane-per-column): NC columns of b from blockIdx.y * NC, of
// plane blockIdx.z (+ z0).
struct PlaneCols {
    int64_t n0, c0, i12, i13, plane;
    __device__ __forceinline__ PlaneCols(const MmvqArgs & p, int NC) {
        const int64_t z = p.z0 + blockIdx.z;
        i12 = z % p.ne12;
        i13 = z / p.ne12;
        n0 = (int64_t) blockIdx.y * NC;
        c0 = p.ids ? i12 % p.n_b1 + p.n_b1 * i13 : n0 + p.N * (i12 + p.ne12 * i13);
        plane = a_plane(p, i12, i13);
    }
    __device__ __forceinline__ bool valid() const { return true; }
    __device__ __forceinline__ bool has(const MmvqArgs & p, int c) const { return n0 + c < p.N; }
    __device__ __forceinline__ int64_t act(const MmvqArgs &, int c) const { return c0 + c; }
    __device__ __forceinline__ float * dst(const MmvqArgs & p, int c, int64_t m) const {
        return (float *) (p.d + m * 4 + (n0 + c) * p.d_nb1 + i12 * p.d_nb2 + i13 * p.d_nb3);
    }
};

// mul_mat_id by expert: group blockIdx.y (+ z0) of k_moe_groups' list, its expert's rows
// against each of its planes' columns (none past the groups made).
struct GroupCols {
    const int32_t * g;
    int n;
    int64_t plane;
    __device__ __forceinline__ GroupCols(const MmvqArgs & p, int) {
        const int64_t gi = p.z0 + blockIdx.y;
        n = gi < *p.n_groups ? 1 : 0;
        g = p.groups + gi * kGroupInts;
        if (n) {
            n = g[1];
            plane = (int64_t) g[0] * p.a_nb2;
        } else {
            plane = 0;
        }
    }
    __device__ __forceinline__ bool valid() const { return n > 0; }
    __device__ __forceinline__ bool has(const MmvqArgs &, int c) const { return c < n; }
    __device__ __forceinline__ int64_t act(const MmvqArgs & p, int c) const {
        const int64_t z = g[2 + c], slot = z % p.ne12, tok = z / p.ne12;
        return slot % p.n_b1 + p.n_b1 * tok;
    }
    __device__ __forceinline__ float * dst(const MmvqArgs & p, int c, int64_t m) const {
        const int64_t z = g[2 + c], slot = z % p.ne12, tok = z / p.ne12;
        return (float *) (p.d + m * 4 + slot * p.d_nb2 + tok * p.d_nb3);
    }
};

// R rows of a per lane group (each column of b read once for R rows), NC columns per block; bx:
// the block's index along the rows of a.
template <int T, int R, int NC, typename Cols = PlaneCols>
__device__ __forceinline__ void mmvq_block(const MmvqArgs & p, int64_t bx) {
    const int lane = threadIdx.x % WARP, li = lane % p.L;
    const int64_t m0 = (bx * kWarpsPerBlock + threadIdx.x / WARP) * (WARP / p.L) * R;
    if (m0 >= p.M) return;  // whole warps leave: the shuffles below see full warps
    const Cols cols(p, NC);
    if (!cols.valid()) return;  // (the whole block)
    const int64_t mg = m0 + (lane / p.L) * R;  // this lane group's first row
    const int64_t upc = p.K / 32;
    const int64_t plane = cols.plane;
    const char * arow[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int64_t m = mg + r < p.M ? mg + r : p.M - 1;  // rows past the end compute row M - 1, unstored
        arow[r] = p.a + m * p.a_nb1 + plane;
    }

    float s[R][NC];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < NC; c++) s[r][c] = 0.0f;

    const int64_t units = mg < p.M ? upc : 0;
#pragma unroll 2  // two units' loads in flight per lane (generation reads a row in 2-6 units per lane)
    for (int64_t u = li; u < units; u += p.L) {
        int_unit_t w[R];
#pragma unroll
        for (int r = 0; r < R; r++) int_unit<T>(arow[r], u, w[r]);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (!cols.has(p, c)) break;
            const int64_t col = cols.act(p, c);
            const int4 * bp = (const int4 *) (p.qs + col * p.K + 32 * u);
            const int4 b0 = bp[0], b1 = bp[1];
            const float4 ds = p.ds[col * upc + u];
#pragma unroll
            for (int r = 0; r < R; r++) {
                int lo = dp4a(w[r].q[0], b0.x, 0);
                lo = dp4a(w[r].q[1], b0.y, lo);
                lo = dp4a(w[r].q[2], b0.z, lo);
                lo = dp4a(w[r].q[3], b0.w, lo);
                int hi = dp4a(w[r].q[4], b1.x, 0);
                hi = dp4a(w[r].q[5], b1.y, hi);
                hi = dp4a(w[r].q[6], b1.z, hi);
                hi = dp4a(w[r].q[7], b1.w, hi);
                s[r][c] += unit_dot<T>(w[r], lo, hi, ds);
            }
        }
    }
#pragma unroll
    for (int c = 0; c < NC; c++) {
        if (!cols.has(p, c)) break;  // uniform across the warp
#pragma unroll
        for (int r = 0; r < R; r++) {
            float v = s[r][c];
            for (int o = p.L / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);  // within each group's lanes
            if (li == 0 && mg + r < p.M) *cols.dst(p, c, mg + r) = v;
        }
    }
}

template <int T, int R, int NC>
__global__ void __launch_bounds__(WARP * kWarpsPerBlock) k_mmvq(MmvqArgs p) {
    mmvq_block<T, R, NC>(p, blockIdx.x);
}

template <int T>
__global__ void __launch_bounds__(WARP * kWarpsPerBlock) k_mmvq_groups(MmvqArgs p) {
    mmvq_block<T, 4, kGroupCols, GroupCols>(p, blockIdx.x);
}

// The groups of mul_mat_id by expert (one block): each thread lists the planes of its experts in
// plane order, kGroupCols to a group; the groups go expert after expert, so the order (and the
// sums, each a column's own) does not depend on the threads. counts: n_as ints of scratch.
__global__ void __launch_bounds__(256) k_moe_groups(const char * ids, int64_t ids_nb0, int64_t ids_nb1, int n_used, int64_t n_tok,
                                                     int n_as, int32_t * counts, int32_t * groups, int32_t * n_groups) {
    const int64_t planes = (int64_t) n_used * n_tok;
    auto id_of = [&](int64_t z) { return *(const int32_t *) (ids + (z % n_used) * ids_nb0 + (z / n_used) * ids_nb1); };
    for (int e = threadIdx.x; e < n_as; e += blockDim.x) {
        int32_t n = 0;
        for (int64_t z = 0; z < planes; z++) n += id_of(z) == e;
        counts[e] = (n + kGroupCols - 1) / kGroupCols;  // this expert's groups
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t at = 0;
        for (int e = 0; e < n_as; e++) {
            const int32_t g = counts[e];
            counts[e] = at;  // its first group
            at += g;
        }
        *n_groups = at;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n_as; e += blockDim.x) {
        int32_t * g = groups + (int64_t) counts[e] * kGroupInts;
        int k = 0;
        for (int64_t z = 0; z < planes; z++) {
            if (id_of(z) != e) continue;
            if (k == kGroupCols) {
                g += kGroupInts;
                k = 0;
            }
            g[0] = e;
            g[1] = k + 1;
            g[2 + k++] = (int32_t) z;
        }
    }
}

// Generation's products of one activation with two or three weights of one type (q, k and v;
// gate and up) in one launch: the weights' blocks one after another along grid.x.
struct MmvqMultiArgs {
    MmvqArgs p[3];
    int64_t first_block[3];
    int type[3];  // each weight's type (k_mmvq_multi_mixed)
    int n;
};

template <int T>
__global__ void __launch_bounds__(WARP * kWarpsPerBlock) k_mmvq_multi(MmvqMultiArgs m) {
    int w = 0;
    while (w + 1 < m.n && (int64_t) blockIdx.x >= m.first_block[w + 1]) w++;
    mmvq_block<T, 1, 1>(m.p[w], (int64_t) blockIdx.x - m.first_block[w]);
}

// The same for weights of different K-quant types (Q4_K_M's and Q5_K_M's Q6_K values beside
// Q4_K / Q5_K queries and keys): one 8-bit activation of 256-value blocks serves them all, and a
// block branches on its weight's type.
constexpr bool k_quant(int t) {
    return t == GGML_TYPE_Q2_K || t == GGML_TYPE_Q3_K || t == GGML_TYPE_Q4_K || t == GGML_TYPE_Q5_K || t == GGML_TYPE_Q6_K;
}

template <int... Ts>
__device__ __forceinline__ void mmvq_block_of_type(int t, const MmvqArgs & p, int64_t blk) {
    (void) ((t == Ts ? (mmvq_block<Ts, 1, 1>(p, blk), true) : false) || ...);
}

__global__ void __launch_bounds__(WARP * kWarpsPerBlock) k_mmvq_multi_mixed(MmvqMultiArgs m) {
    int w = 0;
    while (w + 1 < m.n && (int64_t) blockIdx.x >= m.first_block[w + 1]) w++;
    mmvq_block_of_type<GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K>(
        m.type[w], m.p[w], (int64_t) blockIdx.x - m.first_block[w]);
}

}  // namespace

bool ggml_cuda_mmv_supported(const ggml_tensor * a) { return is_float_type(a->type); }

// dst = mul_mat(a, b) for a of a plain float type and b->ne[1] <= MMV_MAX_COLS (more columns:
// several column groups).
void ggml_cuda_mmv(ggml_cuda_ctx & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst) {
    MmvArgs p = {};
    p.a = (const char *) a->data;
    p.a_nb1 = a->nb[1]; p.a_nb2 = a->nb[2]; p.a_nb3 = a->nb[3];
    p.b = (const char *) b->data;
    p.b_nb1 = b->nb[1]; p.b_nb2 = b->nb[2]; p.b_nb3 = b->nb[3];
    p.d = (char *) dst->data;
    p.d_nb1 = dst->nb[1]; p.d_nb2 = dst->nb[2]; p.d_nb3 = dst->nb[3];
    p.M = a->ne[1];
    p.K = a->ne[0];
    p.N = b->ne[1];
    p.ne12 = b->ne[2];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
    p.b_vec4 = ((uintptr_t) b->data % 16 == 0) && b->nb[1] % 16 == 0 && b->nb[2] % 16 == 0 && b->nb[3] % 16 == 0;
    if (p.M == 0 || p.N == 0 || b->ne[2] * b->ne[3] == 0) return;
    // Short rows (attention's K^T q in generation: 64 or 128 values) would leave most lanes idle:
    // a row gets the fewest lanes (a power of two) that still cover its units.
    const int64_t units = (p.K + 31) / 32;
    p.L = WARP;
    while (p.L > 1 && p.L / 2 >= units) p.L /= 2;
    const int64_t rows_per_block = (int64_t) kWarpsPerBlock * (WARP / p.L);

    const int nc = p.N == 1 ? 1 : MMV_MAX_COLS;
    const dim3 grid((unsigned int) ((p.M + rows_per_block - 1) / rows_per_block), (unsigned int) ((p.N + nc - 1) / nc),
                    (unsigned int) (b->ne[2] * b->ne[3]));
    const dim3 block(WARP * kWarpsPerBlock);
    switch (a->type) {
#define MMV_CASE(T)                                                                          \
    case T:                                                                                  \
        if (nc == 1) GGML_CUDA_LAUNCH(k_mmv<T GGML_COMMA 1>, grid, block, 0, ctx.stream)(p);       \
        else GGML_CUDA_LAUNCH(k_mmv<T GGML_COMMA MMV_MAX_COLS>, grid, block, 0, ctx.stream)(p);    \
        break;
        MMV_CASE(GGML_TYPE_F32)
        MMV_CASE(GGML_TYPE_F16)
        MMV_CASE(GGML_TYPE_BF16)
#undef MMV_CASE
        default: GGML_ABORT("ggml_cuda_mmv: unsupported type %s", ggml_type_name(a->type));
    }
    CUDA_CHECK_LAUNCH();
}

namespace {

// b quantized to 8 bits as the CPU does for a's type (into scratch), or found already so
// (ctx.act: the previous product's b, or the kernel that produced b, when nothing wrote over it
// since). Returns the bytes and scales for MmvqArgs.
// extra_bytes > 0: that much more scratch after them, at *extra.
void quantized_b(ggml_cuda_ctx & ctx, ggml_type a_type, const ggml_tensor * b, const int8_t ** qs, const float4 ** ds,
                 size_t extra_bytes = 0, void ** extra = nullptr) {
    const int act_block = act_block_size(a_type);
    const uint64_t gen = ctx.scratch_gen;
    const bool ready = ggml_cuda_act_ready(ctx, b, act_block);
    const ActArgs q = ggml_cuda_act_args(ctx, b, act_block, extra_bytes);
    const bool quantized = ready && gen == ctx.scratch_gen;  // (the buffer did not grow and move)
    if (extra) *extra = q.extra;
    if (quantized) {
        ctx.n_act_reused++;
    } else {
        if (act_block == 256) {
            GGML_CUDA_LAUNCH(k_quantize_act<256>, n_blocks(q.n_units), 256, 0, ctx.stream)(q);
        } else {
            GGML_CUDA_LAUNCH(k_quantize_act<32>, n_blocks(q.n_units), 256, 0, ctx.stream)(q);
        }
        CUDA_CHECK_LAUNCH();
    }
    ggml_cuda_act_record(ctx.act, b, act_block, ctx.scratch_uses);
    *qs = q.qs;
    *ds = q.ds;
}

MmvqArgs mmvq_args(const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst, const int8_t * qs, const float4 * ds) {
    MmvqArgs p = {};
    p.a = (const char *) a->data;
    p.a_nb1 = a->nb[1]; p.a_nb2 = a->nb[2]; p.a_nb3 = a->nb[3];
    p.qs = qs;
    p.ds = ds;
    p.d = (char *) dst->data;
    p.d_nb1 = dst->nb[1]; p.d_nb2 = dst->nb[2]; p.d_nb3 = dst->nb[3];
    p.M = a->ne[1]; p.K = a->ne[0]; p.N = b->ne[1];
    p.ne12 = b->ne[2];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
    p.L = WARP;
    while (p.L > 1 && p.L / 2 >= p.K / 32) p.L /= 2;  // short rows: fewer lanes per row, more rows per warp
    return p;
}

// f(std::integral_constant<int, T>) for the weight type T of the integer products.
template <typename F>
void mmvq_dispatch_type(ggml_type t, F f) {
    switch (t) {
#define MMVQ_CASE(T) case T: f(std::integral_constant<int, T>{}); break;
        MMVQ_CASE(GGML_TYPE_Q4_0)
        MMVQ_CASE(GGML_TYPE_Q4_1)
        MMVQ_CASE(GGML_TYPE_Q5_0)
        MMVQ_CASE(GGML_TYPE_Q5_1)
        MMVQ_CASE(GGML_TYPE_Q8_0)
        MMVQ_CASE(GGML_TYPE_IQ4_NL)
        MMVQ_CASE(GGML_TYPE_Q2_K)
        MMVQ_CASE(GGML_TYPE_Q3_K)
        MMVQ_CASE(GGML_TYPE_Q4_K)
        MMVQ_CASE(GGML_TYPE_Q5_K)
        MMVQ_CASE(GGML_TYPE_Q6_K)
        MMVQ_CASE(GGML_TYPE_IQ2_XXS)
        MMVQ_CASE(GGML_TYPE_IQ2_XS)
        MMVQ_CASE(GGML_TYPE_IQ2_S)
        MMVQ_CASE(GGML_TYPE_IQ3_XXS)
        MMVQ_CASE(GGML_TYPE_IQ3_S)
        MMVQ_CASE(GGML_TYPE_IQ1_S)
        MMVQ_CASE(GGML_TYPE_IQ1_M)
        MMVQ_CASE(GGML_TYPE_IQ4_XS)
        MMVQ_CASE(GGML_TYPE_TQ1_0)
        MMVQ_CASE(GGML_TYPE_TQ2_0)
#undef MMVQ_CASE
        default: GGML_ABORT("ggml_cuda_mmvq: unsupported type %s", ggml_type_name(t));
    }
}

}  // namespace

ActArgs ggml_cuda_act_args(ggml_cuda_ctx & ctx, const ggml_tensor * b, int form, size_t extra_bytes) {
    const int64_t K = b->ne[0], n_cols = b->ne[1] * b->ne[2] * b->ne[3];
    const int64_t n_units = n_cols * (K / 32);
    const size_t qs_bytes = ((size_t) (n_cols * K) * (form == kActF16 ? 2 : 1) + 255) & ~(size_t) 255;
    const size_t ds_bytes = form == kActF16 ? 0 : (size_t) n_units * sizeof(float4);
    const size_t act_bytes = (qs_bytes + ds_bytes + 255) & ~(size_t) 255;
    char * scratch = (char *) ctx.scratch(act_bytes + extra_bytes);
    ActArgs q;
    q.b = (const char *) b->data;
    q.b_nb1 = b->nb[1]; q.b_nb2 = b->nb[2]; q.b_nb3 = b->nb[3];
    q.K = K; q.N = b->ne[1]; q.ne12 = b->ne[2]; q.n_units = n_units;
    q.qs = (int8_t *) scratch;
    q.ds = form == kActF16 ? nullptr : (float4 *) (scratch + qs_bytes);
    q.extra = extra_bytes > 0 ? scratch + act_bytes : nullptr;
    q.form = form;
    return q;
}

void ggml_cuda_act_record(ggml_cuda_ctx::quantized_act & act, const ggml_tensor * b, int form, uint64_t scratch_use) {
    act.lo = (const char *) b->data;
    act.hi = act.lo + ggml_cuda_span(b);
    act.block = form;
    act.scratch_use = scratch_use;
    for (int d = 0; d < 4; d++) {
        act.ne[d] = b->ne[d];
        act.nb[d] = b->nb[d];
    }
}

bool ggml_cuda_act_ready(const ggml_cuda_ctx & ctx, const ggml_tensor * b, int form) {
    const ggml_cuda_ctx::quantized_act & act = ctx.act;
    bool ready = act.lo == (const char *) b->data && act.block == form && act.scratch_use == ctx.scratch_uses && !ctx.no_fusion;
    for (int d = 0; d < 4 && ready; d++) ready = act.ne[d] == b->ne[d] && act.nb[d] == b->nb[d];
    return ready;
}

// dst = mul_mat(a, b) for quantized a (any number of columns; mul_mat.cu sends few): b quantized
// to 8 bits as the CPU does (into scratch; kept for the next product of the same b: ctx.act),
// then integer products.
void ggml_cuda_mmvq(ggml_cuda_ctx & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst) {
    const int64_t M = a->ne[1], N = b->ne[1], planes = b->ne[2] * b->ne[3];
    if (M == 0 || N == 0 || planes == 0) return;
    const int8_t * qs;
    const float4 * ds;
    quantized_b(ctx, a->type, b, &qs, &ds);
    const MmvqArgs p = mmvq_args(a, b, dst, qs, ds);

    // One column (generation): a row per lane group, a column per block. More: 4 rows per lane
    // group and 8 columns per block, so each activation load serves 4 rows.
    const bool gen = N == 1;
    const int R = gen ? 1 : 4, NC = gen ? 1 : 8;
    const int64_t rows_per_block = (int64_t) kWarpsPerBlock * (WARP / p.L) * R;
    const dim3 grid((unsigned int) ((M + rows_per_block - 1) / rows_per_block), (unsigned int) ((N + NC - 1) / NC),
                    (unsigned int) planes);
    const dim3 block(WARP * kWarpsPerBlock);
    mmvq_dispatch_type(a->type, [&](auto t) {
        if (gen) {
            GGML_CUDA_LAUNCH(k_mmvq<decltype(t)::value GGML_COMMA 1 GGML_COMMA 1>, grid, block, 0, ctx.stream)(p);
        } else {
            GGML_CUDA_LAUNCH(k_mmvq<decltype(t)::value GGML_COMMA 4 GGML_COMMA 8>, grid, block, 0, ctx.stream)(p);
        }
    });
    CUDA_CHECK_LAUNCH();
}

bool ggml_cuda_mmvq_multi_fusable(const ggml_tensor * first, const ggml_tensor * other) {
    const ggml_tensor * a = first->src[0], * b = first->src[1], * a2 = other->src[0];
    if (first->op != GGML_OP_MUL_MAT || other->op != GGML_OP_MUL_MAT || other->src[1] != b || !a || !b || !a2) return false;
    if (!ggml_cuda_mul_mat_supported(first) || !ggml_cuda_mul_mat_supported(other)) return false;
    if (!cuda_quant_supported(a->type) || b->nb[0] != sizeof(float)) return false;
    if (a2->type != a->type && !(k_quant(a->type) && k_quant(a2->type))) return false;  // one type, or K-quants
    // one column of one plane: generation's products (mul_mat's mmvq path)
    if (b->ne[1] != 1 || b->ne[2] != 1 || b->ne[3] != 1 || a->ne[2] != 1 || a->ne[3] != 1 || a2->ne[2] != 1 || a2->ne[3] != 1) return false;
    return first->ne[1] == 1 && other->ne[1] == 1;
}

void ggml_cuda_mmvq_multi(ggml_cuda_ctx & ctx, ggml_tensor * const * nodes, int n) {
    GGML_ASSERT(n >= 1 && n <= 3);
    const ggml_tensor * b = nodes[0]->src[1];
    const int8_t * qs;
    const float4 * ds;
    quantized_b(ctx, nodes[0]->src[0]->type, b, &qs, &ds);
    MmvqMultiArgs m = {};
    m.n = n;
    int64_t blocks = 0;
    bool mixed = false;
    for (int w = 0; w < n; w++) {
        m.p[w] = mmvq_args(nodes[w]->src[0], b, nodes[w], qs, ds);
        m.type[w] = (int) nodes[w]->src[0]->type;
        mixed |= m.type[w] != m.type[0];
        m.first_block[w] = blocks;
        const int64_t rows_per_block = (int64_t) kWarpsPerBlock * (WARP / m.p[w].L);
        blocks += (m.p[w].M + rows_per_block - 1) / rows_per_block;
    }
    if (blocks == 0) return;
    if (mixed) {
        GGML_CUDA_LAUNCH(k_mmvq_multi_mixed, (unsigned int) blocks, WARP * kWarpsPerBlock, 0, ctx.stream)(m);
    } else {
        mmvq_dispatch_type(nodes[0]->src[0]->type, [&](auto t) {
            GGML_CUDA_LAUNCH(k_mmvq_multi<decltype(t)::value>, (unsigned int) blocks, WARP * kWarpsPerBlock, 0, ctx.stream)(m);
        });
    }
    CUDA_CHECK_LAUNCH();
}

// ---- mul_mat_id: the experts of a mixture -------------------------------------------------------

bool ggml_cuda_mul_mat_id_supported(const ggml_tensor * dst) {
    const ggml_tensor * as = dst->src[0], * b = dst->src[1], * ids = dst->src[2];
    if (!as || !b || !ids || ids->type != GGML_TYPE_I32 || b->type != GGML_TYPE_F32 || b->nb[0] != sizeof(float)) return false;
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float) || as->nb[0] != ggml_type_size(as->type)) return false;
    if (is_float_type(as->type)) return true;
    return cuda_quant_supported(as->type) && as->ne[0] % act_block_size(as->type) == 0;
}

// dst[:, s, t] = as[:, :, ids[s, t]] b[:, s % b->ne[1], t]: one plane per (slot, token), each a
// product of one column (the generation kernels), in launches of at most 65535 planes.
void ggml_cuda_op_mul_mat_id(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * as = dst->src[0], * b = dst->src[1], * ids = dst->src[2];
    const int64_t n_used = ids->ne[0], n_tok = ids->ne[1], planes = n_used * n_tok, M = as->ne[1];
    if (M == 0 || planes == 0) return;
    const dim3 block(WARP * kWarpsPerBlock);
    auto launch_planes = [&](auto launch) {
        for (int64_t z0 = 0; z0 < planes; z0 += 65535) launch(z0, (unsigned int) std::min<int64_t>(planes - z0, 65535));
    };
    if (is_float_type(as->type)) {
        MmvArgs p = {};
        p.a = (const char *) as->data;
        p.a_nb1 = as->nb[1]; p.a_nb2 = as->nb[2];
        p.b = (const char *) b->data;
        p.b_nb2 = b->ne[1] == 1 ? 0 : b->nb[1];  // the slot's column (or the token's one column)
        p.b_nb3 = b->nb[2];
        p.d = (char *) dst->data;
        p.d_nb2 = dst->nb[1]; p.d_nb3 = dst->nb[2];
        p.M = M; p.K = as->ne[0]; p.N = 1; p.ne12 = n_used; p.r2 = p.r3 = 1;
        p.b_vec4 = ((uintptr_t) b->data % 16 == 0) && p.b_nb2 % 16 == 0 && p.b_nb3 % 16 == 0;
        p.ids = (const char *) ids->data;
        p.ids_nb0 = ids->nb[0]; p.ids_nb1 = ids->nb[1];
        const int64_t units = (p.K + 31) / 32;
        p.L = WARP;
        while (p.L > 1 && p.L / 2 >= units) p.L /= 2;
        const int64_t rows_per_block = (int64_t) kWarpsPerBlock * (WARP / p.L);
        const unsigned int gx = (unsigned int) ((M + rows_per_block - 1) / rows_per_block);
        launch_planes([&](int64_t z0, unsigned int n) {
            p.z0 = z0;
            switch (as->type) {
                case GGML_TYPE_F32: GGML_CUDA_LAUNCH(k_mmv<GGML_TYPE_F32 GGML_COMMA 1>, dim3(gx, 1, n), block, 0, ctx.stream)(p); break;
                case GGML_TYPE_F16: GGML_CUDA_LAUNCH(k_mmv<GGML_TYPE_F16 GGML_COMMA 1>, dim3(gx, 1, n), block, 0, ctx.stream)(p); break;
                case GGML_TYPE_BF16: GGML_CUDA_LAUNCH(k_mmv<GGML_TYPE_BF16 GGML_COMMA 1>, dim3(gx, 1, n), block, 0, ctx.stream)(p); break;
                default: GGML_ABORT("ggml_cuda_op_mul_mat_id: unsupported type %s", ggml_type_name(as->type));
            }
            CUDA_CHECK_LAUNCH();
        });
        return;
    }
    // Block types: b's columns quantized once (kept for the next product of the same b: the up
    // projection after the gate), then the integer products. A prompt's planes go by expert
    // (when the experts get two columns each on average): k_moe_groups lists each expert's
    // planes, kGroupCols to a group, and a block multiplies 4 rows per lane group of its expert
    // with a group's columns, so an expert's rows are read once per group instead of once per
    // column. No count comes back to the host (nothing waits, a CUDA graph can hold it): the
    // grid has room for the most groups there can be, and the blocks past the groups made leave.
    const int n_as = (int) as->ne[2];
    const bool by_expert = n_tok > 1 && planes >= 2 * (int64_t) n_as;
    const int64_t max_groups = by_expert ? (planes + kGroupCols - 1) / kGroupCols + n_as : 0;
    const size_t group_bytes = by_expert ? (size_t) (n_as + 1 + max_groups * kGroupInts) * sizeof(int32_t) : 0;
    const int8_t * qs;
    const float4 * ds;
    void * extra = nullptr;
    quantized_b(ctx, as->type, b, &qs, &ds, group_bytes, &extra);
    MmvqArgs p = mmvq_args(as, b, dst, qs, ds);
    p.a_nb3 = 0;
    p.N = 1; p.ne12 = n_used; p.r2 = p.r3 = 1;
    p.d_nb1 = 0; p.d_nb2 = dst->nb[1]; p.d_nb3 = dst->nb[2];
    p.ids = (const char *) ids->data;
    p.ids_nb0 = ids->nb[0]; p.ids_nb1 = ids->nb[1];
    p.n_b1 = b->ne[1];
    if (by_expert) {
        int32_t * counts = (int32_t *) extra, * n_groups = counts + n_as, * groups = n_groups + 1;
        GGML_CUDA_LAUNCH(k_moe_groups, 1, 256, 0, ctx.stream)(p.ids, p.ids_nb0, p.ids_nb1, (int) n_used, n_tok, n_as, counts, groups,
                                                               n_groups);
        CUDA_CHECK_LAUNCH();
        p.groups = groups;
        p.n_groups = n_groups;
        const int64_t rows_per_block = (int64_t) kWarpsPerBlock * (WARP / p.L) * 4;
        const unsigned int gx = (unsigned int) ((M + rows_per_block - 1) / rows_per_block);
        for (int64_t g0 = 0; g0 < max_groups; g0 += 65535) {
            p.z0 = g0;
            const unsigned int gy = (unsigned int) std::min<int64_t>(max_groups - g0, 65535);
            mmvq_dispatch_type(as->type, [&](auto t) {
                GGML_CUDA_LAUNCH(k_mmvq_groups<decltype(t)::value>, dim3(gx, gy, 1), block, 0, ctx.stream)(p);
            });
            CUDA_CHECK_LAUNCH();
        }
        return;
    }
    const int64_t rows_per_block = (int64_t) kWarpsPerBlock * (WARP / p.L);
    const unsigned int gx = (unsigned int) ((M + rows_per_block - 1) / rows_per_block);
    launch_planes([&](int64_t z0, unsigned int n) {
        p.z0 = z0;
        mmvq_dispatch_type(as->type, [&](auto t) {
            GGML_CUDA_LAUNCH(k_mmvq<decltype(t)::value GGML_COMMA 1 GGML_COMMA 1>, dim3(gx, 1, n), block, 0, ctx.stream)(p);
        });
        CUDA_CHECK_LAUNCH();
    });
}
