// llama-imatrix as a user runs it, against llama.cpp build 4747's own llama-imatrix on the same
// models, text and flags (tests/data/imatrix, README.md there): the same entries (names, ncall,
// nval, last chunk) and values; files combined with --in-file as the data behind them; llama.cpp's
// files read and written again byte for byte; periodic outputs; bad input refused with a message,
// a non-zero exit and no output file. And llama.cpp's later GGUF format (its PR #9400): its keys,
// tensors and shapes, the .dat's values in it, conversions both ways, the two mixed, bad files.
#include "test-util.h"
#include "tiny-models.h"

#include "gguf.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
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

// A GGUF importance matrix, read with the GGUF API (not the programs' reader), held to llama.cpp's
// layout: exactly general.type, imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size; per
// entry, in name order, NAME.in_sum2 (F32 [n_per_row, n_mat]) then NAME.counts (F32 [1, n_mat]).
struct gguf_im {
    struct item {
        int64_t n_per_row = 0, n_mat = 0;
        std::vector<float> sums, counts;
        // column j's mean of x^2
        double mean(size_t j) const { return (double) sums[j] / counts[j / (size_t) n_per_row]; }
    };
    std::map<std::string, item> items;
    std::vector<std::string> datasets;
    int64_t chunk_count = -1, chunk_size = -1;
};

bool parse_gguf(const std::string & path, gguf_im & m) {
    ggml_context * ctx = nullptr;
    gguf_init_params p = {};
    p.ctx = &ctx;
    gguf_context * g = gguf_init_from_file(path.c_str(), p);
    if (!g) return false;
    bool ok = gguf_get_n_kv(g) == 4;
    EXPECT_EQ(gguf_get_n_kv(g), 4) << path;
    const int64_t type = gguf_find_key(g, "general.type"), ds = gguf_find_key(g, "imatrix.datasets");
    const int64_t cc = gguf_find_key(g, "imatrix.chunk_count"), cs = gguf_find_key(g, "imatrix.chunk_size");
    ok = ok && type >= 0 && ds >= 0 && cc >= 0 && cs >= 0 && gguf_get_kv_type(g, type) == GGUF_TYPE_STRING &&
         gguf_get_kv_type(g, ds) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g, ds) == GGUF_TYPE_STRING &&
         gguf_get_kv_type(g, cc) == GGUF_TYPE_UINT32 && gguf_get_kv_type(g, cs) == GGUF_TYPE_UINT32;
    EXPECT_TRUE(ok) << path << ": the keys and their types";
    if (ok) {
        EXPECT_STREQ(gguf_get_val_str(g, type), "imatrix");
        for (size_t i = 0; i < gguf_get_arr_n(g, ds); i++) m.datasets.push_back(gguf_get_arr_str(g, ds, i));
        m.chunk_count = gguf_get_val_u32(g, cc);
        m.chunk_size = gguf_get_val_u32(g, cs);
    }
    std::vector<std::string> names;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t && ok; t = ggml_get_next_tensor(ctx, t)) names.push_back(t->name);
    ok = ok && names.size() % 2 == 0;
    for (size_t i = 0; ok && i < names.size(); i += 2) {
        const std::string name = names[i].substr(0, names[i].size() - strlen(".in_sum2"));
        ok = names[i].size() > 8 && names[i] == name + ".in_sum2" && names[i + 1] == name + ".counts" &&
             (i == 0 || names[i - 2] < names[i]);
        EXPECT_TRUE(ok) << path << ": tensors " << names[i] << ", " << names[i + 1] << " (in_sum2 then counts, by name)";
        if (!ok) break;
        const ggml_tensor * s = ggml_get_tensor(ctx, names[i].c_str()), * c = ggml_get_tensor(ctx, names[i + 1].c_str());
        ok = s->type == GGML_TYPE_F32 && c->type == GGML_TYPE_F32 && s->ne[2] == 1 && s->ne[3] == 1 && c->ne[0] == 1 &&
             c->ne[1] == s->ne[1] && c->ne[2] == 1 && c->ne[3] == 1;
        EXPECT_TRUE(ok) << path << " " << name << ": types and shapes";
        gguf_im::item & it = m.items[name];
        it.n_per_row = s->ne[0];
        it.n_mat = s->ne[1];
        it.sums.assign((const float *) s->data, (const float *) s->data + ggml_nelements(s));
        it.counts.assign((const float *) c->data, (const float *) c->data + ggml_nelements(c));
    }
    gguf_free(g);
    ggml_free(ctx);
    return ok;
}

