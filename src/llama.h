// llama.h - C API of the llama runtime: load a GGUF model, create a context with a KV cache,
// tokenize, evaluate batches, read logits, sample, detokenize, format chats.
//
// Every declaration here that llama.cpp also has is declared as llama.cpp's llama.h declares it
// (commit c392e509, and build 4747 whose common/ library and example programs build against this
// header and llama-cpp.h unchanged: same return and parameter types, same struct fields and
// types, same enum values), so a program written for llama.cpp's API compiles against this header
// unchanged; tools/check-llama-h.py compares the two headers (nothing of 4747's is missing). What differs is behaviour where this runtime
// has less (RoPE parameters come from the model only, no encoder models); such fields are listed
// where they are declared.
#ifndef LLAMA_H
#define LLAMA_H

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"  // ggml_numa_strategy, ggml_threadpool_new (llama.cpp's llama.h includes it too)

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifndef LLAMA_API
#define LLAMA_API  // a static library: nothing to export
#endif

#ifdef __GNUC__
#    define DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#elif defined(_MSC_VER)
#    define DEPRECATED(func, hint) __declspec(deprecated(hint)) func
#else
#    define DEPRECATED(func, hint) func
#endif

#define LLAMA_DEFAULT_SEED 0xFFFFFFFF  // as a sampler seed: a random one

#define LLAMA_TOKEN_NULL -1

#define LLAMA_FILE_MAGIC_GGLA 0x67676c61u  // 'ggla': llama.cpp's old LoRA files
#define LLAMA_FILE_MAGIC_GGSN 0x6767736eu  // 'ggsn': session files
#define LLAMA_FILE_MAGIC_GGSQ 0x67677371u  // 'ggsq': sequence state files

#define LLAMA_SESSION_MAGIC   LLAMA_FILE_MAGIC_GGSN
#define LLAMA_SESSION_VERSION 9

#define LLAMA_STATE_SEQ_MAGIC   LLAMA_FILE_MAGIC_GGSQ
#define LLAMA_STATE_SEQ_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

struct llama_vocab;
struct llama_model;
struct llama_context;
struct llama_sampler;

typedef int32_t llama_pos;
typedef int32_t llama_token;
typedef int32_t llama_seq_id;

// ---- enums ---------------------------------------------------------------------------------
enum llama_vocab_type {
    LLAMA_VOCAB_TYPE_NONE = 0,  // no vocabulary
    LLAMA_VOCAB_TYPE_SPM  = 1,  // SentencePiece (BPE with byte fallback)
    LLAMA_VOCAB_TYPE_BPE  = 2,  // byte-level BPE (GPT-2)
    LLAMA_VOCAB_TYPE_WPM  = 3,  // WordPiece (BERT): not loaded here
    LLAMA_VOCAB_TYPE_UGM  = 4,  // Unigram (T5): not loaded here
    LLAMA_VOCAB_TYPE_RWKV = 5,  // RWKV: not loaded here
};

// Pre-tokenizer kinds (tokenizer.ggml.pre), llama.cpp's numbering.
enum llama_vocab_pre_type {
    LLAMA_VOCAB_PRE_TYPE_DEFAULT        = 0,
    LLAMA_VOCAB_PRE_TYPE_LLAMA3         = 1,
    LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM   = 2,
    LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_CODER = 3,
    LLAMA_VOCAB_PRE_TYPE_FALCON         = 4,
    LLAMA_VOCAB_PRE_TYPE_MPT            = 5,
    LLAMA_VOCAB_PRE_TYPE_STARCODER      = 6,
    LLAMA_VOCAB_PRE_TYPE_GPT2           = 7,
    LLAMA_VOCAB_PRE_TYPE_REFACT         = 8,
    LLAMA_VOCAB_PRE_TYPE_COMMAND_R      = 9,
    LLAMA_VOCAB_PRE_TYPE_STABLELM2      = 10,
    LLAMA_VOCAB_PRE_TYPE_QWEN2          = 11,
    LLAMA_VOCAB_PRE_TYPE_OLMO           = 12,
    LLAMA_VOCAB_PRE_TYPE_DBRX           = 13,
    LLAMA_VOCAB_PRE_TYPE_SMAUG          = 14,
    LLAMA_VOCAB_PRE_TYPE_PORO           = 15,
    LLAMA_VOCAB_PRE_TYPE_CHATGLM3       = 16,
    LLAMA_VOCAB_PRE_TYPE_CHATGLM4       = 17,
    LLAMA_VOCAB_PRE_TYPE_VIKING         = 18,
    LLAMA_VOCAB_PRE_TYPE_JAIS           = 19,
    LLAMA_VOCAB_PRE_TYPE_TEKKEN         = 20,
    LLAMA_VOCAB_PRE_TYPE_SMOLLM         = 21,
    LLAMA_VOCAB_PRE_TYPE_CODESHELL      = 22,
    LLAMA_VOCAB_PRE_TYPE_BLOOM          = 23,
    LLAMA_VOCAB_PRE_TYPE_GPT3_FINNISH   = 24,
    LLAMA_VOCAB_PRE_TYPE_EXAONE         = 25,
    LLAMA_VOCAB_PRE_TYPE_CHAMELEON      = 26,
    LLAMA_VOCAB_PRE_TYPE_MINERVA        = 27,
    LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM  = 28,
};

enum llama_rope_type {
    LLAMA_ROPE_TYPE_NONE   = -1,
    LLAMA_ROPE_TYPE_NORM   = 0,
    LLAMA_ROPE_TYPE_NEOX   = GGML_ROPE_TYPE_NEOX,
    LLAMA_ROPE_TYPE_MROPE  = 8,   // ggml's GGML_ROPE_TYPE_MROPE (not implemented here)
    LLAMA_ROPE_TYPE_VISION = 24,  // ggml's GGML_ROPE_TYPE_VISION (not implemented here)
};

// The file's token types (tokenizer.ggml.token_type).
enum llama_token_type {
    LLAMA_TOKEN_TYPE_UNDEFINED    = 0,
    LLAMA_TOKEN_TYPE_NORMAL       = 1,
    LLAMA_TOKEN_TYPE_UNKNOWN      = 2,
    LLAMA_TOKEN_TYPE_CONTROL      = 3,
    LLAMA_TOKEN_TYPE_USER_DEFINED = 4,
    LLAMA_TOKEN_TYPE_UNUSED       = 5,
    LLAMA_TOKEN_TYPE_BYTE         = 6,
};

// Token attributes (llama_vocab_get_attr), from the file's token types.
enum llama_token_attr {
    LLAMA_TOKEN_ATTR_UNDEFINED    = 0,
    LLAMA_TOKEN_ATTR_UNKNOWN      = 1 << 0,
    LLAMA_TOKEN_ATTR_UNUSED       = 1 << 1,
    LLAMA_TOKEN_ATTR_NORMAL       = 1 << 2,
    LLAMA_TOKEN_ATTR_CONTROL      = 1 << 3,
    LLAMA_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    LLAMA_TOKEN_ATTR_BYTE         = 1 << 5,
    LLAMA_TOKEN_ATTR_NORMALIZED   = 1 << 6,
    LLAMA_TOKEN_ATTR_LSTRIP       = 1 << 7,
    LLAMA_TOKEN_ATTR_RSTRIP       = 1 << 8,
    LLAMA_TOKEN_ATTR_SINGLE_WORD  = 1 << 9,
};

