// fuzz-common.h - helpers shared by the libFuzzer harnesses in fuzz/ (and by
// tests/llama/test-fuzz-regressions.cpp, which feeds the same harness code the saved crash inputs):
// inputs as files the library opens by name, a silent log, and invariant checks that crash;
// a temporary directory for inputs that are directories, and the tiny base model of the seed corpus.
#pragma once

#include "llama.h"
#include "llama-model.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace fuzz {

// A broken invariant of the library (not an error it reports cleanly): abort so that the fuzzer
// records the input as a crash and the regression test fails.
#define FUZZ_CHECK(cond)                                                                                  \
    do {                                                                                                  \
        if (!(cond)) {                                                                                    \
            fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                 \
            abort();                                                                                      \
        }                                                                                                 \
    } while (0)

// The input as a file: an anonymous memory file named /proc/self/fd/N (nothing touches the
// disk), or a temporary file in $TMPDIR when memfd_create is unavailable. Removed at scope exit.
struct mem_file {
    int fd = -1;
    std::string path;
    bool on_disk = false;

    mem_file(const void * data, size_t size) {
#ifdef MFD_CLOEXEC
        fd = memfd_create("fuzz-input", MFD_CLOEXEC);
#endif
        if (fd >= 0) {
            path = "/proc/self/fd/" + std::to_string(fd);
        } else {
            const char * tmp = getenv("TMPDIR");
            std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/llama-fuzz-XXXXXX";
            fd = mkstemp(&tmpl[0]);
            if (fd < 0) {
                perror("fuzz: mkstemp");
                abort();
            }
            path = tmpl;
            on_disk = true;
        }
        const char * p = (const char *) data;
        while (size > 0) {
            const ssize_t w = write(fd, p, size);
            if (w <= 0) {
                perror("fuzz: write");
                abort();
            }
            p += w;
            size -= (size_t) w;
        }
    }
    ~mem_file() {
        if (on_disk) unlink(path.c_str());
        close(fd);
    }
    mem_file(const mem_file &) = delete;
    mem_file & operator=(const mem_file &) = delete;
};

inline void quiet_log(enum ggml_log_level, const char *, void *) {}

// Silences the runtime's log (errors are the expected outcome of most inputs). Set
// LLAMA_FUZZ_VERBOSE=1 to see the messages while reproducing a case.
inline void quiet() {
    static const bool once = [] {
        if (!getenv("LLAMA_FUZZ_VERBOSE")) llama_log_set(quiet_log, nullptr);
        return true;
    }();
    (void) once;
}

// An input the library refused: it must say why (LLAMA_FUZZ_VERBOSE=1 prints the message).
inline void refused(const std::string & err) {
    FUZZ_CHECK(!err.empty());
    if (getenv("LLAMA_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: refused: %s\n", err.c_str());
}

// Reads every byte of [p, p + n) so that ASan sees any out-of-bounds pointer the library hands out;
// the result is used so that the reads are not optimized away.
inline uint8_t touch(const void * p, size_t n) {
    const volatile uint8_t * b = (const volatile uint8_t *) p;
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) acc ^= b[i];
    return acc;
}

// Splits the input into fields: take(n) returns the next n bytes (fewer at the end), u8() one byte
// (0 once consumed), rest() what is left.
struct reader {
    const uint8_t * p;
    size_t n;
    uint8_t u8() {
        if (n == 0) return 0;
        n--;
        return *p++;
    }
    std::string take(size_t k) {
        if (k > n) k = n;
        std::string s((const char *) p, k);
        p += k;
        n -= k;
        return s;
    }
    std::string rest() { return take(n); }
};

