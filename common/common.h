// common.h - what the programs share (a library they link, as llama.cpp's common/): their
// options (common_params, filled from the command line by arg.h's table), the model, context and
// sampler parameters made from them, prompt escapes and the KV cache types' names. Field names
// follow llama.cpp's common_params where it has the field.
#pragma once

#include "ggml-opt.h"
#include "llama.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

// The samplers --samplers / --sampling-seq list, in llama.cpp's names (common_sampler_type_name)
// and letters (common_sampler_type_chr).
enum common_sampler_type {
    COMMON_SAMPLER_TYPE_NONE = 0,
    COMMON_SAMPLER_TYPE_DRY = 1,
    COMMON_SAMPLER_TYPE_TOP_K = 2,
    COMMON_SAMPLER_TYPE_TOP_P = 3,
    COMMON_SAMPLER_TYPE_MIN_P = 4,
    COMMON_SAMPLER_TYPE_TYPICAL_P = 6,
    COMMON_SAMPLER_TYPE_TEMPERATURE = 7,
    COMMON_SAMPLER_TYPE_XTC = 8,
    COMMON_SAMPLER_TYPE_INFILL = 9,
    COMMON_SAMPLER_TYPE_PENALTIES = 10,
};

// Sampling options (llama.cpp's common_params_sampling).
struct common_params_sampling {
    int64_t seed = -1;               // -1: random
    float temp = 0.8f;               // 0: greedy
    int32_t top_k = 40;              // 0: off
    float top_p = 0.95f;             // 1: off
    float min_p = 0.05f;             // 0: off
    float penalty_repeat = 1.0f;     // 1: off
    int32_t penalty_last_n = 64;     // 0: off, -1: the context size
    float penalty_present = 0.0f;
    float penalty_freq = 0.0f;
    int32_t mirostat = 0;            // 0 off, 1 Mirostat, 2 Mirostat 2.0
    float mirostat_tau = 5.0f;
    float mirostat_eta = 0.1f;
    bool ignore_eos = false;
    std::string grammar;                   // GBNF grammar (--grammar, --grammar-file, -j); "": none
    int32_t min_keep = 0;                  // the fewest tokens top-p, min-p, typical and XTC leave (0: no minimum)
    float typ_p = 1.0f;                    // locally typical sampling; 1: off
    float dynatemp_range = 0.0f;           // dynamic temperature in [temp - range, temp + range]; 0: off
    float dynatemp_exponent = 1.0f;
    float xtc_probability = 0.0f;          // 0: off
    float xtc_threshold = 0.1f;            // > 0.5: off
    float top_n_sigma = -1.0f;             // < 0: off; >= 0 replaces the list with top-k, temp, top-n-sigma
    float dry_multiplier = 0.0f;           // 0: off
    float dry_base = 1.75f;
    int32_t dry_allowed_length = 2;
    int32_t dry_penalty_last_n = -1;       // 0: off, -1: the context size
    std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
    bool dry_sequence_breakers_given = false;  // the first --dry-sequence-breaker replaces the defaults
    std::vector<llama_logit_bias> logit_bias;  // -l/--logit-bias
    // llama.cpp's default order
    std::vector<common_sampler_type> samplers = {COMMON_SAMPLER_TYPE_PENALTIES, COMMON_SAMPLER_TYPE_DRY,   COMMON_SAMPLER_TYPE_TOP_K,
                                                 COMMON_SAMPLER_TYPE_TYPICAL_P, COMMON_SAMPLER_TYPE_TOP_P, COMMON_SAMPLER_TYPE_MIN_P,
                                                 COMMON_SAMPLER_TYPE_XTC,       COMMON_SAMPLER_TYPE_TEMPERATURE};
};

// llama.cpp's name ("top_k") and letter ('k') of a sampler.
const char * common_sampler_type_name(common_sampler_type t);
char common_sampler_type_chr(common_sampler_type t);
// The samplers of a --samplers list (names separated by ';', llama.cpp's names and its aliases
// such as "top-k", "nucleus", "temp"), or of a --sampling-seq string (one letter each). false with
// err naming the first unknown name or letter.
bool common_sampler_types_from_names(const std::string & list, std::vector<common_sampler_type> & out, std::string & err);
bool common_sampler_types_from_chars(const std::string & chars, std::vector<common_sampler_type> & out, std::string & err);

