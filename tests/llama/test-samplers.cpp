// The samplers against llama.cpp's (build 4747): tests/data/sampling-reference/ holds cases (a
// candidate array, a chain, operations) and what llama.cpp's samplers made of them, written by
// gen.cpp there; each case is replayed here on this engine's samplers. Ids, sizes and the selected
// token must be equal, floats within 1e-5 relative. Cases marked "vocab" use stories260K's
// vocabulary (DRY's breakers, infill's token texts) and are left out without the model file.
#include "test-llama.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string ref_dir() { return std::string(LLAMA_TEST_DATA_DIR) + "/sampling-reference"; }

struct vocab_holder {
    llama_model * model = nullptr;
    vocab_holder() {
        const std::string path = tu::models_dir() + "/stories260K.gguf";
        if (!tu::file_exists(path)) return;
        llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;
        model = llama_model_load_from_file(path.c_str(), mp);
    }
    ~vocab_holder() { llama_model_free(model); }
    const llama_vocab * vocab() const { return model ? llama_model_get_vocab(model) : nullptr; }
};

const llama_vocab * shared_vocab() {
    static vocab_holder h;
    return h.vocab();
}

std::string unhex(const std::string & h) {
    if (h == "-") return "";
    std::string s;
    for (size_t i = 0; i + 1 < h.size(); i += 2) s += (char) std::strtol(h.substr(i, 2).c_str(), nullptr, 16);
    return s;
}

float to_float(const std::string & s) { return std::strtof(s.c_str(), nullptr); }

// A sampler from its spec line (gen.cpp's names and argument order).
llama_sampler * make_sampler(std::istringstream & in, const llama_vocab * vocab) {
    std::string kind;
    in >> kind;
    std::string a, b, c, d;
    if (kind == "typical") {
        in >> a >> b;
        return llama_sampler_init_typical(to_float(a), std::stoul(b));
    }
    if (kind == "temp_ext") {
        in >> a >> b >> c;
        return llama_sampler_init_temp_ext(to_float(a), to_float(b), to_float(c));
    }
    if (kind == "xtc") {
        in >> a >> b >> c >> d;
        return llama_sampler_init_xtc(to_float(a), to_float(b), std::stoul(c), (uint32_t) std::stoul(d));
    }
    if (kind == "top_n_sigma") {
        in >> a;
        return llama_sampler_init_top_n_sigma(to_float(a));
    }
    if (kind == "dry") {
        std::string mult, base, allowed, last_n, n_ctx, n_br;
        in >> mult >> base >> allowed >> last_n >> n_ctx >> n_br;
        std::vector<std::string> br((size_t) std::stoi(n_br));
        for (auto & s : br) {
            in >> a;
            s = unhex(a);
        }
        std::vector<const char *> ptrs;
        for (const auto & s : br) ptrs.push_back(s.c_str());
        return llama_sampler_init_dry(vocab, std::stoi(n_ctx), to_float(mult), to_float(base), std::stoi(allowed), std::stoi(last_n),
                                      ptrs.data(), ptrs.size());
    }
    if (kind == "infill") return llama_sampler_init_infill(vocab);
    if (kind == "top_k") {
        in >> a;
        return llama_sampler_init_top_k(std::stoi(a));
    }
    if (kind == "top_p") {
        in >> a >> b;
        return llama_sampler_init_top_p(to_float(a), std::stoul(b));
    }
    if (kind == "min_p") {
        in >> a >> b;
        return llama_sampler_init_min_p(to_float(a), std::stoul(b));
    }
    if (kind == "temp") {
        in >> a;
        return llama_sampler_init_temp(to_float(a));
    }
    if (kind == "dist") {
        in >> a;
        return llama_sampler_init_dist((uint32_t) std::stoul(a));
    }
    if (kind == "penalties") {
        in >> a >> b >> c >> d;
        return llama_sampler_init_penalties(std::stoi(a), to_float(b), to_float(c), to_float(d));
    }
    if (kind == "logit_bias") {
        in >> a >> b;
        std::vector<llama_logit_bias> biases((size_t) std::stoi(b));
        for (auto & x : biases) {
            in >> c >> d;
            x = {std::stoi(c), to_float(d)};
        }
        return llama_sampler_init_logit_bias(std::stoi(a), (int32_t) biases.size(), biases.data());
    }
    ADD_FAILURE() << "unknown sampler in the reference: " << kind;
    return nullptr;
}

bool close(float want, float got) {
    if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
    if (std::isinf(want) || std::isinf(got)) return want == got;
    return std::fabs(want - got) <= 1e-5f * std::max(std::fabs(want), std::fabs(got)) + 1e-30f;
}

