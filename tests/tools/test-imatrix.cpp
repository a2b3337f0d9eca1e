// llama-imatrix as a user runs it, against llama.cpp build 4747's own llama-imatrix on the same
// models, text and flags (tests/data/imatrix, README.md there): the same entries (names, ncall,
// nval, last chunk) and values; files combined with --in-file as the data behind them; llama.cpp's
// files read and written again byte for byte; periodic outputs; bad input refused with a message,
// a non-zero exit and no output file.
#include "test-util.h"
#include "tiny-models.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace {

std::string bin(const std::string & prog) { return std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog; }
std::string model_path(const std::string & name) { return tu::models_dir() + "/" + name + ".gguf"; }
std::string ref_dir() { return std::string(LLAMA_TEST_DATA_DIR) + "/imatrix"; }
std::string text_path() { return ref_dir() + "/stories.txt"; }

std::string read_bytes(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_bytes(const std::string & path, const std::string & bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A .dat file (llama.cpp's layout, examples/imatrix/imatrix.cpp), read independently of the program.
struct dat {
    struct item {
        int32_t ncall = 0;
        std::vector<float> values;
    };
    std::map<std::string, item> items;
    int32_t last_chunk = -1;
    std::string dataset;
};

bool parse_dat(const std::string & b, dat & d) {
    size_t o = 0;
    auto i32 = [&](int32_t & v) {
        if (b.size() - o < 4) return false;
        memcpy(&v, b.data() + o, 4);
        o += 4;
        return true;
    };
    int32_t n = 0;
    if (!i32(n) || n < 1) return false;
    for (int32_t i = 0; i < n; i++) {
        int32_t len = 0, nval = 0;
        if (!i32(len) || len < 1 || b.size() - o < (size_t) len) return false;
        const std::string name = b.substr(o, (size_t) len);
        o += (size_t) len;
        dat::item it;
        if (!i32(it.ncall) || !i32(nval) || nval < 1 || (b.size() - o) / 4 < (size_t) nval) return false;
        it.values.resize((size_t) nval);
        memcpy(it.values.data(), b.data() + o, (size_t) nval * 4);
        o += (size_t) nval * 4;
        d.items[name] = it;
    }
    int32_t len = 0;
    if (!i32(d.last_chunk) || !i32(len) || len < 0 || b.size() - o != (size_t) len) return false;
    d.dataset = b.substr(o);
    return true;
}

dat load(const std::string & path) {
    dat d;
    EXPECT_TRUE(parse_dat(read_bytes(path), d)) << path;
    return d;
}

// Holds got to want: the same entries, ncall and sizes, and every value within rtol; returns the
// largest relative difference. The entries named in `tight` are held to 1e-4.
double expect_same(const dat & got, const dat & want, double rtol, const std::string & what, const std::vector<std::string> & tight = {}) {
    EXPECT_EQ(got.items.size(), want.items.size()) << what;
    EXPECT_EQ(got.last_chunk, want.last_chunk) << what;
    double worst = 0;
    for (const auto & [name, w] : want.items) {
        auto it = got.items.find(name);
        if (it == got.items.end()) {
            ADD_FAILURE() << what << ": no entry " << name;
            continue;
        }
        const dat::item & g = it->second;
        EXPECT_EQ(g.ncall, w.ncall) << what << " " << name;
        if (g.values.size() != w.values.size()) {
            ADD_FAILURE() << what << " " << name << ": " << g.values.size() << " values, want " << w.values.size();
            continue;
        }
        const double tol = std::find(tight.begin(), tight.end(), name) != tight.end() ? 1e-4 : rtol;
        int bad = 0;
        for (size_t j = 0; j < w.values.size(); j++) {
            const double d = std::fabs((double) g.values[j] - w.values[j]) / std::max(1e-30, std::fabs((double) w.values[j]));
            worst = std::max(worst, d);
            if (d > tol && bad++ < 3) ADD_FAILURE() << what << " " << name << "[" << j << "]: " << g.values[j] << " vs " << w.values[j];
        }
    }
    return worst;
}

struct result {
    int status;
    std::string out, err;
};

result imatrix(const std::string & args) {
    result r;
    const tu::run_result rr = tu::run_command(bin("llama-imatrix") + " " + args, &r.err);
    r.status = rr.status;
    r.out = rr.output;
    return r;
}

// The tiny Qwen2-MoE model of tiny-models.h (experts through MUL_MAT_ID, shared experts), written
// into dir: deterministic, so llama.cpp's file made on it once holds.
std::string write_qwen2moe(const tu::TempDir & dir) {
    for (const tiny::spec & s : tiny::specs()) {
        if (s.name != "qwen2moe") continue;
        const std::string path = dir.path + "/qwen2moe-f32.gguf";
        EXPECT_TRUE(tiny::write(s, path, model_path("stories260K"), GGML_TYPE_F32));
        return path;
    }
    ADD_FAILURE() << "no qwen2moe in tiny::specs()";
    return "";
}

// Every file of dir but the expected ones (temporary files left behind, outputs that should not be).
std::vector<std::string> others(const tu::TempDir & dir, const std::vector<std::string> & expected) {
    std::vector<std::string> v;
    for (const std::string & f : dir.files()) {
        if (std::find(expected.begin(), expected.end(), f) == expected.end()) v.push_back(f);
    }
    return v;
}

}  // namespace

// The importance matrices of llama.cpp's llama-imatrix, -c 128 --chunks 4 over stories.txt:
// - stories260K (F32) with an F32 KV cache: the two forward passes agree to float rounding, and so
//   do the matrices (natively 2.1e-6);
// - the same with the default F16 cache: the attention over an F16 cache differs between the two
//   engines by about 3e-4 (measured 2.9e-4);
// - TinyStories-656K-Q8_0: the activations are rounded to Q8_0 for each product, where a value
//   near a rounding boundary may land on either level: the inputs of the first products agree to
//   1e-6, later ones drift (measured 1.9e-2 at most on one column of blk.1.ffn_down, 3.7e-4 on an
//   entry's total);
// - the tiny Qwen2-MoE model (F32, F32 cache): experts (MUL_MAT_ID) and shared experts (2.0e-6).
TEST(Imatrix, MatchesLlamaCpp) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    TU_REQUIRE_FILE(model_path("TinyStories-656K-Q8_0"));
    tu::TempDir dir;
    struct ref_case {
        std::string model, flags, ref;
        double rtol;
        std::vector<std::string> tight;
    };
    const ref_case cases[] = {
        {model_path("stories260K"), "-ctk f32 -ctv f32", "stories260K-f32-cache.dat", 1e-4, {}},
        {model_path("stories260K"), "", "stories260K.dat", 1e-3, {}},
        {model_path("TinyStories-656K-Q8_0"), "", "TinyStories-656K-Q8_0.dat", 5e-2,
         {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}},
        {write_qwen2moe(dir), "-ctk f32 -ctv f32", "qwen2moe-f32-cache.dat", 1e-4, {}},
    };
    for (const ref_case & c : cases) {
        SCOPED_TRACE(c.ref);
        const std::string out = dir.path + "/" + c.ref;
        const result r = imatrix("-m " + c.model + " -f " + text_path() + " -c 128 --chunks 4 -t 2 -o " + out + " " + c.flags);
        ASSERT_EQ(r.status, 0) << r.err;
        const dat got = load(out), want = load(ref_dir() + "/" + c.ref);
        const double worst = expect_same(got, want, c.rtol, c.ref, c.tight);
        printf("  %s: %zu entries, largest relative difference %.2e\n", c.ref.c_str(), want.items.size(), worst);
        EXPECT_EQ(got.dataset, text_path()) << "the -f file as given";
        EXPECT_EQ(want.last_chunk, 4);
        // The entries' totals (their means over the columns) agree closer than single columns.
        for (const auto & [name, w] : want.items) {
            const auto & g = got.items.at(name);
            double sg = 0, sw = 0;
            for (size_t j = 0; j < w.values.size() && j < g.values.size(); j++) {
                sg += g.values[j];
                sw += w.values[j];
            }
            EXPECT_NEAR(sg, sw, 2e-3 * sw) << name;
        }
        // The perplexity estimates as llama.cpp prints them, on standard output.
        EXPECT_EQ(r.out.rfind("[1]", 0), 0u) << r.out;
        EXPECT_NE(r.out.find(",[4]"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("Final estimate: PPL = "), std::string::npos) << r.out;
        EXPECT_EQ(others(dir, {"qwen2moe-f32.gguf", "stories260K-f32-cache.dat", "stories260K.dat", "TinyStories-656K-Q8_0.dat",
                               "qwen2moe-f32-cache.dat"}).size(), 0u);
    }
}

// The first two chunks and the next two (--chunk 2), combined with --in-file (no text: only
// combined), make the four-chunk matrix: the same entries, ncall and last chunk, the values to
// float rounding. More micro-batches (-ub 32) count more calls, as llama.cpp's.
TEST(Imatrix, HalvesCombineToTheWhole) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    const std::string base = "-m " + model_path("stories260K") + " -f " + text_path() + " -c 128 -t 2 -ctk f32 -ctv f32 ";
    const std::string whole = dir.path + "/whole.dat", a = dir.path + "/a.dat", b = dir.path + "/b.dat", ab = dir.path + "/ab.dat";
    ASSERT_EQ(imatrix(base + "--chunks 4 -o " + whole).status, 0);
    result r = imatrix(base + "--chunks 2 --no-ppl -o " + a);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.find("[1]"), std::string::npos) << "--no-ppl: no estimates";
    EXPECT_EQ(r.out.find("Final estimate"), std::string::npos);
    ASSERT_EQ(imatrix(base + "--chunk 2 --chunks 2 -o " + b).status, 0);
    EXPECT_EQ(load(a).last_chunk, 2);
    r = imatrix("-m " + model_path("stories260K") + " --in-file " + a + " --in-file " + b + " -o " + ab);
    ASSERT_EQ(r.status, 0) << r.err;
    const dat got = load(ab), want = load(whole);
    expect_same(got, want, 1e-5, "a + b");
    EXPECT_EQ(got.last_chunk, 4);
    EXPECT_EQ(got.dataset, text_path()) << "the in-files' dataset";
    for (const auto & [name, it] : got.items) EXPECT_EQ(it.ncall, 4) << name;

    // Four micro-batches a chunk: four calls a chunk.
    const std::string ub = dir.path + "/ub.dat";
    ASSERT_EQ(imatrix(base + "--chunks 2 -b 64 -ub 32 -o " + ub).status, 0);
    const dat u = load(ub);
    EXPECT_EQ(u.last_chunk, 8);
    for (const auto & [name, it] : u.items) EXPECT_EQ(it.ncall, 8) << name;
    // the same means: values / ncall
    const dat one = load(a);
    for (const auto & [name, it] : one.items) {
        const auto & v = u.items.at(name).values;
        ASSERT_EQ(v.size(), it.values.size()) << name;
        for (size_t j = 0; j < v.size(); j++) EXPECT_NEAR(v[j] / 8, it.values[j] / 2, 1e-5 * it.values[j] / 2) << name << "[" << j << "]";
    }
}

