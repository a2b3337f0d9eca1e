// llama-graph.cpp - the forward graph of a micro-batch: inputs, where attention's keys and values
// come from (the KV cache for inference, the batch itself for training, so the graph can be
// differentiated), the pieces every family's block is made of (llm_graph_builder), and the
// dispatch to the family's builder (llama-build-*.cpp). Attention is grouped-query: query head
// h uses KV head h / (n_head / n_head_kv), which is how mul_mat broadcasts a's planes over b's.
#include "llama-graph.h"
#include "llama-adapter.h"
#include "llama-graph-build.h"
#include "llama-kv-cache.h"
#include "llama-model.h"

#include <cmath>

namespace {

// Rotates already rotated keys by a position delta: R(p + delta) = R(delta) R(p), so the
// rotation must not scale magnitudes again (YaRN's factor, the file's attention factor).
ggml_tensor * rope_shift(ggml_context * ctx, const llama_model & model, const llm_rope_params & rp, int il,
                         ggml_tensor * k, ggml_tensor * delta, bool inplace) {
    const llama_hparams & hp = model.hparams;
    const float attn_factor = rp.ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * logf(1.0f / rp.freq_scale)) : 1.0f;
    const bool local = hp.is_swa((uint32_t) il) && hp.rope_freq_base_swa > 0.0f;
    auto fn = inplace ? ggml_rope_ext_inplace : ggml_rope_ext;
    return fn(ctx, k, delta, rp.freq_factors, (int) hp.n_rot, hp.rope_type, (int) rp.n_ctx_orig,
              local ? hp.rope_freq_base_swa : rp.freq_base, local ? 1.0f : rp.freq_scale, rp.ext_factor, attn_factor,
              rp.beta_fast, rp.beta_slow);
}

// Writes this batch's keys and values into layer il's cache, at the cells io.kv_idxs names.
// The writes are expanded into the graph here, before any node that reads the cache.
void store_kv(ggml_context * ctx, ggml_cgraph * gf, const llama_kv_cache & kv, int il, ggml_tensor * k_cur,
              ggml_tensor * v_cur, uint32_t n_tokens, llm_graph_io & io) {
    auto rows = [&](ggml_tensor * t, int64_t n_embd) {  // F32 [n_embd, n_tokens]
        if (!ggml_is_contiguous(t)) t = ggml_cont(ctx, t);
        return ggml_reshape_2d(ctx, t, n_embd, n_tokens);
    };
    ggml_build_forward_expand(gf, ggml_set_rows(ctx, kv.k_l[il], rows(k_cur, kv.n_embd_k_gqa), io.kv_idxs));

    ggml_tensor * v_cache = kv.v_l[il];
    ggml_tensor * v = rows(v_cur, kv.n_embd_v_gqa);
    if (kv.v_trans) {
        // Cell c of dimension d is element c of row d: each (cell, dimension) is a row of one value.
        GGML_ASSERT(v_cache->ne[1] == kv.n_embd_v_gqa);
        ggml_tensor * dst = ggml_view_3d(ctx, v_cache, 1, v_cache->ne[0], kv.n_embd_v_gqa, ggml_element_size(v_cache), v_cache->nb[1], 0);
        ggml_tensor * src = ggml_view_3d(ctx, v, 1, n_tokens, kv.n_embd_v_gqa, v->nb[1], v->nb[0], 0);
        ggml_build_forward_expand(gf, ggml_set_rows(ctx, dst, src, io.kv_idxs));
    } else {
        ggml_build_forward_expand(gf, ggml_set_rows(ctx, v_cache, v, io.kv_idxs));
    }
}

