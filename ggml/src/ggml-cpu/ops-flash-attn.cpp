// ops-flash-attn.cpp - flash_attn_ext (fused attention) and flash_attn_back, its gradient.
//
// Work items are (i3, kv head, block of BQ queries); an item computes every query head that
// shares the kv head (grouped-query attention), so F16 keys and values are converted once per
// item. Per head: S = K^T Q over the keys [lo, hi) that some query of the block sees (found in
// the mask: the keys outside are -inf for every query of the block and add exactly nothing, so a
// causal mask halves the work), a softmax per row (the same row pieces as soft_max), O = V P.
// A block whose queries each see a small part of those keys (several sequences interleaved in a
// cache) multiplies, per query, only the keys it sees.
// The products go through gemm-block (the build's GEMM micro-kernel). Items are taken from a
// shared counter, since a causal mask makes them unequal; what an item computes never depends on
// which thread computes it.
//
// Backward (FlashAttention-2's equations, P recomputed from the logits instead of kept):
//   dP = dO V^T, D_i = sum_j P_ij dP_ij, dS = P (dP - D) s'(logits),
//   dQ = dS K, dK = dS^T Q, dV = P^T dO,
// with s' the derivative of the logits in q.k: scale, or scale (1 - tanh^2) with a softcap.
// dQ of a block is complete within its item. dK and dV sum over query blocks: the blocks are cut
// into at most GROUPS groups (a partition fixed by n_q alone), each item a (kv head, group) with
// its own partial sums, added in group order at the end: bit-identical for any thread count.
#include "cpu-ops.h"
#include "gemm-block.h"
#include "ops-common.h"
#include "softmax-row.h"
#include "kernels.h"

#include <algorithm>
#include <atomic>
#include <vector>
#include <math.h>
#include <string.h>

namespace {

using namespace ggml_mm_buf;  // ALIGN, align_up, align_ptr, ceil_div (vec.h)
using namespace ggml_softmax_row;

constexpr int64_t BQ = 64;     // queries per block
constexpr int64_t GROUPS = 4;  // backward: most groups of query blocks (partial sums of dK, dV)

struct Attn {
    const ggml_tensor * q, * k, * v, * mask;
    int64_t D, Dv, n_q, n_kv, H, Hkv, B3, G;  // G: query heads per kv head
    int64_t n_qb, ld_s;                        // query blocks; floats per row of a score block
    float scale, max_bias, softcap;

    explicit Attn(const ggml_tensor * dst)
        : q(dst->src[0]), k(dst->src[1]), v(dst->src[2]), mask(dst->src[3]) {
        D = q->ne[0];
        Dv = v->ne[0];
        n_q = q->ne[1];
        H = q->ne[2];
        B3 = q->ne[3];
        n_kv = k->ne[1];
        Hkv = k->ne[2];
        G = H / Hkv;
        n_qb = ceil_div(n_q, BQ);
        ld_s = std::max<int64_t>(16, (n_kv + 15) / 16 * 16);
        scale = ggml_get_op_params_f32(dst, 0);
        max_bias = ggml_get_op_params_f32(dst, 1);
        softcap = ggml_get_op_params_f32(dst, 2);
    }

    bool convert_k() const { return k->type != GGML_TYPE_F32 || k->nb[1] % sizeof(float) != 0; }
    bool convert_v() const { return v->type != GGML_TYPE_F32 || v->nb[1] % sizeof(float) != 0; }

    // Per thread: the score block, the kv rows as F32 where converted, the products' scratch; the
    // backward adds dP and the tanh of the softcapped logits.
    size_t thread_size(bool backward) const {
        const size_t block = align_up((size_t) BQ * ld_s * sizeof(float));
        const int64_t m = std::max(n_kv, std::max(D, Dv)), n = std::max(BQ, n_kv), kk = std::max(std::max(D, Dv), n);
        size_t s = block * (backward ? 3 : 1) + ggml_gemm_block_scratch(m, n, kk);
        if (convert_k()) s += align_up((size_t) n_kv * D * sizeof(float));
        if (convert_v()) s += align_up((size_t) n_kv * Dv * sizeof(float));
        return s;
    }

