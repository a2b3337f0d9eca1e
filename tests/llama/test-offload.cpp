// test-offload.cpp - layer offload (n_gpu_layers) through the backend interface, on the simulated
// GPU of fake-gpu.h: the offloaded layers' weights and KV cache live in its buffers (addresses
// the CPU cannot read), the scheduler splits each graph between it and the CPU, and the logits
// must be those of the CPU alone.
//
// Built a second time as test-offload-cuda-emu (OFFLOAD_CUDA_EMU): the simulated GPU then runs
// the CUDA backend's kernels, emulated on the host (tests/cuda/cuda-emu.h), and claims only the
// ops they support, so every test here also checks the CUDA kernels under the runtime's graphs.
#include <gtest/gtest.h>

#include "fake-gpu.h"
#include "test-llama.h"
#include "tiny-models.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"
#include "llama.h"
#include "llama-adapter.h"
#include "llama-context.h"
#include "llama-graph.h"
#include "llama-model.h"

#ifdef OFFLOAD_CUDA_EMU
#include "cuda-emu-graph.h"
constexpr bool kCudaEmu = true;  // the simulated GPU runs the CUDA kernels
#else
constexpr bool kCudaEmu = false;
#endif

#include <algorithm>
#include <cstring>
#include <unistd.h>
#include <map>
#include <random>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace {

using Model = tu::UniqueModel;
using Ctx = tu::UniqueCtx;

std::string model_path(const char * name) { return tu::models_dir() + "/" + name; }

// A copy of a model file with every quantized tensor dequantized to F32 (the exact result of the
// quantized weights, without the quantized activations of either backend's products); "" on failure.
std::string dequantized_copy(const std::string & src) {
    const std::string dst = testing::TempDir() + "test-offload-" + std::to_string((long) getpid()) + "-f32.gguf";
    return tu::write_dequantized(src, dst) ? dst : "";
}

Model load(const std::string & path, int n_gpu_layers, bool use_mmap = true) {
    llama_model_params p = llama_model_default_params();
    p.n_gpu_layers = n_gpu_layers;
    p.use_mmap = use_mmap;
    return Model(llama_model_load_from_file(path.c_str(), p));
}

Ctx context(llama_model * m, bool offload_kqv = true, bool flash_attn = false, ggml_type cache_type = GGML_TYPE_F16) {
    llama_context_params p = llama_context_default_params();
    p.type_k = p.type_v = cache_type;
    p.n_ctx = 128;
    p.n_batch = 128;
    p.n_ubatch = 32;
    p.n_threads = 2;
    p.n_threads_batch = 2;
    p.offload_kqv = offload_kqv;
    p.flash_attn = flash_attn;
    return Ctx(llama_init_from_model(m, p));
}

// A prompt, then single-token decodes (the generation path), logits of every step; a removal
// from the middle of the cache (compaction of device memory through the host) and more decodes.
std::vector<float> run(llama_context * ctx) {
    std::vector<float> out;
    const std::vector<llama_token> prompt = { 1, 40, 99, 7, 300, 12, 5, 77, 250, 31, 8, 64, 400, 3, 90, 17, 201, 33, 6, 11 };
    std::vector<float> a = tu::eval_all(ctx, prompt);
    out.insert(out.end(), a.begin(), a.end());
    llama_pos p = (llama_pos) prompt.size();
    for (llama_token t : { 14, 250, 3, 77 }) {
        std::vector<float> b = tu::eval_all(ctx, { t }, p++);
        out.insert(out.end(), b.begin(), b.end());
    }
    EXPECT_TRUE(llama_kv_self_seq_rm(ctx, 0, 5, 9));
    for (llama_token t : { 9, 120 }) {
        std::vector<float> b = tu::eval_all(ctx, { t }, p++);
        out.insert(out.end(), b.begin(), b.end());
    }
    return out;
}

// run()'s logits of a quantized model's weights dequantized to F32, on the CPU.
std::vector<float> exact_logits(const std::string & path, bool flash_attn) {
    const std::string f32 = dequantized_copy(path);
    EXPECT_FALSE(f32.empty()) << "could not write a dequantized copy of " << path;
    if (f32.empty()) return {};
    Model m = load(f32, 0);
    unlink(f32.c_str());
    EXPECT_TRUE(m) << tu::take_errors();
    if (!m) return {};
    Ctx c = context(m.get(), true, flash_attn);
    return run(c.get());
}

// F32 weights: the same kernels, rounding only (max_rel, relative to the largest logit).
// Quantized weights: the device's are not repacked, and the CPU's plain and repacked products
// of Q8_0 differ a little (as tests/llama/test-model.cpp's "mapped, not repacked" variant shows):
// mean KL below max_kl and the same top token everywhere.
void expect_same_logits(const std::vector<float> & got, const std::vector<float> & ref, double tol, int32_t n_vocab = 0,
                        double max_kl = 0.0) {
    ASSERT_EQ(got.size(), ref.size());
    if (n_vocab > 0) {
        const int32_t n_rows = (int32_t) (ref.size() / (size_t) n_vocab);
        EXPECT_LT(tu::mean_kl(ref.data(), got.data(), n_rows, n_vocab), max_kl);
        for (int32_t r = 0; r < n_rows; r++) {
            const float * a = ref.data() + (size_t) r * n_vocab;
            const float * b = got.data() + (size_t) r * n_vocab;
            EXPECT_EQ(std::max_element(a, a + n_vocab) - a, std::max_element(b, b + n_vocab) - b) << "row " << r;
        }
        return;
    }
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < ref.size(); i++) {
        ASSERT_TRUE(std::isfinite(got[i])) << "logit " << i;
        max_diff = std::max(max_diff, (double) std::fabs(got[i] - ref[i]));
        max_ref = std::max(max_ref, (double) std::fabs(ref[i]));
    }
    EXPECT_LE(max_diff, tol * std::max(1.0, max_ref)) << "largest logit " << max_ref;
}

// A quantized model's logits on the device. On the simulated GPU its products are the CPU's
// (KL below 1e-5 from the CPU alone). The CUDA kernels quantize the activations differently from
// the CPU (F16 for prompts, Q8_1 for generation, against the CPU's Q8_0): both are held to the
// exact result, the CPU on the weights dequantized to F32 (exact), the device no further from it
// than the CPU itself (mean KL) and within the 1e-3 of the CPU.
void expect_device_logits(const std::vector<float> & got, const std::vector<float> & cpu, const std::vector<float> & exact,
                          int32_t n_vocab, double factor = 1.1) {
    if (!kCudaEmu) {
        expect_same_logits(got, cpu, 1e-4, n_vocab, 1e-5);
        return;
    }
    ASSERT_EQ(got.size(), exact.size());
    const int64_t n_rows = (int64_t) (exact.size() / (size_t) n_vocab);
    const double kl_dev = tu::mean_kl(exact.data(), got.data(), n_rows, n_vocab);
    const double kl_cpu = tu::mean_kl(exact.data(), cpu.data(), n_rows, n_vocab);
    EXPECT_LE(kl_dev, factor * kl_cpu + 1e-5) << "the device is further from the exact logits than the CPU";
    EXPECT_LT(tu::mean_kl(cpu.data(), got.data(), n_rows, n_vocab), 1e-3);
}

