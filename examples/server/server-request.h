// server-request.h - llama-server's reading of request bodies: JSON text to what a request asks
// for, or a request_error (an HTTP 4xx with OpenAI's error type). Nothing here needs the model or
// HTTP, so fuzz-server-request feeds it bytes directly; server.cpp then tokenizes, bounds by the
// slot's context and builds the sampler chain.
#pragma once

#include "common.h"

#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

// A request the server refuses: the HTTP status and OpenAI's error type.
struct request_error : std::runtime_error {
    int status;
    std::string type;
    request_error(int st, const std::string & msg, const char * t = "invalid_request_error") : std::runtime_error(msg), status(st), type(t) {}
};

json error_body(const std::string & msg, const std::string & type, int code);

// The body as a JSON object, every string (keys too) well-formed UTF-8.
json parse_body(const std::string & body);

// Fields the endpoint knows; another is refused by name (OpenAI refuses unrecognized arguments),
// and one it knows but does not support, with that reason.
void check_fields(const json & body, const std::set<std::string> & known, const std::set<std::string> & unsupported = {});

double get_number(const json & b, const char * key, double def, double lo, double hi);
int64_t get_int(const json & b, const char * key, int64_t def, int64_t lo, int64_t hi);
bool get_bool(const json & b, const char * key, bool def);

enum class completion_kind {
    oai_completion,    // POST /v1/completions: prompt, max_tokens, logprobs as a count
    oai_chat,          // POST /v1/chat/completions: messages, max_tokens / max_completion_tokens, logprobs + top_logprobs
    llama_completion,  // llama.cpp's POST /completion: prompt, n_predict, n_probs
};

struct chat_message {
    std::string role;  // system (developer's too), user, assistant
    std::string content;
};

// What a completion request asks for.
struct completion_request {
    completion_kind kind;
    std::string prompt;                  // completions
    std::vector<chat_message> messages;  // chat
    bool stream = false;
    bool include_usage = false;          // stream_options.include_usage (usage rides on the last chunk)
    int64_t max_tokens = -1;             // -1: not given (the server's default)
    common_params_sampling sampling;     // the server's defaults overridden; .grammar from grammar, json_schema or response_format
    std::vector<std::string> stop;       // stop strings (not part of the text)
    int32_t n_probs = 0;                 // the most likely tokens reported beside each generated one
    bool logprobs = false;               // each generated token's log-probability
    int32_t n_keep = -2;                 // llama.cpp's n_keep for context shifts (-2: the server's)
};

// n_vocab bounds logit_bias's token ids.
completion_request parse_completion(const json & b, completion_kind kind, const common_params_sampling & defaults, int32_t n_vocab);

// POST /v1/embeddings: each input as text, or as token ids.
struct embedding_input {
    std::string text;
    std::vector<llama_token> tokens;
    bool is_tokens = false;
};
struct embedding_request {
    std::vector<embedding_input> inputs;
    bool base64 = false;  // encoding_format "base64": little-endian float32s, base64 (the OpenAI clients' default)
};
embedding_request parse_embeddings(const json & b, int32_t n_vocab);

std::string base64_encode(const unsigned char * data, size_t n);
