// llama-parallel: a server with -np clients simulated in one context, serving -ns requests, as
// llama.cpp's llama-parallel (its flags and output).
//
//   llama-parallel -m MODEL [-np 1] [-ns 1] [-n N] [-f PROMPTS] [-c 4096] [-b 2048] [sampling]
//
// A system prompt (a dialog transcript) is decoded once in sequence 0 and shared with the clients'
// sequences 1 .. np (its cells, not copies). Each request is a question drawn with rand() after
// srand(1234) from nine built-in questions, or from the lines of -f / -p; its prompt is
// "QUESTION\nAssistant:" after the system prompt, without BOS. Every step puts one batch
// together: the token each busy client sampled last, then (continuous batching, the default;
// with -nocb only when every client is idle) the prompts of new requests for the idle clients, and
// decodes it in pieces of -b tokens (halved on a full cache, a "cache miss"). A client samples from
// its last token's logits with its own sampler chain (the sampling options) and is done, after at
// least 3 tokens, at an end-of-generation token, when prompt + response reach -n, or when the
// response holds "User:" or a newline; its sequence then goes back to the system prompt. The
// log on standard error is llama.cpp's: each request's start and its input and response, the
// totals and timings.
#include "arg.h"
#include "common.h"
#include "llama.h"

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// llama.cpp's LOG_INF, LOG_DBG: standard error
#define LOG_INF(...) common_log_at(1, __VA_ARGS__)
#define LOG_DBG(...) common_log_at(2, __VA_ARGS__)

std::string trim(const std::string & s) {
    size_t b = 0, e = s.size();
    while (b < e && isspace((unsigned char) s[b])) b++;
    while (e > b && isspace((unsigned char) s[e - 1])) e--;
    return s.substr(b, e - b);
}

const char * const k_system =
R"(Transcript of a never ending dialog, where the User interacts with an Assistant.
The Assistant is helpful, kind, honest, good at writing, and never fails to answer the User's requests immediately and with precision.

User: Recommend a nice restaurant in the area.
Assistant: I recommend the restaurant "The Golden Duck". It is a 5 star restaurant with a great view of the city. The food is delicious and the service is excellent. The prices are reasonable and the portions are generous. The restaurant is located at 123 Main Street, New York, NY 10001. The phone number is (212) 555-1234. The hours are Monday through Friday from 11:00 am to 10:00 pm. The restaurant is closed on Saturdays and Sundays.
User: Who is Richard Feynman?
Assistant: Richard Feynman was an American physicist who is best known for his work in quantum mechanics and particle physics. He was awarded the Nobel Prize in Physics in 1965 for his contributions to the development of quantum electrodynamics. He was a popular lecturer and author, and he wrote several books, including "Surely You're Joking, Mr. Feynman!" and "What Do You Care What Other People Think?".
User:)";

// llama.cpp's questions, in its order (the draws depend on it)
std::vector<std::string> k_prompts = {
    "What is the meaning of life?",
    "Tell me an interesting fact about llamas.",
    "What is the best way to cook a steak?",
    "Are you familiar with the Special Theory of Relativity and can you explain it to me?",
    "Recommend some interesting books to read.",
    "What is the best way to learn a new language?",
    "How to get a job at Google?",
    "If you could have any superpower, what would it be?",
    "I want to learn how to play the piano.",
};

struct client {
    ~client() {
        if (smpl) llama_sampler_free(smpl);
    }
    int32_t id = 0;
    llama_seq_id seq_id = -1;  // the request it serves; -1: idle
    llama_token sampled = 0;
    int64_t t_start_prompt = 0;
    int64_t t_start_gen = 0;
    int32_t n_prompt = 0;
    int32_t n_decoded = 0;
    int32_t i_batch = -1;  // its token's index in the batch, whose logits it samples; -1: none
    std::string input, prompt, response;
    llama_sampler * smpl = nullptr;
};

