// llama-server-bench: a load benchmark for OpenAI-compatible chat servers.
//
//   llama-server-bench --url http://127.0.0.1:8080 [--api-key K] -c CLIENTS -r REQUESTS_PER_CLIENT
//                      [--prompt-tokens 128] [--n-predict 128] [--seed 1] [--json]
//
// What it measures: CLIENTS threads each send REQUESTS_PER_CLIENT streamed chat requests, one after
// another, to POST /v1/chat/completions (stream, temperature 0, max_tokens N, "ignore_eos": true so
// that every request generates exactly N tokens, stream_options.include_usage). It reports the
// throughput a server sustains under that many concurrent clients (requests/s, generated tokens/s
// over the wall time), how fast one request's tokens come (median per-request generation speed)
// and how long a client waits for its first token (TTFT p50/p99), the latency continuous
// batching trades against throughput.
//
// Why this way: the same requests, the same lengths and greedy decoding make two servers (ours and
// llama.cpp's llama-server) on the same model and flags comparable: both do the same work per
// request, so the numbers differ only by how the servers schedule and compute it.
//
// Prompts: each request's user message is a different text of about --prompt-tokens tokens (words
// drawn from a list of 220 by a generator seeded with --seed and the request's number, so two
// texts differ within their first words). Both servers reuse a slot's cached prefix of a prompt
// (llama.cpp's cache_prompt, our longest-prefix slot choice); with texts that differ from the start
// only the chat template's few leading tokens can be reused, so a later request's prompt is not
// free. Lengths are measured with the server's POST /tokenize once,
// before the timed run, and each text is lengthened or shortened by words to come close.
//
// Definitions: TTFT is the time from sending a request to the first server-sent event with a
// non-empty delta.content. A request's generated tokens are usage.completion_tokens of the final
// chunk when the server sends usage, else the number of chunks with content. Its generation
// speed is (tokens - 1) / (time of the chunk with its finish_reason - time of its first content);
// a server that sends several tokens' text in one chunk (one reading a fast model's output
// less often than it is made) makes this an upper bound. Requests/s and
// generated tokens/s count the requests that succeeded over the wall time (from the start of the
// first request to the end of the last). A request that fails (connection, HTTP status, an error
// event, a stream without its end) or does not generate exactly N tokens is an error; with any
// error the program exits with status 1 (2 for bad flags or a server it cannot prepare against).
//
// It needs only cpp-httplib and nlohmann-json (no llama libraries).
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using json = nlohmann::ordered_json;
using bench_clock = std::chrono::steady_clock;

