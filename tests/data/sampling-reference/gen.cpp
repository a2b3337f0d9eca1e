// gen.cpp - writes the sampler reference files of tests/data/sampling-reference/ from llama.cpp
// (build 4747): each case is a candidate array, a sampler chain and a list of operations (apply,
// accept, sample, reset, clone, seed); the file holds the case and what llama.cpp produced, and
// tests/llama/test-samplers.cpp replays it on this engine's samplers.
//
// Built and run against llama.cpp's shared library (not part of this repository's build):
//   g++ -O1 -std=c++17 -I$LCPP/include -I$LCPP/ggml/include gen.cpp -o gen \
//       -L$LCPP/build/bin -lllama -Wl,-rpath,$LCPP/build/bin
//   ./gen /path/to/stories260K.gguf tests/data/sampling-reference
//
// File format (one item a line, floats as %.9g so they read back exactly):
//   case NAME | vocab (the case needs stories260K's vocabulary) | input N id logit ... |
//   sampler SPEC | op apply|sample|accept T...|reset|clone|seed | result SIZE SELECTED then SIZE
//   lines "id logit p" | seed S | end
#include "llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

FILE * out = nullptr;
const llama_vocab * vocab = nullptr;

std::string fmt(float f) {
    char b[64];
    snprintf(b, sizeof b, "%.9g", f);
    return b;
}

std::string hex(const std::string & s) {
    std::string h;
    char b[4];
    for (unsigned char c : s) {
        snprintf(b, sizeof b, "%02x", c);
        h += b;
    }
    return h.empty() ? "-" : h;
}

// A deterministic generator (the same numbers on every platform).
struct lcg {
    uint64_t s;
    explicit lcg(uint64_t seed) : s(seed * 6364136223846793005ULL + 1442695040888963407ULL) {}
    uint32_t next() {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return (uint32_t) (s >> 33);
    }
    // logits on a 1/64 grid in [lo, hi)
    float logit(float lo, float hi) { return lo + (float) (next() % (uint32_t) ((hi - lo) * 64)) / 64.0f; }
};

struct input {
    std::vector<llama_token_data> d;
};

input ids_logits(const std::vector<llama_token> & ids, const std::vector<float> & logits) {
    input in;
    for (size_t i = 0; i < ids.size(); i++) in.d.push_back({ids[i], logits[i], 0.0f});
    return in;
}

input seq_logits(const std::vector<float> & logits) {
    std::vector<llama_token> ids;
    for (size_t i = 0; i < logits.size(); i++) ids.push_back((llama_token) i);
    return ids_logits(ids, logits);
}

input random_input(uint64_t seed, int n, float lo, float hi) {
    lcg r(seed);
    std::vector<float> l;
    for (int i = 0; i < n; i++) l.push_back(r.logit(lo, hi) + (float) i / 4096.0f);  // no ties (see dry_input)
    return seq_logits(l);
}

