// llama-batched-bench: the speed of decoding many sequences together, as llama.cpp's
// llama-batched-bench measures it (its flags, table and JSON lines).
//
//   llama-batched-bench -m MODEL [-c 4096] [-b 2048] [-ub 512] -npp 128,256 -ntg 128 -npl 1,2,4,8 [-pps]
//                       [-fa] [-t N] [-ngl N] [--output-format md|jsonl]
//
// For every PP in -npp, TG in -ntg and B in -npl (in that nesting) that fits the context (B
// sequences of PP + TG tokens, or with -pps one prompt of PP shared by all and B * TG generated):
// the cache is cleared, the B prompts (token 0 at positions 0 .. PP-1, interleaved across the
// sequences; logits of the last token only) are decoded in llama_decode calls of -b tokens, the
// prompt copied to the other sequences with -pps, then TG steps each decode one token per sequence
// (logits kept). T_PP and T_TG are the wall times of the two phases; S_PP = B * PP / T_PP (PP / T_PP
// with -pps), S_TG = B * TG / T_TG, S = N_KV / (T_PP + T_TG) with N_KV the cells the test needs.
// A 16-token decode warms up first. Standard output: the table (or a JSON object per test); the
// log and timings go to standard error.
#include "arg.h"
#include "common.h"
#include "llama.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// Decodes the batch in llama_decode calls of at most n_batch tokens.
bool decode_helper(llama_context * ctx, llama_batch & batch, int32_t n_batch) {
    for (int32_t i = 0; i < batch.n_tokens; i += n_batch) {
        const int32_t n_tokens = std::min(n_batch, batch.n_tokens - i);
        llama_batch view = {n_tokens, batch.token + i, nullptr, batch.pos + i, batch.n_seq_id + i, batch.seq_id + i, batch.logits + i};
        const int ret = llama_decode(ctx, view);
        if (ret != 0) {
            fprintf(stderr, "failed to decode the batch, n_batch = %d, ret = %d\n", n_batch, ret);
            return false;
        }
        llama_synchronize(ctx);
    }
    return true;
}

}  // namespace

