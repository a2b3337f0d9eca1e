// The IQ and ternary types held to llama.cpp (build 4747): tests/data/iq-reference holds, per type,
// random blocks and llama.cpp's decoding of them, values with an importance matrix and
// llama.cpp's quantization of them (with and without the weights) and its decoding
// (tools/iq-reference/gen.c writes them). Our decoders must give the same floats, bit for bit;
// our quantizers the same bytes where llama.cpp's is a plain rounding (TQ1_0, TQ2_0) and elsewhere
// codes no worse (QuantizersMatchOrBeatLlamaCpp); the reference dot products the dequantized rows'
// dot.
#include "test-util.h"

#include "ggml-cpu/quant-dot.h"
#include "quants.h"

#include <fstream>
#include <iterator>
#include <thread>

namespace {

struct iq_reference {
    ggml_type type = GGML_TYPE_COUNT;
    int n_random = 0, rows = 0, cols = 0;
    std::vector<uint8_t> random_blocks, blocks, blocks_plain;
    std::vector<float> random_decoded, x, imatrix, decoded;
};

template <typename T> bool take(const std::vector<uint8_t> & d, size_t & off, size_t n, std::vector<T> & out) {
    if (off + n * sizeof(T) > d.size()) return false;
    out.resize(n);
    memcpy(out.data(), d.data() + off, n * sizeof(T));
    off += n * sizeof(T);
    return true;
}

bool load(const char * name, iq_reference & r) {
    std::ifstream f(std::string(LLAMA_TEST_DATA_DIR) + "/iq-reference/" + name + ".iqref", std::ios::binary);
    const std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (d.size() < 20 || memcmp(d.data(), "IQRF", 4) != 0) return false;
    int32_t h[4];
    memcpy(h, d.data() + 4, sizeof(h));
    r.type = (ggml_type) h[0];
    r.n_random = h[1], r.rows = h[2], r.cols = h[3];
    size_t off = 20;
    const size_t ts = ggml_type_size(r.type), rs = ggml_row_size(r.type, r.cols);
    return take(d, off, r.n_random * ts, r.random_blocks) && take(d, off, (size_t) r.n_random * QK_K, r.random_decoded) &&
           take(d, off, (size_t) r.rows * r.cols, r.x) && take(d, off, (size_t) r.cols, r.imatrix) &&
           take(d, off, r.rows * rs, r.blocks) && take(d, off, (size_t) r.rows * r.cols, r.decoded) &&
           take(d, off, r.rows * rs, r.blocks_plain) && off == d.size();
}

const char * const kTypes[] = { "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_xs", "tq1_0", "tq2_0" };

std::vector<float> decode(ggml_type t, const std::vector<uint8_t> & blocks, size_t n) {
    std::vector<float> y(n);
    ggml_get_type_traits(t)->to_float(blocks.data(), y.data(), (int64_t) n);
    return y;
}

// The number of values that differ in their bits (-0 and 0 differ too).
size_t n_bit_differences(const std::vector<float> & a, const std::vector<float> & b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); i++) n += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

// Squared error of the decoded values y against r.x, each value weighted by its column's importance
// (or 1 when plain).
double weighted_error(const std::vector<float> & y, const iq_reference & r, bool plain = false) {
    double e = 0;
    for (size_t i = 0; i < y.size(); i++) {
        const double d = y[i] - r.x[i];
        e += (plain ? 1.0 : r.imatrix[i % r.cols]) * d * d;
    }
    return e;
}

double plain_error(const std::vector<float> & y, const iq_reference & r) { return weighted_error(y, r, true); }

// What the codes are worth apart from where the super-scale sits: the weighted error once each
// super-block is scaled by its least-squares factor (ours move it on purpose, see
// quant_unshrink_factor; llama.cpp's sit near it).
double least_squares_error(std::vector<float> y, const iq_reference & r, bool plain = false) {
    for (size_t b = 0; b < y.size(); b += QK_K) {
        double sxy = 0, syy = 0;
        for (size_t i = b; i < b + QK_K; i++) {
            const double q = plain ? 1.0 : r.imatrix[i % r.cols];
            sxy += q * r.x[i] * y[i];
            syy += q * (double) y[i] * y[i];
        }
        const double f = syy > 0 ? sxy / syy : 1.0;
        for (size_t i = b; i < b + QK_K; i++) y[i] = (float) (y[i] * f);
    }
    return weighted_error(y, r, plain);
}