// Candidates in the order a sampler left them; tokens of equal logit in id order, since llama.cpp
// sorts with std::sort, whose order of ties is unspecified.
std::vector<llama_token_data> canonical(const llama_token_data * d, size_t n) {
    std::vector<llama_token_data> v(d, d + n);
    for (size_t i = 0; i < v.size();) {
        size_t j = i + 1;
        while (j < v.size() && (v[j].logit == v[i].logit || (std::isnan(v[j].logit) && std::isnan(v[i].logit)))) j++;
        std::sort(v.begin() + (long) i, v.begin() + (long) j, [](const llama_token_data & a, const llama_token_data & b) { return a.id < b.id; });
        i = j;
    }
    return v;
}

struct replay_stats {
    int cases = 0, skipped = 0, checks = 0;
};

// Replays one reference file; returns how many cases ran and how many were left out.
replay_stats replay(const std::string & file) {
    replay_stats st;
    std::ifstream f(ref_dir() + "/" + file);
    EXPECT_TRUE(f.good()) << "cannot read " << ref_dir() << "/" << file;
    const llama_vocab * vocab = shared_vocab();
    std::string line, name;
    std::vector<llama_token_data> input;
    llama_sampler * chain = nullptr;
    bool skip = false;
    auto next_line = [&]() {
        std::string l;
        std::getline(f, l);
        return l;
    };
    // Applies the chain to the case's input and compares with the "result" block that follows.
    auto apply_and_check = [&](bool accept) {
        std::istringstream hdr(next_line());
        std::string tag;
        size_t want_size = 0;
        long long want_sel = -1;
        hdr >> tag >> want_size >> want_sel;
        std::vector<llama_token_data> want(want_size);
        for (auto & w : want) {
            std::istringstream l(next_line());
            std::string id, logit, p;
            l >> id >> logit >> p;
            w = {std::stoi(id), to_float(logit), to_float(p)};
        }
        if (skip) return;
        std::vector<llama_token_data> d = input;
        llama_token_data_array cur = {d.data(), d.size(), -1, false};
        llama_sampler_apply(chain, &cur);
        st.checks++;
        SCOPED_TRACE(name + ", result " + std::to_string(st.checks));
        ASSERT_EQ(cur.size, want_size);
        ASSERT_EQ(cur.selected >= 0, want_sel >= 0);
        if (want_sel >= 0) {
            ASSERT_LT((size_t) cur.selected, cur.size);
            EXPECT_EQ(cur.data[cur.selected].id, want[(size_t) want_sel].id);
        }
        const auto got_c = canonical(cur.data, cur.size), want_c = canonical(want.data(), want.size());
        for (size_t i = 0; i < want_size; i++) {
            EXPECT_EQ(got_c[i].id, want_c[i].id) << "candidate " << i;
            EXPECT_TRUE(close(want_c[i].logit, got_c[i].logit)) << "candidate " << i << " logit " << got_c[i].logit << ", llama.cpp "
                                                              << want_c[i].logit;
            EXPECT_TRUE(close(want_c[i].p, got_c[i].p)) << "candidate " << i << " p " << got_c[i].p << ", llama.cpp " << want_c[i].p;
        }
        if (accept && cur.selected >= 0) llama_sampler_accept(chain, cur.data[cur.selected].id);
    };
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        std::string tag;
        in >> tag;
        if (tag == "case") {
            in >> name;
            chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
            skip = false;
            input.clear();
            st.cases++;
        } else if (tag == "vocab") {
            if (!vocab) {
                skip = true;
                st.skipped++;
            }
        } else if (tag == "input") {
            size_t n = 0;
            in >> n;
            for (size_t i = 0; i < n; i++) {
                std::string id, logit;
                in >> id >> logit;
                input.push_back({std::stoi(id), to_float(logit), 0.0f});
            }
        } else if (tag == "sampler") {
            if (!skip) {
                llama_sampler * s = make_sampler(in, vocab);
                if (s) llama_sampler_chain_add(chain, s);
            }
        } else if (tag == "op") {
            std::string op;
            in >> op;
            if (op == "apply" || op == "sample") {
                apply_and_check(op == "sample");
            } else if (op == "seed") {
                std::istringstream l(next_line());
                std::string t;
                uint32_t want = 0;
                l >> t >> want;
                if (!skip) {
                    EXPECT_EQ(llama_sampler_get_seed(chain), want) << name;
                }
            } else if (skip) {
                continue;
            } else if (op == "accept") {
                llama_token t;
                while (in >> t) llama_sampler_accept(chain, t);
            } else if (op == "reset") {
                llama_sampler_reset(chain);
            } else if (op == "clone") {
                llama_sampler * c = llama_sampler_clone(chain);
                llama_sampler_free(chain);
                chain = c;
            } else {
                ADD_FAILURE() << "unknown op " << op;
            }
        } else if (tag == "end") {
            llama_sampler_free(chain);
            chain = nullptr;
        } else {
            ADD_FAILURE() << "unexpected line in " << file << ": " << line;
        }
    }
    llama_sampler_free(chain);
    return st;
}

