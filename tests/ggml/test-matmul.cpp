// test-matmul.cpp - mul_mat and out_prod against naive double-precision references (odd sizes,
// vectors, broadcasts, padded / permuted / transposed inputs, both mul_mat paths, 1/2/3 threads
// bit-identical), and every compiled-in SIMD kernel set held to the scalar reference kernels.
#include "test-ref.h"

#include "ggml-cpu/cpu-ops.h"
#include "ggml-cpu/kernels.h"

#include <algorithm>
#include <cfloat>
#include <string>

namespace {

using namespace tu;  // test-util.h and test-ref.h: Shape, Values, Layout, new_input, references

const ggml_type kTypes[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };

// Float accumulation of K products can be off by about K * eps * sum |a_k b_k| (worst case).
double accum_tol(int64_t K, double sum_abs) { return (K + 4) * (double) FLT_EPSILON * sum_abs + 1e-30; }

// Expects every |got - ref| <= tol (elementwise); reports the first few failures.
void expect_within(const std::vector<double> & got, const std::vector<double> & ref, const std::vector<double> & tol,
                   const std::string & what) {
    ASSERT_EQ(got.size(), ref.size()) << what;
    int bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (!(std::fabs(got[i] - ref[i]) <= tol[i]) && bad++ < 5) {
            ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", expected " << ref[i] << " (tol " << tol[i] << ")";
        }
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements out of tolerance";
}

// ---- mul_mat through the graph -------------------------------------------------------------
struct MulMatCase {
    ggml_type type;
    int64_t K, M, N;
    Shape a23 = { 1, 1, 1, 1 };  // a's dims 2, 3 in [2], [3]
    Shape b23 = { 1, 1, 1, 1 };
    Layout la = Layout::Contiguous, lb = Layout::Contiguous;
};

std::string describe(const MulMatCase & c) {
    return std::string(ggml_type_name(c.type)) + " K=" + std::to_string(c.K) + " M=" + std::to_string(c.M) +
           " N=" + std::to_string(c.N) + " a23=" + std::to_string(c.a23[2]) + "x" + std::to_string(c.a23[3]) +
           " b23=" + std::to_string(c.b23[2]) + "x" + std::to_string(c.b23[3]) + " a " + layout_name(c.la) +
           " b " + layout_name(c.lb) + " gemm_min_n=" + std::to_string(ggml_mm_gemm_min_n);
}

void check_mul_mat(const MulMatCase & c) {
    SCOPED_TRACE(describe(c));
    const Shape na = { c.K, c.M, c.a23[2], c.a23[3] };
    const Shape nbs = { c.K, c.N, c.b23[2], c.b23[3] };
    tu::Ctx ctx(96u << 20);
    ggml_tensor * a = new_input(ctx, c.type, na, c.la);
    ggml_tensor * b = new_input(ctx, GGML_TYPE_F32, nbs, c.lb);
    std::mt19937 rng((uint32_t) (c.K * 131 + c.M * 17 + c.N * 7 + c.type));
    tu::fill_uniform(a, rng);
    tu::fill_uniform(b, rng);
    ggml_tensor * out = ggml_mul_mat(ctx, a, b);
    ASSERT_EQ(out->ne[0], c.M);
    ASSERT_EQ(out->ne[1], c.N);
    const std::vector<double> got = tu::compute_all_threads(ctx, out);

    const std::vector<double> av = tu::to_double(a);
    std::vector<double> bv = tu::to_double(b);
    for (double & v : bv) v = round_to(c.type, v);  // b is rounded to a's vec_dot_type before the dot products
    const int64_t B2 = nbs[2], r2 = nbs[2] / na[2], r3 = nbs[3] / na[3];
    std::vector<double> ref, tol;
    for (int64_t i3 = 0; i3 < nbs[3]; i3++)
        for (int64_t i2 = 0; i2 < B2; i2++)
            for (int64_t n = 0; n < c.N; n++)
                for (int64_t m = 0; m < c.M; m++) {
                    const double * ar = &av[(((i3 / r3) * na[2] + i2 / r2) * c.M + m) * c.K];
                    const double * br = &bv[((i3 * B2 + i2) * c.N + n) * c.K];
                    double s = 0, sa = 0;
                    for (int64_t k = 0; k < c.K; k++) {
                        s += ar[k] * br[k];
                        sa += std::fabs(ar[k] * br[k]);
                    }
                    ref.push_back(s);
                    tol.push_back(accum_tol(c.K, sa));
                }
    expect_within(got, ref, tol, "mul_mat");
}

// Sets the N from which mul_mat takes the GEMM path for one scope.
struct GemmMinN {
    int saved;
    explicit GemmMinN(int n) : saved(ggml_mm_gemm_min_n) { ggml_mm_gemm_min_n = n; }
    ~GemmMinN() { ggml_mm_gemm_min_n = saved; }
};

const int64_t kOddK[] = { 1, 3, 17, 31, 64, 257 };
const std::pair<int64_t, int64_t> kMN[] = { { 1, 1 }, { 2, 5 }, { 5, 2 }, { 33, 67 }, { 64, 64 }, { 67, 33 }, { 1, 67 }, { 67, 1 }, { 5, 64 } };

TEST(MulMat, OddSizesAllTypes) {
    for (ggml_type t : kTypes)
        for (int64_t K : kOddK)
            for (auto mn : kMN) check_mul_mat({ t, K, mn.first, mn.second });
}

TEST(MulMat, BothPathsOnTheSameShapes) {
    for (int min_n : { 1, 1 << 30 }) {
        GemmMinN force(min_n);
        for (ggml_type t : kTypes)
            for (int64_t K : { 1, 31, 257 })
                for (auto mn : kMN) check_mul_mat({ t, K, mn.first, mn.second });
    }
}

TEST(MulMat, MatrixVector) {
    for (ggml_type t : kTypes) {
        check_mul_mat({ t, 300, 130, 1 });
        check_mul_mat({ t, 4096, 9, 1 });
        check_mul_mat({ t, 1, 200, 1 });
    }
}

TEST(MulMat, BroadcastDims2And3) {
    for (ggml_type t : kTypes) {
        for (int64_t N : { 3, 40 }) {
            MulMatCase c = { t, 19, 7, N };
            c.a23 = { 0, 0, 2, 3 };
            c.b23 = { 0, 0, 4, 3 };
            check_mul_mat(c);
            c.a23 = { 0, 0, 1, 1 };
            c.b23 = { 0, 0, 2, 3 };
            check_mul_mat(c);
            c.a23 = { 0, 0, 3, 1 };
            c.b23 = { 0, 0, 3, 2 };
            check_mul_mat(c);
        }
    }
}

TEST(MulMat, NonContiguousInputs) {
    const Layout la_all[] = { Layout::Contiguous, Layout::Padded, Layout::Permuted12 };
    const Layout lb_all[] = { Layout::Contiguous, Layout::Padded, Layout::Transposed, Layout::Permuted12 };
    for (ggml_type t : kTypes)
        for (Layout la : la_all)
            for (Layout lb : lb_all)
                for (int64_t N : { 2, 37 }) {
                    MulMatCase c = { t, 33, 21, N };
                    c.a23 = { 0, 0, 2, 1 };
                    c.b23 = { 0, 0, 2, 2 };
                    c.la = la;
                    c.lb = lb;
                    check_mul_mat(c);
                }
}

// Several cache blocks of k and of a's rows, edge tiles on both sides.
TEST(MulMat, LargerThanCacheBlocks) {
    for (ggml_type t : kTypes) check_mul_mat({ t, 801, 270, 29 });
}

// ---- out_prod ------------------------------------------------------------------------------
struct OutProdCase {
    ggml_type type;
    int64_t M, N, K;
    Shape a23 = { 1, 1, 1, 1 };
    Shape b23 = { 1, 1, 1, 1 };
    Layout la = Layout::Contiguous, lb = Layout::Contiguous;
};

void check_out_prod(const OutProdCase & c) {
    SCOPED_TRACE(std::string(ggml_type_name(c.type)) + " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
                 " K=" + std::to_string(c.K) + " a " + layout_name(c.la) + " b " + layout_name(c.lb) +
                 " a23=" + std::to_string(c.a23[2]) + "x" + std::to_string(c.a23[3]) +
                 " b23=" + std::to_string(c.b23[2]) + "x" + std::to_string(c.b23[3]));
    const Shape na = { c.M, c.K, c.a23[2], c.a23[3] };
    const Shape nbs = { c.N, c.K, c.b23[2], c.b23[3] };
    tu::Ctx ctx(64u << 20);
    ggml_tensor * a = new_input(ctx, c.type, na, c.la);
    ggml_tensor * b = new_input(ctx, GGML_TYPE_F32, nbs, c.lb);
    std::mt19937 rng((uint32_t) (c.K * 31 + c.M * 7 + c.N * 3 + c.type));
    tu::fill_uniform(a, rng);
    tu::fill_uniform(b, rng);
    ggml_tensor * out = ggml_out_prod(ctx, a, b);
    ASSERT_EQ(out->ne[0], c.M);
    ASSERT_EQ(out->ne[1], c.N);
    const std::vector<double> got = tu::compute_all_threads(ctx, out);

    const std::vector<double> av = tu::to_double(a);
    const std::vector<double> bv = tu::to_double(b);
    const int64_t B2 = nbs[2], r2 = nbs[2] / na[2], r3 = nbs[3] / na[3];
    std::vector<double> ref, tol;
    for (int64_t i3 = 0; i3 < nbs[3]; i3++)
        for (int64_t i2 = 0; i2 < B2; i2++)
            for (int64_t n = 0; n < c.N; n++)
                for (int64_t m = 0; m < c.M; m++) {
                    const int64_t pa = (i3 / r3) * na[2] + i2 / r2, pb = i3 * B2 + i2;
                    double s = 0, sa = 0;
                    for (int64_t k = 0; k < c.K; k++) {
                        const double p = av[(pa * c.K + k) * c.M + m] * bv[(pb * c.K + k) * c.N + n];
                        s += p;
                        sa += std::fabs(p);
                    }
                    ref.push_back(s);
                    tol.push_back(accum_tol(c.K, sa));
                }
    expect_within(got, ref, tol, "out_prod");
}

TEST(OutProd, OddSizesAllTypes) {
    for (ggml_type t : kTypes)
        for (int64_t K : { 1, 3, 17, 64 })
            for (auto mn : kMN) check_out_prod({ t, mn.first, mn.second, K });
}

TEST(OutProd, NonContiguousAndBroadcast) {
    const Layout la_all[] = { Layout::Contiguous, Layout::Padded, Layout::Transposed, Layout::Permuted12 };
    const Layout lb_all[] = { Layout::Contiguous, Layout::Padded, Layout::Transposed };
    for (ggml_type t : kTypes)
        for (Layout la : la_all)
            for (Layout lb : lb_all) {
                OutProdCase c = { t, 37, 11, 13 };
                c.a23 = { 0, 0, 2, 3 };
                c.b23 = { 0, 0, 4, 3 };
                c.la = la;
                c.lb = lb;
                check_out_prod(c);
            }
}

TEST(OutProd, LongRows) {
    for (ggml_type t : kTypes) check_out_prod({ t, 600, 20, 41 });
}

// ---- SIMD kernels against the scalar reference kernels -------------------------------------
std::vector<const ggml_cpu_kernels *> simd_sets() {
    const ggml_cpu_kernels * sets[4];
    const int n = ggml_cpu_kernel_sets(sets);  // every compiled-in set, the scalar one last
    std::vector<const ggml_cpu_kernels *> v;
    for (int i = 0; i < n; i++) {
        if (sets[i] != &ggml_cpu_kernels_scalar) v.push_back(sets[i]);
    }
    return v;
}

// Rows of random values stored in `type` (contiguous, row stride ld bytes) and their values.
struct Rows {
    ggml_type type;
    int64_t n, k;
    size_t ld;
    std::vector<uint8_t> data;
    std::vector<float> val;  // n x k

