// test-finetune-mpi.cpp - llama-finetune data-parallel under mpirun (built with -DGGML_MPI=ON
// only; the processes run on this machine, oversubscribing its cores):
//  - N processes with batch b against one process with batch N x b on the same data order, for
//    N = 2 and 3: the same losses and adapter up to the order of the float sums (with gradient
//    accumulation, dropout, a validation split, a cosine schedule and clipping);
//  - a checkpoint written by one process count resumed by another;
//  - a process that dies: the others end within seconds with a message, nothing hangs;
//  - SIGUSR1 to mpirun: a checkpoint, then exit 0 (mpirun's own Ctrl-C ends the job at once).
#include "test-util.h"

#include "ggml.h"
#include "gguf.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef LLAMA_MPIEXEC
#define LLAMA_MPIEXEC "mpirun"
#endif

namespace {

std::string finetune_bin() { return std::string(LLAMA_BIN_DIR) + "/llama-finetune"; }
std::string model_path() { return tu::models_dir() + "/stories260K.gguf"; }

// mpirun with what this machine needs: Open MPI refuses root without the two variables and
// more processes than cores without --oversubscribe (MPICH needs neither).
std::string mpirun(int np) {
    static const std::string extra = [] {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        const tu::run_result v = tu::run_command(std::string(LLAMA_MPIEXEC) + " --version");
        return v.output.find("Open MPI") != std::string::npos || v.output.find("OpenRTE") != std::string::npos
                   ? std::string(" --oversubscribe")
                   : std::string();
    }();
    return std::string("timeout 300 ") + LLAMA_MPIEXEC + extra + " -np " + std::to_string(np) + " ";
}

tu::run_result one_process(const std::string & args) { return tu::run_command("timeout 300 " + finetune_bin() + " " + args); }
tu::run_result processes(int np, const std::string & args) { return tu::run_command(mpirun(np) + finetune_bin() + " " + args); }

std::vector<double> read_losses(const std::string & path) {
    std::ifstream f(path);
    std::string line;
    std::vector<double> out;
    if (!std::getline(f, line)) return out;
    while (std::getline(f, line)) {
        std::istringstream ss(line);
        long step;
        double loss;
        ss >> step >> loss;
        out.push_back(loss);
    }
    return out;
}

// Every tensor of a GGUF file, by name.
std::vector<std::pair<std::string, std::vector<float>>> read_tensors(const std::string & path) {
    std::vector<std::pair<std::string, std::vector<float>>> out;
    ggml_context * ctx = nullptr;
    gguf_init_params ip = {};
    ip.no_alloc = false;
    ip.ctx = &ctx;
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    if (!g) return out;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        const ggml_tensor * t = ggml_get_tensor(ctx, gguf_get_tensor_name(g, i));
        if (!t || t->type != GGML_TYPE_F32) continue;
        const float * d = (const float *) t->data;
        out.emplace_back(t->name, std::vector<float>(d, d + ggml_nelements(t)));
    }
    gguf_free(g);
    ggml_free(ctx);
    return out;
}

// The largest difference of two adapters relative to the largest value of the tensor.
double adapter_rel_dev(const std::string & a, const std::string & b) {
    const auto ta = read_tensors(a), tb = read_tensors(b);
    if (ta.empty() || ta.size() != tb.size()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < ta.size(); i++) {
        if (ta[i].first != tb[i].first || ta[i].second.size() != tb[i].second.size()) return INFINITY;
        double amax = 0, dmax = 0;
        for (size_t k = 0; k < ta[i].second.size(); k++) {
            amax = std::max(amax, (double) std::fabs(tb[i].second[k]));
            dmax = std::max(dmax, (double) std::fabs(ta[i].second[k] - tb[i].second[k]));
        }
        worst = std::max(worst, amax > 0 ? dmax / amax : dmax);
    }
    return worst;
}

