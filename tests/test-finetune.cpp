// test-finetune.cpp - llama-finetune run as a program, held to PyTorch and to independent
// computations:
//  - the LoRA loss curve of stories260K (r 8, alpha 16 on q,k,v,o, AdamW lr 1e-3, wd 0.01, the
//    20 sentences of lora-sentences.txt every step) against tests/data/stories260k-lora-adamw.txt
//    (tools/train-reference/stories260k_lora.py, PyTorch float32), starting from the same A
//    (tests/data/stories260k-lora-init, a PEFT directory the script wrote);
//  - the same on Q8_0 and Q4_0 bases (QLoRA: gradients through the quantized weights);
//  - the loss of a masked JSONL step against the base model's logits through the C API;
//  - the trained adapter's logits through llama_set_adapter_lora against the merged weights;
//  - resuming from a checkpoint (also one written on Ctrl-C) against an uninterrupted run;
//  - bad input refused without a crash or a half-written file.
#include "test-llama.h"

#include "llama.h"
#include "llama-adapter.h"
#include "llama-model.h"

#include <cmath>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#ifndef LLAMA_TEST_DATA_DIR
#define LLAMA_TEST_DATA_DIR "tests/data"
#endif

namespace {

std::string bin(const std::string & prog) { return std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog; }

// Under a cross build's emulator (qemu, ~100x slower) the curves are run over their first 20
// steps (row k depends on the first k steps only); natively over all 200.
int curve_steps() { return std::string(LLAMA_EMULATOR).find_first_not_of(' ') == std::string::npos ? 200 : 20; }
tu::run_result finetune(const std::string & args) { return tu::run_command(bin("llama-finetune") + " " + args); }

std::string model_path() { return tu::models_dir() + "/stories260K.gguf"; }
std::string text_path() { return tu::shared_dir() + "/reference/lora-sentences.txt"; }
std::string data_dir() { return LLAMA_TEST_DATA_DIR; }

void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR || std::getenv("LLAMA_TEST_VERBOSE")) fputs(text, stderr);
}

std::string read_text(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The loss column of a --loss-log file (checking its header).
std::vector<double> read_loss_log(const std::string & path) {
    std::ifstream f(path);
    std::string line;
    std::vector<double> out;
    if (!std::getline(f, line) || line != "step\tloss\tlr\ttokens_per_s") return out;
    while (std::getline(f, line)) {
        std::istringstream ss(line);
        long step;
        double loss;
        ss >> step >> loss;
        if ((size_t) step != out.size()) return {};
        out.push_back(loss);
    }
    return out;
}

std::vector<double> read_reference() {
    std::ifstream f(data_dir() + "/stories260k-lora-adamw.txt");
    std::string line;
    std::vector<double> out;
    while (std::getline(f, line)) {
        if (!line.empty() && line[0] != '#') out.push_back(std::stod(line));
    }
    return out;
}

// The reference run's options: the whole text as one sequence (268 tokens), same every step.
std::string curve_args(const std::string & model, const std::string & dir, int steps) {
    return "-m " + model + " -f " + text_path() + " -c 512 --no-shuffle --steps " + std::to_string(steps) +
           " --lora-in " + data_dir() + "/stories260k-lora-init -t 2 -o " + dir + "/a.gguf --loss-log " + dir + "/loss.tsv";
}

double max_rel_dev(const std::vector<double> & a, const std::vector<double> & b, size_t * at) {
    double worst = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); i++) {
        const double r = std::fabs(a[i] - b[i]) / std::fabs(b[i]);
        if (r > worst) {
            worst = r;
            *at = i;
        }
    }
    return worst;
}