gguf_im load_gguf(const std::string & path) {
    gguf_im m;
    EXPECT_TRUE(parse_gguf(path, m)) << path;
    return m;
}

// Holds got to want: the same entries, shapes, counts and chunk count, the sums within rtol.
void expect_same(const gguf_im & got, const gguf_im & want, double rtol, const std::string & what) {
    EXPECT_EQ(got.items.size(), want.items.size()) << what;
    EXPECT_EQ(got.chunk_count, want.chunk_count) << what;
    EXPECT_EQ(got.chunk_size, want.chunk_size) << what;
    for (const auto & [name, w] : want.items) {
        auto it = got.items.find(name);
        if (it == got.items.end()) {
            ADD_FAILURE() << what << ": no entry " << name;
            continue;
        }
        const gguf_im::item & g = it->second;
        EXPECT_EQ(g.n_per_row, w.n_per_row) << what << " " << name;
        EXPECT_EQ(g.counts, w.counts) << what << " " << name;
        if (g.sums.size() != w.sums.size()) continue;
        int bad = 0;
        for (size_t j = 0; j < w.sums.size(); j++) {
            if (std::fabs((double) g.sums[j] - w.sums[j]) > rtol * w.sums[j] && bad++ < 3) {
                ADD_FAILURE() << what << " " << name << "[" << j << "]: " << g.sums[j] << " vs " << w.sums[j];
            }
        }
    }
}

bool is_gguf(const std::string & path) { return read_bytes(path).rfind("GGUF", 0) == 0; }

// The GGUF file in, written to out without the tensor named drop and as edit leaves it (a key
// dropped, a value changed).
void rewrite_gguf(const std::string & in, const std::string & out, const std::string & drop,
                  const std::function<void(gguf_context *, ggml_context *)> & edit) {
    ggml_context * ctx = nullptr;
    gguf_init_params p = {};
    p.ctx = &ctx;
    gguf_context * src = gguf_init_from_file(in.c_str(), p);
    ASSERT_NE(src, nullptr) << in;
    gguf_context * g = gguf_init_empty();
    gguf_set_kv(g, src);
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->name != drop) gguf_add_tensor(g, t);
    }
    edit(g, ctx);
    EXPECT_TRUE(gguf_write_to_file(g, out.c_str(), false)) << out;
    gguf_free(g);
    gguf_free(src);
    ggml_free(ctx);
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

// llama.cpp 4747's llama-imatrix flags (its own and the common ones the task names) are taken,
// and the later --output-format.
TEST(Imatrix, TakesLlamaCppFlags) {
    const tu::run_result r = tu::run_command(bin("llama-imatrix") + " --help");
    ASSERT_EQ(r.status, 0) << r.output;
    for (const char * f : {"-m, --model", "-f, --file", "-o, --output, --output-file", "--output-format", "--chunks", "-ofreq, --output-frequency",
                           "--save-frequency", "--in-file", "--process-output", "--no-ppl", "--chunk, --from-chunk", "-c, --ctx-size",
                           "-b, --batch-size", "-ub, --ubatch-size", "-t, --threads", "-s, --seed", "-ngl, --gpu-layers"}) {
        EXPECT_NE(r.output.find(f), std::string::npos) << f;
    }
}