// Model file types (general.file_type): the type of most matrices.
enum llama_ftype {
    LLAMA_FTYPE_ALL_F32        = 0,
    LLAMA_FTYPE_MOSTLY_F16     = 1,
    LLAMA_FTYPE_MOSTLY_Q4_0    = 2,
    LLAMA_FTYPE_MOSTLY_Q4_1    = 3,
    // 4, 5 and 6 are retired
    LLAMA_FTYPE_MOSTLY_Q8_0    = 7,
    LLAMA_FTYPE_MOSTLY_Q5_0    = 8,
    LLAMA_FTYPE_MOSTLY_Q5_1    = 9,
    LLAMA_FTYPE_MOSTLY_Q2_K    = 10,
    LLAMA_FTYPE_MOSTLY_Q3_K_S  = 11,
    LLAMA_FTYPE_MOSTLY_Q3_K_M  = 12,
    LLAMA_FTYPE_MOSTLY_Q3_K_L  = 13,
    LLAMA_FTYPE_MOSTLY_Q4_K_S  = 14,
    LLAMA_FTYPE_MOSTLY_Q4_K_M  = 15,
    LLAMA_FTYPE_MOSTLY_Q5_K_S  = 16,
    LLAMA_FTYPE_MOSTLY_Q5_K_M  = 17,
    LLAMA_FTYPE_MOSTLY_Q6_K    = 18,
    LLAMA_FTYPE_MOSTLY_IQ2_XXS = 19,
    LLAMA_FTYPE_MOSTLY_IQ2_XS  = 20,
    LLAMA_FTYPE_MOSTLY_Q2_K_S  = 21,
    LLAMA_FTYPE_MOSTLY_IQ3_XS  = 22,
    LLAMA_FTYPE_MOSTLY_IQ3_XXS = 23,
    LLAMA_FTYPE_MOSTLY_IQ1_S   = 24,
    LLAMA_FTYPE_MOSTLY_IQ4_NL  = 25,
    LLAMA_FTYPE_MOSTLY_IQ3_S   = 26,
    LLAMA_FTYPE_MOSTLY_IQ3_M   = 27,
    LLAMA_FTYPE_MOSTLY_IQ2_S   = 28,
    LLAMA_FTYPE_MOSTLY_IQ2_M   = 29,
    LLAMA_FTYPE_MOSTLY_IQ4_XS  = 30,
    LLAMA_FTYPE_MOSTLY_IQ1_M   = 31,
    LLAMA_FTYPE_MOSTLY_BF16    = 32,
    // 33, 34 and 35 are retired (Q4_0 repacked at load time instead)
    LLAMA_FTYPE_MOSTLY_TQ1_0   = 36,
    LLAMA_FTYPE_MOSTLY_TQ2_0   = 37,

    LLAMA_FTYPE_GUESSED = 1024,  // not in the file
};

enum llama_rope_scaling_type {
    LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED = -1,
    LLAMA_ROPE_SCALING_TYPE_NONE        = 0,
    LLAMA_ROPE_SCALING_TYPE_LINEAR      = 1,
    LLAMA_ROPE_SCALING_TYPE_YARN        = 2,
    LLAMA_ROPE_SCALING_TYPE_LONGROPE    = 3,
    LLAMA_ROPE_SCALING_TYPE_MAX_VALUE   = LLAMA_ROPE_SCALING_TYPE_LONGROPE,
};

enum llama_pooling_type {
    LLAMA_POOLING_TYPE_UNSPECIFIED = -1,
    LLAMA_POOLING_TYPE_NONE = 0,
    LLAMA_POOLING_TYPE_MEAN = 1,
    LLAMA_POOLING_TYPE_CLS  = 2,
    LLAMA_POOLING_TYPE_LAST = 3,
    LLAMA_POOLING_TYPE_RANK = 4,
};

enum llama_attention_type {
    LLAMA_ATTENTION_TYPE_UNSPECIFIED = -1,
    LLAMA_ATTENTION_TYPE_CAUSAL      = 0,
    LLAMA_ATTENTION_TYPE_NON_CAUSAL  = 1,
};

enum llama_split_mode {
    LLAMA_SPLIT_MODE_NONE  = 0,
    LLAMA_SPLIT_MODE_LAYER = 1,
    LLAMA_SPLIT_MODE_ROW   = 2,
};

// ---- candidates, batches, parameters -------------------------------------------------------
// A candidate token for sampling.
typedef struct llama_token_data {
    llama_token id;
    float logit;
    float p;  // probability (valid after a stage that computes the softmax)
} llama_token_data;

// The candidates a sampler works on: the first `size` entries of data. Samplers may reorder
// them and shrink size; `selected` is the index (in data) of the picked one, -1 until a
// selecting sampler ran; `sorted` says they are in descending logit order.
typedef struct llama_token_data_array {
    llama_token_data * data;
    size_t size;
    int64_t selected;
    bool sorted;
} llama_token_data_array;

// Model loading progress in [0, 1]; returning false cancels the load.
typedef bool (*llama_progress_callback)(float progress, void * user_data);

// The input of llama_decode: n_tokens entries of each array.
// - token:  the token ids (required here: embd input is not supported).
// - embd:   token embeddings instead of ids; must be NULL.
// - pos:    positions; NULL: each token follows the last position of its first sequence. Within
//           a sequence positions must increase, after those already in the cache.
// - n_seq_id, seq_id: the sequences of each token (ids in [0, n_seq_max)); NULL: sequence 0. A
//           token in several sequences is stored once and attends as one of the first.
// - logits: nonzero = keep this token's logits; NULL: the last token's only.
typedef struct llama_batch {
    int32_t n_tokens;

    llama_token  *  token;
    float        *  embd;
    llama_pos    *  pos;
    int32_t      *  n_seq_id;
    llama_seq_id ** seq_id;
    int8_t       *  logits;
} llama_batch;

enum llama_model_kv_override_type {
    LLAMA_KV_OVERRIDE_TYPE_INT,
    LLAMA_KV_OVERRIDE_TYPE_FLOAT,
    LLAMA_KV_OVERRIDE_TYPE_BOOL,
    LLAMA_KV_OVERRIDE_TYPE_STR,
};

// A metadata value that replaces the file's (or adds a key) before the model is read. A list
// of them ends with an entry whose key is empty.
struct llama_model_kv_override {
    enum llama_model_kv_override_type tag;

    char key[128];

    union {
        int64_t val_i64;
        double  val_f64;
        bool    val_bool;
        char    val_str[128];
    };
};

