// llama-perplexity: the perplexity of a model over a text, computed as llama.cpp's
// llama-perplexity computes it, and the KL divergence of a model from a reference model.
//
//   llama-perplexity -m MODEL -f TEXT [-c N] [-b N] [-t N] [--chunks N] [-fa] [-ctk T] [-ctv T]
//                    [-ngl N] [-sm MODE] [-mg N] [-nkvo] [--kl-divergence-base FILE]
//   llama-perplexity -m MODEL --kl-divergence-base FILE --kl-divergence [...]
//   llama-perplexity -m MODEL --hellaswag|--winogrande -f DATA, --multiple-choice -bf DATA (tasks.cpp)
//   llama-perplexity -m MODEL -f TEXT --ppl-stride N (run_perplexity_strided)
//
// Perplexity: the whole text is tokenized (BOS first when the model adds it) and cut into
// n_tokens / n_ctx chunks of n_ctx tokens (the tail is dropped; at least 2 * n_ctx tokens are
// needed, as in llama.cpp). Each chunk is evaluated from an empty KV cache, in batches of -b
// tokens, with its first token replaced by BOS when the model adds BOS. Only the second half of
// a chunk is scored: the token at position j, for j from n_ctx/2 + 1 to n_ctx - 1, by the
// logits of position j - 1 (n_ctx - 1 - n_ctx/2 tokens a chunk), so that every scored token has
// at least n_ctx/2 tokens of context. The running estimate exp(mean NLL) is printed after each
// chunk as [i]PPL, then
//   Final estimate: PPL = exp(m) +/- exp(m) * s
// with m the mean negative log-likelihood and s its standard error,
// sqrt((mean(nll^2) - m^2) / (count - 1)), carried through exp to first order.
// Log-softmax is computed in double. The per-chunk estimates and the KL divergence statistics go
// to standard output; the final estimate, the log (load, timings) to standard error, as
// llama.cpp's llama-perplexity prints them.
//
// KL divergence: --kl-divergence-base FILE without --kl-divergence also saves the tokens and the
// logits of every scored position to FILE. With --kl-divergence the tokens come from FILE (no
// -f), the model (a quantized copy, say) is evaluated on the same chunks, and at every scored
// position its distribution is compared with the saved one: KL(base || model), whether the most
// likely tokens agree, and delta-p = p_model(next token) - p_base(next token); printed in the
// shape of llama.cpp's output.
//
// Base file: llama.cpp's (its --kl-divergence-base files are read here and ours there),
// little-endian:
//   char     magic[8]   "_logits_"
//   uint32   n_ctx      tokens per chunk
//   int32    n_vocab
//   int32    n_chunk
//   int32    tokens[n_chunk * n_ctx]                    the text's tokens (before BOS replacement)
//   then per chunk, for positions n_ctx/2 .. n_ctx - 2 (which predict the next token), a row of
//   nv = 2 * ((n_vocab + 1) / 2) + 4 uint16: float32 scale, float32 min_log_prob, then n_vocab
//   16-bit log-probabilities q (log p = scale * q + min_log_prob; q = 0 for every logit at or
//   below max - 16), then padding to nv.
// and nothing after. It is written under a temporary name beside FILE and renamed into place
// once complete, so FILE is written whole or not at all.
#include "arg.h"
#include "common.h"
#include "perplexity.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr int32_t kDefaultCtx = 512;  // llama.cpp's perplexity default
constexpr int32_t kMinCtx = 4;        // the smallest context that scores a token per chunk
constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};  // llama.cpp's
constexpr size_t kHeaderBytes = 8 + 3 * sizeof(uint32_t);

// A base-file row's width in uint16: the two floats, the log-probabilities, even padding.
size_t row_u16(int32_t n_vocab) { return 2 * (((size_t) n_vocab + 1) / 2) + 4; }

// The row of logits as llama.cpp stores it: 16-bit log-probabilities over the 16 nats below the
// largest logit (the rest at the floor), rounded to nearest as llama.cpp's nearest_int.
void encode_row(const float * logits, int32_t n_vocab, uint16_t * out) {
    float max_logit = logits[0], min_logit = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) {
        max_logit = std::max(max_logit, logits[i]);
        min_logit = std::min(min_logit, logits[i]);
    }
    min_logit = std::max(min_logit, max_logit - 16);
    double sum_exp = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float) std::log(sum_exp);
    const float d[2] = {(max_logit - min_logit) / 65535.f, min_logit - max_logit - log_sum_exp};
    memcpy(out, d, sizeof(d));
    uint16_t * q = out + 4;
    memset(q, 0, (row_u16(n_vocab) - 4) * sizeof(uint16_t));
    if (d[0] == 0) return;
    const float inv_scale = 1 / d[0];
    for (int32_t i = 0; i < n_vocab; i++) {
        if (logits[i] > min_logit) q[i] = (uint16_t) std::lrintf(inv_scale * (logits[i] - min_logit));
    }
}

// The log-probabilities of a stored row (its logits, up to a constant).
void decode_row(const uint16_t * row, int32_t n_vocab, float * out) {
    float d[2];
    memcpy(d, row, sizeof(d));
    for (int32_t i = 0; i < n_vocab; i++) out[i] = d[0] * row[4 + i] + d[1];
}

volatile sig_atomic_t g_interrupted = 0;

void on_sigint(int) {
    if (g_interrupted) {  // a second Ctrl-C: leave now
        std::signal(SIGINT, SIG_DFL);
        std::raise(SIGINT);
    }
    g_interrupted = 1;
}

