// llama-batched: -np continuations of one prompt, decoded together in one context, as llama.cpp's
// llama-batched (its flags and output).
//
//   llama-batched -m MODEL [-p PROMPT] [-n N] [-np N] [--top-k N] [--top-p N] [--temp N] [-s SEED]
//
// The prompt (default "Hello my name is") is evaluated once, its tokens in every sequence
// 0 .. np-1 (the cells are shared); then each step samples one token per unfinished sequence from
// its last logits (one sampler chain for all: top-k, top-p, temperature, a draw with the seed) and
// decodes the new tokens together in one batch. -n is the total length of each sequence, prompt
// included; the context holds exactly prompt + np * (n - prompt) tokens. Standard output: the
// prompt's tokens, then (np > 1) "sequence i:" and the prompt with its continuation for each
// sequence; np = 1 prints the tokens as they come. The log and timings go to standard error.
#include "arg.h"
#include "common.h"
#include "llama.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

#define log_info(...) common_log_at(1, __VA_ARGS__)  // llama.cpp's LOG_INF: standard error

void out(const std::string & s) {  // llama.cpp's LOG: standard output
    fputs(s.c_str(), stdout);
    fflush(stdout);
}

int fail(const char * fmt, const std::string & what) {
    fprintf(stderr, "llama-batched: ");
    fprintf(stderr, fmt, what.c_str());
    fprintf(stderr, "\n");
    return 1;
}

}  // namespace