class Offload : public testing::Test {
protected:
    void SetUp() override {
        ggml_backend_device_register(fake_gpu::device());
#ifdef OFFLOAD_CUDA_EMU
        fake_gpu::set_kernels([](ggml_cgraph * g) { return emu::compute_graph(emu::cuda_ctx(), g); }, emu::supports_op);
#endif
        fake_gpu::set_supports(nullptr);
        fake_gpu::ran().clear();
    }
    void TearDown() override { fake_gpu::set_supports(nullptr); }
};

int count(ggml_op op) { return (int) std::count(fake_gpu::ran().begin(), fake_gpu::ran().end(), op); }

// A model run with flash attention and n_gpu_layers on the device gives the CPU's logits (or,
// with the emulated CUDA kernels, logits as close to the exact ones), and the attention ran there.
void expect_flash_attn_on_device(const std::string & path, int32_t n_gpu_layers, bool use_mmap) {
    Model cpu_model = load(path, 0, use_mmap);
    ASSERT_TRUE(cpu_model);
    Ctx cpu_ctx = context(cpu_model.get(), true, true);
    ASSERT_TRUE(cpu_ctx);
    const std::vector<float> ref = run(cpu_ctx.get());
    const std::vector<float> exact = kCudaEmu ? exact_logits(path, true) : std::vector<float>();
    Model m = load(path, n_gpu_layers, use_mmap);
    ASSERT_TRUE(m);
    Ctx c = context(m.get(), true, true);
    ASSERT_TRUE(c);
    const std::vector<float> got = run(c.get());
    expect_device_logits(got, ref, exact, tu::n_vocab_of(m.get()));
    EXPECT_GT(count(GGML_OP_FLASH_ATTN_EXT), 0);
}

// Three sequences interleaved in one batch and then generated together, everything on the device
// (the cache too), with and without flash attention: the device's logits are the CPU's (with
// the emulated CUDA kernels: as near to them as test-offload's other checks allow).
TEST_F(Offload, InterleavedSequencesOnTheDevice) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    auto run_seqs = [](llama_model * m, bool fa) {
        llama_context_params p = llama_context_default_params();
        p.n_ctx = 128;
        p.n_batch = 128;
        p.n_ubatch = 16;
        p.n_seq_max = 3;
        p.n_threads = p.n_threads_batch = 2;
        p.flash_attn = fa;
        Ctx c(llama_init_from_model(m, p));
        std::vector<float> out;
        if (!c) return out;
        const int32_t n_vocab = tu::n_vocab_of(m);
        llama_batch b = llama_batch_init(64, 0, 1);
        const int lens[3] = { 11, 6, 15 };
        for (int i = 0; i < 15; i++) {
            for (int s = 0; s < 3; s++) {
                if (i >= lens[s]) continue;
                const int32_t j = b.n_tokens++;
                b.token[j] = 1 + (i * 37 + s * 101) % (n_vocab - 1);
                b.pos[j] = i;
                b.n_seq_id[j] = 1;
                b.seq_id[j][0] = s;
                b.logits[j] = 1;
            }
        }
        for (int step = 0; step <= 4; step++) {
            if (llama_decode(c.get(), b) != 0) return std::vector<float>();
            for (int32_t j = 0; j < b.n_tokens; j++) {
                const float * r = llama_get_logits_ith(c.get(), j);
                out.insert(out.end(), r, r + n_vocab);
            }
            b.n_tokens = 0;
            for (int s = 0; s < 3; s++) {
                const int32_t j = b.n_tokens++;
                b.token[j] = 3 + (step * 13 + s * 7) % (n_vocab - 3);
                b.pos[j] = lens[s] + step;
                b.n_seq_id[j] = 1;
                b.seq_id[j][0] = s;
                b.logits[j] = 1;
            }
        }
        llama_batch_free(b);
        return out;
    };
    Model cpu_model = load(model_path("stories260K.gguf"), 0);
    Model dev_model = load(model_path("stories260K.gguf"), 999);
    ASSERT_TRUE(cpu_model && dev_model);
    for (bool fa : { false, true }) {
        SCOPED_TRACE(fa ? "flash attention" : "soft_max path");
        const std::vector<float> ref = run_seqs(cpu_model.get(), fa);
        fake_gpu::ran().clear();
        const std::vector<float> got = run_seqs(dev_model.get(), fa);
        ASSERT_FALSE(ref.empty());
        expect_same_logits(got, ref, 1e-4);
        EXPECT_GT(count(fa ? GGML_OP_FLASH_ATTN_EXT : GGML_OP_SOFT_MAX), 0) << "attention did not run on the device";
    }
}

TEST_F(Offload, DeviceIsListedBeforeTheCpu) {
    const size_t n = ggml_backend_dev_count();
    ASSERT_GE(n, 2u);
    EXPECT_EQ(ggml_backend_dev_type(ggml_backend_dev_get(n - 1)), GGML_BACKEND_DEVICE_TYPE_CPU);
    EXPECT_EQ(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU), fake_gpu::device());
    EXPECT_TRUE(llama_supports_gpu_offload());
}

// Each model at 0 offloaded layers (the reference: nothing may run on the device), some layers,
// and every layer plus the output layer, with the cache on the device or in host memory.
// With layers on the GPU, the CPU's compute buffer and the logits lie in the GPU's host memory
// (page-locked on a real one: copies by DMA), as llama.cpp places them; on the CPU alone, plain.
TEST_F(Offload, CpuBuffersInTheGpusHostMemory) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    std::vector<float> ref;
    for (int ngl : { 0, 999 }) {
        SCOPED_TRACE("n_gpu_layers " + std::to_string(ngl));
        Model m = load(model_path("stories260K.gguf"), ngl);
        ASSERT_TRUE(m);
        Ctx c = context(m.get());
        ASSERT_TRUE(c);
        const char * want = ngl ? "FAKE_Host" : ggml_backend_buft_name(ggml_backend_cpu_buffer_type());
        EXPECT_STREQ(ggml_backend_buft_name(ggml_backend_sched_get_buffer_type(c->sched, c->backend_cpu)), want);
        EXPECT_STREQ(c->logits.buft ? ggml_backend_buft_name(c->logits.buft) : "plain", ngl ? "FAKE_Host" : "plain");
        const std::vector<float> logits = tu::eval_all(c.get(), { 1, 403, 407, 261, 378 });
        ASSERT_FALSE(logits.empty());
        if (ref.empty()) {
            ref = logits;
        } else {
            ASSERT_EQ(logits.size(), ref.size());
            for (size_t i = 0; i < ref.size(); i++) ASSERT_NEAR(logits[i], ref[i], 1e-3f) << i;
        }
    }
}