struct kase {
    llama_sampler * chain;
    input in;
    kase(const char * name, const input & in_, bool needs_vocab = false) : in(in_) {
        chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
        fprintf(out, "case %s\n", name);
        if (needs_vocab) fprintf(out, "vocab\n");
        fprintf(out, "input %zu", in.d.size());
        for (const auto & d : in.d) fprintf(out, " %d %s", d.id, fmt(d.logit).c_str());
        fprintf(out, "\n");
    }
    ~kase() {
        fprintf(out, "end\n");
        llama_sampler_free(chain);
    }
    kase & add(llama_sampler * s, const std::string & spec) {
        llama_sampler_chain_add(chain, s);
        fprintf(out, "sampler %s\n", spec.c_str());
        return *this;
    }
    // ---- samplers, each written as its spec ----
    kase & typical(float p, size_t mk) { return add(llama_sampler_init_typical(p, mk), "typical " + fmt(p) + " " + std::to_string(mk)); }
    kase & temp_ext(float t, float d, float e) {
        return add(llama_sampler_init_temp_ext(t, d, e), "temp_ext " + fmt(t) + " " + fmt(d) + " " + fmt(e));
    }
    kase & xtc(float p, float t, size_t mk, uint32_t seed) {
        return add(llama_sampler_init_xtc(p, t, mk, seed), "xtc " + fmt(p) + " " + fmt(t) + " " + std::to_string(mk) + " " + std::to_string(seed));
    }
    kase & top_n_sigma(float n) { return add(llama_sampler_init_top_n_sigma(n), "top_n_sigma " + fmt(n)); }
    kase & dry(float mult, float base, int32_t allowed, int32_t last_n, int32_t n_ctx, const std::vector<std::string> & br) {
        std::vector<const char *> c;
        std::string spec = "dry " + fmt(mult) + " " + fmt(base) + " " + std::to_string(allowed) + " " + std::to_string(last_n) + " " +
                           std::to_string(n_ctx) + " " + std::to_string(br.size());
        for (const auto & b : br) {
            c.push_back(b.c_str());
            spec += " " + hex(b);
        }
        return add(llama_sampler_init_dry(vocab, n_ctx, mult, base, allowed, last_n, c.data(), c.size()), spec);
    }
    kase & infill() { return add(llama_sampler_init_infill(vocab), "infill"); }
    kase & top_k(int32_t k) { return add(llama_sampler_init_top_k(k), "top_k " + std::to_string(k)); }
    kase & top_p(float p, size_t mk) { return add(llama_sampler_init_top_p(p, mk), "top_p " + fmt(p) + " " + std::to_string(mk)); }
    kase & min_p(float p, size_t mk) { return add(llama_sampler_init_min_p(p, mk), "min_p " + fmt(p) + " " + std::to_string(mk)); }
    kase & temp(float t) { return add(llama_sampler_init_temp(t), "temp " + fmt(t)); }
    kase & dist(uint32_t seed) { return add(llama_sampler_init_dist(seed), "dist " + std::to_string(seed)); }
    kase & penalties(int32_t n, float r, float f, float p) {
        return add(llama_sampler_init_penalties(n, r, f, p), "penalties " + std::to_string(n) + " " + fmt(r) + " " + fmt(f) + " " + fmt(p));
    }
    kase & logit_bias(int32_t n_vocab, const std::vector<llama_logit_bias> & b) {
        std::string spec = "logit_bias " + std::to_string(n_vocab) + " " + std::to_string(b.size());
        for (const auto & x : b) spec += " " + std::to_string(x.token) + " " + fmt(x.bias);
        return add(llama_sampler_init_logit_bias(n_vocab, (int32_t) b.size(), b.data()), spec);
    }
    // ---- operations ----
    llama_token apply() {
        fprintf(out, "op apply\n");
        return run();
    }
    llama_token run() {
        std::vector<llama_token_data> d = in.d;
        llama_token_data_array cur = {d.data(), d.size(), -1, false};
        llama_sampler_apply(chain, &cur);
        fprintf(out, "result %zu %lld\n", cur.size, (long long) cur.selected);
        for (size_t i = 0; i < cur.size; i++) {
            fprintf(out, "%d %s %s\n", cur.data[i].id, fmt(cur.data[i].logit).c_str(), fmt(cur.data[i].p).c_str());
        }
        return cur.selected >= 0 && (size_t) cur.selected < cur.size ? cur.data[cur.selected].id : -1;
    }
    // apply, then accept the selected token (what llama_sampler_sample does)
    void sample(int n = 1) {
        for (int i = 0; i < n; i++) {
            fprintf(out, "op sample\n");
            const llama_token t = run();
            if (t >= 0) llama_sampler_accept(chain, t);
        }
    }
    void accept(const std::vector<llama_token> & toks) {
        fprintf(out, "op accept");
        for (llama_token t : toks) {
            fprintf(out, " %d", t);
            llama_sampler_accept(chain, t);
        }
        fprintf(out, "\n");
    }
    void reset() {
        fprintf(out, "op reset\n");
        llama_sampler_reset(chain);
    }
    void clone() {
        fprintf(out, "op clone\n");
        llama_sampler * c = llama_sampler_clone(chain);
        llama_sampler_free(chain);
        chain = c;
    }
    void seed() {
        fprintf(out, "op seed\n");
        fprintf(out, "seed %u\n", llama_sampler_get_seed(chain));
    }
};

FILE * open_out(const std::string & dir, const char * name) {
    const std::string path = dir + "/" + name;
    FILE * f = fopen(path.c_str(), "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path.c_str());
        exit(1);
    }
    fprintf(f, "# llama.cpp build 4747 sampler outputs, written by gen.cpp (see its header); read by tests/llama/test-samplers.cpp\n");
    return f;
}

