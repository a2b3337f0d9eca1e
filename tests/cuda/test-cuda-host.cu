// test-cuda-host.cu - the CUDA backend's GGUF block readers and writers (ggml-cuda/quant.cuh),
// run on the host: they are __host__ __device__, so the value-by-value reader (get_rows, casts,
// dequantizing for cuBLAS), the 32-value unit decoders (the matrix-vector kernels) and the block
// encoder of quantized KV caches are checked against the reference routines of quants-ref.cpp
// without a GPU. Built in CUDA builds only (nvcc), run by ctest there.
#include <gtest/gtest.h>

#include "ggml-cuda/quant.cuh"
#include "ggml-cuda/rope.cuh"
#include "ggml-cpu/quant-dot.h"
#include "random-blocks.h"

#include <stdio.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

const ggml_type kTypes[] = {
    GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL,
    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
};

std::vector<float> random_row(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v((size_t) n);
    for (float & x : v) x = d(rng);
    return v;
}

// A row of n values of `type` (quantized by the library) and its reference dequantization.
void quantized_row(ggml_type type, int64_t n, uint32_t seed, std::vector<uint8_t> & bytes, std::vector<float> & ref) {
    const std::vector<float> x = random_row(n, seed);
    bytes.assign(ggml_row_size(type, n), 0);
    ggml_quantize_chunk(type, x.data(), bytes.data(), 0, 1, n, nullptr);
    ref.assign((size_t) n, 0.0f);
    ggml_get_type_traits(type)->to_float(bytes.data(), ref.data(), n);
}

// Equal up to the rounding of one fused multiply-add (scale * level - min).
void expect_same_value(float got, float ref, const std::string & what) {
    EXPECT_NEAR(got, ref, 1e-6f * std::fabs(ref) + 1e-7f) << what;
}

TEST(CudaHost, ValueReaderMatchesReference) {
    const int64_t n = 1024;
    for (ggml_type t : kTypes) {
        std::vector<uint8_t> bytes;
        std::vector<float> ref;
        quantized_row(t, n, 1 + (uint32_t) t, bytes, ref);
        for (int64_t j = 0; j < n; j++) {
            expect_same_value(dequant1((const char *) bytes.data(), j, t), ref[(size_t) j],
                              std::string(ggml_type_name(t)) + " value " + std::to_string(j));
        }
    }
}

template <int T>
void check_units(const std::vector<uint8_t> & bytes, const std::vector<float> & ref, int64_t n) {
    for (int64_t u = 0; u < n / 32; u++) {
        float v[32];
        dequant_unit<T>((const char *) bytes.data(), u, v);
        for (int l = 0; l < 32; l++) {
            expect_same_value(v[l], ref[(size_t) (32 * u + l)],
                              std::string(ggml_type_name((ggml_type) T)) + " unit " + std::to_string(u) + " value " + std::to_string(l));
        }
    }
}

TEST(CudaHost, UnitDecodersMatchReference) {
    const int64_t n = 1024;
    for (ggml_type t : kTypes) {
        std::vector<uint8_t> bytes;
        std::vector<float> ref;
        quantized_row(t, n, 100 + (uint32_t) t, bytes, ref);
        switch (t) {
            case GGML_TYPE_Q4_0: check_units<GGML_TYPE_Q4_0>(bytes, ref, n); break;
            case GGML_TYPE_Q4_1: check_units<GGML_TYPE_Q4_1>(bytes, ref, n); break;
            case GGML_TYPE_Q5_0: check_units<GGML_TYPE_Q5_0>(bytes, ref, n); break;
            case GGML_TYPE_Q5_1: check_units<GGML_TYPE_Q5_1>(bytes, ref, n); break;
            case GGML_TYPE_Q8_0: check_units<GGML_TYPE_Q8_0>(bytes, ref, n); break;
            case GGML_TYPE_IQ4_NL: check_units<GGML_TYPE_IQ4_NL>(bytes, ref, n); break;
            case GGML_TYPE_Q2_K: check_units<GGML_TYPE_Q2_K>(bytes, ref, n); break;
            case GGML_TYPE_Q3_K: check_units<GGML_TYPE_Q3_K>(bytes, ref, n); break;
            case GGML_TYPE_Q4_K: check_units<GGML_TYPE_Q4_K>(bytes, ref, n); break;
            case GGML_TYPE_Q5_K: check_units<GGML_TYPE_Q5_K>(bytes, ref, n); break;
            case GGML_TYPE_Q6_K: check_units<GGML_TYPE_Q6_K>(bytes, ref, n); break;
            default: FAIL() << ggml_type_name(t);
        }
    }
}

