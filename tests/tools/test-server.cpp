// llama-server as clients use it, on the smallest model: started on a free port, spoken to over
// HTTP (cpp-httplib's client). Answers against the library's own greedy generation, streamed
// text against the whole, a slot's output independent of its neighbours (16 requests from 8
// clients on 4 slots), stop strings, seeds, bad requests each a 4xx with OpenAI's error object
// (the server serving on), the API key, a client leaving mid-stream freeing its slot.
#include "test-util.h"
#include "common.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

using json = nlohmann::ordered_json;

namespace {

std::string model() { return tu::models_dir() + "/stories260K.gguf"; }

// A llama-server started with args on a free port, stopped (SIGTERM) at the end.
struct server_proc {
    tu::TempDir dir;
    int port = -1;
    long pid = -1;
    explicit server_proc(const std::string & args) {
        const std::string log = dir.path + "/log", pidf = dir.path + "/pid";
        const std::string cmd = std::string(LLAMA_BIN_DIR) + "/llama-server -m " + model() + " --port 0 " + args + " > " + log +
                                " 2>&1 & echo $! > " + pidf;
        if (std::system(cmd.c_str()) != 0) return;
        for (int i = 0; i < 20 && pid <= 0; i++) {
            std::ifstream(pidf) >> pid;
            if (pid <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        for (int i = 0; i < 300 && port < 0; i++) {  // up to 30 s (sanitizer builds load slowly), unless it exits
            if (pid > 0 && kill((pid_t) pid, 0) != 0) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));  // (its last lines)
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            std::stringstream ss;
            ss << std::ifstream(log).rdbuf();
            const std::string s = ss.str();
            const size_t at = s.find("listening on http://127.0.0.1:");
            if (at != std::string::npos) port = atoi(s.c_str() + at + 30);
            if (s.find("llama-server: ") != std::string::npos && at == std::string::npos && s.find("listening") == std::string::npos &&
                s.find("failed") != std::string::npos) break;
        }
        std::ifstream(pidf) >> pid;
    }
    ~server_proc() {
        if (pid > 0) kill((pid_t) pid, SIGTERM);
        for (int i = 0; i < 50 && pid > 0 && kill((pid_t) pid, 0) == 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (pid > 0) kill((pid_t) pid, SIGKILL);
    }
    std::string log() const {
        std::stringstream ss;
        ss << std::ifstream(dir.path + "/log").rdbuf();
        return ss.str();
    }
    httplib::Client client() const {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(60, 0);
        return c;
    }
};

json post(const server_proc & s, const std::string & path, const json & body, int * status = nullptr, const httplib::Headers & h = {}) {
    httplib::Client c = s.client();
    auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
    if (!r) {
        ADD_FAILURE() << "no answer from " << path;
        return json();
    }
    if (status) *status = r->status;
    return json::parse(r->body, nullptr, false);
}

// The library's greedy continuation of prompt (BOS added), n tokens: what a slot must answer.
std::string greedy(const std::string & prompt, int n) {
    llama_model * m = llama_model_load_from_file(model().c_str(), llama_model_default_params());
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    llama_context * ctx = llama_init_from_model(m, cp);
    const llama_vocab * v = llama_model_get_vocab(m);
    std::vector<llama_token> toks = common_tokenize(v, prompt, true, true);
    std::string out;
    llama_decode(ctx, llama_batch_get_one(toks.data(), (int32_t) toks.size()));
    for (int i = 0; i < n; i++) {
        const float * l = llama_get_logits_ith(ctx, -1);
        llama_token best = 0;
        for (llama_token t = 1; t < llama_vocab_n_tokens(v); t++) {
            if (l[t] > l[best]) best = t;
        }
        if (llama_vocab_is_eog(v, best)) break;
        out += common_token_to_piece(v, best, false);
        llama_decode(ctx, llama_batch_get_one(&best, 1));
    }
    llama_free(ctx);
    llama_model_free(m);
    return out;
}

// The text of a streamed completion (server-sent events) and its last event's finish reason.
std::string stream_text(const server_proc & s, const std::string & path, json body, std::string * finish = nullptr, bool * done = nullptr) {
    body["stream"] = true;
    httplib::Client c = s.client();
    std::string raw;
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    if (!r || r->status != 200) {
        ADD_FAILURE() << "stream failed";
        return "";
    }
    raw = r->body;
    std::string text;
    std::istringstream in(raw);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("data: ", 0) != 0) continue;
        if (line == "data: [DONE]") {
            if (done) *done = true;
            continue;
        }
        const json j = json::parse(line.substr(6));
        const json & ch = j["choices"][0];
        if (ch.contains("text")) text += ch["text"].get<std::string>();
        if (ch.contains("delta") && ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
        if (finish && !ch["finish_reason"].is_null()) *finish = ch["finish_reason"].get<std::string>();
    }
    return text;
}

// A client that asks for a streamed completion (body, "stream" set here), reads a little of it,
// then hangs up.
void hang_up_mid_stream(const server_proc & s, json body) {
    body["stream"] = true;
    httplib::Client c = s.client();
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    req.content_receiver = [&](const char *, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
    httplib::Response res;
    httplib::Error err;
    c.send(req, res, err);
}

#define REQUIRE_SERVER(s) \
    TU_REQUIRE_FILE(model()); \
    ASSERT_GT((s).port, 0) << (s).log()

TEST(Server, CompletionsAreTheLibrarysGreedyText) {
    server_proc s("-np 2 -c 512");
    REQUIRE_SERVER(s);
    httplib::Client c = s.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    const json models = json::parse(c.Get("/v1/models")->body);
    EXPECT_EQ(models["object"], "list");
    EXPECT_EQ(models["data"][0]["object"], "model");

    const std::string want = greedy("Once upon a time", 24);
    int st = 0;
    const json r = post(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}}, &st);
    ASSERT_EQ(st, 200) << r.dump();
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["choices"][0]["text"], want);
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(r["usage"]["completion_tokens"], 24);
    EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"].get<int>() + 24);
    // Streamed: the same text in pieces, a finish reason, then [DONE].
    std::string finish;
    bool done = false;
    EXPECT_EQ(stream_text(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}}, &finish, &done), want);
    EXPECT_EQ(finish, "length");
    EXPECT_TRUE(done);
    // llama.cpp's /completion
    const json lc = post(s, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 24}, {"temperature", 0}}, &st);
    ASSERT_EQ(st, 200);
    EXPECT_EQ(lc["content"], want);
    EXPECT_EQ(lc["tokens_predicted"], 24);
    // The second time the prompt is in the slot's cache: the same text.
    EXPECT_GT(lc["tokens_evaluated"].get<int>(), 0);
    // tokenize / detokenize
    const json tk = post(s, "/tokenize", {{"content", "Once upon a time"}}, &st);
    ASSERT_EQ(st, 200);
    const json dt = post(s, "/detokenize", {{"tokens", tk["tokens"]}}, &st);
    EXPECT_EQ(dt["content"], "Once upon a time");
}

