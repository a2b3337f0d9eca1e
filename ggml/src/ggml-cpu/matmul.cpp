// matmul.cpp - mul_mat on the CPU (out_prod, its backward product, is in out-prod.cpp).
//
// mul_mat(a, b): b's rows are first converted to the vec_dot_type of a's type (split by rows
// across threads, then a barrier; contiguous F32 rows that need no conversion are read in
// place). Small N (token generation, memory-bound) takes the dot path:
// tiles of up to 4 x 4 dot products streaming a's rows once. Large N (prompt processing,
// compute-bound) takes the packed GEMM path: b is packed into k-major panels (shared, another
// barrier), each thread packs blocks of a's rows and runs the ISA's register-tiled micro-kernel
// over cache blocks. The kernels per type come from the table in vec.h, so a new type of a
// is a new table entry. A repacked a (quant-repack.h) takes its own path: b's rows become the
// layout's activation blocks, and each 16-row group of a meets 16 (AMX) or up to 8 rows of b per kernel call.
//
// Bit-identical results for any thread count: on the dot path each output is one dot-tile
// accumulator (same instructions whatever the tile shape); on the GEMM path each output is one
// sequential FMA chain over k, so neither blocking nor the split of work changes a result.
#include "cpu-ops.h"
#include "quant-repack.h"
#include "kernels.h"

#include <algorithm>
#include <atomic>
#include <string.h>

int ggml_mm_gemm_min_n = 0;

namespace {

using namespace ggml_mm_buf;  // ALIGN, align_up, align_ptr, ceil_div (vec.h)

}  // namespace

const ggml_mm_type_kernels * ggml_quant_mm_kernels(enum ggml_type type);  // quant-matmul.cpp

namespace {

const ggml_mm_type_kernels * mm_kernels(ggml_type type) {
    if (ggml_is_quantized(type)) return ggml_quant_mm_kernels(type);
    return ggml_cpu()->mm_type(type);
}

// ---- mul_mat work buffer layout (shared by the size query and the kernel) -----------------
// How b's rows are converted: to blocks of blck values taking bsize bytes (F32 copy if no
// from_float).
struct BConv {
    ggml_from_float_t from_float;
    int64_t blck;
    size_t bsize;
    size_t bytes(int64_t k) const { return (size_t) (k / blck) * bsize; }
};

struct MulMatPlan {
    const ggml_mm_type_kernels * kern;  // NULL for a repacked a
    const ggml_repack_traits * repacked;  // the layout and kernel of a repacked a
    BConv conv;
    bool use_gemm;
    bool convert_b;       // b's rows are converted into wdata (else read in place)
    size_t b_row_size;    // bytes per converted row of b
    size_t b_conv_size;   // bytes of all converted rows
    int64_t k_units;      // GEMM: packed units per row (ceil(K / k_unit))
    int64_t n_panels;     // GEMM: panels of nr rows of b per plane
    size_t b_panel_size;  // GEMM: bytes per packed panel of b
    size_t b_pack_size;   // GEMM: bytes of all packed panels
    size_t a_pack_size;   // GEMM: bytes of the packed block of a, per thread

