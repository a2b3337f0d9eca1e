// fuzz-safetensors: the safetensors reader the converter and the PEFT loader use
// (src/llama-safetensors.h). Byte 0 picks the entry point:
//   even: the rest is a .safetensors file, read with safetensors_load_file;
//   odd:  the rest is a model.safetensors.index.json, read with safetensors_load_dir from a
//         directory that also holds two small valid shards (a.safetensors, b.safetensors).
// Malformed input must throw std::runtime_error; what loads must describe bytes inside the file
// that match each tensor's dtype and shape.
#include "fuzz-common.h"

#include "llama-safetensors.h"

#include <stdexcept>
#include <sys/stat.h>

namespace {

// Every tensor lies in its file's data section and holds exactly shape x dtype bytes.
void check(const std::map<std::string, st_tensor> & ts) {
    for (const auto & kv : ts) {
        const st_tensor & t = kv.second;
        FUZZ_CHECK(kv.first == t.name);
        FUZZ_CHECK(t.type == GGML_TYPE_F32 || t.type == GGML_TYPE_F16 || t.type == GGML_TYPE_BF16);
        FUZZ_CHECK(t.file != nullptr);
        unsigned __int128 n = 1;
        for (int64_t d : t.shape) {
            FUZZ_CHECK(d >= 0);
            n *= (uint64_t) d;
            if (n > ((unsigned __int128) 1 << 64)) n = (unsigned __int128) 1 << 64;  // saturate
        }
        FUZZ_CHECK(n * ggml_type_size(t.type) == t.nbytes);
        uint64_t hlen;
        FUZZ_CHECK(t.file->size >= 8);
        memcpy(&hlen, t.file->data, 8);
        FUZZ_CHECK(t.data >= t.file->data + 8 + hlen);
        FUZZ_CHECK(t.nbytes <= t.file->size && t.data <= t.file->data + t.file->size - t.nbytes);
        if (t.nbytes > 0) fuzz::touch(t.data, t.nbytes);
    }
}

// A directory with two valid shards, created once per process and removed at exit.
struct shard_dir {
    std::string path;
    shard_dir() {
        const char * tmp = getenv("TMPDIR");
        std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/llama-fuzz-st-XXXXXX";
        if (!mkdtemp(&tmpl[0])) {
            perror("fuzz-safetensors: mkdtemp");
            abort();
        }
        path = tmpl;
        st_out_tensor a{ "model.embed_tokens.weight", GGML_TYPE_F32, { 2, 3 }, std::vector<uint8_t>(24, 1) };
        st_out_tensor b{ "model.norm.weight", GGML_TYPE_BF16, { 3 }, std::vector<uint8_t>(6, 2) };
        st_out_tensor c{ "lm_head.weight", GGML_TYPE_F16, { 2, 2 }, std::vector<uint8_t>(8, 3) };
        safetensors_write(path + "/a.safetensors", { a, b }, { { "format", "pt" } });
        safetensors_write(path + "/b.safetensors", { c }, {});
    }
    ~shard_dir() {
        for (const char * f : { "/a.safetensors", "/b.safetensors", "/model.safetensors.index.json" }) {
            unlink((path + f).c_str());
        }
        rmdir(path.c_str());
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::reader in{ data, size };
    const uint8_t mode = in.u8();
    const std::string body = in.rest();
    std::map<std::string, st_tensor> ts;
    if (mode % 2 == 0) {
        fuzz::mem_file f(body.data(), body.size());
        try {
            safetensors_load_file(f.path, ts);
        } catch (const std::runtime_error &) {
            return 0;
        }
    } else {
        static shard_dir dir;
        FILE * f = fopen((dir.path + "/model.safetensors.index.json").c_str(), "wb");
        FUZZ_CHECK(f != nullptr);
        FUZZ_CHECK(fwrite(body.data(), 1, body.size(), f) == body.size());
        fclose(f);
        try {
            ts = safetensors_load_dir(dir.path);
        } catch (const std::runtime_error &) {
            return 0;
        }
    }
    check(ts);
    return 0;
}
