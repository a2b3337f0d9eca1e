// llama-graph.cpp - builds the llama forward graph from ggml ops:
//   x = embeddings
//   per layer: h = x + Wo attn(rope(Wq n(x)), rope(Wk n(x)), Wv n(x)),  n = RMSNorm * weight
//              x = h + Wdown (silu(Wgate n(h)) * Wup n(h))
//   logits = Wout n(x)
// Attention is grouped-query: query head h uses KV head h / (n_head / n_head_kv), which is how
// mul_mat broadcasts a's planes over b's. Inference reads keys and values from the KV cache;
// training (llm_build_forward_train) uses the batch's own, so the graph can be differentiated.
// Both share everything else (build_transformer).
#include "llama-graph.h"
#include "llama-adapter.h"
#include "llama-kv-cache.h"
#include "llama-model.h"

#include <cmath>

namespace {

ggml_tensor * rms_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, float eps) {
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, eps), weight);
}

// x [head_dim, n_heads, n_tokens] rotated by the token positions.
ggml_tensor * rope(ggml_context * ctx, const llama_model & model, ggml_tensor * x, ggml_tensor * pos) {
    const llama_hparams & hp = model.hparams;
    return ggml_rope_ext(ctx, x, pos, model.rope_freqs, (int) hp.n_rot, hp.rope_type, (int) hp.rope_n_ctx_orig,
                         hp.rope_freq_base, hp.rope_freq_scale, hp.rope_yarn_ext_factor, hp.rope_yarn_attn_factor,
                         hp.rope_yarn_beta_fast, hp.rope_yarn_beta_slow);
}

// Rotates already rotated keys by a position delta: R(p + delta) = R(delta) R(p), so the
// rotation must not scale again (YaRN's magnitude factor is undone).
ggml_tensor * rope_shift(ggml_context * ctx, const llama_model & model, ggml_tensor * k, ggml_tensor * delta,
                         bool inplace) {
    const llama_hparams & hp = model.hparams;
    float attn_factor = hp.rope_yarn_attn_factor;
    if (hp.rope_yarn_ext_factor != 0.0f) attn_factor = 1.0f / (1.0f + 0.1f * logf(1.0f / hp.rope_freq_scale));
    auto fn = inplace ? ggml_rope_ext_inplace : ggml_rope_ext;
    return fn(ctx, k, delta, model.rope_freqs, (int) hp.n_rot, hp.rope_type, (int) hp.rope_n_ctx_orig, hp.rope_freq_base,
              hp.rope_freq_scale, hp.rope_yarn_ext_factor, attn_factor, hp.rope_yarn_beta_fast, hp.rope_yarn_beta_slow);
}

// What the projections need beyond their weights: the adapters, and where dropout masks go.
struct lora_ctx {
    const llm_lora_set * set;
    llm_graph_io * io;
};

// w x, plus s * B (A x) for every adapter that adapts w (its input x masked by a fresh dropout
// mask input when training with dropout).
ggml_tensor * lora_mm(ggml_context * ctx, const lora_ctx & lc, ggml_tensor * w, ggml_tensor * x) {
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    if (!lc.set) return y;
    if (lc.set->base_prec != GGML_PREC_DEFAULT) ggml_mul_mat_set_prec(y, lc.set->base_prec);
    for (const llm_lora_entry & e : lc.set->entries) {
        const llama_adapter_lora_weight * lw = e.adapter->get(w);
        if (!lw || e.scale == 0.0f) continue;
        ggml_tensor * xin = x;
        if (lc.set->dropout) {
            ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1]);
            ggml_format_name(mask, "lora_dropout_%d", (int) lc.io->lora_masks.size());
            ggml_set_input(mask);
            lc.io->lora_masks.push_back(mask);
            xin = ggml_mul(ctx, x, mask);
        }
        // The scale goes on A x ([r, n_tokens]), the small end; A x is a checkpoint (training).
        ggml_tensor * ax = ggml_scale(ctx, ggml_mul_mat(ctx, lw->a, xin), e.adapter->effective_scale(*lw, e.scale));
        lc.io->matmul_out.push_back(ax);
        y = ggml_add(ctx, y, ggml_mul_mat(ctx, lw->b, ax));
    }
    return y;
}