    size_t total(int nth) const { return ALIGN + b_conv_size + b_pack_size + (size_t) nth * a_pack_size; }
};

MulMatPlan plan_mul_mat(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int64_t K = a->ne[0], N = b->ne[1], planes = b->ne[2] * b->ne[3];

    MulMatPlan p = {};
    GGML_ASSERT(b->type == GGML_TYPE_F32);
    if (a->flags & GGML_TENSOR_FLAG_REPACKED) {
        p.repacked = ggml_repack_get_traits(a->type);
        GGML_ASSERT(p.repacked != nullptr && "mul_mat: a repacked a needs its kernel");
        p.conv = { p.repacked->act_from_float, p.repacked->act_blck, p.repacked->act_size };
        p.convert_b = true;
        p.b_row_size = align_up(p.conv.bytes(K));
        p.b_conv_size = p.b_row_size * (size_t) (N * planes);
        return p;
    }
    p.kern = mm_kernels(a->type);
    GGML_ASSERT(p.kern != nullptr && "mul_mat: no kernel for this type of a");
    const ggml_type vdt = p.kern->vec_dot_type;
    p.conv = { p.kern->from_float, ggml_blck_size(vdt), ggml_type_size(vdt) };
    if (p.kern->gemm && K > 0) {
        // Fewer rows of a than half a micro-tile (a LoRA A x): the tile would mostly multiply
        // padding, and packing all of b costs more than the dot tiles reading it once.
        const bool few_rows = a->ne[1] < p.kern->gemm->mr / 2;
        p.use_gemm = ggml_mm_gemm_min_n > 0 ? N >= ggml_mm_gemm_min_n : (N >= p.kern->gemm->min_n && !few_rows);
    }
    p.convert_b = !(p.kern->vec_dot_type == GGML_TYPE_F32 && b->nb[0] == sizeof(float));
    p.b_row_size = align_up(ggml_row_size(p.kern->vec_dot_type, K));
    p.b_conv_size = p.convert_b ? p.b_row_size * (size_t) (N * planes) : 0;
    if (p.use_gemm) {
        const ggml_gemm_kernel * g = p.kern->gemm;
        p.k_units = ceil_div(K, g->k_unit);
        p.n_panels = ceil_div(N, g->nr);
        p.b_panel_size = align_up((size_t) p.k_units * g->nr * 4);
        p.b_pack_size = p.b_panel_size * (size_t) (p.n_panels * planes);
        p.a_pack_size = align_up((size_t) g->mc * std::min<int64_t>(g->kc, p.k_units) * 4);
    }
    return p;
}

// Rows of b as the dot kernels read them: converted in wdata, or b itself.
struct RowsB {
    const char * base;
    size_t nb1, nb2, nb3;
    const char * row(int64_t i1, int64_t i2, int64_t i3) const { return base + i1 * nb1 + i2 * nb2 + i3 * nb3; }
};

// Converts b's rows [r0, r1) (flat over dims 1..3) to vec_dot_type rows.
void convert_b_rows(const ggml_tensor * b, const BConv & conv, const RowsB & out, int64_t r0, int64_t r1) {
    const int64_t K = b->ne[0], N = b->ne[1], B2 = b->ne[2];
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % N, i2 = (r / N) % B2, i3 = r / (N * B2);
        const char * src = (const char *) b->data + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
        char * dst = (char *) out.row(i1, i2, i3);
        if (b->nb[0] == sizeof(float)) {
            if (conv.from_float) conv.from_float((const float *) src, dst, K);
            else memcpy(dst, src, K * sizeof(float));
            continue;
        }
        // Strided elements: gather chunks (a multiple of any block size) onto the stack first.
        float chunk[256];
        for (int64_t k0 = 0; k0 < K; k0 += 256) {
            const int64_t n = std::min<int64_t>(256, K - k0);
            for (int64_t k = 0; k < n; k++) chunk[k] = *(const float *) (src + (k0 + k) * b->nb[0]);
            char * d = dst + conv.bytes(k0);
            if (conv.from_float) conv.from_float(chunk, d, n);
            else memcpy(d, chunk, n * sizeof(float));
        }
    }
}

struct MulMatArgs {
    const ggml_tensor * a;
    ggml_tensor * dst;
    RowsB rb;
    int64_t K, M, N, B2, B3, r2, r3;
    size_t lda, ldd;  // bytes between rows of a; floats between rows of dst
    char * d0;        // where the output goes: dst's data (or one plane's buffer, with dnb2 = dnb3 = 0)
    size_t dnb2, dnb3;

    const char * a_row(int64_t m, int64_t i2, int64_t i3) const {
        return (const char *) a->data + m * a->nb[1] + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
    }
    float * d_at(int64_t m, int64_t n, int64_t i2, int64_t i3) const {
        return (float *) (d0 + n * dst->nb[1] + i2 * dnb2 + i3 * dnb3) + m;
    }
};

