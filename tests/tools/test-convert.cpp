// llama-convert, run as a program: a llama2.c checkpoint against llama.cpp's conversion of it
// (tensors, tokenizer, logits), a Hugging Face model against llama.cpp's Q8_0 conversion
// (logits within Q8_0 error, same token ids), and bad inputs (non-zero exit, no output left).
#include "test-util.h"

#include "gguf.h"
#include "llama-json.h"
#include "llama.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>


namespace {

using tu::run_result;
using temp_dir = tu::TempDir;

run_result run_prog(const std::string & prog, const std::string & args) {
    return tu::run_command(std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog + " " + args);
}



std::string models() { return tu::models_dir(); }
bool have(const std::string & p) { return tu::file_exists(p); }

struct gguf_ptr {
    gguf_context * g = nullptr;
    ggml_context * c = nullptr;
    explicit gguf_ptr(const std::string & path) {
        gguf_init_params p = {};
        p.no_alloc = false;
        p.ctx = &c;
        p.use_mmap = true;
        g = gguf_init_from_file(path.c_str(), p);
    }
    ~gguf_ptr() {
        gguf_free(g);
        ggml_free(c);
    }
};

struct logits_file {
    int32_t n_tokens = 0, n_vocab = 0;
    std::vector<int32_t> tokens;
    std::vector<float> logits;
};

bool read_logits(const std::string & path, logits_file & out) {
    std::ifstream f(path, std::ios::binary);
    if (!f.read((char *) &out.n_tokens, 4) || !f.read((char *) &out.n_vocab, 4)) return false;
    out.tokens.resize((size_t) out.n_tokens);
    out.logits.resize((size_t) out.n_tokens * out.n_vocab);
    return (bool) f.read((char *) out.tokens.data(), out.tokens.size() * 4) &&
           (bool) f.read((char *) out.logits.data(), out.logits.size() * 4);
}

double mean_kl(const logits_file & a, const logits_file & b) {
    return tu::mean_kl(a.logits.data(), b.logits.data(), a.n_tokens, a.n_vocab);
}

// Runs llama-logits on model with the reference file's tokens; returns its logits.
logits_file logits_for(const std::string & model, const logits_file & ref, const std::string & out) {
    std::string toks;
    for (int32_t t : ref.tokens) toks += (toks.empty() ? "" : ",") + std::to_string(t);
    const auto r = run_prog("llama-logits", "-m " + model + " --tokens " + toks + " -o " + out + " -t 2");
    EXPECT_EQ(r.status, 0) << r.output;
    logits_file got;
    EXPECT_TRUE(read_logits(out, got));
    return got;
}

// Key value as comparable text (scalars and arrays).
std::string kv_text(const gguf_context * g, const char * key) {
    const int64_t id = gguf_find_key(g, key);
    if (id < 0) return "<absent>";
    std::ostringstream s;
    const auto one = [&](gguf_type t, const void * d) {
        switch (t) {
            case GGUF_TYPE_UINT32: s << *(const uint32_t *) d; break;
            case GGUF_TYPE_INT32: s << *(const int32_t *) d; break;
            case GGUF_TYPE_FLOAT32: s << *(const float *) d; break;
            case GGUF_TYPE_BOOL: s << (int) *(const uint8_t *) d; break;
            default: s << "?"; break;
        }
    };
    const gguf_type t = gguf_get_kv_type(g, id);
    if (t == GGUF_TYPE_STRING) return gguf_get_val_str(g, id);
    if (t != GGUF_TYPE_ARRAY) {
        one(t, gguf_get_val_data(g, id));
        return s.str();
    }
    const gguf_type at = gguf_get_arr_type(g, id);
    for (size_t i = 0; i < gguf_get_arr_n(g, id); i++) {
        if (at == GGUF_TYPE_STRING) s << gguf_get_arr_str(g, id, i) << '\x1f';
        else one(at, (const char *) gguf_get_arr_data(g, id) + i * 4), s << ',';
    }
    return s.str();
}

std::vector<std::string> vocab_texts(const std::string & inp) {
    std::ifstream f(inp, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string all = ss.str(), sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> v;
    size_t p = 0;
    while (p < all.size()) {
        size_t e = all.find(sep, p);
        if (e == std::string::npos) e = all.size();
        v.push_back(all.substr(p, e - p));
        p = e + sep.size();
    }
    return v;
}

std::vector<llama_token> tokenize(const llama_vocab * v, const std::string & text) {
    std::vector<llama_token> out(text.size() + 16);
    const int32_t n = llama_tokenize(v, text.c_str(), (int32_t) text.size(), out.data(), (int32_t) out.size(), true, false);
    out.resize(n < 0 ? 0 : (size_t) n);
    return out;
}

}  // namespace

TEST(Convert, Llama2cMatchesReferenceConversion) {
    const std::string bin = models() + "/stories260K.bin", tok = models() + "/tok512.bin", ref = models() + "/stories260K.gguf";
    if (!have(bin) || !have(tok) || !have(ref)) GTEST_SKIP() << "stories260K files absent";
    temp_dir d;
    const std::string out = d.path + "/s.gguf";
    const auto r = run_prog("llama-convert", "--llama2c " + bin + " --tokenizer " + tok + " -o " + out);
    ASSERT_EQ(r.status, 0) << r.output;
    gguf_ptr a(out), b(ref);
    ASSERT_TRUE(a.g && b.g);
    // Every tensor we write equals the reference's; the reference also stores the shared
    // classifier as output.weight, which must then equal token_embd.
    for (int64_t i = 0; i < gguf_get_n_tensors(a.g); i++) {
        const char * name = gguf_get_tensor_name(a.g, i);
        const int64_t j = gguf_find_tensor(b.g, name);
        ASSERT_GE(j, 0) << name;
        const ggml_tensor * ta = ggml_get_tensor(a.c, name), * tb = ggml_get_tensor(b.c, name);
        EXPECT_EQ(ta->type, tb->type) << name;
        for (int k = 0; k < GGML_MAX_DIMS; k++) EXPECT_EQ(ta->ne[k], tb->ne[k]) << name;
        ASSERT_EQ(ggml_nbytes(ta), ggml_nbytes(tb)) << name;
        EXPECT_EQ(memcmp(ta->data, tb->data, ggml_nbytes(ta)), 0) << name;
    }
    for (int64_t j = 0; j < gguf_get_n_tensors(b.g); j++) {
        const char * name = gguf_get_tensor_name(b.g, j);
        if (gguf_find_tensor(a.g, name) >= 0) continue;
        ASSERT_STREQ(name, "output.weight");
        const ggml_tensor * o = ggml_get_tensor(b.c, name), * e = ggml_get_tensor(a.c, "token_embd.weight");
        EXPECT_EQ(memcmp(o->data, e->data, ggml_nbytes(e)), 0) << "shared classifier";
    }
    for (const char * k : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                           "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                           "tokenizer.ggml.padding_token_id", "tokenizer.ggml.seperator_token_id", "general.architecture",
                           "llama.embedding_length", "llama.feed_forward_length", "llama.block_count", "llama.attention.head_count",
                           "llama.attention.head_count_kv", "llama.rope.dimension_count", "llama.attention.layer_norm_rms_epsilon"}) {
        EXPECT_EQ(kv_text(a.g, k), kv_text(b.g, k)) << k;
    }
    logits_file lref;
    const std::string ref_logits = tu::shared_dir() + "/reference/logits/stories260K.p1.logits";
    if (!read_logits(ref_logits, lref)) return;
    const logits_file got = logits_for(out, lref, d.path + "/l"), on_ref = logits_for(ref, lref, d.path + "/l2");
    ASSERT_EQ(got.logits.size(), on_ref.logits.size());
    EXPECT_EQ(memcmp(got.logits.data(), on_ref.logits.data(), got.logits.size() * 4), 0) << "same logits as on the reference file";
    EXPECT_LT(mean_kl(lref, got), 1e-6);
}

