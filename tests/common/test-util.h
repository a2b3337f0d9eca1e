// test-util.h - helpers shared by the test suites: contexts, random data, double-precision
// readback, graph compute, non-contiguous views, comparisons, and where the shared test data lives.
#pragma once

#include <gtest/gtest.h>

#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

// Where tests that run the programs find them (tests/CMakeLists.txt defines both: the bin folder,
// and the emulator of a cross build).
#ifndef LLAMA_BIN_DIR
#define LLAMA_BIN_DIR "build/bin"
#endif
#ifndef LLAMA_EMULATOR
#define LLAMA_EMULATOR ""
#endif

// LLAMA_TEST_UNDER_ASAN: built with AddressSanitizer (gcc says so with __SANITIZE_ADDRESS__,
// clang with __has_feature): timings are not asserted, ASan's allocator is not replaced.
#if defined(__SANITIZE_ADDRESS__)
#define LLAMA_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLAMA_TEST_UNDER_ASAN 1
#endif
#endif

namespace tu {

// A context freed at scope exit.
// The memory of a context goes back to a small per-thread pool and serves the next context of
// the same size: under AddressSanitizer every fresh multi-megabyte block costs page faults on its
// shadow (a sweep of 2,880 small graphs, each in a new 16 MB context, took 52 s there against
// 0.3 s natively, most of it in the kernel).
class CtxMemory {
  public:
    static void * take(size_t size) {
        auto & pool = free_blocks();
        for (size_t i = 0; i < pool.size(); i++) {
            if (pool[i].first == size) {
                void * p = pool[i].second;
                pool.erase(pool.begin() + (std::ptrdiff_t) i);
                return p;
            }
        }
        return std::aligned_alloc(64, (size + 63) / 64 * 64);
    }
    static void give(size_t size, void * p) {
        auto & pool = free_blocks();
        if (pool.size() >= 4) {
            std::free(pool.front().second);
            pool.erase(pool.begin());
        }
        pool.emplace_back(size, p);
    }

  private:
    struct Blocks : std::vector<std::pair<size_t, void *>> {
        ~Blocks() {
            for (auto & b : *this) std::free(b.second);
        }
    };
    static Blocks & free_blocks() {
        static thread_local Blocks pool;
        return pool;
    }
};

struct Ctx {
    ggml_context * ctx;
    explicit Ctx(size_t mem = 64u << 20, bool no_alloc = false) : mem_size(mem), mem_buffer(mem ? CtxMemory::take(mem) : nullptr) {
        ggml_init_params p = { mem, mem_buffer, no_alloc };
        ctx = ggml_init(p);
    }
    ~Ctx() {
        ggml_free(ctx);
        if (mem_buffer) CtxMemory::give(mem_size, mem_buffer);
    }
    size_t mem_size;
    void * mem_buffer;
    Ctx(const Ctx &) = delete;
    Ctx & operator=(const Ctx &) = delete;
    operator ggml_context *() const { return ctx; }
};

inline size_t elem_offset(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// Reads one element of a plain-typed tensor (any layout) as double.
inline double get(const ggml_tensor * t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    const char * p = (const char *) t->data + elem_offset(t, i0, i1, i2, i3);
    switch (t->type) {
        case GGML_TYPE_F32:  return *(const float *) p;
        case GGML_TYPE_F16:  return ggml_fp16_to_fp32(*(const ggml_fp16_t *) p);
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(*(const ggml_bf16_t *) p);
        case GGML_TYPE_I32:  return *(const int32_t *) p;
        case GGML_TYPE_I16:  return *(const int16_t *) p;
        case GGML_TYPE_I8:   return *(const int8_t *) p;
        default: ADD_FAILURE() << "tu::get: unsupported type " << ggml_type_name(t->type); return 0;
    }
}

inline void set(ggml_tensor * t, double v, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    char * p = (char *) t->data + elem_offset(t, i0, i1, i2, i3);
    switch (t->type) {
        case GGML_TYPE_F32:  *(float *) p = (float) v; break;
        case GGML_TYPE_F16:  *(ggml_fp16_t *) p = ggml_fp32_to_fp16((float) v); break;
        case GGML_TYPE_BF16: *(ggml_bf16_t *) p = ggml_fp32_to_bf16((float) v); break;
        case GGML_TYPE_I32:  *(int32_t *) p = (int32_t) v; break;
        case GGML_TYPE_I16:  *(int16_t *) p = (int16_t) v; break;
        case GGML_TYPE_I8:   *(int8_t *) p = (int8_t) v; break;
        default: ADD_FAILURE() << "tu::set: unsupported type " << ggml_type_name(t->type);
    }
}

// Calls f(i0, i1, i2, i3) for every element, i0 fastest.
inline void for_each(const ggml_tensor * t, const std::function<void(int64_t, int64_t, int64_t, int64_t)> & f) {
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) f(i0, i1, i2, i3);
}

// All elements as doubles in logical order (i0 fastest), whatever the layout.
inline std::vector<double> to_double(const ggml_tensor * t) {
    std::vector<double> v;
    v.reserve((size_t) ggml_nelements(t));
    for_each(t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { v.push_back(get(t, i0, i1, i2, i3)); });
    return v;
}

// Uniform random values in [lo, hi) (rounded to the tensor's type).
inline void fill_uniform(ggml_tensor * t, std::mt19937 & rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    for_each(t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { set(t, d(rng), i0, i1, i2, i3); });
}

// A tensor of shape ne whose memory is NOT contiguous: a view into a larger tensor with padded
// rows (and padded planes), so kernels must honour nb[] to read it right.
inline ggml_tensor * new_padded_view(ggml_context * ctx, ggml_type type, const int64_t ne[4], int64_t pad = 3) {
    ggml_tensor * big = ggml_new_tensor_4d(ctx, type, ne[0] + pad, ne[1] + 1, ne[2], ne[3]);
    return ggml_view_4d(ctx, big, ne[0], ne[1], ne[2], ne[3], big->nb[1], big->nb[2], big->nb[3], big->nb[1]);
}

// A tensor of shape ne that is a transposed (dims 0,1 swapped) view of a contiguous tensor.
inline ggml_tensor * new_transposed_view(ggml_context * ctx, ggml_type type, const int64_t ne[4]) {
    ggml_tensor * base = ggml_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]);
    return ggml_transpose(ctx, base);
}

