// llama2.c legacy (version 0) checkpoints and llama2.c tokenizer files -> GGUF llama model.
//
// Checkpoint layout (karpathy/llama2.c run.c, little-endian): int32 dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size (negative: an unshared classifier follows), seq_len; then
// float32 token_embedding[vocab][dim], rms_att[L][dim], wq[L][dim][dim], wk[L][kv_dim][dim],
// wv[L][kv_dim][dim], wo[L][dim][dim], rms_ffn[L][dim], w1[L][hidden][dim], w2[L][dim][hidden],
// w3[L][hidden][dim], rms_final[dim], freq_cis_real[seq_len][hs/2], freq_cis_imag[same],
// [wcls[vocab][dim]]. llama2.c rotates adjacent pairs (as GGUF llama files do), so Q and K are
// written unpermuted.
#include "convert.h"

#include <cctype>
#include <cstring>

namespace {

struct llama2c_header {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

}  // namespace

model_plan load_llama2c(const std::string & model_path, const std::string & tokenizer_path) {
    auto file = map_file(model_path);
    if (file->size < sizeof(llama2c_header)) throw convert_error("'" + model_path + "' is too small for a llama2.c header");
    llama2c_header h;
    memcpy(&h, file->data, sizeof(h));
    const bool shared = h.vocab_size > 0;
    const int64_t vocab = h.vocab_size < 0 ? -(int64_t) h.vocab_size : h.vocab_size;
    if (h.dim <= 0 || h.hidden_dim <= 0 || h.n_layers <= 0 || h.n_heads <= 0 || h.n_kv_heads <= 0 || vocab == 0 ||
        h.seq_len <= 0 || h.dim % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0 || (h.dim / h.n_heads) % 2 != 0 ||
        h.dim > (1 << 20) || h.hidden_dim > (1 << 22) || h.n_layers > 4096 || vocab > (1 << 24) || h.seq_len > (1 << 24)) {
        throw convert_error("'" + model_path + "' does not have a valid llama2.c version-0 header (dim " +
                            std::to_string(h.dim) + ", hidden " + std::to_string(h.hidden_dim) + ", layers " +
                            std::to_string(h.n_layers) + ", heads " + std::to_string(h.n_heads) + "/" +
                            std::to_string(h.n_kv_heads) + ", vocab " + std::to_string(h.vocab_size) + ", seq_len " +
                            std::to_string(h.seq_len) + ")");
    }
    const int64_t d = h.dim, hd = h.hidden_dim, L = h.n_layers, S = h.seq_len;
    const int64_t head_size = d / h.n_heads, kv_dim = d * h.n_kv_heads / h.n_heads;

    // Offsets (in floats, after the header) of each array.
    int64_t off = 0;
    auto take = [&](int64_t n) { const int64_t o = off; off += n; return o; };
    const int64_t o_tok = take(vocab * d), o_rms_att = take(L * d), o_wq = take(L * d * d), o_wk = take(L * kv_dim * d),
                  o_wv = take(L * kv_dim * d), o_wo = take(L * d * d), o_rms_ffn = take(L * d), o_w1 = take(L * hd * d),
                  o_w2 = take(L * d * hd), o_w3 = take(L * hd * d), o_rms_final = take(d);
    take(S * head_size);  // freq_cis_real and freq_cis_imag (S * hs/2 each): unused, RoPE is computed
    const int64_t o_wcls = take(shared ? 0 : vocab * d);
    const uint64_t expected = sizeof(llama2c_header) + (uint64_t) off * 4;
    if (file->size < expected) {
        throw convert_error("'" + model_path + "' is truncated: " + std::to_string(file->size) + " bytes, the header (dim " +
                            std::to_string(d) + ", " + std::to_string(L) + " layers, vocab " + std::to_string(vocab) +
                            ") needs " + std::to_string(expected));
    }
    if (file->size > expected) {
        throw convert_error("'" + model_path + "' has " + std::to_string(file->size - expected) +
                            " bytes more than its header describes (not a legacy version-0 checkpoint?)");
    }

    // ---- tokenizer ----
    auto tok = map_file(tokenizer_path);
    std::vector<std::string> tokens((size_t) vocab);
    std::vector<float> scores((size_t) vocab);
    std::vector<int32_t> types((size_t) vocab);
    {
        size_t p = 4;  // int32 max_token_length, not needed
        if (tok->size < 4) throw convert_error("'" + tokenizer_path + "' is too small for a llama2.c tokenizer");
        for (int64_t i = 0; i < vocab; i++) {
            int32_t len;
            if (p + 8 > tok->size) {
                throw convert_error("'" + tokenizer_path + "' ends after " + std::to_string(i) + " tokens, the model has " +
                                    std::to_string(vocab));
            }
            memcpy(&scores[i], tok->data + p, 4);
            memcpy(&len, tok->data + p + 4, 4);
            p += 8;
            if (len < 0 || (size_t) len > tok->size - p) throw convert_error("'" + tokenizer_path + "': token " + std::to_string(i) + " has a bad length");
            tokens[i].assign((const char *) tok->data + p, (size_t) len);
            p += (size_t) len;
            if (tokens[i].find('\0') != std::string::npos) throw convert_error("'" + tokenizer_path + "': token " + std::to_string(i) + " contains a NUL byte");
            // llama2.c writes BOS/EOS as "\n<s>\n" and "\n</s>\n"; GGUF vocabularies name them plainly.
            if (i == 1 || i == 2) {
                while (!tokens[i].empty() && isspace((unsigned char) tokens[i].back())) tokens[i].pop_back();
                while (!tokens[i].empty() && isspace((unsigned char) tokens[i][0])) tokens[i].erase(0, 1);
            }
            // SentencePiece vocabularies in GGUF spell the space as U+2581.
            for (size_t k = 0; (k = tokens[i].find(' ', k)) != std::string::npos; k += 3) tokens[i].replace(k, 1, "\xE2\x96\x81");
            const std::string & t = tokens[i];
            const bool is_byte = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && isxdigit((unsigned char) t[3]) &&
                                 isxdigit((unsigned char) t[4]);
            types[i] = i == 0 ? 2 : (i == 1 || i == 2) ? 3 : is_byte ? 6 : 1;
        }
        if (p != tok->size) throw convert_error("'" + tokenizer_path + "' has more tokens than the model's vocabulary (" + std::to_string(vocab) + ")");
    }

    model_plan plan;
    gguf_context * g = gguf_init_empty();
    plan.meta = g;
    std::vector<const char *> tok_ptrs;
    for (const auto & t : tokens) tok_ptrs.push_back(t.c_str());
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", tok_ptrs.data(), tok_ptrs.size());
    gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    gguf_set_val_str(g, "general.architecture", "llama");
    gguf_set_val_str(g, "general.name", "llama");
    gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", 0);
    gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", 2);
    gguf_set_val_u32(g, "tokenizer.ggml.seperator_token_id", UINT32_MAX);  // none (key spelled as in GGUF)
    gguf_set_val_u32(g, "tokenizer.ggml.padding_token_id", UINT32_MAX);    // none
    gguf_set_val_u32(g, "llama.context_length", (uint32_t) S);
    gguf_set_val_u32(g, "llama.embedding_length", (uint32_t) d);
    gguf_set_val_u32(g, "llama.feed_forward_length", (uint32_t) hd);
    gguf_set_val_u32(g, "llama.attention.head_count", (uint32_t) h.n_heads);
    gguf_set_val_u32(g, "llama.attention.head_count_kv", (uint32_t) h.n_kv_heads);
    gguf_set_val_u32(g, "llama.block_count", (uint32_t) L);
    gguf_set_val_u32(g, "llama.rope.dimension_count", (uint32_t) head_size);
    gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);

