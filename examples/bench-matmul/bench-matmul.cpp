// bench-matmul - speed of mul_mat on the CPU: for F32, F16 and BF16 weights, the GFLOP/s of an
// M x N x K product computed as a graph through the public API (1 and 2 threads by default,
// median of several runs), the scalar reference kernel on a smaller product (1 thread), the
// speed-up, and the matrix-vector case (N = 1) in GB/s of weights read. Each figure is the
// median of the timed runs, the best one in parentheses.
//
// usage: bench-matmul [-s SIZE] [-m M] [-n N] [-k K] [-t THREADS,...] [-r REPEATS]
//                     [--gemv SIZE] [--scalar-size SIZE] [--types f32,f16,bf16]
#include "ggml.h"
#include "ggml-cpu/vec.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Options {
    int64_t m = 1024, n = 1024, k = 1024;
    int64_t gemv = 4096;
    int64_t scalar_size = 256;
    std::vector<int> threads = { 1, 2 };
    int repeats = 5;
    std::vector<ggml_type> types = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
};

void usage(const char * prog) {
    fprintf(stderr,
            "usage: %s [options]\n"
            "  -s, --size N         M = N = K of the matrix product (default 1024)\n"
            "  -m, -n, -k N         one dimension of the product (a is K x M, b is K x N)\n"
            "  -t, --threads LIST   thread counts, comma separated (default 1,2)\n"
            "  -r, --repeats N      timed runs per measurement, the median is reported (default 5)\n"
            "  --gemv N             K = M of the matrix-vector case (default 4096, 0 skips it)\n"
            "  --scalar-size N      M = N of the scalar reference run, K as above (default 256, 0 skips it)\n"
            "  --types LIST         f32,f16,bf16 (default all)\n",
            prog);
}

bool parse_int(const char * s, int64_t & out) {
    char * end = nullptr;
    const long long v = strtoll(s, &end, 10);
    if (!s[0] || *end || v < 0 || v > (1ll << 20)) return false;
    out = v;
    return true;
}

bool parse_args(int argc, char ** argv, Options & o) {
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") return false;
        if (i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value\n", a.c_str());
            return false;
        }
        const char * v = argv[++i];
        int64_t x = 0;
        if (a == "-s" || a == "--size") {
            if (!parse_int(v, x) || x == 0) goto bad;
            o.m = o.n = o.k = x;
        } else if (a == "-m") {
            if (!parse_int(v, o.m) || o.m == 0) goto bad;
        } else if (a == "-n") {
            if (!parse_int(v, o.n) || o.n == 0) goto bad;
        } else if (a == "-k") {
            if (!parse_int(v, o.k) || o.k == 0) goto bad;
        } else if (a == "-r" || a == "--repeats") {
            if (!parse_int(v, x) || x == 0 || x > 1000) goto bad;
            o.repeats = (int) x;
        } else if (a == "--gemv") {
            if (!parse_int(v, o.gemv)) goto bad;
        } else if (a == "--scalar-size") {
            if (!parse_int(v, o.scalar_size)) goto bad;
        } else if (a == "-t" || a == "--threads") {
            o.threads.clear();
            std::string s = v;
            size_t pos = 0;
            while (pos <= s.size()) {
                const size_t c = s.find(',', pos);
                const std::string item = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
                if (!parse_int(item.c_str(), x) || x == 0 || x > 512) goto bad;
                o.threads.push_back((int) x);
                if (c == std::string::npos) break;
                pos = c + 1;
            }
        } else if (a == "--types") {
            o.types.clear();
            std::string s = v;
            size_t pos = 0;
            while (pos <= s.size()) {
                const size_t c = s.find(',', pos);
                const std::string item = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
                if (item == "f32") o.types.push_back(GGML_TYPE_F32);
                else if (item == "f16") o.types.push_back(GGML_TYPE_F16);
                else if (item == "bf16") o.types.push_back(GGML_TYPE_BF16);
                else goto bad;
                if (c == std::string::npos) break;
                pos = c + 1;
            }
        } else {
            fprintf(stderr, "error: unknown option %s\n", a.c_str());
            return false;
        }
        continue;
    bad:
        fprintf(stderr, "error: bad value '%s' for %s\n", v, a.c_str());
        return false;
    }
    return true;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds of the timed runs: the median (reported) and the fastest (shown beside it: on a
// shared machine the gap tells how much other processes disturbed the run).
struct Timing {
    double median = -1, best = -1;
};

Timing summarize(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    Timing t;
    t.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    t.best = v[0];
    return t;
}

// "median (best)" of a rate computed as amount / seconds.
std::string rate_str(double amount, const Timing & t, int prec) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*f (%.*f)", prec, amount / t.median, prec, amount / t.best);
    return buf;
}

