// server-engine.cpp - llama-server's slots and decode loop (see server-engine.h).
//
// Each step puts one batch together: the token each generating slot sampled last, then prompt
// tokens of the slots still reading their prompts, up to -b tokens in all; decodes it; and
// samples for every slot whose last token was in it. A request takes the idle slot whose cache
// shares the longest prefix with its prompt (the rest of that cache is dropped), so a
// conversation that comes back reads only its new turn. A slot's output goes to its task as it is
// made, less what could still become a stop string and an unfinished UTF-8 sequence.
#include "server-engine.h"

#include <algorithm>
#include <chrono>

bool gen_task::next(std::string & out, int timeout_ms) {
    std::unique_lock<std::mutex> lk(m);
    cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return !text.empty() || done; });
    out.swap(text);
    text.clear();
    return !(done && out.empty());
}

server_engine::server_engine(llama_model * model, llama_context * ctx, int32_t n_slots, int32_t n_batch)
    : model_(model), ctx_(ctx), vocab_(llama_model_get_vocab(model)), n_batch_(std::max<int32_t>(1, n_batch)), slots_((size_t) n_slots) {
    n_ctx_slot_ = (int32_t) (llama_n_ctx(ctx) / (uint32_t) n_slots);
    for (int32_t i = 0; i < n_slots; i++) slots_[(size_t) i].id = i;
    thread_ = std::thread([this] { loop(); });
}

