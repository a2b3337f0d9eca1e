// llama-server: an OpenAI-compatible HTTP server with continuous batching, llama.cpp's flags.
//
//   llama-server -m MODEL.gguf [--host 127.0.0.1] [--port 8080] [-np N] [-c N] [--api-key KEY] [...]
//
// Endpoints: GET /health, GET /v1/models (/models), POST /v1/completions, POST /v1/chat/completions
// (whole, or streamed as OpenAI streams: server-sent events ending with "data: [DONE]"),
// llama.cpp's POST /completion, POST /tokenize and /detokenize, GET /slots. Errors are OpenAI's
// error object with a 4xx status: malformed JSON, a field of the wrong type, a field the server
// does not know or does not support, an empty message list, a prompt or max_tokens that does not
// fit a slot's context. With --api-key every endpoint but /health wants "Authorization: Bearer
// KEY" (compared in constant time). The requests run in server_engine's slots, -np of them, each
// with -c / -np cells.
//
// HTTP is cpp-httplib's (Debian's libcpp-httplib-dev) and JSON nlohmann-json's; the program is
// built only where both are found.
#include "arg.h"
#include "common.h"
#include "llama.h"
#include "index.html.hpp"  // the chat page (public/index.html, embedded at build time)
#include "server-engine.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <memory>
#include <cstdio>
#include <ctime>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

namespace {

// A request the server refuses: the HTTP status and OpenAI's error type.
struct request_error : std::runtime_error {
    int status;
    std::string type;
    request_error(int st, const std::string & msg, const char * t = "invalid_request_error") : std::runtime_error(msg), status(st), type(t) {}
};

json error_body(const std::string & msg, const std::string & type, int code) {
    return json{{"error", {{"message", msg}, {"type", type}, {"param", nullptr}, {"code", code}}}};
}

// JSON text of j; ill-formed UTF-8 (a model may end on half a character) becomes U+FFFD.
std::string dump(const json & j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response & res, const json & j, int status = 200) {
    res.status = status;
    res.set_content(dump(j), "application/json; charset=utf-8");
}

bool utf8_ok(const std::string & s) {
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = (unsigned char) s[i];
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        uint32_t cp = n == 1 ? c : c & (0x7F >> n);
        for (size_t k = 1; k < n; k++) {
            const unsigned char d = (unsigned char) s[i + k];
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += n;
    }
    return true;
}

// Every string of the request (keys too) must be well-formed UTF-8.
void check_utf8(const json & j) {
    if (j.is_string() && !utf8_ok(j.get_ref<const std::string &>())) throw request_error(400, "the request holds a string that is not valid UTF-8");
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
            if (!utf8_ok(it.key())) throw request_error(400, "the request holds a key that is not valid UTF-8");
            check_utf8(it.value());
        }
    } else if (j.is_array()) {
        for (const json & e : j) check_utf8(e);
    }
}

// ---- reading a request's fields --------------------------------------------------------------

json parse_body(const httplib::Request & req) {
    json body;
    try {
        body = json::parse(req.body);  // (ill-formed UTF-8 in a string is a parse error)
    } catch (const std::exception & e) {
        throw request_error(400, std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) throw request_error(400, "the request body must be a JSON object");
    check_utf8(body);
    return body;
}

// Fields the endpoint knows; another is refused by name (OpenAI refuses unrecognized arguments),
// and one it knows but does not support yet, with that reason.
void check_fields(const json & body, const std::set<std::string> & known, const std::set<std::string> & unsupported) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (unsupported.count(it.key()) && !it.value().is_null()) throw request_error(400, "'" + it.key() + "' is not supported by this server yet");
        if (!known.count(it.key()) && !unsupported.count(it.key())) throw request_error(400, "unrecognized request argument supplied: " + it.key());
    }
}

