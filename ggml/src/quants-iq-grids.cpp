// quants-iq-grids.cpp - the IQ grids expanded once, at compile time (quants-iq-grids.h).
#include "quants-iq-grids.h"

using namespace ggml_iq;

constexpr grid<uint64_t, 256> ggml_iq2xxs_grid = expand<uint64_t, 256, 8, 2>(iq2xxs_packed, levels_iq2);
constexpr grid<uint64_t, 512> ggml_iq2xs_grid = expand<uint64_t, 512, 8, 2>(iq2xs_packed, levels_iq2);
constexpr grid<uint64_t, 1024> ggml_iq2s_grid = expand<uint64_t, 1024, 8, 2>(iq2s_packed, levels_iq2);
constexpr grid<uint32_t, 256> ggml_iq3xxs_grid = expand<uint32_t, 256, 4, 3>(iq3xxs_packed, levels_iq3xxs);
constexpr grid<uint32_t, 512> ggml_iq3s_grid = expand<uint32_t, 512, 4, 3>(iq3s_packed, levels_iq3s);
constexpr grid<uint64_t, 2048> ggml_iq1s_grid = expand<uint64_t, 2048, 8, 2>(iq1s_packed, levels_iq1);