// Projection with an optional bias.
ggml_tensor * linear(ggml_context * ctx, const lora_ctx & lc, ggml_tensor * w, ggml_tensor * b, ggml_tensor * x) {
    ggml_tensor * y = lora_mm(ctx, lc, w, x);
    return b ? ggml_add(ctx, y, b) : y;
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

// softmax(K^T q / sqrt(d) + mask) V for q [head_dim, n_head, n_tokens], keys k [head_dim, n_kv,
// n_head_kv] and values v [n_kv, head_dim, n_head_kv]; returns [n_head * head_dim, n_tokens].
ggml_tensor * attend(ggml_context * ctx, const llama_model & model, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                     ggml_tensor * kq_mask, uint32_t n_tokens) {
    const llama_hparams & hp = model.hparams;
    const int64_t head_dim = hp.n_embd_head(), n_head = hp.n_head;
    q = ggml_permute(ctx, q, 0, 2, 1, 3);  // [head_dim, n_tokens, n_head]
    ggml_tensor * kq = ggml_mul_mat(ctx, k, q);  // [n_kv, n_tokens, n_head]
    kq = ggml_soft_max_ext(ctx, kq, kq_mask, 1.0f / sqrtf((float) head_dim), 0.0f);
    ggml_tensor * kqv = ggml_mul_mat(ctx, v, kq);  // [head_dim, n_tokens, n_head]
    kqv = ggml_permute(ctx, kqv, 0, 2, 1, 3);     // [head_dim, n_head, n_tokens]
    return ggml_cont_2d(ctx, kqv, head_dim * n_head, n_tokens);
}

// The same with the fused op (ggml_flash_attn_ext): keys k and values v both [head_dim, n_kv,
// n_head_kv] with contiguous rows of any cache type; no score matrix is kept, and a causal mask
// skips the hidden blocks.
ggml_tensor * attend_fused(ggml_context * ctx, const llama_model & model, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                           ggml_tensor * kq_mask, uint32_t n_tokens) {
    const llama_hparams & hp = model.hparams;
    const int64_t head_dim = hp.n_embd_head(), n_head = hp.n_head;
    ggml_tensor * o = ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), k, v, kq_mask, 1.0f / sqrtf((float) head_dim), 0.0f, 0.0f);
    return ggml_reshape_2d(ctx, o, head_dim * n_head, n_tokens);  // [head_dim, n_head, n_tokens] in memory
}

// Where attention takes its keys and values from: the KV cache (inference), or the batch itself
// (training, where the graph must be differentiable and hold no cache).
struct kv_source {
    virtual ~kv_source() = default;
    // The layer's new keys (rotated, [head_dim, n_head_kv, n_tokens]) and values [n_embd_v_gqa, n_tokens].
    virtual void put(int il, ggml_tensor * k, ggml_tensor * v) = 0;
    // The layer's attention output [n_head * head_dim, n_tokens] for q [head_dim, n_head, n_tokens].
    virtual ggml_tensor * attention(int il, ggml_tensor * q, ggml_tensor * kq_mask) = 0;
};

// The cache: this batch's keys and values go to the cells io.kv_idxs names; attention reads
// cells [0, n_kv).
struct kv_cache_source : kv_source {
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

    ggml_tensor * attention(int il, ggml_tensor * q, ggml_tensor * kq_mask) override {
        if (kv.flash_attn) return fused(il, q, kq_mask);
        ggml_tensor * k, * v;
        get(il, &k, &v);
        return attend(ctx, model, q, k, v, kq_mask, n_tokens);
    }