// A directory in $TMPDIR (default /tmp), created once per process by a static instance; at exit it
// is removed with the files written into it.
struct temp_dir {
    std::string path;
    explicit temp_dir(const char * tag) {
        const char * tmp = getenv("TMPDIR");
        std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/llama-fuzz-" + tag + "-XXXXXX";
        if (!mkdtemp(&tmpl[0])) {
            perror("fuzz: mkdtemp");
            abort();
        }
        path = tmpl;
    }
    ~temp_dir() {
        if (DIR * d = opendir(path.c_str())) {
            while (dirent * e = readdir(d)) {
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlink((path + "/" + e->d_name).c_str());
            }
            closedir(d);
        }
        rmdir(path.c_str());
    }
    // Writes (replaces) the file name with bytes; returns its path.
    std::string write(const std::string & name, const std::string & bytes) const {
        const std::string p = path + "/" + name;
        FILE * f = fopen(p.c_str(), "wb");
        FUZZ_CHECK(f != nullptr);
        FUZZ_CHECK(fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
        FUZZ_CHECK(fclose(f) == 0);
        return p;
    }
    temp_dir(const temp_dir &) = delete;
    temp_dir & operator=(const temp_dir &) = delete;
};

// The tiny llama of the seed corpus (fuzz/corpus/fuzz-model/tiny-llama-spm.gguf: 1 layer, n_embd
// 8, 2 heads, 1 KV head, n_ff 16, 20 tokens, F16 matrices, tied output), loaded once per process as
// the converter and llama-finetune load a base: mapped, not repacked, in host memory.
inline const llama_model & tiny_llama() {
    static llama_model model;
    static const bool loaded = [] {
        llama_model_params mp = llama_model_default_params();
        mp.use_mmap = true;
        mp.use_repack = false;
        mp.n_gpu_layers = 0;
        std::string err;
        const std::string path = std::string(FUZZ_SOURCE_DIR) + "/corpus/fuzz-model/tiny-llama-spm.gguf";
        if (!llama_model_load(model, path.c_str(), mp, err)) {
            fprintf(stderr, "fuzz: cannot load %s: %s\n", path.c_str(), err.c_str());
            abort();
        }
        return true;
    }();
    (void) loaded;
    return model;
}

// fuzz-checkpoint's run: the configuration string its checkpoints must carry (the seeds of
// fuzz/corpus/fuzz-checkpoint were written with it by fuzz-make-app-seeds).
constexpr const char * CHECKPOINT_CONFIG = "data=00000000fuzz0000\nn_ctx=16\nbatch=2\nlr=0.001\nsteps=12\nr=4\nalpha=16\ntargets=q,v,\n";

// llama2.c files (fuzz-llama2c and its seeds): a tokenizer of n_vocab >= 3 tokens (unk, BOS and
// EOS as llama2.c writes them, then byte and word pieces), and a version-0 checkpoint (dim 8,
// hidden 16, 1 layer, 2 heads, 1 KV head, seq_len 4) with a shared or, when !shared, its own
// classifier (vocab_size written negative).
inline std::string llama2c_tokenizer(int32_t n_vocab) {
    static const char * const pieces[] = { "<unk>", "\n<s>\n", "\n</s>\n", "<0x0A>", "<0x41>", " ", "a", "b", " a", "ab", " the", "\xc3\xa9" };
    std::string out(4, '\0');
    int32_t max_len = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        const std::string t = i < 12 ? pieces[i] : "t" + std::to_string(i);
        const float score = -(float) i;
        const int32_t len = (int32_t) t.size();
        out.append((const char *) &score, 4);
        out.append((const char *) &len, 4);
        out += t;
        if (len > max_len) max_len = len;
    }
    memcpy(&out[0], &max_len, 4);
    return out;
}

inline std::string llama2c_checkpoint(int32_t n_vocab, bool shared) {
    const int32_t dim = 8, hidden = 16, layers = 1, heads = 2, kv_heads = 1, seq_len = 4;
    const int32_t h[7] = { dim, hidden, layers, heads, kv_heads, shared ? n_vocab : -n_vocab, seq_len };
    const int64_t kv_dim = dim * kv_heads / heads, head_size = dim / heads;
    const int64_t n = n_vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv_dim * dim + 3 * hidden * dim) + dim +
                      seq_len * head_size + (shared ? 0 : n_vocab * dim);
    std::string out((const char *) h, sizeof(h));
    for (int64_t i = 0; i < n; i++) {
        const float v = (float) ((i * 37) % 101) / 101.0f - 0.5f;
        out.append((const char *) &v, 4);
    }
    return out;
}

}  // namespace fuzz