TEST_F(Offload, LogitsEqualTheCpuAlone) {
    for (const char * name : { "stories260K.gguf", "TinyStories-656K-Q8_0.gguf" }) {
        SCOPED_TRACE(name);
        const bool quantized = std::string(name).find("Q8_0") != std::string::npos;
        TU_REQUIRE_FILE(model_path(name));
        fake_gpu::ran().clear();
        Model cpu_model = load(model_path(name), 0);
        ASSERT_TRUE(cpu_model) << tu::take_errors();
        Ctx cpu_ctx = context(cpu_model.get());
        ASSERT_TRUE(cpu_ctx);
        const std::vector<float> ref = run(cpu_ctx.get());
        EXPECT_EQ(fake_gpu::ran().size(), 0u) << "n_gpu_layers 0 ran ops on the device";
        std::vector<float> exact;
        if (kCudaEmu && quantized) exact = exact_logits(model_path(name), false);
        const int n_layer = llama_model_n_layer(cpu_model.get());
        std::vector<std::pair<int, bool>> runs;  // n_gpu_layers, KV cache on the device
        for (int ngl : { 1, n_layer, 999 }) {
            for (bool kv_on_device : { true, false }) runs.push_back({ ngl, kv_on_device });
        }
        for (const auto & r : runs) {
            const int ngl = r.first;
            const bool kv_on_device = r.second;
            SCOPED_TRACE("n_gpu_layers " + std::to_string(ngl) + (kv_on_device ? ", KV on the device" : ", KV in host memory"));
            fake_gpu::ran().clear();
            Model m = load(model_path(name), ngl);
            ASSERT_TRUE(m) << tu::take_errors();
            Ctx c = context(m.get(), kv_on_device);
            ASSERT_TRUE(c) << tu::take_errors();
            const std::vector<float> got = run(c.get());
            if (quantized) {
                // (a mixture's tokens near a tie between experts go either way with either
                // rounding: the bound is looser)
                expect_device_logits(got, ref, exact, tu::n_vocab_of(m.get()), 1.5);
            } else {
                expect_same_logits(got, ref, 1e-4);
            }
            EXPECT_GT(count(GGML_OP_MUL_MAT), 0) << "no product ran on the device";
        }
    }
}

// Every family's tiny model (tests/common/tiny-models.h) with all layers on the device: sliding
// windows and soft-caps, fused projections, per-head norms, and the mixtures of experts (the
// router's argsort and the experts' products on the device, F32 and Q8_0 experts).
TEST_F(Offload, EveryFamilyOnTheDevice) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    for (const tiny::spec & s : tiny::specs()) {
        if (llm_arch_get(s.arch).encoder) continue;  // no logits to compare (test-arch: its embeddings)
        std::vector<ggml_type> types = { GGML_TYPE_F32 };
        if (s.n_expert) types.push_back(GGML_TYPE_Q8_0);
        for (ggml_type wtype : types) {
            SCOPED_TRACE(s.name + " " + ggml_type_name(wtype));
            tu::TempFile file("offload-" + s.name + ".gguf");
            ASSERT_TRUE(tiny::write(s, file.path, model_path("stories260K.gguf"), wtype));
            Model cpu_model = load(file.path, 0);
            ASSERT_TRUE(cpu_model) << tu::take_errors();
            Ctx cpu_ctx = context(cpu_model.get(), true, false, GGML_TYPE_F32);
            ASSERT_TRUE(cpu_ctx);
            const std::vector<float> ref = run(cpu_ctx.get());
            fake_gpu::ran().clear();
            Model m = load(file.path, 999);
            ASSERT_TRUE(m) << tu::take_errors();
            Ctx c = context(m.get(), true, false, GGML_TYPE_F32);
            ASSERT_TRUE(c) << tu::take_errors();
            const std::vector<float> got = run(c.get());
            if (wtype == GGML_TYPE_F32) {
                expect_same_logits(got, ref, 1e-4);
            } else {
                // The device's products quantize the activations otherwise than the CPU's: both
                // held to the weights dequantized to F32 (expect_device_logits).
                std::vector<float> exact;
                if (kCudaEmu) {
                    const std::string f32 = dequantized_copy(file.path);
                    ASSERT_FALSE(f32.empty());
                    Model em = load(f32, 0);
                    unlink(f32.c_str());
                    ASSERT_TRUE(em) << tu::take_errors();
                    Ctx ec = context(em.get(), true, false, GGML_TYPE_F32);
                    ASSERT_TRUE(ec);
                    exact = run(ec.get());
                }
                // (a mixture's tokens near a tie between experts go either way with either
                // rounding: the bound is looser)
                expect_device_logits(got, ref, exact, tu::n_vocab_of(m.get()), 1.5);
            }
            EXPECT_GT(count(GGML_OP_MUL_MAT), 0) << "no product ran on the device";
            if (s.n_expert) {
                EXPECT_GT(count(GGML_OP_MUL_MAT_ID), 0) << "the experts did not run on the device";
                EXPECT_GT(count(GGML_OP_ARGSORT), 0) << "the router's choice did not run on the device";
            }
        }
    }
}

// An encoder (bert: bidirectional attention, learned positions, layer norms, GELU) with its layers
// on the device: the pooled embeddings of two sequences in one batch are the CPU's.
TEST_F(Offload, EncoderEmbeddingsOnTheDevice) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    for (const tiny::spec & s : tiny::specs()) {
        if (!llm_arch_get(s.arch).encoder) continue;
        SCOPED_TRACE(s.name);
        tu::TempFile file("offload-" + s.name + ".gguf");
        ASSERT_TRUE(tiny::write(s, file.path, model_path("stories260K.gguf")));
        const auto embed = [&](llama_model * m, std::vector<std::vector<float>> & out) {
            llama_context_params p = llama_context_default_params();
            p.n_ctx = 64;
            p.n_batch = p.n_ubatch = 32;
            p.n_seq_max = 2;
            p.n_threads = p.n_threads_batch = 2;
            p.embeddings = true;
            p.pooling_type = LLAMA_POOLING_TYPE_MEAN;
            p.type_k = p.type_v = GGML_TYPE_F32;
            Ctx c(llama_init_from_model(m, p));
            ASSERT_TRUE(c) << tu::take_errors();
            const std::vector<std::vector<llama_token>> seqs = { { 1, 40, 99, 7, 300, 12, 5 }, { 1, 77, 250, 31, 8 } };
            llama_batch b = llama_batch_init(32, 0, 1);
            for (size_t q = 0; q < seqs.size(); q++) {
                for (size_t i = 0; i < seqs[q].size(); i++) {
                    const int32_t k = b.n_tokens++;
                    b.token[k] = seqs[q][i];
                    b.pos[k] = (llama_pos) i;
                    b.n_seq_id[k] = 1;
                    b.seq_id[k][0] = (llama_seq_id) q;
                    b.logits[k] = true;
                }
            }
            ASSERT_EQ(llama_decode(c.get(), b), 0) << tu::take_errors();
            llama_batch_free(b);
            const int32_t n_embd = llama_model_n_embd(m);
            for (size_t q = 0; q < seqs.size(); q++) {
                const float * e = llama_get_embeddings_seq(c.get(), (llama_seq_id) q);
                ASSERT_NE(e, nullptr);
                out.emplace_back(e, e + n_embd);
            }
        };
        Model cpu_model = load(file.path, 0);
        ASSERT_TRUE(cpu_model) << tu::take_errors();
        std::vector<std::vector<float>> ref, got;
        embed(cpu_model.get(), ref);
        fake_gpu::ran().clear();
        Model m = load(file.path, 999);
        ASSERT_TRUE(m) << tu::take_errors();
        embed(m.get(), got);
        ASSERT_EQ(got.size(), ref.size());
        for (size_t q = 0; q < ref.size(); q++) {
            double err = 0, mag = 0;
            for (size_t i = 0; i < ref[q].size(); i++) {
                err = std::max(err, (double) std::fabs(got[q][i] - ref[q][i]));
                mag = std::max(mag, (double) std::fabs(ref[q][i]));
            }
            EXPECT_LT(err, 1e-4 * mag) << "sequence " << q;
        }
        EXPECT_GT(count(GGML_OP_MUL_MAT), 0) << "no product ran on the device";
    }
}