// The integer decoders (the 8-bit products of quantized weights): D * q + M gives every value.
template <int T>
void check_int_units(const std::vector<uint8_t> & bytes, const std::vector<float> & ref, int64_t n) {
    for (int64_t u = 0; u < n / 32; u++) {
        int_unit_t w;
        int_unit<T>((const char *) bytes.data(), u, w);
        for (int l = 0; l < 32; l++) {
            const int q = (int) (int8_t) (w.q[l % 16 / 4 + 4 * (l / 16)] >> (8 * (l % 4)));
            const float v = (l < 16 ? w.D0 : w.D1) * (float) q + (l < 16 ? w.M0 : w.M1);
            expect_same_value(v, ref[(size_t) (32 * u + l)],
                              std::string(ggml_type_name((ggml_type) T)) + " unit " + std::to_string(u) + " value " + std::to_string(l));
        }
    }
}

// A row's dot with activations as the mmvq kernel computes it (b quantized by act_*_unit, unit
// by unit): the CPU's reference dot of the same row with the same activations, to rounding.
template <int T>
void check_int_dot(const std::vector<uint8_t> & bytes, const std::vector<float> & x, int64_t n) {
    const int bs = act_block_size(T);
    std::vector<int8_t> q((size_t) n);
    std::vector<float4> ds((size_t) (n / 32));
    for (int64_t u = 0; u < n / 32; u++) {
        float d, d_raw;
        if (bs == 32) {
            d_raw = act_q8_0_unit(x.data() + 32 * u, q.data() + 32 * u);
            d = h2f(f2h(d_raw));
        } else {
            const float max = signed_absmax(x.data() + 256 * (u / 8), 256);
            act_q8_K_unit(x.data() + 32 * u, max, q.data() + 32 * u);
            d = d_raw = max != 0.0f ? 1.0f / (-127.0f / max) : 0.0f;
        }
        ds[(size_t) u] = act_sums(q.data() + 32 * u, d, d_raw);
    }
    double sum = 0.0;
    for (int64_t u = 0; u < n / 32; u++) {
        int_unit_t w;
        int_unit<T>((const char *) bytes.data(), u, w);
        int b[8];
        memcpy(b, q.data() + 32 * u, sizeof(b));
        int lo = 0, hi = 0;
        for (int i = 0; i < 4; i++) {
            lo = dp4a(w.q[i], b[i], lo);
            hi = dp4a(w.q[4 + i], b[4 + i], hi);
        }
        const float4 s = ds[(size_t) u];
        sum += unit_dot<T>(w, lo, hi, s);
    }
    // the CPU: b converted to the vec_dot_type by the reference quantizer, then the reference dot
    const ggml_type vdt = ggml_quant_vec_dot_type((ggml_type) T);
    std::vector<uint8_t> act(ggml_row_size(vdt, n));
    ggml_quantize_chunk(vdt, x.data(), act.data(), 0, 1, n, nullptr);
    const float ref = ggml_quant_dot_ref((ggml_type) T)(n, bytes.data(), act.data());
    double mag = 0.0;  // the sum of |products|: the scale of rounding differences
    std::vector<float> a((size_t) n), bf((size_t) n);
    ggml_get_type_traits((ggml_type) T)->to_float(bytes.data(), a.data(), n);
    ggml_get_type_traits(vdt)->to_float(act.data(), bf.data(), n);
    for (int64_t i = 0; i < n; i++) mag += std::fabs((double) a[(size_t) i] * bf[(size_t) i]);
    const double tol = 1e-5 * mag;
    EXPECT_NEAR(sum, (double) ref, tol) << ggml_type_name((ggml_type) T);
}

template <int T>
void check_int_type(int64_t n, uint32_t seed) {
    std::vector<uint8_t> bytes;
    std::vector<float> ref;
    quantized_row((ggml_type) T, n, seed, bytes, ref);
    check_int_units<T>(bytes, ref, n);
    check_int_dot<T>(bytes, random_row(n, seed + 1000), n);
}