// The options (common/arg.cpp's table) with llama-perplexity's defaults: -c 0 (512, lowered to
// what the text has), -b 2048, -ub as -b (one graph per decode call).
common_params parse_args(int argc, char ** argv) {
    common_params p;
    p.n_batch = 2048;
    p.n_ubatch = -1;
    if (!common_params_parse(argc, argv, p, LLAMA_EXAMPLE_PERPLEXITY)) exit(1);
    auto fail = [](const std::string & msg) {
        fprintf(stderr, "llama-perplexity: %s\n(see llama-perplexity --help)\n", msg.c_str());
        exit(1);
    };
    if (p.model.empty()) fail("no model given (-m MODEL)");
    if (p.n_ctx != 0 && p.n_ctx < kMinCtx) fail("value of -c out of range: " + std::to_string(p.n_ctx) + " (at least " + std::to_string(kMinCtx) + ")");
    const int n_tasks = (int) p.hellaswag + (int) p.winogrande + (int) p.multiple_choice;
    if (n_tasks > 1) fail("choose one of --hellaswag, --winogrande and --multiple-choice");
    if (n_tasks > 0 && (p.kl_divergence || !p.logits_file.empty())) fail("the task scores do not go with --kl-divergence or --kl-divergence-base");
    if (p.ppl_stride > 0 && (n_tasks > 0 || p.kl_divergence || !p.logits_file.empty())) {
        fail("--ppl-stride goes with plain perplexity only (not with the task scores or the KL divergence)");
    }
    if (p.kl_divergence) {
        if (p.logits_file.empty()) fail("--kl-divergence needs the base model's file (--kl-divergence-base FILE)");
        if (!p.prompt_file.empty()) fprintf(stderr, "llama-perplexity: -f is ignored with --kl-divergence (the tokens come from the base file)\n");
    } else if (p.prompt_sources == 0) {
        fail("no text given (-f FILE, or -p TEXT)");
    } else if (p.prompt_sources > 1) {
        fail("give the text once (-f FILE or -p TEXT)");
    }
    return p;
}

bool read_file(const std::string & path, std::string & out) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) {
        fprintf(stderr, "llama-perplexity: cannot open '%s': %s\n", path.c_str(), strerror(errno));
        return false;
    }
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    const bool ok = !ferror(f);
    const int err = errno;
    fclose(f);
    if (!ok) fprintf(stderr, "llama-perplexity: cannot read '%s': %s\n", path.c_str(), strerror(err));
    return ok;
}

// ---- log-softmax ---------------------------------------------------------------------------

// ---- evaluation ----------------------------------------------------------------------------

struct evaluator {
    llama_context * ctx;
    int32_t n_ctx;
    int32_t n_batch;
    int32_t n_vocab;
    llama_token bos;  // LLAMA_TOKEN_NULL: the first token of a chunk is kept
    llama_batch batch;
    int32_t n_seq = 1;  // chunks evaluated together, one sequence each (llama.cpp: n_batch / n_ctx)
    int32_t lo = -1;  // the first position whose logits are kept; -1: n_ctx / 2 (the second half is scored)

    int32_t first() const { return lo >= 0 ? lo : n_ctx / 2; }
    int32_t n_scored() const { return n_ctx - 1 - first(); }

    // Evaluates n_chunks (<= n_seq) consecutive chunks of n_ctx tokens from an empty cache, chunk j
    // as sequence j, in batches of n_batch tokens; rows gets the logits of positions first() ..
    // n_ctx - 2 of each chunk in turn (n_chunks * n_scored() rows of n_vocab).
    bool eval_chunks(const llama_token * tokens, int32_t n_chunks, std::vector<float> & rows) {
        llama_kv_self_clear(ctx);
        const size_t per_chunk = (size_t) n_scored() * n_vocab;
        rows.resize(per_chunk * n_chunks);
        const int32_t lo = first(), hi = n_ctx - 1;  // positions whose logits are kept: [lo, hi)
        const int32_t total = n_ctx * n_chunks;
        for (int32_t start = 0; start < total; start += n_batch) {
            const int32_t n = std::min(n_batch, total - start);
            for (int32_t k = 0; k < n; k++) {
                const int32_t j = (start + k) / n_ctx, pos = (start + k) % n_ctx;
                batch.token[k] = (pos == 0 && bos != LLAMA_TOKEN_NULL) ? bos : tokens[(size_t) j * n_ctx + pos];
                batch.pos[k] = pos;
                batch.n_seq_id[k] = 1;
                batch.seq_id[k][0] = j;
                batch.logits[k] = pos >= lo && pos < hi;
            }
            batch.n_tokens = n;
            const int32_t rc = llama_decode(ctx, batch);
            if (rc != 0) {
                fprintf(stderr, "llama-perplexity: evaluation failed (llama_decode returned %d)\n", rc);
                return false;
            }
            for (int32_t k = 0; k < n; k++) {
                const int32_t j = (start + k) / n_ctx, pos = (start + k) % n_ctx;
                if (pos < lo || pos >= hi) continue;
                const float * row = llama_get_logits_ith(ctx, k);
                if (!row) {
                    fprintf(stderr, "llama-perplexity: no logits for position %d\n", pos);
                    return false;
                }
                memcpy(rows.data() + j * per_chunk + (size_t) (pos - lo) * n_vocab, row, (size_t) n_vocab * sizeof(float));
            }
        }
        return true;
    }
    bool eval_chunk(const llama_token * tokens, std::vector<float> & rows) { return eval_chunks(tokens, 1, rows); }
};

