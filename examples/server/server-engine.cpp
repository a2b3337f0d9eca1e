// server-engine.cpp - llama-server's slots and decode loop (see server-engine.h).
//
// Each step puts one batch together: the token each generating slot sampled last, then prompt
// tokens of the slots still reading their prompts, up to -b tokens in all; decodes it; and
// samples for every slot whose last token was in it. A request takes the idle slot whose cache
// shares the longest prefix with its prompt (the rest of that cache is dropped), so a
// conversation that comes back reads only its new turn. A slot's output goes to its task as it is
// made, less what could still become a stop string and an unfinished UTF-8 sequence. A slot
// whose cells are all used while its request may go on shifts its context (drops half of what
// follows the kept prompt), as llama.cpp's server does. Embedding tasks read their whole input
// in one step (pooling sees the batch's tokens of a sequence) and take its pooled vector.
#include "server-engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

bool gen_task::next(std::string & out, int timeout_ms, std::vector<gen_token> * toks) {
    std::unique_lock<std::mutex> lk(m);
    cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return !text.empty() || !tokens.empty() || done; });
    out.swap(text);
    text.clear();
    bool any = !out.empty();
    if (toks) {
        toks->swap(tokens);
        any |= !toks->empty();
    }
    tokens.clear();
    return !(done && !any);
}

server_engine::server_engine(llama_model * model, llama_context * ctx, const server_engine_params & p)
    : model_(model), ctx_(ctx), vocab_(llama_model_get_vocab(model)), p_(p), slots_((size_t) std::max(1, p.n_slots)) {
    p_.n_slots = (int32_t) slots_.size();
    p_.n_batch = std::max<int32_t>(1, p_.n_batch);
    n_ctx_slot_ = (int32_t) (llama_n_ctx(ctx) / (uint32_t) p_.n_slots);
    for (int32_t i = 0; i < p_.n_slots; i++) slots_[(size_t) i].id = i;
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

server_metrics server_engine::metrics() const {
    std::lock_guard<std::mutex> lk(m_);
    server_metrics m = metrics_;
    m.n_processing = 0;
    m.n_cells_used = 0;
    for (const slot & s : slots_) {
        m.n_processing += s.busy_pub.load() ? 1 : 0;
        m.n_cells_used += s.n_cached_pub.load();
    }
    m.n_deferred = (int32_t) queue_.size();
    return m;
}

void server_engine::assign(slot & s, const std::shared_ptr<gen_task> & t) {
    // Reuse the common prefix, but evaluate at least the prompt's last token (its logits); an
    // embedding reads its whole input in its step.
    size_t keep = 0;
    while (!t->embedding && keep < s.cache.size() && keep < t->prompt.size() && s.cache[keep] == t->prompt[keep]) keep++;
    if (keep == t->prompt.size()) keep--;
    llama_kv_self_seq_rm(ctx_, s.id, (llama_pos) keep, -1);
    s.cache.resize(keep);
    s.task = t;
    s.n_prompt_in = keep;
    s.text.clear();
    s.tokens.clear();
    s.generating = false;
    s.i_batch = -1;
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
    if (n == 0 && (s.tokens.empty() || !final)) return;
    std::lock_guard<std::mutex> lk(s.task->m);
    s.task->text += s.text.substr(0, n);
    s.text.erase(0, n);
    // (A token goes out with the first text that follows it; the held-back tail's at the end.)
    if (n > 0 || final) {
        s.task->tokens.insert(s.task->tokens.end(), s.tokens.begin(), s.tokens.end());
        s.tokens.clear();
    }
    s.task->cv.notify_all();
}

void server_engine::finish(slot & s, const char * reason, const std::string & error) {
    if (std::string(reason) != "error") flush(s, true);
    // (Before the answer: a client that got it sees the slot free and the request counted.)
    s.busy_pub = false;
    s.n_cached_pub = (int32_t) s.cache.size();
    {
        std::lock_guard<std::mutex> lk(m_);
        metrics_.n_requests++;
    }
    {
        std::lock_guard<std::mutex> lk(s.task->m);
        s.task->done = true;
        s.task->finish_reason = reason;
        s.task->error = error;
        s.task->cv.notify_all();
    }
    s.task.reset();
    s.text.clear();
    s.tokens.clear();
    s.generating = false;
    s.i_batch = -1;
}

bool server_engine::shift(slot & s) {
    const gen_task & t = *s.task;
    int32_t n_keep = t.n_keep < 0 ? (int32_t) t.prompt.size() : t.n_keep;
    if (!t.prompt.empty() && t.prompt[0] == llama_vocab_bos(vocab_) && t.n_keep >= 0) n_keep++;  // (the BOS is always kept)
    n_keep = std::min(n_keep, n_ctx_slot_ - 4);
    const int32_t n_past = (int32_t) s.cache.size();
    const int32_t n_discard = (n_past - n_keep) / 2;
    if (n_discard <= 0) return false;
    llama_kv_self_seq_rm(ctx_, s.id, n_keep, n_keep + n_discard);
    llama_kv_self_seq_add(ctx_, s.id, n_keep + n_discard, n_past, -n_discard);
    s.cache.erase(s.cache.begin() + n_keep, s.cache.begin() + n_keep + n_discard);
    std::lock_guard<std::mutex> lk(s.task->m);
    s.task->n_shifts++;
    return true;
}

gen_token server_engine::logprobs_of(int32_t i_batch, llama_token tok, int32_t n_probs) const {
    const float * logits = llama_get_logits_ith(ctx_, i_batch);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab_);
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += std::exp((double) (logits[i] - mx));
    const float lse = mx + (float) std::log(sum);
    gen_token g;
    g.tok = {tok, logits[tok] - lse};
    if (n_probs > 0) {
        std::vector<llama_token> ids((size_t) n_vocab);
        for (int32_t i = 0; i < n_vocab; i++) ids[(size_t) i] = i;
        const size_t k = std::min<size_t>((size_t) n_probs, ids.size());
        std::partial_sort(ids.begin(), ids.begin() + (ptrdiff_t) k, ids.end(), [&](llama_token a, llama_token b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });
        for (size_t i = 0; i < k; i++) g.top.push_back({ids[i], logits[ids[i]] - lse});
    }
    return g;
}