TEST(CudaHost, IntegerUnitsAndDotsMatchReference) {
    const int64_t n = 1024;
    check_int_type<GGML_TYPE_Q4_0>(n, 1);
    check_int_type<GGML_TYPE_Q4_1>(n, 2);
    check_int_type<GGML_TYPE_Q5_0>(n, 3);
    check_int_type<GGML_TYPE_Q5_1>(n, 4);
    check_int_type<GGML_TYPE_Q8_0>(n, 5);
    check_int_type<GGML_TYPE_IQ4_NL>(n, 6);
    check_int_type<GGML_TYPE_Q2_K>(n, 7);
    check_int_type<GGML_TYPE_Q3_K>(n, 8);
    check_int_type<GGML_TYPE_Q4_K>(n, 9);
    check_int_type<GGML_TYPE_Q5_K>(n, 10);
    check_int_type<GGML_TYPE_Q6_K>(n, 11);
}

// ---- the IQ and ternary super-block types (quant-iq.cuh) ----------------------------------------
// Most have no quantizer here: rows of random blocks (random-blocks.h), and llama.cpp's blocks of
// tests/data/iq-reference. The readers must give the CPU's dequantize_row_* values bit for bit,
// the integer units D * q the same bits, and the integer dot the CPU's reference dot against Q8_K
// to rounding.
const ggml_type kIqTypes[] = {
    GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
    GGML_TYPE_IQ1_S,   GGML_TYPE_IQ1_M,  GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0,  GGML_TYPE_TQ2_0,
};

// f(std::integral_constant<int, T>) for the IQ or ternary type t.
template <typename F>
void with_iq_type(ggml_type t, F f) {
    switch (t) {
        case GGML_TYPE_IQ2_XXS: f(std::integral_constant<int, GGML_TYPE_IQ2_XXS>{}); break;
        case GGML_TYPE_IQ2_XS: f(std::integral_constant<int, GGML_TYPE_IQ2_XS>{}); break;
        case GGML_TYPE_IQ2_S: f(std::integral_constant<int, GGML_TYPE_IQ2_S>{}); break;
        case GGML_TYPE_IQ3_XXS: f(std::integral_constant<int, GGML_TYPE_IQ3_XXS>{}); break;
        case GGML_TYPE_IQ3_S: f(std::integral_constant<int, GGML_TYPE_IQ3_S>{}); break;
        case GGML_TYPE_IQ1_S: f(std::integral_constant<int, GGML_TYPE_IQ1_S>{}); break;
        case GGML_TYPE_IQ1_M: f(std::integral_constant<int, GGML_TYPE_IQ1_M>{}); break;
        case GGML_TYPE_IQ4_XS: f(std::integral_constant<int, GGML_TYPE_IQ4_XS>{}); break;
        case GGML_TYPE_TQ1_0: f(std::integral_constant<int, GGML_TYPE_TQ1_0>{}); break;
        case GGML_TYPE_TQ2_0: f(std::integral_constant<int, GGML_TYPE_TQ2_0>{}); break;
        default: FAIL() << ggml_type_name(t);
    }
}

bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof(float)) == 0; }

// Every reader of type T on a row of n values (bytes) against the CPU's decoding ref: the value
// reader, the float and integer unit decoders bit for bit; the integer dot with random activations.
template <int T>
void check_iq_row(const uint8_t * bytes, const float * ref, int64_t n, const std::string & what) {
    const char * row = (const char *) bytes;
    int64_t bad_value = 0, bad_unit = 0, bad_int = 0;
    for (int64_t j = 0; j < n; j++) bad_value += !same_bits(dequant1(row, j, T), ref[j]);
    for (int64_t u = 0; u < n / 32; u++) {
        float v[32];
        dequant_unit<T>(row, u, v);
        int_unit_t w;
        int_unit<T>(row, u, w);
        EXPECT_TRUE(w.M0 == 0.0f && w.M1 == 0.0f) << what;
        for (int l = 0; l < 32; l++) {
            bad_unit += !same_bits(v[l], ref[32 * u + l]);
            const int q = (int) (int8_t) (w.q[l / 4] >> (8 * (l % 4)));
            bad_int += !same_bits((l < 16 ? w.D0 : w.D1) * (float) q, ref[32 * u + l]);
        }
    }
    EXPECT_EQ(bad_value, 0) << what << ": values where dequant1 differs";
    EXPECT_EQ(bad_unit, 0) << what << ": values where dequant_unit differs";
    EXPECT_EQ(bad_int, 0) << what << ": values where int_unit's D * q differs";
    EXPECT_EQ(act_block_size(T), 256) << what;  // Q8_K activations, as the CPU's vec_dot_type
    const std::vector<uint8_t> copy(bytes, bytes + ggml_row_size((ggml_type) T, n));
    check_int_dot<T>(copy, random_row(n, (uint32_t) n + 17), n);
}