// Measured: ours against torch float32, max relative deviation over the 200 steps 1.3e-5 (float32
// against float64 in torch alone: 6.5e-6). 1e-3 leaves a wide margin for other ISAs while
// catching real errors (a wrong scale, decay or init moves the curve by percents).
TEST(Finetune, LoraCurveFollowsPyTorch) {
    TU_REQUIRE_FILE(model_path());
    TU_REQUIRE_FILE(text_path());
    const std::vector<double> ref = read_reference();
    ASSERT_EQ(ref.size(), 201u);
    tu::TempDir dir;
    const int steps = curve_steps();
    const tu::run_result r = finetune(curve_args(model_path(), dir.path, steps));
    ASSERT_EQ(r.status, 0) << r.output;
    const std::vector<double> ours = read_loss_log(dir.path + "/loss.tsv");
    ASSERT_EQ(ours.size(), (size_t) steps + 1);
    EXPECT_NEAR(ours[0], 1.8514, 1e-4) << "step 0 must be the base model's loss (ANCHORS.md)";
    size_t at = 0;
    const double dev = max_rel_dev(ours, ref, &at);
    printf("  stories260K LoRA: loss %.6f -> %.6f after %d steps; max relative deviation from torch %.2e at step %zu\n",
           ours[0], ours[(size_t) steps], steps, dev, at);
    EXPECT_LT(dev, 1e-3) << "step " << at << ": " << ours[at] << " vs torch " << ref[at];
}

// QLoRA: the same run on quantized bases (default backward precision: BF16 products through the
// quantized weights). Their curves must stay close to torch's F32 one. Measured maximum relative
// deviations over the 200 steps: on a Zen 4, Q8_0 5.5% (F32 products 5.9%, int8 13%), at the last
// steps, where the losses are ~0.009 and small differences are large relatively; Q4_0 11.9% (F32
// products 11.6%) near step 60: the Q4_0 base itself starts 7.2% higher (1.985 against 1.851).
// On a Sapphire Rapids Xeon (other instructions for the same code, last bits differ) the Q8_0
// curve has a bump at step 180: 0.0113 against 0.0099, 18% (F32 products 6.2%, int8 14%), while
// its largest deviation before step 150 is 5.2%. So the bound is relative with a floor: 10% (Q8_0)
// or 15% (Q4_0) of torch's loss plus 1e-3 nats (0.05% of the starting loss), which near the end is
// the size of such bumps and early on, where a wrong scale, decay or init shows, is nothing.
constexpr double CURVE_FLOOR = 1e-3;
#if defined(__SANITIZE_ADDRESS__)
#define FINETUNE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FINETUNE_SANITIZED 1
#endif
#endif
TEST(Finetune, QLoraCurvesOnQuantizedBasesStayClose) {
#ifdef FINETUNE_SANITIZED
    GTEST_SKIP() << "sanitizer build: the QLoRA curve tolerances hold for optimized builds only (see above)";
#endif
    TU_REQUIRE_FILE(model_path());
    TU_REQUIRE_FILE(text_path());
    const std::vector<double> ref = read_reference();
    ASSERT_EQ(ref.size(), 201u);
    for (const char * type : {"q8_0", "q4_0"}) {
        tu::TempDir dir;
        const std::string q = dir.path + "/base-" + type + ".gguf";
        const tu::run_result rq = tu::run_command(bin("llama-quantize") + " " + model_path() + " " + q + " " + type);
        ASSERT_EQ(rq.status, 0) << rq.output;
        const int steps = curve_steps();
        const tu::run_result r = finetune(curve_args(q, dir.path, steps));
        ASSERT_EQ(r.status, 0) << r.output;
        const std::vector<double> ours = read_loss_log(dir.path + "/loss.tsv");
        ASSERT_EQ(ours.size(), (size_t) steps + 1);
        size_t at = 0;
        const double dev = max_rel_dev(ours, ref, &at);
        printf("  %s base: loss %.6f -> %.6f after %d steps; max relative deviation from torch's F32 curve %.3f at step %zu\n",
               type, ours[0], ours[(size_t) steps], steps, dev, at);
        const double tol = std::string(type) == "q8_0" ? 0.10 : 0.15;
        for (size_t i = 0; i < std::min(ours.size(), ref.size()); i++) {
            EXPECT_LE(std::fabs(ours[i] - ref[i]), tol * ref[i] + CURVE_FLOOR) << type << " step " << i << ": " << ours[i] << " vs torch " << ref[i];
        }
    }
}

struct ModelDeleter {
    void operator()(llama_model * m) const { llama_model_free(m); }
};
struct CtxDeleter {
    void operator()(llama_context * c) const { llama_free(c); }
};

