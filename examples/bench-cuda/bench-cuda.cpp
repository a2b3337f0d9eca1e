// bench-cuda.cpp - the CUDA backend's main kernels timed on the shapes of a llama model
// (default: TinyLlama-1.1B, n_embd 2048, n_ff 5632, 32 heads of 64, 4 KV heads):
//  - generation: mul_mat of each weight type with one column (GB/s of weights read: compare
//    with the GPU's memory bandwidth, about 3350 GB/s on an H100 SXM, 4800 on an H200),
//  - prompts: the same with 512 columns (TFLOP/s),
//  - flash attention of one query over a long F16 cache, and of 512 queries; its gradient (training)
//    on tensor cores and on CUDA cores,
//  - training's backward product through a frozen weight (out_prod), F32 and BF16.
// Each graph is computed repeatedly on one backend (CUDA graphs re-launch it after the first
// computes); the time per compute is the mean after warm-up.
//   bench-cuda [-d device] [-n_embd N] [-n_ff N] [-n_kv N] [-r repeats]
#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-cuda.h"

#include <chrono>
#include <math.h>
#include <functional>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>

namespace {

struct Bench {
    ggml_context * ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_cgraph * gf = nullptr;
    ~Bench() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
};

// Fills every tensor of the context with small pseudo-random bytes that are valid for its type
// (quantized blocks get finite scales through a quantized row).
void fill(ggml_context * ctx) {
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->op != GGML_OP_NONE || t->view_src) continue;
        const int64_t n = ggml_nelements(t);
        std::vector<float> v((size_t) t->ne[0]);
        std::vector<uint8_t> row(ggml_row_size(t->type, t->ne[0]));
        uint32_t s = 12345;
        for (int64_t r = 0; r < n / t->ne[0]; r++) {
            for (float & x : v) {
                s = s * 1664525u + 1013904223u;
                x = ((s >> 8) * (1.0f / 16777216.0f) - 0.5f) * 0.1f;
            }
            if (t->type == GGML_TYPE_F32) {
                memcpy(row.data(), v.data(), row.size());
            } else if (t->type == GGML_TYPE_F16) {
                ggml_fp32_to_fp16_row(v.data(), (ggml_fp16_t *) row.data(), t->ne[0]);
            } else {
                ggml_quantize_chunk(t->type, v.data(), row.data(), 0, 1, t->ne[0], nullptr);
            }
            ggml_backend_tensor_set(t, row.data(), (size_t) r * row.size(), row.size());
        }
    }
}

// Mean seconds per compute of the graph whose output is out (set_inputs: after the random fill).
double time_graph(ggml_backend_t be, Bench & b, ggml_tensor * out, int repeats, const std::function<void()> & set_inputs = nullptr) {
    b.gf = ggml_new_graph(b.ctx);
    ggml_build_forward_expand(b.gf, out);
    b.buf = ggml_backend_alloc_ctx_tensors(b.ctx, be);
    if (!b.buf) return -1.0;
    fill(b.ctx);
    if (set_inputs) set_inputs();
    for (int i = 0; i < 3; i++) ggml_backend_graph_compute(be, b.gf);  // warm-up, graph capture
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; i++) ggml_backend_graph_compute_async(be, b.gf);
    ggml_backend_synchronize(be);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / repeats;
}

ggml_context * new_ctx() {
    ggml_init_params ip = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    return ggml_init(ip);
}

}  // namespace

