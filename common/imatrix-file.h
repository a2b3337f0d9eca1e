// imatrix-file.h - llama.cpp's importance matrix files, read by llama-imatrix (--in-file) and
// llama-quantize (--imatrix), written by llama-imatrix. Two formats, told apart by content (a GGUF
// file starts with "GGUF"), never by name:
//
// The legacy .dat (llama-imatrix's at build 4747; little-endian, int32 counts):
//   int32 n_entries
//   n_entries x { int32 len, char name[len], int32 ncall, int32 nval, float values[nval] }
//   int32 last_chunk                 (files of older builds end before these two)
//   int32 len, char dataset[len]
// values[j]: the mean of the squared activations of column j, times ncall.
//
// The GGUF one (llama.cpp's since its PR #9400, July 2025):
//   general.type         str    "imatrix"
//   imatrix.datasets     [str]  the texts it was computed on
//   imatrix.chunk_count  u32    the chunks of text processed
//   imatrix.chunk_size   u32    tokens per chunk
//   per weight NAME, two F32 tensors:
//     NAME.in_sum2  ne [n_per_row, n_mat]  per matrix (n_mat: the experts of a MUL_MAT_ID weight,
//                                          else 1), the sum of the squared activations per column
//     NAME.counts   ne [1, n_mat]          per matrix, the activation rows (tokens) summed
//   other tensors are ignored; NAME.in_sum2 without NAME.counts (or the reverse) is an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct common_imatrix {
    struct item {
        std::string name;           // the weight's tensor name
        int32_t ncall = 0;          // .dat: how many times its product was seen
        std::vector<float> values;  // per column, matrices (experts) one after another:
                                    // .dat: the means times ncall; GGUF: in_sum2, the sums
        std::vector<float> counts;  // GGUF: per matrix, the rows summed (.dat: empty)
    };
    bool gguf = false;                  // the format read, or to write
    std::vector<item> items;            // .dat: in file order; GGUF: sorted by name
    int32_t last_chunk = 0;             // .dat: the chunks of text it was computed on; GGUF: imatrix.chunk_count
    std::string dataset;                // .dat: the text file's name
    std::vector<std::string> datasets;  // GGUF: imatrix.datasets
    uint32_t chunk_size = 0;            // GGUF: imatrix.chunk_size
};

// Reads a whole file of either format, checking everything against its size (.dat: counts,
// names, finite non-negative values, no entry twice, nothing after the end; GGUF: the reader's
// checks, the three imatrix.* keys, each entry's two tensors, their types and shapes, finite
// non-negative sums, whole non-negative counts); false with the reason.
bool common_imatrix_read(const std::string & path, common_imatrix & out, std::string & err);

// Writes m in its format (m.gguf) to path, through a temporary file renamed into place: whole or
// not at all; false with the reason. GGUF: each item's counts give n_mat (values.size() a multiple).
bool common_imatrix_write(const std::string & path, const common_imatrix & m, std::string & err);

// The weights llama-quantize gives the quantizers for an item, per column: the mean of the
// squared activations. .dat: values / ncall (the values as they are for ncall 0); GGUF: in_sum2 /
// the count of its matrix, 1 for a matrix that saw no row (as llama.cpp's llama-quantize).
std::vector<float> common_imatrix_weights(const common_imatrix::item & it);
