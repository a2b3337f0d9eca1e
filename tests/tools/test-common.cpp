// test-common.cpp - common/: the table of options the programs share, held to llama.cpp's option
// names (every option llama.cpp's llama-cli and llama-perplexity take is known here: taken, or
// refused as "not supported" with a reason, never an unknown option), the parser (values, ranges,
// LLAMA_ARG_* environment variables, the command line over the environment), --help's grouping,
// and the programs that use it: llama.cpp's flags that were missing (llama-tokenize --stdin,
// --show-count, --no-escape, escapes; llama-perplexity -ub, -tb, --lora, --seed, -p; llama-cli
// --no-context-shift, added as one table entry for both programs).
#include "arg.h"
#include "common.h"
#include "llama-adapter.h"
#include "llama-model.h"
#include "test-util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

// The options of llama.cpp's llama-cli and llama-perplexity (build 4747, common/arg.cpp), one
// name each.
const std::vector<std::string> LLAMA_CPP_MAIN = {
    "--usage", "--version", "--completion-bash", "--verbose-prompt", "--no-display-prompt", "--color", "--threads", "--threads-batch",
    "--cpu-mask", "--cpu-range", "--cpu-strict", "--prio", "--poll", "--cpu-mask-batch", "--cpu-range-batch", "--cpu-strict-batch",
    "--prio-batch", "--poll-batch", "--ctx-size", "--n-predict", "--batch-size", "--ubatch-size", "--keep", "--no-context-shift",
    "--flash-attn", "--prompt", "--no-perf", "--file", "--binary-file", "--escape", "--no-escape", "--print-token-count",
    "--prompt-cache", "--prompt-cache-all", "--prompt-cache-ro", "--reverse-prompt", "--special", "--conversation",
    "--no-conversation", "--interactive", "--interactive-first", "--multiline-input", "--in-prefix-bos", "--in-prefix", "--in-suffix",
    "--no-warmup", "--samplers", "--seed", "--sampler-seq", "--ignore-eos", "--temp", "--top-k", "--top-p", "--min-p", "--top-nsigma",
    "--xtc-probability", "--xtc-threshold", "--typical", "--repeat-last-n", "--repeat-penalty", "--presence-penalty",
    "--frequency-penalty", "--dry-multiplier", "--dry-base", "--dry-allowed-length", "--dry-penalty-last-n", "--dry-sequence-breaker",
    "--dynatemp-range", "--dynatemp-exp", "--mirostat", "--mirostat-lr", "--mirostat-ent", "--logit-bias", "--grammar",
    "--grammar-file", "--json-schema", "--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "--yarn-orig-ctx",
    "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast", "--grp-attn-n", "--grp-attn-w",
    "--dump-kv-cache", "--no-kv-offload", "--cache-type-k", "--cache-type-v", "--defrag-thold", "--parallel", "--rpc", "--mlock",
    "--no-mmap", "--numa", "--device", "--list-devices", "--n-gpu-layers", "--split-mode", "--tensor-split", "--main-gpu",
    "--check-tensors", "--override-kv", "--lora", "--lora-scaled", "--control-vector", "--control-vector-scaled",
    "--control-vector-layer-range", "--model", "--model-url", "--hf-repo", "--hf-repo-draft", "--hf-file", "--hf-repo-v",
    "--hf-file-v", "--hf-token", "--jinja", "--reasoning-format", "--chat-template", "--chat-template-file", "--simple-io",
    "--log-disable", "--log-file", "--log-colors", "--log-verbose", "--log-verbosity", "--log-prefix", "--log-timestamps"};
const std::vector<std::string> LLAMA_CPP_PERPLEXITY_ONLY = {
    "--chunks", "--all-logits", "--hellaswag", "--hellaswag-tasks", "--winogrande", "--winogrande-tasks", "--multiple-choice",
    "--multiple-choice-tasks", "--kl-divergence", "--kl-divergence-base", "--ppl-stride", "--ppl-output-type"};