// The GGUF file of a run holds what its .dat holds: per column, in_sum2 / count is the .dat's
// value / ncall (to float rounding: each file rounds its own way); the counts are the rows
// (tokens) summed: 4 chunks of 128 for a dense weight; for the experts of a MoE weight one count
// each, adding up to twice the tokens (each token goes to 2 of the 4 experts). An entry the .dat
// leaves out (an expert without a token) is in the GGUF file, with count 0.
TEST(Imatrix, GgufHoldsTheDatsValues) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    const std::string moe = write_qwen2moe(dir);
    for (const std::string & m : {model_path("stories260K"), moe}) {
        SCOPED_TRACE(m);
        const std::string args = "-m " + m + " -f " + text_path() + " -c 128 --chunks 4 -t 2 -ctk f32 -ctv f32 --no-ppl -o ";
        const std::string d = dir.path + "/x.dat", g = dir.path + "/x.gguf";
        result r = imatrix(args + d);
        ASSERT_EQ(r.status, 0) << r.err;
        r = imatrix(args + g);
        ASSERT_EQ(r.status, 0) << r.err;
        ASSERT_TRUE(is_gguf(g));
        const dat want = load(d);
        const gguf_im got = load_gguf(g);
        EXPECT_EQ(got.chunk_count, 4);
        EXPECT_EQ(got.chunk_size, 128);
        EXPECT_EQ(got.datasets, std::vector<std::string>{text_path()});
        ggml_context * mctx = nullptr;
        gguf_init_params gp = {};
        gp.no_alloc = true;
        gp.ctx = &mctx;
        gguf_context * mg = gguf_init_from_file(m.c_str(), gp);
        ASSERT_NE(mg, nullptr);
        double worst = 0;
        size_t n_partial = 0, n_experts = 0;
        for (const auto & [name, it] : got.items) {
            const ggml_tensor * t = ggml_get_tensor(mctx, name.c_str());
            ASSERT_NE(t, nullptr) << name;
            EXPECT_EQ(it.n_per_row, t->ne[0]) << name;
            EXPECT_EQ(it.n_mat, t->ne[2]) << name;
            n_experts += it.n_mat > 1;
            double total = 0;
            bool zero = false;
            for (float c : it.counts) {
                EXPECT_EQ(c, std::floor(c)) << name;
                total += c;
                zero = zero || c == 0;
            }
            EXPECT_EQ(total, it.n_mat == 1 ? 512.0 : 1024.0) << name;
            const auto w = want.items.find(name);
            if (w == want.items.end()) {
                EXPECT_TRUE(zero) << name << ": left out of the .dat, with data for every expert";
                n_partial++;
                continue;
            }
            EXPECT_FALSE(zero) << name;
            const dat::item & di = w->second;
            ASSERT_EQ(di.values.size(), it.sums.size()) << name;
            for (size_t j = 0; j < it.sums.size(); j++) {
                const double md = (double) di.values[j] / di.ncall, rel = std::fabs(it.mean(j) - md) / md;
                worst = std::max(worst, rel);
                EXPECT_LE(rel, 2.5e-7) << name << "[" << j << "]";
            }
        }
        EXPECT_EQ(got.items.size(), want.items.size() + n_partial);
        EXPECT_EQ(n_experts, m == moe ? 6u : 0u) << "ffn_{up,gate,down}_exps of 2 blocks";
        printf("  %s: %zu entries (%zu only in the GGUF file), means within %.2e of the .dat's\n", m.c_str(), got.items.size(),
               n_partial, worst);
        gguf_free(mg);
        ggml_free(mctx);
    }
}