    // The fused op over cells [0, n_kv), K and V read as stored (F16, Q8_0, ...).
    ggml_tensor * fused(int il, ggml_tensor * q, ggml_tensor * kq_mask) {
        const llama_hparams & hp = model.hparams;
        const int64_t head_dim = hp.n_embd_head(), n_head_kv = hp.n_head_kv;
        ggml_tensor * k_cache = kv.k_l[il], * v_cache = kv.v_l[il];
        ggml_tensor * k = ggml_view_3d(ctx, k_cache, head_dim, n_kv, n_head_kv, k_cache->nb[1], ggml_row_size(k_cache->type, head_dim), 0);
        ggml_tensor * v = ggml_view_3d(ctx, v_cache, head_dim, n_kv, n_head_kv, v_cache->nb[1], ggml_row_size(v_cache->type, head_dim), 0);
        return attend_fused(ctx, model, q, k, v, kq_mask, n_tokens);
    }

    // Keys [head_dim, n_kv, n_head_kv] and values [n_kv, head_dim, n_head_kv] of cells [0, n_kv).
    void get(int il, ggml_tensor ** k_out, ggml_tensor ** v_out) {
        const llama_hparams & hp = model.hparams;
        const int64_t head_dim = hp.n_embd_head(), n_head_kv = hp.n_head_kv;
        ggml_tensor * k_cache = kv.k_l[il];
        *k_out = ggml_view_3d(ctx, k_cache, head_dim, n_kv, n_head_kv, k_cache->nb[1],
                              ggml_row_size(k_cache->type, head_dim), 0);
        ggml_tensor * v_cache = kv.v_l[il];
        if (kv.v_trans) {
            *v_out = ggml_view_3d(ctx, v_cache, n_kv, head_dim, n_head_kv, v_cache->nb[1], v_cache->nb[1] * head_dim, 0);
        } else {
            // Block-typed V: convert the used cells, then transpose.
            ggml_tensor * vq = ggml_view_2d(ctx, v_cache, kv.n_embd_v_gqa, n_kv, v_cache->nb[1], 0);
            ggml_tensor * vf = ggml_reshape_3d(ctx, ggml_cast(ctx, vq, GGML_TYPE_F32), head_dim, n_head_kv, n_kv);
            *v_out = ggml_cont(ctx, ggml_permute(ctx, vf, 1, 2, 0, 3));
        }
    }
};

// The batch's own keys and values: token t attends to the batch's tokens (the mask decides which).
struct kv_batch_source : kv_source {
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
    ggml_tensor * attention(int, ggml_tensor * q, ggml_tensor * kq_mask) override {
        const llama_hparams & hp = model.hparams;
        const int64_t head_dim = hp.n_embd_head(), n_head_kv = hp.n_head_kv;
        ggml_tensor * kt = ggml_permute(ctx, k, 0, 2, 1, 3);  // [head_dim, n_tokens, n_head_kv]
        ggml_tensor * vt = ggml_permute(ctx, ggml_reshape_3d(ctx, v, head_dim, n_head_kv, n_tokens), 0, 2, 1, 3);
        return attend_fused(ctx, model, q, kt, vt, kq_mask, n_tokens);
    }
};

// The inputs: tokens, positions, the mask [n_kv, n_tokens], and the ids of the tokens that get
// logits when only some of them do.
void make_inputs(ggml_context * ctx, llm_graph_io & io, uint32_t n_tokens, uint32_t n_kv, uint32_t n_outputs) {
    const bool want_embd = io.want_embd;  // the caller's choice; the rest starts afresh
    io = llm_graph_io();
    io.want_embd = want_embd;
    io.tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_set_name(io.tokens, "inp_tokens");
    ggml_set_input(io.tokens);
    io.pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_set_name(io.pos, "inp_pos");
    ggml_set_input(io.pos);
    io.kq_mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, n_tokens);
    ggml_set_name(io.kq_mask, "kq_mask");
    ggml_set_input(io.kq_mask);
    if (n_outputs > 0 && n_outputs < n_tokens) {
        io.out_ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_outputs);
        ggml_set_name(io.out_ids, "inp_out_ids");
        ggml_set_input(io.out_ids);
    }
}

