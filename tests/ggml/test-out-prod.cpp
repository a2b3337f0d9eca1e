// test-out-prod.cpp - out_prod(a, b) with a of every kind the backward pass of mul_mat meets:
// F32, F16, BF16 and quantized weights, in the file layout or repacked for the CPU. Each result is
// checked against a double-precision sum over a's values as to_float gives them, on odd shapes
// (K a multiple of the block size, M and N odd), with b a transposed view of a contiguous
// gradient (the backward rule's shape) or contiguous or padded, broadcast over planes, on both
// paths (axpy for small N, packed GEMM), with 1, 2 and 3 threads giving bit-identical results.
// A repacked a gives bit-identical results to the same matrix unrepacked.
#include "test-util.h"

#include "ggml-cpu/quant-dot.h"
#include "ggml-cpu/quant-repack.h"
#include "ggml-cpu/kernels.h"

#include <array>
#include <cfloat>
#include <string>

namespace {

using Dims4 = std::array<int64_t, 4>;

const ggml_type kTypes[] = { GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                             GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };

// Builds with no SIMD repack kernel use the reference one, so the repacked path is tested anyway.
struct ForceRepack {
    int saved = ggml_repack_force;
    ForceRepack() { ggml_repack_force = 1; }
    ~ForceRepack() { ggml_repack_force = saved; }
};

// Sets the N from which out_prod takes the GEMM path for one scope.
struct GemmMinN {
    int saved;
    explicit GemmMinN(int n) : saved(ggml_out_prod_gemm_min_n) { ggml_out_prod_gemm_min_n = n; }
    ~GemmMinN() { ggml_out_prod_gemm_min_n = saved; }
};

enum class BLayout { TransposedGrad, Contiguous, Padded };

const char * layout_name(BLayout l) {
    switch (l) {
        case BLayout::TransposedGrad: return "transpose(grad)";
        case BLayout::Contiguous:     return "contiguous";
        case BLayout::Padded:         return "padded";
    }
    return "?";
}

struct Case {
    ggml_type type;
    int64_t K, M, N;                 // a [K, M], b [N, M], dst [K, N]
    Dims4 a23 = { 1, 1, 1, 1 };      // a's dims 2, 3 in [2], [3]
    Dims4 b23 = { 1, 1, 1, 1 };
    BLayout lb = BLayout::TransposedGrad;
    bool repack = false;             // also compute with a repacked copy of a
    bool bf16 = false;               // GGML_PREC_BF16
};

// Whether out_prod with GGML_PREC_BF16 takes the bf16-pairs GEMM in this build (else F32).
bool bf16_products(int64_t N) {
    const int min_n = ggml_out_prod_gemm_min_n > 0 ? ggml_out_prod_gemm_min_n : 16;
    return ggml_cpu()->gemm_bf16_pairs != nullptr && N >= min_n;
}

double bf16_round(double v) { return ggml_bf16_to_fp32(ggml_fp32_to_bf16((float) v)); }

std::string describe(const Case & c) {
    return std::string(ggml_type_name(c.type)) + " K=" + std::to_string(c.K) + " M=" + std::to_string(c.M) +
           " N=" + std::to_string(c.N) + " a23=" + std::to_string(c.a23[2]) + "x" + std::to_string(c.a23[3]) +
           " b23=" + std::to_string(c.b23[2]) + "x" + std::to_string(c.b23[3]) + " b " + layout_name(c.lb) +
           " gemm_min_n=" + std::to_string(ggml_out_prod_gemm_min_n) + (c.bf16 ? " prec bf16" : "");
}

// Random weights: normal values converted or quantized row by row.
void fill_weights(ggml_tensor * t, std::mt19937 & rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> row((size_t) t->ne[0]);
    for (int64_t r = 0; r < ggml_nrows(t); r++) {
        for (float & v : row) v = d(rng);
        ggml_quantize_chunk(t->type, row.data(), (char *) t->data + r * t->nb[1], 0, 1, t->ne[0], nullptr);
    }
}

// a's values (contiguous tensor in the file layout), [plane][m][k], through to_float.
std::vector<double> dequantized(const ggml_tensor * a) {
    const ggml_type_traits * tr = ggml_get_type_traits(a->type);
    std::vector<float> row((size_t) a->ne[0]);
    std::vector<double> v;
    for (int64_t r = 0; r < ggml_nrows(a); r++) {
        tr->to_float((const char *) a->data + r * a->nb[1], row.data(), a->ne[0]);
        v.insert(v.end(), row.begin(), row.end());
    }
    return v;
}

ggml_tensor * new_b(ggml_context * ctx, const Case & c) {
    const int64_t ne[4] = { c.N, c.M, c.b23[2], c.b23[3] };
    switch (c.lb) {
        case BLayout::TransposedGrad: return tu::new_transposed_view(ctx, GGML_TYPE_F32, ne);
        case BLayout::Contiguous:     return ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
        case BLayout::Padded:         return tu::new_padded_view(ctx, GGML_TYPE_F32, ne);
    }
    return nullptr;
}

// Float accumulation of M products can be off by about M * eps * sum |a_m b_m| (worst case).
double accum_tol(int64_t M, double sum_abs) { return (M + 4) * (double) FLT_EPSILON * sum_abs + 1e-30; }

// Expects every |got - ref| <= tol (elementwise); reports the first few failures.
void expect_within(const std::vector<double> & got, const std::vector<double> & ref, const std::vector<double> & tol) {
    ASSERT_EQ(got.size(), ref.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (!(std::fabs(got[i] - ref[i]) <= tol[i]) && bad++ < 5) {
            ADD_FAILURE() << "element " << i << ": got " << got[i] << ", expected " << ref[i] << " (tol " << tol[i] << ")";
        }
    }
    EXPECT_EQ(bad, 0) << bad << " of " << got.size() << " elements out of tolerance";
}

void check(const Case & c) {
    SCOPED_TRACE(describe(c));
    ForceRepack force;
    tu::Ctx ctx(96u << 20);
    ggml_tensor * a = ggml_new_tensor_4d(ctx, c.type, c.K, c.M, c.a23[2], c.a23[3]);
    ggml_tensor * b = new_b(ctx, c);
    std::mt19937 rng((uint32_t) (c.K * 131 + c.M * 17 + c.N * 7 + c.type));
    fill_weights(a, rng);
    tu::fill_uniform(b, rng);
    ggml_tensor * out = ggml_out_prod(ctx, a, b);
    if (c.bf16) ggml_out_prod_set_prec(out, GGML_PREC_BF16);
    ASSERT_EQ(out->ne[0], c.K);
    ASSERT_EQ(out->ne[1], c.N);
    const std::vector<double> got = tu::compute_all_threads(ctx, out);
    const std::vector<uint8_t> got_bytes = tu::bytes_of(out);

    std::vector<double> av = dequantized(a);
    std::vector<double> bv = tu::to_double(b);  // [plane][m][n]
    if (c.bf16 && bf16_products(c.N)) {  // the products of the values rounded to bf16
        for (double & v : av) v = bf16_round(v);
        for (double & v : bv) v = bf16_round(v);
    }
    const int64_t B2 = c.b23[2], r2 = c.b23[2] / c.a23[2], r3 = c.b23[3] / c.a23[3];
    std::vector<double> ref, tol;
    for (int64_t i3 = 0; i3 < c.b23[3]; i3++)
        for (int64_t i2 = 0; i2 < B2; i2++)
            for (int64_t n = 0; n < c.N; n++)
                for (int64_t k = 0; k < c.K; k++) {
                    const int64_t pa = (i3 / r3) * c.a23[2] + i2 / r2, pb = i3 * B2 + i2;
                    double s = 0, sa = 0;
                    for (int64_t m = 0; m < c.M; m++) {
                        const double p = av[(pa * c.M + m) * c.K + k] * bv[(pb * c.M + m) * c.N + n];
                        s += p;
                        sa += std::fabs(p);
                    }
                    ref.push_back(s);
                    tol.push_back(accum_tol(c.M, sa));
                }
    expect_within(got, ref, tol);

    if (c.repack) {
        ASSERT_TRUE(ggml_cpu_can_repack(a)) << "no repacked layout for this case";
        ASSERT_TRUE(ggml_cpu_repack(a));
        tu::compute_all_threads(ctx, out);
        EXPECT_TRUE(tu::bytes_of(out) == got_bytes) << "repacked a gives other results than the file layout";
    }
}

bool repackable(ggml_type t) {
    ForceRepack force;
    return ggml_repack_get_traits(t) != nullptr;
}

// K: a few blocks of the type (more than one cache block of k for the larger one).
std::vector<int64_t> ks(ggml_type t) {
    const int64_t blck = ggml_blck_size(t);
    if (blck == 1) return { 1, 7, 300 };
    if (blck == 32) return { 32, 96, 352 };
    return { 256, 768 };
}

}  // namespace