// softmax(kq_scale K^T q (soft-capped) + mask) V for q [head_k, n_head, n_tokens], keys k [head_k,
// n_kv, n_head_kv] and values v [n_kv, head_v, n_head_kv]; returns [n_head * head_v, n_tokens].
ggml_tensor * attend(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * kq_mask,
                     float kq_scale, float softcap, uint32_t n_tokens) {
    const int64_t n_head = q->ne[1], head_v = v->ne[1];
    q = ggml_permute(ctx, q, 0, 2, 1, 3);  // [head_k, n_tokens, n_head]
    ggml_tensor * kq = ggml_mul_mat(ctx, k, q);  // [n_kv, n_tokens, n_head]
    if (softcap > 0.0f) {
        kq = ggml_scale(ctx, ggml_tanh(ctx, ggml_scale(ctx, kq, kq_scale / softcap)), softcap);
        kq_scale = 1.0f;
    }
    kq = ggml_soft_max_ext(ctx, kq, kq_mask, kq_scale, 0.0f);
    ggml_tensor * kqv = ggml_mul_mat(ctx, v, kq);  // [head_v, n_tokens, n_head]
    kqv = ggml_permute(ctx, kqv, 0, 2, 1, 3);     // [head_v, n_head, n_tokens]
    return ggml_cont_2d(ctx, kqv, head_v * n_head, n_tokens);
}

// The same with the fused op (ggml_flash_attn_ext): keys k [head_k, n_kv, n_head_kv] and values v
// [head_v, n_kv, n_head_kv] with contiguous rows of any cache type; no score matrix is kept, and
// a causal mask skips the hidden blocks.
ggml_tensor * attend_fused(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * kq_mask,
                           float kq_scale, float softcap, uint32_t n_tokens) {
    const int64_t n_head = q->ne[1], head_v = v->ne[0];
    ggml_tensor * o = ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), k, v, kq_mask, kq_scale, 0.0f, softcap);
    return ggml_reshape_2d(ctx, o, head_v * n_head, n_tokens);  // [head_v, n_head, n_tokens] in memory
}

// Rows idx (I32 [n]) of a cache tensor [n_embd, size], copied as they are: get_rows on the cache
// seen as I32 (get_rows itself converts to F32), the result seen as the cache's type again.
ggml_tensor * gather_rows(ggml_context * ctx, ggml_tensor * cache, ggml_tensor * idx) {
    const size_t row = cache->nb[1];
    if (cache->type == GGML_TYPE_F32) return ggml_get_rows(ctx, cache, idx);
    if (row % sizeof(int32_t) != 0) return ggml_cast(ctx, ggml_get_rows(ctx, cache, idx), cache->type);  // exact
    ggml_tensor * raw = ggml_get_rows(ctx, ggml_view_2d_as(ctx, cache, GGML_TYPE_I32, (int64_t) (row / 4), cache->ne[1]), idx);
    return ggml_view_2d_as(ctx, raw, cache->type, cache->ne[0], idx->ne[0]);
}

// Attention by groups (llm_attn_groups): q [head_k, n_head, n_tokens]; k_cache, v_cache the
// layer's cache, one row per cell (any type); mask g.mask or
// g.mask_swa. Returns [n_head * head_v, n_tokens] in the batch's token order.
ggml_tensor * attend_grouped(ggml_context * ctx, const llm_attn_groups & g, ggml_tensor * q, ggml_tensor * k_cache,
                             ggml_tensor * v_cache, ggml_tensor * mask, int64_t head_k, int64_t head_v, int64_t n_head_kv,
                             float kq_scale, float softcap, uint32_t n_tokens) {
    const int64_t n_head = q->ne[1], n_g = g.n_groups, n_tq = g.n_tq, n_kc = g.n_kc;
    if (!ggml_is_contiguous(q)) q = ggml_cont(ctx, q);
    ggml_tensor * qg = ggml_get_rows(ctx, ggml_reshape_2d(ctx, q, head_k * n_head, n_tokens), g.q_rows);
    qg = ggml_permute(ctx, ggml_reshape_4d(ctx, qg, head_k, n_head, n_tq, n_g), 0, 2, 1, 3);  // [head_k, n_tq, n_head, n_g]
    // The gathered rows keep the cache's type, so that the products round the queries and the
    // probabilities as the ordinary path does (to F16 for an F16 cache, to the K type's
    // dot-product type): a sequence gives the same logits alone or among others.
    ggml_tensor * kg = gather_rows(ctx, k_cache, g.kv_rows);  // [n_embd_k_gqa, n_kc * n_g]
    kg = ggml_permute(ctx, ggml_reshape_4d(ctx, kg, head_k, n_head_kv, n_kc, n_g), 0, 2, 1, 3);  // [head_k, n_kc, n_head_kv, n_g]
    ggml_tensor * vg = gather_rows(ctx, v_cache, g.kv_rows);  // [n_embd_v_gqa, n_kc * n_g]
    if (ggml_is_quantized(vg->type)) vg = ggml_cast(ctx, vg, GGML_TYPE_F32);  // as the ordinary path
    vg = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, vg, head_v, n_head_kv, n_kc, n_g), 1, 2, 0, 3));  // [n_kc, head_v, n_head_kv, n_g]
    ggml_tensor * kq = ggml_mul_mat(ctx, kg, qg);  // [n_kc, n_tq, n_head, n_g]
    if (softcap > 0.0f) {
        kq = ggml_scale(ctx, ggml_tanh(ctx, ggml_scale(ctx, kq, kq_scale / softcap)), softcap);
        kq_scale = 1.0f;
    }
    kq = ggml_soft_max_ext(ctx, kq, mask, kq_scale, 0.0f);
    ggml_tensor * kqv = ggml_mul_mat(ctx, vg, kq);  // [head_v, n_tq, n_head, n_g]
    kqv = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), head_v * n_head, n_tq * n_g);
    return ggml_get_rows(ctx, kqv, g.out_rows);
}

