// common-style.cpp - a downstream C++ program that uses the API the way llama.cpp's common/
// library and example programs do: the backend registry (devices, per-backend functions looked up
// by name), a thread pool made with ggml_threadpool_new and attached to the context, the
// unique_ptr owners of llama-cpp.h, one batch carrying several sequences, and the KV cache view.
// Three sequences are generated greedily side by side, the first and the last from the same
// prompt: they must come out identical. Prints the first one's text; exit status 1 on any failure.
#include "llama-cpp.h"
#include "ggml-cpp.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "common-style: check failed: %s (line %d)\n", #x, __LINE__); return 1; } } while (0)

static void batch_add(llama_batch & b, llama_token tok, llama_pos pos, llama_seq_id seq, bool logits) {
    b.token[b.n_tokens] = tok;
    b.pos[b.n_tokens] = pos;
    b.n_seq_id[b.n_tokens] = 1;
    b.seq_id[b.n_tokens][0] = seq;
    b.logits[b.n_tokens] = logits;
    b.n_tokens++;
}

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool bos) {
    const int n = -llama_tokenize(vocab, text.c_str(), (int32_t) text.size(), nullptr, 0, bos, true);
    std::vector<llama_token> toks(n);
    if (llama_tokenize(vocab, text.c_str(), (int32_t) text.size(), toks.data(), n, bos, true) != n) toks.clear();
    return toks;
}

static std::string piece(const llama_vocab * vocab, llama_token tok) {
    char buf[128];
    const int n = llama_token_to_piece(vocab, tok, buf, sizeof(buf), 0, false);
    return n > 0 ? std::string(buf, n) : std::string();
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 1;
    }
    llama_log_set([](ggml_log_level level, const char * text, void *) { if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr); }, nullptr);
    ggml_backend_load_all();
    llama_backend_init();

    // The registry: every device belongs to an entry found again by its name; the CPU's entry
    // gives the thread-pool functions by name, as llama.cpp's main program takes them.
    CHECK(ggml_backend_reg_count() >= 1);
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
        CHECK(reg != nullptr && ggml_backend_reg_by_name(ggml_backend_reg_name(reg)) == reg);
        CHECK(ggml_backend_dev_by_name(ggml_backend_dev_name(dev)) != nullptr);
        ggml_backend_dev_props props;
        ggml_backend_dev_get_props(dev, &props);
        CHECK(props.name && props.type == ggml_backend_dev_type(dev));
    }
    ggml_backend_reg_t cpu_reg = ggml_backend_dev_backend_reg(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    auto * threadpool_new = (decltype(ggml_threadpool_new) *) ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_new");
    auto * threadpool_free = (decltype(ggml_threadpool_free) *) ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_free");
    CHECK(threadpool_new && threadpool_free);
    CHECK(ggml_backend_reg_get_proc_address(cpu_reg, "no_such_function") == nullptr);
    { ggml_backend_ptr cpu(ggml_backend_init_by_name("cpu", nullptr)); CHECK(cpu != nullptr); }

    ggml_threadpool_params tpp = ggml_threadpool_params_default(2);
    ggml_threadpool_params tpp_batch = ggml_threadpool_params_default(2);
    CHECK(ggml_threadpool_params_match(&tpp, &tpp_batch));
    tpp.paused = true;  // a paused pool: the first compute resumes it
    ggml_threadpool * threadpool = threadpool_new(&tpp);
    CHECK(threadpool && ggml_threadpool_get_n_threads(threadpool) == 2);

    int rc = 0;
    {
        llama_model_ptr model(llama_model_load_from_file(argv[1], llama_model_default_params()));
        CHECK(model);
        const llama_vocab * vocab = llama_model_get_vocab(model.get());
        const int n_seq = 3, n_predict = 12;
        llama_context_params cparams = llama_context_default_params();
        cparams.n_ctx = 256;
        cparams.n_batch = 64;
        cparams.n_seq_max = n_seq;
        llama_context_ptr ctx(llama_init_from_model(model.get(), cparams));
        CHECK(ctx);
        llama_attach_threadpool(ctx.get(), threadpool, nullptr);

        const std::string prompts[n_seq] = { "Once upon a time", "The little dog", "Once upon a time" };
        llama_batch batch = llama_batch_init(64, 0, n_seq);
        std::vector<int> last_row(n_seq);
        std::vector<llama_pos> n_past(n_seq);
        int n_prompt_tokens = 0;
        for (int s = 0; s < n_seq; s++) {
            const std::vector<llama_token> toks = tokenize(vocab, prompts[s], true);
            CHECK(!toks.empty());
            for (size_t i = 0; i < toks.size(); i++) batch_add(batch, toks[i], (llama_pos) i, s, i + 1 == toks.size());
            last_row[s] = batch.n_tokens - 1;
            n_past[s] = (llama_pos) toks.size();
            n_prompt_tokens += (int) toks.size();
        }
        CHECK(llama_decode(ctx.get(), batch) == 0);

        llama_kv_cache_view view = llama_kv_cache_view_init(ctx.get(), n_seq);
        llama_kv_cache_view_update(ctx.get(), &view);
        CHECK(view.n_cells == (int32_t) llama_n_ctx(ctx.get()));
        CHECK(view.used_cells == n_prompt_tokens && view.token_count == n_prompt_tokens);
        CHECK(view.max_contiguous == view.n_cells - n_prompt_tokens);

        std::vector<llama_sampler_ptr> samplers;
        for (int s = 0; s < n_seq; s++) samplers.emplace_back(llama_sampler_init_greedy());
        std::string text[n_seq];
        for (int t = 0; t < n_predict; t++) {
            llama_token next[n_seq];
            for (int s = 0; s < n_seq; s++) {
                next[s] = llama_sampler_sample(samplers[s].get(), ctx.get(), last_row[s]);
                text[s] += piece(vocab, next[s]);
            }
            batch.n_tokens = 0;
            for (int s = 0; s < n_seq; s++) {
                batch_add(batch, next[s], n_past[s]++, s, true);
                last_row[s] = s;
            }
            CHECK(llama_decode(ctx.get(), batch) == 0);
        }
        llama_kv_cache_view_update(ctx.get(), &view);
        CHECK(view.used_cells == n_prompt_tokens + n_seq * n_predict);
        // Copying a sequence shares its cells: one more token per cell, no more cells.
        llama_kv_cache_seq_cp(ctx.get(), 0, 1, -1, -1);
        llama_kv_cache_view_update(ctx.get(), &view);
        CHECK(view.token_count > view.used_cells);
        llama_kv_cache_view_free(&view);

        llama_detach_threadpool(ctx.get());
        llama_batch_free(batch);
        if (text[0] != text[2] || text[0] == text[1]) {
            fprintf(stderr, "common-style: sequences 0 and 2 (same prompt) differ or 1 equals them:\n[%s]\n[%s]\n[%s]\n",
                    text[0].c_str(), text[1].c_str(), text[2].c_str());
            rc = 1;
        }
        printf("%s%s\n", prompts[0].c_str(), text[0].c_str());
    }
    threadpool_free(threadpool);
    llama_backend_free();
    return rc;
}
