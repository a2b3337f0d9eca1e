// llama-server: an OpenAI-compatible HTTP server with continuous batching, llama.cpp's flags.
//
//   llama-server -m MODEL.gguf [--host 127.0.0.1] [--port 8080] [-np N] [-c N] [--api-key KEY] [...]
//
// Endpoints: GET / (the chat page), GET /health, GET /v1/models (/models), POST /v1/completions,
// POST /v1/chat/completions (whole, or streamed as OpenAI streams: server-sent events ending with
// "data: [DONE]"), POST /v1/embeddings (with --embeddings), GET /metrics (with --metrics),
// llama.cpp's POST /completion, POST /tokenize and /detokenize, GET /slots. Requests are read by
// server-request.cpp; what they may not ask is an OpenAI error object with a 4xx status. With
// --api-key every endpoint but /health and the page wants "Authorization: Bearer KEY" (compared in
// constant time). The requests run in server_engine's slots, -np of them, each with -c / -np cells.
//
// HTTP is cpp-httplib's (Debian's libcpp-httplib-dev) and JSON nlohmann-json's; the program is
// built only where both are found.
#include "arg.h"
#include "common.h"
#include "llama.h"
#include "index.html.hpp"  // the chat page (public/index.html, embedded at build time)
#include "server-engine.h"
#include "server-http.h"
#include "server-request.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <chrono>
#include <cmath>
#include <functional>
#include <csignal>
#include <memory>
#include <cstdio>
#include <ctime>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// JSON text of j; ill-formed UTF-8 (a model may end on half a character) becomes U+FFFD.
std::string dump(const json & j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response & res, const json & j, int status = 200) {
    res.status = status;
    res.set_content(dump(j), "application/json; charset=utf-8");
}

struct server_ctx {
    common_params params;
    llama_model * model = nullptr;
    const llama_vocab * vocab = nullptr;
    server_engine * engine = nullptr;
    std::string model_id;
    std::string chat_template;  // empty: the model's
    int32_t n_ctx_train = 0;
};

// A 400 for what this server is not started to serve.
request_error not_served(const std::string & what) { return request_error(400, what, "not_supported_error"); }

std::string chat_prompt(const server_ctx & sc, const std::vector<chat_message> & msgs) {
    std::vector<llama_chat_message> chat;
    for (const chat_message & m : msgs) chat.push_back({m.role.c_str(), m.content.c_str()});
    const char * tmpl = sc.chat_template.empty() ? llama_model_chat_template(sc.model, nullptr) : sc.chat_template.c_str();
    std::vector<char> buf(4096);
    int32_t n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), true, buf.data(), (int32_t) buf.size());
    if (n > (int32_t) buf.size()) {
        buf.resize((size_t) n);
        n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), true, buf.data(), (int32_t) buf.size());
    }
    if (n < 0) throw request_error(500, "the model's chat template could not be applied", "server_error");
    return std::string(buf.data(), (size_t) n);
}