// The cache: this batch's keys and values go to the cells io.kv_idxs names; attention reads
// cells [0, n_kv), or each group of tokens its own sequence's cells (io.groups).
struct kv_cache_source : llm_kv_source {
    ggml_context * ctx;
    ggml_cgraph * gf;
    const llama_model & model;
    const llama_kv_cache & kv;
    uint32_t n_tokens, n_kv;
    llm_graph_io & io;

    kv_cache_source(ggml_context * ctx, ggml_cgraph * gf, const llama_model & model, const llama_kv_cache & kv,
                    uint32_t n_tokens, uint32_t n_kv, llm_graph_io & io)
        : ctx(ctx), gf(gf), model(model), kv(kv), n_tokens(n_tokens), n_kv(n_kv), io(io) {}

    void put(int il, ggml_tensor * k, ggml_tensor * v) override { store_kv(ctx, gf, kv, il, k, v, n_tokens, io); }

    ggml_tensor * attention(int il, ggml_tensor * q, ggml_tensor * kq_mask, float kq_scale, float softcap) override {
        const llama_hparams & hp = model.hparams;
        const int64_t head_k = hp.n_embd_head_k, head_v = hp.n_embd_head_v, n_head_kv = hp.n_head_kv;
        ggml_tensor * k_cache = kv.k_l[il], * v_cache = kv.v_l[il];
        if (io.groups.n_groups > 0) {
            ggml_tensor * mask = kq_mask == io.kq_mask_swa ? io.groups.mask_swa : io.groups.mask;
            return attend_grouped(ctx, io.groups, q, k_cache, v_cache, mask, head_k, head_v, n_head_kv, kq_scale, softcap, n_tokens);
        }
        ggml_tensor * k = ggml_view_3d(ctx, k_cache, head_k, n_kv, n_head_kv, k_cache->nb[1], ggml_row_size(k_cache->type, head_k), 0);
        if (kv.flash_attn) {
            // K and V read as stored (F16, Q8_0, ...).
            ggml_tensor * v = ggml_view_3d(ctx, v_cache, head_v, n_kv, n_head_kv, v_cache->nb[1], ggml_row_size(v_cache->type, head_v), 0);
            return attend_fused(ctx, q, k, v, kq_mask, kq_scale, softcap, n_tokens);
        }
        ggml_tensor * v;  // [n_kv, head_v, n_head_kv]
        if (kv.v_trans) {
            v = ggml_view_3d(ctx, v_cache, n_kv, head_v, n_head_kv, v_cache->nb[1], v_cache->nb[1] * head_v, 0);
        } else {
            // V stored as rows (a block type, or several sequences): the used cells transposed,
            // a block type converted to F32 first (F16 stays F16: the product rounds as above).
            ggml_tensor * vq = ggml_view_2d(ctx, v_cache, kv.n_embd_v_gqa, n_kv, v_cache->nb[1], 0);
            if (ggml_is_quantized(v_cache->type)) vq = ggml_cast(ctx, vq, GGML_TYPE_F32);
            v = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, vq, head_v, n_head_kv, n_kv), 1, 2, 0, 3));
        }
        return attend(ctx, q, k, v, kq_mask, kq_scale, softcap, n_tokens);
    }
};

