// llama-server as clients use it, on the smallest model: started on a free port, spoken to over
// HTTP (cpp-httplib's client). Answers against the library's own greedy generation, streamed
// text against the whole, a slot's output independent of its neighbours (16 requests from 8
// clients on 4 slots), stop strings, seeds, bad requests each a 4xx with OpenAI's error object
// (the server serving on), the API key, a client leaving mid-stream freeing its slot.
#include "test-util.h"
#include "common.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
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
        for (int i = 0; i < 300 && port < 0; i++) {  // up to 30 s (sanitizer builds load slowly)
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

// 8 clients x 2 requests each on 4 slots: every answer is what the same request gets alone.
TEST(Server, SlotsDoNotDependOnTheirNeighbours) {
    server_proc s("-np 4 -c 1024");
    REQUIRE_SERVER(s);
    const std::vector<std::string> prompts = {"Once upon a time", "Tom had a red ball", "The sun was hot", "Lily and her mom",
                                              "One day, a bird", "The dog ran", "In the park", "A little cat"};
    std::vector<std::string> alone;
    for (const std::string & p : prompts) {
        alone.push_back(post(s, "/v1/completions", {{"prompt", p}, {"max_tokens", 20}, {"temperature", 0}})["choices"][0]["text"]);
    }
    std::vector<std::string> got(prompts.size() * 2);
    std::vector<std::thread> th;
    for (size_t c = 0; c < prompts.size(); c++) {
        th.emplace_back([&, c] {
            for (int k = 0; k < 2; k++) {
                const size_t i = (c + (size_t) k * 3) % prompts.size();
                const json r = post(s, "/v1/completions", {{"prompt", prompts[i]}, {"max_tokens", 20}, {"temperature", 0}});
                got[c * 2 + (size_t) k] = r.is_object() && r.contains("choices") ? r["choices"][0]["text"].get<std::string>() : "?";
            }
        });
    }
    for (auto & t : th) t.join();
    for (size_t c = 0; c < prompts.size(); c++) {
        for (int k = 0; k < 2; k++) EXPECT_EQ(got[c * 2 + (size_t) k], alone[(c + (size_t) k * 3) % prompts.size()]) << c << " " << k;
    }
    const json slots = json::parse(s.client().Get("/slots")->body);
    ASSERT_EQ(slots.size(), 4u);
    for (const json & sl : slots) EXPECT_FALSE(sl["is_processing"].get<bool>());
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
        {"/v1/completions", R"({"prompt": "a", "max_tokens": 1000000000})", 400, "leave room for"},
        {"/v1/completions", R"({"prompt": "a", "temperature": -1})", 400, "'temperature' must be between"},
        {"/v1/completions", R"({"prompt": "a", "frobnicate": 1})", 400, "unrecognized request argument supplied: frobnicate"},
        {"/v1/completions", R"({"prompt": "a", "n": 2})", 400, "'n' other than 1"},
        {"/v1/chat/completions", R"({"messages": []})", 400, "at least one message"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user"}]})", 400, "'content'"},
        {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "x"}]})", 400, "unsupported message role"},
        {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}", 400, "UTF-8"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})", 400,
         "'response_format' is not supported"},
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
    if (big) EXPECT_EQ(big->status, 413);
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
    {
        httplib::Client c = s.client();
        int chunks = 0;
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.set_header("Content-Type", "application/json");
        req.body = json({{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"stream", true}, {"temperature", 1}}).dump();
        req.content_receiver = [&](const char *, size_t, uint64_t, uint64_t) { return ++chunks < 3; };  // reads a little, then hangs up
        httplib::Response res;
        httplib::Error err;
        c.send(req, res, err);
    }
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

}  // namespace
