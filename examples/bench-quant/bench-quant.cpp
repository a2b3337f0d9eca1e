// bench-quant: throughput of the quantized dot products (weights x activations quantized to the
// type's activation format), in GB/s of weight data read, for this build's SIMD kernels and the
// scalar reference, one thread. Two sizes: weights that fit in cache (compute-bound) and
// weights far larger than the caches (memory-bound, as in token generation).
//
//   bench-quant [--stream-mib N] [--k N] [--reps N] [--best] [--types q4_0,q6_K,...] [--mul-mat N,N,... [--mm-mib N]]
//
// A second table times the repacked layouts (quant-repack.h) the runtime uses where this build
// has a kernel: one activation column (token generation) in cache and streaming, and 8 and 16
// columns (prompt processing; 16: the AMX tile kernels where the build has them) in cache, in
// GB/s of weights per column pass.
//
// --mul-mat times whole products through the graph API, one thread, for each type with a
// repacked layout: a K x M weight matrix (--mm-mib MiB, default 64: more than the last-level
// cache of most machines) against N F32 columns, in the file layout (the plain dot products) and
// repacked, in GB/s of weights per column pass (bytes x N / time), for each N of the list.
//
// The streaming size defaults to 1024 MiB of weights per type: more than the last-level cache
// of current CPUs (several hundred MB on large server parts), as a model's weights are.
#include "ggml-cpu/quant-dot.h"
#include "ggml-cpu/quant-repack.h"
#include "ggml.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

// --best: the fastest run instead of the median. On a shared machine a neighbour's load slows
// some runs and never speeds one up, so for compute-bound kernels in cache the fastest run is the
// steadier figure (the median moved 10-40% between runs of the same binary on a shared Zen 5).
static bool g_best = false;
static double pick(std::vector<double> & t) {
    std::sort(t.begin(), t.end());
    return g_best ? t.front() : t[t.size() / 2];
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Quantizes without importance weights where the type's quantizer allows it.
static bool quantize_plain(ggml_type t, const float * x, uint8_t * out, int64_t k) {
    if (!ggml_get_type_traits(t)->quantize_row || ggml_quantize_requires_imatrix(t)) return false;
    ggml_quantize_chunk(t, x, out, 0, 1, k, nullptr);
    return true;
}

// Else random bytes (a valid block of every IQ / ternary type) with a small F16 scale where the
// type keeps it (IQ1_M: the top nibbles of its last 4 u16; TQ*: the last 2 bytes; else the first),
// as tests/common/random-blocks.h does for the tests.
static void random_blocks(ggml_type t, uint8_t * out, int64_t k, std::mt19937 & rng) {
    const size_t ts = ggml_type_size(t), rs = ggml_row_size(t, k);
    for (size_t i = 0; i < rs; i++) out[i] = (uint8_t) rng();
    const ggml_fp16_t d = ggml_fp32_to_fp16(0.01f);
    for (size_t off = 0; off < rs; off += ts) {
        uint8_t * b = out + off;
        if (t == GGML_TYPE_IQ1_M) {
            uint16_t sc[4];
            memcpy(sc, b + ts - 8, 8);
            for (int j = 0; j < 4; j++) sc[j] = (uint16_t) ((sc[j] & 0x0FFF) | (((d >> (4 * j)) & 0xF) << 12));
            memcpy(b + ts - 8, sc, 8);
        } else if (t == GGML_TYPE_TQ1_0 || t == GGML_TYPE_TQ2_0) {
            memcpy(b + ts - 2, &d, 2);
        } else {
            memcpy(b, &d, 2);
        }
    }
}

// Median seconds of `reps` runs of the dot of every weight row with one activation row.
static double time_rows(ggml_quant_dot_fn dot, const std::vector<uint8_t> & w, size_t row_size, int64_t rows, int64_t k,
                        const std::vector<uint8_t> & act, int reps, float * sink) {
    std::vector<double> t;
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        float s = 0.0f;
        for (int64_t i = 0; i < rows; i++) s += dot(k, w.data() + i * row_size, act.data());
        t.push_back(now_s() - t0);
        *sink += s;
    }
    return pick(t);
}

// Median seconds of `reps` passes of kernel f over every 16-row group of w against nc columns.
template <typename F>
static double time_groups(F f, const std::vector<uint8_t> & w, size_t group_size, int64_t groups,
                          int64_t nb, const std::vector<uint8_t> & act, size_t ldb, int nc, int inner, int reps, float * sink) {
    std::vector<double> t;
    float s[16 * GGML_REPACK_ROWS];
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        for (int j = 0; j < inner; j++) {
            for (int64_t g = 0; g < groups; g++) {
                f(nb, w.data() + g * group_size, act.data(), ldb, nc, s, GGML_REPACK_ROWS);
                *sink += s[0];
            }
        }
        t.push_back(now_s() - t0);
    }
    return pick(t);
}