// Logits of every token of the prompt (all rows kept).
std::vector<float> all_logits(llama_context * ctx, std::vector<llama_token> tokens) {
    llama_kv_self_clear(ctx);
    llama_batch b = llama_batch_init((int32_t) tokens.size(), 0, 1);
    b.n_tokens = (int32_t) tokens.size();
    for (size_t i = 0; i < tokens.size(); i++) {
        b.token[i] = tokens[i];
        b.pos[i] = (llama_pos) i;
        b.logits[i] = 1;
    }
    EXPECT_EQ(llama_decode(ctx, b), 0);
    llama_batch_free(b);
    const int nv = llama_model_n_vocab(llama_get_model(ctx));
    const float * l = llama_get_logits(ctx);
    return std::vector<float>(l, l + tokens.size() * (size_t) nv);
}

std::vector<llama_token> tokenize(const llama_model * m, const std::string & text, bool add_special) {
    std::vector<llama_token> t(text.size() + 8);
    const int n = llama_tokenize(llama_model_get_vocab(m), text.data(), (int) text.size(), t.data(), (int) t.size(), add_special, true);
    t.resize(n > 0 ? (size_t) n : 0);
    return t;
}

// JSONL prompt/completion: the step-0 loss is the mean cross-entropy over the completion tokens
// (and the EOS after them) of both examples of the step, from the base model's logits.
TEST(Finetune, CompletionOnlyLossIsTheMeanOverCompletionTokens) {
    TU_REQUIRE_FILE(model_path());
    tu::TempDir dir;
    const std::vector<std::pair<std::string, std::string>> ex = {
        {"Once upon a time, there was a", " little girl named Lily. She liked to play."},
        {"The cat", " sat on the mat."},
    };
    {
        std::ofstream f(dir.path + "/data.jsonl");
        for (const auto & e : ex) f << "{\"prompt\": \"" << e.first << "\", \"completion\": \"" << e.second << "\"}\n";
    }
    const tu::run_result r = finetune("-m " + model_path() + " -f " + dir.path + "/data.jsonl --data-format jsonl -b 2 --steps 1 " +
                                      "--no-shuffle -o " + dir.path + "/a.gguf --loss-log " + dir.path + "/loss.tsv");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::vector<double> ours = read_loss_log(dir.path + "/loss.tsv");
    ASSERT_EQ(ours.size(), 2u);

    llama_log_set(quiet_log, nullptr);
    std::unique_ptr<llama_model, ModelDeleter> model(llama_model_load_from_file(model_path().c_str(), llama_model_default_params()));
    ASSERT_TRUE(model);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    std::unique_ptr<llama_context, CtxDeleter> ctx(llama_init_from_model(model.get(), cp));
    ASSERT_TRUE(ctx);
    const int nv = llama_model_n_vocab(model.get());
    double sum = 0;
    int count = 0;
    for (const auto & e : ex) {
        std::vector<llama_token> p = tokenize(model.get(), e.first, true), c = tokenize(model.get(), e.second, false);
        const size_t n_prompt = p.size();
        p.insert(p.end(), c.begin(), c.end());
        p.push_back(llama_vocab_eos(llama_model_get_vocab(model.get())));
        const std::vector<float> l = all_logits(ctx.get(), p);
        for (size_t t = n_prompt; t < p.size(); t++) {  // target t, predicted by row t - 1
            const float * row = l.data() + (t - 1) * (size_t) nv;
            double mx = -INFINITY, se = 0;
            for (int k = 0; k < nv; k++) mx = std::max(mx, (double) row[k]);
            for (int k = 0; k < nv; k++) se += std::exp(row[k] - mx);
            sum += mx + std::log(se) - row[p[t]];
            count++;
        }
    }
    printf("  %d completion targets: step-0 loss %.6f, from the base model's logits %.6f\n", count, ours[0], sum / count);
    EXPECT_NEAR(ours[0], sum / count, 2e-4 * (sum / count));
}