// The device declines RoPE and the softmax: every layer splits between the device and the CPU
// several times, and the tensors crossing are copied both ways.
TEST_F(Offload, SplitsWithinEachLayer) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    Model cpu_model = load(model_path("stories260K.gguf"), 0);
    ASSERT_TRUE(cpu_model);
    Ctx cpu_ctx = context(cpu_model.get());
    ASSERT_TRUE(cpu_ctx);
    const std::vector<float> ref = run(cpu_ctx.get());

    fake_gpu::set_supports([](const ggml_tensor * op) { return op->op != GGML_OP_ROPE && op->op != GGML_OP_SOFT_MAX; });
    Model m = load(model_path("stories260K.gguf"), 999);
    ASSERT_TRUE(m);
    Ctx c = context(m.get());
    ASSERT_TRUE(c);
    const std::vector<float> got = run(c.get());
    expect_same_logits(got, ref, 1e-4);
    EXPECT_EQ(count(GGML_OP_ROPE), 0);
    EXPECT_GT(count(GGML_OP_MUL_MAT), 0);
}

// A device that cannot compute a node writing into its own memory (here the cache's rows, of a
// type it cannot quantize to) is an error that names the node, not a write by the CPU to
// addresses it cannot reach (a crash).
TEST_F(Offload, NodeIntoDeviceMemoryNoBackendCanWriteIsAnError) {
    const std::string path = tu::models_dir() + "/ktest/ktest-F32.gguf";
    TU_REQUIRE_FILE(path);
    fake_gpu::set_supports([](const ggml_tensor * op) { return op->op != GGML_OP_SET_ROWS; });
    Model m = load(path, 999);
    ASSERT_TRUE(m);
    tu::take_errors();
    Ctx c = context(m.get(), true, false, GGML_TYPE_Q4_0);
    if (c) {  // refused at the first decode if not when the context reserved its graph
        llama_batch b = llama_batch_get_one(std::vector<llama_token>{ 1, 40, 99 }.data(), 3);
        EXPECT_NE(llama_decode(c.get(), b), 0);
    }
    const std::string err = tu::take_errors();
    EXPECT_NE(err.find("cannot compute node"), std::string::npos) << err;
    EXPECT_NE(err.find("SET_ROWS"), std::string::npos) << err;
}

// Weights read into memory (--no-mmap) and the fused attention path offload the same way.
TEST_F(Offload, NoMmapAndFlashAttention) {
    TU_REQUIRE_FILE(model_path("TinyStories-656K-Q8_0.gguf"));
    expect_flash_attn_on_device(model_path("TinyStories-656K-Q8_0.gguf"), 1, false);
}

// K-quants (Q4_K_M: Q4_K and Q6_K weights) with flash attention, every layer on the device: with
// the CUDA kernels, generation's attention quantizes the output projection's 256-value blocks.
TEST_F(Offload, KQuantsWithFlashAttention) {
    const std::string path = tu::models_dir() + "/ktest/ktest-Q4_K_M.gguf";
    TU_REQUIRE_FILE(path);
    expect_flash_attn_on_device(path, 999, true);
}

// llama.cpp's cache types (-ctk / -ctv) with every layer and the cache on the device, with and
// without flash attention: the rows are written into the cache (quantized) there and attended to
// there, and the logits are the CPU's with the same cache type. F32 weights, so that only the
// attention's path differs. On the simulated GPU: the CPU's kernels, the same logits. With the
// CUDA kernels: flash attention reads the same cache bits in F32 as the CPU (the CPU's logits);
// without it, the CPU multiplies block-typed keys by 8-bit queries (Q8_0, as llama.cpp) where the
// GPU's products keep more of them, so the device must be no further than the CPU from the
// unrounded queries' result (the CPU's flash attention), and within the 1e-3 of the CPU.
TEST_F(Offload, CacheTypesOnTheDevice) {
    const std::string path = tu::models_dir() + "/ktest/ktest-F32.gguf";
    TU_REQUIRE_FILE(path);
    Model cpu = load(path, 0), dev = load(path, 999);
    ASSERT_TRUE(cpu && dev);
    const int32_t n_vocab = tu::n_vocab_of(cpu.get());
    for (ggml_type t : { GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q5_1, GGML_TYPE_Q5_0, GGML_TYPE_Q4_1, GGML_TYPE_Q4_0,
                         GGML_TYPE_IQ4_NL }) {
        std::vector<float> cpu_fa;
        for (bool fa : { true, false }) {
            SCOPED_TRACE(std::string(ggml_type_name(t)) + (fa ? " cache, flash attention" : " cache"));
            Ctx cc = context(cpu.get(), true, fa, t);
            ASSERT_TRUE(cc) << tu::take_errors();
            const std::vector<float> ref = run(cc.get());
            Ctx dc = context(dev.get(), true, fa, t);
            ASSERT_TRUE(dc) << tu::take_errors();
            fake_gpu::ran().clear();
            const std::vector<float> got = run(dc.get());
            EXPECT_GT(count(GGML_OP_SET_ROWS), 0);
            EXPECT_EQ(count(GGML_OP_FLASH_ATTN_EXT) > 0, fa);
            if (!kCudaEmu) {
                expect_same_logits(got, ref, 1e-4);
                continue;
            }
            const int64_t n_rows = (int64_t) (ref.size() / (size_t) n_vocab);
            const double kl = tu::mean_kl(ref.data(), got.data(), n_rows, n_vocab);
            printf("[ %s cache, flash attention %d ] mean KL device vs CPU %.3g", ggml_type_name(t), (int) fa, kl);
            if (fa) {
                cpu_fa = ref;
                EXPECT_LT(kl, 1e-8);
            } else {
                const double kl_dev = tu::mean_kl(cpu_fa.data(), got.data(), n_rows, n_vocab);
                const double kl_cpu = tu::mean_kl(cpu_fa.data(), ref.data(), n_rows, n_vocab);
                printf(", to the unrounded queries' result: device %.3g, CPU %.3g", kl_dev, kl_cpu);
                EXPECT_LE(kl_dev, 1.1 * kl_cpu + 1e-6);
                EXPECT_LT(kl, 1e-3);
            }
            printf("\n");
        }
    }
}