    Rows(ggml_type t, int64_t rows, int64_t kk, std::mt19937 & rng) : type(t), n(rows), k(kk) {
        ld = ggml_row_size(t, k) + 16;  // padded rows
        data.assign(ld * n + 64, 0);
        val.resize(n * k);
        std::uniform_real_distribution<float> d(-1.0f, 1.0f);
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < k; i++) {
                const float v = d(rng);
                uint8_t * p = data.data() + r * ld;
                switch (t) {
                    case GGML_TYPE_F16:  ((ggml_fp16_t *) p)[i] = ggml_fp32_to_fp16(v); val[r * k + i] = ggml_fp16_to_fp32(((ggml_fp16_t *) p)[i]); break;
                    case GGML_TYPE_BF16: ((ggml_bf16_t *) p)[i] = ggml_fp32_to_bf16(v); val[r * k + i] = ggml_bf16_to_fp32(((ggml_bf16_t *) p)[i]); break;
                    default:             ((float *) p)[i] = v; val[r * k + i] = v; break;
                }
            }
    }
    const void * row(int64_t r) const { return data.data() + r * ld; }
    double sum_abs(const Rows & o, int64_t i, int64_t j) const {
        double s = 0;
        for (int64_t x = 0; x < k; x++) s += std::fabs((double) val[i * k + x] * o.val[j * k + x]);
        return s;
    }
};