TEST(CudaHost, IqGridsAreTheLibrarys) {
    for (int i = 0; i < 256; i++) EXPECT_EQ(iq2xxs_point(i), ggml_iq2xxs_grid[i]) << i;
    for (int i = 0; i < 512; i++) EXPECT_EQ(iq2xs_point(i), ggml_iq2xs_grid[i]) << i;
    for (int i = 0; i < 1024; i++) EXPECT_EQ(iq2s_point(i), ggml_iq2s_grid[i]) << i;
    for (int i = 0; i < 256; i++) EXPECT_EQ(iq3xxs_point(i), ggml_iq3xxs_grid[i]) << i;
    for (int i = 0; i < 512; i++) EXPECT_EQ(iq3s_point(i), ggml_iq3s_grid[i]) << i;
    for (int i = 0; i < 2048; i++) {
        for (int j = 0; j < 8; j++) {
            EXPECT_EQ(point_byte(iq1s_point_plus1(i), j) - 1, (int) (int8_t) (ggml_iq1s_grid[i] >> (8 * j))) << i << " " << j;
        }
    }
}

TEST(CudaHost, IqReadersMatchReferenceOnRandomBlocks) {
    const int64_t n_blocks = 24, n = n_blocks * QK_K;
    for (ggml_type t : kIqTypes) {
        ASSERT_TRUE(cuda_quant_supported(t)) << ggml_type_name(t);
        std::vector<uint8_t> bytes((size_t) n_blocks * ggml_type_size(t));
        random_iq_blocks(t, bytes.data(), n_blocks, 1000 + (uint32_t) t);
        std::vector<float> ref((size_t) n);
        ggml_get_type_traits(t)->to_float(bytes.data(), ref.data(), n);
        with_iq_type(t, [&](auto T) { check_iq_row<decltype(T)::value>(bytes.data(), ref.data(), n, ggml_type_name(t)); });
    }
}

// llama.cpp's blocks (tests/data/iq-reference/TYPE.iqref, tests/ggml/test-quants-iq.cpp's format):
// its random blocks and its quantization of real-looking rows, with its decoding of each.
TEST(CudaHost, IqReadersMatchLlamaCppBlocks) {
    for (ggml_type t : kIqTypes) {
        const std::string path = std::string(LLAMA_TEST_DATA_DIR) + "/iq-reference/" + ggml_type_name(t) + ".iqref";
        FILE * f = fopen(path.c_str(), "rb");
        ASSERT_NE(f, nullptr) << path;
        std::vector<uint8_t> d;
        uint8_t buf[4096];
        for (size_t got; (got = fread(buf, 1, sizeof(buf), f)) > 0;) d.insert(d.end(), buf, buf + got);
        fclose(f);
        ASSERT_GE(d.size(), 20u) << path;
        ASSERT_EQ(memcmp(d.data(), "IQRF", 4), 0) << path;
        int32_t h[4];  // type, random blocks, rows, cols
        memcpy(h, d.data() + 4, sizeof(h));
        ASSERT_EQ(h[0], (int32_t) t) << path;
        const size_t ts = ggml_type_size(t), rs = ggml_row_size(t, h[3]);
        const size_t n_rand = (size_t) h[1] * QK_K, n_q = (size_t) h[2] * (size_t) h[3];
        const size_t o_rand = 20, o_rand_dec = o_rand + h[1] * ts, o_x = o_rand_dec + n_rand * 4;
        const size_t o_blocks = o_x + n_q * 4 + (size_t) h[3] * 4, o_dec = o_blocks + h[2] * rs;
        ASSERT_EQ(d.size(), o_dec + n_q * 4 + h[2] * rs) << path;
        std::vector<float> rand_dec(n_rand), dec(n_q);
        memcpy(rand_dec.data(), d.data() + o_rand_dec, n_rand * 4);
        memcpy(dec.data(), d.data() + o_dec, n_q * 4);
        with_iq_type(t, [&](auto T) {
            constexpr int TT = decltype(T)::value;
            check_iq_row<TT>(d.data() + o_rand, rand_dec.data(), (int64_t) n_rand, path + " random blocks");
            for (int r = 0; r < h[2]; r++) {
                check_iq_row<TT>(d.data() + o_blocks + r * rs, dec.data() + (size_t) r * h[3], h[3],
                                 path + " llama.cpp's row " + std::to_string(r));
            }
        });
    }
}