// Embeddings, the layers and the output head, shared by inference and training; keys and
// values go through src. With logits false only the layers' keys and values are produced.
void build_transformer(ggml_context * ctx, ggml_cgraph * gf, const llama_model & model, uint32_t n_tokens, bool logits,
                       llm_graph_io & io, kv_source & src, const llm_lora_set * lora) {
    const lora_ctx lc = {lora && !lora->empty() ? lora : nullptr, &io};
    const llama_hparams & hp = model.hparams;
    const int64_t head_dim = hp.n_embd_head();
    const float eps = hp.f_norm_rms_eps;

    ggml_tensor * x = ggml_get_rows(ctx, model.tok_embd, io.tokens);  // [n_embd, n_tokens]
    const uint32_t n_layer = hp.n_layer;
    for (uint32_t il = 0; il < n_layer; il++) {
        const llama_layer & L = model.layers[il];
        const bool last = il + 1 == n_layer;

        ggml_tensor * cur = rms_norm(ctx, x, L.attn_norm, eps);
        ggml_tensor * k = linear(ctx, lc, L.wk, L.bk, cur);
        ggml_tensor * v = linear(ctx, lc, L.wv, L.bv, cur);
        const bool want_q = !(last && !logits);  // else only the keys and values were wanted
        ggml_tensor * q = want_q ? linear(ctx, lc, L.wq, L.bq, cur) : nullptr;
        // The products of one input one after the other in the graph: the CPU converts it once.
        for (ggml_tensor * t : { k, v, q }) {
            if (t) ggml_build_forward_expand(gf, t);
        }
        k = rope(ctx, model, ggml_reshape_3d(ctx, k, head_dim, hp.n_head_kv, n_tokens), io.pos);
        src.put((int) il, k, v);
        if (!want_q) break;

        q = rope(ctx, model, ggml_reshape_3d(ctx, q, head_dim, hp.n_head, n_tokens), io.pos);
        io.matmul_out.insert(io.matmul_out.end(), {x, q, k, v});
        cur = src.attention((int) il, q, io.kq_mask);
        io.matmul_out.push_back(cur);  // the input of wo, which its adapter's gradient reads
        cur = lora_mm(ctx, lc, L.wo, cur);

        if (last && io.out_ids) {
            // Only the rows that get logits need the last feed-forward block.
            cur = ggml_get_rows(ctx, cur, io.out_ids);
            x = ggml_get_rows(ctx, x, io.out_ids);
        }
        ggml_tensor * h = ggml_add(ctx, cur, x);
        io.matmul_out.push_back(h);

        cur = rms_norm(ctx, h, L.ffn_norm, eps);
        ggml_tensor * gate = lora_mm(ctx, lc, L.ffn_gate, cur);
        ggml_tensor * up = lora_mm(ctx, lc, L.ffn_up, cur);
        ggml_build_forward_expand(gf, gate);  // one after the other (as q, k, v)
        ggml_build_forward_expand(gf, up);
        gate = ggml_silu(ctx, gate);
        io.matmul_out.insert(io.matmul_out.end(), {gate->src[0], up});
        cur = lora_mm(ctx, lc, L.ffn_down, ggml_mul(ctx, gate, up));
        x = ggml_add(ctx, cur, h);
        io.layer_out.push_back(x);
    }

    if (logits && io.want_embd) {
        io.embd = rms_norm(ctx, x, model.output_norm, eps);  // [n_embd, n_outputs]
        ggml_set_name(io.embd, "result_norm");
        ggml_set_output(io.embd);
        ggml_build_forward_expand(gf, io.embd);
    } else if (logits) {
        ggml_tensor * cur = rms_norm(ctx, x, model.output_norm, eps);
        io.logits = lora_mm(ctx, lc, model.output, cur);  // [n_vocab, n_outputs]
        ggml_set_name(io.logits, "logits");
        ggml_set_output(io.logits);
        ggml_build_forward_expand(gf, io.logits);
    }
}

}  // namespace