server_engine::~server_engine() {
    {
        std::lock_guard<std::mutex> lk(m_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    for (slot & s : slots_) {
        if (s.task) finish(s, "error", "the server is shutting down");
    }
    for (auto & t : queue_) {
        std::lock_guard<std::mutex> lk(t->m);
        t->done = true;
        t->finish_reason = "error";
        t->error = "the server is shutting down";
        t->cv.notify_all();
    }
}

void server_engine::submit(const std::shared_ptr<gen_task> & t) {
    {
        std::lock_guard<std::mutex> lk(m_);
        queue_.push_back(t);
    }
    cv_.notify_all();
}

std::vector<server_slot_info> server_engine::slots() const {
    std::vector<server_slot_info> v;
    for (const slot & s : slots_) v.push_back({s.id, s.busy_pub.load(), s.n_cached_pub.load()});
    return v;
}

int32_t server_engine::n_busy() const {
    int32_t n = 0;
    for (const slot & s : slots_) n += s.busy_pub.load() ? 1 : 0;
    return n;
}

void server_engine::assign(slot & s, const std::shared_ptr<gen_task> & t) {
    // Reuse the common prefix, but evaluate at least the prompt's last token (its logits).
    size_t keep = 0;
    while (keep < s.cache.size() && keep < t->prompt.size() && s.cache[keep] == t->prompt[keep]) keep++;
    if (keep == t->prompt.size()) keep--;
    llama_kv_self_seq_rm(ctx_, s.id, (llama_pos) keep, -1);
    s.cache.resize(keep);
    s.task = t;
    s.n_prompt_in = keep;
    s.text.clear();
    s.generating = false;
    s.i_batch = -1;
    if (s.smpl) llama_sampler_free(s.smpl);
    s.smpl = common_sampler_chain(model_, t->sampling, n_ctx_slot_, nullptr, nullptr);
    s.busy_pub = true;
    std::lock_guard<std::mutex> lk(t->m);
    t->n_prompt = (int32_t) t->prompt.size();
    t->n_cached = (int32_t) keep;
    t->slot = s.id;
}

void server_engine::flush(slot & s, bool final) {
    size_t n = s.text.size();
    if (!final) {
        // Hold back a tail that is the start of a stop string ...
        for (const std::string & st : s.task->stop) {
            for (size_t k = std::min(st.size() - 1, s.text.size()); k > 0; k--) {
                if (s.text.compare(s.text.size() - k, k, st, 0, k) == 0) {
                    n = std::min(n, s.text.size() - k);
                    break;
                }
            }
        }
        // ... and an unfinished UTF-8 sequence.
        size_t i = n;
        while (i > 0 && i > n - std::min<size_t>(n, 4) && ((unsigned char) s.text[i - 1] & 0xC0) == 0x80) i--;
        if (i > 0) {
            const unsigned char lead = (unsigned char) s.text[i - 1];
            const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
            if (len > n - (i - 1)) n = i - 1;
        }
    }
    if (n == 0) return;
    std::lock_guard<std::mutex> lk(s.task->m);
    s.task->text += s.text.substr(0, n);
    s.text.erase(0, n);
    s.task->cv.notify_all();
}

void server_engine::finish(slot & s, const char * reason, const std::string & error) {
    if (std::string(reason) != "error") flush(s, true);
    s.busy_pub = false;  // (before the answer: a client that got it sees the slot free)
    s.n_cached_pub = (int32_t) s.cache.size();
    {
        std::lock_guard<std::mutex> lk(s.task->m);
        s.task->done = true;
        s.task->finish_reason = reason;
        s.task->error = error;
        s.task->cv.notify_all();
    }
    s.task.reset();
    s.text.clear();
    s.generating = false;
    s.i_batch = -1;
    s.busy_pub = false;
    s.n_cached_pub = (int32_t) s.cache.size();
}

void server_engine::loop() {
    llama_batch batch = llama_batch_init(n_batch_ + (int32_t) slots_.size(), 0, 1);
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(m_);
            const auto idle = [&] {
                for (const slot & s : slots_) {
                    if (s.task) return false;
                }
                return true;
            };
            cv_.wait(lk, [&] { return stop_ || !queue_.empty() || !idle(); });
            if (stop_) break;
            // New requests into idle slots: each the slot sharing the longest prefix of its prompt.
            while (!queue_.empty()) {
                slot * best = nullptr;
                size_t best_len = 0;
                const auto & prompt = queue_.front()->prompt;
                for (slot & s : slots_) {
                    if (s.task) continue;
                    size_t l = 0;
                    while (l < s.cache.size() && l < prompt.size() && s.cache[l] == prompt[l]) l++;
                    if (!best || l > best_len) {
                        best = &s;
                        best_len = l;
                    }
                }
                if (!best) break;
                std::shared_ptr<gen_task> t = queue_.front();
                queue_.pop_front();
                if (t->cancelled) continue;
                assign(*best, t);
            }
        }
        // Clients that went away free their slots.
        for (slot & s : slots_) {
            if (s.task && s.task->cancelled) finish(s, "error", "the client went away");
        }

        common_batch_clear(batch);
        for (slot & s : slots_) {
            s.i_batch = -1;
            if (!s.task || !s.generating) continue;
            s.i_batch = batch.n_tokens;
            common_batch_add(batch, s.last, (llama_pos) s.cache.size(), {s.id}, true);
            s.cache.push_back(s.last);
        }
        for (slot & s : slots_) {
            if (!s.task || s.generating) continue;
            const std::vector<llama_token> & p = s.task->prompt;
            while (s.n_prompt_in < p.size() && batch.n_tokens < n_batch_) {
                const bool last = s.n_prompt_in + 1 == p.size();
                if (last) s.i_batch = batch.n_tokens;
                common_batch_add(batch, p[s.n_prompt_in], (llama_pos) s.cache.size(), {s.id}, last);
                s.cache.push_back(p[s.n_prompt_in++]);
            }
        }
        if (batch.n_tokens == 0) continue;
        if (llama_decode(ctx_, batch) != 0) {
            // (Each slot stays within its share of the cells, so this is not a full cache.)
            for (slot & s : slots_) {
                if (s.task && s.i_batch >= 0) {
                    llama_kv_self_seq_rm(ctx_, s.id, 0, -1);
                    s.cache.clear();
                    finish(s, "error", "decoding failed");
                }
            }
            continue;
        }
        for (slot & s : slots_) {
            if (!s.task || s.i_batch < 0) continue;
            s.n_cached_pub = (int32_t) s.cache.size();
            const llama_token tok = llama_sampler_sample(s.smpl, ctx_, s.i_batch);
            s.generating = true;
            s.last = tok;
            gen_task & t = *s.task;
            if (llama_vocab_is_eog(vocab_, tok)) {
                finish(s, "stop");
                continue;
            }
            {
                std::lock_guard<std::mutex> lk(t.m);
                t.n_gen++;
            }
            s.text += common_token_to_piece(vocab_, tok, false);
            // A stop string ends the text where it starts.
            size_t cut = std::string::npos;
            for (const std::string & st : t.stop) {
                const size_t at = s.text.find(st);
                if (at != std::string::npos) cut = std::min(cut, at);
            }
            if (cut != std::string::npos) {
                s.text.resize(cut);
                finish(s, "stop");
                continue;
            }
            // The token just sampled needs a cell at the next step.
            if ((t.n_predict >= 0 && t.n_gen >= t.n_predict) || (int32_t) s.cache.size() + 1 > n_ctx_slot_) {
                finish(s, "length");
                continue;
            }
            flush(s, false);
        }
    }
    llama_batch_free(batch);
}