TEST(Convert, HuggingFaceMatchesReference) {
    const std::string dir = models() + "/tinystories-656k", ref = models() + "/TinyStories-656K-Q8_0.gguf";
    const std::string ref_logits = tu::shared_dir() + "/reference/logits/TinyStories-656K-Q8_0.p1.logits";
    const std::string inp = models() + "/vocab/ggml-vocab-llama-spm.gguf.inp";
    if (!have(dir + "/config.json") || !have(ref) || !have(ref_logits)) GTEST_SKIP() << "tinystories-656k files absent";
    temp_dir d;
    const std::string out = d.path + "/t.gguf";
    const auto r = run_prog("llama-convert", "--hf " + dir + " -o " + out + " --outtype f32");
    ASSERT_EQ(r.status, 0) << r.output;
    logits_file lref;
    ASSERT_TRUE(read_logits(ref_logits, lref));
    const logits_file got = logits_for(out, lref, d.path + "/l");
    ASSERT_EQ(got.logits.size(), lref.logits.size());
    const double kl = mean_kl(lref, got);
    EXPECT_LT(kl, 1e-3);
    printf("mean KL vs the Q8_0 reference: %g\n", kl);

    // Q8_0 output too: loads and stays close.
    const std::string out8 = d.path + "/t8.gguf";
    ASSERT_EQ(run_prog("llama-convert", "--hf " + dir + " -o " + out8 + " --outtype q8_0").status, 0);
    EXPECT_LT(mean_kl(lref, logits_for(out8, lref, d.path + "/l8")), 1e-3);

    if (!have(inp)) return;
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * ma = llama_model_load_from_file(out.c_str(), mp), * mb = llama_model_load_from_file(ref.c_str(), mp);
    ASSERT_TRUE(ma && mb);
    int n = 0;
    for (const auto & text : vocab_texts(inp)) {
        const auto ta = tokenize(llama_model_get_vocab(ma), text), tb = tokenize(llama_model_get_vocab(mb), text);
        EXPECT_EQ(ta, tb) << "different ids for '" << text << "'";
        n++;
    }
    EXPECT_GT(n, 40);
    llama_model_free(ma);
    llama_model_free(mb);
}