// Greedy text through the public sampler API is the CPU's.
// Generated tokens give the device the very same graph (only the inputs' contents change: the
// token, its position, the mask and the cell its key and value go to), which is what lets a GPU
// replay its recorded kernels (a CUDA graph) instead of launching them one by one.
TEST_F(Offload, GeneratedTokensGiveTheDeviceTheSameGraph) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    for (bool fa : { false, true }) {
        Model m = load(model_path("stories260K.gguf"), 999);
        ASSERT_TRUE(m);
        Ctx c = context(m.get(), true, fa);
        ASSERT_TRUE(c);
        const std::vector<llama_token> prompt = { 1, 40, 99, 7, 300 };
        tu::eval_all(c.get(), prompt);
        fake_gpu::graph_keys().clear();
        llama_pos p = (llama_pos) prompt.size();
        for (llama_token t : { 14, 250, 3, 77, 9, 120 }) tu::eval_all(c.get(), { t }, p++);
        const auto & keys = fake_gpu::graph_keys();
        ASSERT_EQ(keys.size(), 6u) << "one device graph per token (all layers offloaded)";
        for (size_t i = 1; i < keys.size(); i++) EXPECT_TRUE(keys[i] == keys[0]) << "token " << i << ", flash attention " << fa;
    }
}

// The CUDA backend runs the residual's add, rms_norm and the multiply by its weight as one
// kernel (quantizing the result for the product after it), silu then the multiply by up, the
// keys' rope and their store into the cache: only when the graph gives them one after another.
TEST_F(Offload, GraphOrderFeedsTheGpuFusions) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    Model m = load(model_path("stories260K.gguf"), 999);
    ASSERT_TRUE(m);
    for (bool fa : { false, true }) {
        SCOPED_TRACE(fa ? "flash attention" : "no flash attention");
        Ctx c = context(m.get(), true, fa);
        ASSERT_TRUE(c);
        fake_gpu::ran().clear();
        tu::eval_all(c.get(), { 1 });
        const std::vector<ggml_op> & ops = fake_gpu::ran();
        int add_norm_mul = 0, norm_mul = 0, unary_mul = 0, norm_mul_product = 0;
        for (size_t i = 0; i + 1 < ops.size(); i++) {
            if (ops[i] == GGML_OP_RMS_NORM && ops[i + 1] == GGML_OP_MUL) norm_mul++;
            if (i + 2 < ops.size() && ops[i] == GGML_OP_RMS_NORM && ops[i + 1] == GGML_OP_MUL && ops[i + 2] == GGML_OP_MUL_MAT) norm_mul_product++;
            if (ops[i] == GGML_OP_UNARY && ops[i + 1] == GGML_OP_MUL) unary_mul++;
            if (i + 2 < ops.size() && ops[i] == GGML_OP_ADD && ops[i + 1] == GGML_OP_RMS_NORM && ops[i + 2] == GGML_OP_MUL) add_norm_mul++;
        }
        const int n_layer = llama_model_n_layer(m.get());
        EXPECT_EQ(norm_mul, 2 * n_layer + 1);      // attention's and the FFN's, the output norm
        EXPECT_EQ(add_norm_mul, 2 * n_layer);      // each but the first layer's input norm, and the FFN's
        EXPECT_EQ(unary_mul, n_layer);
        // and the product reading the norm's result comes next (q; gate; the output): the kernel
        // quantizes its activations too
        EXPECT_EQ(norm_mul_product, 2 * n_layer + 1);
        // the keys' rope, then (past views) the set_rows that stores them, the values' and the
        // queries' rope: one kernel
        auto next_computing = [&](size_t j) {
            while (j < ops.size() && (ops[j] == GGML_OP_VIEW || ops[j] == GGML_OP_RESHAPE || ops[j] == GGML_OP_PERMUTE || ops[j] == GGML_OP_TRANSPOSE)) j++;
            return j;
        };
        int rope_store_kv = 0;
        for (size_t i = 0; i < ops.size(); i++) {
            if (ops[i] != GGML_OP_ROPE) continue;
            const size_t j = next_computing(i + 1);
            if (j >= ops.size() || ops[j] != GGML_OP_SET_ROWS) continue;
            const size_t k = next_computing(j + 1);
            if (k >= ops.size() || ops[k] != GGML_OP_SET_ROWS) continue;
            const size_t r = next_computing(k + 1);  // and the queries' rope
            if (r < ops.size() && ops[r] == GGML_OP_ROPE) rope_store_kv++;
        }
        EXPECT_EQ(rope_store_kv, n_layer);
        // flash attention, or without it the copy that makes the heads of a token one row, then
        // (past views) the output projection; without it the softmax, then the values' product
        int attn_product = 0, attn = 0, cont_product = 0, cont = 0, softmax_product = 0, softmax = 0;
        for (size_t i = 0; i < ops.size(); i++) {
            if (ops[i] != GGML_OP_FLASH_ATTN_EXT && ops[i] != GGML_OP_CONT && ops[i] != GGML_OP_SOFT_MAX) continue;
            const size_t j = next_computing(i + 1);
            const bool product = j < ops.size() && ops[j] == GGML_OP_MUL_MAT;
            if (ops[i] == GGML_OP_FLASH_ATTN_EXT) {
                attn++;
                attn_product += product;
            } else if (ops[i] == GGML_OP_CONT) {
                cont++;
                cont_product += product;
            } else {
                softmax++;
                softmax_product += product;
            }
        }
        EXPECT_EQ(attn, fa ? n_layer : 0);
        EXPECT_EQ(attn_product, attn);
        EXPECT_EQ(cont, fa ? 0 : n_layer);
        EXPECT_EQ(cont_product, cont);
        EXPECT_EQ(softmax, fa ? 0 : n_layer);
        EXPECT_EQ(softmax_product, softmax);
    }
}

