// cuda-emu.cpp - the coroutine scheduler of cuda-emu.h, and the CUDA runtime and cuBLAS calls the
// kernel files make, on host memory.
#include "cuda-emu.h"

#include "ggml.h"

#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace emu {

uint3 g_tid, g_bid;
dim3 g_bdim, g_gdim;

namespace {

enum State { RUN, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };

constexpr size_t kStack = 128 * 1024;
// Dynamic shared memory of a block: 48 KiB unless the kernel opted in; sm_90's most with the opt-in.
constexpr size_t kSmemDefaultMax = 48 * 1024, kSmemOptInMax = 227 * 1024;

// A coroutine's saved context. On x86-64 a switch saves the callee-saved registers on the stack
// and swaps stack pointers (swapcontext also saves the signal mask: a system call per switch,
// most of the emulator's time); elsewhere, ucontext.
#if defined(__x86_64__)
extern "C" void cuda_emu_switch(void ** save_sp, void * load_sp);
asm(R"(
    .text
    .globl cuda_emu_switch
    .type cuda_emu_switch, @function
cuda_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuda_emu_switch, .-cuda_emu_switch
)");

struct Context {
    void * sp = nullptr;
};

// The first switch to c enters entry on the stack [stack, stack + size) (entry never returns).
void context_init(Context & c, char * stack, size_t size, void (*entry)()) {
    uintptr_t top = ((uintptr_t) stack + size) & ~(uintptr_t) 15;
    void ** sp = (void **) top;
    *--sp = nullptr;          // entry's return address slot: entry starts with rsp = 8 mod 16, as after a call
    *--sp = (void *) entry;   // popped by ret
    for (int i = 0; i < 6; i++) *--sp = nullptr;  // rbp, rbx, r12..r15
    c.sp = sp;
}

void context_swap(Context & from, Context & to) { cuda_emu_switch(&from.sp, to.sp); }
#else
struct Context {
    ucontext_t uc;
};

void context_init(Context & c, char * stack, size_t size, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}

void context_swap(Context & from, Context & to) { swapcontext(&from.uc, &to.uc); }
#endif

struct Thread {
    Context ctx;
    State state;
};

std::vector<Thread> threads;
std::vector<char *> stacks;
std::vector<uint64_t> slots;
std::vector<char> smem_buf;
Context main_ctx;
int cur = -1;
const std::function<void()> * body = nullptr;

void trampoline() {
    (*body)();
    threads[cur].state = DONE;
    context_swap(threads[cur].ctx, main_ctx);
}

void yield(State s) {
    threads[cur].state = s;
    context_swap(threads[cur].ctx, main_ctx);
}

}  // namespace

void sync_block() { yield(AT_BLOCK_BARRIER); }
// Each thread's vote carries its count of calls: a thread that exited (or is at another call)
// does not count.
struct Vote {
    uint64_t call = 0;
    int pred = 0;
};
std::vector<Vote> votes;

int sync_block_or(int pred) {
    Vote & v = votes[cur];
    v.call++;
    v.pred = pred != 0;
    sync_block();
    int any = 0;
    for (const Vote & o : votes) any |= o.call == v.call && o.pred;
    sync_block();  // every vote read before a thread's next call overwrites its own
    return any;
}

void sync_warp() { yield(AT_WARP_BARRIER); }

namespace {
std::vector<uint32_t> mma_frags;  // per thread: A's four registers, then B's two

float half_bits_to_f32(uint32_t reg, int k, bool bf16) {
    const uint16_t h = (uint16_t) (reg >> (16 * (k & 1)));
    if (bf16) {
        const uint32_t u = (uint32_t) h << 16;
        float f;
        memcpy(&f, &u, sizeof(f));
        return f;
    }
    return ggml_fp16_to_fp32(h);
}
}  // namespace