TEST(Server, ChatWholeAndStreamedAgree) {
    server_proc s("-np 2 -c 1024");
    REQUIRE_SERVER(s);
    const json req = {{"messages", {{{"role", "system"}, {"content", "Tell a story."}}, {{"role", "user"}, {"content", "Hello"}}}},
                      {"max_tokens", 16}, {"temperature", 0}};
    int st = 0;
    const json r = post(s, "/v1/chat/completions", req, &st);
    ASSERT_EQ(st, 200) << r.dump();
    EXPECT_EQ(r["object"], "chat.completion");
    EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
    const std::string whole = r["choices"][0]["message"]["content"];
    EXPECT_FALSE(whole.empty());
    std::string finish;
    EXPECT_EQ(stream_text(s, "/v1/chat/completions", req, &finish), whole);
    EXPECT_EQ(finish, r["choices"][0]["finish_reason"]);
}

TEST(Server, StopStringsAndSeeds) {
    server_proc s("-np 2 -c 512");
    REQUIRE_SERVER(s);
    const std::string full = greedy("Once upon a time", 24);
    const size_t at = full.find("Lily");
    ASSERT_NE(at, std::string::npos) << full;
    int st = 0;
    json r = post(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}, {"stop", {"Lily", "zzz"}}}, &st);
    ASSERT_EQ(st, 200);
    EXPECT_EQ(r["choices"][0]["text"], full.substr(0, at));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    // A stop string met in a stream: nothing of it is sent.
    EXPECT_EQ(stream_text(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}, {"stop", "Lily"}}),
              full.substr(0, at));
    // The same seed, the same text; sampling at temperature 1.
    const json q = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 1.0}, {"seed", 42}};
    const json a = post(s, "/v1/completions", q), b = post(s, "/v1/completions", q);
    EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
}

