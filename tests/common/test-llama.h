// test-llama.h - helpers shared by the tests of the llama runtime: a quiet log whose errors are
// kept for the tests to check, models and contexts freed at scope exit, evaluation with the
// logits of every token, and llama-logits' file format.
#pragma once

#include "test-util.h"

#include "llama.h"
#include "gguf.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <unistd.h>

namespace tu {

// ---- logging: quiet, but errors are kept so tests can check the messages ------------------
inline std::mutex g_log_mutex;
inline std::string g_errors;

inline void capture_log(enum ggml_log_level level, const char * text, void *) {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) g_errors += text;
    if (getenv("LLAMA_TEST_VERBOSE")) fputs(text, stderr);
}

struct QuietLog : testing::Environment {
    void SetUp() override { llama_log_set(capture_log, nullptr); }
};
inline testing::Environment * const g_quiet_log_env = testing::AddGlobalTestEnvironment(new QuietLog);

inline std::string take_errors() {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    std::string s;
    s.swap(g_errors);
    return s;
}

// ---- model and context helpers -------------------------------------------------------------
struct ModelPtr {
    llama_model * m = nullptr;
    explicit ModelPtr(const std::string & path, bool use_mmap = true, bool vocab_only = false, bool use_repack = true) {
        llama_model_params p = llama_model_default_params();
        p.use_mmap = use_mmap;
        p.vocab_only = vocab_only;
        p.use_repack = use_repack;
        m = llama_model_load_from_file(path.c_str(), p);
    }
    ~ModelPtr() { llama_model_free(m); }
    operator llama_model *() const { return m; }
};

// Owners that free a model or context at scope exit (llama_model_load_from_file's results).
struct ModelFree {
    void operator()(llama_model * m) const { llama_model_free(m); }
};
struct CtxFree {
    void operator()(llama_context * c) const { llama_free(c); }
};
using UniqueModel = std::unique_ptr<llama_model, ModelFree>;
using UniqueCtx = std::unique_ptr<llama_context, CtxFree>;

// A context taking batches of up to n_ctx tokens per llama_decode call, evaluated in graphs of
// n_ubatch tokens, with timings.
struct CtxPtr {
    llama_context * c = nullptr;
    CtxPtr(llama_model * m, uint32_t n_ctx, uint32_t n_ubatch, int n_threads = 2, ggml_type tk = GGML_TYPE_F16,
           ggml_type tv = GGML_TYPE_F16, bool flash_attn = false) {
        llama_context_params p = llama_context_default_params();
        p.n_ctx = n_ctx;
        p.n_batch = n_ctx;
        p.n_ubatch = n_ubatch;
        p.n_threads = n_threads;
        p.n_threads_batch = n_threads;
        p.no_perf = false;
        p.type_k = tk;
        p.type_v = tv;
        p.flash_attn = flash_attn;
        c = llama_init_from_model(m, p);
    }
    ~CtxPtr() { llama_free(c); }
    operator llama_context *() const { return c; }
};

inline int32_t n_vocab_of(llama_model * m) { return llama_vocab_n_tokens(llama_model_get_vocab(m)); }

// Evaluates tokens in one llama_decode call at positions p0, p0 + 1, ... with logits for all;
// returns them ([n][n_vocab]), empty on failure.
inline std::vector<float> eval_all(llama_context * ctx, const std::vector<llama_token> & tokens, llama_pos p0 = 0) {
    const int32_t n = (int32_t) tokens.size();
    const int32_t n_vocab = n_vocab_of((llama_model *) llama_get_model(ctx));
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; i++) {
        b.token[i] = tokens[i];
        b.pos[i] = p0 + i;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    const int32_t rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc != 0) {
        ADD_FAILURE() << "llama_decode returned " << rc << ": " << take_errors();
        return {};
    }
    std::vector<float> out((size_t) n * n_vocab);
    for (int32_t i = 0; i < n; i++) {
        const float * row = llama_get_logits_ith(ctx, i);
        if (!row) {
            ADD_FAILURE() << "no logits for token " << i;
            return {};
        }
        std::copy(row, row + n_vocab, out.begin() + (size_t) i * n_vocab);
    }
    return out;
}