// What llama-cli takes of llama.cpp's main only (perplexity takes the rest of LLAMA_CPP_MAIN).
const std::vector<std::string> MAIN_ONLY = {"--no-display-prompt", "--color", "--print-token-count", "--prompt-cache",
                                            "--prompt-cache-all", "--prompt-cache-ro", "--reverse-prompt", "--special", "--conversation",
                                            "--no-conversation", "--interactive", "--interactive-first", "--multiline-input",
                                            "--in-prefix-bos", "--in-prefix", "--in-suffix", "--no-warmup", "--top-nsigma", "--grp-attn-n",
                                            "--grp-attn-w", "--jinja", "--reasoning-format", "--chat-template",
                                            "--chat-template-file", "--simple-io"};

const common_arg * find(const std::vector<common_arg> & table, const std::string & name) {
    for (const common_arg & a : table) {
        for (const auto & n : a.args) {
            if (n == name) return &a;
        }
    }
    return nullptr;
}

bool parse(std::vector<std::string> args, common_params & p, llama_example ex) {
    args.insert(args.begin(), "prog");
    std::vector<char *> argv;
    for (auto & a : args) argv.push_back(&a[0]);
    return common_params_parse((int) argv.size(), argv.data(), p, ex);
}

std::string bin(const std::string & prog) { return std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog; }
std::string model() { return tu::models_dir() + "/stories260K.gguf"; }

}  // namespace

TEST(CommonArgs, EveryLlamaCppOptionIsKnown) {
    size_t taken = 0, refused = 0;
    for (llama_example ex : {LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY}) {
        const std::vector<common_arg> table = common_args_for(ex);
        std::vector<std::string> names;
        for (const auto & n : LLAMA_CPP_MAIN) {
            if (ex == LLAMA_EXAMPLE_MAIN || std::find(MAIN_ONLY.begin(), MAIN_ONLY.end(), n) == MAIN_ONLY.end()) names.push_back(n);
        }
        if (ex == LLAMA_EXAMPLE_PERPLEXITY) names.insert(names.end(), LLAMA_CPP_PERPLEXITY_ONLY.begin(), LLAMA_CPP_PERPLEXITY_ONLY.end());
        EXPECT_EQ(names.size(), ex == LLAMA_EXAMPLE_MAIN ? 130u : 117u);
        for (const auto & n : names) {
            const common_arg * a = find(table, n);
            ASSERT_NE(a, nullptr) << common_example_name(ex) << " does not know llama.cpp's " << n;
            if (a->unsupported.empty()) {
                taken++;
            } else {
                refused++;
                EXPECT_GT(a->unsupported.size(), 20u) << n << ": a reason";
            }
        }
    }
    printf("  llama.cpp's options of llama-cli and llama-perplexity: %zu taken, %zu refused as not supported\n", taken, refused);
}

TEST(CommonArgs, ValuesRangesAndEnvironment) {
    common_params p;
    ASSERT_TRUE(parse({"-m", "x.gguf", "-c", "128", "--temp", "0.5", "-ctk", "q8_0", "--lora-scaled", "a.gguf", "0.5", "-fa", "-ngl", "all"}, p,
                      LLAMA_EXAMPLE_MAIN));
    EXPECT_EQ(p.model, "x.gguf");
    EXPECT_EQ(p.n_ctx, 128);
    EXPECT_FLOAT_EQ(p.sampling.temp, 0.5f);
    EXPECT_EQ(p.cache_type_k, GGML_TYPE_Q8_0);
    ASSERT_EQ(p.lora_adapters.size(), 1u);
    EXPECT_FLOAT_EQ(p.lora_adapters[0].scale, 0.5f);
    EXPECT_TRUE(p.flash_attn);
    EXPECT_EQ(p.n_gpu_layers, 999);
    common_params q;
    ASSERT_TRUE(parse({"-fa", "off", "--no-context-shift"}, q, LLAMA_EXAMPLE_MAIN));
    EXPECT_FALSE(q.flash_attn);
    EXPECT_FALSE(q.ctx_shift);

    for (const auto & bad : std::vector<std::vector<std::string>>{
             {"-c", "-5"}, {"-c", "12x"}, {"--top-p", "2"}, {"--temp", "nan"}, {"-ctk", "q9"}, {"--frobnicate"}, {"-c"}, {"--grammar", "x"}}) {
        common_params r;
        EXPECT_FALSE(parse(bad, r, LLAMA_EXAMPLE_MAIN)) << bad[0];
    }
    common_params t;
    EXPECT_FALSE(parse({"--temp", "1"}, t, LLAMA_EXAMPLE_TOKENIZE)) << "a program takes only its own options";

    // LLAMA_ARG_*: set what the command line does not.
    setenv("LLAMA_ARG_CTX_SIZE", "256", 1);
    setenv("LLAMA_ARG_MODEL", "env.gguf", 1);
    setenv("LLAMA_ARG_NO_CONTEXT_SHIFT", "1", 1);
    common_params e;
    ASSERT_TRUE(parse({"-m", "cmdline.gguf"}, e, LLAMA_EXAMPLE_MAIN));
    EXPECT_EQ(e.n_ctx, 256);
    EXPECT_EQ(e.model, "cmdline.gguf");
    EXPECT_FALSE(e.ctx_shift);
    common_params e2;
    ASSERT_TRUE(parse({"--ctx-size", "64"}, e2, LLAMA_EXAMPLE_PERPLEXITY));
    EXPECT_EQ(e2.n_ctx, 64);
    EXPECT_EQ(e2.model, "env.gguf");
    setenv("LLAMA_ARG_CTX_SIZE", "lots", 1);
    common_params e3;
    EXPECT_FALSE(parse({}, e3, LLAMA_EXAMPLE_MAIN)) << "a bad environment value is an error too";
    unsetenv("LLAMA_ARG_CTX_SIZE");
    unsetenv("LLAMA_ARG_MODEL");
    unsetenv("LLAMA_ARG_NO_CONTEXT_SHIFT");
}

