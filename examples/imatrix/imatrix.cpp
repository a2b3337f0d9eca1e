// llama-imatrix: the importance matrix of a model over a text, as llama.cpp's llama-imatrix
// computes it (build 4747: its flags and its .dat files; and llama.cpp's later GGUF files, read
// and written), for llama-quantize --imatrix: per weight matrix, how strongly the text drives
// each of its columns.
//
//   llama-imatrix -m MODEL -f TEXT [-o imatrix.dat] [--output-format gguf|dat] [-c 512] [-b N]
//                 [--chunks N] [--chunk N] [--output-frequency 10] [--save-frequency 0]
//                 [--process-output] [--no-ppl] [--in-file FILE ...]
//   llama-imatrix [-m MODEL] --in-file A.dat --in-file B.gguf [...] -o OUT.gguf   (combine only)
//
// What is collected, through llama_context_params.cb_eval (the scheduler asks about every graph
// node before computing it, and shows the ones wanted once computed): every MUL_MAT whose src0
// is a weight named blk.* (and output.weight with --process-output) and whose src1, the
// activations, is F32 with at least 16 rows (tokens); and every MUL_MAT_ID (the experts of a MoE
// layer, each its own slice of the entry). The entry is named after the weight (a scheduler
// copy's "BACKEND#name#N" or "name#BACKEND" reduced to the name). Per column j of the weight: the
// sum over src1's rows of x_j^2, and how many rows were summed; for MUL_MAT_ID the rows routed to
// expert e go to slice e. ncall: how many times the entry was computed (once a graph: per
// micro-batch of -ub tokens).
//
// The text is tokenized (BOS when the model adds it), --chunk N chunks are dropped from its
// start, and it is cut into chunks of n_ctx tokens (-c, default 512, rounded up to a multiple of
// 32, of 256 with -fa, as llama.cpp's context is), at least two; each is evaluated from an empty
// cache in batches of min(-b, -c) tokens with its first token replaced by BOS. Unless --no-ppl
// the second half of each chunk is scored as llama-perplexity scores it: [i]PPL after each chunk
// and the final estimate, on standard output (with --no-ppl, a line per chunk on standard error).
//
// The files (common/imatrix-file.h; either is read, told apart by content): the output is GGUF
// with --output-format gguf or, without the flag, when its name ends in .gguf; else .dat.
// - .dat (llama.cpp 4747's): values[j] = sum_j / count_j * ncall, the mean of x^2 times ncall;
//   last_chunk the largest ncall when written (llama.cpp's m_last_call), the dataset the -f file.
//   An entry with a column (an expert) that saw no row is left out, with a warning, as llama.cpp
//   does. Reading a file adds values[j] and ncall up per column, so that .dat files combine as
//   the data behind them would (--in-file, repeatable; their last chunks add up), as llama.cpp
//   4747 combines them. Sums are kept in double: the values of a file read alone are written
//   back with their own bits, so reading a file and writing it again gives the same bytes.
//   Without -f, the dataset written is the in-files' (their names joined by ',' when they
//   differ), where llama.cpp writes 0 and "".
// - GGUF: per entry the raw sums (in_sum2, per matrix: the experts of a MUL_MAT_ID weight) and
//   the rows summed (counts, per matrix), every entry stored (a matrix without rows has count 0),
//   sorted by name; imatrix.chunk_count the chunks processed (the in-files' included),
//   imatrix.chunk_size the chunk size, imatrix.datasets the in-files' then the -f file. Reading
//   one adds its sums and counts: GGUF files combine exactly.
// Mixing them: a .dat file's call counts as one chunk of the run's chunk size, as llama.cpp's
// reading of a .dat takes it (exact when the .dat was made with a micro-batch as large as its
// chunks, the default): its values become sums over ncall * chunk_size rows. The chunk size is
// the context's with -f; without, -c when given, else the GGUF in-files' when they agree, else
// 512. A GGUF entry written as .dat gets ncall = its largest count / the file's chunk size,
// rounded up (llama.cpp's). So .dat -> GGUF -> .dat gives back the entries, ncall and value bits
// (in name order, as GGUF keeps them; for a chunk size that is a power of two, as 512, where the
// sums are exact in float), and a GGUF half and a .dat half combine to the whole. A .dat does not
// say how an entry splits into experts: with -m, the model's tensor says; without, a .dat entry
// is written to GGUF as one matrix.
//
// The output is written every --output-frequency calls (after the decode that reaches a multiple)
// and at the end, and a copy OUT.at_N every --save-frequency calls, in the output's format; each
// time to a temporary file renamed into place: whole or not at all. Bad input (a truncated or
// malformed file of either format, entries that are not weights of the model or have another
// size, a missing or too short text) is an error before anything is written.
#include "arg.h"
#include "common.h"
#include "ggml-backend.h"
#include "gguf.h"
#include "imatrix-file.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unistd.h>
#include <vector>