struct common_adapter_lora_info {
    std::string path;
    float scale = 1.0f;
};

// llama-finetune's own options (common/arg.cpp; -m, -f, -o, -t, -ngl are the common ones).
struct common_params_finetune {
    std::string lora_in, peft_out, loss_log, plot, resume, checkpoint_out;
    bool data_jsonl = false;           // --data-format jsonl
    int32_t r = 8;                     // --lora-r
    float alpha = 16.0f;               // --lora-alpha
    float dropout = 0.0f;              // --lora-dropout
    std::vector<std::string> targets = {"q", "k", "v", "o"};
    bool r_set = false, alpha_set = false, targets_set = false;  // given (they must match --lora-in's)
    int32_t n_ctx = 256;               // -c: tokens per sequence
    int32_t n_batch = 1;               // -b: sequences per step (per process)
    int32_t grad_acc = 1;
    int64_t steps = 0, epochs = 0, save_every = 0, warmup = 0;
    uint32_t seed = 0;
    bool shuffle = true;
    float val_split = 0.0f;
    ggml_opt_optimizer_type opt = GGML_OPT_OPTIMIZER_TYPE_ADAMW;
    float lr = 1e-3f, wd = -1.0f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, grad_clip = 0.0f, min_lr_factor = 0.0f;
    bool cosine = false;               // --lr-schedule cosine
    ggml_type outtype = GGML_TYPE_F32;
    std::string backward_prec = "auto";
    bool checkpointing = false, no_recompute = false, bench = false;
};

struct common_params {
    // model and memory
    std::string model;                 // -m
    bool use_mmap = true;
    bool use_mlock = false;
    bool use_repack = true;            // --no-repack: keep the file's layout
    int32_t n_gpu_layers = 0;          // -ngl (llama.cpp: -1 all; here "all" too)
    llama_split_mode split_mode = LLAMA_SPLIT_MODE_LAYER;
    int32_t main_gpu = 0;
    bool no_kv_offload = false;
    std::vector<std::string> gpu_flags_given;  // -ngl, -sm, -mg, -nkvo as given (noted without a GPU)
    std::vector<common_adapter_lora_info> lora_adapters;
    std::string numa;                  // accepted and noted: threads are not placed by NUMA node

    // context
    int32_t n_ctx = 0;                 // 0: the program's default
    int32_t n_batch = 0;               // 0: the program's default
    int32_t n_ubatch = 512;
    int32_t n_threads = 0;             // 0: all cores
    int32_t n_threads_batch = -1;      // -1: as n_threads
    int32_t n_keep = 0;                // -1: the whole prompt
    bool ctx_shift = true;             // --no-context-shift: stop at a full context instead
    ggml_type cache_type_k = GGML_TYPE_F16;
    ggml_type cache_type_v = GGML_TYPE_F16;
    // RoPE overrides (0 / -1 / UNSPECIFIED: the model's), as llama_context_params has them.
    enum llama_rope_scaling_type rope_scaling_type = LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED;
    float rope_freq_base = 0.0f;
    float rope_freq_scale = 0.0f;
    float yarn_ext_factor = -1.0f;
    float yarn_attn_factor = 1.0f;
    float yarn_beta_fast = 32.0f;
    float yarn_beta_slow = 1.0f;
    int32_t yarn_orig_ctx = 0;
    bool flash_attn = false;

    // input
    std::string prompt;                // -p, or the text of -f
    bool prompt_given = false;
    bool prompt_binary = false;        // -bf: the prompt file is read as it is (no trailing newline dropped)
    int prompt_sources = 0;            // how many of -p, -f and --stdin were given
    std::string prompt_file;           // -f as given
    std::string system_prompt;         // -sys
    bool escape = true;                // process \n, \t, ... in the prompt and inputs
    bool add_bos = true;               // llama-tokenize --no-bos, llama-logits --no-bos
    bool parse_special = true;         // llama-tokenize --no-parse-special