void fill_random(ggml_tensor * t, std::mt19937 & rng) {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    const int64_t n = ggml_nelements(t);
    switch (t->type) {
        case GGML_TYPE_F32:  for (int64_t i = 0; i < n; i++) ((float *) t->data)[i] = d(rng); break;
        case GGML_TYPE_F16:  for (int64_t i = 0; i < n; i++) ((ggml_fp16_t *) t->data)[i] = ggml_fp32_to_fp16(d(rng)); break;
        case GGML_TYPE_BF16: for (int64_t i = 0; i < n; i++) ((ggml_bf16_t *) t->data)[i] = ggml_fp32_to_bf16(d(rng)); break;
        default: break;
    }
}

// Seconds of one mul_mat (a: K x M of type, b: K x N F32) through the graph API; a negative
// median when the context cannot be created.
Timing time_mul_mat(ggml_type type, int64_t m, int64_t n, int64_t k, int n_threads, int repeats) {
    const size_t bytes = ggml_row_size(type, k) * m + (size_t) (k + m) * n * sizeof(float) + 16 * ggml_tensor_overhead() +
                         ggml_graph_overhead() + (1u << 20);
    ggml_init_params ip = { bytes, nullptr, false };
    ggml_context * ctx = ggml_init(ip);
    if (!ctx) return Timing();
    ggml_tensor * a = ggml_new_tensor_2d(ctx, type, k, m);
    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
    std::mt19937 rng(42);
    fill_random(a, rng);
    fill_random(b, rng);
    ggml_tensor * out = ggml_mul_mat(ctx, a, b);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);

    ggml_cplan plan = ggml_graph_plan(gf, n_threads);
    std::vector<uint8_t> work(plan.work_size + 64);
    plan.work_data = work.data();
    ggml_graph_compute(gf, &plan);  // warm-up: threads started, pages touched
    std::vector<double> times;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now_s();
        ggml_graph_compute(gf, &plan);
        times.push_back(now_s() - t0);
    }
    ggml_free(ctx);
    return summarize(times);
}

// Seconds of an m x n x k product with the scalar reference dot tiles (b already in the
// vec_dot_type), one thread.
Timing time_scalar(ggml_type type, int64_t m, int64_t n, int64_t k, int repeats) {
    const ggml_mm_type_kernels * kern = ggml_vec_scalar.mm_type(type);
    const size_t lda = ggml_row_size(type, k), ldb = ggml_row_size(kern->vec_dot_type, k);
    std::vector<uint8_t> a(lda * m), b(ldb * n);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> row(k);
    for (int64_t i = 0; i < m; i++) {
        for (float & v : row) v = d(rng);
        if (type == GGML_TYPE_F32) memcpy(&a[i * lda], row.data(), lda);
        else kern->from_float(row.data(), &a[i * lda], k);  // a's type is its own vec_dot_type here
    }
    for (int64_t i = 0; i < n; i++) {
        for (float & v : row) v = d(rng);
        if (kern->from_float) kern->from_float(row.data(), &b[i * ldb], k);
        else memcpy(&b[i * ldb], row.data(), ldb);
    }
    std::vector<float> c(m * n);
    std::vector<double> times;
    for (int r = 0; r < repeats; r++) {
        const double t0 = now_s();
        for (int64_t j = 0; j < n; j += GGML_DOT_TILE_MAX)
            for (int64_t i = 0; i < m; i += GGML_DOT_TILE_MAX) {
                const int nr = (int) std::min<int64_t>(GGML_DOT_TILE_MAX, m - i);
                const int nc = (int) std::min<int64_t>(GGML_DOT_TILE_MAX, n - j);
                kern->dot_tile(k, nr, nc, &a[i * lda], lda, &b[j * ldb], ldb, &c[j * m + i], m);
            }
        times.push_back(now_s() - t0);
    }
    volatile float sink = c[0];
    (void) sink;
    return summarize(times);
}

}  // namespace

