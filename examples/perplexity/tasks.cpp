// tasks.cpp - llama-perplexity's multiple-choice benchmarks, scored as llama.cpp's
// llama-perplexity scores them, so that quantizations are compared with the same numbers:
//
//   --hellaswag        HellaSwag (acc_norm): 6 lines a task (context, gold index 0-3, 4 endings)
//   --winogrande       WinoGrande: CSV lines "index,sentence with _,choice 1,choice 2,answer 1|2"
//   --multiple-choice  llama.cpp's binary task files (ARC, MMLU, TruthfulQA; -bf FILE)
//
// Each task is a few token sequences that share a prefix (the context) and differ in their
// continuation (the ending, the choice). A choice's score is the mean log-probability of the
// tokens it is judged on; the highest score is the model's answer (the first of equal ones).
// The prefix is decoded once per task, then each continuation after the previous one is removed
// from the KV cache (llama.cpp puts a task's continuations in sequences of one batch; a context
// holds one sequence here: the logits are the same up to the rounding of another batch shape).
// Log-probabilities are computed in double.
//
// Which tokens are judged:
// - HellaSwag and multiple choice: every token of the continuation (from the first position
//   where the sequences differ to the end).
// - WinoGrande: when both sentences have more than 3 tokens after the shared prefix, the tokens
//   after the choice word (the rest of the sentence, without its last token); otherwise the
//   choice and the rest, again without the last token. llama.cpp judges the second sentence of
//   the second kind from the wrong logits (its FIXME in winogrande_score); here both sentences
//   are judged from their own.
//
// Task selection as llama.cpp's (std::mt19937 seeded with 1): HellaSwag takes --hellaswag-tasks
// (default 400) tasks in random order; WinoGrande and multiple choice take all tasks in file
// order, or --*-tasks N chosen at random. WinoGrande reads every line of the file (llama.cpp's
// loop drops the last line of a -f file, since -f strips the final newline).
#include "perplexity.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

namespace {

// ---- scoring the sequences of one task ------------------------------------------------------

// lp[s][j] = log p(seqs[s][j] | seqs[s][0..j)) for first <= j < seqs[s].size(); 0 below first.
// The first `prefix` tokens (the same in every sequence) are decoded once.
class choice_scorer {
public:
    choice_scorer(llama_context * ctx, int32_t n_batch)
        : ctx_(ctx), n_batch_(n_batch), n_vocab_(llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)))),
          batch_(llama_batch_init(n_batch, 0, 1)) {}
    ~choice_scorer() { llama_batch_free(batch_); }
    choice_scorer(const choice_scorer &) = delete;
    choice_scorer & operator=(const choice_scorer &) = delete;

    bool score(const std::vector<std::vector<llama_token>> & seqs, size_t prefix, size_t first,
               std::vector<std::vector<double>> & lp) {
        llama_kv_self_clear(ctx_);
        // The rows of the prefix's positions first - 1 .. prefix - 1 (shared by every sequence).
        const size_t lo = first - 1;
        std::vector<float> shared;
        if (!decode(seqs[0].data(), 0, prefix, lo, shared)) return false;
        lp.assign(seqs.size(), {});
        std::vector<float> rows;
        for (size_t s = 0; s < seqs.size(); s++) {
            const std::vector<llama_token> & t = seqs[s];
            llama_kv_self_seq_rm(ctx_, 0, (llama_pos) prefix, -1);
            // The continuation's positions, but the last (nothing to predict after it).
            if (!decode(t.data() + prefix, prefix, t.size() - 1 - prefix, lo, rows)) return false;
            lp[s].assign(t.size(), 0.0);
            for (size_t j = first; j < t.size(); j++) {
                const size_t p = j - 1;  // the row that predicts token j
                const float * row = p < prefix ? shared.data() + (p - lo) * n_vocab_
                                               : rows.data() + (p - std::max(prefix, lo)) * n_vocab_;
                lp[s][j] = (double) row[t[j]] - ppl_log_sum_exp(row, n_vocab_);
            }
        }
        return true;
    }