    // generation (llama-cli)
    int32_t n_predict = -1;            // -1: until end of generation
    common_params_sampling sampling;
    bool interactive = false;
    bool interactive_first = false;
    std::vector<std::string> antiprompt;  // -r, repeatable
    std::string input_prefix, input_suffix;
    bool conversation = false;
    std::string chat_template;         // empty: the model's, else ChatML
    bool display_prompt = true;
    bool verbose_prompt = false;
    bool special = false;              // -sp: print special tokens as their text
    bool input_prefix_bos = false;     // --in-prefix-bos: BOS before each input (and its prefix)
    int32_t n_print = -1;              // -ptc N: the token count every N tokens (a debug line)
    std::string path_prompt_cache;     // --prompt-cache FNAME: a session file of the prompt's state
    bool prompt_cache_all = false;     // --prompt-cache-all: saved again at the end, generation included
    bool prompt_cache_ro = false;      // --prompt-cache-ro: loaded, never written
    bool use_color = false;

    // logs and output
    int verbosity = 1;                 // 0 errors only (--log-disable), 1 default, 2 -v
    bool no_perf = false;
    bool print_version = false;        // --version: print it and exit
    bool completion_bash = false;      // --completion-bash: print the bash completion script and exit

    // many sequences (llama-batched, llama-batched-bench, llama-parallel)
    int32_t n_parallel = 1;            // -np: sequences decoded together (the context's n_seq_max)
    int32_t n_sequences = 1;           // -ns: llama-parallel's requests
    bool cont_batching = true;         // llama-parallel: a new request starts as soon as a client is free
    bool is_pp_shared = false;         // -pps: llama-batched-bench's prompt shared by the sequences
    std::vector<int32_t> n_pp, n_tg, n_pl;  // -npp, -ntg, -npl: llama-batched-bench's prompt, generation and parallel sizes
    bool batched_bench_output_jsonl = false;  // --output-format jsonl

    // llama-server (llama.cpp's names)
    std::string hostname = "127.0.0.1";  // --host
    int32_t port = 8080;                 // --port
    std::vector<std::string> api_keys;   // --api-key, --api-key-file (any of them is accepted)
    bool endpoint_metrics = false;       // --metrics: GET /metrics
    int32_t timeout_read = 600;          // -to/--timeout: seconds a client may take to send or receive
    int32_t n_threads_http = -1;         // --threads-http: -1: n_parallel + 2 (at least)
    bool endpoint_slots = true;          // --slots / --no-slots: GET /slots

    // llama-perplexity
    int32_t n_chunks = -1;             // --chunks; -1: all
    std::string logits_file;           // --kl-divergence-base
    bool kl_divergence = false;
    int32_t ppl_stride = 0;            // --ppl-stride; 0: chunks of n_ctx scored on their second half
    int32_t ppl_output_type = 0;       // --ppl-output-type; 1: a line per chunk (first token, PPL ...)
    bool hellaswag = false;            // --hellaswag and its task count (llama.cpp's default 400)
    size_t hellaswag_tasks = 400;
    bool winogrande = false;           // --winogrande; 0 tasks: all
    size_t winogrande_tasks = 0;
    bool multiple_choice = false;      // --multiple-choice; 0 tasks: all
    size_t multiple_choice_tasks = 0;

    // llama-bench (its list options become one common_params per test: arg.h, common_params_parse_lists)
    int32_t bench_n_prompt = 512;      // -p, a test shape
    int32_t bench_n_gen = 128;         // -n, a test shape
    std::vector<std::pair<int32_t, int32_t>> bench_pg;  // -pg PP,TG: prompt-then-generation tests
    int32_t bench_n_depth = 0;         // -d: tokens in the cache before the test
    int32_t bench_reps = 5;            // -r
    int32_t bench_delay = 0;           // --delay: seconds before each test
    std::string bench_output = "md";   // -o
    std::string bench_output_err = "none";  // -oe
    bool bench_progress = false;       // --progress
    bool bench_no_warmup = false;      // --no-warmup
    std::string bench_ceiling;         // --ceiling GBPS|auto (empty: off)