// ---- base file -----------------------------------------------------------------------------

// Writes a file under a temporary name beside it; commit() renames it into place, and the
// temporary file is removed if it is never committed.
struct atomic_writer {
    std::string path, tmp;
    FILE * f = nullptr;
    bool ok = true;

    bool open(const std::string & p) {
        path = p;
        tmp = p + ".tmp." + std::to_string((long) getpid());
        f = fopen(tmp.c_str(), "wb");
        if (!f) {
            fprintf(stderr, "llama-perplexity: cannot create '%s': %s\n", tmp.c_str(), strerror(errno));
            return false;
        }
        return true;
    }
    bool write(const void * data, size_t bytes) {
        if (ok && bytes > 0 && fwrite(data, 1, bytes, f) != bytes) {
            fprintf(stderr, "llama-perplexity: cannot write '%s': %s\n", tmp.c_str(), strerror(errno));
            ok = false;
        }
        return ok;
    }
    bool commit() {
        if (!f) return false;
        ok = fflush(f) == 0 && ok;
        ok = fsync(fileno(f)) == 0 && ok;
        ok = fclose(f) == 0 && ok;
        f = nullptr;
        if (ok && rename(tmp.c_str(), path.c_str()) != 0) ok = false;
        if (!ok) {
            fprintf(stderr, "llama-perplexity: cannot write '%s': %s\n", path.c_str(), strerror(errno));
            unlink(tmp.c_str());
        }
        return ok;
    }
    ~atomic_writer() {
        if (f) {
            fclose(f);
            unlink(tmp.c_str());
        }
    }
};

bool write_base_header(atomic_writer & w, uint32_t n_ctx, uint32_t n_vocab, uint32_t n_chunk, const llama_token * tokens) {
    const uint32_t h[3] = {n_ctx, n_vocab, n_chunk};
    return w.write(kMagic, sizeof(kMagic)) && w.write(h, sizeof(h)) &&
           w.write(tokens, (size_t) n_chunk * n_ctx * sizeof(llama_token));
}

// A base file opened for reading: its header and tokens read and checked, f at the first
// logits row.
struct base_file {
    uint32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
    std::vector<llama_token> tokens;
    FILE * f = nullptr;
    ~base_file() {
        if (f) fclose(f);
    }
};

bool open_base(const std::string & path, base_file & b) {
    auto fail = [&](const std::string & why) {
        fprintf(stderr, "llama-perplexity: '%s' %s\n", path.c_str(), why.c_str());
        return false;
    };
    b.f = fopen(path.c_str(), "rb");
    if (!b.f) return fail(std::string("cannot be opened: ") + strerror(errno));
    struct stat st;
    if (fstat(fileno(b.f), &st) != 0 || !S_ISREG(st.st_mode)) return fail("is not a regular file");
    char magic[8];
    uint32_t h[3];
    if (fread(magic, 1, sizeof(magic), b.f) != sizeof(magic) || memcmp(magic, kMagic, sizeof(magic)) != 0) {
        return fail(memcmp(magic, "PPLLOGIT", 8) == 0
                        ? "is a base file of an earlier version of this program: write it again (llama.cpp's format now)"
                        : "is not a base file of llama-perplexity (no _logits_ magic; write one with --kl-divergence-base "
                          "FILE without --kl-divergence)");
    }
    if (fread(h, 1, sizeof(h), b.f) != sizeof(h)) return fail("is truncated (incomplete header)");
    b.n_ctx = h[0];
    b.n_vocab = h[1];
    b.n_chunk = h[2];
    if (b.n_ctx < (uint32_t) kMinCtx || b.n_ctx > (1u << 24)) return fail("has an invalid context size " + std::to_string(b.n_ctx));
    if (b.n_vocab == 0 || b.n_vocab > (1u << 24)) return fail("has an invalid vocabulary size " + std::to_string(b.n_vocab));
    if (b.n_chunk == 0 || b.n_chunk > (1u << 24)) return fail("has an invalid chunk count " + std::to_string(b.n_chunk));
    // With these bounds the sizes fit in 64 bits.
    const uint64_t n_tok = (uint64_t) b.n_chunk * b.n_ctx;
    const uint64_t n_rows = (uint64_t) b.n_chunk * (b.n_ctx - 1 - b.n_ctx / 2);
    const uint64_t want = kHeaderBytes + n_tok * sizeof(llama_token) + n_rows * row_u16((int32_t) b.n_vocab) * sizeof(uint16_t);
    if ((uint64_t) st.st_size < want) {
        return fail("is truncated: " + std::to_string((uint64_t) st.st_size) + " bytes, its header announces " + std::to_string(want));
    }
    if ((uint64_t) st.st_size > want) {
        return fail("has " + std::to_string((uint64_t) st.st_size - want) + " bytes more than its header announces");
    }
    b.tokens.resize((size_t) n_tok);
    if (fread(b.tokens.data(), sizeof(llama_token), b.tokens.size(), b.f) != b.tokens.size()) return fail("cannot be read");
    for (size_t i = 0; i < b.tokens.size(); i++) {
        if (b.tokens[i] < 0 || (uint32_t) b.tokens[i] >= b.n_vocab) {
            return fail("holds an invalid token id " + std::to_string(b.tokens[i]) + " at " + std::to_string(i));
        }
    }
    return true;
}

// ---- statistics ----------------------------------------------------------------------------