int main(int argc, char ** argv) {
    Options o;
    if (!parse_args(argc, argv, o)) {
        usage(argv[0]);
        return 1;
    }
    printf("bench-matmul: ISA %s, product %lld x %lld x %lld (M x N x K), median (best) of %d runs\n", ggml_cpu_isa_name(),
           (long long) o.m, (long long) o.n, (long long) o.k, o.repeats);
    if (FILE * f = fopen("/proc/loadavg", "r")) {
        double load = 0;
        if (fscanf(f, "%lf", &load) == 1) printf("load average at start: %.2f (other processes distort timings)\n", load);
        fclose(f);
    }

    const double gflop = 2.0 * o.m * o.n * o.k / 1e9;
    printf("\nGFLOP/s\n%-5s", "type");
    for (int t : o.threads) printf("  %16s", (std::to_string(t) + " thread" + (t > 1 ? "s" : "")).c_str());
    if (o.scalar_size > 0) printf("  %16s  %s", "scalar 1 thread", "speed-up 1 thread");
    printf("\n");
    for (ggml_type type : o.types) {
        printf("%-5s", ggml_type_name(type));
        double first = 0;
        for (size_t i = 0; i < o.threads.size(); i++) {
            const Timing t = time_mul_mat(type, o.m, o.n, o.k, o.threads[i], o.repeats);
            if (t.median < 0) {
                fprintf(stderr, "error: out of memory\n");
                return 1;
            }
            if (i == 0) first = gflop / t.median;
            printf("  %16s", rate_str(gflop, t, 1).c_str());
            fflush(stdout);
        }
        if (o.scalar_size > 0) {
            const int64_t sm = std::min(o.scalar_size, o.m), sn = std::min(o.scalar_size, o.n);
            const Timing t = time_scalar(type, sm, sn, o.k, std::min(o.repeats, 3));
            const double sgflop = 2.0 * sm * sn * o.k / 1e9;
            printf("  %16s  %8.1fx", rate_str(sgflop, t, 2).c_str(), first / (sgflop / t.median));
        }
        printf("\n");
    }

    if (o.gemv > 0) {
        printf("\nmatrix-vector (N = 1, K = M = %lld): GB/s of weights read\n%-5s", (long long) o.gemv, "type");
        for (int t : o.threads) printf("  %16s", (std::to_string(t) + " thread" + (t > 1 ? "s" : "")).c_str());
        printf("\n");
        for (ggml_type type : o.types) {
            printf("%-5s", ggml_type_name(type));
            const double gb = ggml_row_size(type, o.gemv) * (double) o.gemv / 1e9;
            for (int t : o.threads) {
                const Timing tm = time_mul_mat(type, o.gemv, 1, o.gemv, t, std::max(o.repeats, 10));
                if (tm.median < 0) {
                    fprintf(stderr, "error: out of memory\n");
                    return 1;
                }
                printf("  %16s", rate_str(gb, tm, 1).c_str());
                fflush(stdout);
            }
            printf("\n");
        }
    }
    return 0;
}
