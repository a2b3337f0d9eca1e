// make-app-seeds: writes the seed inputs of fuzz-adapter, fuzz-checkpoint, fuzz-finetune-data and
// fuzz-llama2c (CORPUS_DIR/<target>/, valid inputs in each harness's format) and their
// regression inputs (REGRESSION_DIR/<target>/, named after what once broke or must be refused).
// Adapters and checkpoints are made for the tiny llama of fuzz/corpus/fuzz-model.
// Usage: fuzz-make-app-seeds CORPUS_DIR REGRESSION_DIR (fuzz/corpus tests/data/fuzz-regressions)
#include "fuzz-common.h"

#include "finetune-checkpoint.h"
#include "llama-adapter.h"
#include "llama-safetensors.h"

#include "gguf.h"

#include <climits>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

namespace {

bool ok = true;

// A string literal with its NUL bytes (but not the terminating one).
template <size_t N> std::string bin(const char (&s)[N]) { return std::string(s, N - 1); }

std::string read_all(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void put(const std::string & dir, const std::string & name, const std::string & bytes) {
    mkdir(dir.c_str(), 0777);
    std::ofstream f(dir + "/" + name, std::ios::binary);
    f.write(bytes.data(), (std::streamsize) bytes.size());
    if (!f) {
        fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
        ok = false;
    }
}

void die(const std::string & what) {
    fprintf(stderr, "fuzz-make-app-seeds: %s\n", what.c_str());
    exit(1);
}

// Small deterministic values in every A and B.
void fill(llama_adapter_lora & ad, uint32_t seed) {
    for (auto & kv : ad.weights) {
        for (ggml_tensor * t : { kv.second.a, kv.second.b }) {
            float * v = (float *) t->data;
            for (int64_t i = 0; i < ggml_nelements(t); i++) {
                seed = seed * 1664525u + 1013904223u;
                v[i] = ((seed >> 8) / 16777216.0f - 0.5f) * 0.1f;
            }
        }
    }
}

void make(llama_adapter_lora & ad, const std::vector<std::string> & targets, int32_t r, float alpha, uint32_t seed) {
    std::string err;
    if (!llama_adapter_lora_create(ad, fuzz::tiny_llama(), targets, r, alpha, err)) die(err);
    fill(ad, seed);
}

// fuzz-adapter's inputs: mode 0 + GGUF, or mode 1 + u16 config length + config + safetensors.
std::string gguf_input(const llama_adapter_lora & ad, ggml_type type, const fuzz::temp_dir & tmp) {
    std::string err;
    const std::string p = tmp.path + "/a.gguf";
    if (!llama_adapter_lora_save_gguf(ad, fuzz::tiny_llama(), p, type, err)) die(err);
    return std::string(1, '\0') + read_all(p);
}

std::string peft_input(const std::string & config, const std::string & st) {
    const size_t n = config.size();
    return std::string("\x01", 1) + (char) (n & 0xff) + (char) (n >> 8) + config + st;
}

std::string replace(std::string s, const std::string & from, const std::string & to) {
    const size_t at = s.find(from);
    if (at == std::string::npos) die("'" + from + "' not found");
    return s.replace(at, from.size(), to);
}

// The PEFT directory of ad, in tmp/peft.
void save_peft(const llama_adapter_lora & ad, const fuzz::temp_dir & tmp, std::string & config, std::string & st) {
    std::string err;
    const std::string dir = tmp.path + "/peft";
    if (!llama_adapter_lora_save_peft(ad, fuzz::tiny_llama(), dir, err)) die(err);
    config = read_all(dir + "/adapter_config.json");
    st = read_all(dir + "/adapter_model.safetensors");
    unlink((dir + "/adapter_config.json").c_str());
    unlink((dir + "/adapter_model.safetensors").c_str());
    rmdir(dir.c_str());
}

// The tensors of a safetensors file written again, with a __metadata__ entry that makes the JSON
// header end in padding (so that a header length one short still parses).
std::string with_padded_header(const std::string & st, const fuzz::temp_dir & tmp) {
    const std::string p = tmp.write("in.safetensors", st);
    std::map<std::string, st_tensor> ts;
    safetensors_load_file(p, ts);
    std::vector<st_out_tensor> out;
    for (const auto & kv : ts) {
        std::vector<int64_t> shape = kv.second.shape;
        out.push_back({ kv.first, kv.second.type, shape, std::vector<uint8_t>(kv.second.data, kv.second.data + kv.second.nbytes) });
    }
    for (int k = 0; k < 8; k++) {
        const std::string q = tmp.path + "/out.safetensors";
        safetensors_write(q, out, { { "format", "pt" }, { "pad", std::string((size_t) k, 'x') } });
        const std::string s = read_all(q);
        uint64_t h;
        memcpy(&h, s.data(), 8);
        if (s[8 + h - 1] == ' ') return s;
    }
    die("no padded header");
    return "";
}

void adapter_files(const std::string & corpus, const std::string & regr) {
    const fuzz::temp_dir tmp("seeds");
    std::string config, st;
    {
        llama_adapter_lora ad;
        make(ad, { "q", "v" }, 2, 16.0f, 1);
        put(corpus, "gguf-qv-r2-f32", gguf_input(ad, GGML_TYPE_F32, tmp));
        save_peft(ad, tmp, config, st);
        put(corpus, "peft-qv-r2", peft_input(config, st));
        put(corpus, "peft-qv-r2-rslora", peft_input(replace(config, "\"use_rslora\": false", "\"use_rslora\": true"), st));
        put(regr, "peft-safetensors-header-length-one-short", [&] {
            // Every value 0x3d7f8000 (0.0624): read one byte early, each is an infinity or a NaN.
            for (auto & kv : ad.weights) {
                for (ggml_tensor * t : { kv.second.a, kv.second.b }) {
                    for (int64_t i = 0; i < ggml_nelements(t); i++) ((uint32_t *) t->data)[i] = 0x3d7f8000u;
                }
            }
            std::string c, s0;
            save_peft(ad, tmp, c, s0);
            std::string s = with_padded_header(s0, tmp);
            uint64_t h;
            memcpy(&h, s.data(), 8);
            h--;
            memcpy(&s[0], &h, 8);
            return peft_input(c, s);
        }());
        ad.alpha = NAN;
        put(regr, "gguf-alpha-nan", gguf_input(ad, GGML_TYPE_F32, tmp));
        ad.alpha = INFINITY;
        put(regr, "gguf-alpha-plus-inf", gguf_input(ad, GGML_TYPE_F32, tmp));
        ad.alpha = 16.0f;
        ((float *) ad.weights.begin()->second.a->data)[3] = NAN;
        save_peft(ad, tmp, config, st);
        put(regr, "peft-nan-in-lora-a", peft_input(config, st));
    }
    {
        llama_adapter_lora ad;
        make(ad, { "q", "k", "v", "o", "gate", "up", "down" }, 4, 8.0f, 2);
        put(corpus, "gguf-all-r4-f16", gguf_input(ad, GGML_TYPE_F16, tmp));
        make(ad, { "o", "down" }, 1, 0.0f, 3);
        put(corpus, "gguf-o-down-r1-bf16-no-alpha", gguf_input(ad, GGML_TYPE_BF16, tmp));
    }
    {
        // rank_pattern: q of rank 2 (r), v of rank 1.
        llama_adapter_lora q, v;
        make(q, { "q" }, 2, 16.0f, 4);
        make(v, { "v" }, 1, 16.0f, 5);
        std::string cq, sq, cv, sv;
        save_peft(q, tmp, cq, sq);
        save_peft(v, tmp, cv, sv);
        std::map<std::string, st_tensor> ts;
        safetensors_load_file(tmp.write("q.safetensors", sq), ts);
        safetensors_load_file(tmp.write("v.safetensors", sv), ts);
        std::vector<st_out_tensor> out;
        for (const auto & kv : ts) {
            out.push_back({ kv.first, kv.second.type, kv.second.shape,
                            std::vector<uint8_t>(kv.second.data, kv.second.data + kv.second.nbytes) });
        }
        safetensors_write(tmp.path + "/qv.safetensors", out, { { "format", "pt" } });
        cq = replace(cq, "\"rank_pattern\": {}", "\"rank_pattern\": {\"model.layers.0.self_attn.v_proj\": 1}");
        cq = replace(cq, "\"q_proj\"", "\"q_proj\", \"v_proj\"");
        put(corpus, "peft-q-r2-v-r1-rank-pattern", peft_input(cq, read_all(tmp.path + "/qv.safetensors")));
    }
    {
        // The K projection is [8, 4]: a pair of rank 5 fits its shapes but exceeds its smaller side.
        ggml_context * c = ggml_init({ 1 << 16, nullptr, false });
        gguf_context * g = gguf_init_empty();
        gguf_set_val_str(g, "general.architecture", "llama");
        gguf_set_val_str(g, "general.type", "adapter");
        gguf_set_val_str(g, "adapter.type", "lora");
        gguf_set_val_f32(g, "adapter.lora.alpha", 8.0f);
        ggml_tensor * a = ggml_new_tensor_2d(c, GGML_TYPE_F32, 8, 5);
        ggml_tensor * b = ggml_new_tensor_2d(c, GGML_TYPE_F32, 5, 4);
        ggml_set_name(a, "blk.0.attn_k.weight.lora_a");
        ggml_set_name(b, "blk.0.attn_k.weight.lora_b");
        for (ggml_tensor * t : { a, b }) {
            for (int64_t i = 0; i < ggml_nelements(t); i++) ((float *) t->data)[i] = 0.01f * (float) (i % 7);
            gguf_add_tensor(g, t);
        }
        const std::string p = tmp.path + "/k.gguf";
        if (!gguf_write_to_file(g, p.c_str(), false)) die("cannot write " + p);
        put(regr, "gguf-rank-5-above-smaller-side-of-k-8x4", std::string(1, '\0') + read_all(p));
        gguf_free(g);
        ggml_free(c);
    }
}

// A checkpoint fuzz-checkpoint's run accepts: step steps of 2 sequences, constant lr 1e-3.
std::string checkpoint(int64_t step, const fuzz::temp_dir & tmp) {
    llama_adapter_lora ad;
    make(ad, { "q", "v" }, 4, 16.0f, 6);
    ft_checkpoint_state st;
    st.step = step;
    st.seq_pos = 2 * step;
    st.config = fuzz::CHECKPOINT_CONFIG;
    for (int64_t s = 0; s < step; s++) {
        st.history.loss.push_back(2.5f - 0.125f * (float) s);
        st.history.lr.push_back(1e-3f);
        st.history.tokens_per_s.push_back(100.0f + (float) s);
    }
    std::string err;
    const std::string p = tmp.path + "/ckpt.gguf";
    if (!ft_checkpoint_save(p, fuzz::tiny_llama(), ad, nullptr, st, err)) die(err);
    return read_all(p);
}

// The checkpoint edited with gguf's API: keys set by edit_kv, tensor names renamed by rename.
std::string edited(const std::string & bytes, const fuzz::temp_dir & tmp, void (*edit_kv)(gguf_context *),
                   const std::map<std::string, std::string> & rename) {
    ggml_context * ctx = nullptr;
    gguf_context * src = gguf_init_from_file(tmp.write("src.gguf", bytes).c_str(), { false, &ctx, false });
    if (!src) die("cannot read the seed checkpoint");
    gguf_context * g = gguf_init_empty();
    gguf_set_kv(g, src);
    if (edit_kv) edit_kv(g);
    std::vector<ggml_tensor *> ts;  // in file order, all looked up before any is renamed
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) ts.push_back(t);
    for (ggml_tensor * t : ts) {
        auto it = rename.find(t->name);
        if (it != rename.end()) ggml_set_name(t, it->second.c_str());
        gguf_add_tensor(g, t);
    }
    const std::string p = tmp.path + "/edited.gguf";
    if (!gguf_write_to_file(g, p.c_str(), false)) die("cannot write " + p);
    gguf_free(g);
    gguf_free(src);
    ggml_free(ctx);
    return read_all(p);
}

void checkpoint_files(const std::string & corpus, const std::string & regr) {
    const fuzz::temp_dir tmp("seeds");
    const std::string seed = checkpoint(3, tmp);
    put(corpus, "step-3-of-12", seed);
    put(corpus, "step-0", checkpoint(0, tmp));
    put(corpus, "step-12-last", checkpoint(12, tmp));
    put(regr, "seq-pos-int64-max", edited(seed, tmp, [](gguf_context * g) { gguf_set_val_i64(g, "finetune.seq_pos", INT64_MAX); }, {}));
    put(regr, "q-lora-a-and-lora-b-swapped",
        edited(seed, tmp, nullptr,
               { { "blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b" },
                 { "blk.0.attn_q.weight.lora_b", "blk.0.attn_q.weight.lora_a" } }));
    put(regr, "validation-history-without-validation", edited(seed, tmp, [](gguf_context * g) {
        const int64_t steps[2] = { 0, 2 };
        const float losses[2] = { 2.5f, 2.25f };
        gguf_set_arr_data(g, "finetune.history.val_step", GGUF_TYPE_INT64, steps, 2);
        gguf_set_arr_data(g, "finetune.history.val_loss", GGUF_TYPE_FLOAT32, losses, 2);
    }, {}));
}

// fuzz-finetune-data's inputs: byte 0 format | vocabulary << 1, byte 1 n_ctx - 2, then the data.
std::string data_input(int jsonl, int vocab, int n_ctx, const std::string & text) {
    return std::string(1, (char) (jsonl | vocab << 1)) + (char) (n_ctx - 2) + text;
}

void finetune_data_files(const std::string & corpus, const std::string & regr) {
    put(corpus, "text-spm", data_input(0, 0, 16, "the ab ab a b the\nab the a\n\nthe end of the text, with more words: ab ab.\n"));
    put(corpus, "text-bpe-unicode", data_input(0, 1, 8, "abc ab a 12 1 2\n\xc3\xa9\xc3\xa9 ab\n\xe2\x96\x81 \xf0\x9f\x98\x80 c\n"));
    const std::string chat =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"the ab\"}, "
        "{\"role\": \"assistant\", \"content\": \"ab the\"}, {\"role\": \"user\", \"content\": \"a b\"}, "
        "{\"role\": \"assistant\", \"content\": \"b a\"}]}\n";
    put(corpus, "jsonl-messages-spm", data_input(1, 0, 32, chat));
    put(corpus, "jsonl-messages-chatml-fallback", data_input(1, 2, 12, chat));
    put(corpus, "jsonl-prompt-completion-bpe",
        data_input(1, 1, 6, "{\"prompt\": \"ab c\", \"completion\": \" abc 12\"}\n\n  \n{\"prompt\": \"\", \"completion\": \"a\"}\n"));
    put(corpus, "jsonl-unicode-blank-lines-gpt2",
        data_input(1, 3, 64, "\n{\"prompt\": \"\\u00e9 \\\"q\\\"\", \"completion\": \"\xc3\xa9 ab\\n\"}\r\n\n"
                             "{\"messages\": [{\"role\": \"user\", \"content\": \"\xe2\x96\x81\"}, {\"role\": \"assistant\", \"content\": \"ab\"}]}\n"));
    put(regr, "jsonl-messages-without-assistant-turn",
        data_input(1, 0, 16, "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"the ab\"}]}\n"));
    put(regr, "jsonl-nested-1000-deep", data_input(1, 0, 16, "{\"messages\": " + std::string(1000, '[') + std::string(1000, ']') + "}\n"));
    put(regr, "jsonl-nul-byte-inside-string",
        data_input(1, 0, 16, bin("{\"prompt\": \"a\0b\", \"completion\": \"ab\"}\n") +
                                 "{\"prompt\": \"a\\u0000b\", \"completion\": \"a\\u0000\"}\n"));
    put(regr, "text-nul-byte", data_input(0, 0, 4, bin("ab\0the\0\0a")));
}

void llama2c_files(const std::string & corpus, const std::string & regr) {
    const int32_t n = 12;  // fuzz-llama2c's fixed files
    put(corpus, "checkpoint-unshared-classifier", std::string(1, '\0') + fuzz::llama2c_checkpoint(n, false));
    put(corpus, "checkpoint-shared-classifier", std::string(1, '\0') + fuzz::llama2c_checkpoint(n, true));
    put(corpus, "tokenizer-with-unshared-checkpoint", std::string(1, '\x01') + fuzz::llama2c_tokenizer(n));
    put(corpus, "tokenizer-with-shared-checkpoint", std::string(1, '\x03') + fuzz::llama2c_tokenizer(n));
    std::string c = fuzz::llama2c_checkpoint(n, true);
    const int32_t min = INT32_MIN;
    memcpy(&c[20], &min, 4);  // vocab_size
    put(regr, "checkpoint-vocab-size-int32-min", std::string(1, '\0') + c);
    std::string t = fuzz::llama2c_tokenizer(n);
    const int32_t minus_one = -1;
    memcpy(&t[4 + 4], &minus_one, 4);  // token 0's length
    put(regr, "tokenizer-token-length-minus-one", std::string(1, '\x01') + t);
    t = fuzz::llama2c_tokenizer(n);
    t[4 + 8 + 2] = '\0';  // "<u\0k>"
    put(regr, "tokenizer-nul-byte-in-token", std::string(1, '\x01') + t);
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CORPUS_DIR REGRESSION_DIR\n", argv[0]);
        return 2;
    }
    fuzz::quiet();
    const std::string corpus = argv[1], regr = argv[2];
    adapter_files(corpus + "/fuzz-adapter", regr + "/fuzz-adapter");
    checkpoint_files(corpus + "/fuzz-checkpoint", regr + "/fuzz-checkpoint");
    finetune_data_files(corpus + "/fuzz-finetune-data", regr + "/fuzz-finetune-data");
    llama2c_files(corpus + "/fuzz-llama2c", regr + "/fuzz-llama2c");
    return ok ? 0 : 1;
}