    // llama-convert
    std::string convert_llama2c;       // --llama2c MODEL.bin
    std::string convert_tokenizer;     // --tokenizer TOKENIZER.bin
    std::string convert_hf;            // --hf DIR
    std::string convert_lora;          // --lora PEFT_DIR
    std::string convert_base;          // --base BASE.gguf
    std::string out_type;              // --outtype (llama-convert, llama-export-lora)

    common_params_finetune finetune;   // llama-finetune

    // llama-quantize (IN [OUT] TYPE [NTHREADS] are its positional words)
    std::vector<std::string> positional;
    bool quantize_allow_requantize = false;       // --allow-requantize
    bool quantize_leave_output = false;           // --leave-output-tensor
    bool quantize_pure = false;                   // --pure
    bool quantize_keep_split = false;             // --keep-split
    std::string quantize_imatrix;                 // --imatrix: llama.cpp's importance matrix (.dat or GGUF)
    std::vector<std::string> quantize_include_weights, quantize_exclude_weights;  // --include-weights, --exclude-weights
    ggml_type quantize_output_type = GGML_TYPE_COUNT;      // --output-tensor-type (COUNT: the mix's)
    ggml_type quantize_token_embd_type = GGML_TYPE_COUNT;  // --token-embedding-type

    // llama-embedding (llama.cpp's names)
    bool embedding = false;                 // the context returns embeddings, not logits
    int32_t embd_normalize = 2;             // --embd-normalize: -1 none, 0 max-abs int16, 1 taxicab, 2 euclidean, >2 p-norm
    std::string embd_out;                   // --embd-output-format: "" (the default text), json, json+, array
    std::string embd_sep = "\n";            // --embd-separator: between prompts in -p / -f
    enum llama_pooling_type pooling_type = LLAMA_POOLING_TYPE_UNSPECIFIED;      // --pooling
    enum llama_attention_type attention_type = LLAMA_ATTENTION_TYPE_UNSPECIFIED;  // --attention
    std::vector<llama_model_kv_override> kv_overrides;  // --override-kv KEY=TYPE:VALUE (ends with an empty key once given)
    bool check_tensors = false;        // --check-tensors: every tensor value checked at load

    // llama-tokenize
    bool ids_only = false;             // --ids
    bool show_count = false;           // --show-count
    bool read_stdin = false;           // --stdin

    // llama-imatrix (llama.cpp's names; its -o is out_file, default imatrix.dat)
    std::vector<std::string> in_files;  // --in-file, repeatable: importance matrices to combine
    int32_t n_out_freq = 10;           // --output-frequency: write the output every N calls
    int32_t n_save_freq = 0;           // --save-frequency: also a copy OUT.at_N every N calls (0: none)
    int32_t i_chunk = 0;               // --chunk: the first chunk of the text
    bool process_output = false;       // --process-output: output.weight too
    bool compute_ppl = true;           // --no-ppl: no perplexity estimates
    std::string imatrix_out_format;    // --output-format: "gguf", "dat", or "" (GGUF when -o ends in .gguf)

    // llama-logits
    std::string out_file;              // -o
    std::vector<llama_token> tokens;   // --tokens (instead of a prompt)
};

// llama.cpp's escapes: \n \r \t \' \" \\ and \xNN; any other backslash stays as it is.
void string_process_escapes(std::string & s);

// The KV cache types (the type table's kv_cache rows) by ggml's names, and their list ("f32, f16, ...").
bool common_parse_cache_type(const std::string & s, ggml_type * out);
std::string common_cache_type_names();

// llama.cpp's --override-kv KEY=TYPE:VALUE (TYPE int, float, bool or str; a key and a string of at
// most 127 bytes): false with the reason in err.
bool common_parse_kv_override(const std::string & spec, llama_model_kv_override & out, std::string & err);