// Builds the graph of out and computes it with n_threads.
inline void compute(ggml_context * ctx, ggml_tensor * out, int n_threads) {
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, n_threads), GGML_STATUS_SUCCESS);
}

// Raw bytes of a tensor in logical order (for bit-identical comparisons across thread counts).
inline std::vector<uint8_t> bytes_of(const ggml_tensor * t) {
    std::vector<uint8_t> b;
    const size_t es = ggml_type_size(t->type);
    for_each(t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const uint8_t * p = (const uint8_t *) t->data + elem_offset(t, i0, i1, i2, i3);
        b.insert(b.end(), p, p + es);
    });
    return b;
}

// Computes out with 1, 2 and 3 threads (calling before_run, when given, before each run);
// returns the values of the 1-thread run and checks the other runs are bit-identical to it.
inline std::vector<double> compute_all_threads(ggml_context * ctx, ggml_tensor * out, bool bit_identical = true,
                                               const std::function<void()> & before_run = nullptr) {
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    std::vector<uint8_t> first;
    std::vector<double> vals;
    for (int nt = 1; nt <= 3; nt++) {
        if (before_run) before_run();
        EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, gf, nt), GGML_STATUS_SUCCESS);
        if (nt == 1) {
            first = bytes_of(out);
            vals = to_double(out);
        } else if (bit_identical) {
            EXPECT_TRUE(bytes_of(out) == first) << "result with " << nt << " threads differs from 1 thread";
        }
    }
    return vals;
}

// Expects |got - ref| <= atol + rtol * |ref| elementwise; reports the first few failures.
inline void expect_close(const std::vector<double> & got, const std::vector<double> & ref, double rtol, double atol,
                         const std::string & what = "") {
    ASSERT_EQ(got.size(), ref.size()) << what;
    int bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double tol = atol + rtol * std::fabs(ref[i]);
        const bool ok = (std::isnan(ref[i]) && std::isnan(got[i])) ||
                        (std::isinf(ref[i]) && got[i] == ref[i]) ||
                        std::fabs(got[i] - ref[i]) <= tol;
        if (!ok && bad++ < 5) {
            ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", expected " << ref[i] << " (tol " << tol << ")";
        }
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements out of tolerance";
}