// 16 clients x 8 requests each on 4 slots, whole and streamed, while 4 more clients hang up
// mid-stream: every answer is what the same request gets alone, and no slot is left busy.
TEST(Server, SlotsDoNotDependOnTheirNeighbours) {
    server_proc s("-np 4 -c 1024 --threads-http 24");
    REQUIRE_SERVER(s);
    const std::vector<std::string> prompts = {"Once upon a time", "Tom had a red ball", "The sun was hot", "Lily and her mom",
                                              "One day, a bird", "The dog ran", "In the park", "A little cat"};
    std::vector<std::string> alone;
    for (const std::string & p : prompts) {
        alone.push_back(post(s, "/v1/completions", {{"prompt", p}, {"max_tokens", 16}, {"temperature", 0}})["choices"][0]["text"]);
    }
    const size_t n_clients = 16, n_requests = 8;
    std::vector<std::string> got(n_clients * n_requests);
    std::vector<std::thread> th;
    for (size_t c = 0; c < n_clients; c++) {
        th.emplace_back([&, c] {
            for (size_t k = 0; k < n_requests; k++) {
                const size_t i = (c + k * 3) % prompts.size();
                const json q = {{"prompt", prompts[i]}, {"max_tokens", 16}, {"temperature", 0}};
                std::string text = "?";
                if ((c + k) % 2) {
                    bool done = false;
                    text = stream_text(s, "/v1/completions", q, nullptr, &done);
                    if (!done) text = "(no [DONE])";
                } else {
                    const json r = post(s, "/v1/completions", q);
                    if (r.is_object() && r.contains("choices")) text = r["choices"][0]["text"].get<std::string>();
                }
                got[c * n_requests + k] = text;
            }
        });
    }
    for (int h = 0; h < 4; h++) {
        th.emplace_back([&] { hang_up_mid_stream(s, {{"prompt", "Once upon a time"}, {"max_tokens", 300}, {"ignore_eos", true}}); });
    }
    for (auto & t : th) t.join();
    for (size_t c = 0; c < n_clients; c++) {
        for (size_t k = 0; k < n_requests; k++) EXPECT_EQ(got[c * n_requests + k], alone[(c + k * 3) % prompts.size()]) << c << " " << k;
    }
    bool idle = false;
    for (int i = 0; i < 50 && !idle; i++) {
        const json slots = json::parse(s.client().Get("/slots")->body);
        EXPECT_EQ(slots.size(), 4u);
        idle = true;
        for (const json & sl : slots) idle &= !sl["is_processing"].get<bool>();
        if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(idle);
}

TEST(Server, BadRequestsGetOpenAIErrors) {
    server_proc s("-np 2 -c 512");
    REQUIRE_SERVER(s);
    httplib::Client c = s.client();
    const struct {
        const char * path;
        std::string body;
        int status;
        const char * says;
    } cases[] = {
        {"/v1/completions", "{bad json", 400, "not valid JSON"},
        {"/v1/completions", "[1, 2]", 400, "JSON object"},
        {"/v1/completions", R"({"prompt": 5})", 400, "'prompt' must be a string"},
        {"/v1/completions", R"({"prompt": "a", "max_tokens": "ten"})", 400, "'max_tokens' must be an integer"},
        {"/v1/completions", R"({"prompt": "a", "max_tokens": 1000000000})", 400, "past the 2048 tokens a request may generate"},
        {"/v1/completions", R"({"prompt": "a", "temperature": -1})", 400, "'temperature' must be between"},
        {"/v1/completions", R"({"prompt": "a", "frobnicate": 1})", 400, "unrecognized request argument supplied: frobnicate"},
        {"/v1/completions", R"({"prompt": "a", "n": 2})", 400, "'n' other than 1"},
        {"/v1/chat/completions", R"({"messages": []})", 400, "at least one message"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user"}]})", 400, "'content'"},
        {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "x"}]})", 400, "unsupported message role"},
        {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}", 400, "UTF-8"},
        {"/v1/completions", R"({"prompt": "a", "grammar": "root ::= foo"})", 400, "the grammar does not parse"},
        {"/completion", R"({"prompt": "a", "grammar": 5})", 400, "'grammar' must be a string"},
        {"/v1/chat/completions",
         R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a+$"}}}})",
         400, "pattern not supported"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}})", 400,
         "must be text, json_object or json_schema"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "grammar": "root ::= \"a\"", "json_schema": {}})", 400,
         "not several"},
        {"/v1/completions", R"({"prompt": "a", "logit_bias": {"99999": 1}})", 400, "not in [0, 512)"},
        {"/v1/completions", R"({"prompt": "a", "logit_bias": {"the": 1}})", 400, "must be token ids"},
        {"/v1/completions", R"({"prompt": "a", "logit_bias": {"5": 101}})", 400, "between -100 and 100"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400, "needs 'logprobs'"},
        {"/v1/completions", R"({"prompt": "a", "logprobs": 21})", 400, "'logprobs' must be between"},
        {"/v1/completions", R"({"prompt": "a", "stream_options": {"include_usage": 1}})", 400, "'include_usage' must be a boolean"},
        {"/v1/embeddings", R"({"input": "a"})", 400, "start it with --embeddings"},
        {"/v1/nothing", "{}", 404, "no endpoint"},
    };
    for (const auto & k : cases) {
        SCOPED_TRACE(k.body);
        auto r = c.Post(k.path, k.body, "application/json");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, k.status);
        const json j = json::parse(r->body, nullptr, false);
        ASSERT_TRUE(j.is_object()) << r->body;
        ASSERT_TRUE(j.contains("error")) << r->body;
        EXPECT_NE(j["error"]["message"].get<std::string>().find(k.says), std::string::npos) << r->body;
        EXPECT_EQ(j["error"]["code"], k.status);
    }
    // 20 MB: refused before it is read whole.
    auto big = c.Post("/v1/completions", std::string(20u << 20, ' '), "application/json");
    if (big) {
        EXPECT_EQ(big->status, 413);
    }
    // Still serving.
    int st = 0;
    post(s, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}}, &st);
    EXPECT_EQ(st, 200);
}