// W + (alpha / r) B A merged in plain loops (double) into a model's F32 weights.
void merge_into(llama_model & m, const llama_adapter_lora & ad) {
    for (const auto & kv : ad.weights) {
        ggml_tensor * w = ggml_get_tensor(m.ctx_w, kv.first->name);
        ASSERT_TRUE(w && w->type == GGML_TYPE_F32);
        const ggml_tensor * a = kv.second.a, * b = kv.second.b;
        const int64_t n_in = a->ne[0], r = a->ne[1], n_out = b->ne[1];
        const double s = ad.alpha / (double) r;
        for (int64_t o = 0; o < n_out; o++) {
            for (int64_t i = 0; i < n_in; i++) {
                double acc = 0;
                for (int64_t k = 0; k < r; k++) acc += (double) ((const float *) b->data)[o * r + k] * ((const float *) a->data)[k * n_in + i];
                ((float *) w->data)[o * n_in + i] += (float) (s * acc);
            }
        }
    }
}

// A trained adapter (every target, so output and the FFN are covered) applied unmerged through
// the C API gives the logits of the weights merged in plain loops; the PEFT copy reads back
// equal to the GGUF one (Q/K rows permuted to Hugging Face order and back).
TEST(Finetune, TrainedAdapterMatchesMergedWeightsAndPeftCopy) {
    TU_REQUIRE_FILE(model_path());
    TU_REQUIRE_FILE(text_path());
    tu::TempDir dir;
    const std::string ad_path = dir.path + "/a.gguf", peft = dir.path + "/peft";
    const tu::run_result r = finetune("-m " + model_path() + " -f " + text_path() + " -c 64 --steps 20 --lr 5e-3 " +
                                      "--lora-targets q,k,v,o,gate,up,down,output -o " + ad_path + " --peft-out " + peft);
    ASSERT_EQ(r.status, 0) << r.output;

    llama_log_set(quiet_log, nullptr);
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = false;
    mp.use_repack = false;
    mp.n_gpu_layers = 0;
    std::unique_ptr<llama_model, ModelDeleter> base(llama_model_load_from_file(model_path().c_str(), mp));
    std::unique_ptr<llama_model, ModelDeleter> merged(llama_model_load_from_file(model_path().c_str(), mp));
    ASSERT_TRUE(base && merged);
    llama_adapter_lora * ad = llama_adapter_lora_init(base.get(), ad_path.c_str());
    ASSERT_TRUE(ad);
    EXPECT_EQ(ad->weights.size(), 5u * 7u + 1u);
    EXPECT_EQ(ad->alpha, 16.0f);

    llama_adapter_lora from_peft;
    std::string err;
    ASSERT_TRUE(llama_adapter_lora_load(from_peft, *base, peft, err)) << err;
    ASSERT_EQ(from_peft.weights.size(), ad->weights.size());
    EXPECT_EQ(from_peft.alpha, ad->alpha);
    for (const auto & kv : ad->weights) {
        const llama_adapter_lora_weight * p = from_peft.get(kv.first);
        ASSERT_TRUE(p) << kv.first->name;
        EXPECT_EQ(0, memcmp(p->a->data, kv.second.a->data, ggml_nbytes(p->a))) << kv.first->name;
        EXPECT_EQ(0, memcmp(p->b->data, kv.second.b->data, ggml_nbytes(p->b))) << kv.first->name;
    }

    merge_into(*merged, *ad);
    // F32 KV caches: an F16 cache rounds the two paths' keys and values apart, which some
    // builds (NEON) amplify past the tolerance.
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    std::unique_ptr<llama_context, CtxDeleter> c1(llama_init_from_model(base.get(), cp)), c2(llama_init_from_model(merged.get(), cp));
    ASSERT_TRUE(c1 && c2);
    const std::vector<llama_token> prompt = tokenize(base.get(), "Once upon a time, there was a little dog", true);
    const std::vector<float> plain = all_logits(c1.get(), prompt);
    ASSERT_EQ(llama_set_adapter_lora(c1.get(), ad, 1.0f), 0);
    const std::vector<float> unmerged = all_logits(c1.get(), prompt), ref = all_logits(c2.get(), prompt);
    double worst = 0, moved = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        worst = std::max(worst, (double) std::fabs(unmerged[i] - ref[i]));
        moved = std::max(moved, (double) std::fabs(plain[i] - ref[i]));
        scale = std::max(scale, (double) std::fabs(ref[i]));
    }
    printf("  logits: adapter unmerged vs merged max |diff| %.2e (the adapter moves them by up to %.3f, |logit| <= %.2f)\n", worst,
           moved, scale);
    EXPECT_GT(moved, 0.05) << "the trained adapter should change the logits";
    EXPECT_LT(worst, 1e-4 * std::max(1.0, scale));

    // The programs: llama-logits --lora (unmerged) and the model llama-export-lora merged, on
    // the same prompt, against the plain-loop merge. llama-logits keeps an F16 KV cache, so
    // the comparison is the mean KL divergence (a correct F32 path lands below 1e-5 nats,
    // ../shared/README.md), against the merged weights evaluated the same way.
    cp.type_k = cp.type_v = GGML_TYPE_F16;
    std::unique_ptr<llama_context, CtxDeleter> c3(llama_init_from_model(merged.get(), cp));
    ASSERT_TRUE(c3);
    const std::vector<float> ref16 = all_logits(c3.get(), prompt);
    const std::string prompt_text = "Once upon a time, there was a little dog";
    const tu::run_result rl = tu::run_command(bin("llama-logits") + " -m " + model_path() + " --lora " + ad_path + " -p '" +
                                              prompt_text + "' -o " + dir.path + "/lora.logits");
    ASSERT_EQ(rl.status, 0) << rl.output;
    const tu::run_result re = tu::run_command(bin("llama-export-lora") + " -m " + model_path() + " --lora " + ad_path + " -o " +
                                              dir.path + "/merged.gguf");
    ASSERT_EQ(re.status, 0) << re.output;
    const tu::run_result rm = tu::run_command(bin("llama-logits") + " -m " + dir.path + "/merged.gguf -p '" + prompt_text +
                                              "' -o " + dir.path + "/merged.logits");
    ASSERT_EQ(rm.status, 0) << rm.output;
    for (const char * f : {"lora.logits", "merged.logits"}) {
        tu::LogitsFile lf;
        ASSERT_TRUE(tu::read_logits_file(dir.path + "/" + f, lf)) << f;
        ASSERT_EQ(lf.tokens, prompt) << f;
        ASSERT_EQ(lf.logits.size(), ref.size()) << f;
        const int64_t nv = (int64_t) (ref16.size() / prompt.size());
        const double kl = tu::mean_kl(lf.logits.data(), ref16.data(), (int64_t) prompt.size(), nv);
        const double kl_moved = tu::mean_kl(plain.data(), ref16.data(), (int64_t) prompt.size(), nv);
        printf("  %s against the plain-loop merge: mean KL %.2e nats (base against it: %.2e)\n", f, kl, kl_moved);
        EXPECT_LT(kl, 1e-5) << f;
    }
    llama_adapter_lora_free(ad);
}