// The batch's own keys and values: token t attends to the batch's tokens (the mask decides which).
struct kv_batch_source : llm_kv_source {
    ggml_context * ctx;
    const llama_model & model;
    uint32_t n_tokens;
    ggml_tensor * k = nullptr, * v = nullptr;

    kv_batch_source(ggml_context * ctx, const llama_model & model, uint32_t n_tokens)
        : ctx(ctx), model(model), n_tokens(n_tokens) {}

    void put(int, ggml_tensor * k_cur, ggml_tensor * v_cur) override {
        k = k_cur;
        v = v_cur;
    }

    // Always the fused op: it keeps no score matrix for the backward pass.
    ggml_tensor * attention(int, ggml_tensor * q, ggml_tensor * kq_mask, float kq_scale, float softcap) override {
        const llama_hparams & hp = model.hparams;
        const int64_t head_v = hp.n_embd_head_v, n_head_kv = hp.n_head_kv;
        ggml_tensor * kt = ggml_permute(ctx, k, 0, 2, 1, 3);  // [head_k, n_tokens, n_head_kv]
        ggml_tensor * vt = ggml_permute(ctx, ggml_reshape_3d(ctx, v, head_v, n_head_kv, n_tokens), 0, 2, 1, 3);
        return attend_fused(ctx, q, kt, vt, kq_mask, kq_scale, softcap, n_tokens);
    }
};

// The inputs: tokens, positions, the masks [n_kv, n_tokens], and the ids of the tokens that get
// logits when only some of them do.
void make_inputs(ggml_context * ctx, const llama_model & model, llm_graph_io & io, uint32_t n_tokens, uint32_t n_kv,
                 uint32_t n_outputs) {
    const bool want_embd = io.want_embd;  // the caller's choices; the rest starts afresh
    const llm_attn_groups groups = io.groups;
    io = llm_graph_io();
    io.want_embd = want_embd;
    io.groups.n_groups = groups.n_groups;
    io.groups.n_tq = groups.n_tq;
    io.groups.n_kc = groups.n_kc;
    io.tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_set_name(io.tokens, "inp_tokens");
    ggml_set_input(io.tokens);
    io.pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_set_name(io.pos, "inp_pos");
    ggml_set_input(io.pos);
    io.kq_mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, n_tokens);
    ggml_set_name(io.kq_mask, "kq_mask");
    ggml_set_input(io.kq_mask);
    if (model.hparams.n_swa > 0) {
        io.kq_mask_swa = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, n_tokens);
        ggml_set_name(io.kq_mask_swa, "kq_mask_swa");
        ggml_set_input(io.kq_mask_swa);
    }
    if (n_outputs > 0 && n_outputs < n_tokens) {
        io.out_ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_outputs);
        ggml_set_name(io.out_ids, "inp_out_ids");
        ggml_set_input(io.out_ids);
    }
}

void build_family(llm_graph_builder & b) {
    switch (b.model.arch) {
        case LLM_ARCH_LLAMA:
        case LLM_ARCH_QWEN2:
        case LLM_ARCH_QWEN3:
        case LLM_ARCH_PHI3:
        case LLM_ARCH_QWEN2MOE:
        case LLM_ARCH_QWEN3MOE: llm_build_llama(b); break;
        case LLM_ARCH_GEMMA2:
        case LLM_ARCH_GEMMA3: llm_build_gemma(b); break;
        case LLM_ARCH_BERT: llm_build_bert(b); break;
        case LLM_ARCH_NOMIC_BERT: llm_build_nomic_bert(b); break;
        case LLM_ARCH_UNKNOWN: GGML_ABORT("no graph for a vocabulary-only model");
    }
}

}  // namespace

// ---- the shared pieces ---------------------------------------------------------------------

ggml_tensor * llm_graph_builder::inp_embd() {
    ggml_tensor * x = ggml_get_rows(ctx, model.tok_embd, io.tokens);  // [n_embd, n_tokens]
    return hp.embd_scale > 0.0f ? ggml_scale(ctx, x, hp.embd_scale) : x;
}

ggml_tensor * llm_graph_builder::rms_norm(ggml_tensor * x, ggml_tensor * weight) {
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, hp.f_norm_rms_eps), weight);
}