// Dot path: items are (plane, block of 4 rows of a), each against all N rows of b.
void dot_item(const MulMatArgs & x, const ggml_mm_type_kernels * kern, int64_t p, int64_t m0) {
    const int R = GGML_DOT_TILE_MAX, C = GGML_DOT_TILE_MAX;
    const int64_t i2 = p % x.B2, i3 = p / x.B2;
    const int nr = (int) std::min<int64_t>(R, x.M - m0);
    const char * a0 = x.a_row(m0, i2, i3);
    for (int64_t n0 = 0; n0 < x.N; n0 += C) {
        const int nc = (int) std::min<int64_t>(C, x.N - n0);
        kern->dot_tile(x.K, nr, nc, a0, x.lda, x.rb.row(n0, i2, i3), x.rb.nb1, x.d_at(m0, n0, i2, i3), x.ldd);
    }
}

// One column of b per plane and r2 > 1 planes of b per plane of a (grouped-query attention
// while generating: the 8 query heads of a kv head): the columns of the r2 planes that share a's
// plane meet each tile of a's rows together, GGML_DOT_TILE_MAX at a time, so a's rows are read
// (and converted) once per 4 planes instead of once per plane. The same tiles: the same bits.
bool dot_grouped(const MulMatArgs & x) { return x.N == 1 && x.r2 > 1 && x.dnb2 % sizeof(float) == 0; }

// Item (plane pa of a's planes as b's dimension 3 sees them, block of rows from m0).
void dot_item_grouped(const MulMatArgs & x, const ggml_mm_type_kernels * kern, int64_t pa, int64_t m0) {
    const int64_t B2a = x.B2 / x.r2, i2 = (pa % B2a) * x.r2, i3 = pa / B2a;
    const int nr = (int) std::min<int64_t>(GGML_DOT_TILE_MAX, x.M - m0);
    const char * a0 = x.a_row(m0, i2, i3);
    for (int64_t g = 0; g < x.r2; g += GGML_DOT_TILE_MAX) {
        const int nc = (int) std::min<int64_t>(GGML_DOT_TILE_MAX, x.r2 - g);
        kern->dot_tile(x.K, nr, nc, a0, x.lda, x.rb.row(0, i2 + g, i3), x.rb.nb2, x.d_at(m0, 0, i2 + g, i3), x.dnb2 / sizeof(float));
    }
}

// Items (plane, block of rows), shared out with stealing (see mul_mat_repacked).
void mul_mat_dot(const MulMatArgs & x, const ggml_mm_type_kernels * kern, const ggml_compute_params * params) {
    const bool grouped = dot_grouped(x);
    const int64_t m_blocks = ceil_div(x.M, GGML_DOT_TILE_MAX), items = m_blocks * (grouped ? x.B2 / x.r2 : x.B2) * x.B3;
    auto item = [&](int64_t it) {
        if (grouped) dot_item_grouped(x, kern, it / m_blocks, (it % m_blocks) * GGML_DOT_TILE_MAX);
        else dot_item(x, kern, it / m_blocks, (it % m_blocks) * GGML_DOT_TILE_MAX);
    };
    ggml_cpu_for_items(params, items, item);
}