// Mean of the values whose sum and sum of squares are given, and its standard error (0 for
// fewer than 11 values, as llama.cpp).
std::pair<double, double> mean_and_uncertainty(double sum, double sum2, size_t count) {
    if (count < 1) return {0.0, 0.0};
    const double f = sum / (double) count;
    double df = sum2 / (double) count - f * f;
    df = df > 0 && count > 10 ? std::sqrt(df / (double) (count - 1)) : 0.0;
    return {f, df};
}

// Covariance of the means of a and b (0 for fewer than 10 values, as llama.cpp).
double covariance(double suma, double sumb, double sumab, size_t count) {
    if (count < 10) return 0.0;
    const double c = (double) count;
    return (sumab / c - (suma / c) * (sumb / c)) / (c - 1);
}

// The value at a fraction of a sorted vector, interpolating between neighbours.
double percentile(const std::vector<float> & v, double fraction) {
    if (v.empty()) return 0.0;
    if (fraction <= 0) return v.front();
    if (fraction >= 1) return v.back();
    double p = fraction * (double) (v.size() - 1);
    const size_t ip = (size_t) p;
    p -= (double) ip;
    return (1 - p) * v[ip] + p * v[std::min(ip + 1, v.size() - 1)];
}

double median(const std::vector<float> & v) {
    if (v.empty()) return 0.0;
    const size_t n = v.size();
    return n % 2 == 0 ? 0.5 * ((double) v[n / 2] + v[n / 2 - 1]) : (double) v[n / 2];
}

struct kl_stats {
    double sum_nll = 0, sum_nll2 = 0;            // the model's negative log-likelihoods
    double sum_nll_base = 0, sum_nll_base2 = 0;  // the base's
    double sum_nll_nll_base = 0;
    double sum_kld = 0, sum_kld2 = 0;
    double sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
    size_t n_same_top = 0;
    size_t count = 0;
    std::vector<float> kld_values, p_diff_values;

    // One scored position: the model's logits, the base's stored log-probabilities, and the
    // text's next token. As llama.cpp: base log-probabilities at or below -16 (the stored floor)
    // add nothing to the divergence.
    void add(const float * logits, const float * base_lp, int32_t n_vocab, llama_token tok) {
        int32_t imax = 0, imax_base = 0;
        const double lse = ppl_log_sum_exp(logits, n_vocab, &imax);
        for (int32_t i = 1; i < n_vocab; i++) {
            if (base_lp[i] > base_lp[imax_base]) imax_base = i;
        }
        double kld = 0.0;
        for (int32_t i = 0; i < n_vocab; i++) {
            const double lp_base = (double) base_lp[i];
            const double lp = (double) logits[i] - lse;
            if (lp_base > -16.0) kld += std::exp(lp_base) * (lp_base - lp);
        }
        const double nll = lse - logits[tok];
        const double nll_base = -(double) base_lp[tok];  // stored normalized
        const double p_diff = std::exp(-nll) - std::exp(-nll_base);
        sum_nll += nll;
        sum_nll2 += nll * nll;
        sum_nll_base += nll_base;
        sum_nll_base2 += nll_base * nll_base;
        sum_nll_nll_base += nll * nll_base;
        sum_kld += kld;
        sum_kld2 += kld * kld;
        sum_p_diff += p_diff;
        sum_p_diff2 += p_diff * p_diff;
        sum_p_diff4 += p_diff * p_diff * p_diff * p_diff;
        n_same_top += imax == imax_base;
        count++;
        kld_values.push_back((float) kld);
        p_diff_values.push_back((float) p_diff);
    }

    std::pair<double, double> log_ppl() const { return mean_and_uncertainty(sum_nll, sum_nll2, count); }
    std::pair<double, double> log_ppl_base() const { return mean_and_uncertainty(sum_nll_base, sum_nll_base2, count); }
    double log_ppl_cov() const { return covariance(sum_nll, sum_nll_base, sum_nll_nll_base, count); }
    std::pair<double, double> log_ppl_ratio() const {
        const auto a = log_ppl(), b = log_ppl_base();
        return {a.first - b.first, std::sqrt(std::max(0.0, a.second * a.second + b.second * b.second - 2.0 * log_ppl_cov()))};
    }
    std::pair<double, double> p_diff_rms() const {
        const auto mse = mean_and_uncertainty(sum_p_diff2, sum_p_diff4, count);
        const double v = std::sqrt(mse.first);
        return {v, v > 0 ? 0.5 / v * mse.second : 0.0};
    }
    std::pair<double, double> same_top() const {
        const double p = count ? (double) n_same_top / (double) count : 0.0;
        return {p, count > 1 ? std::sqrt(p * (1 - p) / (double) (count - 1)) : 0.0};
    }
};

void print_kl_chunk(int chunk, const kl_stats & s) {
    const auto lp = s.log_ppl();
    const double ppl = std::exp(lp.first);
    const auto ratio = s.log_ppl_ratio();
    const auto kl = mean_and_uncertainty(s.sum_kld, s.sum_kld2, s.count);
    const auto rms = s.p_diff_rms();
    const auto top = s.same_top();
    printf("%4d    %9.4lf ± %9.4lf    %10.5lf ± %10.5lf    %10.5lf ± %10.5lf    %6.3lf ± %6.3lf %%    %6.3lf ± %6.3lf %%\n",
           chunk, ppl, ppl * lp.second, ratio.first, ratio.second, kl.first, kl.second, 100.0 * rms.first,
           100.0 * rms.second, 100.0 * top.first, 100.0 * top.second);
    fflush(stdout);
}