void print_date_time() {
    const std::time_t now = std::time(nullptr);
    char buf[80];
    strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&now));
    LOG_INF("\n");
    LOG_INF("\033[35mrun parameters as of %s\033[0m\n", buf);
    LOG_INF("\n");
}

std::vector<std::string> split_lines(const std::string & s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line, '\n');) out.push_back(line);
    return out;
}

}  // namespace

int main(int argc, char ** argv) {
    srand(1234);

    common_params params;
    params.n_ctx = 4096;  // llama.cpp's defaults
    params.n_batch = 2048;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_PARALLEL)) return 1;
    if (params.model.empty()) {
        fprintf(stderr, "llama-parallel: no model given (-m MODEL)\n(see llama-parallel --help)\n");
        return 1;
    }
    if (!common_load_prompt(params, "llama-parallel")) return 1;
    common_log_init(params.verbosity);
    if (const std::string w = common_gpu_flags_warning(params, "llama-parallel"); !w.empty()) LOG_INF("%s", w.c_str());

    const int32_t n_clients = params.n_parallel;  // simultaneous clients
    params.n_parallel += 1;                       // and sequence 0 for the system prompt
    const int32_t n_seq = params.n_sequences;     // requests
    const bool cont_batching = params.cont_batching;

    llama_backend_init();
    llama_model * model = llama_model_load_from_file(params.model.c_str(), common_model_params_to_llama(params));
    if (!model) {
        fprintf(stderr, "llama-parallel: cannot load model '%s'\n", params.model.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::vector<llama_adapter_lora *> adapters;
    if (std::string err; !common_adapters_load(model, params, adapters, err)) {
        fprintf(stderr, "llama-parallel: %s\n", err.c_str());
        return 1;
    }
    llama_context_params cparams = common_context_params_to_llama(params);
    if (params.n_ctx == 0) cparams.n_ctx = (uint32_t) std::max(1, llama_model_n_ctx_train(model));  // -c 0: the model's
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "llama-parallel: cannot create a context\n");
        return 1;
    }
    common_adapters_apply(ctx, params, adapters);

    // the questions of -f / -p, one a line, instead of the built-in ones
    if (params.prompt.empty()) {
        LOG_INF("\033[32mNo new questions so proceed with build-in defaults.\033[0m\n");
    } else {
        LOG_INF("\033[32mNow printing the external prompt file %s\033[0m\n\n", params.prompt_file.c_str());
        k_prompts = split_lines(params.prompt);
        for (size_t i = 0; i < k_prompts.size(); i++) LOG_INF("%3d prompt: %s\n", (int) i + 1, k_prompts[i].c_str());
    }
    LOG_INF("\n\n");

    const int n_ctx = (int) llama_n_ctx(ctx);
    std::vector<client> clients(n_clients);
    for (size_t i = 0; i < clients.size(); i++) {
        clients[i].id = (int32_t) i;
        clients[i].smpl = common_sampler_chain(model, params.sampling, n_ctx, nullptr, nullptr);
        if (!clients[i].smpl) {
            fprintf(stderr, "llama-parallel: the sampler could not be made (the grammar does not parse)\n");
            return 1;
        }
    }

    const std::vector<llama_token> tokens_system = common_tokenize(vocab, k_system, true);
    const int32_t n_tokens_system = (int32_t) tokens_system.size();
    llama_seq_id g_seq_id = 0;

    // as large as the context (long prompts from many clients); decoded in pieces of -b tokens
    llama_batch batch = llama_batch_init(std::max(n_ctx, n_tokens_system), 0, 1);
    const int32_t n_batch_max = (int32_t) llama_n_batch(ctx);

    int32_t n_total_prompt = 0;
    int32_t n_total_gen = 0;
    int32_t n_cache_miss = 0;

    const int64_t t_main_start = ggml_time_us();
    LOG_INF("%s: Simulating parallel requests from clients:\n", "main");
    LOG_INF("%s: n_parallel = %d, n_sequences = %d, cont_batching = %d, system tokens = %d\n", "main", n_clients, n_seq, cont_batching,
            n_tokens_system);
    LOG_INF("\n");
    {
        LOG_INF("%s: Evaluating the system prompt ...\n", "main");
        for (int32_t i = 0; i < n_tokens_system; i++) common_batch_add(batch, tokens_system[i], i, {0}, false);
        for (int32_t i = 0; i < batch.n_tokens; i += n_batch_max) {
            const int32_t n = std::min(n_batch_max, batch.n_tokens - i);
            llama_batch view = {n, batch.token + i, nullptr, batch.pos + i, batch.n_seq_id + i, batch.seq_id + i, batch.logits + i};
            if (llama_decode(ctx, view) != 0) {
                fprintf(stderr, "%s: llama_decode() failed\n", "main");
                return 1;
            }
        }
        // the system prompt's cells in every client's sequence
        for (int32_t i = 1; i <= n_clients; i++) llama_kv_self_seq_cp(ctx, 0, i, -1, -1);
        LOG_INF("\n");
    }

    LOG_INF("Processing requests ...\n\n");
    for (;;) {
        common_batch_clear(batch);

        // the ongoing requests' last sampled tokens
        for (auto & c : clients) {
            if (c.seq_id == -1) continue;
            c.i_batch = batch.n_tokens;
            common_batch_add(batch, c.sampled, n_tokens_system + c.n_prompt + c.n_decoded, {c.id + 1}, true);
            c.n_decoded += 1;
        }

        if (batch.n_tokens == 0) {
            // every request has ended: the clients' sequences back to the system prompt
            for (int i = 1; i <= n_clients; i++) {
                llama_kv_self_seq_rm(ctx, i, -1, -1);
                llama_kv_self_seq_cp(ctx, 0, i, -1, -1);
            }
            LOG_INF("%s: clearing the KV cache\n", "main");
        }

        // new requests for the idle clients
        if (cont_batching || batch.n_tokens == 0) {
            for (auto & c : clients) {
                if (c.seq_id != -1 || g_seq_id >= n_seq) continue;
                c.seq_id = g_seq_id;
                c.t_start_prompt = ggml_time_us();
                c.t_start_gen = 0;
                c.input = k_prompts[rand() % k_prompts.size()];
                c.prompt = c.input + "\nAssistant:";
                c.response = "";
                llama_sampler_reset(c.smpl);

                // no BOS: the system prompt comes first
                const std::vector<llama_token> tokens_prompt = common_tokenize(vocab, c.prompt, false);
                for (size_t i = 0; i < tokens_prompt.size(); i++) {
                    common_batch_add(batch, tokens_prompt[i], (llama_pos) (i + n_tokens_system), {c.id + 1}, false);
                }
                if (batch.n_tokens > 0) batch.logits[batch.n_tokens - 1] = true;  // the last token's logits only

                c.n_prompt = (int32_t) tokens_prompt.size();
                c.n_decoded = 0;
                c.i_batch = batch.n_tokens - 1;
                LOG_INF("\033[31mClient %3d, seq %4d, started decoding ...\033[0m\n", c.id, c.seq_id);
                g_seq_id += 1;
            }
        }

        if (batch.n_tokens == 0) break;

        // in pieces of -b tokens, halved when the cache has no room for one
        int32_t n_batch = n_batch_max;
        for (int32_t i = 0; i < batch.n_tokens; i += n_batch) {
            const int32_t n_tokens = std::min(n_batch, batch.n_tokens - i);
            llama_batch view = {n_tokens, batch.token + i, nullptr, batch.pos + i, batch.n_seq_id + i, batch.seq_id + i, batch.logits + i};
            const int ret = llama_decode(ctx, view);
            if (ret != 0) {
                if (n_batch == 1 || ret < 0) {
                    // the KV cache is full: try a larger context (-c)
                    fprintf(stderr, "%s : failed to decode the batch, n_batch = %d, ret = %d\n", "main", n_batch, ret);
                    return 1;
                }
                fprintf(stderr, "%s : failed to decode the batch, retrying with n_batch = %d\n", "main", n_batch / 2);
                n_cache_miss += 1;
                n_batch /= 2;
                i -= n_batch;
                continue;
            }
            LOG_DBG("%s : decoded batch of %d tokens\n", "main", n_tokens);

            for (auto & c : clients) {
                if (c.i_batch < i || c.i_batch >= i + n_tokens) continue;

                const llama_token id = llama_sampler_sample(c.smpl, ctx, c.i_batch - i);  // and accepted
                if (c.n_decoded == 1) {
                    // generation is timed from the first token, when every client's prompt is in
                    c.t_start_gen = ggml_time_us();
                }
                c.response += common_token_to_piece(vocab, id);
                c.sampled = id;

                if (c.n_decoded > 2 && (llama_vocab_is_eog(vocab, id) ||
                                        (params.n_predict > 0 && c.n_decoded + c.n_prompt >= params.n_predict) ||
                                        c.response.find("User:") != std::string::npos || c.response.find('\n') != std::string::npos)) {
                    // a basic reverse prompt
                    const size_t pos = c.response.find("User:");
                    if (pos != std::string::npos) c.response = c.response.substr(0, pos);

                    // the sequence back to the system prompt
                    llama_kv_self_seq_rm(ctx, c.id + 1, -1, -1);
                    llama_kv_self_seq_cp(ctx, 0, c.id + 1, -1, -1);

                    const int64_t t_main_end = ggml_time_us();
                    LOG_INF("\033[31mClient %3d, seq %3d/%3d, prompt %4d t, response %4d t, time %5.2f s, speed %5.2f t/s, cache miss %d "
                            "\033[0m \n\nInput:    %s\n\033[35mResponse: %s\033[0m\n\n",
                            c.id, c.seq_id, n_seq, c.n_prompt, c.n_decoded, (t_main_end - c.t_start_prompt) / 1e6,
                            (double) (c.n_prompt + c.n_decoded) / (t_main_end - c.t_start_prompt) * 1e6, n_cache_miss,
                            trim(c.input).c_str(), trim(c.response).c_str());

                    n_total_prompt += c.n_prompt;
                    n_total_gen += c.n_decoded;
                    c.seq_id = -1;
                }
                c.i_batch = -1;
            }
        }
    }

    const int64_t t_main_end = ggml_time_us();
    print_date_time();
    LOG_INF("%s: n_parallel = %d, n_sequences = %d, cont_batching = %d, system tokens = %d\n", "main", n_clients, n_seq, cont_batching,
            n_tokens_system);
    if (params.prompt_file.empty()) params.prompt_file = "used built-in defaults";
    LOG_INF("External prompt file: \033[32m%s\033[0m\n", params.prompt_file.c_str());
    LOG_INF("Model and path used:  \033[32m%s\033[0m\n\n", params.model.c_str());
    const double dt = (double) (t_main_end - t_main_start);
    LOG_INF("Total prompt tokens: %6d, speed: %5.2f t/s\n", n_total_prompt, (double) n_total_prompt / dt * 1e6);
    LOG_INF("Total gen tokens:    %6d, speed: %5.2f t/s\n", n_total_gen, (double) n_total_gen / dt * 1e6);
    LOG_INF("Total speed (AVG):   %6s  speed: %5.2f t/s\n", "", (double) (n_total_prompt + n_total_gen) / dt * 1e6);
    LOG_INF("Cache misses:        %6d\n", n_cache_miss);
    LOG_INF("\n");
    llama_perf_context_print(ctx);

    llama_batch_free(batch);
    clients.clear();
    llama_free(ctx);
    for (llama_adapter_lora * ad : adapters) llama_adapter_lora_free(ad);
    llama_model_free(model);
    llama_backend_free();
    printf("\n\n");
    return 0;
}