void run_file(const char * file) {
    const replay_stats st = replay(file);
    EXPECT_GT(st.cases, 0);
    if (st.skipped == st.cases) GTEST_SKIP() << "stories260K.gguf not found (set LLAMA_TEST_MODELS): " << file << "'s cases need its vocabulary";
    if (st.skipped > 0) printf("  %s: %d of %d cases left out (no stories260K.gguf)\n", file, st.skipped, st.cases);
}

llama_token_data_array view(std::vector<llama_token_data> & d) { return {d.data(), d.size(), -1, false}; }

}  // namespace

TEST(SamplersVsLlamaCpp, Typical) { run_file("typical.txt"); }
TEST(SamplersVsLlamaCpp, TempExt) { run_file("temp_ext.txt"); }
TEST(SamplersVsLlamaCpp, Xtc) { run_file("xtc.txt"); }
TEST(SamplersVsLlamaCpp, TopNSigma) { run_file("top_n_sigma.txt"); }
TEST(SamplersVsLlamaCpp, Dry) { run_file("dry.txt"); }
TEST(SamplersVsLlamaCpp, Infill) { run_file("infill.txt"); }
TEST(SamplersVsLlamaCpp, Chains) { run_file("chains.txt"); }

TEST(Samplers, NamesAreLlamaCpps) {
    const llama_vocab * vocab = nullptr;
    const char * none[] = {nullptr};
    struct {
        llama_sampler * s;
        const char * name;
    } cases[] = {
        {llama_sampler_init_typical(0.5f, 1), "typical"},
        {llama_sampler_init_temp_ext(0.8f, 0.5f, 1.0f), "temp-ext"},
        {llama_sampler_init_xtc(0.5f, 0.1f, 1, 1), "xtc"},
        {llama_sampler_init_top_n_sigma(1.0f), "top-n-sigma"},
        {llama_sampler_init_dry(vocab, 64, 0.0f, 1.75f, 2, -1, none, 0), "dry"},
        {llama_sampler_init_infill(vocab), "infill"},
    };
    for (auto & c : cases) {
        EXPECT_STREQ(llama_sampler_name(c.s), c.name);
        llama_sampler * copy = llama_sampler_clone(c.s);
        ASSERT_NE(copy, nullptr);
        EXPECT_STREQ(llama_sampler_name(copy), c.name);
        llama_sampler_free(copy);
        llama_sampler_free(c.s);
    }
}

// Where llama.cpp 4747 sets every logit to -inf (and p to NaN), a negative n is off here (llama-cli
// adds the sampler only for --top-nsigma >= 0, so its output is the same).
TEST(Samplers, TopNSigmaNegativeIsOff) {
    std::vector<llama_token_data> d = {{0, 1.0f, 0.0f}, {1, 2.0f, 0.0f}, {2, -1.0f, 0.0f}};
    llama_token_data_array cur = view(d);
    llama_sampler * s = llama_sampler_init_top_n_sigma(-1.0f);
    llama_sampler_apply(s, &cur);
    EXPECT_EQ(cur.size, 3u);
    EXPECT_EQ(d[0].logit, 1.0f);
    EXPECT_EQ(d[1].logit, 2.0f);
    EXPECT_EQ(d[2].logit, -1.0f);
    llama_sampler_free(s);
}

// XTC's generator restarts from the seed on reset, like dist's; LLAMA_DEFAULT_SEED draws one.
TEST(Samplers, XtcReseedsOnReset) {
    std::vector<float> logits = {3.0f, 2.9f, 2.8f, 0.0f, -1.0f};
    auto sizes = [&](llama_sampler * s) {
        std::vector<size_t> out;
        for (int i = 0; i < 16; i++) {
            std::vector<llama_token_data> d;
            for (size_t j = 0; j < logits.size(); j++) d.push_back({(llama_token) j, logits[j], 0.0f});
            llama_token_data_array cur = view(d);
            llama_sampler_apply(s, &cur);
            out.push_back(cur.size);
        }
        return out;
    };
    llama_sampler * s = llama_sampler_init_xtc(0.5f, 0.1f, 1, 7);
    const auto first = sizes(s);
    llama_sampler_reset(s);
    EXPECT_EQ(sizes(s), first);
    llama_sampler * c = llama_sampler_init_xtc(0.5f, 0.1f, 1, 7);
    EXPECT_EQ(sizes(c), first);
    llama_sampler_free(c);
    llama_sampler_free(s);
}