// Relative tolerance that a value stored in `type` can be held to.
inline double type_rtol(ggml_type type) {
    switch (type) {
        case GGML_TYPE_F16:  return 2e-3;
        case GGML_TYPE_BF16: return 1.6e-2;
        default:             return 1e-5;
    }
}

// Mean over rows of KL(softmax(a) || softmax(b)) in nats, for logits of n_rows x n_vocab (as
// shared/tools/cmplogits.py compares logits files).
inline double mean_kl(const float * a, const float * b, int64_t n_rows, int64_t n_vocab) {
    const auto log_softmax = [n_vocab](const float * x) {
        double mx = -INFINITY;
        for (int64_t i = 0; i < n_vocab; i++) mx = std::max(mx, (double) x[i]);
        double sum = 0;
        for (int64_t i = 0; i < n_vocab; i++) sum += std::exp((double) x[i] - mx);
        const double lse = mx + std::log(sum);
        std::vector<double> r((size_t) n_vocab);
        for (int64_t i = 0; i < n_vocab; i++) r[i] = (double) x[i] - lse;
        return r;
    };
    double total = 0;
    for (int64_t r = 0; r < n_rows; r++) {
        const auto pa = log_softmax(a + (size_t) (r * n_vocab));
        const auto pb = log_softmax(b + (size_t) (r * n_vocab));
        for (int64_t i = 0; i < n_vocab; i++) total += std::exp(pa[i]) * (pa[i] - pb[i]);
    }
    return n_rows > 0 ? total / (double) n_rows : 0.0;
}

inline bool file_exists(const std::string & path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// the shared test data beside the repository (overridable with LLAMA_SHARED), and its models folder (overridable with LLAMA_TEST_MODELS).
inline std::string shared_dir() {
    const char * e = std::getenv("LLAMA_SHARED");
    if (e && *e) return e;
#ifdef GGML_SHARED_DIR
    return GGML_SHARED_DIR;
#else
    return "../shared";
#endif
}
inline std::string models_dir() {
    const char * e = std::getenv("LLAMA_TEST_MODELS");
    if (e && *e) return e;
    return shared_dir() + "/models";
}

// Runs a command line (stdout and stderr captured together, or stderr into *err when given);
// status is the exit code, or 128 + the signal for a killed process.
struct run_result {
    int status = -1;
    std::string output;
};
inline run_result run_command(const std::string & cmd, std::string * err = nullptr) {
    run_result r;
    char tmpl[] = "/tmp/llama-test-err-XXXXXX";
    const int fd = err ? mkstemp(tmpl) : -1;
    if (err && fd < 0) return r;
    if (fd >= 0) close(fd);
    FILE * p = popen(err ? ("{ " + cmd + "; } 2>'" + tmpl + "'").c_str() : (cmd + " 2>&1").c_str(), "r");
    if (p) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
        const int st = pclose(p);
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    if (err) {
        err->clear();
        if (FILE * f = fopen(tmpl, "rb")) {
            char buf[4096];
            size_t n;
            while ((n = fread(buf, 1, sizeof(buf), f)) > 0) err->append(buf, n);
            fclose(f);
        }
        unlink(tmpl);
    }
    return r;
}

// A temporary directory removed with its contents at scope exit.
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/llama-test-XXXXXX";
        path = mkdtemp(tmpl);
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
    TempDir(const TempDir &) = delete;
    TempDir & operator=(const TempDir &) = delete;
    std::vector<std::string> files() const {
        std::vector<std::string> v;
        if (DIR * d = opendir(path.c_str())) {
            while (dirent * e = readdir(d)) {
                if (e->d_name[0] != '.') v.push_back(e->d_name);
            }
            closedir(d);
        }
        return v;
    }
};

}  // namespace tu

// Skips the current test with a clear message when a shared file is absent.
#define TU_REQUIRE_FILE(path) \
    do { if (!tu::file_exists(path)) GTEST_SKIP() << "shared file not found: " << (path) << " (set LLAMA_TEST_MODELS)"; } while (0)