TEST(CommonArgs, HelpIsGroupedAsLlamaCpps) {
    const std::string h = common_params_help(LLAMA_EXAMPLE_MAIN);
    const size_t c = h.find("----- common params -----"), s = h.find("----- sampling params -----"),
                 e = h.find("----- example-specific params -----");
    ASSERT_NE(c, std::string::npos);
    ASSERT_NE(s, std::string::npos);
    ASSERT_NE(e, std::string::npos);
    EXPECT_LT(c, s);
    EXPECT_LT(s, e);
    EXPECT_NE(h.find("(env: LLAMA_ARG_CTX_SIZE)"), std::string::npos);
    EXPECT_NE(h.find("--no-context-shift"), std::string::npos);
    EXPECT_NE(h.find("--rope-freq-base N"), std::string::npos);
    EXPECT_NE(h.find("(env: LLAMA_ARG_YARN_BETA_FAST)"), std::string::npos);
    EXPECT_NE(h.find("not supported: self-extend"), std::string::npos);
    EXPECT_NE(h.find("--grammar GRAMMAR"), std::string::npos);
    EXPECT_GT(h.find("--top-k N"), s) << "sampling options in their group";
    EXPECT_EQ(common_params_help(LLAMA_EXAMPLE_TOKENIZE).find("--temp"), std::string::npos);
}

// --no-context-shift: llama-cli stops at a full context (exit 0) instead of shifting it.
TEST(CommonPrograms, NoContextShiftStopsAtAFullContext) {
    TU_REQUIRE_FILE(model());
    const std::string args = " -m " + model() + " -c 32 -n 64 --ignore-eos --temp 0 -t 2 -p 'Once upon a time'";
    std::string err;
    const tu::run_result shifted = tu::run_command(bin("llama-cli") + args, &err);
    ASSERT_EQ(shifted.status, 0) << err;
    EXPECT_NE(err.find("context full"), std::string::npos) << err;
    const tu::run_result stopped = tu::run_command(bin("llama-cli") + args + " --no-context-shift", &err);
    ASSERT_EQ(stopped.status, 0) << err;
    EXPECT_NE(err.find("context shift is disabled"), std::string::npos) << err;
    std::string text = stopped.output;
    while (!text.empty() && text.back() == '\n') text.pop_back();  // the line end after generation
    EXPECT_LT(text.size() + 20, shifted.output.size());
    EXPECT_EQ(shifted.output.compare(0, text.size(), text), 0) << "the same text up to the stop";
    const tu::run_result env = tu::run_command("LLAMA_ARG_NO_CONTEXT_SHIFT=1 " + bin("llama-cli") + args, &err);
    EXPECT_EQ(env.output, stopped.output) << "the same through its environment variable";
    // A llama.cpp option whose feature is absent: "not supported", with the reason, exit 1.
    const tu::run_result g = tu::run_command(bin("llama-cli") + args + " -gan 2", &err);
    EXPECT_EQ(g.status, 1);
    EXPECT_NE(err.find("'-gan' is not supported: self-extend (grouped attention) is not implemented"), std::string::npos) << err;
}