struct llama_model_params {
    // Offload, as in llama.cpp: the last n_gpu_layers layers (all and the output layer when it
    // exceeds n_layer; negative: all) go to the GPU devices (devices: a NULL-terminated list, NULL:
    // every GPU of the build), split by layer in proportion to tensor_split (NULL: free memory);
    // split mode NONE uses main_gpu only (ROW splits by layer). A build without GPUs ignores them.
    ggml_backend_dev_t * devices;
    int32_t n_gpu_layers;
    enum llama_split_mode split_mode;
    int32_t main_gpu;
    const float * tensor_split;  // llama_max_devices() entries

    // Called with the load progress in [0, 1] (NULL: none); returning false cancels the load.
    llama_progress_callback progress_callback;
    void * progress_callback_user_data;

    // Metadata overrides (NULL: none), applied before anything is read from the metadata.
    const struct llama_model_kv_override * kv_overrides;

    bool vocab_only;     // load only the tokenizer (a context on it tokenizes; llama_decode refuses it)
    bool use_mmap;       // map the file instead of reading it (default true)
    bool use_mlock;      // lock the weights in memory (a failure is a warning)
    bool check_tensors;  // check that the float values of every tensor are finite

    // Not in llama.cpp: rearrange weights where this CPU's kernels read them faster (default
    // true; same results, the rearranged pages are private memory).
    bool use_repack;
};

struct llama_context_params {
    uint32_t n_ctx;            // context size in tokens (0: the model's training context)
    uint32_t n_batch;          // most tokens one llama_decode call takes (capped to n_ctx)
    uint32_t n_ubatch;         // most tokens evaluated in one graph (capped to n_batch; 0: n_batch)
    uint32_t n_seq_max;        // sequence ids [0, n_seq_max) (at most 256); they share the n_ctx cells
    int32_t  n_threads;        // threads for single-token evaluation
    int32_t  n_threads_batch;  // threads for batches of more tokens

    // RoPE: the model's unless overridden (UNSPECIFIED, 0 and -1 keep the model's values).
    enum llama_rope_scaling_type rope_scaling_type;
    enum llama_pooling_type      pooling_type;    // embeddings pooling (UNSPECIFIED: the model's; RANK is refused)
    enum llama_attention_type    attention_type;  // UNSPECIFIED: the model's (causal unless <arch>.attention.causal is false)

    float    rope_freq_base;    // 0: from the model
    float    rope_freq_scale;   // 0: from the model
    float    yarn_ext_factor;   // negative: 1 with YaRN scaling, else 0
    float    yarn_attn_factor;  // times the model's rope.scaling.attn_factor
    float    yarn_beta_fast;
    float    yarn_beta_slow;
    uint32_t yarn_orig_ctx;     // 0: the model's original context
    float    defrag_thold;      // ignored: freed cells are reused; llama_kv_self_defrag compacts on request

    ggml_backend_sched_eval_callback cb_eval;  // sees each graph node as it is computed (ggml_backend_sched_set_eval_callback)
    void * cb_eval_user_data;

    enum ggml_type type_k;  // KV cache types: F16 (default), F32, BF16, Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1
    enum ggml_type type_v;

    bool logits_all;   // keep the logits of every token when batch.logits is NULL
    bool embeddings;   // keep the final hidden states instead of logits (llama_get_embeddings*)
    bool offload_kqv;  // an offloaded layer's KV cache in its device's memory (default true)
    bool flash_attn;   // fused attention (ggml_flash_attn_ext) reading the cache as stored
    bool no_perf;      // no timings (the counts are kept); default true, as in llama.cpp

    // Polled between graph nodes; returning true aborts llama_decode (it returns 2).
    ggml_abort_callback abort_callback;
    void *              abort_callback_data;
};

typedef struct llama_logit_bias {
    llama_token token;
    float bias;
} llama_logit_bias;

typedef struct llama_sampler_chain_params {
    bool no_perf;  // no timing of the chain (default true)
} llama_sampler_chain_params;

typedef struct llama_chat_message {
    const char * role;     // "system", "user", "assistant"
    const char * content;
} llama_chat_message;

// llama_model_quantize's parameters.
typedef struct llama_model_quantize_params {
    int32_t nthread;                     // threads (<= 0: the machine's cores)
    enum llama_ftype ftype;              // the file type to write (its mix of types)
    enum ggml_type output_tensor_type;   // output.weight's type (GGML_TYPE_COUNT: the mix's)
    enum ggml_type token_embedding_type; // token_embd.weight's type (GGML_TYPE_COUNT: the mix's)
    bool allow_requantize;               // accept an input that is already quantized
    bool quantize_output_tensor;         // false: output.weight is copied as it is
    bool only_copy;                      // copy every tensor as it is (ftype and the above ignored)
    bool pure;                           // every matrix ftype's base type, no mix
    bool keep_split;                     // write as many shards as the input has
    void * imatrix;                      // importance matrix (llama.cpp's std::unordered_map<std::string, std::vector<float>> *)
    void * kv_overrides;                 // metadata to write (llama.cpp's std::vector<llama_model_kv_override> *)
} llama_model_quantize_params;

struct llama_adapter_lora;

LLAMA_API struct llama_model_params          llama_model_default_params(void);
LLAMA_API struct llama_context_params        llama_context_default_params(void);
LLAMA_API struct llama_sampler_chain_params  llama_sampler_chain_default_params(void);
LLAMA_API struct llama_model_quantize_params llama_model_quantize_default_params(void);

// Nothing to initialize on the CPU; kept for llama.cpp compatibility.
LLAMA_API void llama_backend_init(void);
LLAMA_API void llama_backend_free(void);

// Reads the machine's NUMA nodes; the CPU's worker threads are then placed by the strategy
// (ggml-cpu.h: ggml_numa_init). Optional; once per program.
LLAMA_API void llama_numa_init(enum ggml_numa_strategy numa);

// The context computes on the given pools (ggml-cpu.h: ggml_threadpool_new) instead of its own
// CPU backend's, with at most the pool's n_threads threads: threadpool_batch (NULL: threadpool)
// for every batch, prompt or single token (the context does not switch pools by batch size).
// The pools must outlive their use; llama_detach_threadpool goes back to the context's own.
LLAMA_API void llama_attach_threadpool(
        struct llama_context * ctx,
           ggml_threadpool_t   threadpool,
           ggml_threadpool_t   threadpool_batch);
LLAMA_API void llama_detach_threadpool(struct llama_context * ctx);

// ---- model ---------------------------------------------------------------------------------
DEPRECATED(LLAMA_API struct llama_model * llama_load_model_from_file(const char * path_model, struct llama_model_params params),
           "use llama_model_load_from_file instead");

// NULL on any error (missing file, corrupt file, unsupported architecture, missing tensor or
// wrong shape, cancelled by the progress callback), with a message through the log callback.
LLAMA_API struct llama_model * llama_model_load_from_file(const char * path_model, struct llama_model_params params);

// A model split into several files, given in order (any names). Only single-file models are
// read here: one path loads it, several fail with a message (NULL).
LLAMA_API struct llama_model * llama_model_load_from_splits(const char ** paths, size_t n_paths, struct llama_model_params params);

DEPRECATED(LLAMA_API void llama_free_model(struct llama_model * model), "use llama_model_free instead");
LLAMA_API void llama_model_free(struct llama_model * model);