static void bench_repacked(const std::vector<ggml_type> & types, const std::string & only, int64_t k, int64_t stream_mib, int reps, float * sink) {
    printf("\nrepacked layouts (16-row groups), 1 thread, GB/s of weights per column pass\n\n");
    printf("%-7s %10s %10s %10s %8s %10s %10s %10s %10s\n", "type", "scalar", "simd", "simd", "speedup", "simd", "speedup", "simd", "speedup");
    printf("%-7s %10s %10s %10s %8s %10s %10s %10s %10s\n", "", "1 col", "1 col", "1 col", "", "8 cols", "vs 1 col", "16 cols", "vs 8 cols");
    printf("%-7s %10s %10s %10s %8s %10s %10s %10s %10s\n", "", "in-cache", "in-cache", "streaming", "", "in-cache", "", "in-cache", "");
    std::mt19937 rng(2);
    std::normal_distribution<float> nd;
    for (const ggml_type t : types) {
        if (!only.empty() && ("," + only + ",").find("," + std::string(ggml_type_name(t)) + ",") == std::string::npos) continue;
        const ggml_repack_traits * tr = ggml_repack_get_traits(t);
        if (!tr) continue;
        const size_t gs = GGML_REPACK_ROWS * ggml_row_size(t, k);
        const int64_t nb = k / tr->blck;
        const int64_t g_cache = std::max<int64_t>(1, (256 * 1024) / (int64_t) gs);
        const int64_t g_stream = std::max<int64_t>(1, (stream_mib << 20) / (int64_t) gs);
        std::vector<float> row(k);
        std::vector<uint8_t> group(gs);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            for (auto & v : row) v = nd(rng);
            if (!quantize_plain(t, row.data(), group.data() + r * (gs / GGML_REPACK_ROWS), k)) random_blocks(t, group.data() + r * (gs / GGML_REPACK_ROWS), k, rng);
        }
        std::vector<uint8_t> rows_copy = group;
        tr->pack_group(rows_copy.data(), nb, group.data());
        std::vector<uint8_t> w_cache(gs * g_cache), w_stream(gs * g_stream);
        for (int64_t g = 0; g < g_cache; g++) memcpy(w_cache.data() + g * gs, group.data(), gs);
        for (int64_t g = 0; g < g_stream; g++) memcpy(w_stream.data() + g * gs, group.data(), gs);
        const size_t ldb = (size_t) (k / tr->act_blck) * tr->act_size;
        std::vector<uint8_t> act(ldb * 16);
        for (int c = 0; c < 16; c++) {
            for (auto & v : row) v = nd(rng);
            tr->act_from_float(row.data(), act.data() + c * ldb, k);
        }
        const int inner = 20;
        const double bytes_cache = (double) gs * g_cache * inner;
        const double ref1 = bytes_cache / time_groups(tr->gemm_ref, w_cache, gs, g_cache, nb, act, ldb, 1, inner, reps, sink) / 1e9;
        const double simd1 = bytes_cache / time_groups(tr->gemm, w_cache, gs, g_cache, nb, act, ldb, 1, inner, reps, sink) / 1e9;
        const double str1 = (double) gs * g_stream / time_groups(tr->gemm, w_stream, gs, g_stream, nb, act, ldb, 1, 1, reps, sink) / 1e9;
        const double simd8 = bytes_cache * 8 / time_groups(tr->gemm, w_cache, gs, g_cache, nb, act, ldb, 8, inner, reps, sink) / 1e9;
        // 16 columns: the set's 16-column kernel where it has one (AMX), else two calls of 8.
        auto cols16 = [tr](int64_t nb_, const void * a, const void * b, size_t ldb_, int nc, float * s, size_t lds) {
            ggml_repack_gemm_cols(tr, nb_, a, b, ldb_, nc, s, lds);
        };
        const double simd16 = bytes_cache * 16 / time_groups(cols16, w_cache, gs, g_cache, nb, act, ldb, 16, inner, reps, sink) / 1e9;
        printf("%-7s %10.2f %10.2f %10.2f %7.1fx %10.2f %9.1fx %10.2f %9.1fx\n", ggml_type_name(t), ref1, simd1, str1, simd1 / ref1,
               simd8, simd8 / simd1, simd16, simd16 / simd8);
    }
}