// llama.cpp's .dat files to GGUF and back (--in-file both times): the same entries, ncall and
// value bits, last chunk and dataset (the entries now in name order: GGUF sorts them). In the
// GGUF file a .dat's call is a chunk of the chunk size (no text: -c, else 512): sums = values *
// chunk size and counts = ncall * chunk size, exactly for a power of two. With the model (-m) an
// expert weight's entry is a matrix per expert, without one matrix. A GGUF file read and written
// again keeps its bytes, and so does the .dat written from it.
TEST(Imatrix, DatToGgufAndBack) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    const std::string moe = write_qwen2moe(dir);
    for (const std::string f : {"stories260K.dat", "stories260K-f32-cache.dat", "TinyStories-656K-Q8_0.dat", "qwen2moe-f32-cache.dat"}) {
        SCOPED_TRACE(f);
        const std::string in = ref_dir() + "/" + f, g = dir.path + "/" + f + ".gguf", back = dir.path + "/" + f;
        const std::string m = f == "qwen2moe-f32-cache.dat" ? "-m " + moe + " "
                              : f == "stories260K.dat"      ? "-m " + model_path("stories260K") + " "
                                                            : "";
        const int64_t chunk = f == "stories260K-f32-cache.dat" ? 128 : 512;
        result r = imatrix(m + (chunk == 128 ? "-c 128 " : "") + "--in-file " + in + " -o " + g);
        ASSERT_EQ(r.status, 0) << r.err;
        r = imatrix("--in-file " + g + " -o " + back);
        ASSERT_EQ(r.status, 0) << r.err;
        const dat a = load(in), b = load(back);
        EXPECT_EQ(b.last_chunk, a.last_chunk);
        EXPECT_EQ(b.dataset, a.dataset);
        EXPECT_EQ(b.items.size(), a.items.size());
        const gguf_im gm = load_gguf(g);
        EXPECT_EQ(gm.chunk_size, chunk);
        EXPECT_EQ(gm.chunk_count, a.last_chunk);
        EXPECT_EQ(gm.datasets, std::vector<std::string>{a.dataset});
        EXPECT_EQ(gm.items.size(), a.items.size());
        for (const auto & [name, it] : a.items) {
            ASSERT_EQ(b.items.count(name), 1u) << name;
            const dat::item & bi = b.items.at(name);
            EXPECT_EQ(bi.ncall, it.ncall) << name;
            EXPECT_TRUE(bi.values == it.values) << name;
            ASSERT_EQ(gm.items.count(name), 1u) << name;
            const gguf_im::item & gi = gm.items.at(name);
            EXPECT_EQ(gi.n_mat, !m.empty() && name.find("_exps") != std::string::npos ? 4 : 1) << name;
            for (float c : gi.counts) EXPECT_EQ(c, (float) it.ncall * chunk) << name;
            for (size_t j = 0; j < it.values.size() && j < gi.sums.size(); j++) EXPECT_EQ(gi.sums[j], it.values[j] * chunk) << name;
        }
        r = imatrix("--in-file " + g + " -o " + dir.path + "/again.gguf");
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_TRUE(read_bytes(dir.path + "/again.gguf") == read_bytes(g)) << "GGUF to GGUF";
        r = imatrix("--in-file " + back + " -o " + dir.path + "/again.dat");
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_TRUE(read_bytes(dir.path + "/again.dat") == read_bytes(back)) << ".dat to .dat";
    }
}

// A GGUF half and a .dat half combine to the whole, written in either format: the counts exactly,
// the sums and values to float rounding. Without -c the chunk size is the GGUF in-file's (128),
// the .dat's calls count as such chunks. Two GGUF halves likewise; and a half of either format
// given with --in-file to the run over the other half (-f): the file's data and the run's add up
// in rows (a .dat's call a chunk of the run's 128 tokens).
TEST(Imatrix, GgufAndDatHalvesCombineToTheWhole) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    const std::string base = "-m " + model_path("stories260K") + " -f " + text_path() + " -c 128 -t 2 -ctk f32 -ctv f32 --no-ppl ";
    const std::string p = dir.path + "/";
    for (const char * f : {"whole.dat", "whole.gguf"}) ASSERT_EQ(imatrix(base + "--chunks 4 -o " + p + f).status, 0);
    for (const char * f : {"a.dat", "a.gguf"}) ASSERT_EQ(imatrix(base + "--chunks 2 -o " + p + f).status, 0);
    for (const char * f : {"b.dat", "b.gguf"}) ASSERT_EQ(imatrix(base + "--chunk 2 --chunks 2 -o " + p + f).status, 0);
    const dat whole_dat = load(p + "whole.dat");
    const gguf_im whole_gguf = load_gguf(p + "whole.gguf");
    const struct {
        std::string args, out;
    } cases[] = {
        {"--in-file " + p + "a.gguf --in-file " + p + "b.dat", "ab.dat"},
        {"--in-file " + p + "a.gguf --in-file " + p + "b.dat", "ab.gguf"},
        {"--in-file " + p + "b.dat --in-file " + p + "a.gguf", "ba.gguf"},
        {"--in-file " + p + "a.gguf --in-file " + p + "b.gguf", "ab-gguf.gguf"},
        {base + "--chunk 2 --chunks 2 --in-file " + p + "a.dat", "a-dat-run.gguf"},
        {base + "--chunk 2 --chunks 2 --in-file " + p + "a.gguf", "a-gguf-run.dat"},
    };
    for (const auto & c : cases) {
        SCOPED_TRACE(c.out);
        const result r = imatrix(c.args + " -o " + p + c.out);
        ASSERT_EQ(r.status, 0) << r.err;
        if (is_gguf(p + c.out)) {
            const gguf_im got = load_gguf(p + c.out);
            expect_same(got, whole_gguf, 1e-5, c.out);
            EXPECT_EQ(got.datasets, (std::vector<std::string>{text_path(), text_path()}));
        } else {
            const dat got = load(p + c.out);
            expect_same(got, whole_dat, 1e-5, c.out);
            EXPECT_EQ(got.dataset, text_path());
        }
    }
}

