// llama-arch.cpp - the architecture and tensor tables (see llama-arch.h).
#include "llama-arch.h"
#include "llama-model.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace {

using D = llm_dim;
using U = llm_tensor_use;
constexpr D one = D::one;

// One row per tensor kind, in enum order.
const llm_tensor_info kTensors[LLM_TENSOR_COUNT] = {
    {LLM_TENSOR_TOKEN_EMBD, "token_embd.weight", U::embedding, {D::embd, D::vocab}, nullptr, &llama_model::tok_embd, nullptr},
    {LLM_TENSOR_OUTPUT_NORM, "output_norm.weight", U::vector, {D::embd, one}, nullptr, &llama_model::output_norm, nullptr},
    {LLM_TENSOR_OUTPUT, "output.weight", U::matrix, {D::embd, D::vocab}, nullptr, &llama_model::output, "output"},
    {LLM_TENSOR_ROPE_FREQS, "rope_freqs.weight", U::vector, {D::rot_half, one}, nullptr, &llama_model::rope_freqs, nullptr},
    {LLM_TENSOR_ROPE_FACTORS_LONG, "rope_factors_long.weight", U::vector, {D::rot_half, one}, nullptr, &llama_model::rope_long, nullptr},
    {LLM_TENSOR_ROPE_FACTORS_SHORT, "rope_factors_short.weight", U::vector, {D::rot_half, one}, nullptr, &llama_model::rope_short, nullptr},
    {LLM_TENSOR_ATTN_NORM, "blk.%d.attn_norm.weight", U::vector, {D::embd, one}, &llama_layer::attn_norm, nullptr, nullptr},
    {LLM_TENSOR_ATTN_Q, "blk.%d.attn_q.weight", U::matrix, {D::embd, D::q}, &llama_layer::wq, nullptr, "q"},
    {LLM_TENSOR_ATTN_K, "blk.%d.attn_k.weight", U::matrix, {D::embd, D::k}, &llama_layer::wk, nullptr, "k"},
    {LLM_TENSOR_ATTN_V, "blk.%d.attn_v.weight", U::matrix, {D::embd, D::v}, &llama_layer::wv, nullptr, "v"},
    {LLM_TENSOR_ATTN_QKV, "blk.%d.attn_qkv.weight", U::matrix, {D::embd, D::qkv}, &llama_layer::wqkv, nullptr, "qkv"},
    {LLM_TENSOR_ATTN_OUT, "blk.%d.attn_output.weight", U::matrix, {D::attn_out, D::embd}, &llama_layer::wo, nullptr, "o"},
    {LLM_TENSOR_ATTN_Q_BIAS, "blk.%d.attn_q.bias", U::vector, {D::q, one}, &llama_layer::bq, nullptr, nullptr},
    {LLM_TENSOR_ATTN_K_BIAS, "blk.%d.attn_k.bias", U::vector, {D::k, one}, &llama_layer::bk, nullptr, nullptr},
    {LLM_TENSOR_ATTN_V_BIAS, "blk.%d.attn_v.bias", U::vector, {D::v, one}, &llama_layer::bv, nullptr, nullptr},
    {LLM_TENSOR_ATTN_Q_NORM, "blk.%d.attn_q_norm.weight", U::vector, {D::head_k, one}, &llama_layer::attn_q_norm, nullptr, nullptr},
    {LLM_TENSOR_ATTN_K_NORM, "blk.%d.attn_k_norm.weight", U::vector, {D::head_k, one}, &llama_layer::attn_k_norm, nullptr, nullptr},
    {LLM_TENSOR_ATTN_POST_NORM, "blk.%d.post_attention_norm.weight", U::vector, {D::embd, one}, &llama_layer::attn_post_norm, nullptr, nullptr},
    {LLM_TENSOR_FFN_NORM, "blk.%d.ffn_norm.weight", U::vector, {D::embd, one}, &llama_layer::ffn_norm, nullptr, nullptr},
    {LLM_TENSOR_FFN_GATE, "blk.%d.ffn_gate.weight", U::matrix, {D::embd, D::ff}, &llama_layer::ffn_gate, nullptr, "gate"},
    {LLM_TENSOR_FFN_UP, "blk.%d.ffn_up.weight", U::matrix, {D::embd, D::ff}, &llama_layer::ffn_up, nullptr, "up"},
    {LLM_TENSOR_FFN_GATE_UP, "blk.%d.ffn_up.weight", U::matrix, {D::embd, D::ff2}, &llama_layer::ffn_gate_up, nullptr, "gate_up"},
    {LLM_TENSOR_FFN_DOWN, "blk.%d.ffn_down.weight", U::matrix, {D::ff, D::embd}, &llama_layer::ffn_down, nullptr, "down"},
    {LLM_TENSOR_FFN_POST_NORM, "blk.%d.post_ffw_norm.weight", U::vector, {D::embd, one}, &llama_layer::ffn_post_norm, nullptr, nullptr},
    {LLM_TENSOR_FFN_GATE_INP, "blk.%d.ffn_gate_inp.weight", U::matrix, {D::embd, D::expert}, &llama_layer::ffn_gate_inp, nullptr, "router"},
    {LLM_TENSOR_FFN_GATE_EXPS, "blk.%d.ffn_gate_exps.weight", U::matrix, {D::embd, D::ff_exp, D::expert}, &llama_layer::ffn_gate_exps, nullptr, nullptr},
    {LLM_TENSOR_FFN_UP_EXPS, "blk.%d.ffn_up_exps.weight", U::matrix, {D::embd, D::ff_exp, D::expert}, &llama_layer::ffn_up_exps, nullptr, nullptr},
    {LLM_TENSOR_FFN_DOWN_EXPS, "blk.%d.ffn_down_exps.weight", U::matrix, {D::ff_exp, D::embd, D::expert}, &llama_layer::ffn_down_exps, nullptr, nullptr},
    {LLM_TENSOR_FFN_GATE_INP_SHEXP, "blk.%d.ffn_gate_inp_shexp.weight", U::matrix, {D::embd, one}, &llama_layer::ffn_gate_inp_shexp, nullptr, nullptr},
    {LLM_TENSOR_FFN_GATE_SHEXP, "blk.%d.ffn_gate_shexp.weight", U::matrix, {D::embd, D::ff_shexp}, &llama_layer::ffn_gate_shexp, nullptr, nullptr},
    {LLM_TENSOR_FFN_UP_SHEXP, "blk.%d.ffn_up_shexp.weight", U::matrix, {D::embd, D::ff_shexp}, &llama_layer::ffn_up_shexp, nullptr, nullptr},
    {LLM_TENSOR_FFN_DOWN_SHEXP, "blk.%d.ffn_down_shexp.weight", U::matrix, {D::ff_shexp, D::embd}, &llama_layer::ffn_down_shexp, nullptr, nullptr},
    {LLM_TENSOR_TOKEN_TYPES, "token_types.weight", U::embedding, {D::embd, D::token_types}, nullptr, &llama_model::type_embd, nullptr},
    {LLM_TENSOR_POS_EMBD, "position_embd.weight", U::embedding, {D::embd, D::ctx_train}, nullptr, &llama_model::pos_embd, nullptr},
    {LLM_TENSOR_TOKEN_EMBD_NORM, "token_embd_norm.weight", U::vector, {D::embd, one}, nullptr, &llama_model::tok_norm, nullptr},
    {LLM_TENSOR_TOKEN_EMBD_NORM_BIAS, "token_embd_norm.bias", U::vector, {D::embd, one}, nullptr, &llama_model::tok_norm_b, nullptr},
    {LLM_TENSOR_ATTN_OUT_BIAS, "blk.%d.attn_output.bias", U::vector, {D::embd, one}, &llama_layer::bo, nullptr, nullptr},
    {LLM_TENSOR_ATTN_OUT_NORM, "blk.%d.attn_output_norm.weight", U::vector, {D::embd, one}, &llama_layer::attn_out_norm, nullptr, nullptr},
    {LLM_TENSOR_ATTN_OUT_NORM_BIAS, "blk.%d.attn_output_norm.bias", U::vector, {D::embd, one}, &llama_layer::attn_out_norm_b, nullptr, nullptr},
    {LLM_TENSOR_FFN_UP_BIAS, "blk.%d.ffn_up.bias", U::vector, {D::ff, one}, &llama_layer::ffn_up_b, nullptr, nullptr},
    {LLM_TENSOR_FFN_DOWN_BIAS, "blk.%d.ffn_down.bias", U::vector, {D::embd, one}, &llama_layer::ffn_down_b, nullptr, nullptr},
    {LLM_TENSOR_LAYER_OUT_NORM, "blk.%d.layer_output_norm.weight", U::vector, {D::embd, one}, &llama_layer::layer_out_norm, nullptr, nullptr},
    {LLM_TENSOR_LAYER_OUT_NORM_BIAS, "blk.%d.layer_output_norm.bias", U::vector, {D::embd, one}, &llama_layer::layer_out_norm_b, nullptr, nullptr},
};