int main(int argc, char ** argv) {
    common_params params;
    params.prompt = "Hello my name is";
    params.n_predict = 32;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_BATCHED)) return 1;
    if (params.model.empty()) {
        fprintf(stderr, "llama-batched: no model given (-m MODEL)\n(see llama-batched --help)\n");
        return 1;
    }
    if (!common_load_prompt(params, "llama-batched")) return 1;
    common_log_init(params.verbosity);
    if (const std::string w = common_gpu_flags_warning(params, "llama-batched"); !w.empty()) log_info("%s", w.c_str());

    const int n_parallel = params.n_parallel;  // sequences
    const int n_predict = params.n_predict;    // the length of each, prompt included

    llama_backend_init();
    llama_model * model = llama_model_load_from_file(params.model.c_str(), common_model_params_to_llama(params));
    if (!model) return fail("cannot load model '%s'", params.model);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::vector<llama_adapter_lora *> adapters;
    if (std::string err; !common_adapters_load(model, params, adapters, err)) return fail("%s", err);

    const std::vector<llama_token> tokens_list = common_tokenize(vocab, params.prompt, true);
    const int n_prompt = (int) tokens_list.size();
    if (n_prompt == 0) return fail("%s", "the prompt has no tokens");
    if (n_predict < n_prompt) {
        return fail("%s", "-n " + std::to_string(n_predict) + " is the length of each sequence, prompt included: at least the prompt's " +
                              std::to_string(n_prompt) + " tokens");
    }
    const int n_kv_req = n_prompt + (n_predict - n_prompt) * n_parallel;

    llama_context_params ctx_params = common_context_params_to_llama(params);
    ctx_params.n_ctx = (uint32_t) n_kv_req;
    ctx_params.n_batch = (uint32_t) std::max(n_predict, n_parallel);
    llama_context * ctx = llama_init_from_model(model, ctx_params);
    if (!ctx) return fail("%s", "failed to create the llama_context");
    common_adapters_apply(ctx, params, adapters);

    llama_sampler_chain_params sparams = llama_sampler_chain_default_params();
    sparams.no_perf = false;
    llama_sampler * smpl = llama_sampler_chain_init(sparams);
    llama_sampler_chain_add(smpl, llama_sampler_init_top_k(params.sampling.top_k));
    llama_sampler_chain_add(smpl, llama_sampler_init_top_p(params.sampling.top_p, params.sampling.min_keep));
    llama_sampler_chain_add(smpl, llama_sampler_init_temp(params.sampling.temp));
    llama_sampler_chain_add(smpl, llama_sampler_init_dist(params.sampling.seed < 0 ? LLAMA_DEFAULT_SEED : (uint32_t) params.sampling.seed));

    const int n_ctx = (int) llama_n_ctx(ctx);
    log_info("\n%s: n_predict = %d, n_ctx = %d, n_batch = %u, n_parallel = %d, n_kv_req = %d\n", "main", n_predict, n_ctx,
             ctx_params.n_batch, n_parallel, n_kv_req);
    if (n_kv_req > n_ctx) {
        fprintf(stderr, "%s: error: n_kv_req (%d) > n_ctx, the required KV cache size is not big enough\n", "main", n_kv_req);
        fprintf(stderr, "%s:        either reduce n_parallel or increase n_ctx\n", "main");
        return 1;
    }

    // the prompt, token by token
    out("\n");
    for (llama_token id : tokens_list) out(common_token_to_piece(vocab, id));

    // the prompt once, in every sequence; logits of its last token only
    llama_batch batch = llama_batch_init(std::max(n_prompt, n_parallel), 0, n_parallel);
    std::vector<llama_seq_id> seq_ids(n_parallel);
    for (int i = 0; i < n_parallel; i++) seq_ids[i] = i;
    for (int i = 0; i < n_prompt; i++) common_batch_add(batch, tokens_list[i], i, seq_ids, false);
    batch.logits[batch.n_tokens - 1] = true;
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "%s: llama_decode() failed\n", "main");
        return 1;
    }
    if (n_parallel > 1) out("\n\nmain: generating " + std::to_string(n_parallel) + " sequences ...\n");

    std::vector<std::string> streams(n_parallel);
    // each sequence's last token in the batch (whose logits it samples from); -1: finished
    std::vector<int32_t> i_batch(n_parallel, batch.n_tokens - 1);
    int n_cur = batch.n_tokens;
    int n_decode = 0;
    const int64_t t_main_start = ggml_time_us();
    while (n_cur <= n_predict) {
        common_batch_clear(batch);
        for (int32_t i = 0; i < n_parallel; i++) {
            if (i_batch[i] < 0) continue;
            const llama_token id = llama_sampler_sample(smpl, ctx, i_batch[i]);
            if (llama_vocab_is_eog(vocab, id) || n_cur == n_predict) {
                i_batch[i] = -1;
                out("\n");
                if (n_parallel > 1) log_info("%s: stream %d finished at n_cur = %d", "main", i, n_cur);
                continue;
            }
            const std::string piece = common_token_to_piece(vocab, id);
            if (n_parallel == 1) out(piece);
            streams[i] += piece;
            i_batch[i] = batch.n_tokens;
            common_batch_add(batch, id, n_cur, {i}, true);
            n_decode++;
        }
        if (batch.n_tokens == 0) break;  // all finished
        n_cur++;
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "%s : failed to eval, return code %d\n", "main", 1);
            return 1;
        }
    }
    if (n_parallel > 1) {
        out("\n");
        for (int32_t i = 0; i < n_parallel; i++) out("sequence " + std::to_string(i) + ":\n\n" + params.prompt + streams[i] + "\n\n");
    }
    const int64_t t_main_end = ggml_time_us();
    log_info("%s: decoded %d tokens in %.2f s, speed: %.2f t/s\n", "main", n_decode, (t_main_end - t_main_start) / 1000000.0f,
             n_decode / ((t_main_end - t_main_start) / 1000000.0f));
    out("\n");
    if (common_log_verbosity() >= 1) {
        llama_perf_sampler_print(smpl);
        llama_perf_context_print(ctx);
        fprintf(stderr, "\n");
    }

    llama_batch_free(batch);
    llama_sampler_free(smpl);
    llama_free(ctx);
    for (llama_adapter_lora * ad : adapters) llama_adapter_lora_free(ad);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