    int64_t groups() const { return std::min(n_qb, GROUPS); }
    size_t partial_floats() const { return (size_t) n_kv * (D + Dv); }  // one (i3, kv head, group)
};

// The keys of kv head hk as F32 rows: in place, or rows [lo, hi) converted into buf.
struct KvRows {
    const float * p;
    int64_t ld;
};
KvRows kv_rows(const ggml_tensor * t, int64_t hk, int64_t i3, int64_t lo, int64_t hi, float * buf) {
    const char * base = (const char *) t->data + hk * t->nb[2] + i3 * t->nb[3];
    if (t->type == GGML_TYPE_F32 && t->nb[1] % sizeof(float) == 0) {
        return { (const float *) base, (int64_t) (t->nb[1] / sizeof(float)) };
    }
    const int64_t n = t->ne[0];
    if (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16) {
        for (int64_t j = lo; j < hi; j++) ggml_cpu_row_to_f32(t->type, base + j * t->nb[1], buf + j * n, n);
    } else {
        const ggml_to_float_t to_float = ggml_get_type_traits(t->type)->to_float;
        for (int64_t j = lo; j < hi; j++) to_float(base + j * t->nb[1], buf + j * n, n);
    }
    return { buf, n };
}

const char * mask_row(const Attn & at, int64_t i, int64_t h, int64_t i3) {
    const ggml_tensor * m = at.mask;
    return (const char *) m->data + i * m->nb[1] + (h % m->ne[2]) * m->nb[2] + (i3 % m->ne[3]) * m->nb[3];
}

bool hidden(const ggml_tensor * m, const char * row, int64_t j) {
    if (m->type == GGML_TYPE_F16) return ((const ggml_fp16_t *) row)[j] == 0xFC00;  // -inf
    return ((const float *) row)[j] == -INFINITY;
}

// [lo, hi): the keys that some query [i0, i1) of some head of kv head hk sees ([0, 0): none).
void visible_keys(const Attn & at, int64_t i3, int64_t hk, int64_t i0, int64_t i1, int64_t * lo, int64_t * hi) {
    if (!at.mask) { *lo = 0; *hi = at.n_kv; return; }
    int64_t l = at.n_kv, r = 0;
    const int64_t heads = at.mask->ne[2] == 1 ? 1 : at.G;
    for (int64_t g = 0; g < heads; g++) {
        for (int64_t i = i0; i < i1; i++) {
            const char * row = mask_row(at, i, hk * at.G + g, i3);
            int64_t a = 0;
            while (a < l && hidden(at.mask, row, a)) a++;
            l = a;
            int64_t b = at.n_kv;
            while (b > r && hidden(at.mask, row, b - 1)) b--;
            r = b;
        }
    }
    *lo = l < r ? l : 0;
    *hi = l < r ? r : 0;
}

// Rows [i0, i0 + nb) of head h: the scores over keys [lo, lo + nk) become probabilities, in place
// in s (ld at.ld_s). With a softcap, t (if not NULL) gets tanh of the capped logits.
void softmax_rows(const Attn & at, int64_t i3, int64_t h, int64_t i0, int64_t nb, int64_t lo, int64_t nk, float * s, float * t) {
    const float slope = alibi_slope((uint32_t) h, (uint32_t) at.H, at.max_bias);
    for (int64_t r = 0; r < nb; r++) {
        float * w = s + r * at.ld_s;
        const char * m = at.mask ? mask_row(at, i0 + r, h, i3) + lo * ggml_type_size(at.mask->type) : nullptr;
        float scale = at.scale;
        if (at.softcap > 0.0f) {
            const float sc = at.scale / at.softcap;
            for (int64_t j = 0; j < nk; j++) {
                const float th = tanhf(w[j] * sc);
                if (t) t[r * at.ld_s + j] = th;
                w[j] = at.softcap * th;
            }
            scale = 1.0f;  // applied: w * 1 is w
        }
        const float max = logits_max(w, w, m, at.mask && at.mask->type == GGML_TYPE_F16, scale, slope, nk);
        if (max == -INFINITY) {  // this query sees no key: zeros
            memset(w, 0, nk * sizeof(float));
            continue;
        }
        const float inv_sum = (float) (1.0 / exp_sub_max_sum(w, nk, max));
        for (int64_t j = 0; j < nk; j++) w[j] *= inv_sum;
    }
}

// At most this many queries per block take the dot-product path (few_queries).
constexpr int64_t FEW_QUERIES = 4;

// S = K^T x over keys [lo, lo + nk) for n columns x_c = x + c * ldx bytes, into s[c * ld_s + j],
// by the build's F32 dot tiles (each value computed the same way whatever the tile's shape).
void key_scores(const KvRows & K, int64_t lo, int64_t nk, const char * x, size_t ldx, int64_t n, int64_t D, float * s,
                int64_t ld_s) {
    const ggml_mm_type_kernels * mk = ggml_cpu()->mm_type(GGML_TYPE_F32);
    const ggml_dot_tile_fn dot = mk ? mk->dot_tile : ggml_cpu_kernels_scalar.mm_type(GGML_TYPE_F32)->dot_tile;
    const int T = GGML_DOT_TILE_MAX;
    for (int64_t j = 0; j < nk; j += T) {
        for (int64_t c = 0; c < n; c += T) {
            dot(D, (int) std::min<int64_t>(T, nk - j), (int) std::min<int64_t>(T, n - c), K.p + (lo + j) * K.ld,
                (size_t) K.ld * sizeof(float), x + c * ldx, ldx, s + c * ld_s + j, (size_t) ld_s);
        }
    }
}

// out = sum_j p[j] V[lo + j] over j < nk, 16 value rows per axpy call.
void weighted_values(const KvRows & V, int64_t lo, int64_t nk, const float * p, int64_t Dv, float * out) {
    const ggml_cpu_kernels * vk = ggml_cpu();
    const float * rows[16];
    memset(out, 0, Dv * sizeof(float));
    for (int64_t j = 0; j < nk; j += 16) {
        const int n = (int) std::min<int64_t>(16, nk - j);
        for (int t = 0; t < n; t++) rows[t] = V.p + (lo + j + t) * V.ld;
        vk->axpy(Dv, n, p + j, rows, out);
    }
}

// The same products without packing: the scores of the block's queries (key_scores), softmax
// (the callback), then each output row the value rows weighted by its probabilities. Each value
// is computed the same way whatever the thread.
template <typename Softmax>
void few_queries(const KvRows & K, const KvRows & V, int64_t lo, int64_t nk, const float * q, size_t q_nb1, int64_t nb,
                 float * s, int64_t ld_s, int64_t D, int64_t Dv, float * o, int64_t ldo, Softmax softmax) {
    key_scores(K, lo, nk, (const char *) q, q_nb1, nb, D, s, ld_s);
    softmax();
    for (int64_t r = 0; r < nb; r++) weighted_values(V, lo, nk, s + r * ld_s, Dv, o + r * ldo);
}

// One query and the G heads of kv head hk (generation): the scores of all G heads from the same
// dot tiles, heads as columns (q's heads are nb[2] apart), so each tile of keys is read once per
// 4 heads instead of once per head; then each head's softmax and values as few_queries does, the
// same bits.
void one_query_grouped(const Attn & at, const KvRows & K, const KvRows & V, int64_t lo, int64_t nk, int64_t i3, int64_t hk,
                       int64_t i0, float * s, float * out) {
    const size_t q_nb2 = at.q->nb[2];
    const char * q0 = (const char *) at.q->data + i0 * at.q->nb[1] + hk * at.G * q_nb2 + i3 * at.q->nb[3];
    key_scores(K, lo, nk, q0, q_nb2, at.G, at.D, s, at.ld_s);
    for (int64_t g = 0; g < at.G; g++) {
        const int64_t h = hk * at.G + g;
        softmax_rows(at, i3, h, i0, 1, lo, nk, s + g * at.ld_s, nullptr);
        weighted_values(V, lo, nk, s + g * at.ld_s, at.Dv, out + ((i3 * at.n_q + i0) * at.H + h) * at.Dv);
    }
}

// Whether the block's queries see few of the keys [lo, lo + nk) (under half): llama's cache keeps
// several sequences' cells interleaved, and each query sees only its own sequence's. Then
// sparse_queries multiplies only the keys each query sees. (A mask shared by the heads, no
// softcap: the case of a batch of several sequences.)
bool sparse_block(const Attn & at, int64_t i3, int64_t i0, int64_t nb, int64_t lo, int64_t nk) {
    if (!at.mask || at.mask->ne[2] != 1 || at.softcap > 0.0f || nb < 2) return false;
    int64_t seen = 0;
    for (int64_t r = 0; r < nb; r++) {
        const char * row = mask_row(at, i0 + r, 0, i3);
        for (int64_t j = lo; j < lo + nk; j++) seen += !hidden(at.mask, row, j);
    }
    return seen * 2 < nb * nk;
}

// Each query of the block and each head of kv head hk over only the keys the query sees: their
// scores (the F32 dot tile, one key at a time: the values the dot path computes), the softmax of
// those alone (the hidden keys' terms are exactly zero), the values they weight.
void sparse_queries(const Attn & at, const KvRows & K, const KvRows & V, int64_t lo, int64_t nk, int64_t i3, int64_t hk,
                    int64_t i0, int64_t nb, float * out) {
    thread_local std::vector<int64_t> idx;
    thread_local std::vector<float> mv, w;
    const ggml_mm_type_kernels * mk = ggml_cpu()->mm_type(GGML_TYPE_F32);
    const ggml_dot_tile_fn dot = mk ? mk->dot_tile : ggml_cpu_kernels_scalar.mm_type(GGML_TYPE_F32)->dot_tile;
    const ggml_cpu_kernels * vk = ggml_cpu();
    const bool f16 = at.mask->type == GGML_TYPE_F16;
    for (int64_t r = 0; r < nb; r++) {
        const char * row = mask_row(at, i0 + r, 0, i3);
        idx.clear();
        mv.clear();
        for (int64_t j = lo; j < lo + nk; j++) {
            if (hidden(at.mask, row, j)) continue;
            idx.push_back(j);
            mv.push_back(f16 ? GGML_FP16_TO_FP32(((const ggml_fp16_t *) row)[j]) : ((const float *) row)[j]);
        }
        const int64_t m = (int64_t) idx.size();
        w.resize((size_t) std::max<int64_t>(m, 1));
        for (int64_t g = 0; g < at.G; g++) {
            const int64_t h = hk * at.G + g;
            float * o = out + ((i3 * at.n_q + i0 + r) * at.H + h) * at.Dv;
            memset(o, 0, at.Dv * sizeof(float));
            if (m == 0) continue;  // this query sees no key: zeros
            const char * q = (const char *) at.q->data + (i0 + r) * at.q->nb[1] + h * at.q->nb[2] + i3 * at.q->nb[3];
            for (int64_t t = 0; t < m; t++) {
                dot(at.D, 1, 1, K.p + idx[t] * K.ld, (size_t) K.ld * sizeof(float), q, at.q->nb[1], &w[t], 1);
            }
            const float slope = alibi_slope((uint32_t) h, (uint32_t) at.H, at.max_bias);
            const float max = logits_max(w.data(), w.data(), mv.data(), false, at.scale, slope, m);
            const float inv_sum = (float) (1.0 / exp_sub_max_sum(w.data(), m, max));
            for (int64_t t = 0; t < m; t++) w[t] *= inv_sum;
            const float * rows[16];
            for (int64_t t = 0; t < m; t += 16) {
                const int n = (int) std::min<int64_t>(16, m - t);
                for (int u = 0; u < n; u++) rows[u] = V.p + idx[t + u] * V.ld;
                vk->axpy(at.Dv, n, w.data() + t, rows, o);
            }
        }
    }
}

struct ThreadBufs {
    float * s, * dp, * t, * kbuf, * vbuf;
    void * gemm;
};

ThreadBufs thread_bufs(const Attn & at, char * w, bool backward) {
    const size_t block = align_up((size_t) BQ * at.ld_s * sizeof(float));
    ThreadBufs b = {};
    b.s = (float *) w;
    w += block;
    if (backward) {
        b.dp = (float *) w;
        b.t = (float *) (w + block);
        w += 2 * block;
    }
    if (at.convert_k()) { b.kbuf = (float *) w; w += align_up((size_t) at.n_kv * at.D * sizeof(float)); }
    if (at.convert_v()) { b.vbuf = (float *) w; w += align_up((size_t) at.n_kv * at.Dv * sizeof(float)); }
    b.gemm = w;
    return b;
}

// The shared item counter sits at the start of the work buffer; thread 0 resets it.
std::atomic<int64_t> * item_counter(const ggml_compute_params * params) {
    std::atomic<int64_t> * c = (std::atomic<int64_t> *) align_ptr(params->wdata);
    if (params->ith == 0) c->store(0, std::memory_order_relaxed);
    ggml_cpu_barrier(params);
    return c;
}

}  // namespace