TEST(VecKernels, DotTilesMatchScalar) {
    const auto sets = simd_sets();
    if (sets.empty()) GTEST_SKIP() << "scalar-only build";
    std::mt19937 rng(7);
    for (const ggml_cpu_kernels * vk : sets)
        for (ggml_type t : kTypes)
            // 1100, 1500: rows of 2-12 KiB, which one column reads row by row (rows side by side
            // where the set prefetches them).
            for (int64_t K : { 1, 7, 16, 33, 100, 257, 1100, 1500 }) {
                SCOPED_TRACE(std::string(vk->isa) + " " + ggml_type_name(t) + " K=" + std::to_string(K));
                const ggml_mm_type_kernels * simd = vk->mm_type(t);
                const ggml_mm_type_kernels * ref = ggml_cpu_kernels_scalar.mm_type(t);
                ASSERT_TRUE(simd && ref);
                ASSERT_EQ(simd->vec_dot_type, ref->vec_dot_type);
                const Rows a(t, 4, K, rng), b(simd->vec_dot_type, 4, K, rng);
                float want[16], single[16];
                ref->dot_tile(K, 4, 4, a.row(0), a.ld, b.row(0), b.ld, want, 4);
                for (int c = 0; c < 4; c++)
                    for (int r = 0; r < 4; r++) simd->dot_tile(K, 1, 1, a.row(r), a.ld, b.row(c), b.ld, &single[c * 4 + r], 1);
                for (int i = 0; i < 16; i++) {
                    EXPECT_NEAR(single[i], want[i], accum_tol(K, a.sum_abs(b, i % 4, i / 4))) << "element " << i;
                }
                // Every tile shape gives bit-identical outputs (thread splits rely on it).
                for (int nr = 1; nr <= 4; nr++)
                    for (int nc = 1; nc <= 4; nc++) {
                        float got[16];
                        simd->dot_tile(K, nr, nc, a.row(0), a.ld, b.row(0), b.ld, got, 4);
                        for (int c = 0; c < nc; c++)
                            for (int r = 0; r < nr; r++) {
                                EXPECT_EQ(got[c * 4 + r], single[c * 4 + r]) << "tile " << nr << "x" << nc << " r " << r << " c " << c;
                            }
                    }
            }
}