void mma_16x8x16(float d[4], const uint32_t a[4], const uint32_t b[2], bool bf16) {
    if (mma_frags.size() < threads.size() * 6) mma_frags.resize(threads.size() * 6);
    uint32_t * mine = mma_frags.data() + (size_t) cur * 6;
    for (int r = 0; r < 4; r++) mine[r] = a[r];
    mine[4] = b[0];
    mine[5] = b[1];
    sync_warp();
    // PTX's m16n8k16 layout: A[m][k] in lane 4 (m % 8) + (k % 8) / 2, register (m >= 8) + 2 (k >= 8);
    // B[k][n] in lane 4 n + (k % 8) / 2, register k >= 8; the lower half holds the even k
    const uint32_t * warp = mma_frags.data() + (size_t) (cur / 32 * 32) * 6;
    const int lane = cur % 32, g = lane >> 2, t = lane & 3;
    for (int k = 0; k < 16; k++) {
        const int src = (k & 7) >> 1, hi = k >> 3;
        const float a0 = half_bits_to_f32(warp[(4 * g + src) * 6 + 2 * hi], k, bf16);
        const float a1 = half_bits_to_f32(warp[(4 * g + src) * 6 + 2 * hi + 1], k, bf16);
        const float b0 = half_bits_to_f32(warp[(4 * (2 * t) + src) * 6 + 4 + hi], k, bf16);
        const float b1 = half_bits_to_f32(warp[(4 * (2 * t + 1) + src) * 6 + 4 + hi], k, bf16);
        d[0] += a0 * b0;
        d[1] += a0 * b1;
        d[2] += a1 * b0;
        d[3] += a1 * b1;
    }
    sync_warp();  // every lane has read before one leaves new fragments
}
void * dyn_smem() { return smem_buf.data(); }
int lane() { return cur % 32; }
uint64_t & slot(int l) { return slots[(cur / 32) * 32 + l]; }

uint64_t g_launches = 0;

namespace {

// CUDA_EMU_SCHEDULE: the order in which the blocks run, and the threads of a block between
// barriers. "forward"
// (default) runs them by index; "reverse" and "shuffle" (a fresh permutation each round) make a
// missing barrier visible: a thread then reads shared memory before another wrote it (or after
// it overwrote it), where in index order the writes happened to come first. Both also fill each
// block's shared memory with 0xff bytes (NaN floats) first, as a GPU leaves it undefined.
enum class Schedule { FORWARD, REVERSE, SHUFFLE };

Schedule schedule() {
    static const Schedule s = [] {
        const char * v = getenv("CUDA_EMU_SCHEDULE");
        if (!v || !*v || strcmp(v, "forward") == 0) return Schedule::FORWARD;
        if (strcmp(v, "reverse") == 0) return Schedule::REVERSE;
        if (strcmp(v, "shuffle") == 0) return Schedule::SHUFFLE;
        fprintf(stderr, "cuda-emu: CUDA_EMU_SCHEDULE=%s: expected forward, reverse or shuffle\n", v);
        abort();
    }();
    return s;
}

}  // namespace

bool scrambled() { return schedule() != Schedule::FORWARD; }

namespace {
std::map<const void *, size_t> smem_opted;  // kernel -> the dynamic shared memory it asked for
}  // namespace

void smem_opt_in(const void * kernel, size_t bytes) {
    if (bytes > kSmemOptInMax) {
        fprintf(stderr, "cuda-emu: a kernel asks for %zu bytes of dynamic shared memory (a GPU has at most %zu)\n", bytes, kSmemOptInMax);
        abort();
    }
    smem_opted[kernel] = bytes;
}