// RoPE overrides (context extension): --rope-freq-base and --rope-scale change the text (the model
// rotates otherwise), --rope-scaling none with a scale is the default's text; a bad method is refused.
TEST(CommonPrograms, RopeOptionsAreHonoured) {
    TU_REQUIRE_FILE(model());
    const std::string args = " -m " + model() + " -c 64 -n 24 --temp 0 -t 2 -p 'Once upon a time' --no-display-prompt";
    std::string err;
    const tu::run_result base = tu::run_command(bin("llama-cli") + args, &err);
    ASSERT_EQ(base.status, 0) << err;
    const tu::run_result freq = tu::run_command(bin("llama-cli") + args + " --rope-freq-base 100", &err);
    ASSERT_EQ(freq.status, 0) << err;
    EXPECT_NE(freq.output, base.output);
    const tu::run_result scaled = tu::run_command(bin("llama-cli") + args + " --rope-scale 4", &err);
    ASSERT_EQ(scaled.status, 0) << err;
    EXPECT_NE(scaled.output, base.output);
    const tu::run_result none = tu::run_command(bin("llama-cli") + args + " --rope-scale 4 --rope-scaling none", &err);
    ASSERT_EQ(none.status, 0) << err;
    EXPECT_EQ(none.output, base.output);
    const tu::run_result env = tu::run_command("LLAMA_ARG_ROPE_SCALE=4 " + bin("llama-cli") + args, &err);
    EXPECT_EQ(env.output, scaled.output);
    const tu::run_result bad = tu::run_command(bin("llama-cli") + args + " --rope-scaling ntk", &err);
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(err.find("none, linear, yarn"), std::string::npos) << err;
}

// --grammar / --grammar-file / -j: the output is a string of the grammar; one that does not parse
// is refused at startup (exit 1) with the parser's message.
TEST(CommonPrograms, GrammarConstrainsTheOutput) {
    TU_REQUIRE_FILE(model());
    const std::string args = " -m " + model() + " -n 6 --temp 0 -t 2 -p 'Once upon a time' --no-display-prompt";
    std::string err;
    const tu::run_result yn = tu::run_command(bin("llama-cli") + args + " --grammar 'root ::= \"yes\" | \"no\"'", &err);
    ASSERT_EQ(yn.status, 0) << err;
    EXPECT_TRUE(yn.output == "yes\n" || yn.output == "no\n" || yn.output == "yes" || yn.output == "no") << "'" << yn.output << "'";
    tu::TempDir dir;
    std::ofstream(dir.path + "/g.gbnf") << "# a comment\nroot ::= [a-c]{3} \"!\"\n";
    const tu::run_result file = tu::run_command(bin("llama-cli") + args + " --grammar-file " + dir.path + "/g.gbnf", &err);
    ASSERT_EQ(file.status, 0) << err;
    std::string text = file.output;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EXPECT_EQ(text.size(), 4u) << text;
    EXPECT_EQ(text.find_first_not_of("abc"), 3u) << text;
    EXPECT_EQ(text.back(), '!') << text;
#ifdef LLAMA_JSON_SCHEMA
    const tu::run_result js = tu::run_command(bin("llama-cli") + args + " -j '{\"type\": \"boolean\"}'", &err);
    ASSERT_EQ(js.status, 0) << err;
    EXPECT_TRUE(js.output.rfind("true", 0) == 0 || js.output.rfind("false", 0) == 0) << js.output;
    const tu::run_result badjs = tu::run_command(bin("llama-cli") + args + " -j '{\"type\": \"string\", \"pattern\": \"a+\"}'", &err);
    EXPECT_EQ(badjs.status, 1);
    EXPECT_NE(err.find("pattern not supported"), std::string::npos) << err;
#endif
    const tu::run_result bad = tu::run_command(bin("llama-cli") + args + " --grammar 'root ::= \"yes\" | maybe'", &err);
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(err.find("undefined rule 'maybe'"), std::string::npos) << err;
    EXPECT_EQ(bad.output, "");
}

