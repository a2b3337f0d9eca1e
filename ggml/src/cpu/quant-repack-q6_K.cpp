// quant-repack-q6_K.cpp - Q6_K x16 (quant-repack.h): being written; not repacked yet.
#include "quant-repack.h"

const struct ggml_repack_traits * ggml_repack_traits_q6_K(int forced) {
    (void) forced;
    return nullptr;
}