namespace {

constexpr const char * kProg = "llama-imatrix";
constexpr int64_t kMinRows = 16;  // llama.cpp's: products of fewer tokens are not collected

// ---- the collector ------------------------------------------------------------------------------

struct entry {
    // Rows of activations, computed here or read from GGUF files: per column, the sum of x^2 and
    // the rows summed.
    std::vector<double> sums;
    std::vector<int64_t> counts;
    bool has_rows = false;
    // The .dat files read: per column their values (means times ncall) added up, and their ncall
    // added up (per column, their mean is dat_sums / dat_calls).
    std::vector<double> dat_sums;
    int64_t dat_calls = 0;
    bool has_dat = false;
    int32_t ncall = 0;   // the calls: computed, the .dat files', the GGUF files' (rows / chunk size)
    int64_t n_mat = 0;   // the matrices the columns split into (experts); 0: not known (.dat files only)
};

// The weight's name of a graph tensor: llama.cpp's scheduler names the copies it makes
// "BACKEND#name#N", ours "name#BACKEND".
std::string weight_name(const char * name) {
    const char * p = strchr(name, '#');
    if (!p) return name;
    const char * q = strchr(p + 1, '#');
    return q ? std::string(p + 1, q) : std::string(name, p);
}

// a + b, false past INT32_MAX (counts of calls and chunks a file may claim).
bool add_i32(int32_t & a, int64_t b) {
    if (b < 0 || (int64_t) a + b > INT32_MAX) return false;
    a = (int32_t) (a + b);
    return true;
}

struct collector {
    bool process_output = false;
    bool gguf_out = false;           // the output's format
    bool text = false;               // a text is run (else files are only combined)
    int64_t chunk_size = 512;        // tokens per chunk: what a .dat file's call counts as, and the GGUF's imatrix.chunk_size
    std::vector<std::string> order;  // entries in the order first seen (read, or computed)
    std::unordered_map<std::string, entry> entries;
    int32_t last_call = 0;           // llama.cpp's m_last_call: the largest ncall (plus the files' last chunks)
    int32_t chunks = 0;              // the chunks processed (plus the files' chunk counts)
    std::vector<std::string> in_datasets;  // the in-files' datasets, in order
    std::string error;               // set by the callback, which then stops the decode
    std::vector<uint8_t> data_copy, ids_copy;
    std::vector<float> row_buf;

    // The entry of name with n columns in n_mat matrices (0: not known); nullptr (and error) when
    // it has another size, or another number of matrices (1 and unknown take the other's).
    entry * get(const std::string & name, size_t n, int64_t n_mat) {
        auto it = entries.find(name);
        if (it == entries.end()) {
            order.push_back(name);
            it = entries.emplace(name, entry()).first;
        }
        entry & e = it->second;
        if (e.sums.empty()) {
            e.sums.assign(n, 0.0);
            e.counts.assign(n, 0);
            e.dat_sums.assign(n, 0.0);
        } else if (e.sums.size() != n) {
            error = "inconsistent size for '" + name + "' (" + std::to_string(e.sums.size()) + " vs " + std::to_string(n) + " values)";
            return nullptr;
        }
        if (n_mat > 1 && e.n_mat > 1 && e.n_mat != n_mat) {
            error = "inconsistent matrices for '" + name + "' (" + std::to_string(e.n_mat) + " vs " + std::to_string(n_mat) + ")";
            return nullptr;
        }
        e.n_mat = std::max(e.n_mat, n_mat);
        return &e;
    }