constexpr llm_need REQ = llm_need::required, OPT = llm_need::optional, DENSE = llm_need::dense, EXPERTS = llm_need::experts;

// What sets a family's FFN apart: dense (gate, up, down), experts only, or either as the file
// says (llama), or fused (Phi-3's stacked gate-up).
enum class ffn_kind { dense, experts, either, fused };

// The decoder block every family here shares: norm, Q/K/V, output; norm and its FFN.
std::vector<llm_arch_tensor> with_common(std::vector<llm_arch_tensor> extra, ffn_kind ffn = ffn_kind::dense) {
    std::vector<llm_arch_tensor> v = {
        {LLM_TENSOR_TOKEN_EMBD, REQ}, {LLM_TENSOR_OUTPUT_NORM, REQ}, {LLM_TENSOR_OUTPUT, OPT},
        {LLM_TENSOR_ATTN_NORM, REQ},  {LLM_TENSOR_ATTN_OUT, REQ},    {LLM_TENSOR_FFN_NORM, REQ},
    };
    if (ffn != ffn_kind::fused) v.insert(v.end(), {{LLM_TENSOR_ATTN_Q, REQ}, {LLM_TENSOR_ATTN_K, REQ}, {LLM_TENSOR_ATTN_V, REQ}});
    const llm_need dense = ffn == ffn_kind::either ? DENSE : REQ, experts = ffn == ffn_kind::either ? EXPERTS : REQ;
    if (ffn == ffn_kind::fused) v.push_back({LLM_TENSOR_FFN_DOWN, REQ});
    if (ffn == ffn_kind::dense || ffn == ffn_kind::either) {
        v.insert(v.end(), {{LLM_TENSOR_FFN_GATE, dense}, {LLM_TENSOR_FFN_UP, dense}, {LLM_TENSOR_FFN_DOWN, dense}});
    }
    if (ffn == ffn_kind::experts || ffn == ffn_kind::either) {
        v.insert(v.end(), {{LLM_TENSOR_FFN_GATE_INP, experts}, {LLM_TENSOR_FFN_GATE_EXPS, experts},
                           {LLM_TENSOR_FFN_UP_EXPS, experts}, {LLM_TENSOR_FFN_DOWN_EXPS, experts}});
    }
    v.insert(v.end(), extra.begin(), extra.end());
    return v;
}