#ifdef OFFLOAD_CUDA_EMU
// What a GPU launches (kernels, cuBLAS calls, device copies) for a batch, every layer on the
// device (ktest: 4 layers; the embeddings' get_rows runs on the CPU). With flash attention, a
// generated token takes 9 a layer (K-quants too: the attention's blocks quantize the output
// projection's 256-value blocks of several heads), a prompt one a product for F16 weights and 5 more (block types: 4 more, the
// dequantization of the weights of each activation); without it 12 a generated token and 15 a prompt of F16 weights (the
// queries' rope writes their F16 copy for the scores product). Besides the layers: the
// output norm and the output product (and a block-typed output weight's dequantization in a prompt).
TEST_F(Offload, LaunchesPerLayer) {
    struct Run { const char * type; bool fa; int n_tokens; int per_layer, rest; };
    for (const Run & r : { Run{ "Q8_0", true, 1, 9, 2 }, Run{ "Q4_K_M", true, 1, 9, 2 }, Run{ "F16", true, 20, 12, 2 },
                           Run{ "Q8_0", true, 20, 16, 3 }, Run{ "Q8_0", false, 1, 12, 2 }, Run{ "F16", false, 20, 15, 2 } }) {
        const std::string path = tu::models_dir() + "/ktest/ktest-" + r.type + ".gguf";
        TU_REQUIRE_FILE(path);
        SCOPED_TRACE(std::string(r.type) + (r.fa ? ", flash attention, " : ", no flash attention, ") + std::to_string(r.n_tokens) + " tokens");
        Model m = load(path, 999);
        ASSERT_TRUE(m);
        Ctx c = context(m.get(), true, r.fa);
        ASSERT_TRUE(c);
        std::vector<llama_token> prompt;
        for (int i = 0; i < 24; i++) prompt.push_back((llama_token) (1 + 37 * i % 200));
        tu::eval_all(c.get(), prompt);  // a cache to attend to
        std::vector<llama_token> batch(prompt.begin(), prompt.begin() + r.n_tokens);
        const uint64_t before = emu::launches();
        tu::eval_all(c.get(), batch, (llama_pos) prompt.size());
        const int launches = (int) (emu::launches() - before), n_layer = llama_model_n_layer(m.get());
        printf("[ launches ] %-6s fa %d, %2d tokens: %d for %d layers\n", r.type, (int) r.fa, r.n_tokens, launches, n_layer);
        EXPECT_EQ(launches, r.per_layer * n_layer + r.rest);
    }
}
#endif

// LoRA fine-tuning with the base model's layers on the device (llama-finetune -ngl): the
// adapter in host memory, the training graph (forward, backward, AdamW) split by ggml-opt's
// scheduler. The losses of every micro-batch and the trained adapter are the CPU's alone.
struct LoraRun {
    std::vector<float> losses;
    std::vector<float> adapter;  // every A and B, in name order
};

// A gradient reducer as a data-parallel run's (llama-finetune under MPI): it adds to each
// accumulator a fixed pattern (a stand-in for the other processes' gradients, which AdamW's step,
// unlike a scaling, does not hide), read and written through the backend wherever it lives.
// ok: every gradient announced once a step, final when announced.
struct AddingReducer {
    ggml_opt_context_t oc = nullptr;
    std::vector<std::vector<float>> at_ready;
    std::vector<std::vector<float>> first;  // the first step's gradients, as announced
    std::vector<int> announced;
    int steps = 0;
    bool ok = true;
    bool add = true;  // false: the gradients are only looked at

    static std::vector<float> values(const ggml_tensor * t) {
        std::vector<float> v((size_t) ggml_nelements(t));
        ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
        return v;
    }
    void install(ggml_opt_context_t o) {
        oc = o;
        at_ready.assign((size_t) ggml_opt_n_params(o), {});
        announced.assign(at_ready.size(), 0);
        const ggml_opt_grad_reducer r = {
            [](void * ud, int64_t i, ggml_tensor * acc) {
                AddingReducer & a = *(AddingReducer *) ud;
                a.ok &= acc == ggml_opt_grad_acc(a.oc, ggml_opt_param(a.oc, i));
                a.announced[(size_t) i]++;
                a.at_ready[(size_t) i] = values(acc);
            },
            nullptr,
            [](void * ud) { ((AddingReducer *) ud)->reduce(); },
            this,
        };
        ggml_opt_set_grad_reducer(o, &r);
    }
    void reduce() {
        steps++;
        if (steps == 1) first = at_ready;
        for (size_t i = 0; i < at_ready.size(); i++) {
            ggml_tensor * acc = ggml_opt_grad_acc(oc, ggml_opt_param(oc, (int64_t) i));
            std::vector<float> v = values(acc);
            ok &= announced[i] == 1 && v == at_ready[i];
            announced[i] = 0;
            if (!add) continue;
            for (size_t e = 0; e < v.size(); e++) v[e] += 1e-3f * std::sin(0.7f * (float) (e + 13 * i));
            ggml_backend_tensor_set(acc, v.data(), 0, ggml_nbytes(acc));
        }
    }
};