TEST(Convert, BadInputsFailWithoutOutput) {
    temp_dir d;
    const std::string out = d.path + "/o.gguf";
    auto expect_fail = [&](const std::string & args, const char * what, const char * says = "error") {
        const auto r = run_prog("llama-convert", args + " -o " + out);
        EXPECT_EQ(r.status, 1) << what << ": " << r.output;
        EXPECT_NE(r.output.find(says), std::string::npos) << what << ": " << r.output;
        for (const auto & f : d.files()) EXPECT_EQ(f.find("o.gguf"), std::string::npos) << what << " left " << f;
    };
    expect_fail("--llama2c " + d.path + "/missing.bin --tokenizer " + d.path + "/missing-tok.bin", "missing input");
    expect_fail("--hf " + d.path + "/nodir", "missing HF directory");
    expect_fail("--bogus", "unknown flag", "unknown option '--bogus'");
    const std::string bin = models() + "/stories260K.bin", tok = models() + "/tok512.bin";
    if (have(bin) && have(tok)) {
        expect_fail("--llama2c " + bin + " --tokenizer " + tok + " --outtype q4_7", "bad --outtype", "invalid value for --outtype: 'q4_7'");
        // A checkpoint cut short by one float.
        std::ifstream f(bin, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        const std::string all = ss.str();
        std::ofstream(d.path + "/trunc.bin", std::ios::binary).write(all.data(), (std::streamsize) all.size() - 4);
        expect_fail("--llama2c " + d.path + "/trunc.bin --tokenizer " + tok, "truncated checkpoint");
    }
    // A minimal HF directory: a wrong-shaped tensor, then an unknown architecture.
    const std::string hf = d.path + "/hf", src = models() + "/tinystories-656k";
    if (have(src + "/config.json")) {
        std::system(("mkdir -p " + hf + " && cp " + src + "/tokenizer.json " + src + "/tokenizer_config.json " + hf).c_str());
        std::ofstream(hf + "/config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 2048, "tie_word_embeddings": true})";
        // Every tensor present, but q_proj is [8, 6] instead of [8, 8].
        struct t { const char * n; std::vector<int> s; };
        const std::vector<t> ts = {{"model.embed_tokens.weight", {2048, 8}}, {"model.norm.weight", {8}},
                                   {"model.layers.0.self_attn.q_proj.weight", {8, 6}}, {"model.layers.0.self_attn.k_proj.weight", {8, 8}},
                                   {"model.layers.0.self_attn.v_proj.weight", {8, 8}}, {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
                                   {"model.layers.0.input_layernorm.weight", {8}}, {"model.layers.0.mlp.gate_proj.weight", {16, 8}},
                                   {"model.layers.0.mlp.down_proj.weight", {8, 16}}, {"model.layers.0.mlp.up_proj.weight", {16, 8}},
                                   {"model.layers.0.post_attention_layernorm.weight", {8}}};
        std::string hdr = "{";
        size_t off = 0;
        for (const auto & x : ts) {
            size_t n = 1;
            std::string shape;
            for (int v : x.s) n *= (size_t) v, shape += (shape.empty() ? "" : ",") + std::to_string(v);
            hdr += std::string(hdr.size() > 1 ? "," : "") + "\"" + x.n + "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
                   "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + 4 * n) + "]}";
            off += 4 * n;
        }
        hdr += "}";
        const uint64_t hl = hdr.size();
        std::ofstream st(hf + "/model.safetensors", std::ios::binary);
        st.write((const char *) &hl, 8);
        st << hdr << std::string(off, '\0');
        st.close();
        const auto r = run_prog("llama-convert", "--hf " + hf + " -o " + out);
        EXPECT_NE(r.status, 0);
        EXPECT_NE(r.output.find("q_proj.weight' has shape [8, 6]"), std::string::npos) << r.output;
        expect_fail("--hf " + hf, "wrong shape");
        // Numbers no integer can hold (NaN and Infinity as Python's json writes them, 1e300): a
        // clean error, not an out-of-range conversion (undefined; caught by the sanitizer build).
        for (const char * v : { "NaN", "Infinity", "1e300", "-1", "2.5" }) {
            std::ofstream(hf + "/config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": )" << v
                                               << R"(, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2})";
            expect_fail("--hf " + hf, (std::string("hidden_size ") + v).c_str());
        }
        // The real model's safetensors with its header length one short: the padded JSON still
        // parses, and every tensor would be read one byte early (issue 38); one trailing byte more.
        if (have(src + "/model.safetensors")) {
            std::ifstream in(src + "/model.safetensors", std::ios::binary);
            std::stringstream ss;
            ss << in.rdbuf();
            std::string bytes = ss.str();
            uint64_t hl2;
            memcpy(&hl2, bytes.data(), 8);
            const std::string hf2 = d.path + "/hf2";
            std::system(("mkdir -p " + hf2 + " && cp " + src + "/config.json " + src + "/tokenizer.json " + hf2).c_str());
            for (int variant = 0; variant < 2; variant++) {
                std::string v = bytes;
                if (variant == 0) {
                    ASSERT_EQ(v[8 + hl2 - 1], ' ') << "the header is padded";
                    const uint64_t shorter = hl2 - 1;
                    memcpy(&v[0], &shorter, 8);
                } else {
                    v += '\0';
                }
                std::ofstream(hf2 + "/model.safetensors", std::ios::binary) << v;
                const auto r3 = run_prog("llama-convert", "--hf " + hf2 + " -o " + out);
                EXPECT_NE(r3.status, 0);
                EXPECT_NE(r3.output.find("bad header length or offsets"), std::string::npos) << r3.output;
                expect_fail("--hf " + hf2, variant == 0 ? "header length one short" : "a byte after the data");
            }
        }
        std::ofstream(hf + "/config.json") << R"({"architectures": ["MambaForCausalLM"], "model_type": "mamba"})";
        const auto r2 = run_prog("llama-convert", "--hf " + hf + " -o " + out);
        EXPECT_NE(r2.status, 0);
        EXPECT_NE(r2.output.find("unknown architecture"), std::string::npos) << r2.output;
        expect_fail("--hf " + hf, "unknown architecture");
    }
}

// The 656K model split into two safetensors shards with an index (as large models ship), and
// written as F16 and BF16: the same logits as the single-file F32 conversion, within the
// precision of the output type.
TEST(Convert, ShardedSafetensorsAndHalfPrecisionOutputs) {
    const std::string src = models() + "/tinystories-656k";
    const std::string ref_logits = tu::shared_dir() + "/reference/logits/TinyStories-656K-Q8_0.p1.logits";
    if (!have(src + "/model.safetensors") || !have(ref_logits)) GTEST_SKIP() << "tinystories-656k files absent";
    temp_dir d;
    const std::string dir = d.path + "/sharded";
    ASSERT_EQ(std::system(("mkdir -p " + dir + " && cp " + src + "/*.json " + dir + "/").c_str()), 0);

    // Read the single file: 8-byte header length, JSON header, data.
    std::ifstream in(src + "/model.safetensors", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t hlen = 0;
    memcpy(&hlen, bytes.data(), 8);
    json_value header;
    std::string err;
    ASSERT_TRUE(json_parse(bytes.substr(8, hlen), header, err)) << err;
    const char * data = bytes.data() + 8 + hlen;

    // Alternate tensors between two shards, each with its own header and offsets.
    std::string index = "{\"metadata\": {}, \"weight_map\": {";
    std::string hdr[2] = {"{", "{"}, body[2];
    int k = 0;
    for (const auto & [name, t] : header.obj) {
        if (name == "__metadata__") continue;
        const int s = k++ % 2;
        const json_value * off = t.get("data_offsets");
        const size_t b = (size_t) off->arr[0].num, e = (size_t) off->arr[1].num;
        std::string shape;
        for (const auto & x : t.get("shape")->arr) shape += (shape.empty() ? "" : ",") + x.str;
        if (hdr[s].size() > 1) hdr[s] += ",";
        hdr[s] += "\"" + name + "\":{\"dtype\":\"" + t.get("dtype")->str + "\",\"shape\":[" + shape +
                  "],\"data_offsets\":[" + std::to_string(body[s].size()) + "," + std::to_string(body[s].size() + e - b) + "]}";
        body[s].append(data + b, e - b);
        index += std::string(k > 1 ? "," : "") + "\"" + name + "\": \"model-0000" + std::to_string(s + 1) + "-of-00002.safetensors\"";
    }
    index += "}}";
    for (int s = 0; s < 2; s++) {
        hdr[s] += "}";
        std::ofstream out(dir + "/model-0000" + std::to_string(s + 1) + "-of-00002.safetensors", std::ios::binary);
        const uint64_t n = hdr[s].size();
        out.write((const char *) &n, 8);
        out << hdr[s] << body[s];
    }
    std::ofstream(dir + "/model.safetensors.index.json") << index;

    logits_file lref;
    ASSERT_TRUE(read_logits(ref_logits, lref));
    const std::string f32 = d.path + "/f32.gguf";
    ASSERT_EQ(run_prog("llama-convert", "--hf " + src + " -o " + f32 + " --outtype f32").status, 0);
    const logits_file base = logits_for(f32, lref, d.path + "/lb");
    struct variant { const char * outtype; double max_kl; };
    for (const variant & v : {variant{"f32", 1e-12}, variant{"f16", 1e-5}, variant{"bf16", 1e-3}}) {
        const std::string out = d.path + "/sharded-" + v.outtype + ".gguf";
        const auto r = run_prog("llama-convert", "--hf " + dir + " -o " + out + " --outtype " + v.outtype);
        ASSERT_EQ(r.status, 0) << r.output;
        gguf_ptr g(out);
        ASSERT_TRUE(g.g);
        const int64_t id = gguf_find_tensor(g.g, "blk.0.attn_q.weight");
        ASSERT_GE(id, 0);
        const ggml_type want = std::string(v.outtype) == "f32" ? GGML_TYPE_F32 : std::string(v.outtype) == "f16" ? GGML_TYPE_F16 : GGML_TYPE_BF16;
        EXPECT_EQ(gguf_get_tensor_type(g.g, id), want) << v.outtype;
        EXPECT_EQ(gguf_get_tensor_type(g.g, gguf_find_tensor(g.g, "output_norm.weight")), GGML_TYPE_F32);
        EXPECT_LT(mean_kl(base, logits_for(out, lref, d.path + "/l-" + v.outtype)), v.max_kl) << v.outtype;
    }
}
