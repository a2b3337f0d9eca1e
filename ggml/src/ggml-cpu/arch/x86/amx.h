// amx.h - what the AMX kernels share: the OS's grant of the tile state and the per-thread tile
// configuration (the int8 kernels and the bf16 ones shape their tiles differently).
#pragma once

#include "kernels-x86.h"

#if defined(GGML_SIMD_AMX)

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ggml_cpu_amx {

// Linux hands out the AMX tile data state only on request (once per process). GGML_AMX_TILES=0
// does without, as where Linux refuses it: the AVX512 kernels run instead (tests), with the same
// integer sums for the quantized types, the same products added in another order for F16 / BF16.
inline bool granted() {
    static const bool ok = [] {
        const char * env = getenv("GGML_AMX_TILES");
        if (env && strcmp(env, "0") == 0) return false;
        const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
        return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }();
    return ok;
}

// Tile shapes: INT8 (quant-repack-amx.cpp): tiles 0-3 16 x 16 int32 sums, 4, 5 16 rows of 32
// bytes (activations), 6, 7 8 rows of 64 bytes (weights). FULL (gemm-bf16-amx.cpp,
// quant-repack-k-amx.cpp): all eight 16 rows of 64 bytes.
enum class Tiles { none, int8, full };

// Loads the configuration the caller's tiles need unless this thread has it already (nothing
// else in the process configures tiles).
inline void configure(Tiles want) {
    static thread_local Tiles current = Tiles::none;
    if (current == want) return;
    struct {
        uint8_t palette_id, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } c;
    memset(&c, 0, sizeof(c));
    c.palette_id = 1;
    for (int t = 0; t < 8; t++) {
        const bool narrow = want == Tiles::int8 && t >= 4;
        c.rows[t] = narrow && t >= 6 ? 8 : 16;
        c.colsb[t] = narrow && t < 6 ? 32 : 64;
    }
    _tile_loadconfig(&c);
    current = want;
}

}  // namespace ggml_cpu_amx

#endif  // GGML_SIMD_AMX