// Options that exercise every path of the data order: shuffled JSONL, two sequences per step
// with accumulation, dropout, a validation split, a cosine schedule with warm-up, clipping.
std::string resume_data(const std::string & dir) {
    const std::string p = dir + "/data.jsonl";
    std::ofstream f(p);
    const char * stories[] = {"Tom had a red ball.", "The sun was hot and the sky was blue.", "Lily saw a big dog.",
                              "Ben and Mia went to the park to play.", "The bird sang a happy song.",
                              "Sue made a cake for her mom.", "The little fish swam fast.", "Max found a shiny stone."};
    for (int i = 0; i < 8; i++) {
        if (i % 2) f << "{\"prompt\": \"Tell me a story.\", \"completion\": \" " << stories[i] << "\"}\n";
        else f << "{\"messages\": [{\"role\": \"user\", \"content\": \"Story " << i << "\"}, {\"role\": \"assistant\", \"content\": \""
               << stories[i] << "\"}]}\n";
    }
    return "-m " + model_path() + " -f " + p + " --data-format jsonl -b 2 --grad-acc 2 --lora-dropout 0.1 --val-split 0.25 " +
           "--lr-schedule cosine --warmup 2 --grad-clip 1.0 --lr 3e-3 -t 2 --lora-targets q,v,down";
}