// One mul_mat of a (K x M, the type) by N F32 columns, 1 thread: median seconds of `reps`.
static double time_graph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int reps) {
    ggml_tensor * c = ggml_mul_mat(ctx, a, b);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, c);
    ggml_cplan plan = ggml_graph_plan(gf, 1);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.data();
    std::vector<double> t;
    for (int r = 0; r <= reps; r++) {  // the first run warms up
        const double t0 = now_s();
        if (ggml_graph_compute(gf, &plan) != GGML_STATUS_SUCCESS) return -1.0;
        if (r > 0) t.push_back(now_s() - t0);
    }
    return pick(t);
}

static void bench_mul_mat(const std::vector<ggml_type> & types, const std::string & only, int64_t k, int64_t mib,
                          const std::vector<int64_t> & cols, int reps) {
    printf("\nmul_mat through the graph API, 1 thread, K = %lld, about %lld MiB of weights: GB/s of weights per column pass\n\n",
           (long long) k, (long long) mib);
    printf("%-7s %6s %7s %10s %10s %8s\n", "type", "N", "M", "plain", "repacked", "ratio");
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    for (const ggml_type t : types) {
        if (!only.empty() && ("," + only + ",").find("," + std::string(ggml_type_name(t)) + ",") == std::string::npos) continue;
        if (!ggml_repack_get_traits(t)) continue;
        const size_t rs = ggml_row_size(t, k), gs = GGML_REPACK_ROWS * rs;
        const int64_t m = std::max<int64_t>(1, (mib << 20) / (int64_t) gs) * GGML_REPACK_ROWS;
        // Copies of one group of 16 quantized rows (the speed does not depend on the values).
        std::vector<float> row(k);
        std::vector<uint8_t> group(gs);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            for (auto & v : row) v = nd(rng);
            if (!quantize_plain(t, row.data(), group.data() + r * rs, k)) random_blocks(t, group.data() + r * rs, k, rng);
        }
        for (const int64_t n : cols) {
            const size_t mem = rs * m + (size_t) n * (k + 2 * m) * sizeof(float) + (16u << 20);  // a, b, two products
            ggml_init_params ip = { mem, nullptr, false };
            ggml_context * ctx = ggml_init(ip);
            if (!ctx) { fprintf(stderr, "bench-quant: no memory for %zu bytes\n", mem); return; }
            ggml_tensor * a = ggml_new_tensor_2d(ctx, t, k, m);
            for (int64_t g = 0; g < m / GGML_REPACK_ROWS; g++) memcpy((char *) a->data + g * gs, group.data(), gs);
            ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
            for (int64_t i = 0; i < k * n; i++) ((float *) b->data)[i] = nd(rng);
            const double plain = time_graph(ctx, a, b, reps);
            const double repacked = ggml_cpu_repack(a) ? time_graph(ctx, a, b, reps) : -1.0;
            const double bytes = (double) rs * m * n;
            printf("%-7s %6lld %7lld %10.2f %10.2f %7.2fx\n", ggml_type_name(t), (long long) n, (long long) m, bytes / plain / 1e9,
                   repacked > 0 ? bytes / repacked / 1e9 : 0.0, repacked > 0 ? plain / repacked : 0.0);
            ggml_free(ctx);
        }
    }
}