// The task of a request: its prompt's tokens checked against a slot's context, max_tokens
// bounded, its sampler chain built (a grammar that does not parse is the client's error).
//
// A request may generate up to what is left of its slot's context; with context shifts (the
// default; --no-context-shift turns them off) up to the model's training context instead, the
// slot shifting as it fills. Past the bound, a 400: never an endless generation. Without
// max_tokens: the server's -n when given, else what is left of the slot.
std::shared_ptr<gen_task> make_task(const server_ctx & sc, const completion_request & r, const std::string & prompt, bool add_special) {
    if (sc.params.embedding) throw not_served("this server serves embeddings only (started with --embeddings): restart it without for completions");
    auto t = std::make_shared<gen_task>();
    t->prompt = common_tokenize(sc.vocab, prompt, add_special, true);
    // A chat template that writes the BOS itself (llama 2's, Mistral's) does not get a second one
    // (llama.cpp's server would send both).
    const llama_token bos = llama_vocab_bos(sc.vocab);
    if (t->prompt.size() >= 2 && t->prompt[0] == bos && t->prompt[1] == bos && bos != LLAMA_TOKEN_NULL) t->prompt.erase(t->prompt.begin());
    if (t->prompt.empty()) throw request_error(400, "the prompt is empty");
    const int32_t n_ctx = sc.engine->n_ctx_slot();
    if ((int32_t) t->prompt.size() >= n_ctx) {
        throw request_error(400, "the prompt has " + std::to_string(t->prompt.size()) + " tokens; a slot's context holds " + std::to_string(n_ctx));
    }
    const int64_t room = n_ctx - (int64_t) t->prompt.size();
    const int64_t limit = sc.params.ctx_shift ? std::max<int64_t>(room, sc.n_ctx_train) : room;
    const int64_t def = sc.params.n_predict >= 0 ? std::min<int64_t>(sc.params.n_predict, limit) : room;
    const int64_t n = r.max_tokens < 0 ? def : r.max_tokens;
    if (n > limit) {
        const char * key = r.kind == completion_kind::llama_completion ? "n_predict" : "max_tokens";
        throw request_error(400, std::string("'") + key + "' is " + std::to_string(n) + ", past the " + std::to_string(limit) + " tokens a request may generate here (" +
                                     (sc.params.ctx_shift ? "the model's training context" : "what the prompt's " + std::to_string(t->prompt.size()) +
                                                                                                    " tokens leave of a slot's " + std::to_string(n_ctx)) + ")");
    }
    t->n_predict = (int32_t) n;
    t->smpl = common_sampler_chain(sc.model, r.sampling, n_ctx, nullptr, nullptr);
    if (!t->smpl) throw request_error(400, "the grammar does not parse (or is refused): " + (r.sampling.grammar.size() > 200 ? r.sampling.grammar.substr(0, 200) + "..." : r.sampling.grammar));
    t->stop = r.stop;
    t->logprobs = r.logprobs;
    t->n_probs = r.n_probs;
    t->n_keep = r.n_keep == -2 ? sc.params.n_keep : r.n_keep;
    return t;
}

std::string finish_reason_of(const gen_task & t) { return t.finish_reason == "error" ? "stop" : t.finish_reason; }

json usage_of(const gen_task & t) {
    return {{"prompt_tokens", t.n_prompt}, {"completion_tokens", t.n_gen}, {"total_tokens", t.n_prompt + t.n_gen}};
}

std::string random_id(const char * prefix) {
    static std::atomic<uint64_t> counter{0};
    char buf[64];
    snprintf(buf, sizeof(buf), "%s%llx%04llx", prefix, (unsigned long long) time(nullptr), (unsigned long long) (counter++ & 0xffff));
    return buf;
}

// ---- log-probabilities, in each API's shape ----------------------------------------------------

std::string piece_of(const server_ctx & sc, llama_token id) { return common_token_to_piece(sc.vocab, id, false); }

json bytes_of(const std::string & s) {
    json a = json::array();
    for (unsigned char c : s) a.push_back((int) c);
    return a;
}

// OpenAI chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
json chat_logprobs(const server_ctx & sc, const std::vector<gen_token> & toks) {
    json content = json::array();
    for (const gen_token & g : toks) {
        const std::string p = piece_of(sc, g.tok.id);
        json top = json::array();
        for (const token_logprob & a : g.top) {
            const std::string q = piece_of(sc, a.id);
            top.push_back({{"token", q}, {"logprob", a.logprob}, {"bytes", bytes_of(q)}});
        }
        content.push_back({{"token", p}, {"logprob", g.tok.logprob}, {"bytes", bytes_of(p)}, {"top_logprobs", top}});
    }
    return json{{"content", content}};
}

