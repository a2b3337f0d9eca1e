// gemm-block.cpp - see gemm-block.h. Loops k blocks (the kernel's kc), then blocks of NC rows of
// B packed into panels of nr, then blocks of the kernel's mc rows of A packed into panels of mr,
// then the micro-kernel per (mr x nr) tile; edge tiles go through a local tile.
#include "gemm-block.h"
#include "kernels.h"

#include <algorithm>
#include <string.h>

namespace {

using namespace ggml_mm_buf;  // ALIGN, align_up, align_ptr, ceil_div (vec.h)

constexpr int64_t NC = 256;  // rows of B packed at a time

const ggml_gemm_kernel * kernel() {
    static const ggml_gemm_kernel * g = [] {
        const ggml_mm_type_kernels * k = ggml_cpu()->mm_type(GGML_TYPE_F32);
        const ggml_gemm_kernel * r = k && k->gemm ? k->gemm : ggml_cpu_kernels_scalar.mm_type(GGML_TYPE_F32)->gemm;
        GGML_ASSERT(r && r->k_unit == 1 && r->mr * r->nr <= 1024);
        return r;
    }();
    return g;
}

// rows [i0, i0 + rows) of op (zeros up to width), k in [k0, k0 + nk) -> out[u * width + i].
void pack(const ggml_gemm_kernel * g, const ggml_gemm_operand & op, int64_t i0, int rows, int width, int64_t k0,
          int64_t nk, float * out) {
    if (!op.by_cols) {
        g->pack_a(op.p + i0 * op.ld, (size_t) op.ld * sizeof(float), rows, width, k0, nk, out);
        return;
    }
    for (int64_t u = 0; u < nk; u++) {
        float * o = out + u * width;
        memcpy(o, op.p + (k0 + u) * op.ld + i0, rows * sizeof(float));
        for (int i = rows; i < width; i++) o[i] = 0.0f;
    }
}

// The packed panels of B, then those of A, for an M x N x K product.
struct Layout {
    size_t b_floats, a_floats;
    Layout(const ggml_gemm_kernel * g, int64_t M, int64_t N, int64_t K) {
        const int64_t kc = std::min<int64_t>(g->kc, K), nc = std::min(NC, N), mc = std::min<int64_t>(g->mc, M);
        b_floats = align_up((size_t) ceil_div(nc, g->nr) * g->nr * kc * sizeof(float)) / sizeof(float);
        a_floats = align_up((size_t) ceil_div(mc, g->mr) * g->mr * kc * sizeof(float)) / sizeof(float);
    }
};

}  // namespace

size_t ggml_gemm_block_scratch(int64_t M, int64_t N, int64_t K) {
    const Layout l(kernel(), std::max<int64_t>(M, 1), std::max<int64_t>(N, 1), std::max<int64_t>(K, 1));
    return ALIGN + (l.b_floats + l.a_floats) * sizeof(float);
}

void ggml_gemm_block(int64_t M, int64_t N, int64_t K, ggml_gemm_operand a, ggml_gemm_operand b, float * c, int64_t ldc,
                     bool accumulate, void * scratch) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (!accumulate) for (int64_t n = 0; n < N; n++) memset(c + n * ldc, 0, M * sizeof(float));
        return;
    }
    const ggml_gemm_kernel * g = kernel();
    const int mr = g->mr, nr = g->nr;
    float * b_pack = (float *) align_ptr(scratch);
    float * a_pack = b_pack + Layout(g, M, N, K).b_floats;
    float edge[1024];

    for (int64_t k0 = 0; k0 < K; k0 += g->kc) {
        const int64_t nk = std::min<int64_t>(g->kc, K - k0);
        const bool acc = accumulate || k0 > 0;
        for (int64_t n0 = 0; n0 < N; n0 += NC) {
            const int64_t nn = std::min(NC, N - n0);
            for (int64_t j = 0; j < nn; j += nr) {
                pack(g, b, n0 + j, (int) std::min<int64_t>(nr, nn - j), nr, k0, nk, b_pack + (j / nr) * nk * nr);
            }
            for (int64_t m0 = 0; m0 < M; m0 += g->mc) {
                const int64_t mm = std::min<int64_t>(g->mc, M - m0);
                for (int64_t i = 0; i < mm; i += mr) {
                    pack(g, a, m0 + i, (int) std::min<int64_t>(mr, mm - i), mr, k0, nk, a_pack + (i / mr) * nk * mr);
                }
                for (int64_t j = 0; j < nn; j += nr) {
                    const int ncur = (int) std::min<int64_t>(nr, nn - j);
                    const float * bp = b_pack + (j / nr) * nk * nr;
                    for (int64_t i = 0; i < mm; i += mr) {
                        const int mcur = (int) std::min<int64_t>(mr, mm - i);
                        const float * ap = a_pack + (i / mr) * nk * mr;
                        float * ct = c + (n0 + j) * ldc + m0 + i;
                        if (mcur == mr && ncur == nr) {
                            g->micro(nk, ap, bp, ct, (size_t) ldc, acc);
                            continue;
                        }
                        if (acc) {
                            for (int jj = 0; jj < ncur; jj++) memcpy(edge + jj * mr, ct + jj * ldc, mcur * sizeof(float));
                        }
                        g->micro(nk, ap, bp, edge, mr, acc);
                        for (int jj = 0; jj < ncur; jj++) memcpy(ct + jj * ldc, edge + jj * mr, mcur * sizeof(float));
                    }
                }
            }
        }
    }
}
