// llama-quantize: converts the tensors of a GGUF model to a quantized type (or mix).
//
//   llama-quantize [options] IN.gguf [OUT.gguf] TYPE [NTHREADS]
//
// llama.cpp's llama-quantize: its flags (--allow-requantize, --leave-output-tensor, --pure,
// --output-tensor-type, --token-embedding-type, --override-kv), its types by name or file type
// number, COPY, and OUT defaulting to ggml-model-TYPE.gguf beside IN; --imatrix (llama-imatrix's
// .dat: each column's mean squared activation weights its error in the quantizers' searches)
// with --include-weights / --exclude-weights, and the quantize.imatrix.* keys llama.cpp writes.
// --keep-split is refused as not supported.
//
// The input is memory-mapped and read once; each tensor is converted by NTHREADS threads and
// appended to a temporary file next to OUT, which is renamed into place only when complete, so
// an interrupted or failed run never leaves a half-written output. Pages of the input are
// released once their tensor is written, keeping resident memory near the largest tensor.
#include "arg.h"
#include "common.h"
#include "ggml.h"
#include "gguf.h"
#include "imatrix-file.h"
#include "quant-mix.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

static std::string g_tmp_path;  // removed on failure or interruption

static void remove_tmp() {
    if (!g_tmp_path.empty()) unlink(g_tmp_path.c_str());
}

static void on_signal(int sig) {
    if (!g_tmp_path.empty()) unlink(g_tmp_path.c_str());
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
    remove_tmp();
    exit(1);
}

// The options (from the table), then what TYPE may be.
static void usage(FILE * out) {
    fputs(common_params_help(LLAMA_EXAMPLE_QUANTIZE).c_str(), out);
    fprintf(out, "\nConverts the matrices of a GGUF model to TYPE; vectors (norms, biases) stay F32.\n"
                 "The _S/_M/_L mixes keep sensitive tensors at higher precision. OUT defaults to\n"
                 "ggml-model-TYPE.gguf beside IN; NTHREADS to the number of cores.\n"
                 "\nTYPE is a name or llama.cpp's file type number:\n");
    for (const quant_target * t = quant_targets(); t->name; t++) {
        if (t->file_type >= 0) fprintf(out, "  %2d  or  %-7s : %s\n", t->file_type, t->name, t->desc);
        else fprintf(out, "          %-7s : %s\n", t->name, t->desc);
    }
}

// --override-kv (parsed by common_parse_kv_override when the options were read), set in the
// output's metadata as llama.cpp's llama-quantize sets it: integers as int32.
static bool apply_override(gguf_context * g, const llama_model_kv_override & o, std::string & err) {
    switch (o.tag) {
        case LLAMA_KV_OVERRIDE_TYPE_INT:
            if (o.val_i64 < INT32_MIN || o.val_i64 > INT32_MAX) {
                err = std::string(o.key) + "=int:" + std::to_string(o.val_i64) + ": not a 32-bit integer";
                return false;
            }
            gguf_set_val_i32(g, o.key, (int32_t) o.val_i64);
            return true;
        case LLAMA_KV_OVERRIDE_TYPE_FLOAT: gguf_set_val_f32(g, o.key, (float) o.val_f64); return true;
        case LLAMA_KV_OVERRIDE_TYPE_BOOL: gguf_set_val_bool(g, o.key, o.val_bool); return true;
        case LLAMA_KV_OVERRIDE_TYPE_STR: gguf_set_val_str(g, o.key, o.val_str); return true;
    }
    err = std::string(o.key) + ": unknown override type";
    return false;
}

static int64_t key_u32_or(const gguf_context * g, const std::string & key, int64_t def) {
    const int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return def;
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT32: return gguf_get_val_u32(g, id);
        case GGUF_TYPE_INT32:  return gguf_get_val_i32(g, id);
        case GGUF_TYPE_UINT64: return (int64_t) gguf_get_val_u64(g, id);
        default:               return def;
    }
}