// ---- forward -------------------------------------------------------------------------------
size_t ggml_cpu_flash_attn_ext_work_size(const struct ggml_tensor * node, int n_threads) {
    const Attn at(node);
    return 2 * ALIGN + (size_t) n_threads * at.thread_size(false);
}

void ggml_cpu_forward_flash_attn_ext(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const Attn at(dst);
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && ggml_is_contiguous(dst));
    GGML_ASSERT(params->wsize >= ggml_cpu_flash_attn_ext_work_size(dst, params->nth));
    std::atomic<int64_t> * next = item_counter(params);
    const ThreadBufs tb = thread_bufs(at, align_ptr(params->wdata) + ALIGN + (size_t) params->ith * at.thread_size(false), false);
    const int64_t n_items = at.B3 * at.Hkv * at.n_qb;
    float * out = (float *) dst->data;

    for (int64_t it = next->fetch_add(1); it < n_items; it = next->fetch_add(1)) {
        const int64_t qb = it % at.n_qb, hk = (it / at.n_qb) % at.Hkv, i3 = it / (at.n_qb * at.Hkv);
        const int64_t i0 = qb * BQ, nb = std::min(BQ, at.n_q - i0);
        int64_t lo, hi;
        visible_keys(at, i3, hk, i0, i0 + nb, &lo, &hi);
        const int64_t nk = hi - lo;
        const KvRows K = kv_rows(at.k, hk, i3, lo, hi, tb.kbuf), V = kv_rows(at.v, hk, i3, lo, hi, tb.vbuf);
        if (nb == 1 && at.G > 1 && at.G <= BQ && nk > 0) {
            one_query_grouped(at, K, V, lo, nk, i3, hk, i0, tb.s, out);
            continue;
        }
        if (nk > 0 && sparse_block(at, i3, i0, nb, lo, nk)) {
            sparse_queries(at, K, V, lo, nk, i3, hk, i0, nb, out);
            continue;
        }
        for (int64_t g = 0; g < at.G; g++) {
            const int64_t h = hk * at.G + g;
            float * o = out + ((i3 * at.n_q + i0) * at.H + h) * at.Dv;
            const int64_t ldo = at.H * at.Dv;
            if (nk == 0) {
                for (int64_t r = 0; r < nb; r++) memset(o + r * ldo, 0, at.Dv * sizeof(float));
                continue;
            }
            const float * qp = (const float *) ((const char *) at.q->data + i0 * at.q->nb[1] + h * at.q->nb[2] + i3 * at.q->nb[3]);
            if (nb <= FEW_QUERIES) {
                // Token generation: packing the keys for a few queries costs more than the products.
                few_queries(K, V, lo, nk, qp, at.q->nb[1], nb, tb.s, at.ld_s, at.D, at.Dv, o, ldo,
                            [&] { softmax_rows(at, i3, h, i0, nb, lo, nk, tb.s, nullptr); });
                continue;
            }
            const ggml_gemm_operand qr = { qp, (int64_t) (at.q->nb[1] / sizeof(float)), false };
            ggml_gemm_block(nk, nb, at.D, { K.p + lo * K.ld, K.ld, false }, qr, tb.s, at.ld_s, false, tb.gemm);
            softmax_rows(at, i3, h, i0, nb, lo, nk, tb.s, nullptr);
            ggml_gemm_block(at.Dv, nb, nk, { V.p + lo * V.ld, V.ld, true }, { tb.s, at.ld_s, false }, o, ldo, false, tb.gemm);
        }
    }
}