const std::vector<llm_arch_info> & arch_table() {
    static const std::vector<llm_arch_info> t = {
        {LLM_ARCH_LLAMA, "llama", GGML_ROPE_TYPE_NORMAL, "LlamaForCausalLM",
         with_common({{LLM_TENSOR_ROPE_FREQS, OPT}, {LLM_TENSOR_ATTN_Q_BIAS, OPT}, {LLM_TENSOR_ATTN_K_BIAS, OPT},
                      {LLM_TENSOR_ATTN_V_BIAS, OPT}}, ffn_kind::either)},
        {LLM_ARCH_QWEN2, "qwen2", GGML_ROPE_TYPE_NEOX, "Qwen2ForCausalLM",
         with_common({{LLM_TENSOR_ATTN_Q_BIAS, REQ}, {LLM_TENSOR_ATTN_K_BIAS, REQ}, {LLM_TENSOR_ATTN_V_BIAS, REQ}})},
        {LLM_ARCH_QWEN3, "qwen3", GGML_ROPE_TYPE_NEOX, "Qwen3ForCausalLM",
         with_common({{LLM_TENSOR_ATTN_Q_NORM, REQ}, {LLM_TENSOR_ATTN_K_NORM, REQ}})},
        {LLM_ARCH_GEMMA2, "gemma2", GGML_ROPE_TYPE_NEOX, "Gemma2ForCausalLM",
         with_common({{LLM_TENSOR_ATTN_POST_NORM, REQ}, {LLM_TENSOR_FFN_POST_NORM, REQ}})},
        {LLM_ARCH_GEMMA3, "gemma3", GGML_ROPE_TYPE_NEOX, "Gemma3ForCausalLM",
         with_common({{LLM_TENSOR_ATTN_Q_NORM, REQ}, {LLM_TENSOR_ATTN_K_NORM, REQ}, {LLM_TENSOR_ATTN_POST_NORM, REQ},
                      {LLM_TENSOR_FFN_POST_NORM, REQ}})},
        {LLM_ARCH_PHI3, "phi3", GGML_ROPE_TYPE_NEOX, "Phi3ForCausalLM",
         with_common({{LLM_TENSOR_ATTN_QKV, REQ}, {LLM_TENSOR_FFN_GATE_UP, REQ}, {LLM_TENSOR_ROPE_FACTORS_LONG, OPT},
                      {LLM_TENSOR_ROPE_FACTORS_SHORT, OPT}}, ffn_kind::fused)},
        {LLM_ARCH_QWEN2MOE, "qwen2moe", GGML_ROPE_TYPE_NEOX, "Qwen2MoeForCausalLM",
         with_common({{LLM_TENSOR_ATTN_Q_BIAS, REQ}, {LLM_TENSOR_ATTN_K_BIAS, REQ}, {LLM_TENSOR_ATTN_V_BIAS, REQ},
                      {LLM_TENSOR_FFN_GATE_INP_SHEXP, REQ}, {LLM_TENSOR_FFN_GATE_SHEXP, REQ}, {LLM_TENSOR_FFN_UP_SHEXP, REQ},
                      {LLM_TENSOR_FFN_DOWN_SHEXP, REQ}}, ffn_kind::experts)},
        {LLM_ARCH_QWEN3MOE, "qwen3moe", GGML_ROPE_TYPE_NEOX, "Qwen3MoeForCausalLM",
         with_common({{LLM_TENSOR_ATTN_Q_NORM, REQ}, {LLM_TENSOR_ATTN_K_NORM, REQ}}, ffn_kind::experts)},
        // An encoder: no output head or final norm, every norm a LayerNorm with a bias, after the
        // residual sum; an ungated FFN.
        {LLM_ARCH_BERT, "bert", -1, "BertModel",
         {{LLM_TENSOR_TOKEN_EMBD, REQ}, {LLM_TENSOR_TOKEN_TYPES, REQ}, {LLM_TENSOR_POS_EMBD, REQ},
          {LLM_TENSOR_TOKEN_EMBD_NORM, REQ}, {LLM_TENSOR_TOKEN_EMBD_NORM_BIAS, REQ},
          {LLM_TENSOR_ATTN_Q, REQ}, {LLM_TENSOR_ATTN_Q_BIAS, REQ}, {LLM_TENSOR_ATTN_K, REQ}, {LLM_TENSOR_ATTN_K_BIAS, REQ},
          {LLM_TENSOR_ATTN_V, REQ}, {LLM_TENSOR_ATTN_V_BIAS, REQ}, {LLM_TENSOR_ATTN_OUT, REQ}, {LLM_TENSOR_ATTN_OUT_BIAS, REQ},
          {LLM_TENSOR_ATTN_OUT_NORM, REQ}, {LLM_TENSOR_ATTN_OUT_NORM_BIAS, REQ},
          {LLM_TENSOR_FFN_UP, REQ}, {LLM_TENSOR_FFN_UP_BIAS, REQ}, {LLM_TENSOR_FFN_DOWN, REQ}, {LLM_TENSOR_FFN_DOWN_BIAS, REQ},
          {LLM_TENSOR_LAYER_OUT_NORM, REQ}, {LLM_TENSOR_LAYER_OUT_NORM_BIAS, REQ}},
         true},
        // BERT's block with rotary positions in place of learned ones, one QKV product, a SiLU-gated
        // FFN, and no biases but the LayerNorms'.
        {LLM_ARCH_NOMIC_BERT, "nomic-bert", GGML_ROPE_TYPE_NEOX, "NomicBertModel",
         {{LLM_TENSOR_TOKEN_EMBD, REQ}, {LLM_TENSOR_TOKEN_TYPES, REQ},
          {LLM_TENSOR_TOKEN_EMBD_NORM, REQ}, {LLM_TENSOR_TOKEN_EMBD_NORM_BIAS, REQ},
          {LLM_TENSOR_ATTN_QKV, REQ}, {LLM_TENSOR_ATTN_OUT, REQ},
          {LLM_TENSOR_ATTN_OUT_NORM, REQ}, {LLM_TENSOR_ATTN_OUT_NORM_BIAS, REQ},
          {LLM_TENSOR_FFN_UP, REQ}, {LLM_TENSOR_FFN_GATE, REQ}, {LLM_TENSOR_FFN_DOWN, REQ},
          {LLM_TENSOR_LAYER_OUT_NORM, REQ}, {LLM_TENSOR_LAYER_OUT_NORM_BIAS, REQ}},
         true},
    };
    return t;
}

}  // namespace