// llama.cpp's files read and written again (no text): the same bytes, with -m (its names checked
// against the model) or without.
TEST(Imatrix, RewritesLlamaCppFilesByteForByte) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    for (const char * f : {"stories260K.dat", "stories260K-f32-cache.dat", "TinyStories-656K-Q8_0.dat", "qwen2moe-f32-cache.dat"}) {
        const std::string in = ref_dir() + "/" + f, out = dir.path + "/" + f;
        const std::string m = std::string(f) == "stories260K.dat" ? "-m " + model_path("stories260K") + " " : "";
        const result r = imatrix(m + "--in-file " + in + " -o " + out);
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_TRUE(read_bytes(out) == read_bytes(in)) << f;
    }
    EXPECT_EQ(others(dir, {"stories260K.dat", "stories260K-f32-cache.dat", "TinyStories-656K-Q8_0.dat", "qwen2moe-f32-cache.dat"}).size(), 0u);
}

// -o written every --output-frequency calls and at the end, a copy OUT.at_N every
// --save-frequency calls; nothing else left in the folder.
TEST(Imatrix, PeriodicOutputs) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    const std::string out = dir.path + "/m.dat";
    const result r = imatrix("-m " + model_path("stories260K") + " -f " + text_path() + " -c 128 --chunks 4 -t 2 --no-ppl "
                             "--output-frequency 1 --save-frequency 2 --process-output -o " + out);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("chunk 4 of 4"), std::string::npos) << "--no-ppl: progress per chunk on standard error";
    std::vector<std::string> files = dir.files();
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{"m.dat", "m.dat.at_2", "m.dat.at_4"}));
    const dat at2 = load(out + ".at_2"), at4 = load(out + ".at_4"), fin = load(out);
    EXPECT_EQ(at2.last_chunk, 2);
    EXPECT_EQ(at2.items.begin()->second.ncall, 2);
    EXPECT_TRUE(read_bytes(out + ".at_4") == read_bytes(out));
    // --process-output: output.weight too (stories260K's 64 columns), and the 35 weights of the blocks.
    ASSERT_EQ(fin.items.count("output.weight"), 1u);
    EXPECT_EQ(fin.items.at("output.weight").values.size(), 64u);
    EXPECT_EQ(fin.items.size(), 36u);
}