// llama-tokenize: llama.cpp's flags and output (escapes processed unless --no-escape).
TEST(CommonPrograms, TokenizeTakesLlamaCppsFlags) {
    TU_REQUIRE_FILE(model());
    tu::TempDir dir;
    std::ofstream(dir.path + "/nl.txt") << "a\nb";
    const std::string m = " -m " + model() + " --log-disable";
    const tu::run_result file = tu::run_command(bin("llama-tokenize") + m + " -f " + dir.path + "/nl.txt --ids");
    const tu::run_result esc = tu::run_command(bin("llama-tokenize") + m + " -p 'a\\nb' --ids");
    const tu::run_result raw = tu::run_command(bin("llama-tokenize") + m + " -p 'a\\nb' --ids --no-escape");
    const tu::run_result in = tu::run_command("printf 'a\\nb' | " + bin("llama-tokenize") + m + " --stdin --ids --show-count");
    ASSERT_EQ(file.status, 0) << file.output;
    EXPECT_EQ(esc.output, file.output) << "\\n in -p is a newline";
    EXPECT_NE(raw.output, file.output) << "--no-escape keeps the backslash";
    EXPECT_EQ(in.output, file.output + "Total number of tokens: 4\n");
    const tu::run_result lines = tu::run_command(bin("llama-tokenize") + m + " -p 'Once upon'");
    EXPECT_EQ(lines.output, "     1 -> '<s>'\n   403 -> ' Once'\n   407 -> ' upon'\n") << "llama.cpp's lines, no list";
    const tu::run_result both = tu::run_command(bin("llama-tokenize") + m + " -p x --stdin < /dev/null");
    EXPECT_EQ(both.status, 1);
    EXPECT_NE(both.output.find("mutually exclusive"), std::string::npos) << both.output;
}

// llama-perplexity: llama.cpp's -ub, -tb, --seed (no effect: noted), -p, --lora, --no-context-shift.
TEST(CommonPrograms, PerplexityTakesLlamaCppsFlags) {
    TU_REQUIRE_FILE(model());
    tu::TempDir dir;
    std::string story;
    for (int i = 0; i < 12; i++) story += "Once upon a time, there was a little girl named Lily. She liked to play in the park. ";
    std::ofstream(dir.path + "/story.txt") << story;
    const std::string base = bin("llama-perplexity") + " -m " + model() + " -c 64 --chunks 2 -t 2 ";
    std::string err;
    const tu::run_result plain = tu::run_command(base + "-f " + dir.path + "/story.txt", &err);
    ASSERT_EQ(plain.status, 0) << err;
    const tu::run_result flags = tu::run_command(base + "-f " + dir.path + "/story.txt -ub 16 -tb 1 --seed 7 --no-context-shift", &err);
    ASSERT_EQ(flags.status, 0) << err;
    EXPECT_NE(err.find("--seed has no effect here"), std::string::npos) << err;
    auto final_ppl = [](const std::string & e) {
        const size_t at = e.find("Final estimate: PPL = ");
        return at == std::string::npos ? -1.0 : std::stod(e.substr(at + 22));
    };
    std::string plain_err;
    tu::run_command(base + "-f " + dir.path + "/story.txt", &plain_err);
    const double p0 = final_ppl(plain_err + plain.output), p1 = final_ppl(err + flags.output);
    ASSERT_GT(p0, 0);
    EXPECT_NEAR(p1, p0, 1e-3 * p0) << "micro-batches of 16 change the sums' order only";
    const tu::run_result by_p = tu::run_command(base + "-p '" + story + "'", &err);
    EXPECT_EQ(by_p.status, 0) << err;
    EXPECT_NEAR(final_ppl(err + by_p.output), p0, 1e-3 * p0) << "-p TEXT scores the text as -f does";
    // --lora: an adapter moves the perplexity; at scale 0 it does not.
    {
        llama_model * m = llama_model_load_from_file(model().c_str(), llama_model_default_params());
        ASSERT_NE(m, nullptr);
        llama_adapter_lora ad;
        std::string e;
        ASSERT_TRUE(llama_adapter_lora_create(ad, *m, {"q", "v"}, 4, 8.0f, e)) << e;
        for (auto & kv : ad.weights) {
            for (ggml_tensor * t : {kv.second.a, kv.second.b}) {
                float * d = (float *) t->data;
                for (int64_t i = 0; i < ggml_nelements(t); i++) d[i] = 0.05f * (float) ((i * 7919) % 13 - 6);
            }
        }
        ASSERT_TRUE(llama_adapter_lora_save_gguf(ad, *m, dir.path + "/a.gguf", GGML_TYPE_F32, e)) << e;
        llama_model_free(m);
    }
    const tu::run_result lora = tu::run_command(base + "-f " + dir.path + "/story.txt --lora " + dir.path + "/a.gguf", &err);
    ASSERT_EQ(lora.status, 0) << err;
    EXPECT_GT(std::fabs(final_ppl(err + lora.output) - p0), 1e-3 * p0) << "the adapter changes the perplexity";
    const tu::run_result zero = tu::run_command(base + "-f " + dir.path + "/story.txt --lora-scaled " + dir.path + "/a.gguf 0", &err);
    EXPECT_NEAR(final_ppl(err + zero.output), p0, 1e-6 * p0) << "scale 0: the base's";

    const tu::run_result refused = tu::run_command(base + "-f " + dir.path + "/story.txt -dt 0.1", &err);
    EXPECT_EQ(refused.status, 1);
    EXPECT_NE(err.find("'-dt' is not supported"), std::string::npos) << err;
    // the benchmarks exist: a HellaSwag file of one line is refused for its data, not its flag
    const tu::run_result task = tu::run_command(base + "-f " + dir.path + "/story.txt --hellaswag", &err);
    EXPECT_EQ(task.status, 1);
    EXPECT_NE(err.find("not a multiple of 6"), std::string::npos) << err;
}