private:
    // Decodes n tokens at positions pos0 .. pos0 + n - 1 in batches; rows gets the logits of the
    // positions from keep_from on.
    bool decode(const llama_token * tokens, size_t pos0, size_t n, size_t keep_from, std::vector<float> & rows) {
        rows.clear();
        for (size_t start = 0; start < n; start += (size_t) n_batch_) {
            const size_t m = std::min((size_t) n_batch_, n - start);
            for (size_t k = 0; k < m; k++) {
                batch_.token[k] = tokens[start + k];
                batch_.pos[k] = (llama_pos) (pos0 + start + k);
                batch_.logits[k] = pos0 + start + k >= keep_from;
            }
            batch_.n_tokens = (int32_t) m;
            const int32_t rc = llama_decode(ctx_, batch_);
            if (rc != 0) {
                fprintf(stderr, "llama-perplexity: evaluation failed (llama_decode returned %d)\n", rc);
                return false;
            }
            for (size_t k = 0; k < m; k++) {
                if (!batch_.logits[k]) continue;
                const float * row = llama_get_logits_ith(ctx_, (int32_t) k);
                if (!row) {
                    fprintf(stderr, "llama-perplexity: no logits for position %zu\n", pos0 + start + k);
                    return false;
                }
                rows.insert(rows.end(), row, row + n_vocab_);
            }
        }
        return true;
    }

    llama_context * ctx_;
    int32_t n_batch_;
    int32_t n_vocab_;
    llama_batch batch_;
};

// The tokens every sequence starts with, at most all but one of the shortest (each sequence
// keeps a token of its own to judge).
size_t shared_prefix(const std::vector<std::vector<llama_token>> & seqs) {
    size_t min_len = seqs[0].size();
    for (const auto & s : seqs) min_len = std::min(min_len, s.size());
    size_t n = 0;
    while (n + 1 < min_len) {
        bool same = true;
        for (const auto & s : seqs) same = same && s[n] == seqs[0][n];
        if (!same) break;
        n++;
    }
    return n;
}

// The sequences must each have two tokens (one to predict from, one to judge), and the longest
// must fit the context.
bool check_task(const std::vector<std::vector<llama_token>> & seqs, int32_t n_ctx, size_t task) {
    for (const auto & s : seqs) {
        if (s.size() < 2) {
            fprintf(stderr, "llama-perplexity: task %zu tokenizes to fewer than 2 tokens\n", task + 1);
            return false;
        }
        if (s.size() > (size_t) n_ctx) {
            fprintf(stderr, "llama-perplexity: task %zu (%zu tokens) does not fit in the context window of %d (raise -c)\n",
                    task + 1, s.size(), n_ctx);
            return false;
        }
    }
    return true;
}

// Mean log-probability of lp[j] for j in [from, to).
double mean_lp(const std::vector<double> & lp, size_t from, size_t to) {
    double sum = 0.0;
    for (size_t j = from; j < to; j++) sum += lp[j];
    return sum / (double) (to - from);
}

size_t argmax(const std::vector<double> & v) {
    size_t best = 0;
    for (size_t i = 1; i < v.size(); i++) {
        if (v[i] > v[best]) best = i;
    }
    return best;
}

// The data's lines (split at '\n', as std::getline; a final line without '\n' counts).
std::vector<std::string> split_lines(const std::string & text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
    return lines;
}

bool parse_index(const std::string & s, long lo, long hi, long & out) {
    char * end = nullptr;
    errno = 0;
    const long v = strtol(s.c_str(), &end, 10);
    while (end && (*end == ' ' || *end == '\r' || *end == '\t')) end++;
    if (s.empty() || errno != 0 || !end || *end != '\0' || v < lo || v > hi) return false;
    out = v;
    return true;
}

// Picks n of `count` items at random as llama.cpp's WinoGrande and multiple-choice selection do
// (the same floats, so the same tasks).
std::vector<size_t> pick_random(size_t count, size_t n) {
    std::mt19937 rng(1);
    std::vector<int> aux(count);
    for (size_t i = 0; i < count; i++) aux[i] = (int) i;
    const float scale = 1.f / (1.f + (float) std::mt19937::max());
    std::vector<size_t> out;
    for (size_t i = 0; i < n; i++) {
        const int j = int(scale * rng() * aux.size());
        out.push_back((size_t) aux[j]);
        aux[j] = aux.back();
        aux.pop_back();
    }
    return out;
}

// ---- the multiple-choice binary format ------------------------------------------------------
// llama.cpp's, little-endian: uint32 n_task, uint32 offset[n_task] (from the start of the file),
// then per task: string question; answers mc1; answers mc2 (mc2: several right answers, read and
// not scored), with string = uint32 size + bytes, answers = uint32 n (at most 100), n strings,
// int32 labels[n] (1: right).