TEST(Server, ApiKeyIsRequiredButForHealth) {
    server_proc s("-np 1 -c 256 --api-key sekrit");
    REQUIRE_SERVER(s);
    httplib::Client c = s.client();
    EXPECT_EQ(c.Get("/health")->status, 200);
    auto no = c.Get("/v1/models");
    EXPECT_EQ(no->status, 401);
    EXPECT_NE(no->body.find("Invalid API Key"), std::string::npos);
    EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer wrong!"}})->status, 401);
    EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer sekrit"}})->status, 200);
}

// A client that leaves mid-stream frees its slot at the next step.
TEST(Server, ClientLeavingMidStreamFreesItsSlot) {
    server_proc s("-np 1 -c 256");
    REQUIRE_SERVER(s);
    hang_up_mid_stream(s, {{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"temperature", 1}});
    bool freed = false;
    for (int i = 0; i < 50 && !freed; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const json slots = json::parse(s.client().Get("/slots")->body);
        freed = !slots[0]["is_processing"].get<bool>();
    }
    EXPECT_TRUE(freed);
    int st = 0;
    post(s, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}}, &st);
    EXPECT_EQ(st, 200);
}

// The library's log-softmax of the logits after prompt (BOS added): what logprobs must report.
std::vector<float> library_logprobs(const std::string & prompt) {
    llama_model * m = llama_model_load_from_file(model().c_str(), llama_model_default_params());
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    llama_context * ctx = llama_init_from_model(m, cp);
    const llama_vocab * v = llama_model_get_vocab(m);
    std::vector<llama_token> toks = common_tokenize(v, prompt, true, true);
    llama_decode(ctx, llama_batch_get_one(toks.data(), (int32_t) toks.size()));
    const float * l = llama_get_logits_ith(ctx, -1);
    const int n = llama_vocab_n_tokens(v);
    double mx = l[0], sum = 0;
    for (int i = 0; i < n; i++) mx = std::max(mx, (double) l[i]);
    for (int i = 0; i < n; i++) sum += std::exp(l[i] - mx);
    std::vector<float> out((size_t) n);
    for (int i = 0; i < n; i++) out[(size_t) i] = (float) (l[i] - mx - std::log(sum));
    llama_free(ctx);
    llama_model_free(m);
    return out;
}