TEST(OutProdTypes, OddShapesBothPaths) {
    for (ggml_type t : kTypes)
        for (int64_t K : ks(t))
            for (int64_t M : { 1, 37 })
                for (int64_t N : { 1, 5, 17, 67 })
                    for (int min_n : { 1, 1 << 20 }) {
                        GemmMinN g(min_n);
                        check({ t, K, M, N });
                    }
}

TEST(OutProdTypes, DefaultThresholdAndBLayouts) {
    for (ggml_type t : kTypes)
        for (BLayout lb : { BLayout::TransposedGrad, BLayout::Contiguous, BLayout::Padded })
            for (int64_t N : { 3, 16, 45 }) {
                Case c = { t, ks(t)[1], 53, N };
                c.lb = lb;
                check(c);
            }
}

TEST(OutProdTypes, BroadcastOverPlanes) {
    for (ggml_type t : kTypes)
        for (int min_n : { 1, 1 << 20 }) {
            GemmMinN g(min_n);
            Case c = { t, ks(t)[0], 19, 13 };
            c.a23 = { 0, 0, 2, 3 };
            c.b23 = { 0, 0, 4, 3 };
            check(c);
            c.lb = BLayout::Contiguous;
            check(c);
        }
}

// M past the GEMM's cache block of the reduction (accumulating over blocks), K past the block of k.
TEST(OutProdTypes, LargerThanCacheBlocks) {
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K }) {
        GemmMinN g(1);
        check({ t, t == GGML_TYPE_Q4_K ? 768 : 544, 1100, 29 });
    }
}