void print_kl_summary(kl_stats & s) {
    std::sort(s.kld_values.begin(), s.kld_values.end());
    std::sort(s.p_diff_values.begin(), s.p_diff_values.end());
    if (s.count < 100) {
        printf("(statistics over only %zu scored tokens: take them as rough)\n\n", s.count);
    }

    printf("====== Perplexity statistics ======\n");
    const auto lp = s.log_ppl(), lpb = s.log_ppl_base();
    const double ppl = std::exp(lp.first), ppl_unc = ppl * lp.second;
    const double ppl_base = std::exp(lpb.first), ppl_base_unc = ppl_base * lpb.second;
    const double cov = s.log_ppl_cov();
    printf("Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", ppl, ppl_unc);
    printf("Mean PPL(base)                : %10.6lf ± %10.6lf\n", ppl_base, ppl_base_unc);
    const double den = lp.second * lpb.second;
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", den > 0 ? 100.0 * cov / den : NAN);
    const auto ratio = s.log_ppl_ratio();
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", ratio.first, ratio.second);
    const double r = std::exp(ratio.first);
    printf("Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", r, r * ratio.second);
    const double ppl_cov = ppl * ppl_base * cov;
    printf("Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n", ppl - ppl_base,
           std::sqrt(std::max(0.0, ppl_unc * ppl_unc + ppl_base_unc * ppl_base_unc - 2.0 * ppl_cov)));
    printf("\n");

    const std::vector<float> & kv = s.kld_values;
    printf("====== KL divergence statistics ======\n");
    const auto kl = mean_and_uncertainty(s.sum_kld, s.sum_kld2, s.count);
    printf("Mean    KLD: %10.6lf ± %10.6lf\n", kl.first, kl.second);
    printf("Maximum KLD: %10.6f\n", kv.back());
    printf("99.9%%   KLD: %10.6f\n", percentile(kv, 0.999));
    printf("99.0%%   KLD: %10.6f\n", percentile(kv, 0.990));
    printf("95.0%%   KLD: %10.6f\n", percentile(kv, 0.950));
    printf("90.0%%   KLD: %10.6f\n", percentile(kv, 0.900));
    printf("Median  KLD: %10.6f\n", median(kv));
    printf("10.0%%   KLD: %10.6f\n", percentile(kv, 0.100));
    printf(" 5.0%%   KLD: %10.6f\n", percentile(kv, 0.050));
    printf(" 1.0%%   KLD: %10.6f\n", percentile(kv, 0.010));
    printf(" 0.1%%   KLD: %10.6f\n", percentile(kv, 0.001));
    printf("Minimum KLD: %10.6f\n", kv.front());
    printf("\n");

    const std::vector<float> & pv = s.p_diff_values;
    printf("====== Token probability statistics ======\n");
    const auto pd = mean_and_uncertainty(s.sum_p_diff, s.sum_p_diff2, s.count);
    printf("Mean    Δp: %6.3lf ± %5.3lf %%\n", 100.0 * pd.first, 100.0 * pd.second);
    printf("Maximum Δp: %6.3lf%%\n", 100.0 * pv.back());
    printf("99.9%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.999));
    printf("99.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.990));
    printf("95.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.950));
    printf("90.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.900));
    printf("75.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.750));
    printf("Median  Δp: %6.3lf%%\n", 100.0 * median(pv));
    printf("25.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.250));
    printf("10.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.100));
    printf(" 5.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.050));
    printf(" 1.0%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.010));
    printf(" 0.1%%   Δp: %6.3lf%%\n", 100.0 * percentile(pv, 0.001));
    printf("Minimum Δp: %6.3lf%%\n", 100.0 * pv.front());
    const auto rms = s.p_diff_rms();
    printf("RMS Δp    : %6.3lf ± %5.3lf %%\n", 100.0 * rms.first, 100.0 * rms.second);
    const auto top = s.same_top();
    printf("Same top p: %6.3lf ± %5.3lf %%\n", 100.0 * top.first, 100.0 * top.second);
    fflush(stdout);
}

// ---- the two modes -------------------------------------------------------------------------

void print_eta(double seconds_per_chunk, int n_chunk) {
    fprintf(stderr, "llama-perplexity: %.2f seconds per pass - ETA %.2f minutes\n", seconds_per_chunk,
            seconds_per_chunk * n_chunk / 60.0);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The running estimate after chunk c (first token `at`): [c]PPL, or with --ppl-output-type 1 a line
// "at PPL mean-NLL its-standard-error" (llama.cpp's columns).
void print_running_ppl(const common_params & params, int32_t c, int64_t at, double nll, double nll2, size_t count) {
    if (params.ppl_output_type == 0) {
        printf("[%d]%.4lf,", c + 1, std::exp(nll / (double) count));
    } else {
        const double av = nll / (double) count;
        double av2 = nll2 / (double) count - av * av;
        av2 = av2 > 0 && count > 1 ? std::sqrt(av2 / (double) (count - 1)) : 0.0;
        printf("%8lld  %.4lf  %4lf  %4lf\n", (long long) at, std::exp(av), av, av2);
    }
    fflush(stdout);
}

// Strided perplexity (--ppl-stride S), as llama.cpp computes it: windows of n_ctx tokens
// starting every S tokens, each evaluated from an empty cache with its own first token (llama.cpp
// means to put BOS there but does so after the decode; its numbers are kept), the last S tokens
// of each scored. The per-chunk lines as llama.cpp prints them ([i]PPL, or "start PPL"
// with --ppl-output-type 1), then the final estimate on standard error.
int run_perplexity_strided(const common_params & params, evaluator & ev, const std::vector<llama_token> & tokens, int32_t n_chunk) {
    const int32_t stride = params.ppl_stride;
    ev.bos = LLAMA_TOKEN_NULL;
    ev.lo = ev.n_ctx - stride - 1;
    fprintf(stderr, "llama-perplexity: calculating perplexity over %d chunks of %d tokens every %d, batch_size=%d\n", n_chunk,
            ev.n_ctx, stride, ev.n_batch);
    double nll = 0.0, nll2 = 0.0;
    size_t count = 0;
    std::vector<float> rows;
    for (int32_t c = 0; c < n_chunk; c++) {
        if (ppl_interrupted()) return 1;
        const auto t0 = std::chrono::steady_clock::now();
        const llama_token * chunk = tokens.data() + (size_t) c * stride;
        if (!ev.eval_chunk(chunk, rows)) return 1;
        if (c == 0) print_eta(seconds_since(t0), n_chunk);
        for (int32_t r = 0; r < ev.n_scored(); r++) {
            const float * row = rows.data() + (size_t) r * ev.n_vocab;
            const double v = ppl_log_sum_exp(row, ev.n_vocab) - row[chunk[ev.lo + r + 1]];
            nll += v;
            nll2 += v * v;
            count++;
        }
        if (params.ppl_output_type == 0) {
            printf("[%d]%.4lf,", c + 1, std::exp(nll / (double) count));
        } else {
            printf("%8lld  %.4lf\n", (long long) c * stride, std::exp(nll / (double) count));
        }
        fflush(stdout);
    }
    printf("\n");
    const double mean = nll / (double) count;
    const double var = nll2 / (double) count - mean * mean;
    const double se = var > 0 && count > 1 ? std::sqrt(var / (double) (count - 1)) : 0.0;
    fprintf(stderr, "Final estimate: PPL = %.4lf +/- %.5lf\n", std::exp(mean), se * std::exp(mean));
    return 0;
}

// Perplexity of the text's tokens, saving the base file when one is named.
int run_perplexity(const common_params & params, evaluator & ev, const std::vector<llama_token> & tokens, int32_t n_chunk) {
    atomic_writer w;
    if (!params.logits_file.empty()) {
        if (!w.open(params.logits_file) ||
            !write_base_header(w, (uint32_t) ev.n_ctx, (uint32_t) ev.n_vocab, (uint32_t) n_chunk, tokens.data())) {
            return 1;
        }
        fprintf(stderr, "llama-perplexity: saving the logits of the scored positions to %s\n", params.logits_file.c_str());
    }
    fprintf(stderr, "llama-perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d, n_seq=%d\n", n_chunk,
            ev.n_ctx, ev.n_batch, ev.n_seq);

    double nll = 0.0, nll2 = 0.0;
    size_t count = 0;
    std::vector<float> rows;
    const size_t nv = row_u16(ev.n_vocab);
    std::vector<uint16_t> stored(w.f ? (size_t) ev.n_scored() * nv : 0);
    const int32_t first = ev.first();
    for (int32_t c0 = 0; c0 < n_chunk; c0 += ev.n_seq) {
        if (ppl_interrupted()) return 1;
        const int32_t n_group = std::min(ev.n_seq, n_chunk - c0);
        const auto t0 = std::chrono::steady_clock::now();
        if (!ev.eval_chunks(tokens.data() + (size_t) c0 * ev.n_ctx, n_group, rows)) return 1;
        if (c0 == 0) print_eta(seconds_since(t0) / n_group, n_chunk);
        for (int32_t c = c0; c < c0 + n_group; c++) {
            const llama_token * chunk = tokens.data() + (size_t) c * ev.n_ctx;
            const float * chunk_rows = rows.data() + (size_t) (c - c0) * ev.n_scored() * ev.n_vocab;
            for (int32_t r = 0; r < ev.n_scored(); r++) {
                const float * row = chunk_rows + (size_t) r * ev.n_vocab;
                const double v = ppl_log_sum_exp(row, ev.n_vocab) - row[chunk[first + r + 1]];
                nll += v;
                nll2 += v * v;
                count++;
            }
            if (w.f) {
                for (int32_t r = 0; r < ev.n_scored(); r++) encode_row(chunk_rows + (size_t) r * ev.n_vocab, ev.n_vocab, stored.data() + r * nv);
                if (!w.write(stored.data(), stored.size() * sizeof(uint16_t))) return 1;
            }
            print_running_ppl(params, c, c * ev.n_ctx, nll, nll2, count);
        }
    }
    printf("\n");

    const double mean = nll / (double) count;
    const double ppl = std::exp(mean);
    const double var = nll2 / (double) count - mean * mean;
    const double se = var > 0 && count > 1 ? std::sqrt(var / (double) (count - 1)) : 0.0;
    // on standard error, as llama.cpp's (its LOG_INF); the per-chunk line above on standard output
    fprintf(stderr, "Final estimate: PPL = %.4lf +/- %.5lf\n", ppl, se * ppl);
    if (w.f) {
        if (!w.commit()) return 1;
        fprintf(stderr, "llama-perplexity: wrote %s\n", params.logits_file.c_str());
    }
    return 0;
}

int run_kl_divergence(evaluator & ev, base_file & base, int32_t n_chunk) {
    fprintf(stderr, "llama-perplexity: comparing with the base over %d chunks, n_ctx=%d, batch_size=%d\n", n_chunk,
            ev.n_ctx, ev.n_batch);
    kl_stats s;
    std::vector<float> rows, base_rows((size_t) ev.n_scored() * ev.n_vocab);
    const size_t nv = row_u16(ev.n_vocab);
    std::vector<uint16_t> stored((size_t) ev.n_scored() * nv);
    const int32_t first = ev.first();
    printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p\n");
    for (int32_t c0 = 0; c0 < n_chunk; c0 += ev.n_seq) {
        if (ppl_interrupted()) return 1;
        const int32_t n_group = std::min(ev.n_seq, n_chunk - c0);
        const auto t0 = std::chrono::steady_clock::now();
        if (!ev.eval_chunks(base.tokens.data() + (size_t) c0 * ev.n_ctx, n_group, rows)) return 1;
        if (c0 == 0) print_eta(seconds_since(t0) / n_group, n_chunk);
        for (int32_t c = c0; c < c0 + n_group; c++) {
            if (fread(stored.data(), sizeof(uint16_t), stored.size(), base.f) != stored.size()) {
                fprintf(stderr, "llama-perplexity: cannot read the logits of chunk %d from the base file\n", c + 1);
                return 1;
            }
            for (int32_t r = 0; r < ev.n_scored(); r++) decode_row(stored.data() + r * nv, ev.n_vocab, base_rows.data() + (size_t) r * ev.n_vocab);
            const llama_token * chunk = base.tokens.data() + (size_t) c * ev.n_ctx;
            const float * chunk_rows = rows.data() + (size_t) (c - c0) * ev.n_scored() * ev.n_vocab;
            for (int32_t r = 0; r < ev.n_scored(); r++) {
                const size_t off = (size_t) r * ev.n_vocab;
                s.add(chunk_rows + off, base_rows.data() + off, ev.n_vocab, chunk[first + r + 1]);
            }
            print_kl_chunk(c + 1, s);
        }
    }
    printf("\n");
    print_kl_summary(s);
    return 0;
}

}  // namespace

double ppl_log_sum_exp(const float * x, int32_t n, int32_t * imax) {
    int32_t im = 0;
    for (int32_t i = 1; i < n; i++) {
        if (x[i] > x[im]) im = i;
    }
    const double mx = x[im];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += std::exp((double) x[i] - mx);
    if (imax) *imax = im;
    return mx + std::log(sum);
}

bool ppl_interrupted() {
    if (g_interrupted) fprintf(stderr, "\nllama-perplexity: interrupted\n");
    return g_interrupted != 0;
}

std::vector<llama_token> ppl_tokenize(const llama_vocab * vocab, const std::string & text) {
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, true, false);
    std::vector<llama_token> out((size_t) (n < 0 ? -n : n));
    n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), true, false);
    out.resize(n > 0 ? (size_t) n : 0);
    return out;
}

int main(int argc, char ** argv) {
    const common_params params = parse_args(argc, argv);

    // The inputs are read and checked before the model is loaded.
    std::string text;
    base_file base;
    if (params.kl_divergence) {
        if (!open_base(params.logits_file, base)) return 1;
        if (params.n_ctx > 0 && (uint32_t) params.n_ctx != base.n_ctx) {
            fprintf(stderr, "llama-perplexity: the base file was computed with a context of %u, not %d (-c): leave -c out "
                            "or make a new base file\n", base.n_ctx, params.n_ctx);
            return 1;
        }
    } else {
        if (params.prompt_file.empty()) {
            text = params.prompt;  // -p: the text itself, as llama.cpp's -p fills what -f would
            if (params.escape) string_process_escapes(text);  // as llama.cpp's (-f and -bf files are read as they are)
        } else if (!read_file(params.prompt_file, text)) {
            return 1;
        }
        if (text.size() > (size_t) INT32_MAX) {
            fprintf(stderr, "llama-perplexity: '%s' is too large (at most 2 GiB of text)\n", params.prompt_file.c_str());
            return 1;
        }
    }

    if (const std::string w = common_gpu_flags_warning(params, "llama-perplexity"); !w.empty()) fputs(w.c_str(), stderr);
    if (!params.numa.empty()) fprintf(stderr, "llama-perplexity: --numa %s noted: threads are not placed by NUMA node here\n", params.numa.c_str());
    llama_backend_init();
    const llama_model_params mp = common_model_params_to_llama(params);
    llama_model * model = llama_model_load_from_file(params.model.c_str(), mp);
    if (!model) {
        fprintf(stderr, "llama-perplexity: cannot load model '%s'\n", params.model.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_model_n_vocab(model);
    std::vector<llama_adapter_lora *> adapters;
    auto fail = [&](llama_context * ctx) {
        llama_free(ctx);
        for (llama_adapter_lora * ad : adapters) llama_adapter_lora_free(ad);
        llama_model_free(model);
        llama_backend_free();
        return 1;
    };
    if (n_vocab <= 0 || llama_vocab_n_tokens(vocab) <= 0) {
        fprintf(stderr, "llama-perplexity: the model has no vocabulary\n");
        return fail(nullptr);
    }
    if (std::string err; !common_adapters_load(model, params, adapters, err)) {
        fprintf(stderr, "llama-perplexity: %s\n", err.c_str());
        return fail(nullptr);
    }

    // The tokens and the chunk size.
    std::vector<llama_token> tokens;
    int32_t n_ctx = params.n_ctx;
    int32_t n_chunk = 0;
    const bool task = params.hellaswag || params.winogrande || params.multiple_choice;
    if (task) {
        if (n_ctx == 0) n_ctx = kDefaultCtx;
    } else if (params.kl_divergence) {
        if ((uint32_t) n_vocab != base.n_vocab) {
            fprintf(stderr, "llama-perplexity: the base file has a vocabulary of %u tokens, the model %d: they do not "
                            "belong together\n", base.n_vocab, n_vocab);
            return fail(nullptr);
        }
        n_ctx = (int32_t) base.n_ctx;
        n_chunk = (int32_t) base.n_chunk;
    } else {
        fprintf(stderr, "llama-perplexity: tokenizing the input ..\n");
        tokens = ppl_tokenize(vocab, text);
        // Scoring predicts each token from the one before it; an EOS appended by the tokenizer
        // is not part of the text.
        if (llama_vocab_get_add_eos(vocab) && !tokens.empty() && tokens.back() == llama_vocab_eos(vocab)) tokens.pop_back();
        if (params.ppl_stride > 0) {
            // llama.cpp's strided windows: the context grows by half a stride, and the window is
            // the context as llama.cpp allocates it (rounded up to a multiple of 32 cells)
            if (n_ctx == 0) n_ctx = kDefaultCtx;
            const int32_t window = (n_ctx + params.ppl_stride / 2 + 31) / 32 * 32;
            fprintf(stderr, "llama-perplexity: strided perplexity: windows of %d tokens (-c %d + stride / 2, rounded up to "
                            "a multiple of 32 as llama.cpp's)\n", window, n_ctx);
            n_ctx = window;
            if (params.ppl_stride >= n_ctx) {
                fprintf(stderr, "llama-perplexity: --ppl-stride %d must be smaller than the context (%d)\n", params.ppl_stride, n_ctx);
                return fail(nullptr);
            }
        } else if (n_ctx == 0) {
            n_ctx = kDefaultCtx;
            if ((int64_t) tokens.size() < 2 * (int64_t) n_ctx) {
                n_ctx = std::max(kMinCtx, (int32_t) tokens.size() / 2);
                if (2 * (size_t) n_ctx <= tokens.size()) {
                    fprintf(stderr, "llama-perplexity: the text has only %zu tokens: context lowered from %d to %d "
                                    "(set it with -c)\n", tokens.size(), kDefaultCtx, n_ctx);
                }
            }
        }
        if ((int64_t) tokens.size() < 2 * (int64_t) n_ctx) {
            fprintf(stderr, "llama-perplexity: you need at least %d tokens to evaluate perplexity with a context of %d\n"
                            "llama-perplexity: the text '%s' tokenizes to only %zu tokens\n",
                    2 * n_ctx, n_ctx, params.prompt_file.c_str(), tokens.size());
            return fail(nullptr);
        }
        n_chunk = params.ppl_stride > 0 ? (int32_t) ((tokens.size() - n_ctx + params.ppl_stride - 1) / params.ppl_stride)
                                        : (int32_t) (tokens.size() / (size_t) n_ctx);
    }
    if (params.n_chunks > 0) n_chunk = std::min(n_chunk, params.n_chunks);
    const int32_t n_ctx_train = llama_model_n_ctx_train(model);
    if (n_ctx_train > 0 && n_ctx > n_ctx_train) {
        fprintf(stderr, "llama-perplexity: warning: the model was trained on only %d context tokens (%d specified)\n",
                n_ctx_train, n_ctx);
    }

    // Perplexity and KL divergence evaluate n_batch / n_ctx chunks per batch, each its own
    // sequence, as llama.cpp's (the context holds them all); the strided mode and the tasks one.
    const int32_t n_seq = task || params.ppl_stride > 0 ? 1 : std::max(1, std::min(params.n_batch / n_ctx, 256));
    llama_context_params cparams = common_context_params_to_llama(params);
    cparams.n_ctx = (uint32_t) (n_ctx * n_seq);
    cparams.n_seq_max = (uint32_t) n_seq;
    cparams.n_batch = (uint32_t) std::min(params.n_batch, n_ctx * n_seq);
    cparams.n_ubatch = params.n_ubatch > 0 ? std::min<uint32_t>((uint32_t) params.n_ubatch, cparams.n_batch) : cparams.n_batch;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "llama-perplexity: cannot create a context of %d tokens\n", n_ctx);
        return fail(nullptr);
    }
    common_adapters_apply(ctx, params, adapters);

    const llama_token bos = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : LLAMA_TOKEN_NULL;
    evaluator ev{ctx, n_ctx, (int32_t) llama_n_batch(ctx), n_vocab, bos, llama_batch_init((int32_t) llama_n_batch(ctx), 0, 1), n_seq};
    std::signal(SIGINT, on_sigint);
    int rc;
    if (task) {
        common_params tp = params;
        tp.prompt = std::move(text);
        rc = params.hellaswag ? run_hellaswag(ctx, tp) : params.winogrande ? run_winogrande(ctx, tp) : run_multiple_choice(ctx, tp);
    } else if (params.kl_divergence) {
        rc = run_kl_divergence(ev, base, n_chunk);
    } else if (params.ppl_stride > 0) {
        rc = run_perplexity_strided(params, ev, tokens, n_chunk);
    } else {
        rc = run_perplexity(params, ev, tokens, n_chunk);
    }
    llama_batch_free(ev.batch);

    printf("\n");  // as llama.cpp's, after any output
    fflush(stdout);
    if (!params.no_perf) llama_perf_context_print(ctx);
    llama_free(ctx);
    for (llama_adapter_lora * ad : adapters) llama_adapter_lora_free(ad);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
