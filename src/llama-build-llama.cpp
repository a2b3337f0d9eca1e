// llama-build-llama.cpp - the pre-norm decoder block of Llama and the families that share its
// shape (Qwen2: Q/K/V biases; Qwen3: per-head Q/K norms; Phi-3: fused QKV and gate-up
// projections; Mixtral-style llama, Qwen2-MoE, Qwen3-MoE: a mixture of experts for the FFN),
// which differ only in tensors the shared pieces act on when present:
//   x = embeddings
//   per layer: h = x + Wo attn(rope(Wq n(x)), rope(Wk n(x)), Wv n(x)),  n = RMSNorm * weight
//              x = h + Wdown (silu(Wgate n(h)) * Wup n(h))
//   logits = Wout n(x)
#include "llama-graph-build.h"

void llm_build_llama(llm_graph_builder & b) {
    ggml_tensor * x = b.inp_embd();
    for (int il = 0; il < (int) b.hp.n_layer; il++) {
        const llama_layer & L = b.model.layers[(size_t) il];
        b.io.matmul_out.push_back(x);
        ggml_tensor * cur = b.self_attention(il, b.rms_norm(x, L.attn_norm));
        if (!cur) return;  // the last layer's keys and values were all that was wanted
        b.keep_outputs(il, cur, x);
        ggml_tensor * h = ggml_add(b.ctx, cur, x);
        b.io.matmul_out.push_back(h);
        cur = b.rms_norm(h, L.ffn_norm);
        cur = L.ffn_gate_inp ? b.moe_ffn(il, cur) : b.ffn(il, cur, llm_ffn_act::silu);
        x = ggml_add(b.ctx, cur, h);
        b.io.layer_out.push_back(x);
    }
    b.output(x);
}