// Logprobs are the model's log-softmax at each place, the chosen token first among the top ones
// at temperature 0, and the tokens spell the text, in all three shapes.
TEST(Server, LogprobsAreTheModelsLogSoftmax) {
    server_proc s("-np 2 -c 512 --temp 0");
    REQUIRE_SERVER(s);
    const std::string prompt = "Once upon a time";
    const std::vector<float> lp = library_logprobs(prompt);
    const json r = post(s, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 6}, {"logprobs", 3}});
    const json & l = r["choices"][0]["logprobs"];
    ASSERT_EQ(l["tokens"].size(), 6u) << r.dump();
    std::string spelled;
    for (const json & t : l["tokens"]) spelled += t.get<std::string>();
    EXPECT_EQ(spelled, r["choices"][0]["text"].get<std::string>());
    // The first token's: the library's best token and its log-probability.
    size_t best = 0;
    for (size_t i = 1; i < lp.size(); i++) {
        if (lp[i] > lp[best]) best = i;
    }
    EXPECT_NEAR(l["token_logprobs"][0].get<double>(), lp[best], 1e-4);
    EXPECT_EQ(l["top_logprobs"][0].size(), 3u);
    EXPECT_NEAR(l["top_logprobs"][0][l["tokens"][0].get<std::string>()].get<double>(), lp[best], 1e-4);
    EXPECT_EQ(l["text_offset"][1].get<size_t>(), l["tokens"][0].get<std::string>().size());

    const json c = post(s, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 5}, {"logprobs", true}, {"top_logprobs", 2}});
    const json & content = c["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), 5u) << c.dump();
    spelled.clear();
    for (const json & e : content) {
        spelled += e["token"].get<std::string>();
        ASSERT_EQ(e["top_logprobs"].size(), 2u);
        EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
        EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);
        EXPECT_GE(e["top_logprobs"][0]["logprob"].get<double>(), e["top_logprobs"][1]["logprob"].get<double>());
        EXPECT_LE(e["logprob"].get<double>(), 0.0);
    }
    EXPECT_EQ(spelled, c["choices"][0]["message"]["content"].get<std::string>());

    const json k = post(s, "/completion", {{"prompt", prompt}, {"n_predict", 2}, {"n_probs", 2}});
    ASSERT_EQ(k["completion_probabilities"].size(), 2u) << k.dump();
    EXPECT_EQ(k["completion_probabilities"][0]["id"].get<size_t>(), best);
    EXPECT_NEAR(k["completion_probabilities"][0]["logprob"].get<double>(), lp[best], 1e-4);
}

// A grammar, a JSON schema (OpenAI's response_format) and logit_bias shape the text.
TEST(Server, GrammarsSchemasAndBiasesShapeTheText) {
    server_proc s("-np 2 -c 1024");
    REQUIRE_SERVER(s);
    for (int seed = 1; seed <= 4; seed++) {
        const json r = post(s, "/completion", {{"prompt", "Is it a cat?"}, {"grammar", "root ::= (\"yes\" | \"no\") \".\""}, {"seed", seed}, {"temperature", 1.5}});
        const std::string t = r["content"].get<std::string>();
        EXPECT_TRUE(t == "yes." || t == "no.") << t;
        EXPECT_EQ(r["stop_type"], "eos");
    }
    const json schema = {{"type", "object"},
                         {"properties", {{"pet", {{"enum", {"cat", "dog"}}}}, {"happy", {{"type", "boolean"}}}}},
                         {"required", {"pet", "happy"}},
                         {"additionalProperties", false}};
    for (int seed = 1; seed <= 3; seed++) {
        const json r = post(s, "/v1/chat/completions",
                            {{"messages", {{{"role", "user"}, {"content", "Tell me about your pet."}}}},
                             {"seed", seed},
                             {"temperature", 1.0},
                             {"max_tokens", 100},
                             {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "pet"}, {"strict", true}, {"schema", schema}}}}}});
        const json j = json::parse(r["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
        ASSERT_TRUE(j.is_object()) << r.dump();
        EXPECT_EQ(j.size(), 2u);
        EXPECT_TRUE(j["pet"] == "cat" || j["pet"] == "dog") << j.dump();
        EXPECT_TRUE(j["happy"].is_boolean());
        EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    }
    // Banning the greedy first token changes it.
    const json g = post(s, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 1}, {"temperature", 0}, {"n_probs", 1}});
    const std::string first = g["content"].get<std::string>();
    const int id = g["completion_probabilities"][0]["id"].get<int>();
    const json b = post(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"temperature", 0},
                                               {"logit_bias", {{std::to_string(id), -100}}}});
    EXPECT_NE(b["choices"][0]["text"].get<std::string>(), first);
    EXPECT_FALSE(b["choices"][0]["text"].get<std::string>().empty());
}