TEST(OutProdTypes, RepackedEqualsFileLayout) {
    int tested = 0;
    for (ggml_type t : kTypes) {
        if (!repackable(t)) continue;
        tested++;
        for (int min_n : { 1, 1 << 20 }) {
            GemmMinN g(min_n);
            for (int64_t N : { 1, 7, 30 }) {
                Case c = { t, ks(t)[1], 48, N };
                c.repack = true;
                check(c);
            }
            Case c = { t, ks(t)[0], 32, 21 };  // planes: groups never straddle them
            c.a23 = { 0, 0, 2, 1 };
            c.b23 = { 0, 0, 4, 2 };
            c.repack = true;
            check(c);
            c = { t, ks(t).back(), 544, 25 };  // more than one cache block of k and of the reduction
            c.repack = true;
            check(c);
        }
    }
    EXPECT_GE(tested, 4);  // Q8_0, Q4_0, Q4_K, Q6_K
}

// Opt-in BF16 products: the sums of the bf16-rounded values where the build has the kernel (the
// F32 results elsewhere, and on the axpy path), F32 accumulation either way.
TEST(OutProdTypes, Bf16Products) {
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K })
        for (int min_n : { 1, 1 << 20 }) {
            GemmMinN g(min_n);
            for (int64_t M : { 1, 37, 1100 }) {  // odd: a last pair with a zero half; past a cache block
                Case c = { t, ks(t)[1], M, 29 };
                c.bf16 = true;
                check(c);
            }
            Case c = { t, ks(t)[0], 19, 13 };
            c.a23 = { 0, 0, 2, 3 };
            c.b23 = { 0, 0, 4, 3 };
            c.lb = BLayout::Contiguous;
            c.bf16 = true;
            check(c);
            if (!repackable(t)) continue;
            c = { t, ks(t)[1], 48, 30 };
            c.repack = true;
            c.bf16 = true;
            check(c);
        }
}