static bool write_all(int fd, const void * data, size_t n) {
    const char * p = (const char *) data;
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += w;
        n -= (size_t) w;
    }
    return true;
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
    const bool allow_requantize = cp.quantize_allow_requantize;
    quant_options opt;
    opt.pure = cp.quantize_pure;
    opt.quantize_output = !cp.quantize_leave_output;
    opt.output_type = cp.quantize_output_type;
    opt.token_embd_type = cp.quantize_token_embd_type;
    const std::vector<llama_model_kv_override> & overrides = cp.kv_overrides;  // ends with an empty key
    std::vector<std::string> pos = cp.positional;
    // IN [OUT] TYPE [NTHREADS]: as llama.cpp, the second word is TYPE when it names one.
    if (pos.size() >= 2 && quant_target_find(pos[1])) {
        const size_t slash = pos[0].rfind('/');
        pos.insert(pos.begin() + 1, (slash == std::string::npos ? std::string() : pos[0].substr(0, slash + 1)) + "ggml-model-" +
                                        quant_target_find(pos[1])->name + ".gguf");
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
    const bool copy = target->base == GGML_TYPE_COUNT;
    int n_threads = (int) std::max(1u, std::thread::hardware_concurrency());
    if (pos.size() == 4) {
        char * end = nullptr;
        const long v = strtol(pos[3].c_str(), &end, 10);
        if (!end || *end != '\0' || v < 1 || v > 1024) die("NTHREADS must be a number from 1 to 1024, got '%s'", pos[3].c_str());
        n_threads = (int) v;
    }
    if (in_path == out_path) die("the output must not be the input file");

    // ---- read the input ----
    ggml_context * meta = nullptr;
    gguf_init_params params = {};
    params.no_alloc = false;
    params.ctx = &meta;
    params.use_mmap = true;
    gguf_context * gin = gguf_init_from_file(in_path.c_str(), params);
    if (!gin) die("cannot load '%s' (see the message above)", in_path.c_str());

    const int64_t arch_id = gguf_find_key(gin, "general.architecture");
    const std::string arch = arch_id >= 0 && gguf_get_kv_type(gin, arch_id) == GGUF_TYPE_STRING ? gguf_get_val_str(gin, arch_id) : "llama";
    quant_model_info info;
    info.n_layer = (int) key_u32_or(gin, arch + ".block_count", 0);
    info.n_head = (int) key_u32_or(gin, arch + ".attention.head_count", 0);
    info.n_head_kv = (int) key_u32_or(gin, arch + ".attention.head_count_kv", info.n_head);
    info.n_expert = (int) key_u32_or(gin, arch + ".expert_count", 0);
    info.has_output = gguf_find_tensor(gin, "output.weight") >= 0;

    const int64_t n_tensors = gguf_get_n_tensors(gin);
    std::vector<ggml_tensor *> tensors;
    std::vector<ggml_type> out_types;
    gguf_context * gout = gguf_init_empty();
    gguf_set_kv(gout, gin);
    if (!copy) {
        gguf_set_val_u32(gout, "general.quantization_version", 2);
        gguf_set_val_u32(gout, "general.file_type", (uint32_t) target->file_type);
    }
    for (const llama_model_kv_override & o : overrides) {
        std::string err;
        if (o.key[0] && !apply_override(gout, o, err)) die("--override-kv %s", err.c_str());
    }

    // ---- the importance matrix: per tensor, its columns' mean squared activations ----
    const std::vector<std::string> & incl = cp.quantize_include_weights, & excl = cp.quantize_exclude_weights;
    if (!incl.empty() && !excl.empty()) die("--include-weights and --exclude-weights exclude each other");
    if (cp.quantize_imatrix.empty() && (!incl.empty() || !excl.empty())) die("--include-weights and --exclude-weights need --imatrix");
    std::unordered_map<std::string, std::vector<float>> imatrix;
    if (!cp.quantize_imatrix.empty()) {
        if (copy) die("--imatrix with COPY: nothing is quantized");
        common_imatrix m;
        std::string err;
        if (!common_imatrix_read(cp.quantize_imatrix, m, err)) die("%s", err.c_str());
        const auto contains_any = [](const std::string & name, const std::vector<std::string> & v) {
            for (const std::string & w : v) {
                if (name.find(w) != std::string::npos) return true;
            }
            return false;
        };
        for (common_imatrix::item & it : m.items) {
            // An imatrix made for another model: a name it lacks, or another width, is refused.
            ggml_tensor * t = ggml_get_tensor(meta, it.name.c_str());
            if (!t) die("the importance matrix '%s' has an entry for '%s', which %s lacks: it was made for another model", cp.quantize_imatrix.c_str(),
                        it.name.c_str(), in_path.c_str());
            const int64_t want = t->ne[0] * t->ne[2] * t->ne[3];
            if ((int64_t) it.values.size() != want && it.name != "token_embd.weight") {
                die("the importance matrix '%s' has %zu values for '%s', whose %lld columns x %lld matrices need %lld: it was made for another model",
                    cp.quantize_imatrix.c_str(), it.values.size(), it.name.c_str(), (long long) t->ne[0], (long long) (t->ne[2] * t->ne[3]),
                    (long long) want);
            }
            if (contains_any(it.name, excl) || (!incl.empty() && !contains_any(it.name, incl))) continue;
            if (it.ncall > 0) {
                for (float & v : it.values) v /= (float) it.ncall;  // (the file holds the means times ncall)
            }
            imatrix[it.name] = std::move(it.values);
        }
        fprintf(stderr, "llama-quantize: importance matrix '%s': %zu of %zu entries used, computed on %d chunks of '%s'\n",
                cp.quantize_imatrix.c_str(), imatrix.size(), m.items.size(), (int) m.last_chunk, m.dataset.c_str());
        if (!imatrix.empty()) {  // (the keys llama.cpp's llama-quantize writes)
            gguf_set_val_str(gout, "quantize.imatrix.file", cp.quantize_imatrix.c_str());
            if (!m.dataset.empty()) gguf_set_val_str(gout, "quantize.imatrix.dataset", m.dataset.c_str());
            gguf_set_val_i32(gout, "quantize.imatrix.entries_count", (int32_t) imatrix.size());
            if (m.last_chunk > 0) gguf_set_val_i32(gout, "quantize.imatrix.chunks_count", m.last_chunk);
        }
    }
    std::vector<const float *> weights;  // per tensor: its importance weights, or NULL
    int n_without = 0;                   // quantized tensors with no entry in the importance matrix

    for (int64_t i = 0; i < n_tensors; i++) {
        const char * name = gguf_get_tensor_name(gin, i);
        ggml_tensor * t = ggml_get_tensor(meta, name);
        if (!t) die("tensor '%s' missing from the loaded context", name);
        if (ggml_is_quantized(t->type) && !allow_requantize && !copy) {
            die("'%s' is already quantized (%s); pass --allow-requantize to convert it anyway", name, ggml_type_name(t->type));
        }
        if (!ggml_get_type_traits(t->type)->to_float) die("tensor '%s' has type %s, which cannot be read", name, ggml_type_name(t->type));
        std::string why;
        ggml_type type = quant_choose_type(*target, info, name, ggml_n_dims(t), t->ne, t->type, opt, why);
        if (!why.empty()) fprintf(stderr, "llama-quantize: %s: %s\n", name, why.c_str());
        if (!copy && type == GGML_TYPE_F32 && t->type != GGML_TYPE_F32 && ggml_n_dims(t) >= 2 && target->base != GGML_TYPE_F32) {
            type = t->type;  // keep F16/BF16 matrices we would not quantize
        }
        const auto w = imatrix.find(name);
        const bool quantized = type != t->type && ggml_is_quantized(type);
        const float * tw = quantized && w != imatrix.end() && (int64_t) w->second.size() == t->ne[0] * t->ne[2] * t->ne[3] ? w->second.data() : nullptr;
        if (quantized && !tw && ggml_quantize_requires_imatrix(type)) {
            die("'%s' would be %s, which needs an importance matrix (--imatrix) with an entry for it", name, ggml_type_name(type));
        }
        n_without += quantized && !tw && !imatrix.empty() ? 1 : 0;
        weights.push_back(tw);
        tensors.push_back(t);
        out_types.push_back(type);
        gguf_add_tensor(gout, t);
        gguf_set_tensor_type(gout, name, type);
    }

    if (n_without > 0) fprintf(stderr, "llama-quantize: %d quantized tensors have no entry in the importance matrix (quantized without)\n", n_without);

    // ---- write ----
    const std::string dir = out_path.find('/') == std::string::npos ? "." : out_path.substr(0, out_path.rfind('/'));
    std::string tmpl = out_path + ".tmp.XXXXXX";
    std::vector<char> tmpl_buf(tmpl.begin(), tmpl.end());
    tmpl_buf.push_back('\0');
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    const int fd = mkstemp(tmpl_buf.data());
    if (fd < 0) die("cannot create a file in '%s': %s", dir.c_str(), strerror(errno));
    g_tmp_path = tmpl_buf.data();
    {
        const mode_t mask = umask(0);  // mkstemp creates 0600; give the output the usual 0666 & ~umask
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }

    std::vector<uint8_t> header(gguf_get_meta_size(gout));
    gguf_get_meta_data(gout, header.data());
    if (!write_all(fd, header.data(), header.size())) die("write failed: %s", strerror(errno));
    const size_t alignment = gguf_get_alignment(gout);

    fprintf(stderr, "llama-quantize: %s -> %s as %s with %d threads (%lld tensors)\n", in_path.c_str(), out_path.c_str(),
            target->name, n_threads, (long long) n_tensors);
    const auto t0 = std::chrono::steady_clock::now();
    size_t in_bytes = 0, out_bytes = 0, offset = 0;
    const size_t page = (size_t) sysconf(_SC_PAGESIZE);
    std::vector<uint8_t> out_buf;
    for (size_t i = 0; i < tensors.size(); i++) {
        const ggml_tensor * t = tensors[i];
        const ggml_type type = out_types[i];
        const size_t nin = ggml_nbytes(t);
        const size_t nout = ggml_row_size(type, t->ne[0]) * (size_t) ggml_nrows(t);
        const int64_t tid = gguf_find_tensor(gout, t->name);
        const size_t want = gguf_get_tensor_offset(gout, tid);
        if (want < offset) die("internal error: tensor offsets out of order");
        if (want > offset) {  // alignment padding
            std::vector<uint8_t> pad(want - offset, 0);
            if (!write_all(fd, pad.data(), pad.size())) die("write failed: %s", strerror(errno));
            offset = want;
        }
        if (type == t->type) {
            if (!write_all(fd, t->data, nin)) die("write failed: %s", strerror(errno));
        } else {
            out_buf.resize(nout);
            ggml_convert_rows(t, type, out_buf.data(), n_threads, weights[i], nullptr, nullptr);
            if (!write_all(fd, out_buf.data(), nout)) die("write failed: %s", strerror(errno));
        }
        offset += nout;
        in_bytes += nin;
        out_bytes += nout;
        fprintf(stderr, "[%4zu/%4zu] %-32s [%6lld %6lld %4lld] %-6s -> %-6s %9.2f MiB -> %8.2f MiB\n", i + 1,
                tensors.size(), t->name, (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2],
                ggml_type_name(t->type), ggml_type_name(type), nin / 1048576.0, nout / 1048576.0);
        // The input pages of this tensor are not needed again: let the kernel drop them.
        const uintptr_t b = ((uintptr_t) t->data) & ~(uintptr_t) (page - 1);
        const uintptr_t e = ((uintptr_t) t->data + nin) & ~(uintptr_t) (page - 1);
        if (e > b) madvise((void *) b, e - b, MADV_DONTNEED);
    }
    const size_t pad = (alignment - offset % alignment) % alignment;
    if (pad) {
        std::vector<uint8_t> zeros(pad, 0);
        if (!write_all(fd, zeros.data(), pad)) die("write failed: %s", strerror(errno));
    }
    if (fsync(fd) != 0) die("fsync failed: %s", strerror(errno));
    if (close(fd) != 0) die("close failed: %s", strerror(errno));
    if (rename(g_tmp_path.c_str(), out_path.c_str()) != 0) die("cannot rename to '%s': %s", out_path.c_str(), strerror(errno));
    g_tmp_path.clear();

    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t n_params = 0;
    for (const ggml_tensor * t : tensors) n_params += ggml_nelements(t);
    fprintf(stderr, "llama-quantize: model size %.2f MiB -> %.2f MiB (%.2f bits per weight), %.2f s\n",
            in_bytes / 1048576.0, out_bytes / 1048576.0, n_params ? 8.0 * out_bytes / n_params : 0.0, secs);
    gguf_free(gout);
    gguf_free(gin);
    ggml_free(meta);
    return 0;
}