// Reads unit (u, i) of a packed panel as the two bf16 halves or one float.
float unit_value(const std::vector<float> & p, int width, int64_t u, int i) { return p[u * width + i]; }

TEST(VecKernels, PackAndMicroKernelMatchScalar) {
    std::vector<const ggml_cpu_kernels *> sets = simd_sets();
    sets.push_back(&ggml_cpu_kernels_scalar);  // the scalar GEMM too, against the scalar dot tile
    std::mt19937 rng(11);
    for (const ggml_cpu_kernels * vk : sets)
        for (ggml_type t : kTypes) {
            const ggml_mm_type_kernels * kern = vk->mm_type(t);
            const ggml_gemm_kernel * g = kern->gemm;
            ASSERT_TRUE(g != nullptr);
            const ggml_mm_type_kernels * ref = ggml_cpu_kernels_scalar.mm_type(t);
            for (int64_t K : { 1, 2, 3, 17, 64, 101, 257, 640 })
                for (int ra : { g->mr, std::max(1, g->mr - 3), 1 })
                    for (int rb : { g->nr, std::max(1, g->nr - 1), 1 }) {
                        SCOPED_TRACE(std::string(vk->isa) + " " + ggml_type_name(t) + " K=" + std::to_string(K) +
                                     " rows " + std::to_string(ra) + "x" + std::to_string(rb));
                        const Rows a(t, ra, K, rng), b(kern->vec_dot_type, rb, K, rng);
                        // Two cache blocks of k: [0, k1) then [k1, K) accumulated.
                        const int64_t k1 = (K / 2) / g->k_unit * g->k_unit;
                        std::vector<float> c((size_t) g->mr * g->nr, 12345.0f);
                        for (int blk = 0; blk < 2; blk++) {
                            const int64_t k0 = blk == 0 ? 0 : k1, nk = blk == 0 ? k1 : K - k1;
                            if (nk == 0) {
                                if (blk == 0) std::fill(c.begin(), c.end(), 0.0f);
                                continue;
                            }
                            const int64_t nu = (nk + g->k_unit - 1) / g->k_unit;
                            std::vector<float> ap((size_t) nu * g->mr, -7.0f), bp((size_t) nu * g->nr, -7.0f);
                            g->pack_a(a.row(0), a.ld, ra, g->mr, k0, nk, ap.data());
                            g->pack_b(b.row(0), b.ld, rb, g->nr, k0, nk, bp.data());
                            // The packed layout itself: unit u of row i, zeros past the rows / the row end
                            // (a tile kernel's own layout is checked by its products only).
                            for (int64_t u = 0; u < (g->k_group ? 0 : nu); u++)
                                for (int i = 0; i < g->mr; i++) {
                                    float want[2] = { 0, 0 };
                                    for (int h = 0; h < g->k_unit; h++) {
                                        const int64_t kk = k0 + u * g->k_unit + h;
                                        if (i < ra && kk < k0 + nk) want[h] = a.val[i * K + kk];
                                    }
                                    const float v = unit_value(ap, g->mr, u, i);
                                    if (g->k_unit == 1) {
                                        ASSERT_EQ(v, want[0]) << "pack_a unit " << u << " row " << i;
                                    } else {
                                        uint32_t bits;
                                        memcpy(&bits, &v, 4);
                                        ASSERT_EQ(ggml_bf16_to_fp32({ (uint16_t) (bits & 0xffff) }), want[0]) << "pack_a unit " << u << " row " << i;
                                        ASSERT_EQ(ggml_bf16_to_fp32({ (uint16_t) (bits >> 16) }), want[1]) << "pack_a unit " << u << " row " << i;
                                    }
                                }
                            g->micro(nu, ap.data(), bp.data(), c.data(), g->mr, blk == 1 && k1 > 0);
                        }
                        float want[1];
                        for (int j = 0; j < g->nr; j++)
                            for (int i = 0; i < g->mr; i++) {
                                const float got = c[j * g->mr + i];
                                if (i >= ra || j >= rb) {
                                    EXPECT_EQ(got, 0.0f) << "padding output " << i << "," << j;
                                    continue;
                                }
                                ref->dot_tile(K, 1, 1, a.row(i), a.ld, b.row(j), b.ld, want, 1);
                                EXPECT_NEAR(got, want[0], accum_tol(K, a.sum_abs(b, i, j))) << "output " << i << "," << j;
                            }
                    }
        }
}