// The types weights may be quantized to (the type table's weight targets with a quantizer), by
// ggml's names in any case (q4_K, Q4_K); GGML_TYPE_COUNT for another name.
ggml_type common_parse_weight_type(const std::string & s);

// The types merged LoRA weights may be written in (llama-export-lora --outtype): the type table's
// weight targets whose quantizer needs no importance matrix, by ggml's names (any case);
// GGML_TYPE_COUNT for another name.
ggml_type common_parse_merge_type(const std::string & s);
bool common_type_is_merge_target(ggml_type t);
std::string common_merge_type_names();

// Model and context parameters from the options (the program's defaults already in params).
llama_model_params common_model_params_to_llama(const common_params & params);
llama_context_params common_context_params_to_llama(const common_params & params);

// llama.cpp's helpers of the same names: a text's tokens (add_special: BOS as the model wants it;
// parse_special: special tokens' texts as those tokens), a token's text (special: special tokens
// as their text), and a llama_batch (from llama_batch_init) emptied / extended by one token.
std::vector<llama_token> common_tokenize(const llama_vocab * vocab, const std::string & text, bool add_special,
                                         bool parse_special = false);
std::string common_token_to_piece(const llama_vocab * vocab, llama_token token, bool special = true);
void common_batch_clear(llama_batch & batch);
void common_batch_add(llama_batch & batch, llama_token id, llama_pos pos, const std::vector<llama_seq_id> & seq_ids, bool logits);

// Threads when -t is not given: every core.
int32_t common_default_threads();

// The warning for GPU flags given where no GPU can take them ("" otherwise).
std::string common_gpu_flags_warning(const common_params & params, const char * program);

// The --lora / --lora-scaled adapters, loaded for the model (false with err naming the file; the
// ones loaded before are in out, for the caller to free), then set on a context at their scales.
bool common_adapters_load(llama_model * model, const common_params & params, std::vector<llama_adapter_lora *> & out, std::string & err);
bool common_adapters_apply(llama_context * ctx, const common_params & params, const std::vector<llama_adapter_lora *> & adapters);

// The sampler chain of the sampling options, as llama.cpp builds it: logit bias (-l, and
// --ignore-eos's -inf for the end-of-generation tokens) -> the --samplers list in its order
// (default penalties, dry, top_k, typ_p, top_p, min_p, xtc, temperature) -> dist; with
// --top-nsigma >= 0 top-k -> temp -> top-n-sigma -> dist instead of the list; with --mirostat
// temp -> Mirostat. n_ctx: what --repeat-last-n -1 and --dry-penalty-last-n -1 mean. The seed
// drawn (for -s -1) and a description of the chain come back. A --grammar goes first (NULL when
// it does not parse).
// The programs' log at a verbosity (common_params.verbosity: 0 errors only, 1 the log, 2 also debug
// lines), on standard error as llama.cpp's LOG_INF / LOG_DBG: common_log_init sets it and sends
// the library's log through it; common_log_at(level, ...) prints when the verbosity reaches level.
void common_log_init(int verbosity);
int common_log_verbosity();
#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
void common_log_at(int level, const char * fmt, ...);

// The prompt as llama.cpp's programs take it: -f's file read into params.prompt (one trailing
// newline dropped, unless -bf), then escapes processed (-e, the default). False with a message on
// standard error naming the program when the file cannot be read.
bool common_load_prompt(common_params & params, const char * program);

// Embeddings (llama.cpp's common): out = inp scaled to unit norm embd_norm (-1 none, 0 max absolute
// scaled to the int16 range, 1 taxicab, 2 euclidean, p > 2 p-norm); a zero vector stays zero.
void common_embd_normalize(const float * inp, float * out, int n, int embd_norm);
// Cosine similarity (two zero vectors: 1; one: 0).
float common_embd_similarity_cos(const float * embd1, const float * embd2, int n);

llama_sampler * common_sampler_chain(const llama_model * model, const common_params_sampling & sp, int32_t n_ctx, uint32_t * seed_out,
                                     std::string * desc_out);