    bool merge(const common_imatrix & d, const std::string & path, std::string & err) {
        for (const auto & it : d.items) {
            entry * e = get(it.name, it.values.size(), d.gguf ? (int64_t) it.counts.size() : 0);
            if (!e) {
                err = "'" + path + "': " + error + ": the files do not belong together";
                return false;
            }
            int64_t calls = it.ncall;
            if (d.gguf) {
                const size_t n_per_row = it.values.size() / it.counts.size();
                for (size_t j = 0; j < it.values.size(); j++) {
                    e->sums[j] += it.values[j];
                    e->counts[j] += (int64_t) it.counts[j / n_per_row];
                }
                // llama.cpp's: a chunk of rows a call
                const int64_t most = (int64_t) *std::max_element(it.counts.begin(), it.counts.end());
                calls = (most + (int64_t) d.chunk_size - 1) / (int64_t) d.chunk_size;
                e->has_rows = true;
            } else {
                for (size_t j = 0; j < it.values.size(); j++) e->dat_sums[j] += it.values[j];
                e->dat_calls += it.ncall;
                e->has_dat = true;
            }
            if (!add_i32(e->ncall, calls)) {
                err = "'" + path + "': more than " + std::to_string(INT32_MAX) + " calls of '" + it.name + "' in all";
                return false;
            }
        }
        if (!add_i32(last_call, d.last_chunk) || !add_i32(chunks, d.last_chunk)) {
            err = "'" + path + "': more than " + std::to_string(INT32_MAX) + " chunks in all";
            return false;
        }
        if (!d.gguf && !d.dataset.empty()) in_datasets.push_back(d.dataset);
        for (const std::string & ds : d.datasets) {
            if (!ds.empty()) in_datasets.push_back(ds);
        }
        return true;
    }

    bool wants(const ggml_tensor * t) const {
        const ggml_tensor * src0 = t->src[0], * src1 = t->src[1];
        if (!src0 || !src1) return false;
        if (t->op == GGML_OP_MUL_MAT_ID) return t->src[2] != nullptr;  // every indirect product, as llama.cpp
        if (t->op != GGML_OP_MUL_MAT || src1->ne[1] < kMinRows || src1->type != GGML_TYPE_F32) return false;
        const std::string name = weight_name(src0->name);
        return name.rfind("blk.", 0) == 0 || (process_output && name == "output.weight");
    }

    // t's bytes in host memory: its own, or a copy from the device holding them.
    static const char * host_data(const ggml_tensor * t, std::vector<uint8_t> & copy) {
        const ggml_tensor * owner = t->view_src ? t->view_src : t;
        if (!owner->buffer || ggml_backend_buffer_is_host(owner->buffer)) return (const char *) t->data;
        copy.resize(ggml_nbytes(t));
        ggml_backend_tensor_get(t, copy.data(), 0, copy.size());
        return (const char *) copy.data();
    }

    // Row (i1, i2, i3) of the activations as floats (any layout; F32, F16 or BF16).
    const float * row(const ggml_tensor * a, const char * data, int64_t i1, int64_t i2, int64_t i3) {
        const char * p = data + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        if (a->type == GGML_TYPE_F32 && a->nb[0] == sizeof(float)) return (const float *) p;
        row_buf.resize((size_t) a->ne[0]);
        for (int64_t j = 0; j < a->ne[0]; j++) {
            const char * x = p + j * a->nb[0];
            row_buf[j] = a->type == GGML_TYPE_F32   ? *(const float *) x
                         : a->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(*(const ggml_fp16_t *) x)
                                                    : ggml_bf16_to_fp32(*(const ggml_bf16_t *) x);
        }
        return row_buf.data();
    }