// llama.cpp's llama-bench, llama-quantize and llama-export-lora options (build 4747's --help and
// parsers): each known here, taken or refused with a reason.
TEST(CommonArgs, EveryLlamaCppBenchQuantizeAndExportOptionIsKnown) {
    const std::pair<llama_example, std::vector<std::string>> programs[] = {
        {LLAMA_EXAMPLE_BENCH, {"-h", "--help", "-m", "--model", "-p", "--n-prompt", "-n", "--n-gen", "-pg", "-b", "--batch-size",
                               "-ub", "--ubatch-size", "-ctk", "--cache-type-k", "-ctv", "--cache-type-v", "-t", "--threads", "-C",
                               "--cpu-mask", "--cpu-strict", "--poll", "-ngl", "--n-gpu-layers", "-rpc", "--rpc", "-sm",
                               "--split-mode", "-mg", "--main-gpu", "-nkvo", "--no-kv-offload", "--numa", "-fa", "--flash-attn",
                               "-mmp", "--mmap", "-embd", "--embeddings", "-ts", "--tensor-split", "-r", "--repetitions", "--prio",
                               "--delay", "-o", "--output", "-oe", "--output-err", "-v", "--verbose", "--progress"}},
        {LLAMA_EXAMPLE_QUANTIZE, {"--allow-requantize", "--leave-output-tensor", "--pure", "--imatrix", "--include-weights",
                                  "--exclude-weights", "--output-tensor-type", "--token-embedding-type", "--override-kv", "--keep-split"}},
        {LLAMA_EXAMPLE_EXPORT_LORA, {"-m", "--model", "--lora", "--lora-scaled", "-t", "--threads", "-o", "--output"}},
    };
    for (const auto & [ex, names] : programs) {
        const std::vector<common_arg> table = common_args_for(ex);
        size_t taken = 0, refused = 0;
        for (const auto & n : names) {
            const common_arg * a = find(table, n);
            ASSERT_NE(a, nullptr) << common_example_name(ex) << " does not know llama.cpp's " << n;
            (a->unsupported.empty() ? taken : refused)++;
        }
        printf("  %s: %zu of llama.cpp's options taken, %zu refused as not supported\n", common_example_name(ex), taken, refused);
    }
}

