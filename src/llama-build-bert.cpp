// llama-build-bert.cpp - BERT, an encoder for embeddings: the sum of token, token type (all
// type 0, as llama.cpp feeds it) and learned position embeddings, LayerNormed; blocks with
// bidirectional attention (the context's mask: every token of the sequence) and the LayerNorm
// after each residual sum; an ungated GELU FFN; no output head (the last hidden states are the
// embeddings, pooled by the context):
//   x = LN(E[token] + T[0] + P[pos])
//   per layer: h = LN(x + (Wo attn(Wq x + bq, Wk x + bk, Wv x + bv) + bo))
//              x = LN(h + Wdown gelu(Wup h + bup) + bdown)
// GELU is BERT's exact (erf) form, as transformers computes it; llama.cpp build 4747 uses the tanh
// approximation here, which differs by up to 5e-4 per value.
#include "llama-graph-build.h"

void llm_build_bert(llm_graph_builder & b) {
    ggml_context * ctx = b.ctx;
    const llama_model & m = b.model;
    const llama_hparams & hp = b.hp;
    const int64_t head = hp.n_embd_head_k, n_tokens = b.n_tokens;

    ggml_tensor * x = b.inp_embd();
    x = ggml_add(ctx, x, ggml_view_1d(ctx, m.type_embd, hp.n_embd, 0));  // type 0, broadcast over the tokens
    x = ggml_add(ctx, x, ggml_get_rows(ctx, m.pos_embd, b.io.pos));
    x = b.layer_norm(x, m.tok_norm, m.tok_norm_b);

    for (int il = 0; il < (int) hp.n_layer; il++) {
        const llama_layer & L = m.layers[(size_t) il];
        b.io.matmul_out.push_back(x);
        ggml_tensor * k = b.linear(L.wk, L.bk, x);
        ggml_tensor * v = b.linear(L.wv, L.bv, x);
        if (b.kv_only(il)) {
            b.src.put(il, ggml_reshape_3d(ctx, k, head, hp.n_head_kv, n_tokens), v);
            return;
        }
        ggml_tensor * q = b.linear(L.wq, L.bq, x);
        b.expand_together({k, v, q});
        q = ggml_reshape_3d(ctx, q, head, hp.n_head, n_tokens);
        k = ggml_reshape_3d(ctx, k, head, hp.n_head_kv, n_tokens);
        ggml_tensor * cur = b.linear(L.wo, L.bo, b.attention(il, q, k, v));
        b.keep_outputs(il, cur, x);
        ggml_tensor * h = b.layer_norm(ggml_add(ctx, cur, x), L.attn_out_norm, L.attn_out_norm_b);
        b.io.matmul_out.push_back(h);
        ggml_tensor * up = b.linear(L.ffn_up, L.ffn_up_b, h);
        b.io.matmul_out.push_back(up);
        cur = b.linear(L.ffn_down, L.ffn_down_b, ggml_gelu_erf(ctx, up));
        x = b.layer_norm(ggml_add(ctx, cur, h), L.layer_out_norm, L.layer_out_norm_b);
        b.io.layer_out.push_back(x);
    }
    b.output(x);
}

// nomic-bert (nomic-embed-text): BERT's post-LayerNorm block with rotary positions (NEOX, on
// the whole head) in place of learned ones, one QKV product, a SiLU-gated FFN, and no biases but
// the LayerNorms':
//   x = LN(E[token] + T[0])
//   per layer: h = LN(x + Wo attn(rope(Wq x), rope(Wk x), Wv x))
//              x = LN(h + Wdown (silu(Wgate h) * Wup h))
void llm_build_nomic_bert(llm_graph_builder & b) {
    ggml_context * ctx = b.ctx;
    const llama_model & m = b.model;
    const llama_hparams & hp = b.hp;

    ggml_tensor * x = b.inp_embd();
    x = ggml_add(ctx, x, ggml_view_1d(ctx, m.type_embd, hp.n_embd, 0));  // type 0
    x = b.layer_norm(x, m.tok_norm, m.tok_norm_b);

    for (int il = 0; il < (int) hp.n_layer; il++) {
        const llama_layer & L = m.layers[(size_t) il];
        b.io.matmul_out.push_back(x);
        ggml_tensor * cur = b.self_attention(il, x);
        if (!cur) return;  // the last layer's keys and values only
        b.keep_outputs(il, cur, x);
        ggml_tensor * h = b.layer_norm(ggml_add(ctx, cur, x), L.attn_out_norm, L.attn_out_norm_b);
        b.io.matmul_out.push_back(h);
        x = b.layer_norm(ggml_add(ctx, b.ffn(il, h, llm_ffn_act::silu), h), L.layer_out_norm, L.layer_out_norm_b);
        b.io.layer_out.push_back(x);
    }
    b.output(x);
}
