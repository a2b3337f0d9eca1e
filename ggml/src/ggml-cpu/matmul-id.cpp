// matmul-id.cpp - mul_mat_id (the experts of a mixture of experts) and its gradient for b, and
// argsort (the router's choice) on the CPU.
//
// mul_mat_id runs expert by expert: the columns of b routed to expert e are gathered into one
// matrix, multiplied by as[:, :, e] with the mul_mat kernels (a 2D mul_mat on headers that point
// into the work buffer: the dot path for a few columns, which reads only that expert's rows, the
// packed GEMM path for a prompt's many), and scattered to their places in dst. Experts no
// column chose are never read. Each column's result is the mul_mat's, so the output does not
// depend on the thread count or on which other columns share the expert.
#include "cpu-ops.h"
#include "ops-common.h"
#include "quant-repack.h"
#include "vec.h"

#include <algorithm>
#include <numeric>
#include <string.h>
#include <vector>

namespace {

using ggml_mm_buf::ALIGN;
using ggml_mm_buf::align_ptr;
using ggml_mm_buf::align_up;

struct IdDims {
    int64_t K, N, n_as, n_b, n_used, n_tokens;
};

IdDims dims_of(const ggml_tensor * as, const ggml_tensor * ids, const ggml_tensor * b) {
    return { as->ne[0], as->ne[1], as->ne[2], b->ne[1], ids->ne[0], ids->ne[1] };
}

int32_t id_at(const ggml_tensor * ids, int64_t i, int64_t t) {
    int32_t v;
    memcpy(&v, (const char *) ids->data + i * ids->nb[0] + t * ids->nb[1], sizeof(v));
    return v;
}

// The headers of expert e's 2D mul_mat over cnt gathered columns: a = as[:, :, e] (repacked
// experts too: each expert is a run of whole 16-row groups), b and d in the work buffer.
struct SubMatMul {
    ggml_tensor a, b, d;
    SubMatMul(const ggml_tensor * as, int64_t e, int64_t cnt, float * b_data, float * d_data) {
        a = *as;
        a.ne[2] = 1;
        a.data = (char *) as->data + e * as->nb[2];
        a.nb[3] = a.nb[2] = a.nb[1] * a.ne[1];
        a.op = GGML_OP_NONE;
        for (ggml_tensor *& s : a.src) s = nullptr;
        a.view_src = nullptr;
        memset(&b, 0, sizeof(b));
        b.type = GGML_TYPE_F32;
        b.ne[0] = as->ne[0];
        b.ne[1] = cnt;
        b.ne[2] = b.ne[3] = 1;
        b.nb[0] = sizeof(float);
        b.nb[1] = b.nb[0] * b.ne[0];
        b.nb[2] = b.nb[3] = b.nb[1] * cnt;
        b.data = b_data;
        memset(&d, 0, sizeof(d));
        d.type = GGML_TYPE_F32;
        d.op = GGML_OP_MUL_MAT;
        d.ne[0] = as->ne[1];
        d.ne[1] = cnt;
        d.ne[2] = d.ne[3] = 1;
        d.nb[0] = sizeof(float);
        d.nb[1] = d.nb[0] * d.ne[0];
        d.nb[2] = d.nb[3] = d.nb[1] * cnt;
        d.data = d_data;
        d.src[0] = &a;
        d.src[1] = &b;
    }
};

// Generation and small batches take the few-columns path (below) when the experts are repacked:
// at most this many (slot, token) columns in all.
constexpr int64_t FEW_COLUMNS = 64;

// The repack traits of as when the few-columns path applies to this node, else nullptr.
const ggml_repack_traits * few_columns_traits(const ggml_tensor * as, const ggml_tensor * b, const IdDims & x) {
    if (!(as->flags & GGML_TENSOR_FLAG_REPACKED) || x.n_used * x.n_tokens > FEW_COLUMNS || b->nb[0] != sizeof(float)) return nullptr;
    const ggml_repack_traits * rt = ggml_repack_get_traits(as->type);
    return rt && x.N % GGML_REPACK_ROWS == 0 && x.K % rt->act_blck == 0 ? rt : nullptr;
}

// Work buffer: gathered columns (K x cap floats), results (N x cap), then the mul_mat's own; or,
// on the few-columns path, b's columns converted to the activation blocks.
struct IdLayout {
    int64_t cap;  // most columns one expert can get
    size_t gather, out, sub;
    size_t conv_row, conv;  // few columns: bytes per converted column, and of all of them
    size_t total() const { return ALIGN + std::max(gather + out + sub, conv); }
};

IdLayout layout_of(const ggml_tensor * dst, int n_threads) {
    const ggml_tensor * as = dst->src[0], * b = dst->src[1], * ids = dst->src[2];
    const IdDims x = dims_of(as, ids, b);
    IdLayout l;
    l.cap = x.n_used * x.n_tokens;
    l.gather = align_up((size_t) (x.K * l.cap) * sizeof(float));
    l.out = align_up((size_t) (x.N * l.cap) * sizeof(float));
    SubMatMul s(as, 0, l.cap, nullptr, nullptr);
    l.sub = ggml_cpu_mul_mat_work_size(&s.d, n_threads);  // the most any expert's needs
    l.conv_row = l.conv = 0;
    if (const ggml_repack_traits * rt = few_columns_traits(as, b, x)) {
        l.conv_row = align_up((size_t) (x.K / rt->act_blck) * rt->act_size);
        l.conv = l.conv_row * (size_t) (x.n_b * x.n_tokens);
    }
    return l;
}

// The few-columns path: each column of b is converted once (gate's and up's input, which all
// slots of a token share, once per token, not once per expert), then the items (an expert some
// column chose, a group of 16 of its rows) are shared out with stealing, each multiplying its
// group by the expert's columns straight into dst. One barrier in all, where the expert-by-expert
// path has three per expert, and no expert waits for the previous one. The kernel and the
// blocks are the repacked mul_mat's, and a column's value does not depend on the columns beside
// it, so the results are the other path's bits.
void mul_mat_id_few_columns(const ggml_compute_params * params, ggml_tensor * dst, const ggml_repack_traits * rt,
                            const IdLayout & l) {
    const ggml_tensor * as = dst->src[0], * b = dst->src[1], * ids = dst->src[2];
    const IdDims x = dims_of(as, ids, b);
    char * conv = align_ptr(params->wdata);
    int64_t r0, r1;
    ggml_cpu_split_rows(x.n_b * x.n_tokens, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t j = r % x.n_b, t = r / x.n_b;
        rt->act_from_float((const float *) ((const char *) b->data + j * b->nb[1] + t * b->nb[2]), conv + r * l.conv_row, x.K);
    }
    // The experts chosen, each with its columns (slot + n_used * token), in expert order; every
    // thread lists them the same way while the others convert.
    int64_t n_cols[FEW_COLUMNS], cols[FEW_COLUMNS], first[FEW_COLUMNS + 1];
    int32_t experts[FEW_COLUMNS];
    int64_t n_active = 0;
    {
        int32_t chosen[FEW_COLUMNS];
        for (int64_t c = 0; c < x.n_used * x.n_tokens; c++) {
            chosen[c] = id_at(ids, c % x.n_used, c / x.n_used);
            GGML_ASSERT(chosen[c] >= 0 && chosen[c] < x.n_as && "mul_mat_id: an id outside [0, n_as)");
        }
        int64_t n = 0;
        for (int64_t c = 0; c < x.n_used * x.n_tokens; c++) {
            bool seen = false;
            for (int64_t a = 0; a < n_active && !seen; a++) seen = experts[a] == chosen[c];
            if (seen) continue;
            experts[n_active] = chosen[c];
            first[n_active] = n;
            for (int64_t c2 = c; c2 < x.n_used * x.n_tokens; c2++) {
                if (chosen[c2] == chosen[c]) cols[n++] = c2;
            }
            n_cols[n_active] = n - first[n_active];
            n_active++;
        }
        first[n_active] = n;
    }
    ggml_cpu_barrier(params);

    const int R = GGML_REPACK_ROWS;
    const int64_t groups = x.N / R, nb = x.K / rt->blck;
    auto item = [&](int64_t it) {
        const int64_t a = it / groups, m0 = (it % groups) * R;
        const char * rows = (const char *) as->data + experts[a] * as->nb[2] + m0 * as->nb[1];
        for (int64_t k = first[a]; k < first[a] + n_cols[a]; k++) {
            const int64_t i = cols[k] % x.n_used, t = cols[k] / x.n_used;
            float * d = (float *) ((char *) dst->data + i * dst->nb[1] + t * dst->nb[2]) + m0;
            ggml_repack_gemm_cols(rt, nb, rows, conv + ((i % x.n_b) + x.n_b * t) * l.conv_row, l.conv_row, 1, d, 0);
        }
    };
    ggml_cpu_for_items(params, n_active * groups, item);
}

}  // namespace