ggml_tensor * llm_graph_builder::layer_norm(ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias) {
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, hp.f_norm_eps), weight), bias);
}

// The scale goes on A x ([r, n_tokens]), the small end; A x is a checkpoint (training).
ggml_tensor * llm_graph_builder::mm(ggml_tensor * w, ggml_tensor * x) {
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    if (!lora) return y;
    if (lora->base_prec != GGML_PREC_DEFAULT) ggml_mul_mat_set_prec(y, lora->base_prec);
    for (const llm_lora_entry & e : lora->entries) {
        const llama_adapter_lora_weight * lw = e.adapter->get(w);
        if (!lw || e.scale == 0.0f) continue;
        ggml_tensor * xin = x;
        if (lora->dropout) {
            ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1]);
            ggml_format_name(mask, "lora_dropout_%d", (int) io.lora_masks.size());
            ggml_set_input(mask);
            io.lora_masks.push_back(mask);
            xin = ggml_mul(ctx, x, mask);
        }
        ggml_tensor * ax = ggml_scale(ctx, ggml_mul_mat(ctx, lw->a, xin), e.adapter->effective_scale(*lw, e.scale));
        io.matmul_out.push_back(ax);
        y = ggml_add(ctx, y, ggml_mul_mat(ctx, lw->b, ax));
    }
    return y;
}

ggml_tensor * llm_graph_builder::linear(ggml_tensor * w, ggml_tensor * b, ggml_tensor * x) {
    ggml_tensor * y = mm(w, x);
    return b ? ggml_add(ctx, y, b) : y;
}

ggml_tensor * llm_graph_builder::rope(ggml_tensor * x, int il) {
    // Gemma 3's local layers rotate with their own base and no scaling.
    const bool local = hp.is_swa((uint32_t) il) && hp.rope_freq_base_swa > 0.0f;
    return ggml_rope_ext(ctx, x, io.pos, rope_p.freq_factors, (int) hp.n_rot, hp.rope_type, (int) rope_p.n_ctx_orig,
                         local ? hp.rope_freq_base_swa : rope_p.freq_base, local ? 1.0f : rope_p.freq_scale,
                         rope_p.ext_factor, rope_p.attn_factor, rope_p.beta_fast, rope_p.beta_slow);
}

void llm_graph_builder::expand_together(std::initializer_list<ggml_tensor *> ts) {
    for (ggml_tensor * t : ts) {
        if (t) ggml_build_forward_expand(gf, t);
    }
}

ggml_tensor * llm_graph_builder::attention(int il, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v) {
    src.put(il, k, v);
    io.matmul_out.insert(io.matmul_out.end(), {q, k, v});
    const float scale = hp.f_attention_scale > 0.0f ? hp.f_attention_scale : 1.0f / sqrtf((float) hp.n_embd_head_k);
    ggml_tensor * mask = hp.is_swa((uint32_t) il) ? io.kq_mask_swa : io.kq_mask;
    ggml_tensor * out = src.attention(il, q, mask, scale, hp.f_attn_logit_softcapping);
    io.matmul_out.push_back(out);  // the input of wo, which its adapter's gradient reads
    return out;
}

ggml_tensor * llm_graph_builder::self_attention(int il, ggml_tensor * x) {
    const llama_layer & L = model.layers[(size_t) il];
    const int64_t head_k = hp.n_embd_head_k, n_q = head_k * hp.n_head;
    const int64_t n_k = hp.n_embd_k_gqa(), n_v = hp.n_embd_v_gqa();
    const bool want_q = !kv_only(il);
    ggml_tensor * q = nullptr, * k, * v;
    if (L.wqkv) {
        // One product, then views of its rows: Q, K, V.
        ggml_tensor * qkv = mm(L.wqkv, x);
        io.matmul_out.push_back(qkv);
        const size_t es = ggml_element_size(qkv);
        q = ggml_view_2d(ctx, qkv, n_q, n_tokens, qkv->nb[1], 0);
        k = ggml_view_2d(ctx, qkv, n_k, n_tokens, qkv->nb[1], es * n_q);
        v = ggml_cont(ctx, ggml_view_2d(ctx, qkv, n_v, n_tokens, qkv->nb[1], es * (n_q + n_k)));
        q = ggml_reshape_3d(ctx, ggml_cont(ctx, q), head_k, hp.n_head, n_tokens);
        k = ggml_reshape_3d(ctx, ggml_cont(ctx, k), head_k, hp.n_head_kv, n_tokens);
    } else {
        k = linear(L.wk, L.bk, x);
        v = linear(L.wv, L.bv, x);
        if (want_q) q = linear(L.wq, L.bq, x);
        expand_together({k, v, q});
        k = ggml_reshape_3d(ctx, k, head_k, hp.n_head_kv, n_tokens);
        if (q) q = ggml_reshape_3d(ctx, q, head_k, hp.n_head, n_tokens);
    }
    // Per-head RMS norms of queries and keys (Qwen3, Gemma 3), before the rotation.
    if (L.attn_k_norm) k = rms_norm(k, L.attn_k_norm);
    if (q && L.attn_q_norm) q = rms_norm(q, L.attn_q_norm);
    k = rope(k, il);
    if (!want_q) {
        src.put(il, k, v);
        return nullptr;
    }
    q = rope(q, il);
    return mm(L.wo, attention(il, q, k, v));
}