// Repacked path: items are (block of columns, plane, group of 16 rows of a), block by block.
// Columns of b go in blocks small enough to stay in L2 while the groups of a thread's run pass
// over them (ggml_repack_col_block), 16 or 8 at a time (ggml_repack_gemm_cols). A thread that
// finishes its share first takes over the end of another's (ggml_cpu_next_items) instead of
// waiting at the barrier: on a shared machine one core often runs slower for a while.
void mul_mat_repacked(const MulMatArgs & x, const ggml_repack_traits * rt, const ggml_compute_params * params) {
    const int R = GGML_REPACK_ROWS;
    const int64_t groups = x.M / R, nb = x.K / rt->blck, items = groups * x.B2 * x.B3;
    const int64_t col_block = ggml_repack_col_block(rt, x.rb.nb1, x.N);
    auto group = [&](int64_t it, int64_t c0, int64_t c1) {
        const int64_t p = it / groups, m0 = (it % groups) * R;
        const int64_t i2 = p % x.B2, i3 = p / x.B2;
        ggml_repack_gemm_cols(rt, nb, x.a_row(m0, i2, i3), x.rb.row(c0, i2, i3), x.rb.nb1, c1 - c0,
                              x.d_at(m0, c0, i2, i3), x.ldd);
    };
    const int64_t blocks = ceil_div(x.N, col_block);
    if (ggml_cpu_can_share_items(params, blocks * items)) {
        for (int64_t it0, it1; ggml_cpu_next_items(params, blocks * items, &it0, &it1);) {
            for (int64_t it = it0; it < it1; it++) {
                const int64_t c0 = it / items * col_block;
                group(it % items, c0, std::min(x.N, c0 + col_block));
            }
        }
        return;
    }
    int64_t it0, it1;
    ggml_cpu_split_rows(items, params->ith, params->nth, &it0, &it1);
    for (int64_t c0 = 0; c0 < x.N; c0 += col_block) {
        for (int64_t it = it0; it < it1; it++) group(it, c0, std::min(x.N, c0 + col_block));
    }
}

// GEMM path, one run of work: plane p (its packed panels at b_pack), panels [jp0, jp1) of b, rows
// [m_begin, m_end) of a.
void gemm_run(const MulMatArgs & x, const MulMatPlan & plan, const char * b_pack, char * a_pack,
              int64_t p, int64_t jp0, int64_t jp1, int64_t m_begin, int64_t m_end) {
    const ggml_gemm_kernel * g = plan.kern->gemm;
    const int mr = g->mr, nr = g->nr;
    const int64_t i2 = p % x.B2, i3 = p / x.B2;
    float edge[1024] = {};  // an edge tile, computed whole then copied out
    GGML_ASSERT(mr * nr <= 1024);

    for (int64_t u0 = 0; u0 < plan.k_units; u0 += g->kc) {
        const int64_t nu = std::min<int64_t>(g->kc, plan.k_units - u0);
        const int64_t k0 = u0 * g->k_unit, nk = std::min<int64_t>(nu * g->k_unit, x.K - k0);
        const bool acc = u0 > 0;
        const size_t a_panel = (size_t) nu * mr * 4;
        for (int64_t ic = m_begin; ic < m_end; ic += g->mc) {
            const int64_t mcur = std::min<int64_t>(g->mc, m_end - ic);
            for (int64_t ir = 0; ir < mcur; ir += mr) {
                const int rows = (int) std::min<int64_t>(mr, m_end - (ic + ir));
                g->pack_a(x.a_row(ic + ir, i2, i3), x.lda, rows, mr, k0, nk, a_pack + (ir / mr) * a_panel);
            }
            for (int64_t jp = jp0; jp < jp1; jp++) {
                const int64_t n0 = jp * nr;
                const int ncur = (int) std::min<int64_t>(nr, x.N - n0);
                const char * bp = b_pack + jp * plan.b_panel_size + (size_t) u0 * nr * 4;
                for (int64_t ir = 0; ir < mcur; ir += mr) {
                    const int64_t m0 = ic + ir;
                    const int mrows = (int) std::min<int64_t>(mr, m_end - m0);
                    float * c = x.d_at(m0, n0, i2, i3);
                    const char * ap = a_pack + (ir / mr) * a_panel;
                    if (mrows == mr && ncur == nr) {
                        g->micro(nu, ap, bp, c, x.ldd, acc);
                        continue;
                    }
                    if (acc) {
                        for (int j = 0; j < ncur; j++) memcpy(edge + j * mr, c + j * x.ldd, mrows * sizeof(float));
                    }
                    g->micro(nu, ap, bp, edge, mr, acc);
                    for (int j = 0; j < ncur; j++) memcpy(c + j * x.ldd, edge + j * mr, mrows * sizeof(float));
                }
            }
        }
    }
}