namespace {

struct options {
    std::string url;
    std::string api_key;
    std::string model;        // sent as "model" when given
    int clients = 0;
    int requests = 0;         // per client
    int prompt_tokens = 128;
    int n_predict = 128;
    uint64_t seed = 1;
    int warmup = 1;           // untimed requests before the run
    int timeout_s = 600;      // read timeout of a request
    bool ignore_eos = true;
    bool json_out = false;
};

[[noreturn]] void usage_error(const std::string & msg) {
    fprintf(stderr, "llama-server-bench: %s (see --help)\n", msg.c_str());
    exit(2);
}

void print_help() {
    printf(
        "usage: llama-server-bench --url URL -c CLIENTS -r REQUESTS_PER_CLIENT [options]\n"
        "\n"
        "Load benchmark for an OpenAI-compatible server: CLIENTS threads each send REQUESTS_PER_CLIENT\n"
        "streamed chat requests (POST /v1/chat/completions, temperature 0, ignore_eos) one after another.\n"
        "\n"
        "  --url URL               the server, http://HOST:PORT[/BASE] (required)\n"
        "  --api-key K             sent as 'Authorization: Bearer K'\n"
        "  -c, --clients N         concurrent clients (required, 1..1024)\n"
        "  -r, --requests N        requests per client (required, >= 1)\n"
        "  --prompt-tokens N       tokens of each request's user message, about (default 128)\n"
        "  --n-predict N           tokens to generate per request, max_tokens (default 128)\n"
        "  --seed N                seed of the prompt texts (default 1)\n"
        "  --warmup N              untimed short requests before the run (default 1)\n"
        "  --model NAME            sent as the request's 'model' (default: none sent)\n"
        "  --timeout S             a request's read timeout in seconds (default 600)\n"
        "  --no-ignore-eos         do not send \"ignore_eos\": true (for a server that refuses it;\n"
        "                          a request that ends early is then an error)\n"
        "  --json                  one JSON line instead of the table\n"
        "  -h, --help              this text\n"
        "\n"
        "Exit status: 0 all requests generated N tokens, 1 some failed, 2 bad flags or setup failure.\n");
}

long long parse_int(const std::string & flag, const char * s, long long lo, long long hi) {
    if (s == nullptr) usage_error(flag + " needs a value");
    errno = 0;
    char * end = nullptr;
    const long long v = strtoll(s, &end, 10);
    if (*s == '\0' || end == nullptr || *end != '\0' || errno != 0) usage_error(flag + ": '" + s + "' is not an integer");
    if (v < lo || v > hi) usage_error(flag + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", not " + s);
    return v;
}

options parse_args(int argc, char ** argv) {
    options o;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc) usage_error(a + " needs a value");
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            print_help();
            exit(0);
        } else if (a == "--url") {
            o.url = value();
        } else if (a == "--api-key") {
            o.api_key = value();
        } else if (a == "--model") {
            o.model = value();
        } else if (a == "-c" || a == "--clients") {
            o.clients = (int) parse_int(a, value(), 1, 1024);
        } else if (a == "-r" || a == "--requests") {
            o.requests = (int) parse_int(a, value(), 1, 1000000);
        } else if (a == "--prompt-tokens") {
            o.prompt_tokens = (int) parse_int(a, value(), 1, 1000000);
        } else if (a == "--n-predict") {
            o.n_predict = (int) parse_int(a, value(), 1, 1000000);
        } else if (a == "--seed") {
            o.seed = (uint64_t) parse_int(a, value(), 0, INT64_MAX);
        } else if (a == "--warmup") {
            o.warmup = (int) parse_int(a, value(), 0, 1000);
        } else if (a == "--timeout") {
            o.timeout_s = (int) parse_int(a, value(), 1, 86400);
        } else if (a == "--no-ignore-eos") {
            o.ignore_eos = false;
        } else if (a == "--json") {
            o.json_out = true;
        } else {
            usage_error("unknown argument '" + a + "'");
        }
    }
    if (o.url.empty()) usage_error("--url is required");
    if (o.clients == 0) usage_error("-c CLIENTS is required");
    if (o.requests == 0) usage_error("-r REQUESTS_PER_CLIENT is required");
    return o;
}

// http://HOST:PORT[/BASE] -> "http://HOST:PORT" for httplib and BASE for the paths.
struct endpoint {
    std::string scheme_host_port;
    std::string base;
};

endpoint parse_url(const std::string & url) {
    const std::string scheme = "http://";
    if (url.compare(0, 8, "https://") == 0) usage_error("--url: https is not supported; use http://");
    if (url.compare(0, scheme.size(), scheme) != 0) usage_error("--url must start with http:// (got '" + url + "')");
    const size_t slash = url.find('/', scheme.size());
    endpoint e;
    e.scheme_host_port = url.substr(0, slash);
    if (e.scheme_host_port.size() == scheme.size()) usage_error("--url has no host: '" + url + "'");
    if (slash != std::string::npos) e.base = url.substr(slash);
    while (!e.base.empty() && e.base.back() == '/') e.base.pop_back();
    return e;
}

std::unique_ptr<httplib::Client> make_client(const endpoint & ep, const options & o) {
    auto cli = std::make_unique<httplib::Client>(ep.scheme_host_port);
    if (!cli->is_valid()) usage_error("--url: cannot use '" + ep.scheme_host_port + "'");
    // A new connection per request: llama.cpp's server (b4747, cpp-httplib 0.19) closes the
    // connection after each streamed answer without saying so ("Connection: close"), and a next
    // request sent on it before its close arrives fails with a read error. A localhost connect
    // costs far less than a millisecond of the TTFT.
    cli->set_keep_alive(false);
    cli->set_connection_timeout(10, 0);
    cli->set_read_timeout(o.timeout_s, 0);
    cli->set_write_timeout(60, 0);
    if (!o.api_key.empty()) cli->set_default_headers({{"Authorization", "Bearer " + o.api_key}});
    return cli;
}

// ---- prompts ----------------------------------------------------------------------------------