double losses_rel_dev(const std::vector<double> & a, const std::vector<double> & b) {
    if (a.size() != b.size() || a.empty()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
    return worst;
}

// Eight short documents as JSONL (prompt/completion and chat): six training sequences and two
// validation ones, and options that exercise every path of the data order and the step.
std::string run_args(const std::string & dir, int steps) {
    const std::string p = dir + "/data.jsonl";
    if (!tu::file_exists(p)) {
        std::ofstream f(p);
        const char * stories[] = {"Tom had a red ball.", "The sun was hot and the sky was blue.", "Lily saw a big dog.",
                                  "Ben and Mia went to the park to play.", "The bird sang a happy song.",
                                  "Sue made a cake for her mom.", "The little fish swam fast.", "Max found a shiny stone."};
        for (int i = 0; i < 8; i++) {
            if (i % 2) f << "{\"prompt\": \"Tell me a story.\", \"completion\": \" " << stories[i] << "\"}\n";
            else f << "{\"messages\": [{\"role\": \"user\", \"content\": \"Story " << i << "\"}, {\"role\": \"assistant\", \"content\": \""
                   << stories[i] << "\"}]}\n";
        }
    }
    return "-m " + model_path() + " -f " + p + " --data-format jsonl --grad-acc 2 --lora-dropout 0.1 --val-split 0.25 " +
           "--lr-schedule cosine --warmup 2 --grad-clip 1.0 --lr 3e-3 --lora-targets q,v,down --steps " + std::to_string(steps);
}

// Measured (2026-11-24): losses within 1.3e-7 relative, adapters within 1.7e-4 of the largest
// value of each tensor (AdamW divides by the root of the second moment, which magnifies the
// rounding of gradients near zero). Errors of the data split or of the scaling move the losses
// by percents.
constexpr double kLossTol = 1e-5, kAdapterTol = 1e-3;

void expect_same_as_one_process(int np, int b) {
    TU_REQUIRE_FILE(model_path());
    tu::TempDir dir;
    const std::string args = run_args(dir.path, 8);
    const tu::run_result one = one_process(args + " -b " + std::to_string(np * b) + " -t 1 -o " + dir.path + "/one.gguf --loss-log " +
                                           dir.path + "/one.tsv");
    ASSERT_EQ(one.status, 0) << one.output;
    const tu::run_result many = processes(np, args + " -b " + std::to_string(b) + " -t 1 -o " + dir.path + "/many.gguf --loss-log " +
                                                  dir.path + "/many.tsv");
    ASSERT_EQ(many.status, 0) << many.output;
    EXPECT_NE(many.output.find("data-parallel over " + std::to_string(np) + " MPI processes"), std::string::npos) << many.output;
    EXPECT_EQ(many.output.find("differ"), std::string::npos) << many.output;
    // Rank 0 alone reports: one summary line.
    size_t n_summary = 0;
    for (size_t at = many.output.find("adapter written to"); at != std::string::npos; at = many.output.find("adapter written to", at + 1)) n_summary++;
    EXPECT_EQ(n_summary, 1u) << many.output;

    const std::vector<double> a = read_losses(dir.path + "/one.tsv"), m = read_losses(dir.path + "/many.tsv");
    ASSERT_EQ(a.size(), 9u);
    const double dl = losses_rel_dev(m, a), da = adapter_rel_dev(dir.path + "/many.gguf", dir.path + "/one.gguf");
    printf("  %d processes x b %d against 1 x b %d: losses %.4f -> %.4f, max relative deviation %.2e; adapter %.2e\n", np, b, np * b,
           a.front(), a.back(), dl, da);
    EXPECT_LT(dl, kLossTol);
    EXPECT_LT(da, kAdapterTol);
    EXPECT_GT(std::fabs(a.front() - a.back()), 0.1) << "the run must train";
}

TEST(FinetuneMpi, TwoProcessesMatchOneWithTwiceTheBatch) { expect_same_as_one_process(2, 2); }
TEST(FinetuneMpi, ThreeProcessesMatchOneWithThriceTheBatch) { expect_same_as_one_process(3, 1); }

// A checkpoint resumes with any process count whose batch (processes x -b) is the run's.
TEST(FinetuneMpi, ResumeWithAnotherProcessCount) {
    TU_REQUIRE_FILE(model_path());
    tu::TempDir dir;
    const std::string args = run_args(dir.path, 10) + " --save-every 4";
    const tu::run_result full = one_process(args + " -b 4 -t 1 -o " + dir.path + "/full.gguf --loss-log " + dir.path +
                                            "/full.tsv --checkpoint-out " + dir.path + "/ck1.gguf");
    ASSERT_EQ(full.status, 0) << full.output;
    const std::vector<double> ref = read_losses(dir.path + "/full.tsv");
    ASSERT_EQ(ref.size(), 11u);

    // Written by one process (step 8), resumed by two.
    const tu::run_result r2 = processes(2, args + " -b 2 -t 1 -o " + dir.path + "/r2.gguf --loss-log " + dir.path + "/r2.tsv --resume " +
                                               dir.path + "/ck1.gguf --checkpoint-out " + dir.path + "/unused.gguf");
    ASSERT_EQ(r2.status, 0) << r2.output;
    EXPECT_NE(r2.output.find("resuming at step 8"), std::string::npos) << r2.output;
    const double d2 = losses_rel_dev(read_losses(dir.path + "/r2.tsv"), ref);
    const double a2 = adapter_rel_dev(dir.path + "/r2.gguf", dir.path + "/full.gguf");

    // Written by two processes (step 8), resumed by four.
    const tu::run_result w2 = processes(2, args + " -b 2 -t 1 -o " + dir.path + "/w2.gguf --checkpoint-out " + dir.path + "/ck2.gguf");
    ASSERT_EQ(w2.status, 0) << w2.output;
    const tu::run_result r4 = processes(4, args + " -b 1 -t 1 -o " + dir.path + "/r4.gguf --loss-log " + dir.path + "/r4.tsv --resume " +
                                               dir.path + "/ck2.gguf --checkpoint-out " + dir.path + "/unused.gguf");
    ASSERT_EQ(r4.status, 0) << r4.output;
    EXPECT_NE(r4.output.find("resuming at step 8"), std::string::npos) << r4.output;
    const double d4 = losses_rel_dev(read_losses(dir.path + "/r4.tsv"), ref);
    const double a4 = adapter_rel_dev(dir.path + "/r4.gguf", dir.path + "/full.gguf");
    printf("  resumed at step 8: 1 -> 2 processes: losses %.2e, adapter %.2e; 2 -> 4 processes: losses %.2e, adapter %.2e\n", d2, a2, d4,
           a4);
    EXPECT_LT(d2, kLossTol);
    EXPECT_LT(a2, kAdapterTol);
    EXPECT_LT(d4, kLossTol);
    EXPECT_LT(a4, kAdapterTol);

    // Another batch (2 processes x -b 1 = 2, not 4) is refused, and nothing is written.
    const tu::run_result bad = processes(2, args + " -b 1 -t 1 -o " + dir.path + "/bad.gguf --resume " + dir.path + "/ck2.gguf");
    EXPECT_NE(bad.status, 0);
    EXPECT_NE(bad.output.find("processes x -b"), std::string::npos) << bad.output;
    EXPECT_FALSE(tu::file_exists(dir.path + "/bad.gguf"));
}

// Rank 1 dies (SIGKILL) at step 3 of a long run: the job ends within seconds, not hanging in a
// collective, and the output says what happened.
TEST(FinetuneMpi, DyingProcessEndsTheRun) {
    TU_REQUIRE_FILE(model_path());
    tu::TempDir dir;
    for (int np : {2, 3}) {
        const auto t0 = std::chrono::steady_clock::now();
        const tu::run_result r = tu::run_command("GGML_MPI_TEST_DIE=1:3 " + mpirun(np) + finetune_bin() + " -m " + model_path() + " -f " +
                                                 tu::shared_dir() + "/reference/lora-sentences.txt -c 32 --steps 1000000 -b 1 -t 1 -o " +
                                                 dir.path + "/dead.gguf");
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("  %d processes, rank 1 killed at step 3: the run ended after %.1f s with status %d\n", np, secs, r.status);
        EXPECT_NE(r.status, 0) << r.output;
        EXPECT_NE(r.status, 124) << "timed out: a process hung\n" << r.output;
        EXPECT_LT(secs, 30.0) << r.output;
        EXPECT_NE(r.output.find("rank 1: dying at step 3"), std::string::npos) << r.output;
        // Which of the other ranks gets its last line out before mpiexec stops forwarding their
        // output is up to the launcher (seen: rank 2's only, of 3), so any one of them will do.
        EXPECT_TRUE(r.output.find(": stopped by the MPI launcher") != std::string::npos ||
                    r.output.find("did another process of the run die?") != std::string::npos)
            << r.output;
        EXPECT_FALSE(tu::file_exists(dir.path + "/dead.gguf"));
    }
}

// SIGUSR1 to mpirun (which forwards it to every process) ends the run with a checkpoint, as
// Ctrl-C does a single process.
TEST(FinetuneMpi, SigUsr1WritesACheckpoint) {
    TU_REQUIRE_FILE(model_path());
    tu::TempDir dir;
    std::string cmd = mpirun(2);
    cmd = cmd.substr(cmd.find(LLAMA_MPIEXEC)) + finetune_bin() + " -m " + model_path() + " -f " + tu::shared_dir() +
                            "/reference/lora-sentences.txt -c 32 --steps 1000000 -b 1 -t 1 -o " + dir.path + "/u.gguf";
    // mpirun itself in the background (not under timeout, which would not pass SIGUSR1 on),
    // signalled once the first progress line is out; ended (SIGTERM: mpirun ends its processes)
    // if still there 60 s later.
    const tu::run_result r = tu::run_command("( " + cmd + " > " + dir.path + "/log 2>&1 & p=$!; " +
                                             "for i in $(seq 600); do grep -qs 'step 1/' " + dir.path + "/log && break; sleep 0.1; done; " +
                                             "sleep 0.5; kill -USR1 $p; for i in $(seq 600); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; " +
                                             "if kill -0 $p 2>/dev/null; then kill -TERM $p; sleep 5; kill -KILL $p 2>/dev/null; fi; wait $p; echo status=$? )");
    const std::string log = r.output + tu::run_command("cat " + dir.path + "/log").output;
    EXPECT_NE(r.output.find("status=0"), std::string::npos) << log;
    EXPECT_NE(log.find("interrupted; resume with --resume"), std::string::npos) << log;
    EXPECT_TRUE(tu::file_exists(dir.path + "/u.ckpt.gguf")) << log;
}

}  // namespace