// adapter_on_device: A and B copied into the device's memory (their accumulators, moments and
// AdamW steps then live and run there too). reducer: installed on the run's optimization context.
LoraRun train_lora(int n_gpu_layers, bool adapter_on_device = false, int steps = 6, AddingReducer * reducer = nullptr,
                   const std::string & path = model_path("stories260K.gguf")) {
    LoraRun r;
    Model m = load(path, n_gpu_layers);
    EXPECT_TRUE(m);
    if (!m) return r;
    llama_adapter_lora ad;
    std::string err;
    EXPECT_TRUE(llama_adapter_lora_create(ad, *m, {"q", "v", "down"}, 4, 8.0f, err)) << err;
    std::mt19937 rng(3);
    std::vector<ggml_tensor *> ts;
    for (auto & kv : ad.weights) ts.insert(ts.end(), { kv.second.a, kv.second.b });
    std::sort(ts.begin(), ts.end(), [](const ggml_tensor * x, const ggml_tensor * y) { return strcmp(x->name, y->name) < 0; });
    for (ggml_tensor * t : ts) {  // B not zero: every parameter gets a gradient from the first step
        std::uniform_real_distribution<float> u(-0.05f, 0.05f);
        for (int64_t i = 0; i < ggml_nelements(t); i++) ((float *) t->data)[i] = u(rng);
    }
    llama_adapter_device_copy dev;  // as llama-finetune -ngl places the adapter
    if (adapter_on_device) {
        EXPECT_TRUE(llama_adapter_lora_to_devices(ad, dev, true, err)) << err;
        EXPECT_EQ(dev.host_of.size(), ts.size()) << "a pair left in host memory";
        for (ggml_tensor *& t : ts) {
            for (auto & [d, h] : dev.host_of) {
                if (h == t) t = d;
            }
        }
    }
    for (ggml_tensor * t : ts) ggml_set_param(t);
    llm_lora_set lora;
    lora.entries.push_back({ &ad, 1.0f });
    const uint32_t n = 24;
    const size_t max_nodes = llm_graph_max_nodes_train(*m, 1);
    ggml_context * ctx = ggml_init({ ggml_graph_overhead_custom(max_nodes, true) + 2 * max_nodes * ggml_tensor_overhead(), nullptr, true });
    llm_graph_io io;
    llm_build_forward_train(ctx, *m, n, io, &lora);

    std::vector<ggml_backend_t> backends;
    ggml_backend_sched_t sched = nullptr;
    ggml_opt_params op = ggml_opt_default_params(ctx, io.tokens, io.logits, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    ggml_opt_optimizer_params pars = ggml_opt_get_default_optimizer_params(nullptr);
    pars.adamw.alpha = 0.01f;
    op.get_opt_pars = ggml_opt_get_constant_optimizer_params;
    op.get_opt_pars_ud = &pars;
    op.opt_period = 2;
    op.n_threads = 2;
    if (n_gpu_layers > 0) {
        backends = { fake_gpu::init(), ggml_backend_cpu_init() };
        ggml_backend_cpu_set_n_threads(backends[1], 2);
        // the CPU's buffers in the device's host memory, as llama-finetune -ngl has them
        ggml_backend_buffer_type_t bufts[2] = { ggml_backend_get_default_buffer_type(backends[0]),
                                                ggml_backend_dev_host_buffer_type(fake_gpu::device()) };
        sched = ggml_backend_sched_new(backends.data(), bufts, 2, max_nodes, false, false);
        op.backend_sched = sched;
    }
    ggml_opt_context_t oc = ggml_opt_init(op);
    EXPECT_TRUE(oc);
    if (oc && sched) {  // the labels, copied to the device every micro-batch: from page-locked memory
        const ggml_backend_buffer_t lb = ggml_opt_labels(oc)->buffer;
        EXPECT_STREQ(lb ? ggml_backend_buft_name(ggml_backend_buffer_get_type(lb)) : "plain host memory", "FAKE_Host");
    }
    if (oc && reducer) reducer->install(oc);
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));
    std::vector<int32_t> pos(n), tok(n + 1);
    std::vector<float> mask((size_t) n * n), labels((size_t) n * n_vocab);
    for (uint32_t t = 0; t < n; t++) {
        pos[t] = (int32_t) t;
        for (uint32_t c = 0; c < n; c++) mask[(size_t) t * n + c] = c <= t ? 0.0f : -INFINITY;
    }
    for (int step = 0; step < steps && oc; step++) {
        for (uint32_t t = 0; t <= n; t++) tok[t] = (int32_t) (1 + (t * 37 + (uint32_t) step * 11) % (uint32_t) (n_vocab - 1));
        std::fill(labels.begin(), labels.end(), 0.0f);
        for (uint32_t t = 0; t < n; t++) labels[(size_t) t * n_vocab + tok[t + 1]] = 1.0f;
        ggml_opt_alloc(oc, true);
        ggml_backend_tensor_set(io.tokens, tok.data(), 0, n * sizeof(int32_t));
        ggml_backend_tensor_set(io.pos, pos.data(), 0, n * sizeof(int32_t));
        ggml_backend_tensor_set(io.kq_mask, mask.data(), 0, mask.size() * sizeof(float));
        ggml_backend_tensor_set(ggml_opt_labels(oc), labels.data(), 0, labels.size() * sizeof(float));
        ggml_opt_eval(oc, nullptr);
        float loss;
        ggml_backend_tensor_get(ggml_opt_loss(oc), &loss, 0, sizeof(loss));
        r.losses.push_back(loss);
    }
    for (ggml_tensor * t : ts) {
        std::vector<float> v((size_t) ggml_nelements(t));
        ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
        r.adapter.insert(r.adapter.end(), v.begin(), v.end());
    }
    ggml_opt_free(oc);
    ggml_backend_sched_free(sched);
    for (ggml_backend_t b : backends) ggml_backend_free(b);
    ggml_free(ctx);
    return r;
}

TEST_F(Offload, LoraTrainingWithLayersOnTheDevice) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    const int steps = 6;
    const LoraRun cpu = train_lora(0, false, steps);
    ASSERT_EQ(cpu.losses.size(), (size_t) steps);
    EXPECT_LT(cpu.losses[steps - 2] + cpu.losses[steps - 1], cpu.losses[0] + cpu.losses[1]) << "no learning: the test compares little";
    for (bool adapter_on_device : { false, true }) {
        fake_gpu::ran().clear();
        const LoraRun dev = train_lora(999, adapter_on_device, steps);
        // the attention's gradient too: the CUDA backend has its kernel
        std::vector<ggml_op> ops = { GGML_OP_MUL_MAT, GGML_OP_OUT_PROD, GGML_OP_RMS_NORM_BACK, GGML_OP_ROPE_BACK, GGML_OP_FLASH_ATTN_BACK };
        if (adapter_on_device) ops.push_back(GGML_OP_OPT_STEP_ADAMW);
        for (ggml_op op : ops) EXPECT_GT(count(op), 0) << "the device never ran " << ggml_op_name(op);
        ASSERT_EQ(dev.losses.size(), cpu.losses.size());
        for (size_t i = 0; i < cpu.losses.size(); i++) {
            EXPECT_NEAR(dev.losses[i], cpu.losses[i], 1e-5 * std::fabs(cpu.losses[i])) << "micro-batch " << i << ", adapter on the device " << adapter_on_device;
        }
        ASSERT_EQ(dev.adapter.size(), cpu.adapter.size());
        double max_diff = 0.0;
        for (size_t i = 0; i < cpu.adapter.size(); i++) max_diff = std::max(max_diff, (double) std::fabs(dev.adapter[i] - cpu.adapter[i]));
        EXPECT_LT(max_diff, 1e-5) << "adapter on the device " << adapter_on_device;
    }
}

#ifdef OFFLOAD_CUDA_EMU
// The same where attention, forward and gradient, runs on the tensor-core kernels (heads of 64:
// ktest-F32; 24 query rows): with their BF16 hi + lo products the losses and the gradients stay
// the CPU's. (The adapters after AdamW are not compared here: its first steps move a weight by
// about the learning rate whatever its gradient's size, so a near-zero gradient's noise moves
// it by as much.)
TEST_F(Offload, LoraTrainingOnTensorCoreAttention) {
    const std::string path = tu::models_dir() + "/ktest/ktest-F32.gguf";
    TU_REQUIRE_FILE(path);
    const int steps = 2;  // one optimizer step
    AddingReducer on_cpu, on_dev;
    on_cpu.add = on_dev.add = false;
    const LoraRun cpu = train_lora(0, false, steps, &on_cpu, path);
    const uint64_t before = emu::mma_attention_nodes();
    const LoraRun dev = train_lora(999, true, steps, &on_dev, path);
    // each micro-batch: every layer's forward and gradient
    EXPECT_GE(emu::mma_attention_nodes() - before, (uint64_t) (2 * 4 * steps)) << "attention did not run on the tensor-core kernels";
    ASSERT_EQ(dev.losses.size(), cpu.losses.size());
    for (size_t i = 0; i < cpu.losses.size(); i++) EXPECT_NEAR(dev.losses[i], cpu.losses[i], 1e-5 * std::fabs(cpu.losses[i])) << "micro-batch " << i;
    ASSERT_EQ(on_dev.first.size(), on_cpu.first.size());
    ASSERT_FALSE(on_cpu.first.empty());
    for (size_t i = 0; i < on_cpu.first.size(); i++) {
        double err = 0.0, ref = 0.0;
        ASSERT_EQ(on_dev.first[i].size(), on_cpu.first[i].size());
        for (size_t e = 0; e < on_cpu.first[i].size(); e++) {
            err += std::pow((double) on_dev.first[i][e] - on_cpu.first[i][e], 2);
            ref += std::pow((double) on_cpu.first[i][e], 2);
        }
        EXPECT_GT(ref, 0.0) << "parameter " << i << " got no gradient";
        EXPECT_LT(err, 1e-8 * ref) << "parameter " << i << "'s gradient";
    }
}
#endif

