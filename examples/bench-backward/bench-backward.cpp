// bench-backward - speed of the gradient of a linear layer with respect to its input, against the
// forward product, on the CPU. For each weight type and layer shape (a: K x M weights, x: K x N
// activations, grad: M x N output gradient) it times, through graphs computed with
// ggml_graph_compute_with_ctx:
//   forward   y  = mul_mat(a, x)                  [M, N]
//   backward  dx = out_prod(a, transpose(grad))   [K, N]
// both 2*K*M*N flops, and prints a markdown table of GFLOP/s (median of the runs) and the ratio
// backward / forward. Quantized weights are repacked where this build repacks the type, as the
// llama runtime does at load (--no-repack keeps the file layout). --bf16 adds the backward with
// the opt-in BF16 products (ggml_out_prod_set_prec) and its relative error against the F32 one
// (Frobenius norm of the difference over that of the F32 result); --int8 the same with the opt-in
// int8 products (GGML_PREC_INT8: Q8_0 operands through the forward's repacked kernel).
//
// usage: bench-backward [-t THREADS] [-r REPEATS] [-n TOKENS] [--types f32,bf16,q8_0,q4_0,q4_k]
//                       [--shapes KxM,...] [--no-repack] [--bf16] [--int8] [--gemm-min-n N]
#include "ggml.h"
#include "ggml-cpu/quant-repack.h"
#include "ggml-cpu/vec.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Shape {
    int64_t k, m;
};

struct Options {
    int threads = 2;
    int repeats = 5;
    int64_t n = 256;
    bool repack = true;
    bool bf16 = false;
    bool int8 = false;
    std::vector<ggml_type> types = { GGML_TYPE_F32, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K };
    // The projections of TinyLlama-1.1B: attention (2048 x 2048), FFN up/gate and down.
    std::vector<Shape> shapes = { { 2048, 2048 }, { 2048, 5632 }, { 5632, 2048 } };
};

void usage(const char * prog) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -t, --threads N     threads (default 2)\n"
            "  -r, --repeats N     timed runs per measurement, the median is reported (default 5)\n"
            "  -n, --tokens N      columns of the activations (default 256)\n"
            "  --types LIST        of f32,f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_nl\n"
            "                      (default f32,bf16,q8_0,q4_0,q4_k)\n"
            "  --shapes LIST       KxM,... weight shapes (default 2048x2048,2048x5632,5632x2048)\n"
            "  --no-repack         keep quantized weights in the file layout\n"
            "  --bf16              also time the backward with opt-in BF16 products, and give its error\n"
            "  --int8              also time the backward with opt-in int8 products, and give its error\n"
            "  --gemm-min-n N      N from which mul_mat and out_prod take the packed GEMM (default: the build's)\n",
            prog);
}

bool parse_int(const std::string & s, int64_t lo, int64_t hi, int64_t & out) {
    char * end = nullptr;
    const long long v = strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end || v < lo || v > hi) return false;
    out = v;
    return true;
}

std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (true) {
        const size_t c = s.find(sep, pos);
        out.push_back(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
        if (c == std::string::npos) return out;
        pos = c + 1;
    }
}

bool parse_type(const std::string & s, ggml_type & t) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (!ggml_type_is_valid(i)) continue;
        std::string name = ggml_type_name((ggml_type) i);
        for (char & c : name) c = (char) tolower((unsigned char) c);
        if (name == s) {
            t = (ggml_type) i;
            return ggml_get_type_traits(t)->to_float != nullptr;
        }
    }
    return false;
}

bool parse_args(int argc, char ** argv, Options & o) {
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") return false;
        if (a == "--int8") {
            o.int8 = true;
            continue;
        }
        if (a == "--no-repack" || a == "--bf16") {
            (a == "--bf16" ? o.bf16 : o.repack) = a == "--bf16";
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value\n", a.c_str());
            return false;
        }
        const std::string v = argv[++i];
        int64_t x = 0;
        bool ok = true;
        if (a == "-t" || a == "--threads") {
            ok = parse_int(v, 1, 512, x);
            o.threads = (int) x;
        } else if (a == "-r" || a == "--repeats") {
            ok = parse_int(v, 1, 1000, x);
            o.repeats = (int) x;
        } else if (a == "-n" || a == "--tokens") {
            ok = parse_int(v, 1, 1 << 16, o.n);
        } else if (a == "--gemm-min-n") {
            ok = parse_int(v, 1, 1 << 16, x);
            ggml_mm_gemm_min_n = ggml_out_prod_gemm_min_n = (int) x;
        } else if (a == "--types") {
            o.types.clear();
            for (const std::string & item : split(v, ',')) {
                ggml_type t;
                ok = ok && parse_type(item, t);
                if (ok) o.types.push_back(t);
            }
        } else if (a == "--shapes") {
            o.shapes.clear();
            for (const std::string & item : split(v, ',')) {
                const std::vector<std::string> km = split(item, 'x');
                Shape s = { 0, 0 };
                ok = ok && km.size() == 2 && parse_int(km[0], 1, 1 << 16, s.k) && parse_int(km[1], 1, 1 << 16, s.m);
                o.shapes.push_back(s);
            }
        } else {
            fprintf(stderr, "error: unknown option %s\n", a.c_str());
            return false;
        }
        if (!ok) {
            fprintf(stderr, "error: bad value '%s' for %s\n", v.c_str(), a.c_str());
            return false;
        }
    }
    return true;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds of computing gf; the work buffer comes from wctx, reset before every run so that
