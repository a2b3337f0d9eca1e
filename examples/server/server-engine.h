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

// One request's generation: what to generate, then its output as the engine produces it.
struct gen_task {
    // ---- the request ----
    std::vector<llama_token> prompt;
    int32_t n_predict = -1;              // -1: until the end of generation or the slot's context
    common_params_sampling sampling;
    std::vector<std::string> stop;       // stop strings (not part of the text)

    // ---- the output (guarded by m) ----
    std::mutex m;
    std::condition_variable cv;
    std::string text;                    // text ready to be sent (taken by the reader)
    bool done = false;
    std::string finish_reason;           // "stop" (end of generation or a stop string), "length", "error"
    std::string error;                   // finish_reason "error": why
    int32_t n_prompt = 0, n_cached = 0, n_gen = 0;  // prompt tokens, of them reused from the slot's cache, tokens generated
    int32_t slot = -1;

    std::atomic<bool> cancelled{false};  // the client went away: the slot is freed at the next step

    // Waits until text is ready or the task is done (or timeout_ms passes): takes the text.
    // Returns false when done and nothing is left.
    bool next(std::string & out, int timeout_ms);
};

struct server_slot_info {
    int32_t id;
    bool busy;
    int32_t n_cached;  // tokens in its cache
};

class server_engine {
public:
    // ctx with n_seq_max >= n_slots; each slot gets n_ctx / n_slots cells.
    server_engine(llama_model * model, llama_context * ctx, int32_t n_slots, int32_t n_batch);
    ~server_engine();

    int32_t n_ctx_slot() const { return n_ctx_slot_; }
    // Queues t; the decode loop takes it at its next step.
    void submit(const std::shared_ptr<gen_task> & t);
    std::vector<server_slot_info> slots() const;
    int32_t n_busy() const;

private:
    struct slot {
        int32_t id = 0;
        std::vector<llama_token> cache;  // the tokens in the sequence's cells, in order
        std::shared_ptr<gen_task> task;
        llama_sampler * smpl = nullptr;
        size_t n_prompt_in = 0;          // of task->prompt, the tokens in cache
        std::string text;                // generated text not yet handed to the task
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

    llama_model * model_;
    llama_context * ctx_;
    const llama_vocab * vocab_;
    int32_t n_ctx_slot_, n_batch_;
    std::vector<slot> slots_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<gen_task>> queue_;
    bool stop_ = false;
    std::thread thread_;
};
