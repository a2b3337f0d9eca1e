// llama-save-load-state: saves a context's state after a prompt and generates from it three times,
// as llama.cpp's llama-save-load-state (its flags and output): in the context itself, in a new
// context the state is loaded into, and in a third after moving the prompt's cells from
// sequence 0 to sequence 1 (llama_state_seq_get_data / _set_data). The three continuations must
// be the same; the exit status says whether they are.
//
//   llama-save-load-state -m MODEL [-p PROMPT] [-n N] [-s SEED] [options]
//
// Defaults: the prompt "The quick brown fox", 16 tokens, seed 1234; each run samples with a
// plain draw (llama_sampler_init_dist) seeded alike. The state goes through the file
// dump_state.bin in the current folder, as llama.cpp's. Standard output: the three runs; the
// sizes and the verdict go to standard error.
#include "arg.h"
#include "common.h"
#include "llama.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool read_file(const char * path, std::vector<uint8_t> & out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    out.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    return true;
}

// n_predict tokens sampled from ctx's last logits, each decoded at n_past, n_past + 1, ... in
// sequence seq; printed as they come. False (with a message) if a decode fails.
bool generate(llama_context * ctx, llama_sampler * smpl, llama_batch & batch, int n_predict, int n_past, llama_seq_id seq,
              std::string & result) {
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    for (int i = 0; i < n_predict; i++) {
        const llama_token next = llama_sampler_sample(smpl, ctx, -1);
        const std::string piece = common_token_to_piece(vocab, next);
        printf("%s", piece.c_str());
        fflush(stdout);
        result += piece;
        common_batch_clear(batch);
        common_batch_add(batch, next, n_past, {seq}, true);
        if (llama_decode(ctx, batch)) {
            fprintf(stderr, "\n%s : failed to evaluate\n", "main");
            return false;
        }
        n_past += 1;
    }
    return true;
}

// Loads dump_state.bin into ctx; false with a message.
bool load_state(llama_context * ctx) {
    std::vector<uint8_t> state_mem;
    if (!read_file("dump_state.bin", state_mem)) {
        fprintf(stderr, "\n%s : cannot read dump_state.bin\n", "main");
        return false;
    }
    const size_t read = state_mem.size();
    if (read != llama_state_set_data(ctx, state_mem.data(), state_mem.size())) {
        fprintf(stderr, "\n%s : failed to read state\n", "main");
        return false;
    }
    fprintf(stderr, "%s : deserialized state from %zd out of a maximum of %zd bytes\n", "main", read, state_mem.size());
    return true;
}

}  // namespace