const std::vector<float> BASIC = {1.5f, -0.25f, 3.0f, 0.5f, 2.25f, -1.0f, 0.0f, 2.75f, 1.0f, -2.5f};
const std::vector<float> TIES = {1.0f, 2.0f, 1.0f, 2.0f, 0.5f, 1.0f, 0.5f, 2.0f};
const std::vector<float> FLAT = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
const std::vector<float> PEAKED = {0.0f, 12.0f, 0.5f, -1.0f, 1.0f, 0.25f};
const std::vector<float> WITH_INF = {1.0f, -INFINITY, 2.0f, 0.5f, -INFINITY, 1.5f, 0.0f};

void gen_typical(const std::string & dir) {
    out = open_out(dir, "typical.txt");
    const float ps[] = {0.2f, 0.5f, 0.9f, 1.0f};
    const size_t mks[] = {0, 1, 3};
    for (float p : ps) {
        for (size_t mk : mks) {
            const std::string n = "typical-basic-p" + fmt(p) + "-mk" + std::to_string(mk);
            kase(n.c_str(), seq_logits(BASIC)).typical(p, mk).apply();
        }
    }
    kase("typical-ties", seq_logits(TIES)).typical(0.5f, 1).apply();
    kase("typical-flat", seq_logits(FLAT)).typical(0.3f, 1).apply();
    kase("typical-peaked", seq_logits(PEAKED)).typical(0.5f, 1).apply();
    kase("typical-inf", seq_logits(WITH_INF)).typical(0.6f, 1).apply();
    kase("typical-random32", random_input(1, 32, -4, 4)).typical(0.7f, 2).apply();
    kase("typical-single", seq_logits({0.3f})).typical(0.5f, 1).apply();
    kase("typical-mk-large", seq_logits(BASIC)).typical(0.1f, 8).apply();
    fclose(out);
}

void gen_temp_ext(const std::string & dir) {
    out = open_out(dir, "temp_ext.txt");
    struct { float t, d, e; } ps[] = {{0.8f, 0.0f, 1.0f}, {0.8f, 0.5f, 1.0f}, {1.5f, 0.5f, 2.0f}, {0.3f, 1.0f, 0.5f},
                                      {0.0f, 0.0f, 1.0f}, {0.0f, 0.5f, 1.0f}, {1.0f, -1.0f, 1.0f}, {2.0f, 1.5f, 1.0f}};
    int i = 0;
    for (auto p : ps) {
        const std::string n = "temp_ext-" + std::to_string(i++);
        kase((n + "-basic").c_str(), seq_logits(BASIC)).temp_ext(p.t, p.d, p.e).apply();
        kase((n + "-random16").c_str(), random_input(2 + i, 16, -6, 6)).temp_ext(p.t, p.d, p.e).apply();
    }
    kase("temp_ext-ties", seq_logits(TIES)).temp_ext(1.0f, 0.5f, 1.0f).apply();
    kase("temp_ext-ties-t0", seq_logits(TIES)).temp_ext(0.0f, 0.0f, 1.0f).apply();
    kase("temp_ext-flat", seq_logits(FLAT)).temp_ext(1.0f, 0.5f, 1.0f).apply();
    kase("temp_ext-inf", seq_logits(WITH_INF)).temp_ext(1.0f, 0.5f, 1.0f).apply();
    kase("temp_ext-single", seq_logits({0.3f})).temp_ext(1.0f, 0.5f, 1.0f).apply();
    kase("temp_ext-peaked", seq_logits(PEAKED)).temp_ext(0.7f, 0.7f, 1.0f).apply();
    fclose(out);
}