// Bad input: a clear message, a non-zero exit, no output file.
TEST(Imatrix, BadInputIsRefused) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    TU_REQUIRE_FILE(model_path("TinyStories-656K-Q8_0"));
    tu::TempDir dir;
    const std::string out = dir.path + "/out.dat", m260 = model_path("stories260K"), m656 = model_path("TinyStories-656K-Q8_0");
    const std::string ref = read_bytes(ref_dir() + "/stories260K.dat");
    auto refused = [&](const std::string & args, const std::string & needle) {
        SCOPED_TRACE(args);
        const result r = imatrix(args + " -o " + out);
        EXPECT_NE(r.status, 0) << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
        EXPECT_FALSE(tu::file_exists(out));
        EXPECT_EQ(others(dir, {"t.dat", "short.txt"}).size(), 0u) << "nothing left behind";
    };
    // Truncated files: in the entry count, a name, the values, the dataset name at the end.
    for (size_t cut : {(size_t) 2, (size_t) 10, (size_t) 100, ref.size() / 2, ref.size() - 3}) {
        write_bytes(dir.path + "/t.dat", ref.substr(0, cut));
        refused("--in-file " + dir.path + "/t.dat", "truncated");
        refused("-m " + m260 + " -f " + text_path() + " -c 128 --chunks 1 --in-file " + dir.path + "/t.dat", "truncated");
    }
    // Not an importance matrix at all.
    refused("--in-file " + text_path(), "not an importance matrix");
    // A matrix of another model: names it lacks (stories260K has 5 blocks, the 656K model 2),
    // sizes that differ (64 columns against 128); with a text too, before anything is computed.
    refused("-m " + m656 + " --in-file " + ref_dir() + "/stories260K.dat", "which is not a tensor of the model");
    refused("-m " + m260 + " --in-file " + ref_dir() + "/TinyStories-656K-Q8_0.dat", "made for another model");
    refused("-m " + m260 + " -f " + text_path() + " -c 128 --in-file " + ref_dir() + "/TinyStories-656K-Q8_0.dat", "made for another model");
    // Files of two models combined.
    refused("--in-file " + ref_dir() + "/stories260K.dat --in-file " + ref_dir() + "/TinyStories-656K-Q8_0.dat", "inconsistent size");
    // A missing in-file, a missing text, too short a text, no model, nothing to do.
    refused("--in-file " + dir.path + "/none.dat", "cannot open");
    refused("-m " + m260 + " -f " + dir.path + "/none.txt -c 128", "cannot read the prompt file");
    write_bytes(dir.path + "/short.txt", "Once upon a time there was a cat.");
    refused("-m " + m260 + " -f " + dir.path + "/short.txt -c 128", "you need at least 256 tokens");
    refused("-m " + m260 + " -f " + text_path() + " -c 128 --chunk 100", "not enough tokens left");
    refused("-f " + text_path(), "no model given");
    refused("-m " + m260, "no text given");
    // Products of fewer than 16 tokens are not collected (llama.cpp's rule): nothing to write.
    refused("-m " + m260 + " -f " + text_path() + " -c 32 -b 8 --chunks 2", "no entry has data");
}

// llama.cpp 4747's llama-imatrix flags (its own and the common ones the task names) are taken.
TEST(Imatrix, TakesLlamaCppFlags) {
    const tu::run_result r = tu::run_command(bin("llama-imatrix") + " --help");
    ASSERT_EQ(r.status, 0) << r.output;
    for (const char * f : {"-m, --model", "-f, --file", "-o, --output, --output-file", "--chunks", "-ofreq, --output-frequency",
                           "--save-frequency", "--in-file", "--process-output", "--no-ppl", "--chunk, --from-chunk", "-c, --ctx-size",
                           "-b, --batch-size", "-ub, --ubatch-size", "-t, --threads", "-s, --seed", "-ngl, --gpu-layers"}) {
        EXPECT_NE(r.output.find(f), std::string::npos) << f;
    }
}