// the same (already touched) memory serves each one.
double time_graph(ggml_cgraph * gf, ggml_context * wctx, int threads, int repeats) {
    // Warm-up: threads started, pages touched, and the cores' clocks up after idling (a single
    // run left the first figures of a process ~30% low): at least 2 runs and 0.3 s.
    const double w0 = now_s();
    for (int i = 0; i < 2 || now_s() - w0 < 0.3; i++) {
        ggml_reset(wctx);
        if (ggml_graph_compute_with_ctx(wctx, gf, threads) != GGML_STATUS_SUCCESS) return -1;
    }
    std::vector<double> times;
    for (int r = 0; r < repeats; r++) {
        ggml_reset(wctx);
        const double t0 = now_s();
        if (ggml_graph_compute_with_ctx(wctx, gf, threads) != GGML_STATUS_SUCCESS) return -1;
        times.push_back(now_s() - t0);
    }
    return median(times);
}

struct Result {
    double fwd = -1, bwd = -1, bwd_bf16 = -1;  // seconds
    double err_bf16 = -1;                      // ||dx_bf16 - dx|| / ||dx||
    double bwd_int8 = -1, err_int8 = -1;
    bool repacked = false;
};

double rel_diff(const ggml_tensor * x, const ggml_tensor * ref) {
    double d2 = 0, r2 = 0;
    for (int64_t i = 0; i < ggml_nelements(ref); i++) {
        const double r = ((const float *) ref->data)[i], v = ((const float *) x->data)[i];
        d2 += (v - r) * (v - r);
        r2 += r * r;
    }
    return r2 > 0 ? sqrt(d2 / r2) : 0.0;
}

Result bench(ggml_type type, const Shape & s, const Options & o) {
    Result res;
    const int64_t K = s.k, M = s.m, N = o.n;
    if (K % ggml_blck_size(type) != 0) return res;
    const size_t bytes = ggml_row_size(type, K) * M + (size_t) (K + 2 * M + 3 * K) * N * sizeof(float) +
                         16 * ggml_tensor_overhead() + 2 * ggml_graph_overhead() + (1u << 20);
    ggml_init_params ip = { bytes, nullptr, false };
    ggml_context * ctx = ggml_init(ip);
    if (!ctx) return res;

    std::mt19937 rng(42);
    std::normal_distribution<float> d(0.0f, 1.0f);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, type, K, M);
    {
        std::vector<float> w((size_t) K * M);
        for (float & v : w) v = 0.02f * d(rng);
        ggml_quantize_chunk(type, w.data(), a->data, 0, M, K, nullptr);
    }
    if (o.repack && ggml_cpu_can_repack(a)) res.repacked = ggml_cpu_repack(a);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    ggml_tensor * grad = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, M, N);
    for (int64_t i = 0; i < K * N; i++) ((float *) x->data)[i] = d(rng);
    for (int64_t i = 0; i < M * N; i++) ((float *) grad->data)[i] = 1e-3f * d(rng);

    ggml_tensor * y = ggml_mul_mat(ctx, a, x);
    ggml_tensor * dx = ggml_out_prod(ctx, a, ggml_transpose(ctx, grad));
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_cgraph * gb = ggml_new_graph(ctx);
    ggml_build_forward_expand(gb, dx);
    ggml_tensor * dx16 = ggml_out_prod(ctx, a, ggml_transpose(ctx, grad));
    ggml_out_prod_set_prec(dx16, GGML_PREC_BF16);
    ggml_cgraph * gb16 = ggml_new_graph(ctx);
    ggml_build_forward_expand(gb16, dx16);

    ggml_tensor * dx8 = ggml_out_prod(ctx, a, ggml_transpose(ctx, grad));
    ggml_out_prod_set_prec(dx8, GGML_PREC_INT8);
    ggml_cgraph * gb8 = ggml_new_graph(ctx);
    ggml_build_forward_expand(gb8, dx8);

    const size_t wsize = std::max({ ggml_graph_plan(gf, o.threads).work_size, ggml_graph_plan(gb, o.threads).work_size,
                                    ggml_graph_plan(gb16, o.threads).work_size, ggml_graph_plan(gb8, o.threads).work_size });
    ggml_init_params wp = { wsize + (1u << 16), nullptr, false };
    ggml_context * wctx = ggml_init(wp);
    if (wctx) {
        res.fwd = time_graph(gf, wctx, o.threads, o.repeats);
        res.bwd = time_graph(gb, wctx, o.threads, o.repeats);
        if (o.bf16) {
            res.bwd_bf16 = time_graph(gb16, wctx, o.threads, o.repeats);
            res.err_bf16 = rel_diff(dx16, dx);
        }
        if (o.int8) {
            res.bwd_int8 = time_graph(gb8, wctx, o.threads, o.repeats);
            res.err_int8 = rel_diff(dx8, dx);
        }
        ggml_free(wctx);
    }
    ggml_free(ctx);
    return res;
}

}  // namespace