struct mc_reader {
    const std::string & data;
    size_t at;
    bool u32(uint32_t & v) {
        if (at + 4 > data.size()) return false;
        memcpy(&v, data.data() + at, 4);
        at += 4;
        return true;
    }
    bool str(std::string & s) {
        uint32_t n;
        if (!u32(n) || n > data.size() - at) return false;
        s.assign(data, at, n);
        at += n;
        return true;
    }
    bool answers(std::vector<std::string> & a, std::vector<int> & labels) {
        uint32_t n;
        if (!u32(n) || n > 100) return false;
        a.resize(n);
        labels.resize(n);
        for (auto & s : a) {
            if (!str(s)) return false;
        }
        for (auto & l : labels) {
            uint32_t v;
            if (!u32(v)) return false;
            l = (int) v;
        }
        return true;
    }
};

struct mc_task {
    std::string question;
    std::vector<std::string> answers;  // mc1
    std::vector<int> labels;
};

}  // namespace

// ---- HellaSwag --------------------------------------------------------------------------------

int run_hellaswag(llama_context * ctx, const common_params & params) {
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    std::vector<std::string> lines = split_lines(params.prompt);
    if (lines.empty() || lines.size() % 6 != 0) {
        fprintf(stderr, "llama-perplexity: the HellaSwag data has %zu lines, not a multiple of 6 (a task is a context, "
                        "the gold ending's index and 4 endings)\n", lines.size());
        return 1;
    }
    const size_t n_avail = lines.size() / 6;
    const size_t n_task = std::min(params.hellaswag_tasks, n_avail);
    fprintf(stderr, "llama-perplexity: HellaSwag: loaded %zu tasks, selecting %zu randomized tasks\n", n_avail, n_task);

    struct hs_task {
        size_t gold;
        std::vector<std::vector<llama_token>> seqs;
    };
    std::vector<hs_task> tasks(n_task);
    std::mt19937 rng(1);  // llama.cpp's: the order (and so the running score) is the same
    for (size_t i = 0; i < n_task; i++) {
        std::uniform_int_distribution<size_t> dist(0, lines.size() / 6 - 1);
        const size_t idx = dist(rng);
        long gold;
        if (!parse_index(lines[idx * 6 + 1], 0, 3, gold)) {
            fprintf(stderr, "llama-perplexity: HellaSwag: line %zu: the gold ending's index must be 0 to 3, not '%s'\n",
                    idx * 6 + 2, lines[idx * 6 + 1].c_str());
            return 1;
        }
        tasks[i].gold = (size_t) gold;
        for (size_t j = 0; j < 4; j++) tasks[i].seqs.push_back(ppl_tokenize(vocab, lines[idx * 6] + " " + lines[idx * 6 + 2 + j]));
        lines.erase(lines.begin() + (long) idx * 6, lines.begin() + (long) idx * 6 + 6);
    }

    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx);
    for (size_t i = 0; i < n_task; i++) {
        if (!check_task(tasks[i].seqs, n_ctx, i)) return 1;
    }
    choice_scorer scorer(ctx, (int32_t) llama_n_batch(ctx));
    printf("\ntask\tacc_norm\n");
    double acc = 0.0;
    std::vector<std::vector<double>> lp;
    for (size_t i = 0; i < n_task; i++) {
        if (ppl_interrupted()) return 1;
        const hs_task & t = tasks[i];
        const size_t prefix = shared_prefix(t.seqs);
        if (!scorer.score(t.seqs, prefix, prefix, lp)) return 1;
        std::vector<double> score(4);
        for (size_t s = 0; s < 4; s++) score[s] = mean_lp(lp[s], prefix, t.seqs[s].size());
        if (argmax(score) == t.gold) acc += 1.0;
        printf("%zu\t%.8lf\n", i + 1, acc / double(i + 1) * 100.0);
        fflush(stdout);
    }
    printf("\n");
    return 0;
}

// ---- WinoGrande -------------------------------------------------------------------------------