int main(int argc, char ** argv) {
    common_params params;
    params.prompt = "The quick brown fox";
    params.sampling.seed = 1234;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_SAVE_LOAD_STATE)) return 1;
    if (params.model.empty()) {
        fprintf(stderr, "llama-save-load-state: no model given (-m MODEL)\n(see llama-save-load-state --help)\n");
        return 1;
    }
    if (!common_load_prompt(params, "llama-save-load-state")) return 1;
    common_log_init(params.verbosity);
    if (const std::string w = common_gpu_flags_warning(params, "llama-save-load-state"); !w.empty()) fputs(w.c_str(), stderr);
    if (params.n_predict < 0) params.n_predict = 16;

    llama_backend_init();
    llama_model * model = llama_model_load_from_file(params.model.c_str(), common_model_params_to_llama(params));
    if (!model) {
        fprintf(stderr, "%s : failed to init\n", "main");
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::vector<llama_adapter_lora *> adapters;
    if (std::string err; !common_adapters_load(model, params, adapters, err)) {
        fprintf(stderr, "llama-save-load-state: %s\n", err.c_str());
        return 1;
    }
    // llama.cpp's common context (n_ctx 4096 unless -c), with room for sequence 1 of the third
    // run (llama.cpp does not check sequence ids against n_seq_max; this runtime does).
    llama_context_params cparams = common_context_params_to_llama(params);
    if (params.n_ctx <= 0) cparams.n_ctx = 4096;
    if (cparams.n_seq_max < 2) cparams.n_seq_max = 2;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "%s : failed to init\n", "main");
        return 1;
    }
    common_adapters_apply(ctx, params, adapters);

    const uint32_t seed = params.sampling.seed < 0 ? LLAMA_DEFAULT_SEED : (uint32_t) params.sampling.seed;
    const llama_sampler_chain_params sparams = llama_sampler_chain_default_params();
    llama_sampler * smpl = llama_sampler_chain_init(sparams);
    llama_sampler_chain_add(smpl, llama_sampler_init_dist(seed));

    // the prompt, with the logits of its last token
    const std::vector<llama_token> tokens = common_tokenize(vocab, params.prompt, true);
    if (tokens.empty()) {
        fprintf(stderr, "llama-save-load-state: the prompt has no tokens\n");
        return 1;
    }
    llama_batch batch = llama_batch_init((int32_t) tokens.size(), 0, 1);
    for (size_t i = 0; i < tokens.size(); i++) common_batch_add(batch, tokens[i], (llama_pos) i, {0}, false);
    batch.logits[batch.n_tokens - 1] = true;
    if (llama_decode(ctx, batch)) {
        fprintf(stderr, "%s : failed to evaluate the prompt\n", "main");
        return 1;
    }
    const int n_past_saved = batch.n_tokens;

    // save the state (logits, embeddings and KV cache) to a file
    {
        std::vector<uint8_t> state_mem(llama_state_get_size(ctx));
        const size_t written = llama_state_get_data(ctx, state_mem.data(), state_mem.size());
        FILE * fp_write = fopen("dump_state.bin", "wb");
        if (!fp_write || fwrite(state_mem.data(), 1, written, fp_write) != written || fclose(fp_write) != 0) {
            fprintf(stderr, "%s : cannot write dump_state.bin\n", "main");
            return 1;
        }
        fprintf(stderr, "%s : serialized state into %zd out of a maximum of %zd bytes\n", "main", written, state_mem.size());
    }

    std::string result0, result1, result2;

    // first run
    printf("\nfirst run: %s", params.prompt.c_str());
    if (!generate(ctx, smpl, batch, params.n_predict, n_past_saved, 0, result0)) return 1;
    printf("\n\n");

    // second run: a new context with the saved state
    llama_context * ctx2 = llama_init_from_model(model, cparams);
    if (!ctx2) return 1;
    common_adapters_apply(ctx2, params, adapters);
    llama_sampler * smpl2 = llama_sampler_chain_init(sparams);
    llama_sampler_chain_add(smpl2, llama_sampler_init_dist(seed));
    printf("\nsecond run: %s", params.prompt.c_str());
    if (!load_state(ctx2)) return 1;
    if (!generate(ctx2, smpl2, batch, params.n_predict, n_past_saved, 0, result1)) return 1;
    printf("\n\n");
    if (result0 != result1) {
        fprintf(stderr, "\n%s : error : the 2 generations are different\n", "main");
        return 1;
    }

    // third run: the saved state, its sequence 0 moved to sequence 1
    llama_context * ctx3 = llama_init_from_model(model, cparams);
    if (!ctx3) return 1;
    common_adapters_apply(ctx3, params, adapters);
    llama_sampler * smpl3 = llama_sampler_chain_init(sparams);
    llama_sampler_chain_add(smpl3, llama_sampler_init_dist(seed));
    printf("\nsingle seq run: %s", params.prompt.c_str());
    if (!load_state(ctx3)) return 1;
    {
        std::vector<uint8_t> seq_store(llama_state_seq_get_size(ctx3, 0));
        const size_t ncopy = llama_state_seq_get_data(ctx3, seq_store.data(), seq_store.size(), 0);
        if (ncopy != seq_store.size()) {
            fprintf(stderr, "\n%s : seq copy data length %zd does not match expected length %zd\n", "main", ncopy, seq_store.size());
            return 1;
        }
        fprintf(stderr, "%s : seq 0 copied, %zd bytes\n", "main", ncopy);
        llama_kv_self_clear(ctx3);
        fprintf(stderr, "%s : kv cache cleared\n", "main");
        const size_t nset = llama_state_seq_set_data(ctx3, seq_store.data(), seq_store.size(), 1);
        if (nset != seq_store.size()) {
            fprintf(stderr, "\n%s : seq set data length %zd does not match expected length %zd\n", "main", nset, seq_store.size());
            return 1;
        }
        fprintf(stderr, "%s : seq 1 restored, %zd bytes\n", "main", nset);
    }
    if (!generate(ctx3, smpl3, batch, params.n_predict, n_past_saved, 1, result2)) return 1;
    printf("\n");

    llama_sampler_free(smpl);
    llama_sampler_free(smpl2);
    llama_sampler_free(smpl3);
    llama_batch_free(batch);
    llama_free(ctx3);
    llama_free(ctx2);
    llama_free(ctx);
    for (llama_adapter_lora * ad : adapters) llama_adapter_lora_free(ad);
    llama_model_free(model);
    llama_backend_free();

    if (result0 != result2) {
        fprintf(stderr, "\n%s : error : the seq restore generation is different\n", "main");
        return 1;
    }
    fprintf(stderr, "\n%s : success\n", "main");
    return 0;
}