void server_engine::loop() {
    llama_batch batch = llama_batch_init(p_.n_batch + (int32_t) slots_.size(), 0, 1);
    const int32_t n_embd = llama_model_n_embd(model_);
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
                lk.unlock();
                assign(*best, t);
                lk.lock();
            }
        }
        // Clients that went away free their slots.
        for (slot & s : slots_) {
            if (s.task && s.task->cancelled) finish(s, "error", "the client went away");
        }

        common_batch_clear(batch);
        int32_t n_gen_in = 0, n_busy = 0;
        for (slot & s : slots_) {
            s.i_batch = -1;
            n_busy += s.task ? 1 : 0;
            if (!s.task || !s.generating) continue;
            // Its last token needs a cell: a full slot shifts (finish() already ended the
            // requests that may not go on).
            if ((int32_t) s.cache.size() + 1 > n_ctx_slot_ && !shift(s)) {
                finish(s, "length");
                continue;
            }
            s.i_batch = batch.n_tokens;
            common_batch_add(batch, s.last, (llama_pos) s.cache.size(), {s.id}, true);
            s.cache.push_back(s.last);
            n_gen_in++;
        }
        // -nocb: prompts wait until no slot generates.
        if (p_.cont_batching || n_gen_in == 0) {
            for (slot & s : slots_) {
                if (!s.task || s.generating) continue;
                const std::vector<llama_token> & p = s.task->prompt;
                // An embedding's input goes in whole (it was checked to fit a batch).
                if (s.task->embedding && (int32_t) (p.size() - s.n_prompt_in) > p_.n_batch - batch.n_tokens) continue;
                while (s.n_prompt_in < p.size() && batch.n_tokens < p_.n_batch) {
                    const bool last = s.n_prompt_in + 1 == p.size();
                    if (last) s.i_batch = batch.n_tokens;
                    common_batch_add(batch, p[s.n_prompt_in], (llama_pos) s.cache.size(), {s.id}, last || s.task->embedding);
                    s.cache.push_back(p[s.n_prompt_in++]);
                }
            }
        }
        if (batch.n_tokens == 0) continue;
        const auto t0 = std::chrono::steady_clock::now();
        const int rc = llama_decode(ctx_, batch);
        {
            const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::lock_guard<std::mutex> lk(m_);
            const int32_t n_prompt_in = batch.n_tokens - n_gen_in;
            metrics_.n_decode++;
            metrics_.n_busy_slots += (uint64_t) n_busy;
            metrics_.n_prompt_tokens += (uint64_t) n_prompt_in;
            metrics_.t_prompt_s += dt * n_prompt_in / batch.n_tokens;
            metrics_.t_gen_s += dt * n_gen_in / batch.n_tokens;
        }
        if (rc != 0) {
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
            gen_task & t = *s.task;
            if (t.embedding) {
                const float * e = llama_get_embeddings_seq(ctx_, s.id);
                if (!e) {
                    finish(s, "error", "the context gave no pooled embedding");
                    continue;
                }
                std::vector<float> v((size_t) n_embd);
                common_embd_normalize(e, v.data(), n_embd, 2);  // (euclidean, as llama.cpp's server)
                {
                    std::lock_guard<std::mutex> lk(t.m);
                    t.embd = std::move(v);
                }
                finish(s, "stop");
                continue;
            }
            const llama_token tok = llama_sampler_sample(t.smpl, ctx_, s.i_batch);
            s.generating = true;
            s.last = tok;
            if (llama_vocab_is_eog(vocab_, tok)) {
                finish(s, "stop");
                continue;
            }
            {
                std::lock_guard<std::mutex> lk(t.m);
                t.n_gen++;
            }
            {
                std::lock_guard<std::mutex> lk(m_);
                metrics_.n_gen_tokens++;
            }
            if (t.logprobs) s.tokens.push_back(logprobs_of(s.i_batch, tok, t.n_probs));
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
            // The token just sampled needs a cell at the next step: without context shifts,
            // a full slot ends here.
            if (t.n_gen >= t.n_predict || ((int32_t) s.cache.size() + 1 > n_ctx_slot_ && !p_.ctx_shift)) {
                finish(s, "length");
                continue;
            }
            flush(s, false);
        }
    }
    llama_batch_free(batch);
}