namespace {

struct wg_task {
    std::string first, second;          // the sentence before and after the blank '_'
    std::array<std::string, 2> choices;
    int answer;                         // 1 or 2
};

// "index,sentence,choice1,choice2,answer": the sentence may be quoted (commas inside quotes do
// not split); the choices and the answer are taken as they stand. Bad lines are reported and
// skipped, as llama.cpp does.
std::vector<wg_task> load_winogrande(const std::string & text) {
    std::vector<wg_task> out;
    size_t line_no = 0;
    for (std::string line : split_lines(text)) {
        line_no++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        std::array<size_t, 4> comma{};
        int n = 0;
        bool quoted = false;
        for (size_t i = 0; i < line.size() && n < 4; i++) {
            if (line[i] == '"') quoted = !quoted;
            else if (line[i] == ',' && !quoted) comma[n++] = i;
        }
        if (n != 4) {
            fprintf(stderr, "llama-perplexity: WinoGrande: line %zu: expected 5 comma-separated fields, skipped\n", line_no);
            continue;
        }
        std::string sentence = line.substr(comma[0] + 1, comma[1] - comma[0] - 1);
        if (sentence.size() >= 2 && sentence.front() == '"' && sentence.back() == '"') sentence = sentence.substr(1, sentence.size() - 2);
        const size_t blank = sentence.find('_');
        long answer;
        if (blank == std::string::npos) {
            fprintf(stderr, "llama-perplexity: WinoGrande: line %zu: no '_' in the sentence, skipped\n", line_no);
            continue;
        }
        if (!parse_index(line.substr(comma[3] + 1), 1, 2, answer)) {
            fprintf(stderr, "llama-perplexity: WinoGrande: line %zu: the answer must be 1 or 2, skipped\n", line_no);
            continue;
        }
        wg_task t;
        t.first = sentence.substr(0, blank);
        t.second = sentence.substr(blank + 1);
        t.choices[0] = line.substr(comma[1] + 1, comma[2] - comma[1] - 1);
        t.choices[1] = line.substr(comma[2] + 1, comma[3] - comma[2] - 1);
        t.answer = (int) answer;
        out.push_back(std::move(t));
    }
    return out;
}

}  // namespace

int run_winogrande(llama_context * ctx, const common_params & params) {
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    std::vector<wg_task> data = load_winogrande(params.prompt);
    if (data.empty()) {
        fprintf(stderr, "llama-perplexity: WinoGrande: no tasks in the data\n");
        return 1;
    }
    fprintf(stderr, "llama-perplexity: WinoGrande: loaded %zu tasks\n", data.size());
    if (params.winogrande_tasks > 0 && params.winogrande_tasks < data.size()) {
        fprintf(stderr, "llama-perplexity: WinoGrande: selecting %zu random tasks\n", params.winogrande_tasks);
        std::vector<wg_task> selected;
        for (size_t idx : pick_random(data.size(), params.winogrande_tasks)) selected.push_back(data[idx]);
        data = std::move(selected);
    }

    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx);
    constexpr size_t kMinTrailing = 3;  // llama.cpp's k_min_trailing_ctx
    choice_scorer scorer(ctx, (int32_t) llama_n_batch(ctx));
    int n_correct = 0, n_done = 0;
    std::vector<std::vector<double>> lp;
    for (size_t i = 0; i < data.size(); i++) {
        if (ppl_interrupted()) return 1;
        const wg_task & t = data[i];
        std::vector<std::vector<llama_token>> seqs = {ppl_tokenize(vocab, t.first + t.choices[0] + t.second),
                                                      ppl_tokenize(vocab, t.first + t.choices[1] + t.second)};
        if (!check_task(seqs, n_ctx, i)) return 1;
        const size_t prefix = shared_prefix(seqs);
        const bool skip_choice = seqs[0].size() - prefix > kMinTrailing && seqs[1].size() - prefix > kMinTrailing;
        // Per sentence: the judged tokens [from, to).
        std::array<size_t, 2> from{}, to{};
        for (size_t s = 0; s < 2; s++) {
            size_t base = skip_choice ? ppl_tokenize(vocab, t.first + t.choices[s]).size() : prefix;
            base = std::max<size_t>(1, std::min(base, seqs[s].size() - 1));
            const size_t last = seqs[s].size() - base > 1 ? 1 : 0;
            from[s] = base;
            to[s] = seqs[s].size() - last;
        }
        if (!scorer.score(seqs, prefix, std::min(from[0], from[1]), lp)) return 1;
        const double score_1st = mean_lp(lp[0], from[0], to[0]);
        const double score_2nd = mean_lp(lp[1], from[1], to[1]);
        const int result = score_1st > score_2nd ? 1 : 2;
        if (result == t.answer) n_correct++;
        n_done++;
        printf("%zu\t%.4lf\t%10.6f  %10.6f  %d  %d\n", i + 1, 100.0 * n_correct / n_done, score_1st, score_2nd, result, t.answer);
        fflush(stdout);
    }
    printf("\n");
    if (n_done < 100) return 0;  // as llama.cpp: too few tasks for an error bar
    const double p = (double) n_correct / n_done;
    const double sigma = 100.0 * std::sqrt(p * (1 - p) / (n_done - 1));
    fprintf(stderr, "Final Winogrande score(%d tasks): %.4lf +/- %.4lf\n", n_done, 100 * p, sigma);
    return 0;
}

// ---- multiple choice --------------------------------------------------------------------------