int main(int argc, char ** argv) {
    common_params params;
    params.n_ctx = 4096;  // llama.cpp's defaults
    params.n_batch = 2048;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_BATCHED_BENCH)) return 1;
    if (params.model.empty()) {
        fprintf(stderr, "llama-batched-bench: no model given (-m MODEL)\n(see llama-batched-bench --help)\n");
        return 1;
    }
    common_log_init(params.verbosity);
    if (const std::string w = common_gpu_flags_warning(params, "llama-batched-bench"); !w.empty()) fputs(w.c_str(), stderr);

    const bool is_pp_shared = params.is_pp_shared;
    const std::vector<int32_t> & n_pp = params.n_pp;
    const std::vector<int32_t> & n_tg = params.n_tg;
    const std::vector<int32_t> & n_pl = params.n_pl;

    llama_backend_init();
    llama_model * model = llama_model_load_from_file(params.model.c_str(), common_model_params_to_llama(params));
    if (!model) {
        fprintf(stderr, "%s: error: unable to load model\n", "main");
        return 1;
    }
    std::vector<llama_adapter_lora *> adapters;
    if (std::string err; !common_adapters_load(model, params, adapters, err)) {
        fprintf(stderr, "llama-batched-bench: %s\n", err.c_str());
        return 1;
    }

    llama_context_params ctx_params = common_context_params_to_llama(params);
    if (params.n_ctx == 0) ctx_params.n_ctx = (uint32_t) std::max(1, llama_model_n_ctx_train(model));  // -c 0: the model's
    // as many sequences as the largest -npl
    ctx_params.n_seq_max = n_pl.empty() ? 1 : (uint32_t) *std::max_element(n_pl.begin(), n_pl.end());
    llama_context * ctx = llama_init_from_model(model, ctx_params);
    if (!ctx) {
        fprintf(stderr, "%s: error: failed to create the llama_context\n", "main");
        return 1;
    }
    common_adapters_apply(ctx, params, adapters);

    const int32_t n_kv_max = (int32_t) llama_n_ctx(ctx);
    const int32_t n_batch = (int32_t) llama_n_batch(ctx);
    llama_batch batch = llama_batch_init(std::max(n_kv_max, 16), 0, 1);

    // warm up
    for (int i = 0; i < 16; i++) common_batch_add(batch, 0, i, {0}, false);
    if (!decode_helper(ctx, batch, n_batch)) {
        fprintf(stderr, "%s: llama_decode() failed\n", "main");
        return 1;
    }

    if (!params.batched_bench_output_jsonl) {
        printf("\n");
        printf("%s: n_kv_max = %d, n_batch = %d, n_ubatch = %d, flash_attn = %d, is_pp_shared = %d, n_gpu_layers = %d, n_threads = %u, "
               "n_threads_batch = %u\n", "main", n_kv_max, params.n_batch, params.n_ubatch, params.flash_attn ? 1 : 0, is_pp_shared ? 1 : 0,
               params.n_gpu_layers, ctx_params.n_threads, ctx_params.n_threads_batch);
        printf("\n");
        printf("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s",
               "S_TG t/s", "T s", "S t/s");
        printf("|%6s-|-%6s-|-%4s-|-%6s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|\n", "------", "------", "----", "------", "--------", "--------",
               "--------", "--------", "--------", "--------");
        fflush(stdout);
    }

    for (const int pp : n_pp) {
        for (const int tg : n_tg) {
            for (const int pl : n_pl) {
                const int n_ctx_req = is_pp_shared ? pp + pl * tg : pl * (pp + tg);
                if (n_ctx_req > n_kv_max) continue;

                common_batch_clear(batch);
                for (int i = 0; i < pp; i++) {
                    for (int j = 0; j < (is_pp_shared ? 1 : pl); j++) common_batch_add(batch, 0, i, {j}, false);
                }
                batch.logits[batch.n_tokens - 1] = true;

                const int64_t t_pp_start = ggml_time_us();
                llama_kv_self_clear(ctx);
                if (!decode_helper(ctx, batch, n_batch)) {
                    fprintf(stderr, "%s: llama_decode() failed\n", "main");
                    return 1;
                }
                if (is_pp_shared) {
                    for (int32_t i = 1; i < pl; i++) llama_kv_self_seq_cp(ctx, 0, i, -1, -1);
                }
                const int64_t t_pp_end = ggml_time_us();

                const int64_t t_tg_start = ggml_time_us();
                for (int i = 0; i < tg; i++) {
                    common_batch_clear(batch);
                    for (int j = 0; j < pl; j++) common_batch_add(batch, 0, pp + i, {j}, true);
                    if (!decode_helper(ctx, batch, n_batch)) {
                        fprintf(stderr, "%s: llama_decode() failed\n", "main");
                        return 1;
                    }
                }
                const int64_t t_tg_end = ggml_time_us();

                const int32_t n_kv = n_ctx_req;
                const float t_pp = (t_pp_end - t_pp_start) / 1000000.0f;
                const float t_tg = (t_tg_end - t_tg_start) / 1000000.0f;
                const float t = t_pp + t_tg;
                const float speed_pp = is_pp_shared ? pp / t_pp : pl * pp / t_pp;
                const float speed_tg = pl * tg / t_tg;
                const float speed = n_kv / t;

                if (params.batched_bench_output_jsonl) {
                    printf("{\"n_kv_max\": %d, \"n_batch\": %d, \"n_ubatch\": %d, \"flash_attn\": %d, \"is_pp_shared\": %d, \"n_gpu_layers\": %d, "
                           "\"n_threads\": %u, \"n_threads_batch\": %u, \"pp\": %d, \"tg\": %d, \"pl\": %d, \"n_kv\": %d, \"t_pp\": %f, "
                           "\"speed_pp\": %f, \"t_tg\": %f, \"speed_tg\": %f, \"t\": %f, \"speed\": %f}\n",
                           n_kv_max, params.n_batch, params.n_ubatch, params.flash_attn ? 1 : 0, is_pp_shared ? 1 : 0, params.n_gpu_layers,
                           ctx_params.n_threads, ctx_params.n_threads_batch, pp, tg, pl, n_kv, t_pp, speed_pp, t_tg, speed_tg, t, speed);
                } else {
                    printf("|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", pp, tg, pl, n_kv, t_pp, speed_pp,
                           t_tg, speed_tg, t, speed);
                }
                fflush(stdout);
            }
        }
    }

    printf("\n");
    fflush(stdout);
    llama_perf_context_print(ctx);

    llama_batch_free(batch);
    llama_free(ctx);
    for (llama_adapter_lora * ad : adapters) llama_adapter_lora_free(ad);
    llama_model_free(model);
    llama_backend_free();
    printf("\n\n");
    return 0;
}
