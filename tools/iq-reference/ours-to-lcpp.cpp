// ours-to-lcpp.cpp - the other direction of tests/ggml/test-quants-iq.cpp: our quantization of each
// .iqref's values written as raw blocks (/tmp/rt/TYPE.bin) with our decoding (TYPE.ours.txt), for
// llama.cpp's decoder (gen --decode TYPE /tmp/rt/TYPE.bin > TYPE.lcpp.txt; cmp the two texts).
// g++ -O2 -std=c++17 ours-to-lcpp.cpp -Iggml/include build/lib/libggml.a -lpthread
#include "ggml.h"
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>
int main() {
    const char * types[] = {"iq2_xxs","iq2_xs","iq2_s","iq3_xxs","iq3_s","iq1_s","iq1_m","iq4_xs","tq1_0","tq2_0"};
    for (const char * name : types) {
        std::ifstream f(std::string("/work/main/tests/data/iq-reference/") + name + ".iqref", std::ios::binary);
        std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        int32_t h[4]; memcpy(h, d.data() + 4, 16);
        ggml_type t = (ggml_type) h[0]; int nr = h[1], rows = h[2], cols = h[3];
        size_t off = 20 + nr * ggml_type_size(t) + (size_t) nr * 256 * 4;
        std::vector<float> x(rows * cols), w(cols);
        memcpy(x.data(), d.data() + off, x.size() * 4); off += x.size() * 4;
        memcpy(w.data(), d.data() + off, w.size() * 4);
        std::vector<uint8_t> q(ggml_row_size(t, cols) * rows);
        ggml_quantize_chunk(t, x.data(), q.data(), 0, rows, cols, w.data());
        std::vector<float> y(x.size());
        ggml_get_type_traits(t)->to_float(q.data(), y.data(), y.size());
        FILE * o = fopen((std::string("/tmp/rt/") + name + ".bin").c_str(), "wb"); fwrite(q.data(), 1, q.size(), o); fclose(o);
        o = fopen((std::string("/tmp/rt/") + name + ".ours.txt").c_str(), "w"); for (float v : y) fprintf(o, "%.9g\n", v); fclose(o);
    }
}