ggml_tensor * llm_graph_builder::ffn(int il, ggml_tensor * x, llm_ffn_act act) {
    const llama_layer & L = model.layers[(size_t) il];
    ggml_tensor * gate, * up;
    if (L.ffn_gate_up) {
        // Gate and up stacked: the first n_ff rows of the product are the gate.
        ggml_tensor * gu = mm(L.ffn_gate_up, x);
        const int64_t n_ff = hp.n_ff;
        gate = ggml_cont(ctx, ggml_view_2d(ctx, gu, n_ff, gu->ne[1], gu->nb[1], 0));
        up = ggml_cont(ctx, ggml_view_2d(ctx, gu, n_ff, gu->ne[1], gu->nb[1], ggml_element_size(gu) * n_ff));
        io.matmul_out.push_back(gu);
    } else {
        gate = mm(L.ffn_gate, x);
        up = mm(L.ffn_up, x);
        expand_together({gate, up});
        io.matmul_out.insert(io.matmul_out.end(), {gate, up});
    }
    gate = act == llm_ffn_act::silu ? ggml_silu(ctx, gate) : ggml_gelu(ctx, gate);
    return mm(L.ffn_down, ggml_mul(ctx, gate, up));
}

ggml_tensor * llm_graph_builder::moe_ffn(int il, ggml_tensor * x) {
    const llama_layer & L = model.layers[(size_t) il];
    const int64_t n_embd = x->ne[0], n_tok = x->ne[1], n_expert = hp.n_expert, k = hp.n_expert_used;
    ggml_tensor * probs = ggml_soft_max(ctx, mm(L.ffn_gate_inp, x));  // [n_expert, n_tok]
    ggml_tensor * chosen = ggml_cont(ctx, ggml_top_k(ctx, probs, (int) k));  // I32 [k, n_tok]
    ggml_tensor * w = ggml_get_rows(ctx, ggml_reshape_3d(ctx, probs, 1, n_expert, n_tok), chosen);  // [1, k, n_tok]
    if (hp.expert_weights_norm) {
        ggml_tensor * w2 = ggml_reshape_2d(ctx, w, k, n_tok);
        w = ggml_reshape_3d(ctx, ggml_div(ctx, w2, ggml_sum_rows(ctx, w2)), 1, k, n_tok);
    }
    ggml_tensor * x3 = ggml_reshape_3d(ctx, x, n_embd, 1, n_tok);
    ggml_tensor * gate = ggml_mul_mat_id(ctx, L.ffn_gate_exps, x3, chosen);  // [n_ff_exp, k, n_tok]
    ggml_tensor * up = ggml_mul_mat_id(ctx, L.ffn_up_exps, x3, chosen);
    expand_together({gate, up});
    ggml_tensor * experts = ggml_mul_mat_id(ctx, L.ffn_down_exps, ggml_mul(ctx, ggml_silu(ctx, gate), up), chosen);
    experts = ggml_mul(ctx, experts, w);  // [n_embd, k, n_tok]
    ggml_tensor * out = nullptr;
    for (int64_t i = 0; i < k; i++) {
        ggml_tensor * e = ggml_view_2d(ctx, experts, n_embd, n_tok, experts->nb[2], (size_t) i * experts->nb[1]);
        out = out ? ggml_add(ctx, out, e) : ggml_cont(ctx, e);
    }
    if (L.ffn_gate_inp_shexp) {
        ggml_tensor * sg = mm(L.ffn_gate_shexp, x), * su = mm(L.ffn_up_shexp, x);
        expand_together({sg, su});
        ggml_tensor * shared = mm(L.ffn_down_shexp, ggml_mul(ctx, ggml_silu(ctx, sg), su));
        shared = ggml_mul(ctx, shared, ggml_sigmoid(ctx, mm(L.ffn_gate_inp_shexp, x)));  // [1, n_tok] gate
        out = ggml_add(ctx, out, shared);
    }
    return out;
}