const char * const kWords[] = {
    "time",    "year",    "people",  "way",     "day",     "man",     "thing",   "woman",   "life",    "child",   "world",
    "school",  "state",   "family",  "student", "group",   "country", "problem", "hand",    "part",    "place",   "case",
    "week",    "company", "system",  "program", "question", "work",   "number",  "night",   "point",   "home",    "water",
    "room",    "mother",  "area",    "money",   "story",   "fact",    "month",   "lot",     "right",   "study",   "book",
    "eye",     "job",     "word",    "business", "issue",  "side",    "kind",    "head",    "house",   "service", "friend",
    "father",  "power",   "hour",    "game",    "line",    "end",     "member",  "law",     "car",     "city",    "name",
    "team",    "minute",  "idea",    "kid",     "body",    "back",    "parent",  "face",    "others",  "level",   "office",
    "door",    "health",  "person",  "art",     "war",     "history", "party",   "result",  "change",  "morning", "reason",
    "research", "girl",   "guy",     "moment",  "air",     "teacher", "force",   "education", "river", "garden",  "forest",
    "small",   "large",   "early",   "young",   "important", "few",   "public",  "bad",     "same",    "able",    "green",
    "quiet",   "bright",  "cold",    "warm",    "happy",   "old",     "new",     "long",    "great",   "little",  "own",
    "other",   "true",    "big",     "high",    "different", "next",  "last",    "good",    "best",    "late",    "hard",
    "walk",    "run",     "build",   "write",   "read",    "open",    "close",   "carry",   "bring",   "follow",  "learn",
    "watch",   "listen",  "speak",   "think",   "find",    "give",    "tell",    "call",    "try",     "leave",   "feel",
    "become",  "keep",    "begin",   "seem",    "help",    "show",    "hear",    "play",    "move",    "live",    "believe",
    "and",     "the",     "of",      "to",      "in",      "with",    "on",      "for",     "from",    "over",    "under",
    "after",   "before",  "while",   "because", "about",   "around",  "between", "through", "during",  "without", "again",
    "apple",   "bread",   "candle",  "dragon",  "engine",  "feather", "glacier", "harbor",  "island",  "jacket",  "kettle",
    "lantern", "meadow",  "needle",  "orchard", "pebble",  "quilt",   "ribbon",  "saddle",  "thunder", "umbrella", "violin",
    "window",  "yellow",  "zebra",   "silver",  "copper",  "marble",  "velvet",  "canyon",  "valley",  "village", "bridge",
};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t splitmix64(uint64_t & s) { return mix64(s += 0x9E3779B97F4A7C15ull); }

// The words of request k's text: sentences of 6..15 words, capitalized, ending with a period.
std::vector<std::string> text_words(uint64_t seed, uint64_t k, size_t n) {
    // A hashed start per (seed, k): starts a multiple of splitmix's step apart would give the same
    // words shifted.
    uint64_t s = mix64(mix64(seed + 0x243F6A8885A308D3ull) ^ (k + 1));
    std::vector<std::string> w;
    w.reserve(n);
    size_t left_in_sentence = 0;
    for (size_t i = 0; i < n; i++) {
        std::string word = kWords[splitmix64(s) % kNumWords];
        if (left_in_sentence == 0) {
            word[0] = (char) toupper((unsigned char) word[0]);
            left_in_sentence = 6 + splitmix64(s) % 10;
        }
        if (--left_in_sentence == 0 || i + 1 == n) word += ".";
        w.push_back(word);
    }
    return w;
}

std::string join_words(const std::vector<std::string> & w, size_t n) {
    std::string t;
    for (size_t i = 0; i < n && i < w.size(); i++) {
        if (i) t += ' ';
        t += w[i];
    }
    return t;
}

std::string http_error_text(const httplib::Result & r) {
    if (!r) return "HTTP error: " + httplib::to_string(r.error());
    std::string body = r->body.substr(0, 300);
    return "HTTP " + std::to_string(r->status) + ": " + body;
}