// The activation quantizers give the reference quantizers' bytes and scales.
TEST(CudaHost, ActivationQuantizersMatchReference) {
    const int64_t n = 2048;
    std::vector<float> x = random_row(n, 77);
    x[300] = 9.0f;
    x[301] = -9.0f;  // a tie of magnitudes: the first one sets the sign of the Q8_K scale
    std::vector<block_q8_0> r0((size_t) (n / 32));
    std::vector<block_q8_K> rk((size_t) (n / 256));
    quantize_row_q8_0_ref(x.data(), r0.data(), n);
    quantize_row_q8_K_ref(x.data(), rk.data(), n);
    for (int64_t u = 0; u < n / 32; u++) {
        int8_t q[32];
        const float d = h2f(f2h(act_q8_0_unit(x.data() + 32 * u, q)));
        EXPECT_EQ(d, ggml_fp16_to_fp32(r0[(size_t) u].d)) << u;
        EXPECT_EQ(memcmp(q, r0[(size_t) u].qs, 32), 0) << "Q8_0 unit " << u;
        const float max = signed_absmax(x.data() + 256 * (u / 8), 256);
        act_q8_K_unit(x.data() + 32 * u, max, q);
        EXPECT_EQ(1.0f / (-127.0f / max), rk[(size_t) (u / 8)].d) << u;
        EXPECT_EQ(memcmp(q, rk[(size_t) (u / 8)].qs + 32 * (u % 8), 32), 0) << "Q8_K unit " << u;
    }
}

TEST(CudaHost, PlainUnitDecoders) {
    const std::vector<float> x = random_row(64, 5);
    std::vector<uint16_t> h(64), bf(64);
    ggml_fp32_to_fp16_row(x.data(), (ggml_fp16_t *) h.data(), 64);
    ggml_fp32_to_bf16_row(x.data(), (ggml_bf16_t *) bf.data(), 64);
    for (int64_t u = 0; u < 2; u++) {
        float vf[32], vh[32], vb[32];
        dequant_unit<GGML_TYPE_F32>((const char *) x.data(), u, vf);
        dequant_unit<GGML_TYPE_F16>((const char *) h.data(), u, vh);
        dequant_unit<GGML_TYPE_BF16>((const char *) bf.data(), u, vb);
        for (int l = 0; l < 32; l++) {
            EXPECT_EQ(vf[l], x[(size_t) (32 * u + l)]);
            EXPECT_EQ(vh[l], ggml_fp16_to_fp32((ggml_fp16_t) h[(size_t) (32 * u + l)]));
            EXPECT_EQ(vb[l], ggml_bf16_to_fp32(ggml_bf16_t{ bf[(size_t) (32 * u + l)] }));
        }
    }
    // conversions round as the CPU's
    for (float f : { 1.0f, -2.5f, 1e-6f, 65504.0f, 70000.0f, -1e-9f, 3.14159f }) {
        EXPECT_EQ(f2h(f), ggml_fp32_to_fp16(f)) << f;
        EXPECT_EQ(f2bf(f), ggml_fp32_to_bf16(f).bits) << f;
    }
}

// The encoder of block-typed copies (a quantized KV cache) against the reference quantizers: the
// values it stores decode to the reference's (a level may differ where x * id lands on a rounding
// tie computed with or without a fused multiply-add; IQ4_NL: where two candidate scales fit
// equally well to the last bit).
TEST(CudaHost, BlockEncoderMatchesReference) {
    const int64_t n = 4096;
    const std::vector<float> x = random_row(n, 9);
    const ggml_type types[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL };
    for (ggml_type t : types) {
        ASSERT_TRUE(cuda_quantizable_type(t));
        const size_t bs = ggml_type_size(t);
        std::vector<uint8_t> mine(ggml_row_size(t, n)), ref(ggml_row_size(t, n));
        for (int64_t b = 0; b < n / 32; b++) quantize_block((char *) mine.data() + b * bs, x.data() + 32 * b, t);
        switch (t) {
            case GGML_TYPE_Q8_0: quantize_row_q8_0_ref(x.data(), (block_q8_0 *) ref.data(), n); break;
            case GGML_TYPE_Q4_0: quantize_row_q4_0_ref(x.data(), (block_q4_0 *) ref.data(), n); break;
            case GGML_TYPE_Q4_1: quantize_row_q4_1_ref(x.data(), (block_q4_1 *) ref.data(), n); break;
            case GGML_TYPE_Q5_0: quantize_row_q5_0_ref(x.data(), (block_q5_0 *) ref.data(), n); break;
            case GGML_TYPE_IQ4_NL: ggml_quantize_chunk(t, x.data(), ref.data(), 0, 1, n, nullptr); break;  // the searched scale
            default: quantize_row_q5_1_ref(x.data(), (block_q5_1 *) ref.data(), n); break;
        }
        std::vector<float> a((size_t) n), r((size_t) n);
        ggml_get_type_traits(t)->to_float(mine.data(), a.data(), n);
        ggml_get_type_traits(t)->to_float(ref.data(), r.data(), n);
        int64_t differ = 0;
        double err = 0.0, norm = 0.0;
        for (int64_t i = 0; i < n; i++) {
            differ += a[(size_t) i] != r[(size_t) i];
            err += ((double) a[(size_t) i] - r[(size_t) i]) * ((double) a[(size_t) i] - r[(size_t) i]);
            norm += (double) r[(size_t) i] * r[(size_t) i];
        }
        EXPECT_LE(differ, n / 200) << ggml_type_name(t);
        EXPECT_LE(err / norm, 1e-5) << ggml_type_name(t);
    }
}