int run_multiple_choice(llama_context * ctx, const common_params & params) {
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    const std::string & data = params.prompt;
    mc_reader head{data, 0};
    uint32_t n_avail = 0;
    if (!head.u32(n_avail) || n_avail == 0) {
        fprintf(stderr, "llama-perplexity: multiple choice: no tasks in the data (a binary task file, given with -bf)\n");
        return 1;
    }
    std::vector<uint32_t> offsets(n_avail);
    for (auto & o : offsets) {
        if (!head.u32(o)) {
            fprintf(stderr, "llama-perplexity: multiple choice: the file ends inside the table of %u task offsets\n", n_avail);
            return 1;
        }
    }
    fprintf(stderr, "llama-perplexity: multiple choice: there are %u tasks in the data\n", n_avail);
    // All tasks read in file order, or a random selection read at their offsets.
    std::vector<size_t> order;
    const bool subset = params.multiple_choice_tasks > 0 && params.multiple_choice_tasks < n_avail;
    if (subset) {
        fprintf(stderr, "llama-perplexity: multiple choice: selecting %zu random tasks\n", params.multiple_choice_tasks);
        order = pick_random(n_avail, params.multiple_choice_tasks);
    } else {
        for (size_t i = 0; i < n_avail; i++) order.push_back(i);
    }
    // llama.cpp's progress dots on standard output (a dot every 1% of the tasks, then "done"):
    // reading (all tasks only), then tokenizing ("..." from 500 tasks).
    const size_t n_dot = std::max<size_t>(order.size() / 100, 1);
    std::vector<mc_task> tasks(order.size());
    mc_reader seq{data, head.at};
    for (size_t i = 0; i < order.size(); i++) {
        mc_reader r = subset ? mc_reader{data, offsets[order[i]]} : seq;
        std::vector<std::string> mc2;
        std::vector<int> mc2_labels;
        mc_task & t = tasks[i];
        if (!r.str(t.question) || !r.answers(t.answers, t.labels) || !r.answers(mc2, mc2_labels)) {
            fprintf(stderr, "llama-perplexity: multiple choice: task %zu is truncated or malformed\n", order[i] + 1);
            return 1;
        }
        if (!subset) {
            seq.at = r.at;
            if ((i + 1) % n_dot == 0) printf(".");
        }
        if (t.question.empty() || t.answers.empty() ||
            std::any_of(t.answers.begin(), t.answers.end(), [](const std::string & a) { return a.empty(); })) {
            fprintf(stderr, "llama-perplexity: multiple choice: task %zu has an empty question or answer\n", order[i] + 1);
            return 1;
        }
    }

    if (!subset) printf("done\n");
    if (tasks.size() > 500) {
        printf("...");
    } else {
        for (size_t i = 0; i < tasks.size(); i++) {
            if ((i + 1) % n_dot == 0) printf(".");
        }
    }
    printf("done\n");

    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx);
    choice_scorer scorer(ctx, (int32_t) llama_n_batch(ctx));
    printf("\ntask\tacc_norm\n");
    int n_done = 0, n_correct = 0;
    size_t n_answers = 0;
    std::vector<std::vector<double>> lp;
    for (size_t i = 0; i < tasks.size(); i++) {
        if (ppl_interrupted()) return 1;
        const mc_task & t = tasks[i];
        std::vector<std::vector<llama_token>> seqs;
        for (const std::string & a : t.answers) seqs.push_back(ppl_tokenize(vocab, t.question + " " + a));
        if (!check_task(seqs, n_ctx, i)) return 1;
        const size_t prefix = shared_prefix(seqs);
        if (!scorer.score(seqs, prefix, prefix, lp)) return 1;
        std::vector<double> score(seqs.size());
        for (size_t s = 0; s < seqs.size(); s++) score[s] = mean_lp(lp[s], prefix, seqs[s].size());
        n_answers += seqs.size();
        if (t.labels[argmax(score)] == 1) n_correct++;
        n_done++;
        printf("%d\t%.8lf\n", n_done, 100. * n_correct / n_done);
        fflush(stdout);
    }
    printf("\n");
    if (n_done < 100 && subset) return 0;  // as llama.cpp
    double p = (double) n_correct / n_done;
    double sigma = n_done > 1 ? std::sqrt(p * (1 - p) / (n_done - 1)) : 0.0;
    fprintf(stderr, "Final result: %.4f +/- %.4f\n", 100. * p, 100. * sigma);
    p = (double) n_done / (double) n_answers;
    sigma = n_done > 1 ? std::sqrt(p * (1 - p) / (n_done - 1)) : 0.0;
    fprintf(stderr, "Random chance: %.4f +/- %.4f\n", 100. * p, 100. * sigma);
    return 0;
}