// A request may outgrow its slot: the slot shifts its context (half of what follows the kept
// prompt dropped), as llama.cpp's server does; without shifts the slot's room bounds it.
TEST(Server, ContextShiftLetsARequestOutgrowItsSlot) {
    {
        server_proc s("-np 1 -c 64 --temp 0");
        REQUIRE_SERVER(s);
        const json r = post(s, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 150}, {"ignore_eos", true}});
        EXPECT_EQ(r["tokens_predicted"], 150) << r.dump();
        EXPECT_EQ(r["truncated"], true);
        EXPECT_EQ(r["stop_type"], "limit");
        // The slot serves on, with the same answer as before for a short request.
        const json a = post(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}});
        EXPECT_EQ(a["choices"][0]["text"].get<std::string>(), greedy("Once upon a time", 8));
    }
    {
        server_proc s("-np 1 -c 64 --temp 0 --no-context-shift");
        REQUIRE_SERVER(s);
        int st = 0;
        const json e = post(s, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 150}}, &st);
        EXPECT_EQ(st, 400);
        EXPECT_NE(e.dump().find("leave of a slot's 64"), std::string::npos) << e.dump();
        const json r = post(s, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", -1}, {"ignore_eos", true}});
        EXPECT_EQ(r["tokens_predicted"].get<int>() + r["tokens_evaluated"].get<int>(), 64) << r.dump();
        EXPECT_EQ(r["truncated"], false);
    }
}

// The library's pooled (mean), L2-normalized embedding of text (BOS added).
std::vector<float> library_embedding(const std::string & text) {
    llama_model * m = llama_model_load_from_file(model().c_str(), llama_model_default_params());
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.embeddings = true;
    cp.pooling_type = LLAMA_POOLING_TYPE_MEAN;
    llama_context * ctx = llama_init_from_model(m, cp);
    const llama_vocab * v = llama_model_get_vocab(m);
    std::vector<llama_token> toks = common_tokenize(v, text, true, true);
    llama_batch b = llama_batch_init((int32_t) toks.size(), 0, 1);
    for (size_t i = 0; i < toks.size(); i++) common_batch_add(b, toks[i], (llama_pos) i, {0}, true);
    llama_decode(ctx, b);
    const int n = llama_model_n_embd(m);
    std::vector<float> out((size_t) n);
    common_embd_normalize(llama_get_embeddings_seq(ctx, 0), out.data(), n, 2);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(m);
    return out;
}

std::vector<float> floats_of_base64(const std::string & s) {
    std::string bytes;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : s) {
        const char * tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char * at = strchr(tbl, c);
        if (c == '=' || !at) break;
        acc = acc << 6 | (uint32_t) (at - tbl);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            bytes += (char) ((acc >> bits) & 0xFF);
        }
    }
    std::vector<float> f(bytes.size() / 4);
    memcpy(f.data(), bytes.data(), f.size() * 4);
    return f;
}

// /v1/embeddings: each input's vector is the library's pooled one, in order, as floats or base64;
// a server that embeds does not generate, and one without pooling does not start.
TEST(Server, EmbeddingsAreTheLibrarysPooledVectors) {
    server_proc s("-np 2 -c 512 --embeddings --pooling mean");
    REQUIRE_SERVER(s);
    const std::vector<std::string> texts = {"Once upon a time", "The cat sat.", "Lily"};
    const json r = post(s, "/v1/embeddings", {{"input", texts}, {"encoding_format", "float"}});
    ASSERT_EQ(r["data"].size(), texts.size()) << r.dump();
    const json b = post(s, "/v1/embeddings", {{"input", texts}, {"encoding_format", "base64"}});
    for (size_t i = 0; i < texts.size(); i++) {
        const std::vector<float> want = library_embedding(texts[i]);
        const std::vector<float> got = r["data"][i]["embedding"].get<std::vector<float>>();
        const std::vector<float> got64 = floats_of_base64(b["data"][i]["embedding"].get<std::string>());
        EXPECT_EQ(r["data"][i]["index"], i);
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(got64.size(), want.size());
        for (size_t k = 0; k < want.size(); k++) {
            EXPECT_NEAR(got[k], want[k], 1e-5) << i << " " << k;
            EXPECT_EQ(got64[k], got[k]);
        }
    }
    EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 6);
    int st = 0;
    const json e = post(s, "/v1/completions", {{"prompt", "a"}}, &st);
    EXPECT_EQ(st, 400);
    EXPECT_NE(e.dump().find("embeddings only"), std::string::npos);
    server_proc none("--embeddings");
    EXPECT_LT(none.port, 0);
    EXPECT_NE(none.log().find("give --pooling mean, cls or last"), std::string::npos) << none.log();
}