// The largest |sum q x (x - y)| / sum q x^2 over the super-blocks: 0 when every block's error is
// orthogonal to its values, up to the F16 rounding of the super-scale (2^-11 relative).
double largest_shrink(const std::vector<float> & y, const iq_reference & r, bool plain = false) {
    double worst = 0;
    for (size_t b = 0; b < y.size(); b += QK_K) {
        double sxe = 0, sxx = 0;
        for (size_t i = b; i < b + QK_K; i++) {
            const double q = plain ? 1.0 : r.imatrix[i % r.cols];
            sxe += q * r.x[i] * (r.x[i] - y[i]);
            sxx += q * (double) r.x[i] * r.x[i];
        }
        if (sxx > 0) worst = std::max(worst, fabs(sxe) / sxx);
    }
    return worst;
}

}  // namespace

TEST(QuantsIQ, DecodeAsLlamaCppBitForBit) {
    for (const char * name : kTypes) {
        iq_reference r;
        ASSERT_TRUE(load(name, r)) << name << ": tests/data/iq-reference/" << name << ".iqref missing or malformed";
        ASSERT_STREQ(ggml_type_name(r.type), name);
        EXPECT_EQ(n_bit_differences(decode(r.type, r.random_blocks, r.random_decoded.size()), r.random_decoded), 0u)
            << name << ": random blocks";
        EXPECT_EQ(n_bit_differences(decode(r.type, r.blocks, r.decoded.size()), r.decoded), 0u) << name << ": llama.cpp's quantization";
    }
}

// With an importance matrix, our codes, each super-block at its least-squares scale, leave no more
// weighted error than llama.cpp's at theirs; without one, no more plain error as stored. Our blocks
// are then moved off that scale so that their error is orthogonal
// to their values (quant_unshrink_factor), which costs at most a few percent of squared error
// (bounded here) and buys KL divergence on trained models (tools/quant-quality).
TEST(QuantsIQ, QuantizersMatchOrBeatLlamaCpp) {
    for (const char * name : kTypes) {
        iq_reference r;
        ASSERT_TRUE(load(name, r)) << name;
        if (!ggml_quantize_supported(r.type)) {
            printf("  %-8s no quantizer here yet\n", name);
            continue;
        }
        const bool ternary = r.type == GGML_TYPE_TQ1_0 || r.type == GGML_TYPE_TQ2_0;
        const size_t rs = ggml_row_size(r.type, r.cols);
        std::vector<uint8_t> q(r.rows * rs), qp(r.rows * rs);
        ggml_quantize_chunk(r.type, r.x.data(), q.data(), 0, r.rows, r.cols, r.imatrix.data());
        const std::vector<float> ours = decode(r.type, q, r.x.size());
        const double l_ours = least_squares_error(ours, r), l_theirs = least_squares_error(r.decoded, r);
        const double e_ours = weighted_error(ours, r), e_theirs = weighted_error(r.decoded, r);
        printf("  %-8s with the imatrix: least-squares error ours %.4g, llama.cpp %.4g; as stored %.4g, %.4g", name, l_ours,
               l_theirs, e_ours, e_theirs);
        EXPECT_LE(l_ours, l_theirs * 1.0001) << name;
        EXPECT_LE(e_ours, e_theirs * 1.08) << name;
        if (!ternary) {
            EXPECT_LT(largest_shrink(ours, r), 1e-3) << name;
        }
        if (!ggml_quantize_requires_imatrix(r.type)) {
            ggml_quantize_chunk(r.type, r.x.data(), qp.data(), 0, r.rows, r.cols, nullptr);
            const std::vector<float> plain = decode(r.type, qp, r.x.size()), theirs = decode(r.type, r.blocks_plain, r.x.size());
            // Without one, the searches weigh values by their size (not 1): compared as stored.
            const double p_ours = plain_error(plain, r), p_theirs = plain_error(theirs, r);
            printf("; without, as stored: %.4g, %.4g", p_ours, p_theirs);
            EXPECT_LE(p_ours, p_theirs * 1.0001) << name;
            if (!ternary) {
                EXPECT_LT(largest_shrink(plain, r, true), 1e-3) << name;
            }
            if (ternary) {
                // llama.cpp's ternary quantizer is a plain rounding: the same bytes, with or without weights.
                EXPECT_EQ(memcmp(qp.data(), r.blocks_plain.data(), qp.size()), 0) << name;
                EXPECT_EQ(memcmp(q.data(), r.blocks.data(), q.size()), 0) << name;
            }
        }
        printf("\n");
    }
}