void gen_xtc(const std::string & dir) {
    out = open_out(dir, "xtc.txt");
    {
        kase k("xtc-p05-t01", seq_logits(BASIC));
        k.xtc(0.5f, 0.1f, 1, 1234);
        k.seed();
        for (int i = 0; i < 10; i++) k.apply();
        k.reset();
        k.seed();
        for (int i = 0; i < 4; i++) k.apply();
        k.clone();
        for (int i = 0; i < 4; i++) k.apply();
    }
    {
        kase k("xtc-p1-t005-random32", random_input(7, 32, -3, 3));
        k.xtc(1.0f, 0.05f, 1, 42);
        k.apply();
    }
    {
        kase k("xtc-p1-mk", seq_logits(BASIC));
        k.xtc(1.0f, 0.01f, 8, 42);
        k.apply();
    }
    {
        kase k("xtc-p1-mk0", seq_logits(BASIC));
        k.xtc(1.0f, 0.01f, 0, 42);
        k.apply();
    }
    {
        kase k("xtc-p1-mk-edge", seq_logits(BASIC));
        k.xtc(1.0f, 0.01f, 3, 42);
        k.apply();
    }
    {
        kase k("xtc-off-threshold", seq_logits(BASIC));
        k.xtc(1.0f, 0.6f, 1, 42);
        k.apply();
    }
    {
        kase k("xtc-threshold-05", seq_logits(FLAT));
        k.xtc(1.0f, 0.5f, 1, 42);
        k.apply();
    }
    {
        kase k("xtc-p0", seq_logits(BASIC));
        k.xtc(0.0f, 0.1f, 1, 42);
        k.apply();
    }
    {
        kase k("xtc-peaked", seq_logits(PEAKED));
        k.xtc(1.0f, 0.1f, 1, 42);
        k.apply();
    }
    {
        kase k("xtc-ties", seq_logits(TIES));
        k.xtc(1.0f, 0.15f, 1, 42);
        k.apply();
    }
    {
        // a size-1 array between draws: does it take a number from the generator?
        kase k("xtc-single-rng", seq_logits({0.5f}));
        k.xtc(0.5f, 0.1f, 1, 77);
        for (int i = 0; i < 3; i++) k.apply();
    }
    {
        // the generator of XTC and dist side by side in a chain, over several draws
        kase k("xtc-dist-chain", random_input(11, 16, -2, 2));
        k.xtc(0.5f, 0.08f, 1, 99).dist(99);
        k.seed();
        k.sample(12);
        k.reset();
        k.sample(4);
    }
    fclose(out);
}

void gen_top_n_sigma(const std::string & dir) {
    out = open_out(dir, "top_n_sigma.txt");
    // n < 0 is left out: llama.cpp 4747 sets every logit to -inf there (llama-cli never adds it so)
    const float ns[] = {0.0f, 0.5f, 1.0f, 2.0f, 3.0f};
    for (float n : ns) {
        kase(("top_n_sigma-basic-" + fmt(n)).c_str(), seq_logits(BASIC)).top_n_sigma(n).apply();
        kase(("top_n_sigma-random32-" + fmt(n)).c_str(), random_input(21, 32, -5, 5)).top_n_sigma(n).apply();
    }
    kase("top_n_sigma-ties", seq_logits(TIES)).top_n_sigma(0.5f).apply();
    kase("top_n_sigma-flat", seq_logits(FLAT)).top_n_sigma(1.0f).apply();
    kase("top_n_sigma-peaked", seq_logits(PEAKED)).top_n_sigma(1.0f).apply();
    kase("top_n_sigma-single", seq_logits({0.3f})).top_n_sigma(1.0f).apply();
    // llama.cpp's order under --top-nsigma: top-k, temp, top-n-sigma
    kase("top_n_sigma-chain", random_input(22, 32, -5, 5)).top_k(20).temp(0.7f).top_n_sigma(1.5f).apply();
    fclose(out);
}

// The DRY cases work on stories260K's tokens: some are breakers (13 "\n", 61 ":", 467 ":", 37 '"',
// 313 ' "', 436 '"', 45 "*", 497 "*"), some spell multi-token breakers (403 " Once", 407 " upon",
// 425 "u", 427 "p", 289 "on").
const std::vector<llama_token> DRY_ALPHABET = {265, 286, 13, 61, 313, 37, 403, 407, 100, 101, 102, 425, 427, 289, 467, 45};

input dry_input(uint64_t seed) {
    std::vector<llama_token> ids = DRY_ALPHABET;
    for (llama_token t : {2, 436}) ids.push_back(t);
    lcg r(seed);
    std::vector<float> l;
    // distinct logits: the order of ties after a sort is not defined (std::sort), and a draw
    // picks by position
    for (size_t i = 0; i < ids.size(); i++) l.push_back(r.logit(-3, 3) + (float) i / 4096.0f);
    return ids_logits(ids, l);
}