// F16 products are exact in every set's GEMM (the AMX tiles' as the sum of four bf16 products):
// values 1 + 2^-10 and 1 + 3 x 2^-10, whose low bf16 parts meet in a 2^-20 term, over 8 of 64
// k, so that every partial sum is exact in F32 whatever the order: each output is exactly
// 8 (1 + 2^-10)(1 + 3 x 2^-10). Dropping a part's product (or rounding a value to bf16) shows.
TEST(VecKernels, F16ProductsAreExact) {
    std::vector<const ggml_cpu_kernels *> sets = simd_sets();
    sets.push_back(&ggml_cpu_kernels_scalar);
    const int64_t K = 64;
    const double x = 1.0 + std::ldexp(1.0, -10), w = 1.0 + 3 * std::ldexp(1.0, -10);
    const float want = (float) (8 * x * w);
    ASSERT_EQ((double) want, 8 * x * w);
    for (const ggml_cpu_kernels * vk : sets) {
        SCOPED_TRACE(vk->isa);
        const ggml_gemm_kernel * g = vk->mm_type(GGML_TYPE_F16)->gemm;
        ASSERT_TRUE(g != nullptr);
        std::vector<ggml_fp16_t> a((size_t) g->mr * K, ggml_fp32_to_fp16(0.0f)), b((size_t) g->nr * K, ggml_fp32_to_fp16(0.0f));
        for (int i = 0; i < g->mr; i++)
            for (int k = 0; k < 8; k++) a[i * K + 7 * k] = ggml_fp32_to_fp16((float) w);
        for (int j = 0; j < g->nr; j++)
            for (int k = 0; k < 8; k++) b[j * K + 7 * k] = ggml_fp32_to_fp16((float) x);
        alignas(64) static uint8_t ap[64 * 64 * 4], bp[64 * 64 * 4];
        ASSERT_LE((size_t) std::max(g->mr, g->nr) * K * 4, sizeof(ap));
        g->pack_a(a.data(), K * sizeof(ggml_fp16_t), g->mr, g->mr, 0, K, ap);
        g->pack_b(b.data(), K * sizeof(ggml_fp16_t), g->nr, g->nr, 0, K, bp);
        std::vector<float> c((size_t) g->mr * g->nr, -1.0f);
        g->micro(K / g->k_unit, ap, bp, c.data(), g->mr, false);
        for (size_t i = 0; i < c.size(); i++) ASSERT_EQ(c[i], want) << "output " << i;
    }
}