// The searching quantizers give the same bytes whatever the split of the rows into chunks and
// threads (ggml_convert_rows hands out row ranges): each row one chunk on its own thread against
// all rows in one call.
TEST(QuantsIQ, QuantizersGiveTheSameBytesWhateverTheThreads) {
    for (const char * name : kTypes) {
        iq_reference r;
        ASSERT_TRUE(load(name, r)) << name;
        if (!ggml_quantize_supported(r.type)) continue;
        const size_t rs = ggml_row_size(r.type, r.cols);
        std::vector<uint8_t> one(r.rows * rs), split(r.rows * rs);
        ggml_quantize_chunk(r.type, r.x.data(), one.data(), 0, r.rows, r.cols, r.imatrix.data());
        std::vector<std::thread> threads;
        for (int row = 0; row < r.rows; row++) {
            threads.emplace_back([&, row]() {
                ggml_quantize_chunk(r.type, r.x.data(), split.data(), (int64_t) row * r.cols, 1, r.cols, r.imatrix.data());
            });
        }
        for (auto & t : threads) t.join();
        EXPECT_EQ(memcmp(one.data(), split.data(), one.size()), 0) << name;
    }
}

// The scalar reference dot of llama.cpp's blocks with a Q8_K row against the dequantized rows'
// dot in double (the Q8_K row dequantized too: only the sums' rounding differs).
TEST(QuantsIQ, ReferenceDotMatchesTheDecodedRows) {
    for (const char * name : kTypes) {
        iq_reference r;
        ASSERT_TRUE(load(name, r)) << name;
        ASSERT_EQ(ggml_quant_vec_dot_type(r.type), GGML_TYPE_Q8_K) << name;
        const ggml_quant_dot_fn dot = ggml_quant_dot_ref(r.type);
        ASSERT_NE(dot, nullptr) << name;
        std::mt19937 rng(7);
        std::normal_distribution<float> nd;
        std::vector<float> act(r.cols);
        for (float & v : act) v = nd(rng);
        std::vector<uint8_t> qa(ggml_row_size(GGML_TYPE_Q8_K, r.cols));
        ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref(act.data(), qa.data(), r.cols);
        std::vector<float> da(r.cols);
        ggml_get_type_traits(GGML_TYPE_Q8_K)->to_float(qa.data(), da.data(), r.cols);
        const size_t rs = ggml_row_size(r.type, r.cols);
        for (int row = 0; row < r.rows; row++) {
            double ref = 0, norm = 0;
            for (int i = 0; i < r.cols; i++) {
                ref += (double) r.decoded[row * r.cols + i] * da[i];
                norm += std::fabs((double) r.decoded[row * r.cols + i] * da[i]);
            }
            const float got = dot(r.cols, r.blocks.data() + row * rs, qa.data());
            EXPECT_NEAR(got, ref, 1e-5 * norm + 1e-7) << name << " row " << row;
        }
        // The random blocks too (every bit of every field in play).
        const size_t nr = (size_t) r.n_random * QK_K;
        std::vector<float> act2(nr);
        for (float & v : act2) v = nd(rng);
        std::vector<uint8_t> qa2(ggml_row_size(GGML_TYPE_Q8_K, nr));
        ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref(act2.data(), qa2.data(), nr);
        std::vector<float> da2(nr);
        ggml_get_type_traits(GGML_TYPE_Q8_K)->to_float(qa2.data(), da2.data(), nr);
        double ref = 0, norm = 0;
        for (size_t i = 0; i < nr; i++) {
            ref += (double) r.random_decoded[i] * da2[i];
            norm += std::fabs((double) r.random_decoded[i] * da2[i]);
        }
        EXPECT_NEAR(dot((int64_t) nr, r.random_blocks.data(), qa2.data()), ref, 1e-5 * norm + 1e-7) << name << " random blocks";
    }
}