// A chat template that is none of the built-in formats is refused when given (as llama.cpp).
TEST(CommonArgs, UnknownChatTemplateIsRefused) {
    std::string err;
    const tu::run_result r = tu::run_command(bin("llama-cli") + " -m " + model() + " --chat-template nonsense -p hi -n 1", &err);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(err.find("invalid value for --chat-template: the chat template is none of the supported formats (chatml, gemma, llama2"),
              std::string::npos) << err;
    tu::TempDir dir;
    std::ofstream(dir.path + "/t.jinja") << "{% for m in messages %}{{ m.content }}{% endfor %}";
    const tu::run_result f = tu::run_command(bin("llama-cli") + " -m " + model() + " --chat-template-file " + dir.path + "/t.jinja -p hi -n 1", &err);
    EXPECT_EQ(f.status, 1);
    EXPECT_NE(err.find("--chat-template-file"), std::string::npos) << err;
    const tu::run_result ok = tu::run_command(bin("llama-cli") + " -m " + model() + " --chat-template llama3 -p hi -n 1 -no-cnv", &err);
    EXPECT_EQ(ok.status, 0) << err;
}

// --override-kv and --check-tensors reach the loader (llama_model_params.kv_overrides, check_tensors).
TEST(CommonPrograms, OverrideKvAndCheckTensors) {
    std::string err;
    const std::string base = bin("llama-cli") + " -m " + model() + " -p hi -n 1 -no-cnv --temp 0 ";
    const tu::run_result ov = tu::run_command(base + "--override-kv general.name=str:renamed --override-kv llama.context_length=int:64 "
                                              "--check-tensors", &err);
    EXPECT_EQ(ov.status, 0) << err;
    EXPECT_NE(err.find("override general.name = 'renamed'"), std::string::npos) << err;
    EXPECT_NE(err.find("override llama.context_length = 64"), std::string::npos) << err;
    const tu::run_result bad = tu::run_command(base + "--override-kv general.name=text:x", &err);
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(err.find("invalid value for --override-kv: 'general.name=text:x': TYPE must be int, float, bool or str"), std::string::npos) << err;
}

// -ptc N: with -v, a token count every N cached tokens; --in-prefix-bos: a BOS before each input
// (the input's tokens are then one more: --verbose-prompt is not needed, the count shows it).
TEST(CommonPrograms, PrintTokenCountAndInPrefixBos) {
    std::string err;
    const tu::run_result r = tu::run_command(bin("llama-cli") + " -m " + model() + " -p 'Once upon' -n 12 -no-cnv --temp 0 -ptc 4 -v", &err);
    EXPECT_EQ(r.status, 0) << err;
    size_t n = 0;
    for (size_t at = err.find("Tokens consumed so far = "); at != std::string::npos; at = err.find("Tokens consumed so far = ", at + 1)) n++;
    EXPECT_EQ(n, 3u) << err;  // at 4, 8 and 12 cached tokens (the prompt is 3 with BOS, then 12 generated: 4, 8, 12)
    const tu::run_result bos = tu::run_command("printf 'Lily\n' | " + bin("llama-cli") + " -m " + model() +
                                               " -p 'Once' -n 2 -i --temp 0 --in-prefix-bos --in-prefix ' ' -r 'xyz'", &err);
    EXPECT_EQ(bos.status, 0) << err;
}

// Options that print and exit: the device list, a bash completion script that bash can read.
TEST(CommonPrograms, ListDevicesCompletionAndSpecial) {
    const tu::run_result devices = tu::run_command(bin("llama-cli") + " --list-devices");
    EXPECT_EQ(devices.status, 0);
    EXPECT_EQ(devices.output.rfind("Available devices:\n", 0), 0u) << devices.output;
    tu::TempDir dir;
    const tu::run_result script = tu::run_command(bin("llama-cli") + " --completion-bash > " + dir.path + "/c.sh && bash -n " + dir.path + "/c.sh");
    EXPECT_EQ(script.status, 0) << script.output;
    std::ifstream in(dir.path + "/c.sh");
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_NE(ss.str().find("complete -F _llama_cli_completions llama-cli"), std::string::npos) << ss.str();
    EXPECT_NE(ss.str().find("--ctx-size"), std::string::npos);
    // -sp: special tokens printed as text; the run works with it
    std::string err;
    const tu::run_result sp = tu::run_command(bin("llama-cli") + " -m " + model() + " -p 'Once' -n 4 --temp 0 -sp -no-cnv", &err);
    EXPECT_EQ(sp.status, 0) << err;
}