// The same at the default threshold, where a build with AMX-BF16 tiles takes them (out_prod_tiles):
// every type; N past a pair of tiles and not a multiple of 16; M odd, short of a tile, and over
// several chunks of m; K short of a tile and not a multiple of 16 (F32); broadcast planes, every
// layout of b; a repacked a giving the same bytes; the same bytes for 1, 2 and 3 threads.
TEST(OutProdTypes, Bf16ProductsAtTheDefaultThreshold) {
    GemmMinN g(0);
    for (ggml_type t : kTypes) {
        for (int64_t M : { 16, 37, 1100 }) {
            for (int64_t N : { 16, 45 }) {
                Case c = { t, ks(t)[1], M, N };
                c.bf16 = true;
                check(c);
            }
        }
        for (BLayout lb : { BLayout::Contiguous, BLayout::Padded }) {
            Case c = { t, ks(t).back(), 53, 33 };
            c.lb = lb;
            c.a23 = { 0, 0, 2, 1 };
            c.b23 = { 0, 0, 4, 2 };
            c.bf16 = true;
            check(c);
        }
        if (!repackable(t)) continue;
        for (int64_t M : { 48, 560 }) {  // 48: half of the last 32 rows of m are padding
            Case c = { t, ks(t).back(), M, 70 };
            c.repack = true;
            c.bf16 = true;
            check(c);
        }
    }
    if (ggml_cpu()->tiles_bf16) printf("  bf16 products through the tile kernel (%s)\n", ggml_cpu_isa_name());
}

// Opt-in int8 products (GGML_PREC_INT8): a's values and b's quantized to Q8_0 along m and
// multiplied by the forward's Q8_0 x16 kernel. Checked by the relative (Frobenius) error against
// the double sum of a's values, bit-identical over 1, 2 and 3 threads and for a repacked a.
TEST(OutProdTypes, Int8Products) {
    const ggml_repack_traits * q8 = ggml_repack_get_traits(GGML_TYPE_Q8_0);
    if (!q8 || !q8->gemm) GTEST_SKIP() << "this build has no Q8_0 x16 kernel: GGML_PREC_INT8 computes in F32";
    double worst = 0;
    for (ggml_type t : { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K })
        for (int64_t M : { 256, 544, 1024 })
            for (int64_t N : { 1, 7, 8, 17, 40 }) {
                const int64_t K = 512;
                SCOPED_TRACE(std::string(ggml_type_name(t)) + " K=512 M=" + std::to_string(M) + " N=" + std::to_string(N));
                tu::Ctx ctx(64u << 20);
                ggml_tensor * a = ggml_new_tensor_2d(ctx, t, K, M);
                const int64_t ne[4] = { N, M, 1, 1 };
                ggml_tensor * b = tu::new_transposed_view(ctx, GGML_TYPE_F32, ne);
                std::mt19937 rng((uint32_t) (M * 17 + N * 7 + t));
                fill_weights(a, rng);
                tu::fill_uniform(b, rng);
                ggml_tensor * out = ggml_out_prod(ctx, a, b);
                ggml_out_prod_set_prec(out, GGML_PREC_INT8);
                const std::vector<double> got = tu::compute_all_threads(ctx, out);
                const std::vector<uint8_t> got_bytes = tu::bytes_of(out);
                const std::vector<double> av = dequantized(a), bv = tu::to_double(b);  // [m][k], [m][n]
                double e2 = 0, r2 = 0;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t k = 0; k < K; k++) {
                        double s = 0;
                        for (int64_t m = 0; m < M; m++) s += av[m * K + k] * bv[m * N + n];
                        const double g = got[n * K + k];
                        e2 += (g - s) * (g - s);
                        r2 += s * s;
                    }
                const double rel = std::sqrt(e2 / r2);
                worst = std::max(worst, rel);
                EXPECT_LT(rel, 1e-2);
                {  // the default precision differs (the int8 path was taken)
                    ggml_tensor * f = ggml_out_prod(ctx, a, b);
                    tu::compute_all_threads(ctx, f);
                    EXPECT_FALSE(tu::bytes_of(f) == got_bytes);
                }
                ForceRepack force;
                if (!ggml_cpu_can_repack(a)) continue;
                ASSERT_TRUE(ggml_cpu_repack(a));
                tu::compute_all_threads(ctx, out);
                EXPECT_TRUE(tu::bytes_of(out) == got_bytes) << "repacked a gives other results than the file layout";
            }
    printf("int8 products: worst relative error %.2e\n", worst);
}