int main(int argc, char ** argv) {
    int64_t k = 4096, stream_mib = 1024;
    int reps = 5;
    std::string only;
    std::vector<int64_t> mm_cols;
    int64_t mm_mib = 64;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) { fprintf(stderr, "bench-quant: %s needs a value\n", a.c_str()); exit(1); }
            return argv[++i];
        };
        if (a == "--k") k = atoll(next());
        else if (a == "--stream-mib") stream_mib = atoll(next());
        else if (a == "--reps") reps = atoi(next());
        else if (a == "--best") g_best = true;
        else if (a == "--types") only = next();
        else if (a == "--mul-mat") {
            const std::string list = next();
            for (size_t p = 0; p < list.size();) {
                const size_t e = std::min(list.find(',', p), list.size());
                mm_cols.push_back(atoll(list.substr(p, e - p).c_str()));
                p = e + 1;
            }
        } else if (a == "--mm-mib") mm_mib = atoll(next());
        else {
            fprintf(stderr, "usage: bench-quant [--k N] [--stream-mib N] [--reps N] [--best] [--types a,b] [--mul-mat N,N,... [--mm-mib N]]\n");
            return 1;
        }
    }
    for (const int64_t n : mm_cols) {
        if (n <= 0) { fprintf(stderr, "bench-quant: --mul-mat takes positive column counts\n"); return 1; }
    }
    if (k <= 0 || k % 256 != 0 || stream_mib <= 0 || reps <= 0 || mm_mib <= 0) {
        fprintf(stderr, "bench-quant: --k must be a positive multiple of 256, --stream-mib and --reps positive\n");
        return 1;
    }
    // Every quantized type weights may be written in (the type table's rows) with a quantizer or a
    // dot product, in table order.
    std::vector<ggml_type> types;
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (!ggml_type_is_valid(i)) continue;
        const ggml_type_traits * tr = ggml_get_type_traits((ggml_type) i);
        const bool dot = ggml_quant_vec_dot_type((ggml_type) i) != GGML_TYPE_COUNT;
        if (tr->is_quantized && tr->weight_target && (tr->quantize_row || dot)) types.push_back((ggml_type) i);
    }
    const int64_t rows_cache = std::max<int64_t>(1, (256 * 1024) / k);  // ~ a few hundred KB of weights
    printf("quantized dot products, 1 thread, K = %lld; build ISA: %s\n", (long long) k, ggml_cpu_isa_name());
    printf("GB/s of weight bytes read; in-cache: %lld rows, streaming: %lld MiB of weights; %s of %d runs\n\n",
           (long long) rows_cache, (long long) stream_mib, g_best ? "fastest" : "median", reps);
    printf("%-7s %10s %10s %10s %8s %12s\n", "type", "scalar", "simd", "simd", "speedup", "stream size");
    printf("%-7s %10s %10s %10s %8s %12s\n", "", "in-cache", "in-cache", "streaming", "", "MiB");
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    float sink = 0.0f;
    for (ggml_type t : types) {
        if (!only.empty() && ("," + only + ",").find("," + std::string(ggml_type_name(t)) + ",") == std::string::npos) continue;
        const ggml_type vt = ggml_quant_vec_dot_type(t);
        const size_t rs = ggml_row_size(t, k);
        const int64_t rows_stream = std::max<int64_t>(1, (stream_mib << 20) / (int64_t) rs);
        std::vector<float> row(k);
        for (auto & v : row) v = nd(rng);
        std::vector<uint8_t> one(rs);
        if (!quantize_plain(t, row.data(), one.data(), k)) random_blocks(t, one.data(), k, rng);
        // Weight rows: copies of one quantized row (the dot's speed does not depend on values).
        std::vector<uint8_t> w_cache(rs * rows_cache), w_stream(rs * rows_stream);
        for (int64_t i = 0; i < rows_cache; i++) memcpy(w_cache.data() + i * rs, one.data(), rs);
        for (int64_t i = 0; i < rows_stream; i++) memcpy(w_stream.data() + i * rs, one.data(), rs);
        std::vector<uint8_t> act(ggml_row_size(vt, k));
        for (auto & v : row) v = nd(rng);
        ggml_get_type_traits(vt)->from_float_ref(row.data(), act.data(), k);

        const int inner = 20;  // repeat the in-cache pass so one timing is long enough
        auto cache_gbs = [&](ggml_quant_dot_fn f) {
            std::vector<double> t;
            for (int r = 0; r < reps; r++) {
                const double t0 = now_s();
                for (int j = 0; j < inner; j++) {
                    for (int64_t i = 0; i < rows_cache; i++) sink += f(k, w_cache.data() + i * rs, act.data());
                }
                t.push_back(now_s() - t0);
            }
            return (double) rs * rows_cache * inner / pick(t) / 1e9;
        };
        const double g_ref = cache_gbs(ggml_quant_dot_ref(t));
        const double g_best = cache_gbs(ggml_quant_dot_best(t));
        const double ts = time_rows(ggml_quant_dot_best(t), w_stream, rs, rows_stream, k, act, reps, &sink);
        const double g_stream = (double) rs * rows_stream / ts / 1e9;
        printf("%-7s %10.2f %10.2f %10.2f %7.1fx %12.1f\n", ggml_type_name(t), g_ref, g_best, g_stream, g_best / g_ref,
               rs * rows_stream / 1048576.0);
    }
    bench_repacked(types, only, k, stream_mib, reps, &sink);
    if (!mm_cols.empty()) bench_mul_mat(types, only, k, mm_mib, mm_cols, reps);
    if (sink == 12345.678f) printf(" ");
    return 0;
}