// A history with repeats: random tokens of the alphabet, and copies of earlier stretches.
std::vector<llama_token> dry_history(uint64_t seed, int n, size_t alpha) {
    lcg r(seed);
    std::vector<llama_token> h;
    while ((int) h.size() < n) {
        if (h.size() > 4 && r.next() % 3 != 0) {
            const size_t len = 2 + r.next() % 6;
            const size_t start = r.next() % (h.size() - 1);
            for (size_t i = 0; i < len && start + i < h.size() && (int) h.size() < n; i++) h.push_back(h[start + i]);
        } else {
            h.push_back(DRY_ALPHABET[r.next() % alpha]);
        }
    }
    return h;
}

void gen_dry(const std::string & dir) {
    out = open_out(dir, "dry.txt");
    const std::vector<std::string> DEFAULT = {"\n", ":", "\"", "*"};
    // plain repeats (no breaker tokens in the alphabet's first 2 and the letters)
    {
        kase k("dry-simple", dry_input(1), true);
        k.dry(0.8f, 1.75f, 2, -1, 64, DEFAULT);
        k.apply();
        k.accept({100, 101, 102, 100, 101});
        k.apply();
        k.accept({102, 100, 101});
        k.apply();
        k.clone();
        k.apply();
        k.reset();
        k.apply();
    }
    {
        // a breaker inside the repeat cuts it
        kase k("dry-breaker-cuts", dry_input(2), true);
        k.dry(1.0f, 2.0f, 1, -1, 64, DEFAULT);
        k.accept({100, 101, 102, 265, 100, 101, 102, 265, 100, 13, 101, 102, 265, 100, 101});
        k.apply();
        k.accept({13});
        k.apply();
        k.accept({100});
        k.apply();
    }
    struct P {
        float mult, base;
        int allowed, last_n, n_ctx;
    };
    const P params[] = {{0.8f, 1.75f, 2, -1, 64}, {1.0f, 1.5f, 1, 20, 64}, {0.5f, 2.0f, 3, -1, 40}, {0.8f, 1.75f, 2, 0, 64},
                        {0.0f, 1.75f, 2, -1, 64}, {0.8f, 0.9f, 2, -1, 64}, {2.0f, 1.0f, 0, 30, 64}, {0.8f, 50.0f, 1, -1, 200}};
    const std::vector<std::vector<std::string>> breakers = {
        DEFAULT, {}, {"upon", " Once upon"}, {"\n", "a b", "ca"}, {"\"", "::", "0123456789012345678901234567890123456789012345"}};
    int idx = 0;
    for (size_t pi = 0; pi < sizeof(params) / sizeof(params[0]); pi++) {
        for (size_t bi = 0; bi < breakers.size(); bi++) {
            if ((pi >= 3 && bi != 0) || (pi >= 1 && pi < 3 && (bi == 1 || bi == 4))) continue;
            const P & p = params[pi];
            const std::string n = "dry-p" + std::to_string(pi) + "-b" + std::to_string(bi);
            kase k(n.c_str(), dry_input(10 + idx), true);
            k.dry(p.mult, p.base, p.allowed, p.last_n, p.n_ctx, breakers[bi]);
            const auto h = dry_history(100 + idx, 56, bi == 1 ? 2 : DRY_ALPHABET.size());
            k.accept(std::vector<llama_token>(h.begin(), h.begin() + 30));
            k.apply();
            k.accept(std::vector<llama_token>(h.begin() + 30, h.end()));
            k.apply();
            idx++;
        }
    }
    // few letters, many repeats, every breaker set
    for (size_t bi : {0, 2, 3}) {
        const std::string n = "dry-letters-b" + std::to_string(bi);
        kase k(n.c_str(), dry_input(50 + bi), true);
        k.dry(0.8f, 1.75f, 2, -1, 64, breakers[bi]);
        const auto h = dry_history(200 + bi, 45, 16);
        for (size_t i = 0; i < h.size(); i += 15) {
            k.accept(std::vector<llama_token>(h.begin() + i, h.begin() + std::min(h.size(), i + 15)));
            k.apply();
        }
    }
    {
        // the multi-token breaker " Once upon" (403 407): after it, only what follows counts
        kase k("dry-multi-token-breaker", dry_input(60), true);
        k.dry(1.0f, 1.75f, 1, -1, 64, {" Once upon"});
        k.accept({100, 101, 102, 100, 101, 403, 407, 102, 100, 101, 102, 100});
        k.apply();
        k.accept({403});
        k.apply();
        k.accept({407});
        k.apply();
        k.accept({100, 101});
        k.apply();
    }
    {
        // a generation with DRY in llama.cpp's chain: penalties, DRY, top-k, ..., dist
        kase k("dry-chain-sample", dry_input(70), true);
        k.penalties(64, 1.1f, 0.0f, 0.0f).dry(0.8f, 1.75f, 2, -1, 64, DEFAULT).top_k(40).top_p(0.95f, 0).min_p(0.05f, 0).temp_ext(0.8f, 0.0f, 1.0f).dist(5);
        k.accept({100, 101, 102, 100, 101, 102});
        k.sample(12);
    }
    fclose(out);
}