int main(int argc, char ** argv) {
    int device = 0, repeats = 200;
    int64_t n_embd = 2048, n_ff = 5632, n_kv = 4096, head = 64, n_head = 32, n_head_kv = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const long long v = atoll(argv[i + 1]);
        if (a == "-d") device = (int) v;
        else if (a == "-n_embd") n_embd = v;
        else if (a == "-n_ff") n_ff = v;
        else if (a == "-n_kv") n_kv = v;
        else if (a == "-r") repeats = (int) v;
        else { fprintf(stderr, "usage: %s [-d device] [-n_embd N] [-n_ff N] [-n_kv N] [-r repeats]\n", argv[0]); return 1; }
    }
    if (ggml_backend_cuda_get_device_count() <= device) {
        fprintf(stderr, "bench-cuda: no CUDA device %d\n", device);
        return 1;
    }
    char desc[256];
    ggml_backend_cuda_get_device_description(device, desc, sizeof(desc));
    ggml_backend_t be = ggml_backend_cuda_init(device);
    printf("device %d: %s\n\n", device, desc);

    printf("%-6s %14s %10s %10s %12s %10s\n", "type", "matrix", "tg us", "GB/s", "pp512 ms", "TFLOP/s");
    // Every weight type of the type table whose product the device runs (it is asked).
    for (int ti = 0; ti < GGML_TYPE_COUNT; ti++) {
        if (!ggml_type_is_valid(ti) || !ggml_get_type_traits((ggml_type) ti)->weight_target || ti == GGML_TYPE_F32) continue;
        const ggml_type t = (ggml_type) ti;
        {
            Bench b;
            b.ctx = new_ctx();
            ggml_tensor * w = ggml_new_tensor_2d(b.ctx, t, n_embd, n_ff);
            if (!ggml_backend_supports_op(be, ggml_mul_mat(b.ctx, w, ggml_new_tensor_2d(b.ctx, GGML_TYPE_F32, n_embd, 1)))) continue;
        }
        for (int shape = 0; shape < 2; shape++) {
            const int64_t K = shape == 0 ? n_embd : n_ff, M = shape == 0 ? n_ff : n_embd;
            double tg, pp;
            {
                Bench b;
                b.ctx = new_ctx();
                ggml_tensor * w = ggml_new_tensor_2d(b.ctx, t, K, M);
                ggml_tensor * x = ggml_new_tensor_2d(b.ctx, GGML_TYPE_F32, K, 1);
                tg = time_graph(be, b, ggml_mul_mat(b.ctx, w, x), repeats);
            }
            {
                Bench b;
                b.ctx = new_ctx();
                ggml_tensor * w = ggml_new_tensor_2d(b.ctx, t, K, M);
                ggml_tensor * x = ggml_new_tensor_2d(b.ctx, GGML_TYPE_F32, K, 512);
                pp = time_graph(be, b, ggml_mul_mat(b.ctx, w, x), repeats / 10 + 1);
            }
            const double bytes = (double) ggml_row_size(t, K) * M;
            printf("%-6s %6lld x %-6lld %10.1f %10.0f %12.3f %10.1f\n", ggml_type_name(t), (long long) K, (long long) M, tg * 1e6,
                   bytes / tg / 1e9, pp * 1e3, 2.0 * K * M * 512 / pp / 1e12);
        }
    }

    printf("\nflash attention, F16 cache, %lld heads of %lld (%lld KV heads)\n", (long long) n_head, (long long) head, (long long) n_head_kv);
    printf("%8s %8s %12s\n", "n_q", "n_kv", "us");
    for (int64_t n_q : { (int64_t) 1, (int64_t) 512 }) {
        for (int64_t kv : { (int64_t) 512, n_kv }) {
            Bench b;
            b.ctx = new_ctx();
            ggml_tensor * q = ggml_new_tensor_3d(b.ctx, GGML_TYPE_F32, head, n_q, n_head);
            ggml_tensor * k = ggml_new_tensor_3d(b.ctx, GGML_TYPE_F16, head, kv, n_head_kv);
            ggml_tensor * v = ggml_new_tensor_3d(b.ctx, GGML_TYPE_F16, head, kv, n_head_kv);
            const double s = time_graph(be, b, ggml_flash_attn_ext(b.ctx, q, k, v, nullptr, 0.125f, 0.0f, 0.0f), n_q == 1 ? repeats : 10);
            printf("%8lld %8lld %12.1f\n", (long long) n_q, (long long) kv, s * 1e6);
        }
    }

    // training: the gradient of 512 queries over 512 keys (F32 activations, as the training graph
    // has them) beside the forward on the same operands (FlashAttention-2's backward takes about
    // 2.5 times its forward), heads of 64 (TinyLlama) and 128 (7B-class: 32 heads, 8 KV heads),
    // on tensor cores and (a second backend, GGML_CUDA_DISABLE_MMA_FA=1) on CUDA cores; TFLOP/s
    // of the backward's five products (S, dP, dQ, dK, dV: 2.5 times the forward's two), without a
    // mask and with training's causal one (whose hidden tiles are skipped)
    setenv("GGML_CUDA_DISABLE_MMA_FA", "1", 1);
    ggml_backend_t be_cores = ggml_backend_cuda_init(device);
    unsetenv("GGML_CUDA_DISABLE_MMA_FA");
    printf("\nflash attention gradient, F32, 512 x 512\n");
    printf("%-22s %-7s %-8s %12s %12s %8s %10s\n", "heads", "mask", "kernel", "forward us", "backward us", "ratio", "TFLOP/s");
    std::vector<float> causal(512 * 512);
    for (int i = 0; i < 512; i++) {
        for (int j = 0; j < 512; j++) causal[(size_t) i * 512 + j] = j <= i ? 0.0f : -INFINITY;
    }
    for (int64_t hd : { head, (int64_t) 128 }) {
        const int64_t nh = hd == head ? n_head : 32, nkv = hd == head ? n_head_kv : 8;
        for (int masked = 0; masked < 2; masked++) {
            for (int cores = 0; cores < 2; cores++) {
                ggml_backend_t bk = cores ? be_cores : be;
                double fwd = 0.0, bwd = 0.0;
                for (int pass = 0; pass < 2; pass++) {
                    Bench b;
                    b.ctx = new_ctx();
                    ggml_tensor * q = ggml_new_tensor_3d(b.ctx, GGML_TYPE_F32, hd, 512, nh);
                    ggml_tensor * k = ggml_new_tensor_3d(b.ctx, GGML_TYPE_F32, hd, 512, nkv);
                    ggml_tensor * v = ggml_new_tensor_3d(b.ctx, GGML_TYPE_F32, hd, 512, nkv);
                    ggml_tensor * dO = ggml_new_tensor_3d(b.ctx, GGML_TYPE_F32, hd, nh, 512);
                    ggml_tensor * mask = masked ? ggml_new_tensor_2d(b.ctx, GGML_TYPE_F32, 512, 512) : nullptr;
                    ggml_tensor * out = pass == 0 ? ggml_flash_attn_ext(b.ctx, q, k, v, mask, 0.125f, 0.0f, 0.0f)
                                                  : ggml_flash_attn_back(b.ctx, q, k, v, mask, dO, 0.125f, 0.0f, 0.0f);
                    (pass == 0 ? fwd : bwd) = time_graph(bk, b, out, 10, [&] {
                        if (mask) ggml_backend_tensor_set(mask, causal.data(), 0, ggml_nbytes(mask));
                    });
                }
                char what[64];
                snprintf(what, sizeof(what), "%lld of %lld (%lld KV)", (long long) nh, (long long) hd, (long long) nkv);
                const double flops = 5.0 * 2.0 * 512 * (masked ? 256.5 : 512.0) * hd * nh;  // causal: the seen half
                printf("%-22s %-7s %-8s %12.1f %12.1f %8.2f %10.1f\n", what, masked ? "causal" : "none", cores ? "cores" : "tensor", fwd * 1e6,
                       bwd * 1e6, bwd / fwd, flops / bwd / 1e12);
            }
        }
    }
    ggml_backend_free(be_cores);

    // training: the gradient through a frozen weight (dX = W dY, out_prod) of 512 tokens, in F32
    // and with GGML_PREC_BF16 (llama-finetune's default on a GPU), beside the
    // forward product of the same weight (TFLOP/s: 2 K M 512 flops)
    printf("\nbackward product through a frozen weight, 512 tokens (TFLOP/s)\n");
    printf("%-6s %14s %10s %10s %10s\n", "type", "matrix", "forward", "bwd f32", "bwd bf16");
    for (ggml_type t : { GGML_TYPE_Q4_0, GGML_TYPE_F16 }) {
        const int64_t K = n_embd, M = n_ff;  // the weight: K inputs, M outputs
        double sec[3];
        for (int pass = 0; pass < 3; pass++) {
            Bench b;
            b.ctx = new_ctx();
            ggml_tensor * w = ggml_new_tensor_2d(b.ctx, t, K, M);
            ggml_tensor * out;
            if (pass == 0) {
                out = ggml_mul_mat(b.ctx, w, ggml_new_tensor_2d(b.ctx, GGML_TYPE_F32, K, 512));
            } else {  // as autodiff builds it: dY [M, 512] transposed
                ggml_tensor * dy = ggml_new_tensor_2d(b.ctx, GGML_TYPE_F32, M, 512);
                out = ggml_out_prod(b.ctx, w, ggml_transpose(b.ctx, dy));
                if (pass == 2) ggml_out_prod_set_prec(out, GGML_PREC_BF16);
            }
            sec[pass] = time_graph(be, b, out, repeats / 10 + 1);
        }
        const double flops = 2.0 * K * M * 512;
        printf("%-6s %6lld x %-6lld %10.1f %10.1f %10.1f\n", ggml_type_name(t), (long long) K, (long long) M, flops / sec[0] / 1e12,
               flops / sec[1] / 1e12, flops / sec[2] / 1e12);
    }
    ggml_backend_free(be);
    return 0;
}