// The int8 path quantizes a's slabs straight into Q8_0 x16 blocks: the same bytes as quantizing
// each of the 16 rows as the forward's activations and packing them with pack_group.
TEST(OutProdTypes, Int8SlabPackingMatchesReference) {
    ForceRepack force;
    const ggml_repack_traits * q8 = ggml_repack_get_traits(GGML_TYPE_Q8_0);
    ASSERT_TRUE(q8 != nullptr);
    std::mt19937 rng(21);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t ldx = 40;
    for (int trial = 0; trial < 200; trial++) {
        SCOPED_TRACE("trial " + std::to_string(trial));
        std::vector<float> x(QK8_0 * ldx);
        const float scale = std::ldexp(1.0f, (int) (rng() % 40) - 20);
        for (float & v : x) v = u(rng) * scale;
        // Edge cases: zero rows, rows of one value, exact halves, ties and a row's max repeated.
        for (int m = 0; m < QK8_0; m++) {
            x[m * ldx + 3] = 0.0f;
            x[m * ldx + 5] = (trial % 2 ? -2.5f : 0.75f) * scale;
            x[m * ldx + 7] = (float) ((m % 5) - 2) * 0.5f;
        }
        x[9 * ldx + 11] = -x[4 * ldx + 11] * 0 + 127.0f;
        x[10 * ldx + 11] = -127.0f;
        block_q8_0 rows[GGML_REPACK_ROWS];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            float t[QK8_0];
            for (int m = 0; m < QK8_0; m++) t[m] = x[m * ldx + r];
            rows[r].d = ggml_quantize_act_block_q8_0(t, rows[r].qs);
        }
        block_q8_0x16 want, ref, got;
        q8->pack_group(rows, 1, &want);
        ggml_repack_quantize_q8_0x16_ref(x.data(), ldx, &ref);
        ggml_repack_quantize_q8_0x16(x.data(), ldx, &got);
        ASSERT_EQ(memcmp(&want, &ref, sizeof(want)), 0) << "the scalar packing differs from quantize + pack_group";
        ASSERT_EQ(memcmp(&want, &got, sizeof(want)), 0) << "this build's packing differs from quantize + pack_group";
    }
}

// Every compiled-in instruction set's table (kernels.h), the build's first, the scalar one last.
static std::vector<const ggml_cpu_kernels *> kernel_sets() {
    const ggml_cpu_kernels * sets[4];
    const int n = ggml_cpu_kernel_sets(sets);
    return std::vector<const ggml_cpu_kernels *>(sets, sets + n);
}