// GEMM path: b is packed (split by panels), then items (plane, chunk of b's panels, tile of mr
// rows of a) are split in contiguous ranges; each range is cut into runs sharing plane and chunk.
void mul_mat_gemm(const MulMatArgs & x, const MulMatPlan & plan, char * b_pack, char * a_pack_all,
                  const ggml_compute_params * params) {
    const ggml_gemm_kernel * g = plan.kern->gemm;
    const int ith = params->ith, nth = params->nth;
    const int64_t planes = x.B2 * x.B3;

    int64_t q0, q1;
    ggml_cpu_split_rows(planes * plan.n_panels, ith, nth, &q0, &q1);
    for (int64_t q = q0; q < q1; q++) {
        const int64_t p = q / plan.n_panels, jp = q % plan.n_panels;
        const int64_t i2 = p % x.B2, i3 = p / x.B2, n0 = jp * g->nr;
        const int rows = (int) std::min<int64_t>(g->nr, x.N - n0);
        g->pack_b(x.rb.row(n0, i2, i3), x.rb.nb1, rows, g->nr, 0, x.K, b_pack + q * plan.b_panel_size);
    }
    ggml_cpu_barrier(params);

    // Few tiles of a: split b's panels too, so that every thread has work.
    const int64_t m_tiles = ceil_div(x.M, g->mr);
    int64_t n_chunks = 1;
    if (planes * m_tiles < 4 * nth) {
        n_chunks = std::min(plan.n_panels, ceil_div(4 * nth, planes * m_tiles));
    }
    const int64_t chunk_panels = ceil_div(plan.n_panels, n_chunks);
    n_chunks = ceil_div(plan.n_panels, chunk_panels);

    char * a_pack = a_pack_all + (size_t) ith * plan.a_pack_size;
    int64_t it0, it1;
    ggml_cpu_split_rows(planes * n_chunks * m_tiles, ith, nth, &it0, &it1);
    for (int64_t it = it0; it < it1;) {
        const int64_t p = it / (n_chunks * m_tiles), ch = (it / m_tiles) % n_chunks, t0 = it % m_tiles;
        const int64_t t1 = std::min(m_tiles, t0 + (it1 - it));
        const int64_t jp0 = ch * chunk_panels, jp1 = std::min(plan.n_panels, jp0 + chunk_panels);
        gemm_run(x, plan, b_pack + (size_t) p * plan.n_panels * plan.b_panel_size, a_pack, p, jp0, jp1, t0 * g->mr,
                 std::min(x.M, t1 * g->mr));
        it += t1 - t0;
    }
}

// Checks mul_mat's operands; the shapes the paths share (rb is set by the caller).
MulMatArgs mul_mat_args(ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    GGML_ASSERT(a->ne[0] == b->ne[0] && a->ne[1] == dst->ne[0] && b->ne[1] == dst->ne[1]);
    GGML_ASSERT(b->ne[2] == dst->ne[2] && b->ne[3] == dst->ne[3]);
    GGML_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0);
    GGML_ASSERT(a->nb[0] == ggml_type_size(a->type) && "mul_mat: a's rows must be contiguous");
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float));
    MulMatArgs x;
    x.a = a;
    x.dst = dst;
    x.K = a->ne[0];
    x.M = a->ne[1];
    x.N = b->ne[1];
    x.B2 = b->ne[2];
    x.B3 = b->ne[3];
    x.r2 = b->ne[2] / a->ne[2];
    x.r3 = b->ne[3] / a->ne[3];
    x.lda = a->nb[1];
    x.ldd = dst->nb[1] / sizeof(float);
    x.rb = { (const char *) b->data, b->nb[1], b->nb[2], b->nb[3] };
    x.d0 = (char *) dst->data;
    x.dnb2 = dst->nb[2];
    x.dnb3 = dst->nb[3];
    return x;
}

