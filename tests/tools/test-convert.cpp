// llama-convert, run as a program: a llama2.c checkpoint against llama.cpp's conversion of it
// (tensors, tokenizer, logits), a Hugging Face model against llama.cpp's Q8_0 conversion
// (logits within Q8_0 error, same token ids), and bad inputs (non-zero exit, no output left).
#include "test-util.h"

#include "gguf.h"
#include "llama-json.h"
#include "llama.h"
#include "tiny-models.h"

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

// ---- llama-convert --hf for every family ----------------------------------------------------
// Each tiny model of tests/common/tiny-models.h (the ones test-arch holds to PyTorch and
// llama.cpp), written out as a Hugging Face checkpoint by the names and layouts of transformers'
// modeling files (spelled out here, not taken from the converter's table: llama's Q/K rows in
// rotate-half order, Gemma's norms as w = stored - 1, Phi-3's LongRoPE factors in config.json,
// Mixtral's and Qwen-MoE's experts one matrix each), converted back: the same logits as the GGUF
// written directly (F32: to rounding); bad expert settings in config.json are named.
namespace {

// The HF name of a GGUF tensor of a family, as transformers names it.
std::string hf_name(const std::string & family, const std::string & gguf) {
    const bool gemma = family.rfind("gemma", 0) == 0;
    if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
    if (gguf == "output_norm.weight") return "model.norm.weight";
    if (gguf == "output.weight") return "lm_head.weight";
    const size_t dot = gguf.find('.', 4);
    const std::string layer = gguf.substr(4, dot - 4), rest = gguf.substr(dot + 1), h = "model.layers." + layer + ".";
    static const std::vector<std::pair<std::string, std::string>> names = {
        {"attn_norm.weight", "input_layernorm.weight"}, {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"}, {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"}, {"attn_k.bias", "self_attn.k_proj.bias"}, {"attn_v.bias", "self_attn.v_proj.bias"},
        {"attn_qkv.weight", "self_attn.qkv_proj.weight"}, {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"}, {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"}, {"ffn_down.weight", "mlp.down_proj.weight"},
        {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"}, {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
        {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"}, {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
    };
    // Mixtral's router and experts (w1 gate, w3 up, w2 down); Qwen-MoE's; "%d" for the expert.
    const bool mixtral = family == "llama_moe";
    if (rest == "ffn_gate_inp.weight") return h + (mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight");
    if (rest == "ffn_gate_exps.weight") return h + (mixtral ? "block_sparse_moe.experts.%d.w1.weight" : "mlp.experts.%d.gate_proj.weight");
    if (rest == "ffn_up_exps.weight") return h + (mixtral ? "block_sparse_moe.experts.%d.w3.weight" : "mlp.experts.%d.up_proj.weight");
    if (rest == "ffn_down_exps.weight") return h + (mixtral ? "block_sparse_moe.experts.%d.w2.weight" : "mlp.experts.%d.down_proj.weight");
    if (rest == "ffn_norm.weight") return h + (gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
    if (rest == "ffn_up.weight") return h + (family.rfind("phi3", 0) == 0 ? "mlp.gate_up_proj.weight" : "mlp.up_proj.weight");
    for (const auto & n : names) {
        if (n.first == rest) return h + n.second;
    }
    return "";
}

const char * hf_class(const std::string & family) {
    if (family == "llama") return "LlamaForCausalLM";
    if (family == "qwen2") return "Qwen2ForCausalLM";
    if (family == "qwen3") return "Qwen3ForCausalLM";
    if (family == "gemma2") return "Gemma2ForCausalLM";
    if (family == "gemma3") return "Gemma3ForCausalLM";
    if (family == "llama_moe") return "MixtralForCausalLM";
    if (family == "qwen2moe") return "Qwen2MoeForCausalLM";
    if (family == "qwen3moe") return "Qwen3MoeForCausalLM";
    return "Phi3ForCausalLM";
}

}  // namespace

TEST(Convert, HfCheckpointsOfEveryFamily) {
    const std::string src = models() + "/tinystories-656k", donor = models() + "/TinyStories-656K-Q8_0.gguf";
    if (!have(src + "/tokenizer.json") || !have(donor)) GTEST_SKIP() << "tinystories-656k files absent";
    temp_dir d;
    for (const tiny::spec & s : tiny::specs()) {
        if (llm_arch_get(s.arch).encoder) continue;  // BertModel checkpoints: not converted yet
        SCOPED_TRACE(s.name);
        const std::string direct = d.path + "/" + s.name + ".gguf", hf = d.path + "/" + s.name + "-hf";
        ASSERT_TRUE(tiny::write(s, direct, donor));
        std::system(("mkdir -p " + hf + " && cp " + src + "/tokenizer.json " + src + "/tokenizer_config.json " + hf).c_str());
        ggml_context * data = nullptr;
        gguf_init_params ip = {false, &data, false};
        gguf_context * g = gguf_init_from_file(direct.c_str(), ip);
        ASSERT_NE(g, nullptr);
        const bool gemma = s.name.rfind("gemma", 0) == 0, llama = s.arch == LLM_ARCH_LLAMA;
        const uint32_t head = s.head_k ? s.head_k : s.n_embd / s.n_head;
        // The safetensors file: every tensor in F32, names and layouts as transformers has them.
        std::string hdr = "{", blob;
        for (ggml_tensor * t = ggml_get_first_tensor(data); t; t = ggml_get_next_tensor(data, t)) {
            const std::string name = t->name;
            if (name.rfind("rope_factors", 0) == 0) continue;  // config.json's
            const std::string hn = hf_name(s.name, name);
            ASSERT_FALSE(hn.empty()) << name;
            std::vector<float> v((const float *) t->data, (const float *) t->data + ggml_nelements(t));
            const bool is_norm = name.find("norm") != std::string::npos;
            if (gemma && is_norm) for (float & x : v) x -= 1.0f;
            if (llama && (name.find("attn_q.weight") != std::string::npos || name.find("attn_k.weight") != std::string::npos)) {
                // GGUF row i * 2 + j of a head is HF row j * (hd / 2) + i.
                std::vector<float> u(v.size());
                const int64_t cols = t->ne[0], rows = t->ne[1];
                for (int64_t r = 0; r < rows; r++) {
                    const int64_t hh = r / head, w = r % head, hf_row = hh * head + (w % 2) * (head / 2) + w / 2;
                    std::copy(v.begin() + r * cols, v.begin() + (r + 1) * cols, u.begin() + hf_row * cols);
                }
                v.swap(u);
            }
            auto put = [&](const std::string & n, const std::string & shape, const float * x, size_t count) {
                hdr += std::string(hdr.size() > 1 ? "," : "") + "\"" + n + "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
                       "],\"data_offsets\":[" + std::to_string(blob.size()) + "," + std::to_string(blob.size() + 4 * count) + "]}";
                blob.append((const char *) x, 4 * count);
            };
            const std::string rows_cols = std::to_string(t->ne[1]) + "," + std::to_string(t->ne[0]);
            if (t->ne[2] > 1) {  // stacked experts: one matrix each
                const size_t per = (size_t) (t->ne[0] * t->ne[1]);
                for (int64_t e = 0; e < t->ne[2]; e++) {
                    const size_t at = hn.find("%d");
                    put(hn.substr(0, at) + std::to_string(e) + hn.substr(at + 2), rows_cols, v.data() + e * per, per);
                }
            } else if (name.find("ffn_gate_inp_shexp") != std::string::npos) {
                put(hn, "1," + std::to_string(t->ne[0]), v.data(), v.size());  // a Linear(n_embd, 1)
            } else {
                put(hn, t->ne[1] > 1 ? rows_cols : std::to_string(t->ne[0]), v.data(), v.size());
            }
        }
        hdr += "}";
        const uint64_t hl = hdr.size();
        std::ofstream st(hf + "/model.safetensors", std::ios::binary);
        st.write((const char *) &hl, 8);
        st << hdr << blob;
        st.close();
        std::ostringstream cfg;
        cfg << "{\"architectures\": [\"" << hf_class(s.name) << "\"], \"hidden_size\": " << s.n_embd
            << ", \"intermediate_size\": " << s.n_ff << ", \"num_hidden_layers\": " << s.n_layer
            << ", \"num_attention_heads\": " << s.n_head << ", \"num_key_value_heads\": " << s.n_head_kv
            << ", \"vocab_size\": 2048, \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-6, \"rope_theta\": " << s.freq_base
            << ", \"tie_word_embeddings\": " << (s.tied ? "true" : "false");
        if (s.head_k) cfg << ", \"head_dim\": " << s.head_k;
        if (s.n_expert) {
            cfg << ", \"" << (s.arch == LLM_ARCH_LLAMA ? "num_local_experts" : "num_experts") << "\": " << s.n_expert
                << ", \"num_experts_per_tok\": " << s.n_expert_used;
            if (s.n_ff_exp) cfg << ", \"moe_intermediate_size\": " << s.n_ff_exp;
            if (s.n_ff_shexp) cfg << ", \"shared_expert_intermediate_size\": " << s.n_ff_shexp;
            if (s.arch != LLM_ARCH_LLAMA) cfg << ", \"norm_topk_prob\": " << (s.arch == LLM_ARCH_QWEN3MOE ? "true" : "false");
        }
        if (s.n_swa) cfg << ", \"sliding_window\": " << s.n_swa;
        if (gemma) cfg << ", \"query_pre_attn_scalar\": " << head;
        if (s.attn_softcap > 0) cfg << ", \"attn_logit_softcapping\": " << s.attn_softcap << ", \"final_logit_softcapping\": " << s.final_softcap;
        if (s.rope_linear > 0) cfg << ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": " << s.rope_linear << "}";
        if (s.longrope) {
            auto factors = [&](const char * name) {
                const ggml_tensor * t = ggml_get_tensor(data, name);
                std::string out = "[";
                for (int64_t i = 0; i < t->ne[0]; i++) {
                    char buf[32];
                    snprintf(buf, sizeof(buf), "%.9g", ((const float *) t->data)[i]);
                    out += (i ? "," : "") + std::string(buf);
                }
                return out + "]";
            };
            // attn_factor sqrt(1 + ln(256/16) / ln(16)) = sqrt(2): the tiny model's 1.19 is not
            // what a checkpoint implies, so the direct file gets the converter's value below.
            cfg << ", \"original_max_position_embeddings\": 16, \"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": "
                << factors("rope_factors_long.weight") << ", \"short_factor\": " << factors("rope_factors_short.weight") << "}";
        }
        cfg << "}";
        std::ofstream(hf + "/config.json") << cfg.str();
        std::string direct_file = direct;
        if (s.longrope) {
            // The direct file with the attention factor a checkpoint of this shape implies.
            gguf_set_val_f32(g, "phi3.rope.scaling.attn_factor", (float) std::sqrt(2.0));
            direct_file = d.path + "/" + s.name + "-fixed.gguf";
            ASSERT_TRUE(gguf_write_to_file(g, direct_file.c_str(), false));
        }
        gguf_free(g);
        ggml_free(data);

        const std::string out = d.path + "/" + s.name + "-converted.gguf";
        const auto r = run_prog("llama-convert", "--hf " + hf + " -o " + out + " --outtype f32");
        ASSERT_EQ(r.status, 0) << r.output;
        EXPECT_EQ(r.output.find("ignoring tensor"), std::string::npos) << r.output;
        logits_file ref;
        ref.tokens = {1, 400, 30, 12, 200, 7, 99, 300, 5, 17, 250, 31, 77, 420, 3, 66, 128, 256, 9, 44, 333, 101, 18, 480};
        const logits_file a = logits_for(direct_file, ref, d.path + "/a.logits");
        const logits_file b = logits_for(out, ref, d.path + "/b.logits");
        ASSERT_EQ(a.logits.size(), b.logits.size());
        ASSERT_FALSE(a.logits.empty());
        const double kl = mean_kl(a, b);
        printf("[ %s ] converted from HF vs written directly: mean KL %.3g\n", s.name.c_str(), kl);
        EXPECT_LT(kl, 1e-9);

        if (s.n_expert) {
            // Bad expert settings: named, and no file written.
            const std::string n_key = s.arch == LLM_ARCH_LLAMA ? "num_local_experts" : "num_experts";
            const std::string good = cfg.str(), used = "\"num_experts_per_tok\": " + std::to_string(s.n_expert_used),
                              count = "\"" + n_key + "\": " + std::to_string(s.n_expert);
            struct bad_cfg { std::string from, to, message; };
            std::vector<bad_cfg> bads = {
                {used, "\"num_experts_per_tok\": " + std::to_string(s.n_expert + 1), "num_experts_per_tok"},
                {count, "\"" + n_key + "\": " + std::to_string(s.n_expert + 1), "config.json implies [" + std::to_string(s.n_expert + 1) + ", "},  // the router, read first
            };
            if (s.arch == LLM_ARCH_QWEN2MOE) bads.push_back({"\"norm_topk_prob\": false", "\"norm_topk_prob\": true", "norm_topk_prob"});
            for (const bad_cfg & b : bads) {
                std::string text = good;
                const size_t at = text.find(b.from);
                ASSERT_NE(at, std::string::npos) << b.from;
                text.replace(at, b.from.size(), b.to);
                std::ofstream(hf + "/config.json") << text;
                const std::string bad_out = d.path + "/" + s.name + "-bad.gguf";
                const auto rb = run_prog("llama-convert", "--hf " + hf + " -o " + bad_out + " --outtype f32");
                EXPECT_NE(rb.status, 0) << b.to;
                EXPECT_NE(rb.output.find(b.message), std::string::npos) << b.to << ": " << rb.output;
                EXPECT_FALSE(have(bad_out)) << b.to;
            }
        }
    }
}

namespace {

// BertForMaskedLM's name of a GGUF tensor of the bert family (transformers' modeling_bert).
std::string bert_hf_name(const std::string & gguf) {
    static const std::vector<std::pair<std::string, std::string>> globals = {
        {"token_embd.weight", "embeddings.word_embeddings.weight"}, {"token_types.weight", "embeddings.token_type_embeddings.weight"},
        {"position_embd.weight", "embeddings.position_embeddings.weight"}, {"token_embd_norm.weight", "embeddings.LayerNorm.weight"},
        {"token_embd_norm.bias", "embeddings.LayerNorm.bias"},
    };
    static const std::vector<std::pair<std::string, std::string>> layer = {
        {"attn_q", "attention.self.query"}, {"attn_k", "attention.self.key"}, {"attn_v", "attention.self.value"},
        {"attn_output", "attention.output.dense"}, {"attn_output_norm", "attention.output.LayerNorm"},
        {"ffn_up", "intermediate.dense"}, {"ffn_down", "output.dense"}, {"layer_output_norm", "output.LayerNorm"},
    };
    for (const auto & g : globals) {
        if (g.first == gguf) return "bert." + g.second;
    }
    const size_t dot = gguf.find('.', 4), last = gguf.rfind('.');
    const std::string il = gguf.substr(4, dot - 4), kind = gguf.substr(dot + 1, last - dot - 1), suffix = gguf.substr(last);
    for (const auto & l : layer) {
        if (l.first == kind) return "bert.encoder.layer." + il + "." + l.second + suffix;
    }
    return "";
}

// A WordPiece tokenizer.json (BERT's five specials, a few words and pieces, fillers up to n_vocab)
// and tokenizer_config.json, as bert-base-uncased's checkpoints have them.
void write_wordpiece_tokenizer(const std::string & hf, int64_t n_vocab) {
    // The vocabulary: BERT's five specials, a few words and pieces, fillers.
    std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "un", "##aff", "##able"};
    while ((int64_t) vocab.size() < n_vocab) vocab.push_back("w" + std::to_string(vocab.size()));
    std::string tj = "{\"version\": \"1.0\", \"added_tokens\": [";
    for (int i = 0; i < 5; i++) {
        tj += std::string(i ? "," : "") + "{\"id\": " + std::to_string(i) + ", \"content\": \"" + vocab[i] + "\", \"special\": true}";
    }
    tj += "], \"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": true}, \"model\": {\"type\": \"WordPiece\", "
          "\"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\", \"vocab\": {";
    for (size_t i = 0; i < vocab.size(); i++) tj += std::string(i ? "," : "") + "\"" + vocab[i] + "\": " + std::to_string(i);
    tj += "}}}";
    std::ofstream(hf + "/tokenizer.json") << tj;
    std::ofstream(hf + "/tokenizer_config.json")
        << "{\"cls_token\": \"[CLS]\", \"sep_token\": \"[SEP]\", \"unk_token\": \"[UNK]\", \"pad_token\": \"[PAD]\", \"mask_token\": \"[MASK]\"}";
}

// An F32 safetensors file put together tensor by tensor (HF's row-major shapes).
struct st_file {
    std::string hdr = "{", blob;
    void put(const std::string & name, const std::string & shape, const float * x, size_t count) {
        hdr += std::string(hdr.size() > 1 ? "," : "") + "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
               "],\"data_offsets\":[" + std::to_string(blob.size()) + "," + std::to_string(blob.size() + 4 * count) + "]}";
        blob.append((const char *) x, 4 * count);
    }
    // A GGUF F32 tensor under its HF name, [ne1, ne0] (or [ne0] for a vector).
    void put(const std::string & name, const ggml_tensor * t) {
        put(name, t->ne[1] > 1 ? std::to_string(t->ne[1]) + "," + std::to_string(t->ne[0]) : std::to_string(t->ne[0]),
            (const float *) t->data, (size_t) ggml_nelements(t));
    }
    void write(const std::string & path) const {
        const std::string h = hdr + "}";
        const uint64_t hl = h.size();
        std::ofstream st(path, std::ios::binary);
        st.write((const char *) &hl, 8);
        st << h << blob;
    }
};

// A sentence-transformers layout: the model in the top folder, pooling_json in 1_Pooling.
void write_sentence_transformers(const std::string & hf, const std::string & pooling_json) {
    std::ofstream(hf + "/modules.json") << "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"}, "
                                           "{\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}]";
    std::ofstream(hf + "/1_Pooling/config.json") << pooling_json;
}

// Every tensor of src is in conv, bit for bit, and conv has no others.
void expect_same_tensors(const gguf_ptr & src, const gguf_ptr & conv) {
    int n_tensors = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(src.c); t; t = ggml_get_next_tensor(src.c, t), n_tensors++) {
        const ggml_tensor * c = ggml_get_tensor(conv.c, t->name);
        ASSERT_NE(c, nullptr) << t->name;
        ASSERT_TRUE(ggml_are_same_shape(t, c)) << t->name;
        EXPECT_EQ(memcmp(t->data, c->data, ggml_nbytes(t)), 0) << t->name;
    }
    EXPECT_EQ(gguf_get_n_tensors(conv.g), n_tensors);
}

// config.json with each (from, to) replacement in turn: refused as "not supported", nothing written.
void expect_configs_refused(const std::string & hf, const std::string & cfg, const std::string & dir,
                            const std::vector<std::pair<std::string, std::string>> & bad_cfgs) {
    for (const auto & bad : bad_cfgs) {
        SCOPED_TRACE(bad.second);
        std::string c = cfg;
        c.replace(c.find(bad.first), bad.first.size(), bad.second);
        std::ofstream(hf + "/config.json") << c;
        const std::string bad_out = dir + "/bad.gguf";
        const auto rb = run_prog("llama-convert", "--hf " + hf + " -o " + bad_out + " --outtype f32");
        EXPECT_NE(rb.status, 0);
        EXPECT_NE(rb.output.find("not supported"), std::string::npos) << rb.output;
        EXPECT_FALSE(have(bad_out));
    }
}

}  // namespace