TEST(VecKernels, ConversionsMatchScalar) {
    const auto sets = simd_sets();
    if (sets.empty()) GTEST_SKIP() << "scalar-only build";
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> d(-4.0f, 4.0f);
    std::vector<float> x(203);
    for (float & v : x) v = d(rng);
    // Exact ties and specials (NaN is compared as NaN-ness only).
    const float specials[] = { 0.0f, -0.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 65504.0f, 70000.0f, -1e30f, 1e-5f,
                               INFINITY, -INFINITY, NAN, 0x1p-20f };
    for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++) x[i * 13] = specials[i];
    const int64_t n = (int64_t) x.size();
    for (const ggml_cpu_kernels * vk : sets)
        for (ggml_type t : { GGML_TYPE_F16, GGML_TYPE_BF16 }) {
            SCOPED_TRACE(std::string(vk->isa) + " " + ggml_type_name(t));
            std::vector<uint16_t> got(n), want(n);
            vk->mm_type(t)->from_float(x.data(), got.data(), n);
            ggml_cpu_kernels_scalar.mm_type(t)->from_float(x.data(), want.data(), n);
            std::vector<float> back(n), back_ref(n);
            (t == GGML_TYPE_F16 ? vk->fp16_to_fp32 : vk->bf16_to_fp32)(got.data(), back.data(), n);
            (t == GGML_TYPE_F16 ? ggml_cpu_kernels_scalar.fp16_to_fp32 : ggml_cpu_kernels_scalar.bf16_to_fp32)(got.data(), back_ref.data(), n);
            for (int64_t i = 0; i < n; i++) {
                if (std::isnan(x[i])) {
                    EXPECT_TRUE(std::isnan(back[i])) << i;
                    continue;
                }
                EXPECT_EQ(got[i], want[i]) << "element " << i << " value " << x[i];
                EXPECT_EQ(back[i], back_ref[i]) << "element " << i;
            }
        }
}