// GET /metrics (with --metrics) counts the work in llama.cpp's names.
TEST(Server, MetricsCountTheWork) {
    server_proc s("-np 2 -c 512 --metrics");
    REQUIRE_SERVER(s);
    for (int i = 0; i < 2; i++) post(s, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"ignore_eos", true}});
    auto m = s.client().Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200);
    EXPECT_NE(m->body.find("llamacpp:tokens_predicted_total 10\n"), std::string::npos) << m->body;
    EXPECT_NE(m->body.find("llamacpp:requests_total 2\n"), std::string::npos) << m->body;
    EXPECT_NE(m->body.find("# TYPE llamacpp:kv_cache_usage_ratio gauge"), std::string::npos);
    server_proc off("-np 1 -c 256");
    auto o = off.client().Get("/metrics");
    ASSERT_TRUE(o);
    EXPECT_EQ(o->status, 400);
    EXPECT_NE(o->body.find("--metrics"), std::string::npos);
}

// Connects a raw socket to the server.
int connect_to(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t) port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (sockaddr *) &a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// Clients sending their headers a byte at a time, more of them than the threads kept for
// connections, do not keep the others waiting, and are cut off when their headers are not in
// after -to (2 s here); so is a client that stops sending.
TEST(Server, SlowAndStalledClientsDoNotStallTheOthers) {
    server_proc s("-np 1 -c 256 -to 2 --threads-http 2");
    REQUIRE_SERVER(s);
    std::vector<int> slow;
    for (int i = 0; i < 12; i++) slow.push_back(connect_to(s.port));
    const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
    std::atomic<bool> stop{false};
    std::thread dribble([&] {
        for (size_t k = 0; k < head.size() && !stop; k++) {
            for (int fd : slow) (void) !send(fd, &head[k], 1, MSG_NOSIGNAL);
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
    });
    const int stalled = connect_to(s.port);
    (void) !send(stalled, "GET /health HT", 14, MSG_NOSIGNAL);
    const auto t0 = std::chrono::steady_clock::now();
    int st = 0;
    post(s, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}}, &st);
    EXPECT_EQ(st, 200);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
    // The stalled connection and the slow ones are closed (a read gives 0 or an error) within
    // -to (2 s: the headers' deadline) and a margin, the slow ones while still sending.
    const auto closed_soon = [](int fd) {
        timeval tv{8, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char buf[256];
        const auto t1 = std::chrono::steady_clock::now();
        while (recv(fd, buf, sizeof(buf), 0) > 0) {}
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() < 7.0;
    };
    EXPECT_TRUE(closed_soon(stalled));
    for (int fd : slow) EXPECT_TRUE(closed_soon(fd));
    EXPECT_FALSE(stop.load());  // (the headers were still coming)
    stop = true;
    dribble.join();
    close(stalled);
    for (int fd : slow) close(fd);
}

// -nocb: prompts wait while a slot generates; every answer is still the request's alone.
TEST(Server, WithoutContinuousBatchingAnswersAreTheSame) {
    server_proc s("-np 2 -c 512 --temp 0 -nocb");
    REQUIRE_SERVER(s);
    const std::vector<std::string> prompts = {"Once upon a time", "The cat", "Lily went", "One day"};
    std::vector<std::string> got(prompts.size());
    std::vector<std::thread> th;
    for (size_t i = 0; i < prompts.size(); i++) {
        th.emplace_back([&, i] { got[i] = post(s, "/v1/completions", {{"prompt", prompts[i]}, {"max_tokens", 12}})["choices"][0]["text"].get<std::string>(); });
    }
    for (auto & t : th) t.join();
    for (size_t i = 0; i < prompts.size(); i++) EXPECT_EQ(got[i], greedy(prompts[i], 12)) << prompts[i];
}

}  // namespace