const llm_tensor_info & llm_tensor_get(llm_tensor t) {
    if (t < 0 || t >= LLM_TENSOR_COUNT) throw std::out_of_range("llm_tensor_get: bad tensor kind");
    return kTensors[t];
}

std::string llm_tensor_name(llm_tensor t, int il) {
    const char * fmt = llm_tensor_get(t).name;
    if (!strstr(fmt, "%d")) return fmt;
    char buf[128];
    snprintf(buf, sizeof(buf), fmt, il);
    return buf;
}

int64_t llm_dim_size(llm_dim d, const llama_hparams & hp) {
    switch (d) {
        case D::one: return 1;
        case D::embd: return hp.n_embd;
        case D::vocab: return hp.n_vocab;
        case D::ff: return hp.n_ff;
        case D::ff2: return 2 * (int64_t) hp.n_ff;
        case D::q: return (int64_t) hp.n_embd_head_k * hp.n_head;
        case D::k: return hp.n_embd_k_gqa();
        case D::v: return hp.n_embd_v_gqa();
        case D::qkv: return (int64_t) hp.n_embd_head_k * hp.n_head + hp.n_embd_k_gqa() + hp.n_embd_v_gqa();
        case D::attn_out: return (int64_t) hp.n_embd_head_v * hp.n_head;
        case D::head_k: return hp.n_embd_head_k;
        case D::rot_half: return hp.n_rot / 2;
        case D::expert: return hp.n_expert;
        case D::ff_exp: return hp.n_ff_exp;
        case D::ff_shexp: return hp.n_ff_shexp;
        case D::token_types: return hp.n_token_types;
        case D::ctx_train: return hp.n_ctx_train;
    }
    return 0;
}

bool llm_arch_tensor::required(const llama_hparams & hp) const {
    switch (need) {
        case llm_need::required: return true;
        case llm_need::optional: return false;
        case llm_need::dense: return hp.n_expert == 0;
        case llm_need::experts: return hp.n_expert > 0;
    }
    return false;
}

llm_arch llm_arch_from_name(const std::string & name) {
    for (const llm_arch_info & a : arch_table()) {
        if (name == a.name) return a.arch;
    }
    return LLM_ARCH_UNKNOWN;
}

const llm_arch_info & llm_arch_get(llm_arch arch) {
    for (const llm_arch_info & a : arch_table()) {
        if (a.arch == arch) return a;
    }
    throw std::out_of_range("llm_arch_get: unknown architecture");
}

std::string llm_arch_names() {
    std::string s;
    for (const llm_arch_info & a : arch_table()) s += std::string(s.empty() ? "" : ", ") + a.name;
    return s;
}
