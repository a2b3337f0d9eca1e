// llama-quantize: converts the tensors of a GGUF model to a quantized type (or mix).
//
//   llama-quantize [options] IN.gguf [OUT.gguf] TYPE [NTHREADS]
//
// llama.cpp's llama-quantize: its flags (--allow-requantize, --leave-output-tensor, --pure,
// --output-tensor-type, --token-embedding-type, --override-kv, --keep-split), its types by name
// or file type number, COPY, and OUT defaulting to ggml-model-TYPE.gguf beside IN; --imatrix
// (llama-imatrix's, .dat or GGUF told apart by content: each column's mean squared activation
// weights its error in the quantizers' searches) with --include-weights / --exclude-weights, and
// the quantize.imatrix.* keys llama.cpp writes. The work is the library's llama_model_quantize
// (src/llama-quant.cpp); this program reads the flags and the importance matrix, and removes the
// partial output when stopped by a signal.
#include "arg.h"
#include "common.h"
#include "ggml.h"
#include "imatrix-file.h"
#include "llama-quant-mix.h"
#include "llama.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

static char g_tmp_path[4096];  // the library's partial output (OUT.tmp.PID), removed on a signal

static void on_signal(int sig) {
    if (g_tmp_path[0]) unlink(g_tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

[[noreturn]] static void die(const char * fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "llama-quantize: error: ");
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
    exit(1);
}

// The options (from the table), then what TYPE may be.
static void usage(FILE * out) {
    fputs(common_params_help(LLAMA_EXAMPLE_QUANTIZE).c_str(), out);
    fprintf(out, "\nConverts the matrices of a GGUF model to TYPE; vectors (norms, biases) stay F32.\n"
                 "The _S/_M/_L mixes keep sensitive tensors at higher precision. OUT defaults to\n"
                 "ggml-model-TYPE.gguf beside IN; NTHREADS to the number of cores. The IQ2 and IQ1 types\n"
                 "(and Q2_K_S, IQ3_XXS) need an importance matrix (--imatrix, from llama-imatrix).\n"
                 "\nTYPE is a name or llama.cpp's file type number:\n");
    for (const quant_target * t = quant_targets(); t->name; t++) {
        if (t->file_type >= 0) fprintf(out, "  %2d  or  %-7s : %s\n", t->file_type, t->name, t->desc);
        else fprintf(out, "          %-7s : %s\n", t->name, t->desc);
    }
}

static llama_model_kv_override kv_int(const char * key, int64_t v) {
    llama_model_kv_override o = {};
    o.tag = LLAMA_KV_OVERRIDE_TYPE_INT;
    snprintf(o.key, sizeof(o.key), "%s", key);
    o.val_i64 = v;
    return o;
}

static llama_model_kv_override kv_str(const char * key, const std::string & v) {
    llama_model_kv_override o = {};
    o.tag = LLAMA_KV_OVERRIDE_TYPE_STR;
    snprintf(o.key, sizeof(o.key), "%s", key);
    snprintf(o.val_str, sizeof(o.val_str), "%s", v.c_str());
    return o;
}

int main(int argc, char ** argv) {
    // The options: common/arg.cpp's table (LLAMA_EXAMPLE_QUANTIZE); the other words are positional.
    common_params cp;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") || !strcmp(argv[i], "--usage")) {
            usage(stdout);
            return 0;
        }
    }
    if (!common_params_parse(argc, argv, cp, LLAMA_EXAMPLE_QUANTIZE)) return 1;
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.allow_requantize = cp.quantize_allow_requantize;
    qp.pure = cp.quantize_pure;
    qp.quantize_output_tensor = !cp.quantize_leave_output;
    qp.output_tensor_type = cp.quantize_output_type;
    qp.token_embedding_type = cp.quantize_token_embd_type;
    qp.keep_split = cp.quantize_keep_split;
    std::vector<llama_model_kv_override> overrides;  // ends with an empty key
    for (const llama_model_kv_override & o : cp.kv_overrides) {
        if (o.key[0]) overrides.push_back(o);
    }
    std::vector<std::string> pos = cp.positional;
    // IN [OUT] TYPE [NTHREADS]: as llama.cpp, the second word is TYPE when it names one (then OUT
    // is ggml-model-TYPE beside IN; with --keep-split, a prefix, as OUT less a .gguf suffix is).
    if (pos.size() >= 2 && quant_target_find(pos[1])) {
        const size_t slash = pos[0].rfind('/');
        pos.insert(pos.begin() + 1, (slash == std::string::npos ? std::string() : pos[0].substr(0, slash + 1)) + "ggml-model-" +
                                        quant_target_find(pos[1])->name + (qp.keep_split ? "" : ".gguf"));
    } else if (pos.size() >= 2 && qp.keep_split && pos[1].size() > 5 && pos[1].compare(pos[1].size() - 5, 5, ".gguf") == 0) {
        pos[1].resize(pos[1].size() - 5);
    }
    if (pos.size() < 3 || pos.size() > 4) {
        usage(stderr);
        return 1;
    }
    const std::string in_path = pos[0], out_path = pos[1];
    const quant_target * target = quant_target_find(pos[2]);
    if (!target) {
        fprintf(stderr, "llama-quantize: error: unknown type '%s'\n\n", pos[2].c_str());
        usage(stderr);
        return 1;
    }
    qp.only_copy = target->base == GGML_TYPE_COUNT;
    qp.ftype = qp.only_copy ? LLAMA_FTYPE_ALL_F32 : (llama_ftype) target->file_type;
    qp.nthread = (int) std::max(1u, std::thread::hardware_concurrency());
    if (pos.size() == 4) {
        char * end = nullptr;
        const long v = strtol(pos[3].c_str(), &end, 10);
        if (!end || *end != '\0' || v < 1 || v > 1024) die("NTHREADS must be a number from 1 to 1024, got '%s'", pos[3].c_str());
        qp.nthread = (int) v;
    }

    // ---- the importance matrix: per tensor, its columns' mean squared activations ----
    const std::vector<std::string> & incl = cp.quantize_include_weights, & excl = cp.quantize_exclude_weights;
    if (!incl.empty() && !excl.empty()) die("--include-weights and --exclude-weights exclude each other");
    if (cp.quantize_imatrix.empty() && (!incl.empty() || !excl.empty())) die("--include-weights and --exclude-weights need --imatrix");
    std::unordered_map<std::string, std::vector<float>> imatrix;
    if (!cp.quantize_imatrix.empty()) {
        if (qp.only_copy) die("--imatrix with COPY: nothing is quantized");
        common_imatrix m;
        std::string err;
        if (!common_imatrix_read(cp.quantize_imatrix, m, err)) die("%s", err.c_str());
        const auto contains_any = [](const std::string & name, const std::vector<std::string> & v) {
            for (const std::string & w : v) {
                if (name.find(w) != std::string::npos) return true;
            }
            return false;
        };
        size_t n_entries = 0;
        for (const common_imatrix::item & it : m.items) {
            n_entries++;
            if (contains_any(it.name, excl) || (!incl.empty() && !contains_any(it.name, incl))) continue;
            imatrix[it.name] = common_imatrix_weights(it);
        }
        // (llama.cpp's llama-quantize names a GGUF matrix's first dataset)
        const std::string dataset = !m.gguf ? m.dataset : m.datasets.empty() ? std::string() : m.datasets[0];
        fprintf(stderr, "llama-quantize: importance matrix '%s' (%s): %zu of %zu entries used, computed on %d chunks of '%s'\n",
                cp.quantize_imatrix.c_str(), m.gguf ? "GGUF" : ".dat", imatrix.size(), n_entries, (int) m.last_chunk, dataset.c_str());
        if (!imatrix.empty()) {  // (the keys llama.cpp's llama-quantize writes)
            overrides.push_back(kv_str("quantize.imatrix.file", cp.quantize_imatrix));
            if (!dataset.empty()) overrides.push_back(kv_str("quantize.imatrix.dataset", dataset));
            overrides.push_back(kv_int("quantize.imatrix.entries_count", (int64_t) imatrix.size()));
            if (m.last_chunk > 0) overrides.push_back(kv_int("quantize.imatrix.chunks_count", m.last_chunk));
        }
        qp.imatrix = &imatrix;
    }
    qp.kv_overrides = &overrides;

    char final_path[4096];
    if (qp.keep_split) llama_split_path(final_path, sizeof(final_path), out_path.c_str(), 0, 1);
    else snprintf(final_path, sizeof(final_path), "%s", out_path.c_str());
    const std::string tmp = std::string(final_path) + ".tmp." + std::to_string((long) getpid());
    if (tmp.size() >= sizeof(g_tmp_path)) die("the output path is too long");
    memcpy(g_tmp_path, tmp.c_str(), tmp.size() + 1);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (llama_model_quantize(in_path.c_str(), out_path.c_str(), &qp) != 0) die("failed to quantize '%s' (see the message above)", in_path.c_str());
    return 0;
}
