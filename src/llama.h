// llama.h - C API of the llama runtime: load a GGUF model, create a context with a KV cache,
// tokenize, evaluate batches, read logits, sample, detokenize, format chats.
// Names and semantics follow llama.cpp's API where the concept is the same.
#pragma once

#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLAMA_TOKEN_NULL -1
#define LLAMA_DEFAULT_SEED 0xFFFFFFFF  // as a sampler seed: a random one

typedef int32_t llama_token;
typedef int32_t llama_pos;
typedef int32_t llama_seq_id;

struct llama_model;
struct llama_context;
struct llama_vocab;
struct llama_sampler;

// ---- logging -------------------------------------------------------------------------------
// Errors and progress go through this callback (default: stderr). level: 2 error, 3 warning,
// 4 info. Pass NULL to restore the default.
typedef void (*llama_log_callback)(int level, const char * text, void * user_data);
void llama_log_set(llama_log_callback callback, void * user_data);

void llama_backend_init(void);  // nothing to initialize on the CPU; kept for llama.cpp compatibility
void llama_backend_free(void);

// ---- model ---------------------------------------------------------------------------------
struct llama_model_params {
    bool use_mmap;    // map the file instead of reading it (default true)
    bool use_repack;  // rearrange weights where this CPU's kernels read them faster (default
                      // true; same results, the rearranged pages are private memory)
    bool vocab_only;  // load only the tokenizer
};
struct llama_model_params llama_model_default_params(void);

// NULL on any error (missing file, corrupt file, unsupported architecture, missing tensor or
// wrong shape), with a message through the log callback.
struct llama_model * llama_model_load_from_file(const char * path, struct llama_model_params params);
void llama_model_free(struct llama_model * model);

const struct llama_vocab * llama_model_get_vocab(const struct llama_model * model);
int32_t  llama_model_n_ctx_train(const struct llama_model * model);
int32_t  llama_model_n_embd(const struct llama_model * model);
int32_t  llama_model_n_vocab(const struct llama_model * model);  // length of a logits row
int32_t  llama_model_n_layer(const struct llama_model * model);
int32_t  llama_model_n_head(const struct llama_model * model);
int32_t  llama_model_n_head_kv(const struct llama_model * model);
uint64_t llama_model_n_params(const struct llama_model * model);
uint64_t llama_model_size(const struct llama_model * model);  // bytes of tensor data
// A short description ("llama 260K F32"); returns the length written (snprintf semantics).
int32_t  llama_model_desc(const struct llama_model * model, char * buf, size_t buf_size);
// A metadata value as a string; returns the length (snprintf semantics) or -1 if absent.
int32_t  llama_model_meta_val_str(const struct llama_model * model, const char * key, char * buf, size_t buf_size);
// The model's chat template (tokenizer.chat_template; name NULL for the default), or NULL.
const char * llama_model_chat_template(const struct llama_model * model, const char * name);

// ---- context -------------------------------------------------------------------------------
struct llama_context_params {
    uint32_t n_ctx;       // context size in tokens (0: the model's training context)
    uint32_t n_batch;     // most tokens evaluated in one graph; longer batches are split
    int32_t  n_threads;   // threads for evaluation
    enum ggml_type type_k;  // KV cache types: F16 (default), F32 or Q8_0
    enum ggml_type type_v;
    bool flash_attn;        // fused attention (ggml_flash_attn_ext) reading the cache as stored,
                            // no n_kv x n_tokens score matrix (default false, as llama.cpp)
};
struct llama_context_params llama_context_default_params(void);

struct llama_context * llama_init_from_model(struct llama_model * model, struct llama_context_params params);
void llama_free(struct llama_context * ctx);

uint32_t llama_n_ctx(const struct llama_context * ctx);
uint32_t llama_n_batch(const struct llama_context * ctx);
const struct llama_model * llama_get_model(const struct llama_context * ctx);
void llama_set_n_threads(struct llama_context * ctx, int32_t n_threads);

// ---- LoRA adapters -------------------------------------------------------------------------
struct llama_adapter_lora;

// Loads a LoRA adapter for the model: a GGUF adapter (as llama.cpp's convert_lora_to_gguf.py
// and llama-finetune write) or a PEFT directory (adapter_config.json, adapter_model.safetensors;
// lora_B rows of q_proj / k_proj are taken from Hugging Face order). NULL with a message on a
// missing or corrupt file, another architecture, or tensors that do not fit the model.
struct llama_adapter_lora * llama_adapter_lora_init(struct llama_model * model, const char * path_lora);
void llama_adapter_lora_free(struct llama_adapter_lora * adapter);  // after every context using it