// A repacked Q4_0 a's blocks go to the slabs without F32 rows: every set's conversion gives the
// bytes of dequantizing the 32 rows and quantizing the slab from F32 (scales of every size, and
// blocks of one value, of zeros and of the extreme nibbles).
TEST(OutProdKernels, Q4_0x16ToSlabMatchesDequantized) {
    ForceRepack force;
    std::mt19937 rng(23);
    for (int trial = 0; trial < 100; trial++) {
        SCOPED_TRACE("trial " + std::to_string(trial));
        block_q4_0 rows[2][GGML_REPACK_ROWS];
        for (int g = 0; g < 2; g++)
            for (int r = 0; r < GGML_REPACK_ROWS; r++) {
                block_q4_0 & b = rows[g][r];
                const float d = std::ldexp((float) (rng() % 1000 + 1) / 1000.0f, (int) (rng() % 30) - 20);
                b.d = GGML_FP32_TO_FP16(r == 3 ? 0.0f : (trial % 7 == 0 ? -d : d));
                for (int j = 0; j < QK4_0 / 2; j++) {
                    const uint8_t v = (uint8_t) rng();
                    b.qs[j] = r == 5 ? 0x88 : r == 6 ? (trial % 2 ? 0x00 : 0xFF) : v;
                }
            }
        block_q4_0x16 grp[2];
        const ggml_repack_traits * q4 = ggml_repack_get_traits(GGML_TYPE_Q4_0);
        ASSERT_TRUE(q4 != nullptr);
        for (int g = 0; g < 2; g++) q4->pack_group(rows[g], 1, &grp[g]);
        for (int half = 0; half < 2; half++) {
            float x[QK8_0 * GGML_REPACK_ROWS];  // x[m * 16 + r]: value 16 half + r of row m
            for (int m = 0; m < QK8_0; m++) {
                float y[QK4_0];
                dequantize_row_q4_0(&rows[m / GGML_REPACK_ROWS][m % GGML_REPACK_ROWS], y, QK4_0);
                for (int r = 0; r < GGML_REPACK_ROWS; r++) x[m * GGML_REPACK_ROWS + r] = y[16 * half + r];
            }
            block_q8_0x16 want, got;
            ggml_repack_quantize_q8_0x16_ref(x, GGML_REPACK_ROWS, &want);
            for (const ggml_cpu_kernels * vk : kernel_sets()) {
                memset(&got, 0xAB, sizeof(got));
                vk->repack.q4_0x16_to_q8_0x16t(&grp[0], &grp[1], half, &got);
                EXPECT_EQ(memcmp(&want, &got, sizeof(want)), 0) << vk->isa << " half " << half;
            }
        }
    }
}