// One plane's scratch (ggml_cpu_mul_mat_plane): its converted rows of b, its packed panels, a
// block of a.
struct PlaneScratch {
    size_t b_conv, b_pack, a_pack;
    PlaneScratch(const MulMatPlan & plan, int64_t N)
        : b_conv(plan.convert_b ? align_up(plan.b_row_size * (size_t) N) : 0),
          b_pack(plan.use_gemm ? align_up(plan.b_panel_size * (size_t) plan.n_panels) : 0),
          a_pack(plan.use_gemm ? plan.a_pack_size : 0) {}
    size_t total() const { return ALIGN + b_conv + b_pack + a_pack; }
};

}  // namespace

size_t ggml_cpu_mul_mat_work_size(const struct ggml_tensor * node, int n_threads) {
    return plan_mul_mat(node).total(n_threads);
}

bool ggml_cpu_mul_mat_by_plane(const struct ggml_tensor * dst) {
    return dst->op == GGML_OP_MUL_MAT && !(dst->src[0]->flags & GGML_TENSOR_FLAG_REPACKED) && dst->src[1]->type == GGML_TYPE_F32;
}

size_t ggml_cpu_mul_mat_plane_work_size(const struct ggml_tensor * dst) {
    return PlaneScratch(plan_mul_mat(dst), dst->src[1]->ne[1]).total();
}

int64_t ggml_cpu_mul_mat_plane_cols(const struct ggml_tensor * dst) {
    const MulMatPlan plan = plan_mul_mat(dst);
    return plan.use_gemm ? plan.kern->gemm->nr : 0;
}

void ggml_cpu_mul_mat_plane(struct ggml_tensor * dst, int64_t p, void * work, const float * b_plane, float * out,
                            int64_t c0, int64_t c1, const int32_t * lim, bool lim_k) {
    GGML_ASSERT(ggml_cpu_mul_mat_by_plane(dst));
    const MulMatPlan plan = plan_mul_mat(dst);
    MulMatArgs x = mul_mat_args(dst);
    // b's plane p from b_plane (laid out as b's plane): a copy of b's header pointing there.
    ggml_tensor b_here = *dst->src[1];
    if (b_plane) {
        b_here.data = (void *) b_plane;
        b_here.nb[2] = b_here.nb[3] = 0;
        x.rb = { (const char *) b_plane, b_here.nb[1], 0, 0 };
    }
    if (out) {
        x.d0 = (char *) out;
        x.dnb2 = x.dnb3 = 0;
    }
    const PlaneScratch sc(plan, x.N);
    char * b_conv = align_ptr((char *) work);
    char * b_pack = b_conv + sc.b_conv;
    char * a_pack = b_pack + sc.b_pack;
    const int64_t i2 = p % x.B2, i3 = p / x.B2;
    if (!plan.use_gemm) {  // the dot path: the whole plane
        GGML_ASSERT(c0 == 0 && c1 == x.N);
        if (plan.convert_b) {
            x.rb = { b_conv, plan.b_row_size, 0, 0 };  // this plane's rows only
            convert_b_rows(&b_here, plan.conv, x.rb, p * x.N, (p + 1) * x.N);
        }
        for (int64_t m0 = 0; m0 < x.M; m0 += GGML_DOT_TILE_MAX) dot_item(x, plan.kern, p, m0);
        return;
    }
    const ggml_gemm_kernel * g = plan.kern->gemm;
    GGML_ASSERT(c0 % g->nr == 0 && c0 <= c1 && c1 <= x.N);
    // Groups of panels (>= 64 columns) sharing a limit, each converted, packed and multiplied in
    // turn (a's panels are packed again per group). Limits are rounded up to whole micro-tiles of
    // rows (mr), or to whole tile groups of K (kernels with their own layout, which add group by
    // group) or else whole cache blocks of K (a micro-kernel's own order within a block is left
    // as it is), so every value kept is computed as the whole product computes it; the K left
    // out would only have added zero products.
    const int64_t per = std::max<int64_t>(1, 64 / g->nr);
    const int64_t k_round = (int64_t) g->k_unit * (g->k_group > 0 ? g->k_group : g->kc);
    for (int64_t jp0 = c0 / g->nr; jp0 * g->nr < c1; jp0 += per) {
        const int64_t jp1 = std::min((c1 + g->nr - 1) / g->nr, jp0 + per);
        const int64_t n0 = jp0 * g->nr, n1 = std::min(x.N, jp1 * g->nr);
        int64_t l = lim ? 0 : (lim_k ? x.K : x.M);
        for (int64_t n = n0; lim && n < n1; n++) l = std::max<int64_t>(l, lim[n]);
        MulMatPlan pk = plan;
        MulMatArgs xk = x;
        int64_t m_end = x.M;
        if (lim_k) {
            xk.K = std::min(x.K, std::max<int64_t>(1, (l + k_round - 1) / k_round * k_round));
            pk.k_units = (xk.K + g->k_unit - 1) / g->k_unit;
        } else {
            m_end = std::min(x.M, (l + g->mr - 1) / g->mr * g->mr);
        }
        if (m_end == 0) continue;
        if (plan.convert_b) {
            xk.rb = { b_conv, plan.b_row_size, 0, 0 };  // this plane's rows only
            convert_b_rows(&b_here, plan.conv, xk.rb, p * x.N + n0, p * x.N + n1);
        }
        for (int64_t jp = jp0; jp < jp1; jp++) {
            const int rows = (int) std::min<int64_t>(g->nr, x.N - jp * g->nr);
            g->pack_b(xk.rb.row(jp * g->nr, i2, i3), xk.rb.nb1, rows, g->nr, 0, xk.K, b_pack + jp * plan.b_panel_size);
        }
        gemm_run(xk, pk, b_pack, a_pack, p, jp0, jp1, 0, m_end);
    }
}