    // The product t, computed: its activations added to the entry of its weight.
    bool take(const ggml_tensor * t) {
        const ggml_tensor * src0 = t->src[0], * src1 = t->src[1];
        const std::string name = weight_name(src0->name);
        if (src1->type != GGML_TYPE_F32 && src1->type != GGML_TYPE_F16 && src1->type != GGML_TYPE_BF16) {
            error = "the activations of '" + name + "' are " + ggml_type_name(src1->type) + ": only F32, F16 and BF16 are read";
            return false;
        }
        const char * data = host_data(src1, data_copy);
        const int64_t ne0 = src1->ne[0];
        double total = 0;  // a NaN or inf anywhere shows here
        entry * e = nullptr;
        if (t->op == GGML_OP_MUL_MAT_ID) {
            // ids [n_expert_used, n_tokens] (I32, maybe a view), src1 [cols, 1 or n_expert_used, n_tokens]
            const ggml_tensor * ids = t->src[2];
            const int64_t n_as = src0->ne[2], n_ids = ids->ne[0], n_tok = src1->ne[2];
            if (ids->type != GGML_TYPE_I32 || ids->ne[1] != n_tok) {
                error = "unexpected expert ids for '" + name + "'";
                return false;
            }
            const char * id = host_data(ids, ids_copy);
            if (!(e = get(name, (size_t) (ne0 * n_as), n_as))) return false;
            e->ncall++;
            for (int64_t r = 0; r < n_tok; r++) {
                for (int64_t k = 0; k < n_ids; k++) {
                    const int32_t ex = *(const int32_t *) (id + r * ids->nb[1] + k * ids->nb[0]);
                    if (ex < 0 || ex >= n_as) {
                        error = "expert id " + std::to_string(ex) + " out of range for '" + name + "'";
                        return false;
                    }
                    const float * x = row(src1, data, k % src1->ne[1], r, 0);
                    double * s = e->sums.data() + ex * ne0;
                    int64_t * c = e->counts.data() + ex * ne0;
                    for (int64_t j = 0; j < ne0; j++) {
                        const double v = (double) x[j] * x[j];
                        s[j] += v;
                        c[j]++;
                        total += v;
                    }
                }
            }
        } else {
            if (!(e = get(name, (size_t) ne0, 1))) return false;
            e->ncall++;
            for (int64_t i3 = 0; i3 < src1->ne[3]; i3++) {
                for (int64_t i2 = 0; i2 < src1->ne[2]; i2++) {
                    for (int64_t i1 = 0; i1 < src1->ne[1]; i1++) {
                        const float * x = row(src1, data, i1, i2, i3);
                        for (int64_t j = 0; j < ne0; j++) {
                            const double v = (double) x[j] * x[j];
                            e->sums[j] += v;
                            e->counts[j]++;
                            total += v;
                        }
                    }
                }
            }
        }
        if (!std::isfinite(total)) {
            error = "non-finite activations (NaN or inf) multiply '" + name + "'";
            return false;
        }
        e->has_rows = true;
        last_call = std::max(last_call, e->ncall);
        return true;
    }

    // Column j of an entry as rows: the sum of x^2 and the rows summed. A .dat file's call counts
    // as a chunk of chunk_size rows (llama.cpp's reading of a .dat), its values (means times
    // ncall) as their sums. An entry of .dat files alone keeps their arithmetic, values over calls
    // (as llama.cpp 4747 combines them): written as .dat it has the bytes it had; as GGUF
    // (rows: true) it is scaled to rows.
    void column(const entry & e, size_t j, bool rows, double & sum, double & n) const {
        if (!e.has_rows) {
            const double k = rows ? (double) chunk_size : 1.0;
            sum = e.dat_sums[j] * k;
            n = (double) e.dat_calls * k;
            return;
        }
        sum = e.sums[j];
        n = (double) e.counts[j];
        if (e.has_dat) {
            sum += e.dat_sums[j] * (double) chunk_size;
            n += (double) e.dat_calls * (double) chunk_size;
        }
    }

