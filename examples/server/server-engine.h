// server-engine.h - llama-server's generation engine: the slots (one sequence of the context
// each) and the one decode loop that runs them all (continuous batching: a new request joins the
// running batch at the next step). The HTTP side hands it tasks and reads their results.
#pragma once

#include "common.h"
#include "llama.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct token_logprob {
    llama_token id;
    float logprob;  // natural log of the model's probability (softmax of the raw logits)
};

// A generated token: its log-probability and the most likely tokens at its place.
struct gen_token {
    token_logprob tok;
    std::vector<token_logprob> top;  // n_probs of them, most likely first
};

// One request's work: what to generate (or embed), then its output as the engine produces it.
struct gen_task {
    // ---- the request ----
    std::vector<llama_token> prompt;
    int32_t n_predict = 0;               // tokens to generate at most (the HTTP side bounds it)
    llama_sampler * smpl = nullptr;      // the request's sampler chain (owned: freed with the task)
    std::vector<std::string> stop;       // stop strings (not part of the text)
    bool logprobs = false;               // each generated token's log-probability ...
    int32_t n_probs = 0;                 // ... and the n_probs most likely tokens at its place
    int32_t n_keep = 0;                  // prompt tokens a context shift keeps (-1: all), BOS aside
    bool embedding = false;              // embed the prompt (pooled, L2-normalized) instead

    // ---- the output (guarded by m) ----
    std::mutex m;
    std::condition_variable cv;
    std::string text;                    // text ready to be sent (taken by the reader)
    std::vector<gen_token> tokens;       // with logprobs: the tokens generated since the last take
    std::vector<float> embd;             // embedding: the vector
    bool done = false;
    std::string finish_reason;           // "stop" (end of generation or a stop string), "length", "error"
    std::string error;                   // finish_reason "error": why
    int32_t n_prompt = 0, n_cached = 0, n_gen = 0;  // prompt tokens, of them reused from the slot's cache, tokens generated
    int32_t n_shifts = 0;                // context shifts the slot made for this request
    int32_t slot = -1;

    std::atomic<bool> cancelled{false};  // the client went away: the slot is freed at the next step

    ~gen_task() {
        if (smpl) llama_sampler_free(smpl);
    }
    // Waits until text is ready or the task is done (or timeout_ms passes): takes the text (and
    // the tokens' log-probabilities into toks, when given). Returns false when done and nothing is left.
    bool next(std::string & out, int timeout_ms, std::vector<gen_token> * toks = nullptr);
};

struct server_slot_info {
    int32_t id;
    bool busy;
    int32_t n_cached;  // tokens in its cache
};

struct server_engine_params {
    int32_t n_slots = 1;
    int32_t n_batch = 2048;
    bool cont_batching = true;  // false (-nocb): prompts wait while any slot generates
    bool ctx_shift = true;      // false (--no-context-shift): a full slot ends its request ("length")
    bool embedding = false;     // --embeddings: the context returns pooled embeddings
};

// Totals since start, for GET /metrics (llama.cpp's names there).
struct server_metrics {
    uint64_t n_prompt_tokens = 0;    // prompt tokens decoded
    double t_prompt_s = 0;           // seconds of decoding spent on them (each step's time, shared by token count)
    uint64_t n_gen_tokens = 0;       // tokens generated
    double t_gen_s = 0;
    uint64_t n_decode = 0;           // llama_decode calls
    uint64_t n_busy_slots = 0;       // busy slots, summed over the calls
    uint64_t n_requests = 0;         // tasks finished
    int32_t n_processing = 0;        // busy slots now
    int32_t n_deferred = 0;          // tasks waiting for a slot
    int32_t n_cells_used = 0;        // tokens in the slots' caches
};

class server_engine {
public:
    // ctx with n_seq_max >= p.n_slots; each slot gets n_ctx / n_slots cells.
    server_engine(llama_model * model, llama_context * ctx, const server_engine_params & p);
    ~server_engine();

    int32_t n_ctx_slot() const { return n_ctx_slot_; }
    const server_engine_params & params() const { return p_; }
    // Queues t; the decode loop takes it at its next step.
    void submit(const std::shared_ptr<gen_task> & t);
    std::vector<server_slot_info> slots() const;
    server_metrics metrics() const;

private:
    struct slot {
        int32_t id = 0;
        std::vector<llama_token> cache;  // the tokens in the sequence's cells, in order
        std::shared_ptr<gen_task> task;
        size_t n_prompt_in = 0;          // of task->prompt, the tokens in cache
        std::string text;                // generated text not yet handed to the task
        std::vector<gen_token> tokens;   // and their log-probabilities
        llama_token last = 0;            // sampled, not yet decoded
        bool generating = false;
        int32_t i_batch = -1;            // the row of its logits in this step's batch
        std::atomic<bool> busy_pub{false};      // for slots(): read by the HTTP threads
        std::atomic<int32_t> n_cached_pub{0};
    };

    void loop();
    void assign(slot & s, const std::shared_ptr<gen_task> & t);
    void finish(slot & s, const char * reason, const std::string & error = "");
    // Hands s.text to the task up to what could still turn into a stop string or is an
    // incomplete UTF-8 sequence; with final, all of it.
    void flush(slot & s, bool final);
    // Frees half of s's cells past the kept prompt, moving the rest down (llama.cpp's context
    // shift); false when nothing can be freed.
    bool shift(slot & s);
    gen_token logprobs_of(int32_t i_batch, llama_token tok, int32_t n_probs) const;

    llama_model * model_;
    llama_context * ctx_;
    const llama_vocab * vocab_;
    server_engine_params p_;
    int32_t n_ctx_slot_;
    std::vector<slot> slots_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<gen_task>> queue_;
    server_metrics metrics_;  // (guarded by m_)
    bool stop_ = false;
    std::thread thread_;
};