double get_number(const json & b, const char * key, double def, double lo, double hi) {
    if (!b.contains(key) || b[key].is_null()) return def;
    if (!b[key].is_number()) throw request_error(400, std::string("'") + key + "' must be a number");
    const double v = b[key].get<double>();
    if (!(v >= lo && v <= hi)) throw request_error(400, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return v;
}

int64_t get_int(const json & b, const char * key, int64_t def, int64_t lo, int64_t hi) {
    if (!b.contains(key) || b[key].is_null()) return def;
    if (!b[key].is_number_integer()) throw request_error(400, std::string("'") + key + "' must be an integer");
    const int64_t v = b[key].get<int64_t>();
    if (v < lo || v > hi) throw request_error(400, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return v;
}

bool get_bool(const json & b, const char * key, bool def) {
    if (!b.contains(key) || b[key].is_null()) return def;
    if (!b[key].is_boolean()) throw request_error(400, std::string("'") + key + "' must be a boolean");
    return b[key].get<bool>();
}

// OpenAI's stop: a string or an array of up to 4 strings (empty strings mean nothing).
std::vector<std::string> get_stop(const json & b) {
    std::vector<std::string> out;
    if (!b.contains("stop") || b["stop"].is_null()) return out;
    const json & s = b["stop"];
    if (s.is_string()) {
        if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
        return out;
    }
    if (!s.is_array() || s.size() > 16) throw request_error(400, "'stop' must be a string or an array of at most 16 strings");
    for (const json & e : s) {
        if (!e.is_string()) throw request_error(400, "'stop' must be a string or an array of strings");
        if (!e.get<std::string>().empty()) out.push_back(e.get<std::string>());
    }
    return out;
}

struct server_ctx {
    common_params params;
    llama_model * model = nullptr;
    const llama_vocab * vocab = nullptr;
    server_engine * engine = nullptr;
    std::string model_id;
    std::string chat_template;  // empty: the model's
};

// The sampling fields OpenAI and llama.cpp's /completion share, over the command line's defaults.
common_params_sampling sampling_of(const server_ctx & sc, const json & b) {
    common_params_sampling sp = sc.params.sampling;
    sp.temp = (float) get_number(b, "temperature", sp.temp, 0.0, 100.0);
    sp.top_p = (float) get_number(b, "top_p", sp.top_p, 0.0, 1.0);
    sp.top_k = (int32_t) get_int(b, "top_k", sp.top_k, 0, 1 << 20);
    sp.min_p = (float) get_number(b, "min_p", sp.min_p, 0.0, 1.0);
    sp.penalty_present = (float) get_number(b, "presence_penalty", sp.penalty_present, -2.0, 2.0);
    sp.penalty_freq = (float) get_number(b, "frequency_penalty", sp.penalty_freq, -2.0, 2.0);
    sp.penalty_repeat = (float) get_number(b, "repeat_penalty", sp.penalty_repeat, 0.0, 100.0);
    sp.seed = get_int(b, "seed", sp.seed, -1, INT64_MAX);
    return sp;
}

// The task of a prompt: its tokens checked against a slot's context, n_predict bounded by it.
std::shared_ptr<gen_task> make_task(const server_ctx & sc, const std::string & prompt, const json & b, const char * max_key,
                                    bool add_special) {
    auto t = std::make_shared<gen_task>();
    t->prompt = common_tokenize(sc.vocab, prompt, add_special, true);
    if (t->prompt.empty()) throw request_error(400, "the prompt is empty");
    const int32_t n_ctx = sc.engine->n_ctx_slot();
    if ((int32_t) t->prompt.size() >= n_ctx) {
        throw request_error(400, "the prompt has " + std::to_string(t->prompt.size()) + " tokens; a slot's context holds " + std::to_string(n_ctx));
    }
    const int64_t room = n_ctx - (int64_t) t->prompt.size();
    const int64_t def = sc.params.n_predict >= 0 ? std::min<int64_t>(sc.params.n_predict, room) : room;
    const int64_t n = get_int(b, max_key, def, -1, INT32_MAX);
    if (n > room) {
        throw request_error(400, std::string("'") + max_key + "' is " + std::to_string(n) + ", but the prompt's " + std::to_string(t->prompt.size()) +
                                     " tokens leave room for " + std::to_string(room) + " in a slot's context of " + std::to_string(n_ctx));
    }
    t->n_predict = (int32_t) (n < 0 ? room : n);
    t->sampling = sampling_of(sc, b);
    t->stop = get_stop(b);
    return t;
}

std::string chat_prompt(const server_ctx & sc, const json & b) {
    if (!b.contains("messages") || !b["messages"].is_array()) throw request_error(400, "'messages' must be an array of messages");
    const json & msgs = b["messages"];
    if (msgs.empty()) throw request_error(400, "'messages' must hold at least one message");
    std::vector<std::string> roles, contents;
    for (const json & m : msgs) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) throw request_error(400, "each message must be an object with a 'role'");
        const std::string role = m["role"].get<std::string>();
        if (role != "system" && role != "user" && role != "assistant" && role != "developer") {
            throw request_error(400, "unsupported message role '" + role + "' (system, developer, user, assistant)");
        }
        std::string text;
        const json & c = m.contains("content") ? m["content"] : json();
        if (c.is_string()) {
            text = c.get<std::string>();
        } else if (c.is_array()) {  // content parts: text only
            for (const json & part : c) {
                if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
                    throw request_error(400, "only text content parts are supported");
                }
                text += part["text"].get<std::string>();
            }
        } else {
            throw request_error(400, "each message must have a 'content' string or an array of text parts");
        }
        roles.push_back(role == "developer" ? "system" : role);
        contents.push_back(text);
    }
    std::vector<llama_chat_message> chat;
    for (size_t i = 0; i < roles.size(); i++) chat.push_back({roles[i].c_str(), contents[i].c_str()});
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