TEST(VecKernels, AxpyMatchesScalar) {
    const auto sets = simd_sets();
    if (sets.empty()) GTEST_SKIP() << "scalar-only build";
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (const ggml_cpu_kernels * vk : sets)
        for (int64_t n : { 1, 15, 16, 64, 67, 200 })
            for (int nx : { 1, 3, 8 }) {
                std::vector<std::vector<float>> xs(nx, std::vector<float>(n));
                std::vector<const float *> xp;
                std::vector<float> s(nx), y(n), y_ref(n);
                for (auto & row : xs) {
                    for (float & v : row) v = d(rng);
                    xp.push_back(row.data());
                }
                for (float & v : s) v = d(rng);
                for (int64_t i = 0; i < n; i++) y[i] = y_ref[i] = d(rng);
                vk->axpy(n, nx, s.data(), xp.data(), y.data());
                ggml_cpu_kernels_scalar.axpy(n, nx, s.data(), xp.data(), y_ref.data());
                for (int64_t i = 0; i < n; i++) EXPECT_NEAR(y[i], y_ref[i], 1e-6) << vk->isa << " n " << n << " nx " << nx << " i " << i;
            }
}

}  // namespace

// One column per plane of b and several planes of b per plane of a (a generated token's grouped
// heads): the columns sharing a plane of a go through the dot tiles together; each plane must
// equal its own product, bit for bit, with 1-3 threads, also broadcast over dimension 3.
TEST(MulMat, GroupedPlanesOfOneColumnEqualPlaneByPlane) {
    std::mt19937 rng(12);
    for (ggml_type a_type : { GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_BF16 }) {
        for (int64_t r2 : { 2, 5, 8 }) {
            SCOPED_TRACE(std::string(ggml_type_name(a_type)) + " r2 " + std::to_string(r2));
            const int64_t K = 72, M = 37, A2 = 2, A3 = 1, B3 = 2;
            tu::Ctx ctx(64u << 20);
            ggml_tensor * a = ggml_new_tensor_4d(ctx, a_type, K, M, A2, A3);
            ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K, 1, A2 * r2, B3);
            tu::fill_uniform(a, rng);
            tu::fill_uniform(b, rng);
            ggml_tensor * d = ggml_mul_mat(ctx, a, b);
            ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, d);
            std::vector<ggml_tensor *> planes;
            for (int64_t i3 = 0; i3 < B3; i3++) {
                for (int64_t i2 = 0; i2 < A2 * r2; i2++) {
                    ggml_tensor * ap = ggml_view_2d(ctx, a, K, M, a->nb[1], (i2 / r2) * a->nb[2]);
                    ggml_tensor * bp = ggml_view_2d(ctx, b, K, 1, b->nb[1], i2 * b->nb[2] + i3 * b->nb[3]);
                    planes.push_back(ggml_mul_mat(ctx, ap, bp));
                    ggml_build_forward_expand(gf, planes.back());
                }
            }
            for (int nt = 1; nt <= 3; nt++) {
                ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, nt), GGML_STATUS_SUCCESS);
                const std::vector<uint8_t> got = tu::bytes_of(d);
                std::vector<uint8_t> want;
                for (ggml_tensor * p : planes) {
                    const std::vector<uint8_t> w = tu::bytes_of(p);
                    want.insert(want.end(), w.begin(), w.end());
                }
                EXPECT_TRUE(got == want) << nt << " threads";
            }
        }
    }
}