// ---- backward ------------------------------------------------------------------------------
size_t ggml_cpu_flash_attn_back_work_size(const struct ggml_tensor * node, int n_threads) {
    const Attn at(node);
    const size_t partials = align_up((size_t) (at.B3 * at.Hkv * at.groups()) * at.partial_floats() * sizeof(float));
    return 2 * ALIGN + partials + (size_t) n_threads * at.thread_size(true);
}

void ggml_cpu_forward_flash_attn_back(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const Attn at(dst);
    const ggml_tensor * grad = dst->src[4];
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && ggml_is_contiguous(dst) && ggml_is_contiguous(grad));
    GGML_ASSERT(params->wsize >= ggml_cpu_flash_attn_back_work_size(dst, params->nth));
    std::atomic<int64_t> * next = item_counter(params);
    const int64_t n_groups = at.groups();
    float * partials = (float *) (align_ptr(params->wdata) + ALIGN);
    const size_t partials_size = align_up((size_t) (at.B3 * at.Hkv * n_groups) * at.partial_floats() * sizeof(float));
    const ThreadBufs tb = thread_bufs(at, (char *) partials + partials_size + (size_t) params->ith * at.thread_size(true), true);

    float * dq = (float *) dst->data;
    float * dk = dq + ggml_nelements(at.q);
    float * dv = dk + ggml_nelements(at.k);
    const float * dO = (const float *) grad->data;
    const int64_t ldo = at.H * at.Dv;
    const int64_t ldq = (int64_t) (at.q->nb[1] / sizeof(float));

    const int64_t n_items = at.B3 * at.Hkv * n_groups;
    for (int64_t it = next->fetch_add(1); it < n_items; it = next->fetch_add(1)) {
        const int64_t grp = it % n_groups, hk = (it / n_groups) % at.Hkv, i3 = it / (n_groups * at.Hkv);
        float * dkp = partials + (size_t) it * at.partial_floats();
        float * dvp = dkp + (size_t) at.n_kv * at.D;
        memset(dkp, 0, at.partial_floats() * sizeof(float));
        const int64_t qb0 = grp * at.n_qb / n_groups, qb1 = (grp + 1) * at.n_qb / n_groups;
        // The group's keys, converted once when they are F16.
        int64_t lo_g = at.n_kv, hi_g = 0;
        for (int64_t qb = qb0; qb < qb1; qb++) {
            int64_t lo, hi;
            visible_keys(at, i3, hk, qb * BQ, std::min(at.n_q, qb * BQ + BQ), &lo, &hi);
            if (lo < hi) { lo_g = std::min(lo_g, lo); hi_g = std::max(hi_g, hi); }
        }
        const KvRows K = kv_rows(at.k, hk, i3, lo_g, hi_g, tb.kbuf), V = kv_rows(at.v, hk, i3, lo_g, hi_g, tb.vbuf);

        for (int64_t qb = qb0; qb < qb1; qb++) {
            const int64_t i0 = qb * BQ, nb = std::min(BQ, at.n_q - i0);
            int64_t lo, hi;
            visible_keys(at, i3, hk, i0, i0 + nb, &lo, &hi);
            const int64_t nk = hi - lo;
            for (int64_t g = 0; g < at.G; g++) {
                const int64_t h = hk * at.G + g;
                float * dqb = dq + ((i3 * at.H + h) * at.n_q + i0) * at.D;
                if (nk == 0) {
                    memset(dqb, 0, (size_t) nb * at.D * sizeof(float));
                    continue;
                }
                const float * qp = (const float *) ((const char *) at.q->data + i0 * at.q->nb[1] + h * at.q->nb[2] + i3 * at.q->nb[3]);
                const float * dop = dO + ((i3 * at.n_q + i0) * at.H + h) * at.Dv;
                const ggml_gemm_operand k_rows = { K.p + lo * K.ld, K.ld, false }, v_rows = { V.p + lo * V.ld, V.ld, false };

                ggml_gemm_block(nk, nb, at.D, k_rows, { qp, ldq, false }, tb.s, at.ld_s, false, tb.gemm);
                softmax_rows(at, i3, h, i0, nb, lo, nk, tb.s, tb.t);
                ggml_gemm_block(nk, nb, at.Dv, v_rows, { dop, ldo, false }, tb.dp, at.ld_s, false, tb.gemm);
                // dP -> dS in place.
                for (int64_t r = 0; r < nb; r++) {
                    const float * p = tb.s + r * at.ld_s;
                    float * d = tb.dp + r * at.ld_s;
                    const float Di = (float) row_sum(nk, [&](int64_t j) { return (double) p[j] * (double) d[j]; });
                    if (at.softcap > 0.0f) {
                        const float * t = tb.t + r * at.ld_s;
                        for (int64_t j = 0; j < nk; j++) d[j] = p[j] * (d[j] - Di) * (at.scale * (1.0f - t[j] * t[j]));
                    } else {
                        for (int64_t j = 0; j < nk; j++) d[j] = p[j] * (d[j] - Di) * at.scale;
                    }
                }
                ggml_gemm_block(at.D, nb, nk, { K.p + lo * K.ld, K.ld, true }, { tb.dp, at.ld_s, false }, dqb, at.D, false, tb.gemm);
                ggml_gemm_block(at.D, nk, nb, { qp, ldq, true }, { tb.dp, at.ld_s, true }, dkp + lo * at.D, at.D, true, tb.gemm);
                ggml_gemm_block(at.Dv, nk, nb, { dop, ldo, true }, { tb.s, at.ld_s, true }, dvp + lo * at.Dv, at.Dv, true, tb.gemm);
            }
        }
    }
    ggml_cpu_barrier(params);

    // dK and dV: the groups' partial sums in group order, rows split across threads.
    const int64_t n_rows = at.B3 * at.Hkv * at.n_kv;
    int64_t r0, r1;
    ggml_cpu_split_rows(n_rows, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t j = r % at.n_kv, head = r / at.n_kv;  // head: i3 * Hkv + hk
        float * ok = dk + r * at.D;
        float * ov = dv + r * at.Dv;
        for (int64_t grp = 0; grp < n_groups; grp++) {
            const float * pk = partials + (size_t) (head * n_groups + grp) * at.partial_floats() + j * at.D;
            const float * pv = partials + (size_t) (head * n_groups + grp) * at.partial_floats() + at.n_kv * at.D + j * at.Dv;
            if (grp == 0) {
                memcpy(ok, pk, at.D * sizeof(float));
                memcpy(ov, pv, at.Dv * sizeof(float));
            } else {
                for (int64_t e = 0; e < at.D; e++) ok[e] += pk[e];
                for (int64_t e = 0; e < at.Dv; e++) ov[e] += pv[e];
            }
        }
    }
}