// Runs t to the end (whole answers): its text, or the error it ended with.
std::string run_whole(const std::shared_ptr<gen_task> & t, const server_ctx & sc) {
    sc.engine->submit(t);
    std::string all, part;
    while (t->next(part, 1000)) all += part;
    if (t->finish_reason == "error") throw request_error(500, t->error, "server_error");
    return all;
}

// Streams t as server-sent events: make_chunk(text) for each piece, final_chunk() once, then
// "data: [DONE]" (OpenAI) when done_marker. A client that goes away cancels t.
void run_stream(httplib::Response & res, const std::shared_ptr<gen_task> & t, const server_ctx & sc,
                std::function<json(const std::string &)> make_chunk, std::function<json()> final_chunk, bool done_marker) {
    sc.engine->submit(t);
    res.set_chunked_content_provider(
        "text/event-stream",
        [t, make_chunk, final_chunk, done_marker](size_t, httplib::DataSink & sink) {
            std::string part;
            if (t->next(part, 200)) {
                if (!part.empty()) {
                    const std::string ev = "data: " + dump(make_chunk(part)) + "\n\n";
                    if (!sink.write(ev.data(), ev.size())) {
                        t->cancelled = true;
                        return false;
                    }
                }
                return true;
            }
            std::string ev;
            if (t->finish_reason == "error") {
                ev = "error: " + dump(error_body(t->error, "server_error", 500)) + "\n\n";
            } else {
                ev = "data: " + dump(final_chunk()) + "\n\n";
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

const std::set<std::string> kSamplingFields = {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                                               "repeat_penalty", "seed", "stop", "stream", "model", "user"};
const std::set<std::string> kUnsupported = {"logprobs", "top_logprobs", "n_probs", "logit_bias", "response_format", "grammar",
                                            "json_schema", "tools", "tool_choice", "suffix", "echo", "best_of", "functions"};

void handle_completions(const server_ctx & sc, const httplib::Request & req, httplib::Response & res, bool openai) {
    const json b = parse_body(req);
    std::set<std::string> known = kSamplingFields;
    known.insert({"prompt", openai ? "max_tokens" : "n_predict", "stream_options"});
    if (openai) known.insert("n");
    check_fields(b, known, kUnsupported);
    if (openai && get_int(b, "n", 1, 1, 128) != 1) throw request_error(400, "'n' other than 1 is not supported by this server yet");
    if (!b.contains("prompt") || !b["prompt"].is_string()) throw request_error(400, "'prompt' must be a string");
    auto t = make_task(sc, b["prompt"].get<std::string>(), b, openai ? "max_tokens" : "n_predict", true);
    const bool stream = get_bool(b, "stream", false);
    const std::string id = random_id("cmpl-"), model = sc.model_id;
    const int64_t created = (int64_t) time(nullptr);
    if (!openai) {
        auto body = [t](const std::string & text, bool done) {
            json j = {{"content", text}, {"stop", done}};
            if (done) {
                j["tokens_predicted"] = t->n_gen;
                j["tokens_evaluated"] = t->n_prompt;
                j["tokens_cached"] = t->n_cached;
                j["stop_type"] = t->finish_reason == "length" ? "limit" : "eos";
                j["id_slot"] = t->slot;
            }
            return j;
        };
        if (stream) {
            run_stream(res, t, sc, [body](const std::string & s) { return body(s, false); }, [body] { return body("", true); }, false);
        } else {
            send_json(res, body(run_whole(t, sc), true));
        }
        return;
    }
    auto choice = [t](const std::string & text, bool done) {
        return json{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", done ? json(finish_reason_of(*t)) : json(nullptr)}};
    };
    auto object = [=](const std::string & text, bool done) {
        json j = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", json::array({choice(text, done)})}};
        if (done) j["usage"] = usage_of(*t);
        return j;
    };
    if (stream) {
        run_stream(res, t, sc, [object](const std::string & s) { return object(s, false); }, [object] { return object("", true); }, true);
    } else {
        send_json(res, object(run_whole(t, sc), true));
    }
}

void handle_chat(const server_ctx & sc, const httplib::Request & req, httplib::Response & res) {
    const json b = parse_body(req);
    std::set<std::string> known = kSamplingFields;
    known.insert({"messages", "max_tokens", "max_completion_tokens", "n", "stream_options"});
    check_fields(b, known, kUnsupported);
    if (get_int(b, "n", 1, 1, 128) != 1) throw request_error(400, "'n' other than 1 is not supported by this server yet");
    const std::string prompt = chat_prompt(sc, b);
    const char * max_key = b.contains("max_completion_tokens") && !b["max_completion_tokens"].is_null() ? "max_completion_tokens" : "max_tokens";
    auto t = make_task(sc, prompt, b, max_key, false);
    const bool stream = get_bool(b, "stream", false);
    const std::string id = random_id("chatcmpl-"), model = sc.model_id;
    const int64_t created = (int64_t) time(nullptr);
    if (stream) {
        auto chunk = [=](const json & delta, const json & finish) {
            return json{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                        {"choices", json::array({json{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
        };
        auto first = std::make_shared<bool>(true);
        run_stream(
            res, t, sc,
            [chunk, first](const std::string & s) {
                json delta = {{"content", s}};
                if (*first) delta = {{"role", "assistant"}, {"content", s}};
                *first = false;
                return chunk(delta, nullptr);
            },
            [chunk, t] {
                json j = chunk(json::object(), finish_reason_of(*t));
                j["usage"] = usage_of(*t);
                return j;
            },
            true);
        return;
    }
    const std::string text = run_whole(t, sc);
    send_json(res, json{{"id", id},
                        {"object", "chat.completion"},
                        {"created", created},
                        {"model", model},
                        {"choices", json::array({json{{"index", 0},
                                                      {"message", {{"role", "assistant"}, {"content", text}}},
                                                      {"logprobs", nullptr},
                                                      {"finish_reason", finish_reason_of(*t)}}})},
                        {"usage", usage_of(*t)}});
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
    llama_context_params cp = common_context_params_to_llama(params);
    cp.n_seq_max = (uint32_t) std::max(1, params.n_parallel);
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
    auto engine = std::make_unique<server_engine>(sc.model, ctx, (int32_t) cp.n_seq_max, (int32_t) llama_n_batch(ctx));
    sc.engine = engine.get();

    httplib::Server svr;
    g_server = &svr;
    const int n_http = params.n_threads_http > 0 ? params.n_threads_http : params.n_parallel + 2;
    svr.new_task_queue = [n_http] { return new httplib::ThreadPool((size_t) std::max(n_http, 2)); };
    svr.set_read_timeout(params.timeout_read, 0);
    svr.set_write_timeout(params.timeout_read, 0);
    svr.set_payload_max_length(8u << 20);

    svr.set_pre_routing_handler([&sc](const httplib::Request & req, httplib::Response & res) {
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
    svr.Post("/v1/completions", [&sc](const httplib::Request & q, httplib::Response & r) { handle_completions(sc, q, r, true); });
    svr.Post("/completions", [&sc](const httplib::Request & q, httplib::Response & r) { handle_completions(sc, q, r, true); });
    svr.Post("/completion", [&sc](const httplib::Request & q, httplib::Response & r) { handle_completions(sc, q, r, false); });
    svr.Post("/v1/chat/completions", [&sc](const httplib::Request & q, httplib::Response & r) { handle_chat(sc, q, r); });
    svr.Post("/chat/completions", [&sc](const httplib::Request & q, httplib::Response & r) { handle_chat(sc, q, r); });
    svr.Post("/tokenize", [&sc](const httplib::Request & req, httplib::Response & res) {
        const json b = parse_body(req);
        check_fields(b, {"content", "add_special", "with_pieces"}, {});
        if (!b.contains("content") || !b["content"].is_string()) throw request_error(400, "'content' must be a string");
        const std::vector<llama_token> toks = common_tokenize(sc.vocab, b["content"].get<std::string>(), get_bool(b, "add_special", false), true);
        send_json(res, json{{"tokens", toks}});
    });
    svr.Post("/detokenize", [&sc](const httplib::Request & req, httplib::Response & res) {
        const json b = parse_body(req);
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
    const bool ok = svr.listen_after_bind();
    g_server = nullptr;
    engine.reset();  // ends its loop, answers what is left
    llama_free(ctx);
    for (llama_adapter_lora * a : adapters) llama_adapter_lora_free(a);
    llama_model_free(sc.model);
    return ok ? 0 : 1;
}