    // The matrix to write. .dat: the entries with rows in every column, in the order first seen
    // (the others skipped with a warning, as llama.cpp 4747 does). GGUF: every entry (the writer
    // sorts them by name), a matrix without rows with count 0 (warned of, as llama.cpp does).
    // n_stored: the entries with rows in some column.
    bool build(const std::string & dataset, common_imatrix & m, int & n_stored, std::string & err) const {
        m.gguf = gguf_out;
        n_stored = 0;
        double sum = 0, n = 0;
        for (const std::string & name : order) {
            const entry & e = entries.at(name);
            if (e.counts.empty()) continue;
            size_t zeros = 0;
            for (size_t j = 0; j < e.sums.size(); j++) {
                column(e, j, gguf_out, sum, n);
                zeros += n == 0;
            }
            const size_t n_all = e.sums.size();
            if (zeros == n_all) {
                fprintf(stderr, "%s: entry '%40s' has no data%s\n", kProg, name.c_str(), gguf_out ? "" : " - skipping");
            } else if (zeros > 0) {
                fprintf(stderr, "%s: entry '%40s' has partial data (%.2f%%)%s\n", kProg, name.c_str(),
                        100.0 * (double) (n_all - zeros) / (double) n_all, gguf_out ? "" : " - skipping");
            }
            n_stored += zeros < n_all;
            if (zeros > 0 && !gguf_out) continue;
            common_imatrix::item it;
            it.name = name;
            it.ncall = e.ncall;
            it.values.resize(n_all);
            if (gguf_out) {
                const size_t n_mat = (size_t) std::max<int64_t>(1, e.n_mat), n_per_row = n_all / n_mat;
                it.counts.resize(n_mat);
                for (size_t j = 0; j < n_all; j++) {
                    column(e, j, true, sum, n);
                    it.values[j] = (float) sum;
                    if (j % n_per_row == 0) {
                        it.counts[j / n_per_row] = (float) n;
                    } else if ((float) n != it.counts[j / n_per_row]) {
                        err = "cannot store '" + name + "': the columns of its matrix " + std::to_string(j / n_per_row) +
                              " saw different numbers of rows";
                        return false;
                    }
                }
            } else {
                for (size_t j = 0; j < n_all; j++) {
                    column(e, j, false, sum, n);
                    it.values[j] = (float) (sum / n * (double) e.ncall);
                }
            }
            m.items.push_back(std::move(it));
        }
        if (!gguf_out && m.items.size() < entries.size()) {
            fprintf(stderr, "%s: storing only %zu out of %zu entries\n", kProg, m.items.size(), entries.size());
        }
        if (gguf_out) {
            m.last_chunk = chunks;
            m.chunk_size = (uint32_t) chunk_size;
            m.datasets = in_datasets;
            if (!dataset.empty()) m.datasets.push_back(dataset);
        } else {
            m.last_chunk = last_call;
            m.dataset = dataset;
            if (!text) {  // (the in-files', each once)
                std::vector<std::string> seen;
                for (const std::string & d : in_datasets) {
                    if (std::find(seen.begin(), seen.end(), d) != seen.end()) continue;
                    m.dataset += (seen.empty() ? "" : ",") + d;
                    seen.push_back(d);
                }
            }
        }
        return true;
    }

    // dataset: the -f file (none: "").
    bool save(const std::string & path, const std::string & dataset, std::string & err) const {
        common_imatrix m;
        int n_stored = 0;
        if (!build(dataset, m, n_stored, err)) return false;
        if (n_stored == 0) {
            err = "no entry has data: nothing written to '" + path + "' (products of fewer than " + std::to_string(kMinRows) +
                  " tokens are not collected, as llama.cpp's: raise -b / -ub)";
            return false;
        }
        return common_imatrix_write(path, m, err);
    }
};

bool collect_cb(ggml_tensor * t, bool ask, void * ud) {
    collector & c = *(collector *) ud;
    if (ask) return c.wants(t);
    return c.error.empty() && c.take(t);
}

// Each entry must be a weight of the model, with as many values as the products give it:
// the weight's columns, times its experts for a 3-D (MUL_MAT_ID) one. An entry whose matrices
// are not known (.dat files) takes the model's.
bool check_against_model(const std::string & model_path, collector & c, std::string & err) {
    ggml_context * meta = nullptr;
    gguf_init_params gp = {};
    gp.no_alloc = true;
    gp.ctx = &meta;
    gguf_context * g = gguf_init_from_file(model_path.c_str(), gp);
    if (!g) {
        err = "cannot read the model '" + model_path + "'";
        return false;
    }
    bool ok = true;
    for (const std::string & name : c.order) {
        const ggml_tensor * t = ggml_get_tensor(meta, name.c_str());
        entry & e = c.entries.at(name);
        const size_t have = e.sums.size();
        if (!t) {
            err = "the importance matrix has an entry '" + name + "', which is not a tensor of the model '" + model_path +
                  "': it was made for another model";
            ok = false;
            break;
        }
        const int64_t n_mat = t->ne[2] * t->ne[3], want = t->ne[0] * n_mat;
        if ((int64_t) have != want) {
            err = "the importance matrix's entry '" + name + "' has " + std::to_string(have) + " values, the model's tensor " +
                  std::to_string(want) + " columns: it was made for another model";
            ok = false;
            break;
        }
        if (e.n_mat > 1 && e.n_mat != n_mat) {
            err = "the importance matrix's entry '" + name + "' has " + std::to_string(e.n_mat) + " matrices, the model's tensor " +
                  std::to_string(n_mat) + ": it was made for another model";
            ok = false;
            break;
        }
        e.n_mat = n_mat;
    }
    gguf_free(g);
    ggml_free(meta);
    return ok;
}

struct ppl_state {
    double nll = 0, nll2 = 0;
    int64_t count = 0;
};

// -log p(tok) from a row of logits, as llama.cpp's imatrix computes it.
double nll_of(const float * logits, int32_t n_vocab, llama_token tok) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += std::exp((double) (logits[i] - mx));
    return -((double) (logits[tok] - mx) - std::log(sum));
}