LLAMA_API struct llama_context * llama_init_from_model(struct llama_model * model, struct llama_context_params params);
DEPRECATED(LLAMA_API struct llama_context * llama_new_context_with_model(struct llama_model * model,
                                                                         struct llama_context_params params),
           "use llama_init_from_model instead");
LLAMA_API void llama_free(struct llama_context * ctx);

LLAMA_API int64_t llama_time_us(void);  // a monotonic clock

LLAMA_API size_t llama_max_devices(void);  // the length of tensor_split (16)
LLAMA_API bool llama_supports_mmap       (void);
LLAMA_API bool llama_supports_mlock      (void);
LLAMA_API bool llama_supports_gpu_offload(void);  // a GPU backend is built in
LLAMA_API bool llama_supports_rpc        (void);  // false

LLAMA_API uint32_t llama_n_ctx    (const struct llama_context * ctx);
LLAMA_API uint32_t llama_n_batch  (const struct llama_context * ctx);
LLAMA_API uint32_t llama_n_ubatch (const struct llama_context * ctx);
LLAMA_API uint32_t llama_n_seq_max(const struct llama_context * ctx);

DEPRECATED(LLAMA_API int32_t llama_n_ctx_train(const struct llama_model * model), "use llama_model_n_ctx_train instead");
DEPRECATED(LLAMA_API int32_t llama_n_embd     (const struct llama_model * model), "use llama_model_n_embd instead");
DEPRECATED(LLAMA_API int32_t llama_n_layer    (const struct llama_model * model), "use llama_model_n_layer instead");
DEPRECATED(LLAMA_API int32_t llama_n_head     (const struct llama_model * model), "use llama_model_n_head instead");
DEPRECATED(LLAMA_API int32_t llama_n_vocab    (const struct llama_vocab * vocab), "use llama_vocab_n_tokens instead");

LLAMA_API const struct llama_model * llama_get_model   (const struct llama_context * ctx);
LLAMA_API enum llama_pooling_type    llama_pooling_type(const struct llama_context * ctx);

LLAMA_API const struct llama_vocab * llama_model_get_vocab(const struct llama_model * model);
LLAMA_API enum llama_rope_type       llama_model_rope_type(const struct llama_model * model);

LLAMA_API int32_t llama_model_n_ctx_train(const struct llama_model * model);
LLAMA_API int32_t llama_model_n_embd     (const struct llama_model * model);
LLAMA_API int32_t llama_model_n_layer    (const struct llama_model * model);
LLAMA_API int32_t llama_model_n_head     (const struct llama_model * model);
LLAMA_API int32_t llama_model_n_head_kv  (const struct llama_model * model);  // not in llama.cpp c392e509
LLAMA_API int32_t llama_model_n_vocab    (const struct llama_model * model);  // not in llama.cpp: a logits row's length

LLAMA_API float llama_model_rope_freq_scale_train(const struct llama_model * model);

LLAMA_API enum llama_vocab_type llama_vocab_type(const struct llama_vocab * vocab);

LLAMA_API int32_t llama_vocab_n_tokens(const struct llama_vocab * vocab);

// Metadata values as strings: the length written (snprintf semantics, always NUL-terminated)
// or -1 (and an empty string) when absent. Arrays are shown as "[a, b, ...]".
LLAMA_API int32_t llama_model_meta_val_str(const struct llama_model * model, const char * key, char * buf, size_t buf_size);
LLAMA_API int32_t llama_model_meta_count(const struct llama_model * model);
LLAMA_API int32_t llama_model_meta_key_by_index(const struct llama_model * model, int32_t i, char * buf, size_t buf_size);
LLAMA_API int32_t llama_model_meta_val_str_by_index(const struct llama_model * model, int32_t i, char * buf, size_t buf_size);

// A short description ("llama 260K F32"); returns the length written (snprintf semantics).
LLAMA_API int32_t llama_model_desc(const struct llama_model * model, char * buf, size_t buf_size);

LLAMA_API uint64_t llama_model_size(const struct llama_model * model);  // bytes of tensor data

// The model's chat template (tokenizer.chat_template; name NULL for the default), or NULL.
LLAMA_API const char * llama_model_chat_template(const struct llama_model * model, const char * name);

LLAMA_API uint64_t llama_model_n_params(const struct llama_model * model);

LLAMA_API bool        llama_model_has_encoder(const struct llama_model * model);          // false
LLAMA_API bool        llama_model_has_decoder(const struct llama_model * model);          // true
LLAMA_API llama_token llama_model_decoder_start_token(const struct llama_model * model);  // -1
LLAMA_API bool        llama_model_is_recurrent(const struct llama_model * model);         // false

// Writes fname_inp quantized to params->ftype as fname_out, as llama.cpp's function does (its
// per-tensor mixes, importance matrix, overrides; keep_split names the output as the one shard
// fname_out-00001-of-00001.gguf); 0 on success, else 1 with the reason logged. Nothing is left
// at fname_out on failure: the output is written to fname_out.tmp.PID and renamed when complete
// (a program stopped by a signal may remove that name). Split (sharded) inputs are not supported.
LLAMA_API uint32_t llama_model_quantize(const char * fname_inp, const char * fname_out, const llama_model_quantize_params * params);

// ---- LoRA adapters -------------------------------------------------------------------------
// Loads a LoRA adapter for the model: a GGUF adapter (as llama.cpp's convert_lora_to_gguf.py
// and llama-finetune write) or a PEFT directory (adapter_config.json, adapter_model.safetensors;
// lora_B rows of q_proj / k_proj are taken from Hugging Face order). NULL with a message on a
// missing or corrupt file, another architecture, or tensors that do not fit the model.
LLAMA_API struct llama_adapter_lora * llama_adapter_lora_init(struct llama_model * model, const char * path_lora);
LLAMA_API void llama_adapter_lora_free(struct llama_adapter_lora * adapter);  // after every context using it

// Applies the adapter to every following decode of ctx, unmerged: y = W x + scale * alpha / r *
// B (A x). Setting it again changes the scale. Returns 0, or -1 on bad arguments.
LLAMA_API int32_t llama_set_adapter_lora(struct llama_context * ctx, struct llama_adapter_lora * adapter, float scale);
// Stops applying it; -1 if it was not applied.
LLAMA_API int32_t llama_rm_adapter_lora(struct llama_context * ctx, struct llama_adapter_lora * adapter);
LLAMA_API void llama_clear_adapter_lora(struct llama_context * ctx);

// Control vectors (a vector added to each layer's output) are not supported here: returns -1
// with a message, except that data NULL (clearing, with nothing applied) returns 0.
LLAMA_API int32_t llama_apply_adapter_cvec(struct llama_context * ctx, const float * data, size_t len, int32_t n_embd,
                                           int32_t il_start, int32_t il_end);