// The rope kernel's per-thread work, run over every item on the host, against the CPU's rope:
// both modes, F32 and F16, YaRN with frequency factors, and rope_back.
TEST(CudaHost, RopeMatchesCpu) {
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_F16 }) {
        for (int mode : { GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX }) {
            for (bool yarn : { false, true }) {
                for (bool back : { false, true }) {
                    ggml_init_params ip = { 16u << 20, nullptr, false };
                    ggml_context * ctx = ggml_init(ip);
                    ggml_tensor * x = ggml_new_tensor_3d(ctx, t, 64, 4, 7);
                    const std::vector<float> xv = random_row(ggml_nelements(x), 3);
                    if (t == GGML_TYPE_F32) {
                        memcpy(x->data, xv.data(), ggml_nbytes(x));
                    } else {
                        ggml_fp32_to_fp16_row(xv.data(), (ggml_fp16_t *) x->data, ggml_nelements(x));
                    }
                    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 7);
                    for (int i = 0; i < 7; i++) ((int32_t *) pos->data)[i] = 13 + 9973 * i;
                    ggml_tensor * ff = nullptr;
                    if (yarn) {
                        ff = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 24);
                        for (int i = 0; i < 24; i++) ((float *) ff->data)[i] = 1.0f + 0.125f * i;
                    }
                    const int n_dims = yarn ? 48 : 64;
                    auto fn = back ? ggml_rope_ext_back : ggml_rope_ext;
                    ggml_tensor * y = fn(ctx, x, pos, ff, n_dims, mode, 4096, 10000.0f, yarn ? 0.25f : 1.0f, yarn ? 1.0f : 0.0f, 1.0f,
                                         32.0f, 1.0f);
                    ggml_cgraph * gf = ggml_new_graph(ctx);
                    ggml_build_forward_expand(gf, y);
                    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 1), GGML_STATUS_SUCCESS);

                    std::vector<uint8_t> out(ggml_nbytes(y));
                    tview dv = make_view(y);
                    dv.data = (char *) out.data();
                    const RopeArgs a = ggml_cuda_rope_args(y, back);
                    const int64_t n_rows = ggml_nrows(y), items = (n_dims / 2 + (64 - n_dims)) * n_rows;
                    for (int64_t it = 0; it < items; it++) {
                        rope_element(dv, make_view(x), (const int32_t *) pos->data, (int64_t) pos->nb[0],
                                     ff ? (const float *) ff->data : nullptr, ff ? (int64_t) ff->nb[0] : 0, a, n_rows, it);
                    }
                    const int64_t n = ggml_nelements(y);
                    for (int64_t i = 0; i < n; i++) {
                        const float ref = t == GGML_TYPE_F32 ? ((const float *) y->data)[i] : ggml_fp16_to_fp32(((const ggml_fp16_t *) y->data)[i]);
                        const float got = t == GGML_TYPE_F32 ? ((const float *) out.data())[i] : ggml_fp16_to_fp32(((const ggml_fp16_t *) out.data())[i]);
                        const float tol = t == GGML_TYPE_F32 ? 1e-6f : 1e-3f;  // F16: one rounding step of the result
                        ASSERT_NEAR(got, ref, tol * (std::fabs(ref) + 1.0f))  // inputs are of order 1: cancellation leaves an absolute error
                            << ggml_type_name(t) << " mode " << mode << (yarn ? " yarn" : "") << (back ? " back" : "") << " element " << i;
                    }
                    ggml_free(ctx);
                }
            }
        }
    }
}

}  // namespace
