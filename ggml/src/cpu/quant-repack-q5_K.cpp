// quant-repack-q5_K.cpp - Q5_K x16 (quant-repack.h): being written; not repacked yet.
#include "quant-repack.h"

const struct ggml_repack_traits * ggml_repack_traits_q5_K(int forced) {
    (void) forced;
    return nullptr;
}