int fail_usage(const std::string & msg) {
    fprintf(stderr, "%s: %s\n(see %s --help)\n", kProg, msg.c_str(), kProg);
    return 1;
}

int fail(const std::string & msg) {
    fprintf(stderr, "%s: %s\n", kProg, msg.c_str());
    return 1;
}

}  // namespace

int main(int argc, char ** argv) {
    common_params params;
    params.n_ctx = -1;     // (not given: llama.cpp's 512, below; combining only, the chunk size is then the GGUF in-files')
    params.n_batch = 2048;  // llama.cpp's imatrix defaults
    params.escape = false;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_IMATRIX)) return 1;
    common_log_init(params.verbosity);
    const bool ctx_given = params.n_ctx > 0;
    if (params.n_ctx < 0) params.n_ctx = 512;
    const std::string out_file = params.out_file.empty() ? "imatrix.dat" : params.out_file;
    const bool gguf_out = params.imatrix_out_format.empty() ? out_file.size() > 5 && out_file.compare(out_file.size() - 5, 5, ".gguf") == 0
                                                            : params.imatrix_out_format == "gguf";
    const int32_t pad = params.flash_attn ? 256 : 32;  // llama.cpp's rounding of the context
    const bool have_text = params.prompt_sources > 0;
    if (params.prompt_sources > 1) return fail_usage("give the text once (-f FILE or -p TEXT)");
    if (!have_text && params.in_files.empty()) {
        return fail_usage("no text given (-f FILE) and no importance matrices to combine (--in-file FILE)");
    }
    if (have_text && params.model.empty()) return fail_usage("no model given (-m MODEL)");

    // The inputs, checked before anything is loaded or written.
    collector c;
    c.process_output = params.process_output;
    c.gguf_out = gguf_out;
    c.text = have_text;
    std::vector<std::pair<std::string, uint32_t>> gguf_chunks;  // the GGUF in-files' chunk sizes
    bool dat_in = false;
    for (const std::string & f : params.in_files) {
        fprintf(stderr, "%s: loading imatrix from '%s'\n", kProg, f.c_str());
        common_imatrix d;
        std::string err;
        if (!common_imatrix_read(f, d, err) || !c.merge(d, f, err)) return fail(err);
        if (d.gguf) gguf_chunks.emplace_back(f, d.chunk_size);
        dat_in = dat_in || !d.gguf;
    }
    if (have_text && !common_load_prompt(params, kProg)) return 1;
    if (!params.model.empty() && !c.order.empty()) {
        std::string err;
        if (!check_against_model(params.model, c, err)) return fail(err);
    }
    // The chunk size (see the top of this file): a .dat file's call counts as a chunk.
    const auto set_chunk_size = [&](int64_t n) {
        c.chunk_size = n;
        for (const auto & [f, n_f] : gguf_chunks) {
            if (n_f != n && dat_in) {
                fprintf(stderr, "%s: warning: '%s' was computed in chunks of %u tokens, this run's are %lld: the .dat files' calls "
                                "are counted as chunks of %lld tokens\n", kProg, f.c_str(), n_f, (long long) n, (long long) n);
            }
        }
    };

    if (!have_text) {
        const bool agree = !gguf_chunks.empty() && std::all_of(gguf_chunks.begin(), gguf_chunks.end(),
                                                               [&](const auto & g) { return g.second == gguf_chunks[0].second; });
        set_chunk_size(ctx_given ? (params.n_ctx + pad - 1) / pad * pad : agree ? (int64_t) gguf_chunks[0].second : 512);
        fprintf(stderr, "%s: no text given: combining %zu file(s) into '%s' (%s)\n", kProg, params.in_files.size(), out_file.c_str(),
                gguf_out ? "GGUF" : ".dat");
        std::string err;
        if (!c.save(out_file, "", err)) return fail(err);
        fprintf(stderr, "%s: stored %zu entries (last chunk %d) in '%s'\n", kProg, c.order.size(), gguf_out ? c.chunks : c.last_call,
                out_file.c_str());
        return 0;
    }

    if (const std::string w = common_gpu_flags_warning(params, kProg); !w.empty()) fputs(w.c_str(), stderr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(params.model.c_str(), common_model_params_to_llama(params));
    if (!model) return fail("cannot load model '" + params.model + "'");
    const llama_vocab * vocab = llama_model_get_vocab(model);
    llama_context * ctx = nullptr;
    auto finish = [&](int rc) {
        llama_free(ctx);
        llama_model_free(model);
        llama_backend_free();
        return rc;
    };
    if (llama_vocab_get_add_eos(vocab)) {
        fprintf(stderr, "%s: the model's tokenizer appends EOS (tokenizer.ggml.add_eos_token): llama.cpp's imatrix does not "
                        "take such a model, nor does this one\n", kProg);
        return finish(1);
    }

    // The context: llama.cpp's rounding of -c, batches of min(-b, -c) tokens.
    const int32_t n_ctx_given = params.n_ctx > 0 ? params.n_ctx : llama_model_n_ctx_train(model);
    const int32_t n_batch = std::max(1, std::min(params.n_batch, n_ctx_given));
    llama_context_params cp = common_context_params_to_llama(params);
    cp.n_ctx = (uint32_t) ((n_ctx_given + pad - 1) / pad * pad);
    cp.n_batch = (uint32_t) n_batch;
    cp.n_ubatch = params.n_ubatch > 0 ? std::min<uint32_t>((uint32_t) params.n_ubatch, cp.n_batch) : cp.n_batch;
    cp.n_seq_max = 1;
    cp.cb_eval = collect_cb;
    cp.cb_eval_user_data = &c;
    ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "%s: cannot create a context of %u tokens\n", kProg, cp.n_ctx);
        return finish(1);
    }
    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx);
    set_chunk_size(n_ctx);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    if (n_ctx > llama_model_n_ctx_train(model)) {
        fprintf(stderr, "%s: warning: the model was trained on only %d context tokens (%d specified)\n", kProg,
                llama_model_n_ctx_train(model), n_ctx);
    }
    fprintf(stderr, "\nsystem_info: n_threads = %d / %d | %s\n", cp.n_threads, (int) std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)),
            llama_print_system_info());

    fprintf(stderr, "compute_imatrix: tokenizing the input ..\n");
    std::vector<llama_token> tokens = common_tokenize(vocab, params.prompt, true);
    if (params.i_chunk > 0) {
        if ((size_t) (params.i_chunk + 2) * (size_t) n_ctx >= tokens.size()) {
            fprintf(stderr, "%s: there will be not enough tokens left after removing %d chunks (the text has %zu tokens, "
                            "chunks of %d)\n", kProg, params.i_chunk, tokens.size(), n_ctx);
            return finish(1);
        }
        fprintf(stderr, "compute_imatrix: removing initial %d chunks (%d tokens)\n", params.i_chunk, params.i_chunk * n_ctx);
        tokens.erase(tokens.begin(), tokens.begin() + (size_t) params.i_chunk * n_ctx);
    }
    if (tokens.size() < 2 * (size_t) n_ctx) {
        fprintf(stderr, "%s: you need at least %d tokens for a context of %d tokens\n"
                        "%s: the text '%s' tokenizes to only %zu tokens\n", kProg, 2 * n_ctx, n_ctx, kProg,
                params.prompt_file.c_str(), tokens.size());
        return finish(1);
    }
    const int32_t n_chunk_max = (int32_t) (tokens.size() / (size_t) n_ctx);
    const int32_t n_chunk = params.n_chunks < 0 ? n_chunk_max : std::min(params.n_chunks, n_chunk_max);
    const int32_t num_batches = (n_ctx + n_batch - 1) / n_batch;
    const bool add_bos = llama_vocab_get_add_bos(vocab);
    fprintf(stderr, "compute_imatrix: computing over %d chunks with batch_size %d\n", n_chunk, n_batch);

    llama_batch batch = llama_batch_init(n_batch, 0, 1);
    std::vector<float> logits;
    ppl_state ppl;
    int32_t saved_out = c.last_call, saved_copy = c.last_call;  // the calls at the last periodic writes
    int rc = 0;
    for (int32_t i = 0; i < n_chunk && rc == 0; i++) {
        const int32_t start = i * n_ctx;
        const auto t0 = std::chrono::steady_clock::now();
        llama_kv_self_clear(ctx);
        logits.clear();
        for (int32_t j = 0; j < num_batches && rc == 0; j++) {
            const int32_t b0 = start + j * n_batch;
            const int32_t n = std::min(start + n_ctx - b0, n_batch);
            common_batch_clear(batch);
            for (int32_t k = 0; k < n; k++) {
                const llama_token tok = add_bos && j == 0 && k == 0 ? llama_vocab_bos(vocab) : tokens[(size_t) (b0 + k)];
                common_batch_add(batch, tok, j * n_batch + k, {0}, true);
            }
            if (llama_decode(ctx, batch) != 0) {
                fprintf(stderr, "%s: %s\n", kProg, c.error.empty() ? "failed to evaluate the chunk" : c.error.c_str());
                rc = 1;
                break;
            }
            if (params.compute_ppl) {
                const float * l = llama_get_logits(ctx);
                logits.insert(logits.end(), l, l + (size_t) n * n_vocab);
            }
            if (j == num_batches - 1) add_i32(c.chunks, 1);  // (before the writes: the chunk's rows are in)
            // The periodic writes, after the decode that reaches a multiple of their frequency.
            std::string err;
            if (params.n_out_freq > 0 && c.last_call / params.n_out_freq > saved_out / params.n_out_freq) {
                saved_out = c.last_call;
                if (!c.save(out_file, params.prompt_file, err)) rc = fail(err);
            }
            if (rc == 0 && params.n_save_freq > 0 && c.last_call / params.n_save_freq > saved_copy / params.n_save_freq) {
                saved_copy = c.last_call;
                if (!c.save(out_file + ".at_" + std::to_string(c.last_call), params.prompt_file, err)) rc = fail(err);
            }
        }
        if (rc != 0) break;
        if (i == 0) {
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            fprintf(stderr, "compute_imatrix: %.2f seconds per pass - ETA %.2f minutes\n", s, s * n_chunk / 60.0);
        }
        if (params.compute_ppl) {
            // the second half of the chunk: the logits of position p score the token at p + 1
            const int32_t first = n_ctx / 2;
            for (int32_t p = first; p < n_ctx - 1; p++) {
                const double v = nll_of(logits.data() + (size_t) p * n_vocab, n_vocab, tokens[(size_t) (start + p + 1)]);
                ppl.nll += v;
                ppl.nll2 += v * v;
                ppl.count++;
            }
            printf("[%d]%.4lf,", i + 1, std::exp(ppl.nll / (double) ppl.count));
            fflush(stdout);
        } else {
            fprintf(stderr, "compute_imatrix: chunk %d of %d\n", i + 1, n_chunk);
        }
    }
    llama_batch_free(batch);
    if (rc != 0) return finish(rc);
    printf("\n");
    if (params.compute_ppl && ppl.count > 0) {
        const double nll = ppl.nll / (double) ppl.count;
        const double var = ppl.nll2 / (double) ppl.count - nll * nll;
        const double pplv = std::exp(nll);
        if (var > 0 && ppl.count > 1) {
            printf("Final estimate: PPL = %.4lf +/- %.5lf\n", pplv, std::sqrt(var / (double) (ppl.count - 1)) * pplv);
        } else {
            printf("Unexpected negative standard deviation of log(prob)\n");
        }
    }
    fflush(stdout);

    std::string err;
    if (!c.save(out_file, params.prompt_file, err)) return finish(fail(err));
    fprintf(stderr, "\n%s: stored collected data after %d chunks in '%s'\n", kProg, gguf_out ? c.chunks : c.last_call, out_file.c_str());
    if (!params.no_perf) llama_perf_context_print(ctx);
    return finish(0);
}