// Applies the adapter to every following decode of ctx, unmerged: y = W x + scale * alpha / r *
// B (A x). Setting it again changes the scale. Returns 0, or -1 on bad arguments.
int32_t llama_set_adapter_lora(struct llama_context * ctx, struct llama_adapter_lora * adapter, float scale);
// Stops applying it; -1 if it was not applied.
int32_t llama_rm_adapter_lora(struct llama_context * ctx, struct llama_adapter_lora * adapter);
void llama_clear_adapter_lora(struct llama_context * ctx);

// ---- batches and evaluation ----------------------------------------------------------------
typedef struct llama_batch {
    int32_t       n_tokens;
    llama_token * token;
    llama_pos   * pos;     // NULL: positions follow the last one in the KV cache
    int8_t      * logits;  // NULL: logits of the last token only; else nonzero = keep this token's logits
} llama_batch;

// A batch view of the given tokens (not copied), logits for the last token.
struct llama_batch llama_batch_get_one(llama_token * tokens, int32_t n_tokens);
struct llama_batch llama_batch_init(int32_t n_tokens_max);  // owns its arrays; free with llama_batch_free
void llama_batch_free(struct llama_batch batch);

// Evaluates the batch (split into n_batch-sized graphs), appending it to the KV cache.
// 0: success; 1: not enough room in the KV cache (nothing was evaluated: shift or clear it);
// -1: invalid batch (bad token id, position, size); -2: compute failed.
int32_t llama_decode(struct llama_context * ctx, struct llama_batch batch);

// Logits of the last batch: rows of n_vocab floats, one per token whose logits were kept, in
// batch order. llama_get_logits_ith(ctx, i): the row of batch token i (negative: from the end),
// NULL when that token's logits were not kept.
float * llama_get_logits(struct llama_context * ctx);
float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);

