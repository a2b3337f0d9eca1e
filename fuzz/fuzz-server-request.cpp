// fuzz-server-request: llama-server's reading of request bodies (examples/server/server-request.cpp)
// for each endpoint, chosen by the first byte: OpenAI's completions, chat completions and
// embeddings, llama.cpp's /completion. A body is either refused with a 4xx and a message, or read
// into a request whose values are within their bounds, and whose grammar (given, or made from a
// JSON schema) parses or is refused with a reason. Any other exception, a crash or a hang is a bug.
#include "fuzz-common.h"

#include "llama-grammar.h"
#include "server-request.h"

namespace {

constexpr int32_t kVocab = 512;

void check_sampling(const common_params_sampling & sp) {
    FUZZ_CHECK(sp.temp >= 0.0f && sp.temp <= 100.0f);
    FUZZ_CHECK(sp.top_p >= 0.0f && sp.top_p <= 1.0f);
    FUZZ_CHECK(sp.min_p >= 0.0f && sp.min_p <= 1.0f);
    FUZZ_CHECK(sp.top_k >= 0);
    FUZZ_CHECK(sp.seed >= -1);
    for (const llama_logit_bias & b : sp.logit_bias) {
        FUZZ_CHECK(b.token >= 0 && b.token < kVocab);
        FUZZ_CHECK(b.bias <= 100.0f && (b.bias >= -100.0f || b.bias == -INFINITY));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size == 0) return 0;
    const int which = data[0] % 4;
    const std::string body(reinterpret_cast<const char *>(data) + 1, size - 1);
    try {
        const json b = parse_body(body);
        if (which == 3) {
            const embedding_request r = parse_embeddings(b, kVocab);
            FUZZ_CHECK(!r.inputs.empty() && r.inputs.size() <= 2048);
            for (const embedding_input & e : r.inputs) {
                FUZZ_CHECK(e.is_tokens ? !e.tokens.empty() : !e.text.empty());
                for (llama_token t : e.tokens) FUZZ_CHECK(t >= 0 && t < kVocab);
            }
            return 0;
        }
        const completion_kind kind = which == 0 ? completion_kind::oai_completion : which == 1 ? completion_kind::oai_chat : completion_kind::llama_completion;
        const completion_request r = parse_completion(b, kind, common_params_sampling(), kVocab);
        check_sampling(r.sampling);
        FUZZ_CHECK(r.max_tokens >= -1 && r.max_tokens <= INT32_MAX);
        FUZZ_CHECK(r.n_probs >= 0 && r.n_probs <= 100);
        FUZZ_CHECK(kind == completion_kind::oai_chat ? !r.messages.empty() : r.messages.empty());
        for (const std::string & s : r.stop) FUZZ_CHECK(!s.empty());
        // The grammar (given, or made from a JSON schema) parses, or is refused with a reason
        // (the server's 400). (A schema whose $ref loops without consuming text, such as
        // n: anyOf [string, n], gives a left-recursive grammar, refused so.)
        if (!r.sampling.grammar.empty()) {
            std::string err;
            auto g = llama_gbnf_parse(r.sampling.grammar, "root", &err);
            FUZZ_CHECK(g != nullptr || !err.empty());
        }
    } catch (const request_error & e) {
        FUZZ_CHECK(e.status >= 400 && e.status < 500);
        FUZZ_CHECK(std::string(e.what()).size() > 0);
        (void) error_body(e.what(), e.type, e.status).dump(-1, ' ', false, json::error_handler_t::replace);
    }
    return 0;
}
