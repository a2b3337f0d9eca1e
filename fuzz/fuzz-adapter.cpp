// fuzz-adapter: the LoRA adapter loaders above the parsers (llama_adapter_lora_load in
// src/llama-adapter.h) against the tiny llama of the seed corpus. Byte 0 picks the form:
//   even: the rest is a GGUF adapter file;
//   odd:  bytes 1-2 are the length n (little-endian) of adapter_config.json, the next n bytes
//         that file and the rest adapter_model.safetensors, both written into a temporary
//         directory loaded as a PEFT adapter.
// A malformed adapter or one that does not fit the model must be refused with a message. What
// loads must be usable: every pair A F32 [n_in, r], B F32 [r, n_out] of a weight of the model,
// 1 <= r <= min(65536, n_in, n_out), finite values and alpha, at least one target; written back as
// GGUF (llama_adapter_lora_save_gguf) it must load again to the same values.
#include "fuzz-common.h"

#include "llama-adapter.h"

#include <cmath>

namespace {

// Reads every value of t (F32, contiguous) and checks it is finite.
void check_values(const ggml_tensor * t) {
    FUZZ_CHECK(t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && t->data != nullptr);
    fuzz::touch(t->data, ggml_nbytes(t));
    const float * v = (const float *) t->data;
    for (int64_t i = 0; i < ggml_nelements(t); i++) FUZZ_CHECK(std::isfinite(v[i]));
}

void check(const llama_adapter_lora & ad, const llama_model & model) {
    FUZZ_CHECK(std::isfinite(ad.alpha));
    FUZZ_CHECK(!ad.weights.empty());
    FUZZ_CHECK(!ad.targets.empty());
    FUZZ_CHECK(ad.arch == model.arch_name);
    for (const auto & kv : ad.weights) {
        const ggml_tensor * w = kv.first;
        const llama_adapter_lora_weight & lw = kv.second;
        // The key is the model's own tensor of that name, an adaptable projection.
        FUZZ_CHECK(llama_adapter_base_tensor(model, w->name) == w);
        FUZZ_CHECK(lw.a != nullptr && lw.b != nullptr);
        const int64_t r = lw.a->ne[1];
        FUZZ_CHECK(lw.a->ne[0] == w->ne[0] && lw.a->ne[2] == 1 && lw.a->ne[3] == 1);
        FUZZ_CHECK(lw.b->ne[0] == r && lw.b->ne[1] == w->ne[1] && lw.b->ne[2] == 1 && lw.b->ne[3] == 1);
        FUZZ_CHECK(r >= 1 && r <= 65536 && r <= w->ne[0] && r <= w->ne[1]);
        FUZZ_CHECK(std::isfinite(ad.effective_scale(lw, 1.0f)));
        check_values(lw.a);
        check_values(lw.b);
    }
    FUZZ_CHECK(ad.rank() >= 1);
}

// Written as GGUF and loaded again: the same pairs, values and alpha.
void check_round_trip(const llama_adapter_lora & ad, const llama_model & model, const fuzz::temp_dir & dir) {
    const std::string path = dir.path + "/round-trip.gguf";
    std::string err;
    FUZZ_CHECK(llama_adapter_lora_save_gguf(ad, model, path, GGML_TYPE_F32, err));
    llama_adapter_lora back;
    if (!llama_adapter_lora_load(back, model, path, err)) {
        fprintf(stderr, "fuzz-adapter: the adapter written back does not load: %s\n", err.c_str());
        abort();
    }
    unlink(path.c_str());
    FUZZ_CHECK(back.alpha == ad.alpha);
    FUZZ_CHECK(back.weights.size() == ad.weights.size());
    FUZZ_CHECK(back.targets == ad.targets);
    for (const auto & kv : ad.weights) {
        const llama_adapter_lora_weight * lw = back.get(kv.first);
        FUZZ_CHECK(lw != nullptr);
        FUZZ_CHECK(ggml_are_same_shape(lw->a, kv.second.a) && ggml_are_same_shape(lw->b, kv.second.b));
        FUZZ_CHECK(memcmp(lw->a->data, kv.second.a->data, ggml_nbytes(lw->a)) == 0);
        FUZZ_CHECK(memcmp(lw->b->data, kv.second.b->data, ggml_nbytes(lw->b)) == 0);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::quiet();
    const llama_model & model = fuzz::tiny_llama();
    static const fuzz::temp_dir dir("adapter");
    fuzz::reader in{ data, size };
    const uint8_t mode = in.u8();
    llama_adapter_lora ad;
    std::string err;
    bool ok;
    if (mode % 2 == 0) {
        const std::string body = in.rest();
        fuzz::mem_file f(body.data(), body.size());
        ok = llama_adapter_lora_load(ad, model, f.path, err);
    } else {
        const size_t n = in.u8();
        const std::string config = in.take(n | (size_t) in.u8() << 8);
        dir.write("adapter_config.json", config);
        dir.write("adapter_model.safetensors", in.rest());
        ok = llama_adapter_lora_load(ad, model, dir.path, err);
    }
    if (!ok) {
        fuzz::refused(err);
        return 0;
    }
    check(ad, model);
    check_round_trip(ad, model, dir);
    return 0;
}