// Whether the node computed just before (params->prev) was a mul_mat that converted the same b
// the same way: its rows are still at the start of the work buffer (the compute writes after
// them), so q, k, v (and gate, up), which llama's graph puts one after the other, convert once.
static std::atomic<long> b_reuses{0};
long ggml_cpu_mul_mat_b_reuses(void) { return b_reuses.load(); }

static bool b_still_converted(const struct ggml_compute_params * params, const ggml_tensor * dst, const MulMatPlan & plan) {
    const ggml_tensor * prev = params->prev;
    if (!prev || prev->op != GGML_OP_MUL_MAT || prev->src[1] != dst->src[1] || !plan.convert_b) return false;
    const MulMatPlan pp = plan_mul_mat(prev);
    return pp.convert_b && pp.conv.from_float == plan.conv.from_float && pp.conv.blck == plan.conv.blck &&
           pp.conv.bsize == plan.conv.bsize && pp.b_row_size == plan.b_row_size;
}

void ggml_cpu_forward_mul_mat(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const MulMatPlan plan = plan_mul_mat(dst);
    GGML_ASSERT(params->wsize >= plan.total(params->nth) && "mul_mat: work buffer too small");
    char * w = align_ptr(params->wdata);
    char * b_conv = w;
    char * b_pack = b_conv + plan.b_conv_size;
    char * a_pack = b_pack + plan.b_pack_size;

    MulMatArgs x = mul_mat_args(dst);
    if (plan.convert_b) {
        x.rb = { b_conv, plan.b_row_size, plan.b_row_size * x.N, plan.b_row_size * x.N * x.B2 };
        if (b_still_converted(params, dst, plan)) {
            if (params->ith == 0) b_reuses++;
        } else {
            int64_t r0, r1;
            ggml_cpu_split_rows(x.N * x.B2 * x.B3, params->ith, params->nth, &r0, &r1);
            convert_b_rows(b, plan.conv, x.rb, r0, r1);
            ggml_cpu_barrier(params);
        }
    }

    if (plan.repacked) {
        GGML_ASSERT(x.M % GGML_REPACK_ROWS == 0 && a->nb[1] == ggml_row_size(a->type, x.K));
        mul_mat_repacked(x, plan.repacked, params);
    } else if (plan.use_gemm) {
        mul_mat_gemm(x, plan, b_pack, a_pack, params);
    } else {
        mul_mat_dot(x, plan.kern, params);
    }
}
