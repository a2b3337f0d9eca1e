// server-request.cpp - request bodies to what they ask for (see server-request.h).
#include "server-request.h"

#include "json-schema-to-grammar.h"

#include <cmath>
#include <cstring>

json error_body(const std::string & msg, const std::string & type, int code) {
    return json{{"error", {{"message", msg}, {"type", type}, {"param", nullptr}, {"code", code}}}};
}

namespace {

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

bool given(const json & b, const char * key) { return b.contains(key) && !b[key].is_null(); }

// OpenAI's stop: a string or an array of strings (empty strings mean nothing).
std::vector<std::string> get_stop(const json & b) {
    std::vector<std::string> out;
    if (!given(b, "stop")) return out;
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

// logit_bias: OpenAI's object {"token id": bias in [-100, 100]}, or llama.cpp's [[id, bias], ...];
// a bias of false (llama.cpp) bans the token.
std::vector<llama_logit_bias> get_logit_bias(const json & b, int32_t n_vocab) {
    std::vector<llama_logit_bias> out;
    if (!given(b, "logit_bias")) return out;
    const json & lb = b["logit_bias"];
    auto add = [&](const json & id, const json & bias) {
        int64_t tok = -1;
        if (id.is_number_integer()) {
            tok = id.get<int64_t>();
        } else if (id.is_string()) {
            const std::string & s = id.get_ref<const std::string &>();
            char * end = nullptr;
            tok = s.empty() || s.size() > 10 ? -1 : strtoll(s.c_str(), &end, 10);
            if (end == nullptr || *end != '\0') throw request_error(400, "'logit_bias' keys must be token ids, not text ('" + s + "')");
        } else {
            throw request_error(400, "'logit_bias' must map token ids to biases");
        }
        if (tok < 0 || tok >= n_vocab) throw request_error(400, "'logit_bias' holds token id " + std::to_string(tok) + ", not in [0, " + std::to_string(n_vocab) + ")");
        float v;
        if (bias.is_boolean() && !bias.get<bool>()) {
            v = -INFINITY;
        } else if (bias.is_number()) {
            const double d = bias.get<double>();
            if (!(d >= -100.0 && d <= 100.0)) throw request_error(400, "'logit_bias' values must be between -100 and 100");
            v = (float) d;
        } else {
            throw request_error(400, "'logit_bias' values must be numbers (or false, to ban the token)");
        }
        out.push_back({(llama_token) tok, v});
    };
    if (lb.is_object()) {
        if (lb.size() > 4096) throw request_error(400, "'logit_bias' holds more than 4096 tokens");
        for (auto it = lb.begin(); it != lb.end(); ++it) add(json(it.key()), it.value());
    } else if (lb.is_array()) {
        if (lb.size() > 4096) throw request_error(400, "'logit_bias' holds more than 4096 tokens");
        for (const json & e : lb) {
            if (!e.is_array() || e.size() != 2) throw request_error(400, "'logit_bias' as an array holds [token id, bias] pairs");
            add(e[0], e[1]);
        }
    } else {
        throw request_error(400, "'logit_bias' must be an object mapping token ids to biases");
    }
    return out;
}

std::string grammar_of_schema(const json & schema, const char * where) {
    if (!schema.is_object() && !schema.is_boolean()) throw request_error(400, std::string(where) + " must be a JSON schema (an object)");
    try {
        return json_schema_to_grammar(schema);
    } catch (const std::exception & e) {
        throw request_error(400, std::string(where) + ": " + e.what());
    }
}

// The grammar a request constrains its text with: llama.cpp's grammar (GBNF) or json_schema, or
// OpenAI's response_format; "" for none. (Whether the GBNF parses is known only with the
// vocabulary: the server builds the sampler and answers 400 when it does not.)
std::string get_grammar(const json & b) {
    int n = 0;
    std::string g;
    if (given(b, "grammar")) {
        if (!b["grammar"].is_string()) throw request_error(400, "'grammar' must be a string (GBNF)");
        g = b["grammar"].get<std::string>();
        n++;
    }
    if (given(b, "json_schema")) {
        g = grammar_of_schema(b["json_schema"], "'json_schema'");
        n++;
    }
    if (given(b, "response_format")) {
        const json & rf = b["response_format"];
        if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
            throw request_error(400, "'response_format' must be an object with a 'type' (text, json_object or json_schema)");
        }
        const std::string type = rf["type"].get<std::string>();
        if (type == "json_object") {
            // Any JSON object (OpenAI's JSON mode), or llama.cpp's response_format.schema.
            g = grammar_of_schema(given(rf, "schema") ? rf["schema"] : json{{"type", "object"}, {"additionalProperties", true}},
                                  "'response_format.schema'");
            n++;
        } else if (type == "json_schema") {
            if (!given(rf, "json_schema") || !rf["json_schema"].is_object()) {
                throw request_error(400, "'response_format.json_schema' must be an object with the 'schema'");
            }
            const json & js = rf["json_schema"];
            g = grammar_of_schema(given(js, "schema") ? js["schema"] : json::object(), "'response_format.json_schema.schema'");
            n++;
        } else if (type != "text") {
            throw request_error(400, "'response_format.type' must be text, json_object or json_schema, not '" + type + "'");
        }
    }
    if (n > 1) throw request_error(400, "give one of 'grammar', 'json_schema' and 'response_format', not several");
    return g;
}

std::vector<chat_message> get_messages(const json & b) {
    if (!b.contains("messages") || !b["messages"].is_array()) throw request_error(400, "'messages' must be an array of messages");
    const json & msgs = b["messages"];
    if (msgs.empty()) throw request_error(400, "'messages' must hold at least one message");
    std::vector<chat_message> out;
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
                if (!part.is_object() || !part.contains("type") || !part["type"].is_string() || part["type"].get<std::string>() != "text" ||
                    !part.contains("text") || !part["text"].is_string()) {
                    throw request_error(400, "only text content parts are supported");
                }
                text += part["text"].get<std::string>();
            }
        } else {
            throw request_error(400, "each message must have a 'content' string or an array of text parts");
        }
        out.push_back({role == "developer" ? "system" : role, text});
    }
    return out;
}

}  // namespace