// ---- logits files (llama-logits, the shared reference logits) --------------------------------
struct LogitsFile {
    std::vector<llama_token> tokens;
    int32_t n_vocab = 0;
    std::vector<float> logits;  // [n_tokens][n_vocab]
};

inline bool read_logits_file(const std::string & path, LogitsFile & out) {
    std::ifstream f(path, std::ios::binary);
    int32_t hdr[2];
    if (!f.read((char *) hdr, sizeof(hdr)) || hdr[0] <= 0 || hdr[1] <= 0) return false;
    out.tokens.resize((size_t) hdr[0]);
    out.n_vocab = hdr[1];
    out.logits.resize((size_t) hdr[0] * hdr[1]);
    return f.read((char *) out.tokens.data(), hdr[0] * sizeof(int32_t)) &&
           f.read((char *) out.logits.data(), (std::streamsize) (out.logits.size() * sizeof(float)));
}

// The KL divergence of two sets of logits is tu::mean_kl (test-util.h).

// ---- model files ---------------------------------------------------------------------------
inline std::string temp_path(const std::string & what) {
    return testing::TempDir() + "test-llama-" + std::to_string((long) getpid()) + "-" + what;
}

// A file removed when the test ends.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string & what) : path(temp_path(what)) {}
    ~TempFile() { unlink(path.c_str()); }
};

// Writes a copy of the model file src through gguf: its metadata changed by edit_meta, the
// tensors for which keep() holds, then the tensors in extra. False on failure.
inline bool rewrite_model(const std::string & src, const std::string & dst, const std::function<void(gguf_context *)> & edit_meta,
                   const std::function<bool(const ggml_tensor *)> & keep, const std::vector<ggml_tensor *> & extra = {}) {
    ggml_context * data = nullptr;
    gguf_init_params ip = { false, &data, false };
    gguf_context * in = gguf_init_from_file(src.c_str(), ip);
    if (!in) return false;
    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, in);
    if (edit_meta) edit_meta(out);
    for (ggml_tensor * t = ggml_get_first_tensor(data); t; t = ggml_get_next_tensor(data, t)) {
        if (!keep || keep(t)) gguf_add_tensor(out, t);
    }
    for (ggml_tensor * t : extra) gguf_add_tensor(out, t);
    const bool ok = gguf_write_to_file(out, dst.c_str(), false);
    gguf_free(out);
    gguf_free(in);
    ggml_free(data);
    return ok;
}



// Writes the model file src with every quantized tensor dequantized to F32 (the same values the
// quantized matrix products multiply by), metadata unchanged but the file type. False on failure.
inline bool write_dequantized(const std::string & src, const std::string & dst) {
    ggml_context * data = nullptr;
    gguf_context * in = gguf_init_from_file(src.c_str(), {false, &data, false});
    if (!in) return false;
    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, in);
    gguf_set_val_u32(out, "general.file_type", 0);  // all F32
    size_t mem = ggml_tensor_overhead() * gguf_get_n_tensors(in);
    for (ggml_tensor * t = ggml_get_first_tensor(data); t; t = ggml_get_next_tensor(data, t)) mem += ggml_nelements(t) * 4 + 64;
    tu::Ctx f32(mem);
    for (ggml_tensor * t = ggml_get_first_tensor(data); t; t = ggml_get_next_tensor(data, t)) {
        if (!ggml_is_quantized(t->type)) {
            gguf_add_tensor(out, t);
            continue;
        }
        ggml_tensor * d = ggml_new_tensor(f32, GGML_TYPE_F32, GGML_MAX_DIMS, t->ne);
        ggml_set_name(d, t->name);
        const int64_t rows = ggml_nrows(t);
        for (int64_t i = 0; i < rows; i++) {
            ggml_get_type_traits(t->type)->to_float((const char *) t->data + i * t->nb[1], (float *) d->data + i * t->ne[0], t->ne[0]);
        }
        gguf_add_tensor(out, d);
    }
    const bool ok = gguf_write_to_file(out, dst.c_str(), false);
    gguf_free(out);
    gguf_free(in);
    ggml_free(data);
    return ok;
}


}  // namespace tu