// ---- KV cache ------------------------------------------------------------------------------
// One set of cells for all of a context's sequences (ids [0, n_seq_max)). Each cell holds a
// token's key and value, its position and the sequences it belongs to. seq_id < 0 means every
// sequence where noted; [p0, p1) are positions (p0 < 0: from 0; p1 < 0: to the end). A sequence id
// out of range is an error (a message; false / nothing done).
// Tokens as the sequences see them (a cell in k sequences counts k times) and cells in use.
LLAMA_API int32_t   llama_kv_self_n_tokens(const struct llama_context * ctx);
LLAMA_API int32_t   llama_kv_self_used_cells(const struct llama_context * ctx);
LLAMA_API void      llama_kv_self_clear(struct llama_context * ctx);
// Takes sequence seq_id (< 0: all) out of the cells in [p0, p1); cells left in no sequence are freed.
LLAMA_API bool      llama_kv_self_seq_rm(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
// Adds seq_id_dst to the cells of seq_id_src in [p0, p1): the cells are shared, no data is copied.
LLAMA_API void      llama_kv_self_seq_cp(struct llama_context * ctx, llama_seq_id seq_id_src, llama_seq_id seq_id_dst,
                                         llama_pos p0, llama_pos p1);
// Frees the cells not in seq_id and takes the others out of every other sequence.
LLAMA_API void      llama_kv_self_seq_keep(struct llama_context * ctx, llama_seq_id seq_id);
// Adds delta to the positions of seq_id's cells in [p0, p1) (a cell shared with other sequences
// moves for them too); cells whose position becomes negative are freed. The keys are re-rotated
// before the next decode (or by llama_kv_self_update).
LLAMA_API void      llama_kv_self_seq_add(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1,
                                          llama_pos delta);
// Divides the positions of seq_id's cells in [p0, p1) by d (re-rotated as for seq_add).
LLAMA_API void      llama_kv_self_seq_div(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d);
// The lowest / highest position of seq_id (< 0: any), -1 when it has none.
LLAMA_API llama_pos llama_kv_self_seq_pos_min(const struct llama_context * ctx, llama_seq_id seq_id);
LLAMA_API llama_pos llama_kv_self_seq_pos_max(const struct llama_context * ctx, llama_seq_id seq_id);
// Moves the used cells together (at the next update or decode): attention then reads fewer cells.
// Results are unchanged. Freed cells are reused anyway, so this is seldom needed.
LLAMA_API void      llama_kv_self_defrag(struct llama_context * ctx);
// Applies a pending K shift and defragmentation now.
LLAMA_API void      llama_kv_self_update(struct llama_context * ctx);
LLAMA_API bool      llama_kv_self_can_shift(const struct llama_context * ctx);

// The same under llama.cpp build 4747's names.
LLAMA_API int32_t llama_get_kv_cache_token_count(const struct llama_context * ctx);
LLAMA_API int32_t llama_get_kv_cache_used_cells(const struct llama_context * ctx);
LLAMA_API void    llama_kv_cache_clear(struct llama_context * ctx);
LLAMA_API bool    llama_kv_cache_seq_rm(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
LLAMA_API void    llama_kv_cache_seq_cp(struct llama_context * ctx, llama_seq_id seq_id_src, llama_seq_id seq_id_dst,
                                        llama_pos p0, llama_pos p1);
LLAMA_API void    llama_kv_cache_seq_keep(struct llama_context * ctx, llama_seq_id seq_id);
LLAMA_API void    llama_kv_cache_seq_add(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1,
                                         llama_pos delta);
LLAMA_API void    llama_kv_cache_seq_div(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d);
LLAMA_API llama_pos llama_kv_cache_seq_pos_max(struct llama_context * ctx, llama_seq_id seq_id);
LLAMA_API void    llama_kv_cache_defrag(struct llama_context * ctx);
LLAMA_API void    llama_kv_cache_update(struct llama_context * ctx);
LLAMA_API bool    llama_kv_cache_can_shift(struct llama_context * ctx);

// A snapshot of the cells for debugging (llama.cpp's view): each cell's position (-1: empty)
// and up to n_seq_max of its sequences (-1 in the unused places), the tokens (a cell counts once
// per sequence), the cells in use and the longest run of empty cells.
struct llama_kv_cache_view_cell {
    llama_pos pos;
};

struct llama_kv_cache_view {
    int32_t n_cells;             // the context size
    int32_t n_seq_max;           // sequences shown per cell
    int32_t token_count;
    int32_t used_cells;
    int32_t max_contiguous;      // the longest run of empty cells
    int32_t max_contiguous_idx;  // where it starts (-1: none)
    struct llama_kv_cache_view_cell * cells;
    llama_seq_id * cells_sequences;  // n_seq_max per cell
};

LLAMA_API struct llama_kv_cache_view llama_kv_cache_view_init(const struct llama_context * ctx, int32_t n_seq_max);
LLAMA_API void llama_kv_cache_view_free(struct llama_kv_cache_view * view);
LLAMA_API void llama_kv_cache_view_update(const struct llama_context * ctx, struct llama_kv_cache_view * view);

// ---- batches and evaluation ----------------------------------------------------------------
// A batch view of the given tokens (not copied): sequence 0, positions after the cache's last,
// logits for the last token.
LLAMA_API struct llama_batch llama_batch_get_one(llama_token * tokens, int32_t n_tokens);

// A batch owning room for n_tokens tokens (token ids: embd must be 0, embeddings input is not
// supported), each in up to n_seq_max sequences; n_tokens starts at 0. Unlike llama.cpp the
// arrays start zeroed, with every token in sequence 0. Free with llama_batch_free.
LLAMA_API struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
LLAMA_API void llama_batch_free(struct llama_batch batch);

// Evaluates the batch (at most n_batch tokens, split into graphs of n_ubatch consecutive tokens),
// adding its tokens to the KV cache. 0: success; 1: not enough room in the KV cache (nothing was evaluated: shift or
// clear it); 2: aborted by the abort callback (the cache is as before); -1: invalid batch (bad
// token id, position, sequence or size); -2: compute failed.
LLAMA_API int32_t llama_decode(struct llama_context * ctx, struct llama_batch batch);
// The encoder of an encoder-decoder model: the models here have none, so it fails (-1, with a
// message) as llama.cpp's does for a decoder-only model.
LLAMA_API int32_t llama_encode(struct llama_context * ctx, struct llama_batch batch);

// n_threads for single-token batches, n_threads_batch for larger ones.
LLAMA_API void    llama_set_n_threads(struct llama_context * ctx, int32_t n_threads, int32_t n_threads_batch);
LLAMA_API int32_t llama_n_threads(struct llama_context * ctx);
LLAMA_API int32_t llama_n_threads_batch(struct llama_context * ctx);

LLAMA_API void llama_set_abort_callback(struct llama_context * ctx, ggml_abort_callback abort_callback, void * abort_callback_data);

// Evaluation is synchronous: nothing to wait for.
LLAMA_API void llama_synchronize(struct llama_context * ctx);

// Logits of the last batch: rows of n_vocab floats, one per token whose logits were kept, in
// batch order. llama_get_logits_ith(ctx, i): the row of batch token i (negative: from the end),
// NULL when that token's logits were not kept.
LLAMA_API float * llama_get_logits(struct llama_context * ctx);
LLAMA_API float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);

// ---- embeddings ----------------------------------------------------------------------------
// With embeddings on (llama_context_params.embeddings or llama_set_embeddings), llama_decode
// keeps the final hidden states (after the output norm) instead of logits. Pooling NONE: one
// row of n_embd floats per token whose output flag is set, as logits are kept
// (llama_get_embeddings, _ith). MEAN, CLS, LAST: one row per sequence of the batch
// (llama_get_embeddings_seq): the mean of its tokens, its first token's (position 0), its last
// token's. The pooling comes from llama_context_params.pooling_type, else the GGUF's
// <arch>.pooling_type, else NONE. Not normalized (llama.cpp's programs normalize).
LLAMA_API void    llama_set_embeddings(struct llama_context * ctx, bool embeddings);
// Attention over all of a sequence's tokens in the batch (not only earlier ones) when false:
// for models trained bidirectionally (embedding models).
LLAMA_API void    llama_set_causal_attn(struct llama_context * ctx, bool causal_attn);
LLAMA_API float * llama_get_embeddings(struct llama_context * ctx);
LLAMA_API float * llama_get_embeddings_ith(struct llama_context * ctx, int32_t i);
LLAMA_API float * llama_get_embeddings_seq(struct llama_context * ctx, llama_seq_id seq_id);

// ---- saved state ---------------------------------------------------------------------------
// The whole state: the last batch's logits and embeddings and the KV cache cells of every
// sequence (positions, sequences, keys and values), in llama.cpp's layout. Setting it checks that
// it comes from a context of the same model shape and cache types and is whole; if not, a message,
// 0 (false for the file functions) and the context is as it was.
// The size needed to save the state now (exact: llama_state_get_data writes this many bytes).
LLAMA_API size_t llama_state_get_size(struct llama_context * ctx);
// Writes the state into dst (size bytes at most); returns the bytes written, 0 if too small.
LLAMA_API size_t llama_state_get_data(struct llama_context * ctx, uint8_t * dst, size_t size);
// Reads a state written by llama_state_get_data; returns the bytes read, 0 on error.
LLAMA_API size_t llama_state_set_data(struct llama_context * ctx, const uint8_t * src, size_t size);
// A session file: the prompt tokens then the state (llama.cpp's "ggsn" format). Loading returns
// the tokens (at most n_token_capacity) and their count.
LLAMA_API bool llama_state_load_file(struct llama_context * ctx, const char * path_session, llama_token * tokens_out,
                                     size_t n_token_capacity, size_t * n_token_count_out);
LLAMA_API bool llama_state_save_file(struct llama_context * ctx, const char * path_session, const llama_token * tokens,
                                     size_t n_token_count);
// One sequence's cells (positions, keys and values), to move it between contexts or sequences.
LLAMA_API size_t llama_state_seq_get_size(struct llama_context * ctx, llama_seq_id seq_id);
LLAMA_API size_t llama_state_seq_get_data(struct llama_context * ctx, uint8_t * dst, size_t size, llama_seq_id seq_id);
// Replaces sequence dest_seq_id's cells with the saved ones; returns the bytes read, 0 on error
// (including no room in the cache).
LLAMA_API size_t llama_state_seq_set_data(struct llama_context * ctx, const uint8_t * src, size_t size, llama_seq_id dest_seq_id);
// A sequence file ("ggsq"): its tokens then its state.
LLAMA_API size_t llama_state_seq_save_file(struct llama_context * ctx, const char * filepath, llama_seq_id seq_id,
                                           const llama_token * tokens, size_t n_token_count);
LLAMA_API size_t llama_state_seq_load_file(struct llama_context * ctx, const char * filepath, llama_seq_id dest_seq_id,
                                           llama_token * tokens_out, size_t n_token_capacity, size_t * n_token_count_out);
// Older names.
DEPRECATED(LLAMA_API size_t llama_get_state_size(struct llama_context * ctx), "use llama_state_get_size instead");
DEPRECATED(LLAMA_API size_t llama_copy_state_data(struct llama_context * ctx, uint8_t * dst), "use llama_state_get_data instead");
DEPRECATED(LLAMA_API size_t llama_set_state_data(struct llama_context * ctx, const uint8_t * src), "use llama_state_set_data instead");
DEPRECATED(LLAMA_API bool llama_load_session_file(struct llama_context * ctx, const char * path_session, llama_token * tokens_out,
                                                  size_t n_token_capacity, size_t * n_token_count_out),
           "use llama_state_load_file instead");
DEPRECATED(LLAMA_API bool llama_save_session_file(struct llama_context * ctx, const char * path_session, const llama_token * tokens,
                                                  size_t n_token_count),
           "use llama_state_save_file instead");

// ---- vocabulary ----------------------------------------------------------------------------
LLAMA_API const char * llama_vocab_get_text(const struct llama_vocab * vocab, llama_token token);
LLAMA_API float        llama_vocab_get_score(const struct llama_vocab * vocab, llama_token token);
LLAMA_API enum llama_token_attr llama_vocab_get_attr(const struct llama_vocab * vocab, llama_token token);

LLAMA_API bool llama_vocab_is_eog(const struct llama_vocab * vocab, llama_token token);  // end of generation
LLAMA_API bool llama_vocab_is_control(const struct llama_vocab * vocab, llama_token token);

// Special tokens; LLAMA_TOKEN_NULL where the model has none.
LLAMA_API llama_token llama_vocab_bos(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_eos(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_eot(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_sep(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_nl (const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_pad(const struct llama_vocab * vocab);

LLAMA_API bool llama_vocab_get_add_bos(const struct llama_vocab * vocab);
LLAMA_API bool llama_vocab_get_add_eos(const struct llama_vocab * vocab);

LLAMA_API llama_token llama_vocab_fim_pre(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_fim_suf(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_fim_mid(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_fim_pad(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_fim_rep(const struct llama_vocab * vocab);
LLAMA_API llama_token llama_vocab_fim_sep(const struct llama_vocab * vocab);

DEPRECATED(LLAMA_API const char * llama_token_get_text(const struct llama_vocab * vocab, llama_token token), "use llama_vocab_get_text instead");
DEPRECATED(LLAMA_API float llama_token_get_score(const struct llama_vocab * vocab, llama_token token), "use llama_vocab_get_score instead");
DEPRECATED(LLAMA_API enum llama_token_attr llama_token_get_attr(const struct llama_vocab * vocab, llama_token token), "use llama_vocab_get_attr instead");
DEPRECATED(LLAMA_API bool llama_token_is_eog(const struct llama_vocab * vocab, llama_token token), "use llama_vocab_is_eog instead");
DEPRECATED(LLAMA_API bool llama_token_is_control(const struct llama_vocab * vocab, llama_token token), "use llama_vocab_is_control instead");
DEPRECATED(LLAMA_API llama_token llama_token_bos(const struct llama_vocab * vocab), "use llama_vocab_bos instead");
DEPRECATED(LLAMA_API llama_token llama_token_eos(const struct llama_vocab * vocab), "use llama_vocab_eos instead");
DEPRECATED(LLAMA_API llama_token llama_token_eot(const struct llama_vocab * vocab), "use llama_vocab_eot instead");
DEPRECATED(LLAMA_API llama_token llama_token_cls(const struct llama_vocab * vocab), "use llama_vocab_cls instead");
DEPRECATED(LLAMA_API llama_token llama_token_sep(const struct llama_vocab * vocab), "use llama_vocab_sep instead");
DEPRECATED(LLAMA_API llama_token llama_token_nl (const struct llama_vocab * vocab), "use llama_vocab_nl instead");
DEPRECATED(LLAMA_API llama_token llama_token_pad(const struct llama_vocab * vocab), "use llama_vocab_pad instead");
DEPRECATED(LLAMA_API bool llama_add_bos_token(const struct llama_vocab * vocab), "use llama_vocab_get_add_bos instead");
DEPRECATED(LLAMA_API bool llama_add_eos_token(const struct llama_vocab * vocab), "use llama_vocab_get_add_eos instead");
DEPRECATED(LLAMA_API llama_token llama_token_fim_pre(const struct llama_vocab * vocab), "use llama_vocab_fim_pre instead");
DEPRECATED(LLAMA_API llama_token llama_token_fim_suf(const struct llama_vocab * vocab), "use llama_vocab_fim_suf instead");
DEPRECATED(LLAMA_API llama_token llama_token_fim_mid(const struct llama_vocab * vocab), "use llama_vocab_fim_mid instead");
DEPRECATED(LLAMA_API llama_token llama_token_fim_pad(const struct llama_vocab * vocab), "use llama_vocab_fim_pad instead");
DEPRECATED(LLAMA_API llama_token llama_token_fim_rep(const struct llama_vocab * vocab), "use llama_vocab_fim_rep instead");
DEPRECATED(LLAMA_API llama_token llama_token_fim_sep(const struct llama_vocab * vocab), "use llama_vocab_fim_sep instead");
DEPRECATED(LLAMA_API llama_token llama_vocab_cls(const struct llama_vocab * vocab), "use llama_vocab_bos instead");

// ---- tokenizer -----------------------------------------------------------------------------
// Tokenizes text_len bytes of UTF-8 text. add_special: add BOS/EOS as the model asks.
// parse_special: text like "<|im_start|>" becomes that special token. Returns the number of
// tokens, or minus the number needed when n_tokens_max is too small.
LLAMA_API int32_t llama_tokenize(const struct llama_vocab * vocab, const char * text, int32_t text_len,
                                 llama_token * tokens, int32_t n_tokens_max, bool add_special, bool parse_special);
// The text of one token (byte tokens give their byte; special tokens only when special).
// Returns the bytes written, or minus the size needed. lstrip: leading spaces to skip.
LLAMA_API int32_t llama_token_to_piece(const struct llama_vocab * vocab, llama_token token, char * buf, int32_t length,
                                       int32_t lstrip, bool special);
// The text of a token sequence (SentencePiece's leading space of the first token removed when
// remove_special and the sequence starts with BOS). Returns the bytes written or minus needed.
LLAMA_API int32_t llama_detokenize(const struct llama_vocab * vocab, const llama_token * tokens, int32_t n_tokens,
                                   char * text, int32_t text_len_max, bool remove_special, bool unparse_special);

// ---- chat templates ------------------------------------------------------------------------
// Formats the messages with the template (a Jinja template text from the model, or a name:
// "llama2", "llama3", "chatml", "zephyr", "mistral", "phi3"; recognised by its markers; ChatML
// when NULL). add_ass: end with the opening of an assistant turn. Returns the length of the
// formatted text (snprintf semantics), or -1 on error: a template that is none of those, or a
// message without role or content (as llama.cpp).
LLAMA_API int32_t llama_chat_apply_template(const char * tmpl, const struct llama_chat_message * chat, size_t n_msg,
                                            bool add_ass, char * buf, int32_t length);
// The names of the built-in templates: writes up to len of them, returns how many there are.
LLAMA_API int32_t llama_chat_builtin_templates(const char ** output, size_t len);

// ---- sampling ------------------------------------------------------------------------------
// A sampler: an interface and its state. A program may define its own (iface functions that are
// NULL are skipped; apply is required); the built-in ones below are made the same way.
typedef void * llama_sampler_context_t;

struct llama_sampler_i {
    const char *           (*name)  (const struct llama_sampler * smpl);                                 // may be NULL
    void                   (*accept)(      struct llama_sampler * smpl, llama_token token);              // may be NULL
    void                   (*apply) (      struct llama_sampler * smpl, llama_token_data_array * cur_p); // required
    void                   (*reset) (      struct llama_sampler * smpl);                                 // may be NULL
    struct llama_sampler * (*clone) (const struct llama_sampler * smpl);                                 // NULL: not clonable unless ctx is NULL
    void                   (*free)  (      struct llama_sampler * smpl);                                 // frees ctx; NULL if ctx is NULL
};

struct llama_sampler {
    const struct llama_sampler_i * iface;
    llama_sampler_context_t        ctx;
};

LLAMA_API struct llama_sampler * llama_sampler_init  (const struct llama_sampler_i * iface, llama_sampler_context_t ctx);
LLAMA_API const char *           llama_sampler_name  (const struct llama_sampler * smpl);
LLAMA_API void                   llama_sampler_accept(      struct llama_sampler * smpl, llama_token token);
LLAMA_API void                   llama_sampler_apply (      struct llama_sampler * smpl, llama_token_data_array * cur_p);
LLAMA_API void                   llama_sampler_reset (      struct llama_sampler * smpl);
LLAMA_API struct llama_sampler * llama_sampler_clone (const struct llama_sampler * smpl);
// Not for a sampler added to a chain: the chain frees it.
LLAMA_API void                   llama_sampler_free  (      struct llama_sampler * smpl);

// A chain applies its samplers in order, stopping after the first that selects a token (greedy,
// dist, Mirostat); with none, llama_sampler_sample takes the most likely candidate.
LLAMA_API struct llama_sampler * llama_sampler_chain_init(struct llama_sampler_chain_params params);
LLAMA_API void                   llama_sampler_chain_add(struct llama_sampler * chain, struct llama_sampler * smpl);  // takes ownership
LLAMA_API struct llama_sampler * llama_sampler_chain_get(const struct llama_sampler * chain, int32_t i);
LLAMA_API int                    llama_sampler_chain_n  (const struct llama_sampler * chain);
// Takes sampler i out of the chain (the caller owns it then), or NULL.
LLAMA_API struct llama_sampler * llama_sampler_chain_remove(struct llama_sampler * chain, int32_t i);

LLAMA_API struct llama_sampler * llama_sampler_init_greedy(void);
// Random draw from the distribution (seed LLAMA_DEFAULT_SEED: a random seed; reset re-seeds).
LLAMA_API struct llama_sampler * llama_sampler_init_dist(uint32_t seed);
DEPRECATED(LLAMA_API struct llama_sampler * llama_sampler_init_softmax(void), "will be removed in the future");
LLAMA_API struct llama_sampler * llama_sampler_init_top_k(int32_t k);
LLAMA_API struct llama_sampler * llama_sampler_init_top_p(float p, size_t min_keep);
LLAMA_API struct llama_sampler * llama_sampler_init_min_p(float p, size_t min_keep);
// Divides the logits by t; t <= 0 keeps only the most likely token.
LLAMA_API struct llama_sampler * llama_sampler_init_temp(float t);
// Mirostat 1.0 (arXiv 2007.14966, algorithm 1), a selecting stage: tau is the target surprise
// (cross-entropy, in bits), eta the learning rate, m the number of most likely tokens used to
// estimate the Zipf exponent (llama.cpp uses 100); n_vocab the vocabulary size. mu, the maximum
// surprise, starts at 2 * tau and moves by -eta * (observed surprise - tau) after each draw.
LLAMA_API struct llama_sampler * llama_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m);
// Mirostat 2.0: keeps the tokens with surprise -log2(p) <= mu (at least the most likely one),
// draws from them renormalized, then mu -= eta * (surprise of the drawn token - tau).
LLAMA_API struct llama_sampler * llama_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta);
// Penalties over the last penalty_last_n accepted tokens: repetition (divides a positive logit,
// multiplies a negative one; 1.0: off), frequency (minus count * penalty_freq) and presence
// (minus penalty_present once the token occurs; 0.0: off).
LLAMA_API struct llama_sampler * llama_sampler_init_penalties(int32_t penalty_last_n, float penalty_repeat,
                                                              float penalty_freq, float penalty_present);
// Adds bias to the logits of the given tokens (-INFINITY: the token is never sampled).
LLAMA_API struct llama_sampler * llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n_logit_bias,
                                                               const llama_logit_bias * logit_bias);
// Locally typical sampling (arXiv 2202.00666): keeps the tokens whose surprise is closest to the
// entropy until their probabilities reach p (at least min_keep); p >= 1 is off.
LLAMA_API struct llama_sampler * llama_sampler_init_typical(float p, size_t min_keep);
// Dynamic temperature (arXiv 2309.02772): with delta > 0 the temperature moves in [t - delta,
// t + delta] with the normalized entropy raised to exponent; delta <= 0 is temp(t).
LLAMA_API struct llama_sampler * llama_sampler_init_temp_ext(float t, float delta, float exponent);
// XTC (exclude top choices): with probability p, removes every token above threshold t but the
// least likely of them (at least min_keep kept); p <= 0 or t > 0.5 is off.
LLAMA_API struct llama_sampler * llama_sampler_init_xtc(float p, float t, size_t min_keep, uint32_t seed);
// Top-n-sigma (arXiv 2411.07641): keeps the tokens whose logit is within n standard deviations of
// the largest (n = 0: only the largest); n < 0 does nothing (llama.cpp 4747 then makes every logit -inf).
LLAMA_API struct llama_sampler * llama_sampler_init_top_n_sigma(float n);
// A GBNF grammar (llama.cpp's grammar format): candidates that cannot continue a string of the
// grammar from grammar_root are removed; accepting a token advances it. NULL on a grammar that does
// not parse (a message names the place). An empty grammar_str gives a sampler that does nothing.
LLAMA_API struct llama_sampler * llama_sampler_init_grammar(const struct llama_vocab * vocab, const char * grammar_str,
                                                            const char * grammar_root);
// The same, inactive until one of the trigger words appears in the output or a trigger token is
// accepted; the grammar then applies from the trigger on.
LLAMA_API struct llama_sampler * llama_sampler_init_grammar_lazy(const struct llama_vocab * vocab, const char * grammar_str,
                                                                 const char * grammar_root, const char ** trigger_words,
                                                                 size_t num_trigger_words, const llama_token * trigger_tokens,
                                                                 size_t num_trigger_tokens);
// DRY ("don't repeat yourself"): penalizes the token that would extend a repetition of at least
// dry_allowed_length tokens of the last dry_penalty_last_n (-1: the context; 0: off) by
// dry_multiplier * dry_base ^ (length - dry_allowed_length); seq_breakers end a repetition.
LLAMA_API struct llama_sampler * llama_sampler_init_dry(const struct llama_vocab * vocab, int32_t n_ctx_train, float dry_multiplier,
                                                        float dry_base, int32_t dry_allowed_length, int32_t dry_penalty_last_n,
                                                        const char ** seq_breakers, size_t num_breakers);
// For fill-in-the-middle: picks end-of-generation when it outweighs the rest, merges tokens that
// are prefixes of each other and drops unlikely ones (after top-k / top-p).
LLAMA_API struct llama_sampler * llama_sampler_init_infill(const struct llama_vocab * vocab);

// The seed of a dist or Mirostat sampler (the one drawn for LLAMA_DEFAULT_SEED), of a chain's
// last seeded sampler; LLAMA_DEFAULT_SEED otherwise.
LLAMA_API uint32_t llama_sampler_get_seed(const struct llama_sampler * smpl);

// Samples from the logits of batch token idx, and accepts the result into the sampler.
LLAMA_API llama_token llama_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx, int32_t idx);

// ---- model files in splits -----------------------------------------------------------------
// "<prefix>-%05d-of-%05d.gguf" with split_no + 1 and split_count; returns its length.
LLAMA_API int llama_split_path(char * split_path, size_t maxlen, const char * path_prefix, int split_no, int split_count);
// The prefix of such a path when split_no and split_count match it; returns its length (0 if not).
LLAMA_API int llama_split_prefix(char * split_prefix, size_t maxlen, const char * split_path, int split_no, int split_count);

// ---- system and logging --------------------------------------------------------------------
LLAMA_API const char * llama_print_system_info(void);  // the CPU kernels this build uses

// Errors and progress, llama's and ggml's, go through this callback (default: stderr; it sets
// ggml_log_set too). Pass NULL to restore the default.
LLAMA_API void llama_log_set(ggml_log_callback log_callback, void * user_data);

// ---- timings -------------------------------------------------------------------------------
struct llama_perf_context_data {
    double t_start_ms;   // context creation (or the last reset), on llama_time_us's clock
    double t_load_ms;    // model load
    double t_p_eval_ms;  // prompt evaluation (batches of more than one token)
    double t_eval_ms;    // single-token evaluation

    int32_t n_p_eval;
    int32_t n_eval;
};

struct llama_perf_sampler_data {
    double t_sample_ms;

    int32_t n_sample;
};

LLAMA_API struct llama_perf_context_data llama_perf_context      (const struct llama_context * ctx);
LLAMA_API void                           llama_perf_context_print(const struct llama_context * ctx);  // to the log
LLAMA_API void                           llama_perf_context_reset(      struct llama_context * ctx);

// Of a sampler chain (zeros for another sampler).
LLAMA_API struct llama_perf_sampler_data llama_perf_sampler      (const struct llama_sampler * chain);
LLAMA_API void                           llama_perf_sampler_print(const struct llama_sampler * chain);
LLAMA_API void                           llama_perf_sampler_reset(      struct llama_sampler * chain);

#ifdef __cplusplus
}
#endif

#endif  // LLAMA_H