// Attention without the fused op (mul_mat -> soft_max -> mul_mat, as llama's graph builds it) is
// run plane by plane by the executor (compute.cpp): the same bits as node by node, on the dot and
// the GEMM paths, with grouped heads, for 1-3 threads.
TEST(MulMat, AttentionChainEqualsNodeByNode) {
    std::mt19937 rng(11);
    for (ggml_type kv_type : { GGML_TYPE_F16, GGML_TYPE_F32 }) {
        for (int64_t n_tok : { 1, 3, 37, 64 }) {
            SCOPED_TRACE(std::string(ggml_type_name(kv_type)) + " n_tokens " + std::to_string(n_tok));
            const int64_t hd = 64, n_kv = 80, n_head = 8, n_head_kv = 2;
            tu::Ctx ctx(64u << 20);
            ggml_tensor * k = ggml_new_tensor_3d(ctx, kv_type, hd, n_kv, n_head_kv);
            ggml_tensor * v = ggml_new_tensor_3d(ctx, kv_type, n_kv, hd, n_head_kv);
            ggml_tensor * q0 = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, n_head, n_tok);
            ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, n_tok);
            tu::fill_uniform(k, rng);
            tu::fill_uniform(v, rng);
            tu::fill_uniform(q0, rng);
            for (int64_t t = 0; t < n_tok; t++) {
                for (int64_t c = 0; c < n_kv; c++) {
                    ((ggml_fp16_t *) mask->data)[t * n_kv + c] = ggml_fp32_to_fp16(c <= n_kv - n_tok + t ? 0.0f : -INFINITY);
                }
            }
            ggml_tensor * q = ggml_permute(ctx, q0, 0, 2, 1, 3);
            ggml_tensor * kq = ggml_mul_mat(ctx, k, q);
            ggml_tensor * sm = ggml_soft_max_ext(ctx, kq, mask, 0.125f, 0.0f);
            ggml_tensor * kqv = ggml_mul_mat(ctx, v, sm);
            ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, kqv);
            std::vector<uint8_t> want;
            for (int chain : { 0, 1 }) {
                ggml_cpu_attn_chain = chain;
                for (int nt = 1; nt <= 3; nt++) {
                    const long runs = ggml_cpu_attn_chain_runs();
                    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, nt), GGML_STATUS_SUCCESS);
                    // One query with grouped heads: the products alone (their grouped dot path).
                    EXPECT_EQ(ggml_cpu_attn_chain_runs() - runs, n_tok == 1 ? 0 : chain) << nt << " threads";
                    std::vector<uint8_t> got = tu::bytes_of(kq), s = tu::bytes_of(sm), o = tu::bytes_of(kqv);
                    got.insert(got.end(), s.begin(), s.end());
                    got.insert(got.end(), o.begin(), o.end());
                    if (want.empty()) want = got;
                    else EXPECT_TRUE(got == want) << "chain " << chain << ", " << nt << " threads";
                }
            }
            ggml_cpu_attn_chain = 1;
        }
    }
}