void llm_graph_builder::keep_outputs(int il, ggml_tensor *& cur, ggml_tensor *& residual) {
    if (il + 1 != (int) hp.n_layer || !io.out_ids) return;
    cur = ggml_get_rows(ctx, cur, io.out_ids);
    residual = ggml_get_rows(ctx, residual, io.out_ids);
}

void llm_graph_builder::output(ggml_tensor * x) {
    if (!logits) return;
    ggml_tensor * cur = model.output_norm ? rms_norm(x, model.output_norm) : x;
    if (io.want_embd || !model.output) {  // (an encoder has no head: its contexts decode only with embeddings)
        io.embd = cur;  // [n_embd, n_outputs]
        ggml_set_name(io.embd, "result_norm");
        ggml_set_output(io.embd);
        ggml_build_forward_expand(gf, io.embd);
        return;
    }
    cur = mm(model.output, cur);  // [n_vocab, n_outputs]
    if (hp.f_final_logit_softcapping > 0.0f) {
        const float c = hp.f_final_logit_softcapping;
        cur = ggml_scale(ctx, ggml_tanh(ctx, ggml_scale(ctx, cur, 1.0f / c)), c);
    }
    io.logits = cur;
    ggml_set_name(io.logits, "logits");
    ggml_set_output(io.logits);
    ggml_build_forward_expand(gf, io.logits);
}

llm_rope_params llm_rope_from_model(const llama_model & model, uint32_t n_ctx_seq) {
    const llama_hparams & hp = model.hparams;
    llm_rope_params r;
    r.freq_base = hp.rope_freq_base;
    r.freq_scale = hp.rope_scaling == LLAMA_ROPE_SCALING_TYPE_NONE ? 1.0f : hp.rope_freq_scale;
    r.ext_factor = hp.rope_yarn_ext_factor;
    r.attn_factor = hp.rope_attn_factor;
    r.beta_fast = hp.rope_yarn_beta_fast;
    r.beta_slow = hp.rope_yarn_beta_slow;
    r.n_ctx_orig = hp.rope_n_ctx_orig ? hp.rope_n_ctx_orig : hp.n_ctx_train;
    r.freq_factors = model.rope_freqs ? model.rope_freqs : model.rope_short;
    // LongRoPE: the long factors when a sequence's share of the context exceeds the original
    // context (llama.cpp's rule), else the short ones.
    if (model.rope_long && n_ctx_seq > r.n_ctx_orig) r.freq_factors = model.rope_long;
    return r;
}

void llm_mask_window(const llama_model & model, float * row, const int32_t * cell_pos, uint32_t n_cells, int32_t p) {
    const int64_t n_swa = model.hparams.n_swa;
    const float neg_inf = -INFINITY;
    for (uint32_t c = 0; c < n_cells; c++) {
        if ((int64_t) p - cell_pos[c] >= n_swa) row[c] = neg_inf;
    }
}

// Each adapter adds at most 5 nodes (mask, A, B, scale, add) to each of 7 projections a layer.
size_t llm_graph_max_nodes(const llama_model & model, size_t n_lora) {
    return (80 + 40 * n_lora) * (size_t) model.hparams.n_layer + 256 + 8 * n_lora;
}

size_t llm_graph_max_nodes_train(const llama_model & model, size_t n_lora) { return 6 * llm_graph_max_nodes(model, n_lora); }