// Tokens of text by the server's POST /tokenize; throws with the reason.
int count_tokens(httplib::Client & cli, const endpoint & ep, const std::string & text) {
    const json body = {{"content", text}};
    auto r = cli.Post((ep.base + "/tokenize").c_str(), body.dump(), "application/json");
    if (!r || r->status != 200) throw std::runtime_error("POST " + ep.scheme_host_port + ep.base + "/tokenize failed: " + http_error_text(r));
    json j;
    try {
        j = json::parse(r->body);
    } catch (const std::exception & e) {
        throw std::runtime_error(std::string("POST /tokenize: the answer is not JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) throw std::runtime_error("POST /tokenize: no 'tokens' array in " + r->body.substr(0, 200));
    return (int) j["tokens"].size();
}

struct prompt_text {
    std::string text;
    int n_tokens;
};

// Request k's text of about target tokens: a start from the measured tokens per word, then up to
// six corrections by words; the closest found.
prompt_text make_prompt(httplib::Client & cli, const endpoint & ep, uint64_t seed, uint64_t k, int target, double tok_per_word) {
    const size_t max_words = (size_t) target * 2 + 16;  // a word is at least one token
    const std::vector<std::string> words = text_words(seed, k, max_words);
    size_t n = std::max<size_t>(1, std::min(max_words, (size_t) std::lround(target / tok_per_word)));
    prompt_text best{"", -1};
    for (int it = 0; it < 7; it++) {
        const std::string t = join_words(words, n);
        const int c = count_tokens(cli, ep, t);
        if (best.n_tokens < 0 || std::abs(c - target) < std::abs(best.n_tokens - target)) best = {t, c};
        if (c == target) break;
        long step = std::lround((target - c) / tok_per_word);
        if (step == 0) step = c < target ? 1 : -1;
        const long next = std::max<long>(1, std::min<long>((long) max_words, (long) n + step));
        if ((size_t) next == n) break;
        n = (size_t) next;
    }
    return best;
}

// ---- one streamed request -----------------------------------------------------------------------

struct request_result {
    bool ok = false;
    std::string error;
    double ttft_ms = -1;
    double total_ms = 0;
    double gen_speed = -1;  // tokens/s after the first, -1 when not measurable
    int n_gen = 0;          // usage.completion_tokens, or the content chunks
    int n_prompt = -1;      // usage.prompt_tokens, -1 when not sent
    int n_text = 0;         // tokens of the user message by /tokenize
};

std::string request_body(const options & o, const std::string & text, int n_predict) {
    json b = {
        {"messages", json::array({json{{"role", "user"}, {"content", text}}})},
        {"stream", true},
        {"stream_options", {{"include_usage", true}}},
        {"max_tokens", n_predict},
        {"temperature", 0},
    };
    if (o.ignore_eos) b["ignore_eos"] = true;
    if (!o.model.empty()) b["model"] = o.model;
    return b.dump();
}

request_result run_request(httplib::Client & cli, const endpoint & ep, const options & o, const std::string & text, int n_predict) {
    request_result rr;
    std::string buf;            // the stream's bytes not yet split into lines
    std::string error_body;     // the body of an answer that is not 200
    int status = 0;
    int n_content_chunks = 0;
    int usage_completion = -1;
    bool finished = false;      // a chunk with a finish_reason, or [DONE]
    bool done_marker = false;
    std::string stream_error;
    bench_clock::time_point t_first, t_last;
    bool have_first = false;

    auto on_data = [&](const std::string & payload) {
        if (payload == "[DONE]") {
            done_marker = true;
            return;
        }
        json j;
        try {
            j = json::parse(payload);
        } catch (const std::exception &) {
            if (stream_error.empty()) stream_error = "a chunk is not JSON: " + payload.substr(0, 200);
            return;
        }
        std::vector<json> items;
        if (j.is_array()) {
            for (auto & e : j) items.push_back(e);
        } else {
            items.push_back(j);
        }
        for (const json & c : items) {
            if (!c.is_object()) continue;
            if (c.contains("error")) {
                if (stream_error.empty()) stream_error = "error chunk: " + c["error"].dump().substr(0, 300);
                continue;
            }
            if (c.contains("usage") && c["usage"].is_object()) {
                const json & u = c["usage"];
                if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) usage_completion = u["completion_tokens"].get<int>();
                if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) rr.n_prompt = u["prompt_tokens"].get<int>();
            }
            if (!c.contains("choices") || !c["choices"].is_array()) continue;
            for (const json & ch : c["choices"]) {
                if (!ch.is_object()) continue;
                if (ch.contains("delta") && ch["delta"].is_object() && ch["delta"].contains("content") && ch["delta"]["content"].is_string() &&
                    !ch["delta"]["content"].get_ref<const std::string &>().empty()) {
                    const auto now = bench_clock::now();
                    if (!have_first) {
                        t_first = now;
                        have_first = true;
                    }
                    t_last = now;
                    n_content_chunks++;
                }
                if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) {
                    finished = true;
                    if (have_first) t_last = bench_clock::now();
                }
            }
        }
    };
    auto on_line = [&](std::string line) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == ':') return;  // event separator, comment
        if (line.compare(0, 5, "data:") == 0) {
            size_t p = 5;
            if (p < line.size() && line[p] == ' ') p++;
            on_data(line.substr(p));
        } else if (line.compare(0, 6, "error:") == 0) {
            if (stream_error.empty()) stream_error = "error event: " + line.substr(6, 300);
        }
    };

    httplib::Request req;
    req.method = "POST";
    req.path = ep.base + "/v1/chat/completions";
    req.body = request_body(o, text, n_predict);
    req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "text/event-stream");
    req.response_handler = [&](const httplib::Response & res) {
        status = res.status;
        return true;
    };
    req.content_receiver = [&](const char * data, size_t n, uint64_t, uint64_t) {
        if (status != 200) {
            if (error_body.size() < 4096) error_body.append(data, n);
            return true;
        }
        buf.append(data, n);
        size_t start = 0, nl;
        while ((nl = buf.find('\n', start)) != std::string::npos) {
            on_line(buf.substr(start, nl - start));
            start = nl + 1;
        }
        buf.erase(0, start);
        return true;
    };

    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    const auto t0 = bench_clock::now();
    const bool sent = cli.send(req, res, err);
    const auto t1 = bench_clock::now();
    rr.total_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    if (!buf.empty()) on_line(buf);

    if (!sent) {
        rr.error = "HTTP error: " + httplib::to_string(err);
        return rr;
    }
    if (status != 200) {
        rr.error = "HTTP " + std::to_string(status) + ": " + error_body.substr(0, 400);
        return rr;
    }
    if (!stream_error.empty()) {
        rr.error = stream_error;
        return rr;
    }
    if (!finished && !done_marker) {
        rr.error = "the stream ended without a finish_reason or [DONE]";
        return rr;
    }
    rr.n_gen = usage_completion >= 0 ? usage_completion : n_content_chunks;
    if (have_first) {
        rr.ttft_ms = std::chrono::duration<double, std::milli>(t_first - t0).count();
        const double span = std::chrono::duration<double>(t_last - t_first).count();
        if (rr.n_gen >= 2 && span > 0) rr.gen_speed = (rr.n_gen - 1) / span;
    }
    if (rr.n_gen != n_predict) {
        rr.error = "generated " + std::to_string(rr.n_gen) + " tokens, not " + std::to_string(n_predict) +
                   (o.ignore_eos ? "" : " (the request was sent without ignore_eos)");
        return rr;
    }
    if (!have_first) {
        rr.error = "no chunk with content";
        return rr;
    }
    rr.ok = true;
    return rr;
}