    // Each tensor copies n floats at `at` (in floats after the header) out of the mapping.
    auto add = [&](const std::string & name, std::vector<int64_t> ne, int64_t at) {
        int64_t n = 1;
        for (int64_t x : ne) n *= x;
        const uint8_t * src = file->data + sizeof(llama2c_header) + (size_t) at * 4;
        plan.tensors.push_back({name, ne, GGML_TYPE_F32, [file, src, n](std::vector<uint8_t> & out) {
                                    out.assign(src, src + (size_t) n * 4);
                                    release_pages(src, (size_t) n * 4);
                                }});
    };
    add("token_embd.weight", {d, vocab}, o_tok);
    add("output_norm.weight", {d}, o_rms_final);
    if (!shared) add("output.weight", {d, vocab}, o_wcls);
    for (int64_t l = 0; l < L; l++) {
        const std::string b = "blk." + std::to_string(l) + ".";
        add(b + "attn_q.weight", {d, d}, o_wq + l * d * d);
        add(b + "attn_k.weight", {d, kv_dim}, o_wk + l * kv_dim * d);
        add(b + "attn_v.weight", {d, kv_dim}, o_wv + l * kv_dim * d);
        add(b + "attn_output.weight", {d, d}, o_wo + l * d * d);
        add(b + "attn_norm.weight", {d}, o_rms_att + l * d);
        add(b + "ffn_gate.weight", {d, hd}, o_w1 + l * hd * d);
        add(b + "ffn_down.weight", {hd, d}, o_w2 + l * d * hd);
        add(b + "ffn_up.weight", {d, hd}, o_w3 + l * hd * d);
        add(b + "ffn_norm.weight", {d}, o_rms_ffn + l * d);
    }
    return plan;
}