void run(dim3 grid, dim3 block, size_t smem, const std::function<void()> & fn, const void * kernel) {
    g_launches++;
    const auto opted = smem_opted.find(kernel);
    const size_t smem_max = opted == smem_opted.end() ? kSmemDefaultMax : std::max(kSmemDefaultMax, opted->second);
    if (smem > smem_max) {
        fprintf(stderr, "cuda-emu: a launch with %zu bytes of dynamic shared memory, past the %zu its kernel may use%s\n", smem, smem_max,
                opted == smem_opted.end() ? " (no GGML_CUDA_SMEM_OPT_IN)" : "");
        abort();
    }
    const int n = (int) (block.x * block.y * block.z);
    if (block.y != 1 || block.z != 1 || n % 32 != 0) {
        fprintf(stderr, "cuda-emu: blocks are 1-D multiples of 32 threads here (%u x %u x %u)\n", block.x, block.y, block.z);
        abort();
    }
    while ((int) stacks.size() < n) stacks.push_back((char *) malloc(kStack));
    threads.resize(n);
    slots.assign(n, 0);
    smem_buf.assign(smem + 16, 0);
    g_gdim = grid;
    g_bdim = block;
    body = &fn;
    const Schedule order_kind = schedule();
    std::vector<int> order(n);
    for (int t = 0; t < n; t++) order[t] = order_kind == Schedule::REVERSE ? n - 1 - t : t;
    std::mt19937 rng((uint32_t) g_launches);
    // the blocks: in index order, reversed, or shuffled (blocks run one after another: a kernel's
    // blocks may not wait for each other, and their results may not depend on their order)
    const uint64_t n_blocks = (uint64_t) grid.x * grid.y * grid.z;
    std::vector<uint64_t> block_order;
    if (order_kind == Schedule::SHUFFLE) {
        block_order.resize(n_blocks);
        for (uint64_t i = 0; i < n_blocks; i++) block_order[i] = i;
        std::shuffle(block_order.begin(), block_order.end(), rng);
    }
    for (uint64_t ib = 0; ib < n_blocks; ib++) {
        const uint64_t i = order_kind == Schedule::SHUFFLE ? block_order[ib] : order_kind == Schedule::REVERSE ? n_blocks - 1 - ib : ib;
        const unsigned bx = (unsigned) (i % grid.x), by = (unsigned) (i / grid.x % grid.y), bz = (unsigned) (i / ((uint64_t) grid.x * grid.y));
        g_bid = make_uint3(bx, by, bz);
        votes.assign(n, Vote());
        if (order_kind != Schedule::FORWARD) std::fill(smem_buf.begin(), smem_buf.end(), (char) 0xff);
        for (int t = 0; t < n; t++) {
            Thread & th = threads[t];
            context_init(th.ctx, stacks[t], kStack, trampoline);
            th.state = RUN;
        }
        for (;;) {
            if (order_kind == Schedule::SHUFFLE) std::shuffle(order.begin(), order.end(), rng);
            for (int k = 0; k < n; k++) {
                const int t = order[k];
                if (threads[t].state != RUN) continue;
                cur = t;
                g_tid = make_uint3((unsigned) t, 0, 0);
                context_swap(main_ctx, threads[t].ctx);
            }
            // everyone is at a barrier or done: release a warp whose live lanes all reached
            // its barrier, else the block if every live thread reached __syncthreads
            bool released = false, any_live = false, all_block = true;
            for (int w = 0; w < n / 32; w++) {
                bool live = false, all_warp = true;
                for (int l = 0; l < 32; l++) {
                    const State s = threads[w * 32 + l].state;
                    if (s == DONE) continue;
                    live = true;
                    if (s != AT_WARP_BARRIER) all_warp = false;
                    if (s != AT_BLOCK_BARRIER) all_block = false;
                }
                any_live = any_live || live;
                if (live && all_warp) {
                    for (int l = 0; l < 32; l++) {
                        if (threads[w * 32 + l].state == AT_WARP_BARRIER) threads[w * 32 + l].state = RUN;
                    }
                    released = true;
                }
            }
            if (!any_live) break;
            if (released) continue;
            if (all_block) {
                for (Thread & th : threads) {
                    if (th.state == AT_BLOCK_BARRIER) th.state = RUN;
                }
                continue;
            }
            fprintf(stderr, "cuda-emu: deadlock in block (%u, %u, %u): threads wait at different barriers\n", bx, by, bz);
            abort();
        }
    }
    body = nullptr;
}

}  // namespace emu

// ---- the runtime calls of the kernel files, on host memory ----------------------------------
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char * cudaGetErrorName(cudaError_t) { return "cudaEmu"; }
const char * cudaGetErrorString(cudaError_t) { return "(host emulation)"; }

cudaError_t cudaMemcpyAsync(void * dst, const void * src, size_t count, cudaMemcpyKind, cudaStream_t) {
    emu::g_launches++;
    memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void * p, int value, size_t count, cudaStream_t) {
    emu::g_launches++;
    memset(p, value, count);
    return cudaSuccess;
}