// A sentence-transformers BERT checkpoint (BertForMaskedLM's "bert." names, a pooler and an MLM
// head to leave out, a WordPiece tokenizer.json, CLS pooling in 1_Pooling): the tensors come out
// as the tiny model has them, with llama.cpp's keys and its phantom-space vocabulary.
TEST(Convert, HfBertCheckpoint) {
    const std::string donor = models() + "/stories260K.gguf";
    if (!have(donor)) GTEST_SKIP() << "stories260K.gguf absent";
    tiny::spec s;
    for (const tiny::spec & t : tiny::specs()) {
        if (t.arch == LLM_ARCH_BERT) s = t;
    }
    ASSERT_EQ(s.name, "bert");
    temp_dir d;
    const std::string direct = d.path + "/bert.gguf", hf = d.path + "/bert-hf";
    ASSERT_TRUE(tiny::write(s, direct, donor));
    ASSERT_EQ(std::system(("mkdir -p " + hf + "/1_Pooling").c_str()), 0);
    gguf_ptr src(direct);
    ASSERT_NE(src.g, nullptr);
    st_file st;
    int64_t n_vocab = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(src.c); t; t = ggml_get_next_tensor(src.c, t)) {
        const std::string hn = bert_hf_name(t->name);
        ASSERT_FALSE(hn.empty()) << t->name;
        if (std::string(t->name) == "token_embd.weight") n_vocab = t->ne[1];
        st.put(hn, t);
    }
    const std::vector<float> extra(s.n_embd * s.n_embd, 0.5f);
    st.put("bert.pooler.dense.weight", std::to_string(s.n_embd) + "," + std::to_string(s.n_embd), extra.data(), extra.size());
    st.put("cls.predictions.transform.dense.bias", std::to_string(s.n_embd), extra.data(), s.n_embd);
    st.write(hf + "/model.safetensors");
    std::ostringstream cfg;
    cfg << "{\"architectures\": [\"BertModel\"], \"hidden_size\": " << s.n_embd << ", \"intermediate_size\": " << s.n_ff
        << ", \"num_hidden_layers\": " << s.n_layer << ", \"num_attention_heads\": " << s.n_head << ", \"vocab_size\": " << n_vocab
        << ", \"max_position_embeddings\": 256, \"type_vocab_size\": 2, \"layer_norm_eps\": 1e-12, \"hidden_act\": \"gelu\", "
           "\"position_embedding_type\": \"absolute\"}";
    std::ofstream(hf + "/config.json") << cfg.str();
    write_wordpiece_tokenizer(hf, n_vocab);
    write_sentence_transformers(hf, "{\"word_embedding_dimension\": " + std::to_string(s.n_embd) +
                                        ", \"pooling_mode_cls_token\": true, \"pooling_mode_mean_tokens\": false}");

    const std::string out = d.path + "/bert-converted.gguf";
    const auto r = run_prog("llama-convert", "--hf " + hf + " -o " + out + " --outtype f32");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output.find("ignoring tensor"), std::string::npos) << r.output;

    // The weights, bit for bit.
    gguf_ptr conv(out);
    ASSERT_NE(conv.g, nullptr);
    expect_same_tensors(src, conv);
    // The keys llama.cpp's converter writes for it.
    auto u32 = [&](const char * k) { const int64_t id = gguf_find_key(conv.g, k); return id < 0 ? -1 : (int64_t) gguf_get_val_u32(conv.g, id); };
    EXPECT_EQ(u32("bert.pooling_type"), 2);
    EXPECT_EQ(u32("tokenizer.ggml.token_type_count"), 2);
    EXPECT_EQ(u32("tokenizer.ggml.bos_token_id"), 2);
    EXPECT_EQ(u32("tokenizer.ggml.seperator_token_id"), 3);
    const int64_t causal = gguf_find_key(conv.g, "bert.attention.causal");
    ASSERT_GE(causal, 0);
    EXPECT_FALSE(gguf_get_val_bool(conv.g, causal));
    EXPECT_STREQ(gguf_get_val_str(conv.g, gguf_find_key(conv.g, "tokenizer.ggml.model")), "bert");
    const int64_t toks = gguf_find_key(conv.g, "tokenizer.ggml.tokens");
    EXPECT_STREQ(gguf_get_arr_str(conv.g, toks, 5), "\xe2\x96\x81hello");
    EXPECT_STREQ(gguf_get_arr_str(conv.g, toks, 7), "s");
    EXPECT_STREQ(gguf_get_arr_str(conv.g, toks, 2), "[CLS]");

    // The model loads, tokenizes as BERT does and embeds with CLS pooling.
    llama_model_params mp = llama_model_default_params();
    llama_model * m = llama_model_load_from_file(out.c_str(), mp);
    ASSERT_NE(m, nullptr);
    const llama_vocab * v = llama_model_get_vocab(m);
    llama_token ids[16];
    const int n = llama_tokenize(v, "Hello worlds, unaffable", 23, ids, 16, true, false);
    EXPECT_EQ(std::vector<llama_token>(ids, ids + std::max(n, 0)), (std::vector<llama_token>{2, 5, 6, 7, 1, 8, 9, 10, 3}));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 32;
    cp.embeddings = true;
    llama_context * ctx = llama_init_from_model(m, cp);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(llama_pooling_type(ctx), LLAMA_POOLING_TYPE_CLS);
    ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(ids, n)), 0);
    EXPECT_NE(llama_get_embeddings_seq(ctx, 0), nullptr);
    llama_free(ctx);
    llama_model_free(m);

    // What the runtime does not compute is refused: another activation, relative positions.
    expect_configs_refused(hf, cfg.str(), d.path, {{"\"gelu\"", "\"relu\""}, {"\"absolute\"", "\"relative_key\""}});
}