// --output-format decides the format over the name; the periodic outputs are written in the
// output's format (GGUF here: imatrix.chunk_count the chunks so far).
TEST(Imatrix, GgufOutputsAndOutputFormat) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    const std::string base = "-m " + model_path("stories260K") + " -f " + text_path() + " -c 128 --chunks 4 -t 2 --no-ppl ";
    const std::string out = dir.path + "/m.gguf";
    result r = imatrix(base + "--output-frequency 1 --save-frequency 2 -o " + out);
    ASSERT_EQ(r.status, 0) << r.err;
    std::vector<std::string> files = dir.files();
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{"m.gguf", "m.gguf.at_2", "m.gguf.at_4"}));
    const gguf_im at2 = load_gguf(out + ".at_2");
    EXPECT_EQ(at2.chunk_count, 2);
    EXPECT_EQ(at2.items.at("blk.0.attn_q.weight").counts, std::vector<float>{256});
    EXPECT_TRUE(read_bytes(out + ".at_4") == read_bytes(out));
    r = imatrix(base + "--output-format gguf -o " + dir.path + "/g.dat");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(is_gguf(dir.path + "/g.dat"));
    r = imatrix(base + "--output-format dat -o " + dir.path + "/d.gguf");
    ASSERT_EQ(r.status, 0) << r.err;
    dat d;
    EXPECT_TRUE(parse_dat(read_bytes(dir.path + "/d.gguf"), d));
    r = imatrix(base + "--output-format txt -o " + dir.path + "/t.gguf");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("gguf or dat"), std::string::npos) << r.err;
    EXPECT_FALSE(tu::file_exists(dir.path + "/t.gguf"));
}

// Bad GGUF files: a clear message, a non-zero exit, no output file (with a text too, before
// anything is computed: some cases). An entry's in_sum2 without its counts (or the reverse), a key
// missing or of another type, another general.type, counts that are no numbers of rows, a sum that
// is no sum of squares, truncated files, a model instead of an importance matrix.
TEST(Imatrix, BadGgufIsRefused) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    const std::string good = dir.path + "/good.gguf", bad = dir.path + "/bad.gguf", out = dir.path + "/out.gguf";
    ASSERT_EQ(imatrix("-m " + model_path("stories260K") + " --in-file " + ref_dir() + "/stories260K.dat -o " + good).status, 0);
    auto refused = [&](const std::string & needle, bool text = false) {
        for (const std::string & args : {std::string(), "-m " + model_path("stories260K") + " -f " + text_path() + " -c 128 --chunks 1 "}) {
            if (!text && !args.empty()) continue;
            SCOPED_TRACE(needle + ", " + args);
            const result r = imatrix(args + "--in-file " + bad + " -o " + out);
            EXPECT_NE(r.status, 0) << r.err;
            EXPECT_LT(r.status, 128) << "crashed: " << r.err;
            EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
            EXPECT_FALSE(tu::file_exists(out));
            EXPECT_EQ(others(dir, {"good.gguf", "bad.gguf"}).size(), 0u) << "nothing left behind";
        }
    };
    const auto edited = [&](const std::string & drop, const std::function<void(gguf_context *, ggml_context *)> & edit,
                            const std::string & needle, bool text = false) {
        rewrite_gguf(good, bad, drop, edit);
        refused(needle, text);
    };
    const auto none = [](gguf_context *, ggml_context *) {};
    const auto value = [](const char * name, size_t i, float v) {
        return [=](gguf_context *, ggml_context * ctx) { ((float *) ggml_get_tensor(ctx, name)->data)[i] = v; };
    };
    // (the copy unchanged is taken)
    rewrite_gguf(good, bad, "", none);
    ASSERT_EQ(imatrix("--in-file " + bad + " -o " + out).status, 0);
    unlink(out.c_str());
    edited("blk.0.attn_k.weight.counts", none, "no blk.0.attn_k.weight.counts beside its blk.0.attn_k.weight.in_sum2", true);
    edited("blk.1.ffn_up.weight.in_sum2", none, "no blk.1.ffn_up.weight.in_sum2 beside its blk.1.ffn_up.weight.counts");
    const auto set = [&](const std::function<void(gguf_context *)> & f, const std::string & needle, bool text = false) {
        edited("", [&](gguf_context * g, ggml_context *) { f(g); }, needle, text);
    };
    for (const char * key : {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"}) {
        set([&](gguf_context * g) { gguf_remove_key(g, key); }, std::string("it has no ") + key + " key",
            strcmp(key, "imatrix.chunk_count") == 0);
    }
    set([](gguf_context * g) { gguf_set_val_i32(g, "imatrix.chunk_count", 4); }, "imatrix.chunk_count is of type i32, not u32");
    set([](gguf_context * g) { gguf_set_val_str(g, "imatrix.datasets", "x"); }, "imatrix.datasets is not an array of strings");
    set([](gguf_context * g) { gguf_set_val_u32(g, "imatrix.chunk_size", 0); }, "imatrix.chunk_size 0");
    set([](gguf_context * g) { gguf_set_val_str(g, "general.type", "model"); }, "not an importance matrix (general.type 'model')");
    edited("", value("blk.0.attn_k.weight.counts", 0, -512), "a count that is not a number of rows");
    edited("", value("blk.0.attn_k.weight.counts", 0, 0.5f), "a count that is not a number of rows");
    edited("", value("blk.0.attn_k.weight.in_sum2", 3, NAN), "a sum that is not a finite sum of squares");
    edited("", value("blk.0.attn_k.weight.in_sum2", 3, -1), "a sum that is not a finite sum of squares");
    // Truncated: in the header, the keys, the tensor infos, the data.
    const std::string bytes = read_bytes(good);
    for (size_t cut : {(size_t) 2, (size_t) 10, (size_t) 100, bytes.size() / 2, bytes.size() - 33}) {
        write_bytes(bad, bytes.substr(0, cut));
        refused(cut < 4 ? "truncated" : "truncated or malformed", cut == bytes.size() / 2);
    }
    // A model is no importance matrix.
    write_bytes(bad, read_bytes(model_path("stories260K")));
    refused("not an importance matrix");
}