// ---- the bf16-pair kernels against the scalar reference --------------------------------------
TEST(OutProdKernels, Bf16PairsMatchScalar) {
    const std::vector<const ggml_cpu_kernels *> sets = kernel_sets();  // the reference GEMM too, against a double sum
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    int tested = 0;
    for (const ggml_cpu_kernels * vk : sets) {
        if (!vk->gemm_bf16_pairs) continue;
        tested++;
        SCOPED_TRACE(vk->isa);
        const ggml_gemm_kernel * g = vk->gemm_bf16_pairs;
        ASSERT_EQ(g->k_unit, 2);
        // Conversion: bit for bit, ties and specials included (NaN as NaN-ness).
        for (int64_t n : { 1, 15, 16, 33 }) {
            std::vector<float> x0(n), x1(n);
            for (int64_t i = 0; i < n; i++) {
                x0[i] = d(rng);
                x1[i] = d(rng);
            }
            x0[0] = 1.0f + 0x1p-8f;  // a tie, rounded to even
            if (n > 1) x1[1] = -0.0f;
            if (n > 2) x0[2] = INFINITY;
            if (n > 3) x1[3] = NAN;
            for (bool second : { true, false }) {
                std::vector<uint32_t> got(n), want(n);
                vk->bf16_pairs(x0.data(), second ? x1.data() : nullptr, n, got.data());
                ggml_cpu_kernels_scalar.bf16_pairs(x0.data(), second ? x1.data() : nullptr, n, want.data());
                for (int64_t i = 0; i < n; i++) {
                    if (i == 3 && second) {
                        EXPECT_EQ(got[i] & 0xffff, want[i] & 0xffff) << i;
                        EXPECT_TRUE(std::isnan(ggml_bf16_to_fp32({ (uint16_t) (got[i] >> 16) }))) << i;
                        continue;
                    }
                    EXPECT_EQ(got[i], want[i]) << "n " << n << " element " << i;
                }
            }
        }
        // Micro-kernel: two cache blocks of units, accumulated; against a double sum of the
        // same bf16 products.
        for (int64_t nu : { 1, 2, 7, 100 }) {
            std::vector<uint32_t> ap((size_t) nu * g->mr), bp((size_t) nu * g->nr);
            std::vector<float> x0(std::max(g->mr, g->nr)), x1(x0.size());
            for (int64_t u = 0; u < nu; u++) {
                for (size_t i = 0; i < x0.size(); i++) {
                    x0[i] = d(rng);
                    x1[i] = d(rng);
                }
                ggml_cpu_kernels_scalar.bf16_pairs(x0.data(), x1.data(), g->mr, &ap[u * g->mr]);
                for (size_t i = 0; i < x0.size(); i++) {
                    x0[i] = d(rng);
                    x1[i] = d(rng);
                }
                ggml_cpu_kernels_scalar.bf16_pairs(x0.data(), x1.data(), g->nr, &bp[u * g->nr]);
            }
            const int64_t n1 = nu / 2;
            std::vector<float> c((size_t) g->mr * g->nr, 5.0f), ref_c = c;
            if (n1 > 0) g->micro(n1, ap.data(), bp.data(), c.data(), g->mr, false);
            g->micro(nu - n1, &ap[n1 * g->mr], &bp[n1 * g->nr], c.data(), g->mr, n1 > 0);
            auto half = [](uint32_t u, int h) { return ggml_bf16_to_fp32({ (uint16_t) (h ? u >> 16 : u & 0xffff) }); };
            for (int j = 0; j < g->nr; j++)
                for (int i = 0; i < g->mr; i++) {
                    // The scalar reference's sum (vec-scalar.cpp): per unit the high halves'
                    // product, then the low ones', in float; vdpbf16ps gives the same bits (no
                    // denormals here, which it flushes).
                    float f = 0.0f;
                    double s = 0, sa = 0;
                    for (int64_t u = 0; u < nu; u++)
                        for (int h : { 1, 0 }) {
                            const float p = half(ap[u * g->mr + i], h) * half(bp[u * g->nr + j], h);
                            f += p;
                            s += p;
                            sa += std::fabs(p);
                        }
                    EXPECT_NEAR(c[j * g->mr + i], s, accum_tol(2 * nu, sa)) << "nu " << nu << " output " << i << "," << j;
                    EXPECT_EQ(c[j * g->mr + i], f) << "nu " << nu << " output " << i << "," << j;
                }
        }
    }
    EXPECT_GE(tested, 1);
}

// ---- row dequantization against the types' reference to_float --------------------------------
TEST(OutProdKernels, DequantMatchesReference) {
    const std::vector<const ggml_cpu_kernels *> sets = kernel_sets();
    std::mt19937 rng(17);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (const ggml_cpu_kernels * vk : sets)
        for (int ti = 0; ti < GGML_TYPE_COUNT; ti++) {
            const ggml_type t = (ggml_type) ti;
            if (!ggml_type_is_valid(ti) || !ggml_is_quantized(t) || !ggml_get_type_traits(t)->to_float) continue;
            if (!ggml_quantize_supported(t) || ggml_quantize_requires_imatrix(t)) continue;
            SCOPED_TRACE(std::string(vk->isa) + " " + ggml_type_name(t));
            const ggml_to_float_t f = vk->dequant(t);
            ASSERT_TRUE(f != nullptr);
            const int64_t n = 2 * 256;
            std::vector<float> src(n), got(n), want(n);
            for (float & v : src) v = d(rng);
            std::vector<uint8_t> q(ggml_row_size(t, n));
            ggml_quantize_chunk(t, src.data(), q.data(), 0, 1, n, nullptr);
            f(q.data(), got.data(), n);
            ggml_get_type_traits(t)->to_float(q.data(), want.data(), n);
            float amax = 0;
            for (float v : want) amax = std::max(amax, std::fabs(v));
            // Bit for bit, but for Q4_K's d * q - m, fused in the kernel and fused in the reference
            // only where its compiler contracts it (GCC and Clang do under -mfma): one rounding.
            const float tol = t == GGML_TYPE_Q4_K ? 2 * FLT_EPSILON * amax : 0.0f;
            for (int64_t i = 0; i < n; i++) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
        }
}