void gen_infill(const std::string & dir) {
    out = open_out(dir, "infill.txt");
    // 259 " t", 308 " th", 265 " the", 260 "he", 386 "her", 365 " happ", 393 " happy", 2 "</s>" (EOG)
    const std::vector<llama_token> ids = {259, 308, 265, 260, 386, 365, 393, 2, 100, 101};
    kase("infill-eog-wins", ids_logits(ids, {0.0f, 0.5f, 0.25f, -1.0f, -0.5f, 0.0f, 0.1f, 2.5f, -2.0f, -3.0f}), true).infill().apply();
    kase("infill-merge", ids_logits(ids, {1.0f, 2.0f, 0.5f, 0.0f, 1.5f, 1.2f, 1.0f, -4.0f, 0.0f, -3.0f}), true).infill().apply();
    kase("infill-merge-one", ids_logits(ids, {3.0f, 2.0f, 0.5f, 0.0f, 0.5f, 0.2f, 0.0f, -6.0f, 0.0f, -3.0f}), true).infill().apply();
    kase("infill-thold", ids_logits(ids, {0.1f, -2.0f, -1.0f, 0.0f, 0.05f, 0.2f, -2.0f, -9.0f, 0.15f, 0.12f}), true).infill().apply();
    kase("infill-no-eog", ids_logits({265, 308, 100, 101, 102}, {1.0f, 0.9f, 0.8f, 0.7f, 0.6f}), true).infill().apply();
    kase("infill-random", random_input(31, 40, -3, 3), true).infill().apply();
    {
        kase k("infill-chain", random_input(32, 64, -4, 4), true);
        k.top_k(20).top_p(0.9f, 1).infill().dist(3);
        k.sample(3);
    }
    fclose(out);
}

void gen_chains(const std::string & dir) {
    out = open_out(dir, "chains.txt");
    {
        // llama.cpp's default chain with every sampler on: penalties;dry;top_k;typ_p;top_p;min_p;xtc;temperature
        kase k("chain-all", dry_input(80), true);
        k.logit_bias(512, {{265, 1.5f}, {2, -INFINITY}})
            .penalties(64, 1.1f, 0.1f, 0.05f)
            .dry(0.8f, 1.75f, 2, -1, 64, {"\n", ":", "\"", "*"})
            .top_k(15)
            .typical(0.9f, 0)
            .top_p(0.95f, 0)
            .min_p(0.02f, 0)
            .xtc(0.5f, 0.1f, 0, 17)
            .temp_ext(0.9f, 0.3f, 1.0f)
            .dist(17);
        k.seed();
        k.accept({100, 101, 102, 100, 101});
        k.sample(15);
    }
    {
        kase k("chain-reordered", random_input(81, 48, -4, 4));
        k.temp_ext(1.2f, 0.4f, 1.5f).min_p(0.05f, 0).typical(0.8f, 0).top_k(10).xtc(0.7f, 0.12f, 0, 23).dist(23);
        k.sample(10);
    }
    {
        kase k("chain-top-n-sigma", random_input(82, 48, -4, 4));
        k.logit_bias(48, {}).top_k(40).temp(0.8f).top_n_sigma(1.0f).dist(31);
        k.sample(10);
    }
    fclose(out);
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s stories260K.gguf OUTDIR\n", argv[0]);
        return 1;
    }
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    vocab = llama_model_get_vocab(model);
    const std::string dir = argv[2];
    gen_typical(dir);
    gen_temp_ext(dir);
    gen_xtc(dir);
    gen_top_n_sigma(dir);
    gen_dry(dir);
    gen_infill(dir);
    gen_chains(dir);
    llama_model_free(model);
    return 0;
}