TEST(Finetune, ResumedRunGivesTheUninterruptedLosses) {
    TU_REQUIRE_FILE(model_path());
    tu::TempDir dir;
    const std::string args = resume_data(dir.path) + " --steps 12";
    const tu::run_result full = finetune(args + " -o " + dir.path + "/full.gguf --loss-log " + dir.path + "/full.tsv --save-every 5 " +
                                         "--checkpoint-out " + dir.path + "/ck.gguf");
    ASSERT_EQ(full.status, 0) << full.output;
    const tu::run_result res = finetune(args + " -o " + dir.path + "/res.gguf --loss-log " + dir.path + "/res.tsv --resume " +
                                        dir.path + "/ck.gguf");
    ASSERT_EQ(res.status, 0) << res.output;
    EXPECT_NE(res.output.find("resuming at step 10"), std::string::npos) << res.output;
    const std::vector<double> a = read_loss_log(dir.path + "/full.tsv"), b = read_loss_log(dir.path + "/res.tsv");
    ASSERT_EQ(a.size(), 13u);
    EXPECT_EQ(a, b) << "a resumed run must reproduce the uninterrupted losses";
    EXPECT_EQ(read_text(dir.path + "/full.gguf"), read_text(dir.path + "/res.gguf")) << "and the same adapter";

    // Another configuration is refused.
    const tu::run_result other = finetune(resume_data(dir.path) + " --steps 13 -o " + dir.path + "/x.gguf --resume " + dir.path + "/ck.gguf");
    EXPECT_NE(other.status, 0);
    EXPECT_NE(other.output.find("other options"), std::string::npos) << other.output;
    EXPECT_FALSE(tu::file_exists(dir.path + "/x.gguf"));

    // So is other data with as many sequences (one word changed).
    std::string data = read_text(dir.path + "/data.jsonl");
    data.replace(data.find("Tom"), 3, "Tim");
    std::ofstream(dir.path + "/data2.jsonl") << data;
    std::string args2 = args;
    args2.replace(args2.find("/data.jsonl"), 11, "/data2.jsonl");
    const tu::run_result changed = finetune(args2 + " -o " + dir.path + "/y.gguf --resume " + dir.path + "/ck.gguf");
    EXPECT_NE(changed.status, 0);
    EXPECT_NE(changed.output.find("other options or data"), std::string::npos) << changed.output;
    EXPECT_FALSE(tu::file_exists(dir.path + "/y.gguf"));
}

// Ctrl-C: a checkpoint is written and the program exits 0; resuming finishes with the losses of
// an uninterrupted run.
TEST(Finetune, CtrlCSavesACheckpointAndResumes) {
    TU_REQUIRE_FILE(model_path());
    TU_REQUIRE_FILE(text_path());
    tu::TempDir dir;
    const int steps = curve_steps() == 200 ? 600 : 60;
    const std::string args = "-m " + model_path() + " -f " + text_path() + " -c 24 --steps " + std::to_string(steps) +
                             " --lora-targets q,k -t 1";
    const std::string log = dir.path + "/stderr.txt";
    const std::string cmd = bin("llama-finetune") + " " + args + " -o " + dir.path + "/a.gguf --loss-log " + dir.path + "/a.tsv";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        dup2(fd, 1);
        execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char *) nullptr);
        _exit(127);
    }
    // Interrupt once training is under way (the first progress line).
    for (int i = 0; i < 6000 && read_text(log).find("step 1/") == std::string::npos; i++) usleep(10000);
    kill(pid, SIGINT);
    int st = 0;
    waitpid(pid, &st, 0);
    const std::string out = read_text(log);
    ASSERT_TRUE(WIFEXITED(st)) << out;
    EXPECT_EQ(WEXITSTATUS(st), 0) << out;
    if (out.find("interrupted") == std::string::npos) GTEST_SKIP() << "the run finished before the interrupt arrived";
    ASSERT_TRUE(tu::file_exists(dir.path + "/a.ckpt.gguf")) << out;
    EXPECT_FALSE(tu::file_exists(dir.path + "/a.gguf")) << "an interrupted run writes the checkpoint, not the adapter";

    const tu::run_result res = finetune(args + " -o " + dir.path + "/a.gguf --loss-log " + dir.path + "/a.tsv --resume " + dir.path +
                                        "/a.ckpt.gguf");
    ASSERT_EQ(res.status, 0) << res.output;
    const tu::run_result full = finetune(args + " -o " + dir.path + "/b.gguf --loss-log " + dir.path + "/b.tsv");
    ASSERT_EQ(full.status, 0) << full.output;
    const std::vector<double> a = read_loss_log(dir.path + "/a.tsv"), b = read_loss_log(dir.path + "/b.tsv");
    ASSERT_EQ(b.size(), (size_t) steps + 1);
    EXPECT_EQ(a, b);
}