// Each adapter adds at most 5 nodes (mask, A, B, scale, add) to each of 7 projections a layer.
size_t llm_graph_max_nodes(const llama_model & model, size_t n_lora) {
    return (64 + 40 * n_lora) * (size_t) model.hparams.n_layer + 256 + 8 * n_lora;
}

size_t llm_graph_max_nodes_train(const llama_model & model, size_t n_lora) { return 6 * llm_graph_max_nodes(model, n_lora); }

ggml_cgraph * llm_build_forward(ggml_context * ctx, const llama_model & model, const llama_kv_cache & kv,
                                uint32_t n_tokens, uint32_t n_kv, uint32_t n_outputs, llm_graph_io & io,
                                const llm_lora_set * lora) {
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, llm_graph_max_nodes(model, lora ? lora->entries.size() : 0), false);
    make_inputs(ctx, io, n_tokens, n_kv, n_outputs);
    io.kv_idxs = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    ggml_set_name(io.kv_idxs, "inp_kv_idxs");
    ggml_set_input(io.kv_idxs);
    kv_cache_source src(ctx, gf, model, kv, n_tokens, n_kv, io);
    build_transformer(ctx, gf, model, n_tokens, n_outputs > 0, io, src, lora);
    return gf;
}

ggml_cgraph * llm_build_forward_train(ggml_context * ctx, const llama_model & model, uint32_t n_tokens, llm_graph_io & io,
                                      const llm_lora_set * lora) {
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, llm_graph_max_nodes_train(model, lora ? lora->entries.size() : 0), true);
    make_inputs(ctx, io, n_tokens, n_tokens, n_tokens);
    kv_batch_source src(ctx, model, n_tokens);
    build_transformer(ctx, gf, model, n_tokens, true, io, src, lora);
    return gf;
}

ggml_cgraph * llm_build_k_shift(ggml_context * ctx, const llama_model & model, const llama_kv_cache & kv,
                                uint32_t n_cells, ggml_tensor ** deltas) {
    const llama_hparams & hp = model.hparams;
    const int64_t head_dim = hp.n_embd_head(), n_head_kv = hp.n_head_kv;
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, llm_graph_max_nodes(model), false);

    ggml_tensor * d = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_cells);
    ggml_set_name(d, "inp_k_shift");
    ggml_set_input(d);
    *deltas = d;

    for (uint32_t il = 0; il < hp.n_layer; il++) {
        ggml_tensor * k_cache = kv.k_l[il];
        if (!ggml_is_quantized(k_cache->type)) {
            ggml_tensor * k = ggml_view_3d(ctx, k_cache, head_dim, n_head_kv, n_cells,
                                           ggml_row_size(k_cache->type, head_dim), k_cache->nb[1], 0);
            ggml_build_forward_expand(gf, rope_shift(ctx, model, k, d, true));
        } else {
            // Block types: dequantize, rotate, quantize back.
            ggml_tensor * kq = ggml_view_2d(ctx, k_cache, kv.n_embd_k_gqa, n_cells, k_cache->nb[1], 0);
            ggml_tensor * kf = ggml_reshape_3d(ctx, ggml_cast(ctx, kq, GGML_TYPE_F32), head_dim, n_head_kv, n_cells);
            ggml_tensor * r = rope_shift(ctx, model, kf, d, false);
            ggml_build_forward_expand(gf, ggml_cpy(ctx, r, kq));
        }
    }
    return gf;
}
