// llama-build-gemma.cpp - Gemma 2 and Gemma 3: embeddings scaled by sqrt(n_embd), norms before and
// after both the attention and the FFN, a GELU (tanh) gated FFN; sliding-window layers (even
// layers in Gemma 2, five of every six in Gemma 3), soft-capped scores and logits (Gemma 2),
// per-head Q/K norms and a local RoPE base (Gemma 3) come from the hyper-parameters and tensors:
//   x = sqrt(n_embd) embeddings
//   per layer: h = x + n'(Wo attn(...n(x)...))
//              x = h + n'(Wdown (gelu(Wgate n(h)) * Wup n(h)))
//   logits = cap(Wout n(x))
// (Gemma's norms multiply by 1 + w; GGUF files store 1 + w, as llama.cpp's converter writes them.)
#include "llama-graph-build.h"

void llm_build_gemma(llm_graph_builder & b) {
    ggml_tensor * x = b.inp_embd();
    for (int il = 0; il < (int) b.hp.n_layer; il++) {
        const llama_layer & L = b.model.layers[(size_t) il];
        b.io.matmul_out.push_back(x);
        ggml_tensor * cur = b.self_attention(il, b.rms_norm(x, L.attn_norm));
        if (!cur) return;
        cur = b.rms_norm(cur, L.attn_post_norm);
        b.keep_outputs(il, cur, x);
        ggml_tensor * h = ggml_add(b.ctx, cur, x);
        b.io.matmul_out.push_back(h);
        cur = b.ffn(il, b.rms_norm(h, L.ffn_norm), llm_ffn_act::gelu);
        cur = b.rms_norm(cur, L.ffn_post_norm);
        x = ggml_add(b.ctx, cur, h);
        b.io.layer_out.push_back(x);
    }
    b.output(x);
}