ggml_cgraph * llm_build_forward(ggml_context * ctx, const llama_model & model, const llama_kv_cache & kv,
                                uint32_t n_tokens, uint32_t n_kv, uint32_t n_outputs, llm_graph_io & io,
                                const llm_lora_set * lora, const llm_rope_params * rope) {
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, llm_graph_max_nodes(model, lora ? lora->entries.size() : 0), false);
    make_inputs(ctx, model, io, n_tokens, n_kv, n_outputs);
    io.kv_idxs = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_set_name(io.kv_idxs, "inp_kv_idxs");
    ggml_set_input(io.kv_idxs);
    llm_attn_groups & g = io.groups;
    if (g.n_groups > 0) {
        GGML_ASSERT(!kv.v_trans && "attention by groups reads V as rows");
        const auto input = [&](ggml_tensor * t, const char * name) {
            ggml_set_name(t, name);
            ggml_set_input(t);
            return t;
        };
        g.q_rows = input(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, (int64_t) g.n_tq * g.n_groups), "inp_group_q_rows");
        g.kv_rows = input(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, (int64_t) g.n_kc * g.n_groups), "inp_group_kv_rows");
        g.out_rows = input(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens), "inp_group_out_rows");
        g.mask = input(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, g.n_kc, g.n_tq, 1, g.n_groups), "group_kq_mask");
        if (model.hparams.n_swa > 0) {
            g.mask_swa = input(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, g.n_kc, g.n_tq, 1, g.n_groups), "group_kq_mask_swa");
        }
    }
    kv_cache_source src(ctx, gf, model, kv, n_tokens, n_kv, io);
    const llm_rope_params rp = rope ? *rope : llm_rope_from_model(model);
    llm_graph_builder b{ctx, gf, model, model.hparams, rp, n_tokens, n_outputs > 0, io, src,
                        lora && !lora->empty() ? lora : nullptr};
    build_family(b);
    return gf;
}

ggml_cgraph * llm_build_forward_train(ggml_context * ctx, const llama_model & model, uint32_t n_tokens, llm_graph_io & io,
                                      const llm_lora_set * lora) {
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, llm_graph_max_nodes_train(model, lora ? lora->entries.size() : 0), true);
    make_inputs(ctx, model, io, n_tokens, n_tokens, n_tokens);
    kv_batch_source src(ctx, model, n_tokens);
    const llm_rope_params rp = llm_rope_from_model(model, n_tokens);  // the batch is the sequence's context
    llm_graph_builder b{ctx, gf, model, model.hparams, rp, n_tokens, true, io, src, lora && !lora->empty() ? lora : nullptr};
    build_family(b);
    return gf;
}

ggml_cgraph * llm_build_k_shift(ggml_context * ctx, const llama_model & model, const llama_kv_cache & kv,
                                uint32_t n_cells, ggml_tensor ** deltas, const llm_rope_params * rope) {
    const llama_hparams & hp = model.hparams;
    const int64_t head_k = hp.n_embd_head_k, n_head_kv = hp.n_head_kv;
    const llm_rope_params rp = rope ? *rope : llm_rope_from_model(model);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, llm_graph_max_nodes(model), false);

    ggml_tensor * d = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_cells);
    ggml_set_name(d, "inp_k_shift");
    ggml_set_input(d);
    *deltas = d;

    for (uint32_t il = 0; il < hp.n_layer; il++) {
        ggml_tensor * k_cache = kv.k_l[il];
        if (!ggml_is_quantized(k_cache->type)) {
            ggml_tensor * k = ggml_view_3d(ctx, k_cache, head_k, n_head_kv, n_cells,
                                           ggml_row_size(k_cache->type, head_k), k_cache->nb[1], 0);
            ggml_build_forward_expand(gf, rope_shift(ctx, model, rp, (int) il, k, d, true));
        } else {
            // Block types: dequantize, rotate, quantize back.
            ggml_tensor * kq = ggml_view_2d(ctx, k_cache, kv.n_embd_k_gqa, n_cells, k_cache->nb[1], 0);
            ggml_tensor * kf = ggml_reshape_3d(ctx, ggml_cast(ctx, kq, GGML_TYPE_F32), head_k, n_head_kv, n_cells);
            ggml_tensor * r = rope_shift(ctx, model, rp, (int) il, kf, d, false);
            ggml_build_forward_expand(gf, ggml_cpy(ctx, r, kq));
        }
    }
    return gf;
}