// An expert that saw no token: the GGUF file keeps the entry with count 0 for it (read and
// written again: the same bytes), the .dat leaves the entry out with a warning (as llama.cpp);
// combined with a file where the expert has tokens, the counts add up.
TEST(Imatrix, GgufKeepsAnIdleExpert) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    tu::TempDir dir;
    const std::string moe = write_qwen2moe(dir), p = dir.path + "/";
    ASSERT_EQ(imatrix("-m " + moe + " --in-file " + ref_dir() + "/qwen2moe-f32-cache.dat -o " + p + "full.gguf").status, 0);
    const char * name = "blk.0.ffn_up_exps.weight";
    const gguf_im full = load_gguf(p + "full.gguf");
    const gguf_im::item & f = full.items.at(name);
    ASSERT_EQ(f.n_mat, 4);
    rewrite_gguf(p + "full.gguf", p + "idle.gguf", "", [&](gguf_context *, ggml_context * ctx) {
        ((float *) ggml_get_tensor(ctx, (std::string(name) + ".counts").c_str())->data)[1] = 0;
        float * s = (float *) ggml_get_tensor(ctx, (std::string(name) + ".in_sum2").c_str())->data;
        for (int64_t j = 0; j < f.n_per_row; j++) s[f.n_per_row + j] = 0;
    });
    result r = imatrix("--in-file " + p + "idle.gguf -o " + p + "idle.dat");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("has partial data (75.00%) - skipping"), std::string::npos) << r.err;
    const dat d = load(p + "idle.dat");
    EXPECT_EQ(d.items.count(name), 0u);
    EXPECT_EQ(d.items.size(), full.items.size() - 1);
    r = imatrix("--in-file " + p + "idle.gguf -o " + p + "again.gguf");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(read_bytes(p + "again.gguf") == read_bytes(p + "idle.gguf"));
    r = imatrix("--in-file " + p + "idle.gguf --in-file " + p + "full.gguf -o " + p + "both.gguf");
    ASSERT_EQ(r.status, 0) << r.err;
    const gguf_im both = load_gguf(p + "both.gguf");
    EXPECT_EQ(both.items.at(name).counts, (std::vector<float>{2 * f.counts[0], f.counts[1], 2 * f.counts[2], 2 * f.counts[3]}));
    EXPECT_EQ(both.chunk_count, 2 * full.chunk_count);
}