// A nomic-embed-text checkpoint (NomicBertModel's names, GPT-2's config keys, mean pooling in
// 1_Pooling): the tensors come out bit for bit, with the keys llama.cpp's converter writes (RoPE
// base from rotary_emb_base, 2048 positions), and the converted model embeds as the tiny model
// does; what the runtime does not compute (another activation, partial or interleaved rotation,
// biases) is refused.
TEST(Convert, HfNomicBertCheckpoint) {
    const std::string donor = models() + "/stories260K.gguf";
    if (!have(donor)) GTEST_SKIP() << "stories260K.gguf absent";
    tiny::spec s;
    for (const tiny::spec & t : tiny::specs()) {
        if (t.arch == LLM_ARCH_NOMIC_BERT) s = t;
    }
    ASSERT_EQ(s.name, "nomic_bert");
    temp_dir d;
    const std::string direct = d.path + "/nomic.gguf", hf = d.path + "/nomic-hf";
    ASSERT_TRUE(tiny::write(s, direct, donor));
    ASSERT_EQ(std::system(("mkdir -p " + hf + "/1_Pooling").c_str()), 0);
    gguf_ptr src(direct);
    ASSERT_NE(src.g, nullptr);
    // nomic-ai's modeling_hf_nomic_bert names.
    const std::vector<std::pair<std::string, std::string>> globals = {
        {"token_embd.weight", "embeddings.word_embeddings.weight"}, {"token_types.weight", "embeddings.token_type_embeddings.weight"},
        {"token_embd_norm.weight", "emb_ln.weight"}, {"token_embd_norm.bias", "emb_ln.bias"}};
    const std::vector<std::pair<std::string, std::string>> layer = {
        {"attn_qkv", "attn.Wqkv"}, {"attn_output", "attn.out_proj"}, {"attn_output_norm", "norm1"},
        {"ffn_up", "mlp.fc11"}, {"ffn_gate", "mlp.fc12"}, {"ffn_down", "mlp.fc2"}, {"layer_output_norm", "norm2"}};
    auto hf_name = [&](const std::string & gguf) -> std::string {
        for (const auto & g : globals) {
            if (g.first == gguf) return g.second;
        }
        const size_t dot = gguf.find('.', 4), last = gguf.rfind('.');
        const std::string il = gguf.substr(4, dot - 4), kind = gguf.substr(dot + 1, last - dot - 1);
        for (const auto & l : layer) {
            if (l.first == kind) return "encoder.layers." + il + "." + l.second + gguf.substr(last);
        }
        return "";
    };
    st_file st;
    int64_t n_vocab = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(src.c); t; t = ggml_get_next_tensor(src.c, t)) {
        const std::string hn = hf_name(t->name);
        ASSERT_FALSE(hn.empty()) << t->name;
        if (std::string(t->name) == "token_embd.weight") n_vocab = t->ne[1];
        st.put(hn, t);
    }
    st.write(hf + "/model.safetensors");
    std::ostringstream cfg;
    cfg << "{\"architectures\": [\"NomicBertModel\"], \"model_type\": \"nomic_bert\", \"n_embd\": " << s.n_embd
        << ", \"n_inner\": " << s.n_ff << ", \"n_layer\": " << s.n_layer << ", \"n_head\": " << s.n_head
        << ", \"vocab_size\": " << n_vocab
        << ", \"n_positions\": 8192, \"type_vocab_size\": 2, \"layer_norm_epsilon\": 1e-12, \"activation_function\": \"swiglu\", "
           "\"causal\": false, \"qkv_proj_bias\": false, \"mlp_fc1_bias\": false, \"mlp_fc2_bias\": false, \"prenorm\": false, "
           "\"rotary_emb_fraction\": 1.0, \"rotary_emb_interleaved\": false, \"rotary_emb_scale_base\": null, \"rotary_emb_base\": 1000}";
    std::ofstream(hf + "/config.json") << cfg.str();
    write_wordpiece_tokenizer(hf, n_vocab);
    write_sentence_transformers(hf, "{\"word_embedding_dimension\": " + std::to_string(s.n_embd) + ", \"pooling_mode_mean_tokens\": true}");

    const std::string out = d.path + "/nomic-converted.gguf";
    const auto r = run_prog("llama-convert", "--hf " + hf + " -o " + out + " --outtype f32");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output.find("ignoring tensor"), std::string::npos) << r.output;
    gguf_ptr conv(out);
    ASSERT_NE(conv.g, nullptr);
    expect_same_tensors(src, conv);
    auto u32 = [&](const char * k) { const int64_t id = gguf_find_key(conv.g, k); return id < 0 ? -1 : (int64_t) gguf_get_val_u32(conv.g, id); };
    EXPECT_EQ(u32("nomic-bert.pooling_type"), 1);
    EXPECT_EQ(u32("nomic-bert.context_length"), 2048);
    EXPECT_EQ(u32("nomic-bert.embedding_length"), s.n_embd);
    EXPECT_EQ(u32("nomic-bert.feed_forward_length"), s.n_ff);
    const int64_t base = gguf_find_key(conv.g, "nomic-bert.rope.freq_base");
    ASSERT_GE(base, 0);
    EXPECT_EQ(gguf_get_val_f32(conv.g, base), 1000.0f);
    EXPECT_STREQ(gguf_get_val_str(conv.g, gguf_find_key(conv.g, "tokenizer.ggml.model")), "bert");

    // The converted model's pooled embedding equals the tiny model's (same weights, same keys).
    auto embed = [](const std::string & path, std::vector<float> & e) {
        llama_model * m = llama_model_load_from_file(path.c_str(), llama_model_default_params());
        ASSERT_NE(m, nullptr);
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 32;
        cp.embeddings = true;
        cp.pooling_type = LLAMA_POOLING_TYPE_MEAN;
        llama_context * ctx = llama_init_from_model(m, cp);
        ASSERT_NE(ctx, nullptr);
        llama_token ids[] = {2, 5, 6, 7, 9, 3};
        ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(ids, 6)), 0);
        const float * p = llama_get_embeddings_seq(ctx, 0);
        ASSERT_NE(p, nullptr);
        e.assign(p, p + llama_model_n_embd(m));
        llama_free(ctx);
        llama_model_free(m);
    };
    std::vector<float> a, b;
    embed(direct, a);
    embed(out, b);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(a, b);

    expect_configs_refused(hf, cfg.str(), d.path,
                           {{"\"swiglu\"", "\"gelu\""}, {"\"rotary_emb_fraction\": 1.0", "\"rotary_emb_fraction\": 0.5"},
                            {"\"rotary_emb_interleaved\": false", "\"rotary_emb_interleaved\": true"},
                            {"\"qkv_proj_bias\": false", "\"qkv_proj_bias\": true"}});
}