// A data-parallel run's gradient reducer with the layers and the adapter on the device (MPI with
// -ngl): it hears of every gradient after the backward pass, reads and writes the device's
// accumulators, and the run is the CPU's with the same reducer.
TEST_F(Offload, GradientReducerWithLayersOnTheDevice) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    const int steps = 4;  // optimizer steps of 2 micro-batches
    AddingReducer on_cpu, on_dev;
    const LoraRun plain = train_lora(0, false, steps);
    const LoraRun cpu = train_lora(0, false, steps, &on_cpu);
    const LoraRun dev = train_lora(999, true, steps, &on_dev);
    for (const AddingReducer * r : { &on_cpu, &on_dev }) {
        EXPECT_TRUE(r->ok) << "a gradient announced twice, not at all, or changed after it was announced";
        EXPECT_EQ(r->steps, steps / 2);
    }
    ASSERT_EQ(dev.adapter.size(), cpu.adapter.size());
    ASSERT_EQ(plain.adapter.size(), cpu.adapter.size());
    double max_diff = 0.0, reducer_effect = 0.0;
    for (size_t i = 0; i < cpu.adapter.size(); i++) {
        max_diff = std::max(max_diff, (double) std::fabs(dev.adapter[i] - cpu.adapter[i]));
        reducer_effect = std::max(reducer_effect, (double) std::fabs(plain.adapter[i] - cpu.adapter[i]));
    }
    EXPECT_GT(reducer_effect, 1e-3) << "the reducer's sums changed nothing: the test compares little";
    EXPECT_LT(max_diff, 1e-5);
    for (size_t i = 0; i < cpu.losses.size() && i < dev.losses.size(); i++) {
        EXPECT_NEAR(dev.losses[i], cpu.losses[i], 1e-5 * std::fabs(cpu.losses[i])) << "micro-batch " << i;
    }
}

TEST_F(Offload, GreedyTextIsTheCpus) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    auto generate = [](int ngl) {
        Model m = load(model_path("stories260K.gguf"), ngl);
        EXPECT_TRUE(m);
        Ctx c = context(m.get());
        EXPECT_TRUE(c);
        llama_sampler * s = llama_sampler_init_greedy();
        std::vector<llama_token> toks = { 1 };
        for (int i = 0; i < 40; i++) {
            llama_batch b = llama_batch_get_one(&toks.back(), 1);
            if (llama_decode(c.get(), b) != 0) break;
            toks.push_back(llama_sampler_sample(s, c.get(), -1));
        }
        llama_sampler_free(s);
        return toks;
    };
    const std::vector<llama_token> cpu = generate(0);
    EXPECT_EQ(cpu.size(), 41u);
    EXPECT_EQ(generate(999), cpu);
}

}  // namespace

namespace {

// A LoRA adapter applied at inference (llama-cli --lora with -ngl): the CPU's logits, and the
// adapter's A and B in the memory of the device that holds their base weight, so that a token's
// graph stays one split on the device with no copy of the adapter (as without one).
TEST_F(Offload, LoraAdapterLivesWithItsBaseWeights) {
    TU_REQUIRE_FILE(model_path("stories260K.gguf"));
    const std::string path = testing::TempDir() + "test-offload-" + std::to_string((long) getpid()) + "-lora.gguf";
    {
        Model m = load(model_path("stories260K.gguf"), 0);
        ASSERT_TRUE(m);
        llama_adapter_lora ad;
        std::string err;
        ASSERT_TRUE(llama_adapter_lora_create(ad, *m, { "q", "v", "down", "output" }, 4, 8.0f, err)) << err;
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> u(-0.1f, 0.1f);
        for (auto & kv : ad.weights) {
            for (ggml_tensor * t : { kv.second.a, kv.second.b }) {
                for (int64_t i = 0; i < ggml_nelements(t); i++) ((float *) t->data)[i] = u(rng);
            }
        }
        ASSERT_TRUE(llama_adapter_lora_save_gguf(ad, *m, path, GGML_TYPE_F32, err)) << err;
    }
    struct Result {
        std::vector<float> logits;
        int splits = 0, copies = 0;
    };
    auto generate = [&](int ngl, bool with_adapter) {
        Result r;
        Model m = load(model_path("stories260K.gguf"), ngl);
        EXPECT_TRUE(m);
        if (!m) return r;
        llama_adapter_lora * ad = with_adapter ? llama_adapter_lora_init(m.get(), path.c_str()) : nullptr;
        EXPECT_TRUE(ad || !with_adapter) << tu::take_errors();
        Ctx c = context(m.get());
        EXPECT_TRUE(c);
        if (!c) return r;
        if (ad) {
            EXPECT_EQ(llama_set_adapter_lora(c.get(), ad, 0.75f), 0);
        }
        r.logits = run(c.get());
        tu::eval_all(c.get(), { 42 }, 40);  // a generated token's graph
        r.splits = ggml_backend_sched_get_n_splits(c->sched);
        r.copies = ggml_backend_sched_get_n_copies(c->sched);
        c.reset();
        if (ad) llama_adapter_lora_free(ad);
        return r;
    };
    const Result cpu = generate(0, true);
    const Result plain = generate(999, false);
    const Result dev = generate(999, true);
    const Result one_layer = generate(1, true);  // a pair on the device, the others in host memory
    unlink(path.c_str());
    expect_same_logits(dev.logits, cpu.logits, 1e-4);
    expect_same_logits(one_layer.logits, cpu.logits, 1e-4);
    const Result no_lora_cpu = generate(0, false);
    double moved = 0.0;
    for (size_t i = 0; i < cpu.logits.size() && i < no_lora_cpu.logits.size(); i++) {
        moved = std::max(moved, (double) std::fabs(cpu.logits[i] - no_lora_cpu.logits[i]));
    }
    EXPECT_GT(moved, 1e-2) << "the adapter changes nothing: the test compares little";
    EXPECT_EQ(dev.splits, plain.splits);
    EXPECT_EQ(dev.copies, plain.copies) << "the adapter is copied to the device every token";
}

}  // namespace