// ---- KV cache (one sequence, seq_id 0; -1 means any) ---------------------------------------
void      llama_kv_self_clear(struct llama_context * ctx);
int32_t   llama_kv_self_used_cells(const struct llama_context * ctx);
llama_pos llama_kv_self_seq_pos_max(const struct llama_context * ctx, llama_seq_id seq_id);  // -1 if empty
// Removes the cached tokens with positions in [p0, p1) (p1 < 0: to the end).
bool      llama_kv_self_seq_rm(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
// Adds delta to the positions in [p0, p1) (the keys are re-rotated before the next decode).
void      llama_kv_self_seq_add(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta);

// ---- vocabulary and tokenizer --------------------------------------------------------------
enum llama_vocab_type { LLAMA_VOCAB_TYPE_NONE = 0, LLAMA_VOCAB_TYPE_SPM = 1, LLAMA_VOCAB_TYPE_BPE = 2 };

enum llama_vocab_type llama_vocab_type(const struct llama_vocab * vocab);
int32_t     llama_vocab_n_tokens(const struct llama_vocab * vocab);
const char * llama_vocab_get_text(const struct llama_vocab * vocab, llama_token token);
float       llama_vocab_get_score(const struct llama_vocab * vocab, llama_token token);
llama_token llama_vocab_bos(const struct llama_vocab * vocab);  // LLAMA_TOKEN_NULL if none
llama_token llama_vocab_eos(const struct llama_vocab * vocab);
llama_token llama_vocab_eot(const struct llama_vocab * vocab);
bool        llama_vocab_get_add_bos(const struct llama_vocab * vocab);
bool        llama_vocab_get_add_eos(const struct llama_vocab * vocab);
bool        llama_vocab_is_eog(const struct llama_vocab * vocab, llama_token token);  // end of generation
bool        llama_vocab_is_control(const struct llama_vocab * vocab, llama_token token);

// Tokenizes text_len bytes of UTF-8 text. add_special: add BOS/EOS as the model asks.
// parse_special: text like "<|im_start|>" becomes that special token. Returns the number of
// tokens, or minus the number needed when n_tokens_max is too small.
int32_t llama_tokenize(const struct llama_vocab * vocab, const char * text, int32_t text_len, llama_token * tokens,
                       int32_t n_tokens_max, bool add_special, bool parse_special);
// The text of one token (byte tokens give their byte; special tokens only when special).
// Returns the bytes written, or minus the size needed. lstrip: leading spaces to skip.
int32_t llama_token_to_piece(const struct llama_vocab * vocab, llama_token token, char * buf, int32_t length,
                             int32_t lstrip, bool special);
// The text of a token sequence (SentencePiece's leading space of the first token removed when
// remove_special and the sequence starts with BOS). Returns the bytes written or minus needed.
int32_t llama_detokenize(const struct llama_vocab * vocab, const llama_token * tokens, int32_t n_tokens, char * text,
                         int32_t text_len_max, bool remove_special, bool unparse_special);

// ---- sampling ------------------------------------------------------------------------------
// A sampler chain: each stage filters or reshapes the candidate distribution; the last picks.
// The parameters are llama.cpp's (no_perf: no timing of the chain; we keep none either way).
struct llama_sampler_chain_params {
    bool no_perf;
};
struct llama_sampler_chain_params llama_sampler_chain_default_params(void);
struct llama_sampler * llama_sampler_chain_init(struct llama_sampler_chain_params params);
void llama_sampler_chain_add(struct llama_sampler * chain, struct llama_sampler * smpl);  // takes ownership
struct llama_sampler * llama_sampler_init_greedy(void);
// Random draw from the distribution (seed LLAMA_DEFAULT_SEED: a random seed; reset re-seeds).
struct llama_sampler * llama_sampler_init_dist(uint32_t seed);
struct llama_sampler * llama_sampler_init_temp(float t);
struct llama_sampler * llama_sampler_init_top_k(int32_t k);
struct llama_sampler * llama_sampler_init_top_p(float p, size_t min_keep);
struct llama_sampler * llama_sampler_init_min_p(float p, size_t min_keep);
// Penalties over the last penalty_last_n accepted tokens: repetition (divides a positive logit,
// multiplies a negative one; 1.0: off), frequency (minus count * penalty_freq) and presence
// (minus penalty_present once the token occurs; 0.0: off).
struct llama_sampler * llama_sampler_init_penalties(int32_t penalty_last_n, float penalty_repeat, float penalty_freq,
                                                    float penalty_present);
// Mirostat 1.0 (arXiv 2007.14966, algorithm 1), a selecting stage: tau is the target surprise
// (cross-entropy, in bits), eta the learning rate, m the number of most likely tokens used to
// estimate the Zipf exponent (llama.cpp uses 100); n_vocab the vocabulary size. mu, the maximum
// surprise, starts at 2 * tau and moves by -eta * (observed surprise - tau) after each draw.
struct llama_sampler * llama_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m);
// Mirostat 2.0: keeps the tokens with surprise -log2(p) <= mu (at least the most likely one),
// draws from them renormalized, then mu -= eta * (surprise of the drawn token - tau).
struct llama_sampler * llama_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta);
// Adds bias to the logits of the given tokens (-INFINITY: the token is never sampled).
typedef struct llama_logit_bias {
    llama_token token;
    float bias;
} llama_logit_bias;
struct llama_sampler * llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n_logit_bias, const llama_logit_bias * logit_bias);
// Samples from the logits of batch token idx, and accepts the result into the chain's history.
llama_token llama_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx, int32_t idx);
void llama_sampler_accept(struct llama_sampler * smpl, llama_token token);
void llama_sampler_reset(struct llama_sampler * smpl);
void llama_sampler_free(struct llama_sampler * smpl);

// ---- chat templates ------------------------------------------------------------------------
typedef struct llama_chat_message {
    const char * role;     // "system", "user", "assistant"
    const char * content;
} llama_chat_message;

// Formats the messages with the template (a Jinja template text from the model, or a name:
// "llama2", "llama3", "chatml", "zephyr", "mistral"; recognised by its markers; ChatML when
// unknown or NULL). add_ass: end with the opening of an assistant turn. Returns the length
// of the formatted text (snprintf semantics), or -1 on error.
int32_t llama_chat_apply_template(const char * tmpl, const struct llama_chat_message * chat, size_t n_msg, bool add_ass,
                                  char * buf, int32_t length);

// ---- timings -------------------------------------------------------------------------------
struct llama_perf_context_data {
    double  t_load_ms;   // model load
    double  t_p_eval_ms; // prompt evaluation (batches of more than one token)
    double  t_eval_ms;   // single-token evaluation
    int32_t n_p_eval;
    int32_t n_eval;
};
struct llama_perf_context_data llama_perf_context(const struct llama_context * ctx);
void llama_perf_context_print(const struct llama_context * ctx);  // to the log
void llama_perf_context_reset(struct llama_context * ctx);

#ifdef __cplusplus
}
#endif