int main(int argc, char ** argv) {
    Options o;
    if (!parse_args(argc, argv, o)) {
        usage(argv[0]);
        return 1;
    }
    printf("bench-backward: ISA %s, %d thread%s, N = %lld tokens, median of %d runs\n", ggml_cpu_isa_name(), o.threads,
           o.threads > 1 ? "s" : "", (long long) o.n, o.repeats);
    if (FILE * f = fopen("/proc/loadavg", "r")) {
        double load = 0;
        if (fscanf(f, "%lf", &load) == 1) printf("load average at start: %.2f (other processes distort timings)\n", load);
        fclose(f);
    }
    printf("forward: mul_mat(a [K, M], x [K, N]); backward: out_prod(a, transpose(grad [M, N])); GFLOP/s = 2*K*M*N / time\n\n");
    if (o.bf16) {
        printf("BF16 products: %s\n", ggml_vec_best()->gemm_bf16_pairs ? "AVX512-BF16 kernel"
                                                                       : "no fast kernel in this build (F32 products)");
    }
    if (o.int8) {
        const ggml_repack_traits * q8 = ggml_repack_get_traits(GGML_TYPE_Q8_0);
        printf("int8 products: %s\n", q8 && q8->gemm ? "the forward's Q8_0 x16 kernel" : "no kernel in this build (F32 products)");
    }
    if (o.bf16 || o.int8) printf("\n");
    printf("| type | K | M | forward GFLOP/s | backward GFLOP/s | backward / forward |");
    if (o.bf16) printf(" backward BF16 GFLOP/s | BF16 / forward | BF16 rel. error |");
    if (o.int8) printf(" backward int8 GFLOP/s | int8 / forward | int8 rel. error |");
    printf("\n|------|---|---|----------------:|-----------------:|-------------------:|");
    if (o.bf16) printf("----------------------:|---------------:|----------------:|");
    if (o.int8) printf("----------------------:|---------------:|----------------:|");
    printf("\n");
    for (ggml_type type : o.types) {
        for (const Shape & s : o.shapes) {
            const Result r = bench(type, s, o);
            std::string name = ggml_type_name(type);
            if (r.repacked) name += " (repacked)";
            if (r.fwd <= 0 || r.bwd <= 0) {
                printf("| %s | %lld | %lld | - | - | - |\n", name.c_str(), (long long) s.k, (long long) s.m);
                continue;
            }
            const double gflop = 2.0 * s.k * s.m * o.n / 1e9;
            printf("| %s | %lld | %lld | %.1f | %.1f | %.2f |", name.c_str(), (long long) s.k, (long long) s.m,
                   gflop / r.fwd, gflop / r.bwd, r.fwd / r.bwd);
            if (r.bwd_bf16 > 0) printf(" %.1f | %.2f | %.1e |", gflop / r.bwd_bf16, r.fwd / r.bwd_bf16, r.err_bf16);
            if (r.bwd_int8 > 0) printf(" %.1f | %.2f | %.1e |", gflop / r.bwd_int8, r.fwd / r.bwd_int8, r.err_int8);
            printf("\n");
            fflush(stdout);
        }
    }
    return 0;
}
