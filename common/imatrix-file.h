// imatrix-file.h - llama.cpp's importance matrix file (.dat, as its llama-imatrix writes it at
// build 4747), read by llama-imatrix (--in-file) and llama-quantize (--imatrix).
//
//   int32 n_entries
//   n_entries x { int32 len, char name[len], int32 ncall, int32 nval, float values[nval] }
//   int32 last_chunk                 (files of older builds end before these two)
//   int32 len, char dataset[len]
// values[j]: the mean of the squared activations of column j, times ncall; little-endian.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct common_imatrix {
    struct item {
        std::string name;              // the weight's tensor name
        int32_t ncall = 0;             // how many times its product was seen
        std::vector<float> values;     // ne[0] per matrix (experts one after another)
    };
    std::vector<item> items;
    int32_t last_chunk = 0;  // the chunks of text it was computed on
    std::string dataset;     // the text file's name
};

// Reads a whole file, checking everything against its size (counts, names, finite non-negative
// values, no entry twice, nothing after the end); false with the reason.
bool common_imatrix_read(const std::string & path, common_imatrix & out, std::string & err);