// ---- cuBLAS: the three GEMMs, column-major, in double ----------------------------------------
namespace {

double elem(const void * p, cudaDataType t, int64_t i) {
    switch (t) {
        case CUDA_R_16F: return (double) __half2float(((const __half *) p)[i]);
        case CUDA_R_16BF: return (double) __bfloat162float(((const __nv_bfloat16 *) p)[i]);
        case CUDA_R_32F: return (double) ((const float *) p)[i];
        default: fprintf(stderr, "cuda-emu: GEMM type %d\n", (int) t); abort();
    }
}

// C (m x n, ldc) = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n.
void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void * A, cudaDataType at, int lda,
          const void * B, cudaDataType bt, int ldb, float beta, float * C, int ldc) {
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int l = 0; l < k; l++) {
                const double a = ta == CUBLAS_OP_N ? elem(A, at, i + (int64_t) l * lda) : elem(A, at, l + (int64_t) i * lda);
                const double b = tb == CUBLAS_OP_N ? elem(B, bt, l + (int64_t) j * ldb) : elem(B, bt, j + (int64_t) l * ldb);
                s += a * b;
            }
            float & c = C[i + (int64_t) j * ldc];
            c = (float) (alpha * s + (beta != 0.0f ? beta * c : 0.0));
        }
    }
}

size_t type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

// cuBLAS's argument rules: what the real library refuses with CUBLAS_STATUS_INVALID_VALUE
// (the backend would abort there), and the type combinations it computes in F32.
bool valid(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc, cudaDataType at,
           cudaDataType bt, cudaDataType ct, cublasComputeType_t compute) {
    const auto at_least = [](int ld, int rows) { return ld >= (rows > 1 ? rows : 1); };
    if (m < 0 || n < 0 || k < 0) return false;
    if (!at_least(lda, ta == CUBLAS_OP_N ? m : k) || !at_least(ldb, tb == CUBLAS_OP_N ? k : n) || !at_least(ldc, m)) return false;
    if (ct != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F || at != bt) return false;
    return at == CUDA_R_32F || at == CUDA_R_16F || at == CUDA_R_16BF;
}

}  // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void * alpha, const void * A, cudaDataType Atype, int lda, const void * B, cudaDataType Btype,
                            int ldb, const void * beta, void * C, cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
    emu::g_launches++;
    if (!valid(transa, transb, m, n, k, lda, ldb, ldc, Atype, Btype, Ctype, compute)) return CUBLAS_STATUS_INVALID_VALUE;
    gemm(transa, transb, m, n, k, *(const float *) alpha, A, Atype, lda, B, Btype, ldb, *(const float *) beta, (float *) C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                                          const void * alpha, const void * A, cudaDataType Atype, int lda, long long int strideA,
                                          const void * B, cudaDataType Btype, int ldb, long long int strideB, const void * beta,
                                          void * C, cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
    emu::g_launches++;
    if (!valid(transa, transb, m, n, k, lda, ldb, ldc, Atype, Btype, Ctype, compute) || batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
    for (int b = 0; b < batchCount; b++) {
        gemm(transa, transb, m, n, k, *(const float *) alpha, (const char *) A + b * strideA * type_size(Atype), Atype, lda,
             (const char *) B + b * strideB * type_size(Btype), Btype, ldb, *(const float *) beta, (float *) C + b * strideC, ldc);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmBatchedEx(cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                                   const void * alpha, const void * const Aarray[], cudaDataType Atype, int lda,
                                   const void * const Barray[], cudaDataType Btype, int ldb, const void * beta, void * const Carray[],
                                   cudaDataType Ctype, int ldc, int batchCount, cublasComputeType_t compute, cublasGemmAlgo_t) {
    emu::g_launches++;
    if (!valid(transa, transb, m, n, k, lda, ldb, ldc, Atype, Btype, Ctype, compute) || batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
    for (int b = 0; b < batchCount; b++) {
        gemm(transa, transb, m, n, k, *(const float *) alpha, Aarray[b], Atype, lda, Barray[b], Btype, ldb, *(const float *) beta,
             (float *) Carray[b], ldc);
    }
    return CUBLAS_STATUS_SUCCESS;
}
