// gen.c - reference data for the IQ and ternary types from llama.cpp's ggml (build 4747): what
// tests/ggml/test-quants-iq.cpp holds our decoders and quantizers to. Built against llama.cpp,
// outside this repository (see README.md); C, and only ggml.h's public API.
//
//   gen OUT_DIR             writes OUT_DIR/<type>.iqref for each type
//   gen --decode TYPE FILE  prints llama.cpp's decoding of FILE (raw blocks of TYPE) as floats
//                           (one per line, %.9g): the other direction, ours decoded by llama.cpp
//
// A .iqref file, little-endian:
//   char magic[4] "IQRF"; int32 type; int32 n_random (blocks); int32 rows; int32 cols;
//   uint8  random_blocks[n_random * type_size]   random bytes, with a finite F16 scale
//   float  random_decoded[n_random * 256]        llama.cpp's decoding of them
//   float  x[rows * cols]                        values to quantize (heavy-tailed, per-column spread)
//   float  imatrix[cols]                         importance weights (positive)
//   uint8  blocks[rows * row_size]               llama.cpp's ggml_quantize_chunk(type, x, imatrix)
//   float  decoded[rows * cols]                  llama.cpp's decoding of blocks
//   uint8  blocks_plain[rows * row_size]         ggml_quantize_chunk without an imatrix (zeros
//                                                for the types that need one)
#include "ggml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t) (rng >> 32);
}
static double uniform(void) { return (next_u32() + 0.5) / 4294967296.0; }
static double gauss(void) { return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()); }

static const struct { enum ggml_type type; const char * name; } types[] = {
    { GGML_TYPE_IQ2_XXS, "iq2_xxs" }, { GGML_TYPE_IQ2_XS, "iq2_xs" }, { GGML_TYPE_IQ2_S, "iq2_s" },
    { GGML_TYPE_IQ3_XXS, "iq3_xxs" }, { GGML_TYPE_IQ3_S, "iq3_s" }, { GGML_TYPE_IQ1_S, "iq1_s" },
    { GGML_TYPE_IQ1_M, "iq1_m" }, { GGML_TYPE_IQ4_XS, "iq4_xs" }, { GGML_TYPE_TQ1_0, "tq1_0" },
    { GGML_TYPE_TQ2_0, "tq2_0" },
};

// Where each type keeps its F16 super-scale: a random one is replaced by a sane value.
static void set_scale(enum ggml_type t, uint8_t * b, size_t size) {
    ggml_fp16_t d = ggml_fp32_to_fp16((float) (0.001 + 0.01 * uniform()));
    if (t == GGML_TYPE_IQ1_M) {  // the top nibbles of the last 8 bytes (4 u16)
        uint16_t sc[4];
        memcpy(sc, b + size - 8, 8);
        for (int k = 0; k < 4; k++) sc[k] = (uint16_t) ((sc[k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12));
        memcpy(b + size - 8, sc, 8);
    } else if (t == GGML_TYPE_TQ1_0 || t == GGML_TYPE_TQ2_0) {
        memcpy(b + size - 2, &d, 2);
    } else {
        memcpy(b, &d, 2);
    }
}

static void put(FILE * f, const void * p, size_t n) {
    if (fwrite(p, 1, n, f) != n) { perror("write"); exit(1); }
}

int main(int argc, char ** argv) {
    struct ggml_init_params ip = { 1024, NULL, false };
    ggml_free(ggml_init(ip));  // (fills ggml's F16 tables)
    if (argc == 4 && !strcmp(argv[1], "--decode")) {
        enum ggml_type t = GGML_TYPE_COUNT;
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) if (!strcmp(types[i].name, argv[2])) t = types[i].type;
        if (t == GGML_TYPE_COUNT) { fprintf(stderr, "unknown type %s\n", argv[2]); return 1; }
        FILE * f = fopen(argv[3], "rb");
        if (!f) { perror(argv[3]); return 1; }
        static uint8_t buf[1 << 24];
        const size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        const size_t nb = n / ggml_type_size(t);
        float * y = malloc(nb * 256 * sizeof(float));
        ggml_get_type_traits(t)->to_float(buf, y, (int64_t) nb * 256);
        for (size_t i = 0; i < nb * 256; i++) printf("%.9g\n", y[i]);
        return 0;
    }
    if (argc != 2) { fprintf(stderr, "usage: gen OUT_DIR | gen --decode TYPE FILE\n"); return 1; }
    const int n_random = 8, rows = 4, cols = 512;
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const enum ggml_type t = types[ti].type;
        const size_t ts = ggml_type_size(t), rs = ggml_row_size(t, cols);
        ggml_quantize_init(t);
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s.iqref", argv[1], types[ti].name);
        FILE * f = fopen(path, "wb");
        if (!f) { perror(path); return 1; }
        const int32_t hdr[4] = { (int32_t) t, n_random, rows, cols };
        put(f, "IQRF", 4);
        put(f, hdr, sizeof(hdr));
        uint8_t * rb = malloc(n_random * ts);
        for (size_t i = 0; i < n_random * ts; i++) rb[i] = (uint8_t) next_u32();
        for (int b = 0; b < n_random; b++) set_scale(t, rb + b * ts, ts);
        float * rd = malloc(n_random * 256 * sizeof(float));
        ggml_get_type_traits(t)->to_float(rb, rd, n_random * 256);
        put(f, rb, n_random * ts);
        put(f, rd, n_random * 256 * sizeof(float));
        float * x = malloc(rows * cols * sizeof(float)), * w = malloc(cols * sizeof(float));
        float colscale[512];
        for (int c = 0; c < cols; c++) colscale[c] = (float) exp(0.5 * gauss());
        for (int c = 0; c < cols; c++) w[c] = (float) exp(1.5 * gauss());
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                double g = gauss();
                if (uniform() < 0.01) g *= 6.0;  // a few outliers
                x[r * cols + c] = (float) (0.02 * colscale[c] * g);
            }
        }
        // Exact ternary rows for the TQ types' last row (what they are made for).
        if (t == GGML_TYPE_TQ1_0 || t == GGML_TYPE_TQ2_0) {
            for (int c = 0; c < cols; c++) x[(rows - 1) * cols + c] = 0.05f * (float) ((int) (next_u32() % 3) - 1);
        }
        put(f, x, rows * cols * sizeof(float));
        put(f, w, cols * sizeof(float));
        uint8_t * q = calloc(rows, rs);
        ggml_quantize_chunk(t, x, q, 0, rows, cols, w);
        float * dq = malloc(rows * cols * sizeof(float));
        ggml_get_type_traits(t)->to_float(q, dq, rows * cols);
        put(f, q, rows * rs);
        put(f, dq, rows * cols * sizeof(float));
        memset(q, 0, rows * rs);
        if (!ggml_quantize_requires_imatrix(t)) ggml_quantize_chunk(t, x, q, 0, rows, cols, NULL);
        put(f, q, rows * rs);
        fclose(f);
        printf("%s: %s\n", types[ti].name, path);
        free(rb); free(rd); free(x); free(w); free(q); free(dq);
    }
    ggml_quantize_free();
    return 0;
}