size_t ggml_cpu_mul_mat_id_work_size(const struct ggml_tensor * node, int n_threads) {
    return layout_of(node, n_threads).total();
}

void ggml_cpu_forward_mul_mat_id(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * as = dst->src[0], * b = dst->src[1], * ids = dst->src[2];
    const IdDims x = dims_of(as, ids, b);
    const IdLayout l = layout_of(dst, params->nth);
    GGML_ASSERT(params->wsize >= l.total() && "mul_mat_id: work buffer too small");
    if (const ggml_repack_traits * rt = few_columns_traits(as, b, x)) {
        mul_mat_id_few_columns(params, dst, rt, l);
        return;
    }
    char * w = align_ptr(params->wdata);
    float * gathered = (float *) w;
    float * out = (float *) (w + l.gather);
    ggml_compute_params sub = *params;
    sub.wdata = w + l.gather + l.out;
    sub.wsize = l.sub;
    sub.prev = nullptr;  // the gathered columns change from expert to expert

    std::vector<int64_t> cols;  // (slot, token) pairs of this expert, as slot + n_used * token
    for (int64_t e = 0; e < x.n_as; e++) {
        cols.clear();
        for (int64_t t = 0; t < x.n_tokens; t++) {
            for (int64_t i = 0; i < x.n_used; i++) {
                const int32_t id = id_at(ids, i, t);
                GGML_ASSERT(id >= 0 && id < x.n_as && "mul_mat_id: an id outside [0, n_as)");
                if (id == e) cols.push_back(i + x.n_used * t);
            }
        }
        if (cols.empty()) continue;
        const int64_t cnt = (int64_t) cols.size();
        int64_t c0, c1;
        ggml_cpu_split_rows(cnt, params->ith, params->nth, &c0, &c1);
        for (int64_t c = c0; c < c1; c++) {
            const int64_t i = cols[(size_t) c] % x.n_used, t = cols[(size_t) c] / x.n_used;
            const char * src = (const char *) b->data + (i % x.n_b) * b->nb[1] + t * b->nb[2];
            float * d = gathered + c * x.K;
            if (b->nb[0] == sizeof(float)) memcpy(d, src, (size_t) x.K * sizeof(float));
            else for (int64_t k = 0; k < x.K; k++) memcpy(d + k, src + k * b->nb[0], sizeof(float));
        }
        ggml_cpu_barrier(params);
        SubMatMul s(as, e, cnt, gathered, out);
        ggml_cpu_forward_mul_mat(&sub, &s.d);
        ggml_cpu_barrier(params);
        for (int64_t c = c0; c < c1; c++) {
            const int64_t i = cols[(size_t) c] % x.n_used, t = cols[(size_t) c] / x.n_used;
            char * d = (char *) dst->data + i * dst->nb[1] + t * dst->nb[2];
            memcpy(d, out + c * x.N, (size_t) x.N * sizeof(float));
        }
        ggml_cpu_barrier(params);  // the buffers are the next expert's
    }
}