// OpenAI legacy completions: {tokens, token_logprobs, top_logprobs: [{text: logprob}], text_offset}.
json completion_logprobs(const server_ctx & sc, const std::vector<gen_token> & toks, size_t & offset) {
    json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
    for (const gen_token & g : toks) {
        const std::string p = piece_of(sc, g.tok.id);
        tokens.push_back(p);
        lps.push_back(g.tok.logprob);
        json top = json::object();
        for (const token_logprob & a : g.top) top[piece_of(sc, a.id)] = a.logprob;
        tops.push_back(top);
        offs.push_back(offset);
        offset += p.size();
    }
    return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

// llama.cpp's /completion: completion_probabilities [{id, token, logprob, bytes, top_logprobs: [...]}].
json llama_probs(const server_ctx & sc, const std::vector<gen_token> & toks) {
    json a = json::array();
    for (const gen_token & g : toks) {
        const std::string p = piece_of(sc, g.tok.id);
        json top = json::array();
        for (const token_logprob & t : g.top) {
            const std::string q = piece_of(sc, t.id);
            top.push_back({{"id", t.id}, {"token", q}, {"logprob", t.logprob}, {"bytes", bytes_of(q)}});
        }
        a.push_back({{"id", g.tok.id}, {"token", p}, {"logprob", g.tok.logprob}, {"bytes", bytes_of(p)}, {"top_logprobs", top}});
    }
    return a;
}

// ---- running a task ----------------------------------------------------------------------------

// Runs t to the end (whole answers): its text and tokens, or the error it ended with.
std::string run_whole(const std::shared_ptr<gen_task> & t, const server_ctx & sc, std::vector<gen_token> & toks) {
    sc.engine->submit(t);
    std::string all, part;
    std::vector<gen_token> more;
    while (t->next(part, 1000, &more)) {
        all += part;
        toks.insert(toks.end(), more.begin(), more.end());
    }
    if (t->finish_reason == "error") throw request_error(500, t->error, "server_error");
    return all;
}

// Streams t as server-sent events: make_chunk(text, tokens) for each piece, final_chunks() at the
// end (each an event), then "data: [DONE]" (OpenAI) when done_marker. A client that goes away
// cancels t.
using chunk_fn = std::function<json(const std::string &, const std::vector<gen_token> &)>;
void run_stream(httplib::Response & res, const std::shared_ptr<gen_task> & t, const server_ctx & sc, chunk_fn make_chunk,
                std::function<std::vector<json>()> final_chunks, bool done_marker) {
    sc.engine->submit(t);
    res.set_chunked_content_provider(
        "text/event-stream",
        [t, make_chunk, final_chunks, done_marker](size_t, httplib::DataSink & sink) {
            std::string part;
            std::vector<gen_token> toks;
            if (t->next(part, 200, &toks)) {
                if (!part.empty() || !toks.empty()) {
                    const std::string ev = "data: " + dump(make_chunk(part, toks)) + "\n\n";
                    if (!sink.write(ev.data(), ev.size())) {
                        t->cancelled = true;
                        return false;
                    }
                }
                return true;
            }
            std::string ev;
            if (t->finish_reason == "error") {
                ev = "data: " + dump(error_body(t->error, "server_error", 500)) + "\n\n";  // (as OpenAI sends an error mid-stream)
            } else {
                for (const json & j : final_chunks()) ev += "data: " + dump(j) + "\n\n";
                if (done_marker) ev += "data: [DONE]\n\n";
            }
            sink.write(ev.data(), ev.size());
            sink.done();
            return true;
        },
        [t](bool success) {
            if (!success) t->cancelled = true;
        });
}

// ---- endpoints ---------------------------------------------------------------------------------

void handle_llama_completion(const server_ctx & sc, const httplib::Request & req, httplib::Response & res) {
    const completion_request r = parse_completion(parse_body(req.body), completion_kind::llama_completion, sc.params.sampling,
                                                  llama_vocab_n_tokens(sc.vocab));
    auto t = make_task(sc, r, r.prompt, true);
    const server_ctx * scp = &sc;
    auto body = [t, scp, r](const std::string & text, const std::vector<gen_token> & toks, bool done) {
        json j = {{"content", text}, {"stop", done}};
        if (r.n_probs > 0 && !toks.empty()) j["completion_probabilities"] = llama_probs(*scp, toks);
        if (done) {
            j["tokens_predicted"] = t->n_gen;
            j["tokens_evaluated"] = t->n_prompt;
            j["tokens_cached"] = t->n_cached;
            j["stop_type"] = t->finish_reason == "length" ? "limit" : "eos";
            j["truncated"] = t->n_shifts > 0;
            j["id_slot"] = t->slot;
        }
        return j;
    };
    if (r.stream) {
        run_stream(
            res, t, sc, [body](const std::string & s, const std::vector<gen_token> & toks) { return body(s, toks, false); },
            [body] { return std::vector<json>{body("", {}, true)}; }, false);
    } else {
        std::vector<gen_token> toks;
        const std::string text = run_whole(t, sc, toks);
        send_json(res, body(text, toks, true));
    }
}

void handle_completions(const server_ctx & sc, const httplib::Request & req, httplib::Response & res) {
    const completion_request r = parse_completion(parse_body(req.body), completion_kind::oai_completion, sc.params.sampling,
                                                  llama_vocab_n_tokens(sc.vocab));
    auto t = make_task(sc, r, r.prompt, true);
    const std::string id = random_id("cmpl-"), model = sc.model_id;
    const int64_t created = (int64_t) time(nullptr);
    const server_ctx * scp = &sc;
    auto offset = std::make_shared<size_t>(0);
    auto object = [=](const std::string & text, const std::vector<gen_token> & toks, bool done) {
        json choice = {{"text", text}, {"index", 0}, {"logprobs", r.logprobs ? completion_logprobs(*scp, toks, *offset) : json(nullptr)},
                       {"finish_reason", done ? json(finish_reason_of(*t)) : json(nullptr)}};
        return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", json::array({choice})}};
    };
    if (r.stream) {
        run_stream(
            res, t, sc, [object](const std::string & s, const std::vector<gen_token> & toks) { return object(s, toks, false); },
            [object, t, r] {
                // Usage on a last chunk of its own, only when asked (as OpenAI documents it;
                // llama.cpp's server puts it on the finishing chunk always).
                json last = object("", {}, true);
                if (!r.include_usage) return std::vector<json>{last};
                json usage = last;
                usage["choices"] = json::array();
                usage["usage"] = usage_of(*t);
                return std::vector<json>{last, usage};
            },
            true);
    } else {
        std::vector<gen_token> toks;
        const std::string text = run_whole(t, sc, toks);
        json j = object(text, toks, true);
        j["usage"] = usage_of(*t);
        send_json(res, j);
    }
}

void handle_chat(const server_ctx & sc, const httplib::Request & req, httplib::Response & res) {
    const completion_request r = parse_completion(parse_body(req.body), completion_kind::oai_chat, sc.params.sampling,
                                                  llama_vocab_n_tokens(sc.vocab));
    auto t = make_task(sc, r, chat_prompt(sc, r.messages), true);  // (the BOS as the vocabulary wants it, as llama.cpp's server)
    const std::string id = random_id("chatcmpl-"), model = sc.model_id;
    const int64_t created = (int64_t) time(nullptr);
    const server_ctx * scp = &sc;
    if (r.stream) {
        auto chunk = [=](const json & delta, const std::vector<gen_token> & toks, const json & finish) {
            return json{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                        {"choices", json::array({json{{"index", 0}, {"delta", delta},
                                                      {"logprobs", r.logprobs && !toks.empty() ? chat_logprobs(*scp, toks) : json(nullptr)},
                                                      {"finish_reason", finish}}})}};
        };
        auto first = std::make_shared<bool>(true);
        run_stream(
            res, t, sc,
            [chunk, first](const std::string & s, const std::vector<gen_token> & toks) {
                json delta = {{"content", s}};
                if (*first) delta = {{"role", "assistant"}, {"content", s}};
                *first = false;
                return chunk(delta, toks, nullptr);
            },
            [chunk, t, r] {
                json last = chunk(json::object(), {}, finish_reason_of(*t));
                if (!r.include_usage) return std::vector<json>{last};  // (usage: as for completions)
                json usage = last;
                usage["choices"] = json::array();
                usage["usage"] = usage_of(*t);
                return std::vector<json>{last, usage};
            },
            true);
        return;
    }
    std::vector<gen_token> toks;
    const std::string text = run_whole(t, sc, toks);
    send_json(res, json{{"id", id},
                        {"object", "chat.completion"},
                        {"created", created},
                        {"model", model},
                        {"choices", json::array({json{{"index", 0},
                                                      {"message", {{"role", "assistant"}, {"content", text}}},
                                                      {"logprobs", r.logprobs ? chat_logprobs(sc, toks) : json(nullptr)},
                                                      {"finish_reason", finish_reason_of(*t)}}})},
                        {"usage", usage_of(*t)}});
}

// POST /v1/embeddings: each input's pooled, L2-normalized vector (as floats, or base64 of
// little-endian float32s), in order.
void handle_embeddings(const server_ctx & sc, const httplib::Request & req, httplib::Response & res) {
    if (!sc.params.embedding) throw not_served("this server does not serve embeddings: start it with --embeddings");
    const embedding_request r = parse_embeddings(parse_body(req.body), llama_vocab_n_tokens(sc.vocab));
    const int32_t n_max = std::min<int32_t>(sc.engine->n_ctx_slot() - 1, sc.engine->params().n_batch);
    std::vector<std::shared_ptr<gen_task>> tasks;
    for (size_t i = 0; i < r.inputs.size(); i++) {
        auto t = std::make_shared<gen_task>();
        t->embedding = true;
        t->prompt = r.inputs[i].is_tokens ? r.inputs[i].tokens : common_tokenize(sc.vocab, r.inputs[i].text, true, true);
        if (t->prompt.empty()) throw request_error(400, "input " + std::to_string(i) + " has no tokens");
        if ((int32_t) t->prompt.size() > n_max) {
            throw request_error(400, "input " + std::to_string(i) + " has " + std::to_string(t->prompt.size()) + " tokens; at most " + std::to_string(n_max) +
                                         " fit (a slot's context and the batch, -c / -np and -b)");
        }
        tasks.push_back(t);
    }
    for (auto & t : tasks) sc.engine->submit(t);
    json data = json::array();
    int64_t n_tokens = 0;
    for (size_t i = 0; i < tasks.size(); i++) {
        gen_task & t = *tasks[i];
        {
            std::unique_lock<std::mutex> lk(t.m);
            t.cv.wait(lk, [&] { return t.done; });
        }
        if (t.finish_reason == "error") {
            for (auto & u : tasks) u->cancelled = true;
            throw request_error(500, t.error, "server_error");
        }
        json e = {{"object", "embedding"}, {"index", i}};
        if (r.base64) e["embedding"] = base64_encode(reinterpret_cast<const unsigned char *>(t.embd.data()), t.embd.size() * sizeof(float));
        else e["embedding"] = t.embd;
        data.push_back(e);
        n_tokens += t.n_prompt;
    }
    send_json(res, json{{"object", "list"}, {"data", data}, {"model", sc.model_id}, {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
}

// GET /metrics: Prometheus text, llama.cpp's metric names.
std::string metrics_text(const server_ctx & sc) {
    const server_metrics m = sc.engine->metrics();
    std::string out;
    auto metric = [&](const char * type, const char * name, const char * help, double v) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%.17g", v);
        out += std::string("# HELP llamacpp:") + name + " " + help + "\n# TYPE llamacpp:" + name + " " + type + "\nllamacpp:" + name + " " + buf + "\n";
    };
    metric("counter", "prompt_tokens_total", "Number of prompt tokens processed.", (double) m.n_prompt_tokens);
    metric("counter", "prompt_seconds_total", "Prompt process time", m.t_prompt_s);
    metric("counter", "tokens_predicted_total", "Number of generation tokens processed.", (double) m.n_gen_tokens);
    metric("counter", "tokens_predicted_seconds_total", "Predict process time", m.t_gen_s);
    metric("counter", "n_decode_total", "Total number of llama_decode() calls", (double) m.n_decode);
    metric("counter", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
           m.n_decode ? (double) m.n_busy_slots / (double) m.n_decode : 0.0);
    metric("counter", "requests_total", "Number of requests (tasks) finished.", (double) m.n_requests);
    metric("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s.", m.t_prompt_s > 0 ? (double) m.n_prompt_tokens / m.t_prompt_s : 0.0);
    metric("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s.", m.t_gen_s > 0 ? (double) m.n_gen_tokens / m.t_gen_s : 0.0);
    const double n_cells = (double) sc.engine->n_ctx_slot() * sc.engine->params().n_slots;
    metric("gauge", "kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", n_cells > 0 ? m.n_cells_used / n_cells : 0.0);
    metric("gauge", "kv_cache_tokens", "KV-cache tokens.", (double) m.n_cells_used);
    metric("gauge", "requests_processing", "Number of requests processing.", (double) m.n_processing);
    metric("gauge", "requests_deferred", "Number of requests deferred.", (double) m.n_deferred);
    return out;
}

// Constant-time comparison of a given key with each accepted one.
bool key_ok(const std::vector<std::string> & keys, const std::string & given) {
    bool ok = false;
    for (const std::string & k : keys) {
        unsigned char diff = (unsigned char) (k.size() != given.size());
        for (size_t i = 0; i < k.size(); i++) diff |= (unsigned char) (k[i] ^ (i < given.size() ? given[i] : 0));
        ok |= diff == 0;
    }
    return ok;
}

httplib::Server * g_server = nullptr;

void on_signal(int) {
    if (g_server) g_server->stop();
}

}  // namespace

int main(int argc, char ** argv) {
    common_params params;
    params.n_ctx = 4096;
    params.n_batch = 2048;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_SERVER)) return 1;
    common_log_init(params.verbosity);
    if (params.model.empty()) {
        fprintf(stderr, "llama-server: no model given (-m MODEL.gguf)\n");
        return 1;
    }
    llama_backend_init();
    server_ctx sc;
    sc.params = params;
    sc.model = llama_model_load_from_file(params.model.c_str(), common_model_params_to_llama(params));
    if (!sc.model) {
        fprintf(stderr, "llama-server: failed to load model '%s'\n", params.model.c_str());
        return 1;
    }
    sc.vocab = llama_model_get_vocab(sc.model);
    sc.model_id = params.model;  // (as llama.cpp's server names it without --alias)
    sc.chat_template = params.chat_template;
    sc.n_ctx_train = llama_model_n_ctx_train(sc.model);
    llama_context_params cp = common_context_params_to_llama(params);
    cp.n_seq_max = (uint32_t) std::max(1, params.n_parallel);
    if (params.embedding) {
        // Pooling sees the tokens of one batch: a whole input goes in one ubatch.
        cp.embeddings = true;
        cp.n_ubatch = cp.n_batch;
    }
    if (params.n_ctx > 0 && params.n_ctx < params.n_parallel * 8) {
        fprintf(stderr, "llama-server: -c %d leaves fewer than 8 cells per slot for -np %d\n", params.n_ctx, params.n_parallel);
        return 1;
    }
    llama_context * ctx = llama_init_from_model(sc.model, cp);
    if (!ctx) {
        fprintf(stderr, "llama-server: failed to create the context\n");
        llama_model_free(sc.model);
        return 1;
    }
    std::vector<llama_adapter_lora *> adapters;
    std::string err;
    if (!common_adapters_load(sc.model, params, adapters, err) || !common_adapters_apply(ctx, params, adapters)) {
        fprintf(stderr, "llama-server: %s\n", err.empty() ? "the LoRA adapters could not be applied" : err.c_str());
        return 1;
    }
    if (params.embedding && llama_pooling_type(ctx) == LLAMA_POOLING_TYPE_NONE) {
        fprintf(stderr, "llama-server: --embeddings serves pooled vectors (OpenAI's /v1/embeddings), but the model names no pooling: "
                        "give --pooling mean, cls or last\n");
        llama_free(ctx);
        llama_model_free(sc.model);
        return 1;
    }
    server_engine_params ep;
    ep.n_slots = (int32_t) cp.n_seq_max;
    ep.n_batch = (int32_t) llama_n_batch(ctx);
    ep.cont_batching = params.cont_batching;
    ep.ctx_shift = params.ctx_shift;
    ep.embedding = params.embedding;
    auto engine = std::make_unique<server_engine>(sc.model, ctx, ep);
    sc.engine = engine.get();

    httplib::Server svr;
    g_server = &svr;
    const int n_http = params.n_threads_http > 0 ? params.n_threads_http : params.n_parallel + 2;
    svr.new_task_queue = [n_http] { return new connection_pool((size_t) std::max(n_http, 2), (size_t) std::max(4 * n_http, 256)); };
    svr.set_read_timeout(params.timeout_read, 0);
    svr.set_write_timeout(params.timeout_read, 0);
    svr.set_payload_max_length(8u << 20);

    std::unique_ptr<header_deadline> deadline;  // (started once the port is known)
    svr.set_pre_routing_handler([&sc, &deadline](const httplib::Request & req, httplib::Response & res) {
        if (deadline) deadline->seen(req.remote_addr, req.remote_port);
        if (sc.params.api_keys.empty() || req.path == "/health" || req.path == "/" || req.method == "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
        const std::string auth = req.get_header_value("Authorization");
        const std::string bearer = "Bearer ";
        const std::string given = auth.compare(0, bearer.size(), bearer) == 0 ? auth.substr(bearer.size()) : req.get_header_value("X-Api-Key");
        if (key_ok(sc.params.api_keys, given)) return httplib::Server::HandlerResponse::Unhandled;
        send_json(res, error_body("Invalid API Key", "authentication_error", 401), 401);
        return httplib::Server::HandlerResponse::Handled;
    });
    svr.set_exception_handler([](const httplib::Request &, httplib::Response & res, std::exception_ptr ep) {
        try {
            std::rethrow_exception(ep);
        } catch (const request_error & e) {
            send_json(res, error_body(e.what(), e.type, e.status), e.status);
        } catch (const std::exception & e) {
            send_json(res, error_body(e.what(), "server_error", 500), 500);
        }
    });
    svr.set_error_handler([](const httplib::Request & req, httplib::Response & res) {
        if (!res.body.empty()) return;
        if (res.status == 404) send_json(res, error_body("no endpoint " + req.method + " " + req.path, "invalid_request_error", 404), 404);
        else if (res.status == 413) send_json(res, error_body("the request body is too large (at most 8 MiB)", "invalid_request_error", 413), 413);
        else if (res.status >= 400) send_json(res, error_body("HTTP error " + std::to_string(res.status), "invalid_request_error", res.status), res.status);
    });

    // The chat page (public/index.html); it speaks to /v1/chat/completions like any client.
    svr.Get("/", [](const httplib::Request &, httplib::Response & res) {
        res.set_content(reinterpret_cast<const char *>(server_index_html), server_index_html_len, "text/html; charset=utf-8");
    });
    svr.Get("/health", [](const httplib::Request &, httplib::Response & res) { send_json(res, json{{"status", "ok"}}); });
    auto models = [&sc](const httplib::Request &, httplib::Response & res) {
        send_json(res, json{{"object", "list"},
                            {"data", json::array({json{{"id", sc.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "llamacpp"}}})}});
    };
    svr.Get("/v1/models", models);
    svr.Get("/models", models);
    svr.Post("/v1/completions", [&sc](const httplib::Request & q, httplib::Response & r) { handle_completions(sc, q, r); });
    svr.Post("/completions", [&sc](const httplib::Request & q, httplib::Response & r) { handle_completions(sc, q, r); });
    svr.Post("/completion", [&sc](const httplib::Request & q, httplib::Response & r) { handle_llama_completion(sc, q, r); });
    svr.Post("/v1/embeddings", [&sc](const httplib::Request & q, httplib::Response & r) { handle_embeddings(sc, q, r); });
    svr.Post("/embeddings", [&sc](const httplib::Request & q, httplib::Response & r) { handle_embeddings(sc, q, r); });
    svr.Get("/metrics", [&sc](const httplib::Request &, httplib::Response & res) {
        if (!sc.params.endpoint_metrics) throw not_served("GET /metrics is off: start the server with --metrics");
        res.set_content(metrics_text(sc), "text/plain; version=0.0.4");
    });
    svr.Post("/v1/chat/completions", [&sc](const httplib::Request & q, httplib::Response & r) { handle_chat(sc, q, r); });
    svr.Post("/chat/completions", [&sc](const httplib::Request & q, httplib::Response & r) { handle_chat(sc, q, r); });
    svr.Post("/tokenize", [&sc](const httplib::Request & req, httplib::Response & res) {
        const json b = parse_body(req.body);
        check_fields(b, {"content", "add_special", "with_pieces"}, {});
        if (!b.contains("content") || !b["content"].is_string()) throw request_error(400, "'content' must be a string");
        const std::vector<llama_token> toks = common_tokenize(sc.vocab, b["content"].get<std::string>(), get_bool(b, "add_special", false), true);
        if (!get_bool(b, "with_pieces", false)) {
            send_json(res, json{{"tokens", toks}});
            return;
        }
        // With pieces (llama.cpp): each token's text, or its bytes where they are not whole UTF-8.
        json a = json::array();
        for (llama_token t : toks) {
            const std::string p = piece_of(sc, t);
            json piece = p;
            try {
                (void) json(p).dump();
            } catch (const std::exception &) {
                piece = bytes_of(p);
            }
            a.push_back({{"id", t}, {"piece", piece}});
        }
        send_json(res, json{{"tokens", a}});
    });
    svr.Post("/detokenize", [&sc](const httplib::Request & req, httplib::Response & res) {
        const json b = parse_body(req.body);
        check_fields(b, {"tokens"}, {});
        if (!b.contains("tokens") || !b["tokens"].is_array()) throw request_error(400, "'tokens' must be an array of token ids");
        std::vector<llama_token> toks;
        const int32_t n_vocab = llama_vocab_n_tokens(sc.vocab);
        for (const json & t : b["tokens"]) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
                throw request_error(400, "'tokens' must hold token ids in [0, " + std::to_string(n_vocab) + ")");
            }
            toks.push_back((llama_token) t.get<int64_t>());
        }
        std::string text(toks.size() * 16 + 16, '\0');
        int32_t n = llama_detokenize(sc.vocab, toks.data(), (int32_t) toks.size(), text.data(), (int32_t) text.size(), false, false);
        if (n < 0) {
            text.resize((size_t) -n);
            n = llama_detokenize(sc.vocab, toks.data(), (int32_t) toks.size(), text.data(), (int32_t) text.size(), false, false);
        }
        text.resize((size_t) std::max(n, 0));
        send_json(res, json{{"content", text}});
    });
    if (params.endpoint_slots) {
        svr.Get("/slots", [&sc](const httplib::Request &, httplib::Response & res) {
            json a = json::array();
            for (const server_slot_info & s : sc.engine->slots()) {
                a.push_back(json{{"id", s.id}, {"is_processing", s.busy}, {"n_ctx", sc.engine->n_ctx_slot()}, {"n_cached", s.n_cached}});
            }
            send_json(res, a);
        });
    }

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int port = params.port;
    if (port == 0) {
        port = svr.bind_to_any_port(params.hostname);
    } else if (!svr.bind_to_port(params.hostname, port)) {
        port = -1;
    }
    if (port < 0) {
        fprintf(stderr, "llama-server: cannot listen on %s:%d\n", params.hostname.c_str(), params.port);
        return 1;
    }
    fprintf(stderr, "llama-server: listening on http://%s:%d (%d slots of %d tokens)\n", params.hostname.c_str(), port, (int) cp.n_seq_max,
            engine->n_ctx_slot());
    fflush(stderr);
    // A request's headers must come within -to seconds, and at most 10 (a client sends them at
    // once; one sending a byte at a time only holds a thread).
    deadline = std::make_unique<header_deadline>(port, std::min(params.timeout_read, 10));
    const bool ok = svr.listen_after_bind();
    g_server = nullptr;
    engine.reset();  // ends its loop, answers what is left
    llama_free(ctx);
    for (llama_adapter_lora * a : adapters) llama_adapter_lora_free(a);
    llama_model_free(sc.model);
    return ok ? 0 : 1;
}