TEST(Finetune, BadInputIsRefusedWithoutOutput) {
    TU_REQUIRE_FILE(model_path());
    TU_REQUIRE_FILE(text_path());
    tu::TempDir dir;
    const std::string out = dir.path + "/out.gguf";
    {
        std::ofstream(dir.path + "/empty.txt");
        std::ofstream(dir.path + "/bad.jsonl") << "{\"prompt\": \"a\", \"completion\": \"b\"}\n{not json\n";
        std::ofstream(dir.path + "/corrupt.gguf") << "GGUF this is not a model";
        const std::string m = read_text(model_path());
        std::ofstream(dir.path + "/truncated.gguf") << m.substr(0, m.size() / 2);
    }
    const std::string ktest = tu::models_dir() + "/ktest/ktest-F32.gguf";
    const std::string base = " -f " + text_path() + " -o " + out;
    struct bad_case {
        std::string args, message;
    };
    std::vector<bad_case> cases = {
        {"-m " + dir.path + "/missing.gguf" + base, "cannot load"},
        {"-m " + dir.path + "/corrupt.gguf" + base, "cannot load"},
        {"-m " + dir.path + "/truncated.gguf" + base, "cannot load"},
        {"-m " + model_path() + " -f " + dir.path + "/missing.txt -o " + out, "cannot open"},
        {"-m " + model_path() + " -f " + dir.path + "/empty.txt -o " + out, "empty"},
        {"-m " + model_path() + " -f " + dir.path + "/bad.jsonl --data-format jsonl -o " + out, "bad.jsonl:2"},
        {"-m " + model_path() + base + " --lora-targets q,nope", "unknown LoRA target"},
        {"-m " + model_path() + base + " --lora-r 0", "--lora-r"},
        {"-m " + model_path() + base + " --lora-r -3", "--lora-r"},
        {"-m " + model_path() + base + " --lr 100", "--lr"},
        {"-m " + model_path() + base + " --lr 0", "--lr"},
        {"-m " + model_path() + base + " --lr nan", "--lr"},
        {"-m " + model_path() + base + " --frobnicate", "unknown option"},
        {"-m " + model_path() + " -f " + text_path(), "-o"},
        {"-m " + model_path() + base + " --lora-in " + dir.path + "/corrupt.gguf", "--lora-in"},
        {"-m " + model_path() + base + " --lora-in " + model_path(), "not a LoRA adapter"},
        {"-m " + model_path() + base + " --resume " + dir.path + "/corrupt.gguf", "checkpoint"},
        {"-m " + model_path() + base + " --val-split 0.9", "no training sequence"},
    };
    if (tu::file_exists(ktest)) {
        // An adapter made for another model's shapes.
        const std::string other = dir.path + "/other.gguf";
        const tu::run_result r = finetune("-m " + ktest + " -f " + text_path() + " --steps 1 -o " + other);
        ASSERT_EQ(r.status, 0) << r.output;
        cases.push_back({"-m " + model_path() + base + " --lora-in " + other, "does not fit"});
    }
    const std::string tied = tu::models_dir() + "/TinyStories-656K-Q8_0.gguf";
    if (tu::file_exists(tied)) cases.push_back({"-m " + tied + base + " --lora-targets output", "no tensor output.weight"});
    for (const auto & c : cases) {
        const tu::run_result r = finetune(c.args);
        EXPECT_NE(r.status, 0) << c.args << "\n" << r.output;
        EXPECT_LT(r.status, 128) << "crashed: " << c.args << "\n" << r.output;
        EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
        EXPECT_FALSE(tu::file_exists(out)) << c.args;
    }
    std::vector<std::string> left = dir.files();
    for (const auto & f : left) EXPECT_EQ(f.find(".tmp"), std::string::npos) << "temporary file left: " << f;
}

}  // namespace
