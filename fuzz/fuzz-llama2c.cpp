// fuzz-llama2c: llama-convert --llama2c's readers, load_llama2c (examples/convert/convert.h) of a
// llama2.c version-0 checkpoint and a llama2.c tokenizer file. Byte 0 picks the file fuzzed:
//   even: the rest is the checkpoint, read with a fixed valid tokenizer of 12 tokens;
//   odd:  the rest is the tokenizer, read with a fixed valid checkpoint of 12 tokens (dim 8,
//         hidden 16, 1 layer, 2 heads, 1 KV head, seq_len 4; shared classifier when byte 0 & 2).
// (fuzz::llama2c_tokenizer and fuzz::llama2c_checkpoint write them.) Malformed, truncated or
// inconsistent files must throw convert_error; what is accepted gives metadata and tensors whose
// readers produce exactly 4 bytes (F32) per element of their shape.
#include "fuzz-common.h"

#include "convert.h"

namespace {

constexpr int32_t N_VOCAB = 12;

struct fixed_files {
    fuzz::temp_dir dir{ "llama2c" };
    std::string tokenizer, checkpoint[2];
    fixed_files() {
        tokenizer = dir.write("tokenizer.bin", fuzz::llama2c_tokenizer(N_VOCAB));
        checkpoint[0] = dir.write("unshared.bin", fuzz::llama2c_checkpoint(N_VOCAB, false));
        checkpoint[1] = dir.write("shared.bin", fuzz::llama2c_checkpoint(N_VOCAB, true));
    }
};

void check(const model_plan & plan) {
    FUZZ_CHECK(plan.meta != nullptr);
    const int64_t tid = gguf_find_key(plan.meta, "tokenizer.ggml.tokens");
    FUZZ_CHECK(tid >= 0 && gguf_get_kv_type(plan.meta, tid) == GGUF_TYPE_ARRAY);
    const size_t n_vocab = gguf_get_arr_n(plan.meta, tid);
    for (size_t i = 0; i < n_vocab; i++) {
        const char * s = gguf_get_arr_str(plan.meta, tid, i);
        fuzz::touch(s, strlen(s));
    }
    FUZZ_CHECK(!plan.tensors.empty());
    std::vector<uint8_t> buf;
    for (const source_tensor & t : plan.tensors) {
        FUZZ_CHECK(t.src_type == GGML_TYPE_F32);
        FUZZ_CHECK(!t.ne.empty() && t.ne.size() <= GGML_MAX_DIMS);
        uint64_t n = 1;
        for (int64_t d : t.ne) {
            FUZZ_CHECK(d > 0 && d <= (1 << 24));
            n *= (uint64_t) d;
        }
        FUZZ_CHECK(n <= ((uint64_t) 1 << 28));  // the input is small: so is every tensor
        if (t.name == "token_embd.weight" || t.name == "output.weight") FUZZ_CHECK(t.ne.size() == 2 && (size_t) t.ne[1] == n_vocab);
        buf.clear();
        t.read(buf);
        FUZZ_CHECK(buf.size() == 4 * n);
        fuzz::touch(buf.data(), buf.size());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::quiet();
    static const fixed_files files;
    fuzz::reader in{ data, size };
    const uint8_t mode = in.u8();
    const std::string body = in.rest();
    fuzz::mem_file f(body.data(), body.size());
    model_plan plan;
    try {
        if (mode % 2 == 0) plan = load_llama2c(f.path, files.tokenizer);
        else plan = load_llama2c(files.checkpoint[(mode >> 1) & 1], f.path);
    } catch (const convert_error & e) {
        fuzz::refused(e.what());
        return 0;
    }
    check(plan);
    gguf_free(plan.meta);
    return 0;
}