// Column (j, t) of the result: the sum over the slots i of token t with i % n_b == j of
// as[ids[i, t]]^T grad(i, t), each expert's rows dequantized one at a time and added with
// weight grad[n] in the order of n (tokens split between threads).
void ggml_cpu_forward_mul_mat_id_back(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * as = dst->src[0], * g = dst->src[1], * ids = dst->src[2];
    const int64_t K = as->ne[0], N = as->ne[1], n_as = as->ne[2], n_used = ids->ne[0], n_tokens = ids->ne[1];
    const int64_t n_b = dst->ne[1];
    GGML_ASSERT(g->type == GGML_TYPE_F32 && g->ne[0] == N && g->ne[1] == n_used && g->ne[2] == n_tokens);
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && ggml_is_contiguous(dst));
    const ggml_type_traits * tt = ggml_get_type_traits(as->type);
    GGML_ASSERT(as->type == GGML_TYPE_F32 || (tt && tt->to_float));
    // Repacked experts: a row is read from its 16-row group unpacked to the file's layout.
    const bool repacked = (as->flags & GGML_TENSOR_FLAG_REPACKED) != 0;
    std::vector<char> group(repacked ? (size_t) GGML_REPACK_ROWS * as->nb[1] : 0);
    int64_t group_at = -1;  // the group unpacked in group (expert * groups + group), -1: none
    std::vector<float> row((size_t) K);
    int64_t t0, t1;
    ggml_cpu_split_rows(n_tokens, params->ith, params->nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        float * out = (float *) ((char *) dst->data + t * dst->nb[2]);
        memset(out, 0, (size_t) (K * n_b) * sizeof(float));
        for (int64_t i = 0; i < n_used; i++) {
            const int32_t e = id_at(ids, i, t);
            GGML_ASSERT(e >= 0 && e < n_as && "mul_mat_id_back: an id outside [0, n_as)");
            float * o = out + (i % n_b) * K;
            const float * gr = (const float *) ((const char *) g->data + i * g->nb[1] + t * g->nb[2]);
            for (int64_t n = 0; n < N; n++) {
                const char * a_row = (const char *) as->data + n * as->nb[1] + e * as->nb[2];
                if (repacked) {
                    const int64_t g_no = n / GGML_REPACK_ROWS, key = e * (N / GGML_REPACK_ROWS) + g_no;
                    if (key != group_at) {
                        ggml_repack_unpack(as->type, (const char *) as->data + e * as->nb[2] + g_no * GGML_REPACK_ROWS * as->nb[1],
                                           group.data(), GGML_REPACK_ROWS, K);
                        group_at = key;
                    }
                    a_row = group.data() + (n % GGML_REPACK_ROWS) * as->nb[1];
                }
                const float * r;
                if (as->type == GGML_TYPE_F32) {
                    r = (const float *) a_row;
                } else {
                    tt->to_float(a_row, row.data(), K);
                    r = row.data();
                }
                const float s = gr[n];
                for (int64_t k = 0; k < K; k++) o[k] += s * r[k];
            }
        }
    }
}

// Rows split between threads; each row's indices sorted by value (stable: equal values keep
// index order), descending or ascending.
void ggml_cpu_forward_argsort(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_I32);
    const bool desc = ggml_get_op_params_i32(dst, 0) == GGML_SORT_ORDER_DESC;
    const int64_t ne0 = src->ne[0], n_rows = ggml_nrows(src);
    int64_t r0, r1;
    ggml_cpu_split_rows(n_rows, params->ith, params->nth, &r0, &r1);
    std::vector<int32_t> idx((size_t) ne0);
    std::vector<float> v((size_t) ne0);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % src->ne[1], i2 = (r / src->ne[1]) % src->ne[2], i3 = r / (src->ne[1] * src->ne[2]);
        const char * x = (const char *) src->data + i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
        for (int64_t k = 0; k < ne0; k++) memcpy(&v[(size_t) k], x + k * src->nb[0], sizeof(float));
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return desc ? v[(size_t) a] > v[(size_t) b] : v[(size_t) a] < v[(size_t) b]; });
        char * y = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t k = 0; k < ne0; k++) memcpy(y + k * dst->nb[0], &idx[(size_t) k], sizeof(int32_t));
    }
}
