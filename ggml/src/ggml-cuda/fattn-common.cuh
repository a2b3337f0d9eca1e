// fattn-common.cuh - what the flash attention kernels share (fattn.cu: the forward for any cache
// type and its gradient; fattn-mma.cu: prompts on tensor cores): a node's operands and
// parameters as kernel arguments.
#pragma once

#include "common.cuh"
#include "quant.cuh"

// Rows of t (n elements each) allow 16-byte loads: plain float types, aligned data and strides.
static inline bool rows_vec(const ggml_tensor * t, int64_t n) {
    if (!is_float_type(t->type)) return false;
    const int64_t per16 = 16 / (int64_t) ggml_type_size(t->type);
    return n % per16 == 0 && (uintptr_t) t->data % 16 == 0 && t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 && t->nb[3] % 16 == 0;
}

struct FaArgs {
    tview q, k, v, mask;
    float * dst;
    int64_t D, Dv, n_q, n_kv, H, G;  // G: query heads per kv head
    float scale, max_bias, softcap;
    int has_mask;
    int k_vec;        // key rows allow 16-byte loads
    int n_split;      // key ranges per query row (split-KV: generation has few rows to spread)
    int64_t chunk;    // keys per range (a multiple of 32)
    float * partial;  // n_split > 1: per (row, range) max, sum and unnormalized output [Dv]
    ActArgs act;      // act.qs not nullptr: the output rows quantized for the output projection (Q8_0 units;
                      // Q8_K blocks of several heads: finish_head_row)
    int * group_done; // Q8_K: zeroed counters, one per block of 256 output values (ggml_cuda_ctx::group_done)
};

// The operands and parameters of a flash_attn_ext or flash_attn_back node (the same sources).
static inline FaArgs fa_args(const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * mask = dst->src[3];
    FaArgs a = {};
    a.q = make_view(q);
    a.k = make_view(k);
    a.v = make_view(v);
    a.has_mask = mask != nullptr;
    a.mask = mask ? make_view(mask) : unit_view(GGML_TYPE_F32);
    a.dst = (float *) dst->data;
    a.D = q->ne[0];
    a.Dv = v->ne[0];
    a.n_q = q->ne[1];
    a.H = q->ne[2];
    a.G = q->ne[2] / k->ne[2];
    a.n_kv = k->ne[1];
    a.scale = ggml_get_op_params_f32(dst, 0);
    a.max_bias = ggml_get_op_params_f32(dst, 1);
    a.softcap = ggml_get_op_params_f32(dst, 2);
    a.k_vec = rows_vec(k, a.D);
    a.n_split = 1;
    return a;
}

// flash_attn_back (fattn.cu's equations): the forward's operands, dO, the three gradients and the
// rows' softmax statistics.
struct FaBackArgs {
    FaArgs f;
    const float * dO;                   // [Dv, H, n_q, B], contiguous
    float * dq, * dk, * dv;             // the three gradients, packed in dst
    float * stats;                      // per query row (i3, h, iq): max logit, 1 / sum, D
    int q_vec, v_vec, do_vec;           // 16-byte loads of q rows, v rows, dO rows
};

struct Logit {
    float s;   // the logit (q.k scaled or soft-capped, plus the slope times the mask)
    float ds;  // its derivative in q.k
};

static __device__ __forceinline__ Logit fa_logit(const FaArgs & a, float dot, float mv) {
    if (a.softcap > 0.0f) {
        const float t = tanhf(dot * a.scale / a.softcap);
        return { a.softcap * t + mv, a.scale * (1.0f - t * t) };
    }
    return { dot * a.scale + mv, a.scale };
}

static __device__ __forceinline__ const float * fa_stats(const FaBackArgs & b, int64_t iq, int64_t h, int64_t i3) {
    return b.stats + ((i3 * b.f.H + h) * b.f.n_q + iq) * 3;
}