// ---- statistics ---------------------------------------------------------------------------------

// Linear interpolation between closest ranks (numpy's default); NaN for no values.
double percentile(std::vector<double> v, double p) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const double pos = p / 100.0 * (double) (v.size() - 1);
    const size_t lo = (size_t) std::floor(pos), hi = (size_t) std::ceil(pos);
    return v[lo] + (v[hi] - v[lo]) * (pos - (double) lo);
}

json num(double x) { return std::isfinite(x) ? json(std::round(x * 1000.0) / 1000.0) : json(nullptr); }

}  // namespace

int main(int argc, char ** argv) {
    const options o = parse_args(argc, argv);
    const endpoint ep = parse_url(o.url);
    const int total = o.clients * o.requests;

    // The prompts, before the timed run.
    std::vector<prompt_text> prompts;
    prompt_text warm_prompt;
    try {
        auto cli = make_client(ep, o);
        const std::string sample = join_words(text_words(o.seed ^ 0x5A5A5A5Aull, 0, 400), 400);
        const double tok_per_word = std::max(0.5, count_tokens(*cli, ep, sample) / 400.0);
        prompts.reserve(total);
        for (int k = 0; k < total; k++) prompts.push_back(make_prompt(*cli, ep, o.seed, (uint64_t) k, o.prompt_tokens, tok_per_word));
        warm_prompt = make_prompt(*cli, ep, o.seed + 0x77777777ull, 0, std::min(o.prompt_tokens, 32), tok_per_word);
        for (int i = 0; i < o.warmup; i++) {
            const request_result w = run_request(*cli, ep, o, warm_prompt.text, std::min(o.n_predict, 8));
            if (!w.ok) throw std::runtime_error("the warm-up request failed: " + w.error);
        }
    } catch (const std::exception & e) {
        fprintf(stderr, "llama-server-bench: %s\n", e.what());
        return 2;
    }

    std::vector<request_result> results(total);
    std::mutex m;
    std::condition_variable cv;
    bool go = false;
    std::vector<std::thread> threads;
    for (int c = 0; c < o.clients; c++) {
        threads.emplace_back([&, c] {
            auto cli = make_client(ep, o);
            {
                std::unique_lock<std::mutex> lk(m);
                cv.wait(lk, [&] { return go; });
            }
            for (int i = 0; i < o.requests; i++) {
                const int k = c * o.requests + i;
                results[k] = run_request(*cli, ep, o, prompts[k].text, o.n_predict);
                results[k].n_text = prompts[k].n_tokens;
            }
        });
    }
    const auto t_start = bench_clock::now();
    {
        std::lock_guard<std::mutex> lk(m);
        go = true;
    }
    cv.notify_all();
    for (auto & t : threads) t.join();
    const double wall_s = std::chrono::duration<double>(bench_clock::now() - t_start).count();

    int errors = 0;
    long long gen_tokens = 0;
    std::vector<double> ttft, speed;
    double sum_prompt = 0, sum_text = 0;
    int n_prompt_known = 0;
    for (const request_result & r : results) {
        sum_text += r.n_text;
        if (!r.ok) {
            if (errors < 5) fprintf(stderr, "llama-server-bench: request failed: %s\n", r.error.c_str());
            errors++;
            continue;
        }
        gen_tokens += r.n_gen;
        ttft.push_back(r.ttft_ms);
        if (r.gen_speed > 0) speed.push_back(r.gen_speed);
        if (r.n_prompt >= 0) {
            sum_prompt += r.n_prompt;
            n_prompt_known++;
        }
    }
    if (errors > 5) fprintf(stderr, "llama-server-bench: ... %d failed requests in all\n", errors);
    const int ok = total - errors;
    const double rps = ok / wall_s, tps = (double) gen_tokens / wall_s;
    const double speed_med = percentile(speed, 50), ttft50 = percentile(ttft, 50), ttft99 = percentile(ttft, 99);
    const double mean_text = total ? sum_text / total : NAN;
    const double mean_prompt = n_prompt_known ? sum_prompt / n_prompt_known : NAN;  // the server's count, with the chat template

    if (o.json_out) {
        const json j = {
            {"url", o.url},
            {"clients", o.clients},
            {"requests_per_client", o.requests},
            {"requests", total},
            {"errors", errors},
            {"n_predict", o.n_predict},
            {"wall_s", num(wall_s)},
            {"req_per_s", num(rps)},
            {"gen_tok_per_s", num(tps)},
            {"gen_speed_median", num(speed_med)},
            {"ttft_p50_ms", num(ttft50)},
            {"ttft_p99_ms", num(ttft99)},
            {"prompt_tokens_mean", num(mean_prompt)},
            {"text_tokens_mean", num(mean_text)},
        };
        printf("%s\n", j.dump().c_str());
    } else {
        printf("server                       %s\n", o.url.c_str());
        printf("clients x requests           %d x %d\n", o.clients, o.requests);
        printf("requests                     %d\n", total);
        printf("errors                       %d\n", errors);
        printf("wall time                    %.2f s\n", wall_s);
        printf("requests/s                   %.3f\n", rps);
        printf("generated tokens/s           %.2f  (%lld tokens, %d per request)\n", tps, gen_tokens, o.n_predict);
        printf("per-request gen. median      %.2f tokens/s\n", speed_med);
        printf("TTFT p50                     %.1f ms\n", ttft50);
        printf("TTFT p99                     %.1f ms\n", ttft99);
        printf("prompt tokens, mean          %.1f  (the server's usage, chat template included; message text %.1f)\n", mean_prompt, mean_text);
    }
    fflush(stdout);
    return errors ? 1 : 0;
}