json parse_body(const std::string & text) {
    json body;
    try {
        body = json::parse(text);  // (ill-formed UTF-8 in a string is a parse error)
    } catch (const std::exception & e) {
        throw request_error(400, std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) throw request_error(400, "the request body must be a JSON object");
    check_utf8(body);
    return body;
}

void check_fields(const json & body, const std::set<std::string> & known, const std::set<std::string> & unsupported) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (unsupported.count(it.key()) && !it.value().is_null()) throw request_error(400, "'" + it.key() + "' is not supported by this server yet");
        if (!known.count(it.key()) && !unsupported.count(it.key())) throw request_error(400, "unrecognized request argument supplied: " + it.key());
    }
}

double get_number(const json & b, const char * key, double def, double lo, double hi) {
    if (!given(b, key)) return def;
    if (!b[key].is_number()) throw request_error(400, std::string("'") + key + "' must be a number");
    const double v = b[key].get<double>();
    if (!(v >= lo && v <= hi)) throw request_error(400, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return v;
}

int64_t get_int(const json & b, const char * key, int64_t def, int64_t lo, int64_t hi) {
    if (!given(b, key)) return def;
    // (A float with an integral value, 5.0, is what some clients send for an integer.)
    const json & v = b[key];
    if (!v.is_number_integer() && !(v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>() &&
                                    std::fabs(v.get<double>()) < 9e18)) {
        throw request_error(400, std::string("'") + key + "' must be an integer");
    }
    const int64_t i = v.is_number_unsigned() ? (v.get<uint64_t>() > (uint64_t) INT64_MAX ? INT64_MAX : (int64_t) v.get<uint64_t>())
                      : v.is_number_integer() ? v.get<int64_t>() : (int64_t) v.get<double>();
    if (i < lo || i > hi) throw request_error(400, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return i;
}

bool get_bool(const json & b, const char * key, bool def) {
    if (!given(b, key)) return def;
    if (!b[key].is_boolean()) throw request_error(400, std::string("'") + key + "' must be a boolean");
    return b[key].get<bool>();
}

completion_request parse_completion(const json & b, completion_kind kind, const common_params_sampling & defaults, int32_t n_vocab) {
    // The fields every kind takes: OpenAI's sampling fields and llama.cpp's extensions, which
    // llama.cpp's server takes on its OpenAI endpoints too.
    std::set<std::string> known = {"model", "user", "stream", "stream_options", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
                                   "frequency_penalty", "repeat_penalty", "repeat_last_n", "seed", "stop", "logit_bias", "response_format",
                                   "grammar", "json_schema", "ignore_eos", "n_keep"};
    std::set<std::string> unsupported = {"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls", "suffix", "echo",
                                         "best_of", "audio", "modalities", "prediction", "reasoning_effort"};
    switch (kind) {
        case completion_kind::oai_completion: known.insert({"prompt", "max_tokens", "n", "logprobs"}); break;
        case completion_kind::oai_chat: known.insert({"messages", "max_tokens", "max_completion_tokens", "n", "logprobs", "top_logprobs"}); break;
        case completion_kind::llama_completion: known.insert({"prompt", "n_predict", "max_tokens", "n_probs"}); break;
    }
    check_fields(b, known, unsupported);

    completion_request r;
    r.kind = kind;
    if (kind == completion_kind::oai_chat) {
        r.messages = get_messages(b);
    } else {
        if (!b.contains("prompt") || !b["prompt"].is_string()) throw request_error(400, "'prompt' must be a string");
        r.prompt = b["prompt"].get<std::string>();
    }
    if (get_int(b, "n", 1, 1, 128) != 1) throw request_error(400, "'n' other than 1 is not supported by this server yet");
    r.stream = get_bool(b, "stream", false);
    if (given(b, "stream_options")) {
        const json & so = b["stream_options"];
        if (!so.is_object()) throw request_error(400, "'stream_options' must be an object");
        check_fields(so, {"include_usage"});
        r.include_usage = get_bool(so, "include_usage", false);
    }
    const char * max_key = kind == completion_kind::llama_completion ? (given(b, "n_predict") ? "n_predict" : "max_tokens")
                           : kind == completion_kind::oai_chat && given(b, "max_completion_tokens") ? "max_completion_tokens"
                                                                                                     : "max_tokens";
    r.max_tokens = get_int(b, max_key, -1, kind == completion_kind::llama_completion ? -1 : 0, INT32_MAX);

    common_params_sampling & sp = r.sampling;
    sp = defaults;
    sp.temp = (float) get_number(b, "temperature", sp.temp, 0.0, 100.0);
    sp.top_p = (float) get_number(b, "top_p", sp.top_p, 0.0, 1.0);
    sp.top_k = (int32_t) get_int(b, "top_k", sp.top_k, 0, 1 << 20);
    sp.min_p = (float) get_number(b, "min_p", sp.min_p, 0.0, 1.0);
    sp.penalty_present = (float) get_number(b, "presence_penalty", sp.penalty_present, -2.0, 2.0);
    sp.penalty_freq = (float) get_number(b, "frequency_penalty", sp.penalty_freq, -2.0, 2.0);
    sp.penalty_repeat = (float) get_number(b, "repeat_penalty", sp.penalty_repeat, 0.0, 100.0);
    sp.penalty_last_n = (int32_t) get_int(b, "repeat_last_n", sp.penalty_last_n, -1, INT32_MAX);
    sp.seed = get_int(b, "seed", sp.seed, -1, INT64_MAX);
    sp.ignore_eos = get_bool(b, "ignore_eos", sp.ignore_eos);
    const std::vector<llama_logit_bias> bias = get_logit_bias(b, n_vocab);
    sp.logit_bias.insert(sp.logit_bias.end(), bias.begin(), bias.end());
    const std::string g = get_grammar(b);
    if (!g.empty()) sp.grammar = g;
    r.stop = get_stop(b);
    r.n_keep = (int32_t) get_int(b, "n_keep", -2, -1, INT32_MAX);

    switch (kind) {
        case completion_kind::oai_completion:
            // OpenAI's legacy logprobs: the count of alternatives (0 for the chosen tokens' only).
            if (given(b, "logprobs")) {
                r.logprobs = true;
                r.n_probs = (int32_t) get_int(b, "logprobs", 0, 0, 20);
            }
            break;
        case completion_kind::oai_chat:
            r.logprobs = get_bool(b, "logprobs", false);
            r.n_probs = (int32_t) get_int(b, "top_logprobs", 0, 0, 20);
            if (given(b, "top_logprobs") && !r.logprobs) throw request_error(400, "'top_logprobs' needs 'logprobs' set to true");
            break;
        case completion_kind::llama_completion:
            r.n_probs = (int32_t) get_int(b, "n_probs", 0, 0, 100);
            r.logprobs = r.n_probs > 0;
            break;
    }
    return r;
}

embedding_request parse_embeddings(const json & b, int32_t n_vocab) {
    check_fields(b, {"input", "model", "encoding_format", "user"}, {"dimensions"});
    embedding_request r;
    if (given(b, "encoding_format")) {
        if (!b["encoding_format"].is_string()) throw request_error(400, "'encoding_format' must be float or base64");
        const std::string f = b["encoding_format"].get<std::string>();
        if (f != "float" && f != "base64") throw request_error(400, "'encoding_format' must be float or base64, not '" + f + "'");
        r.base64 = f == "base64";
    }
    if (!b.contains("input")) throw request_error(400, "'input' is missing: a string, an array of strings, or token ids");
    const json & in = b["input"];
    auto tokens_of = [&](const json & a) {
        embedding_input e;
        e.is_tokens = true;
        for (const json & t : a) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
                throw request_error(400, "'input' token ids must be integers in [0, " + std::to_string(n_vocab) + ")");
            }
            e.tokens.push_back((llama_token) t.get<int64_t>());
        }
        if (e.tokens.empty()) throw request_error(400, "'input' holds an empty list of tokens");
        return e;
    };
    auto text_of = [&](const json & s) {
        embedding_input e;
        e.text = s.get<std::string>();
        if (e.text.empty()) throw request_error(400, "'input' holds an empty string");
        return e;
    };
    if (in.is_string()) {
        r.inputs.push_back(text_of(in));
    } else if (in.is_array() && !in.empty() && in[0].is_number()) {
        r.inputs.push_back(tokens_of(in));
    } else if (in.is_array() && !in.empty()) {
        if (in.size() > 2048) throw request_error(400, "'input' holds more than 2048 inputs");
        for (const json & e : in) {
            if (e.is_string()) r.inputs.push_back(text_of(e));
            else if (e.is_array()) r.inputs.push_back(tokens_of(e));
            else throw request_error(400, "'input' must be a string, an array of strings, or token ids");
        }
    } else {
        throw request_error(400, "'input' must be a non-empty string, array of strings, or token ids");
    }
    return r;
}

std::string base64_encode(const unsigned char * data, size_t n) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((n + 2) / 3 * 4);
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t) data[i] << 16 | (i + 1 < n ? (uint32_t) data[i + 1] << 8 : 0) | (i + 2 < n ? data[i + 2] : 0);
        out += tbl[(v >> 18) & 63];
        out += tbl[(v >> 12) & 63];
        out += i + 1 < n ? tbl[(v >> 6) & 63] : '=';
        out += i + 2 < n ? tbl[v & 63] : '=';
    }
    return out;
}
