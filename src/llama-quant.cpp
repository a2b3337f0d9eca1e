// llama-quant.cpp - llama_model_quantize: a GGUF model's tensors converted to a quantization
// target (llama.cpp's file types and their per-tensor mixes, llama-quant-mix.cpp), as
// llama.cpp's function of the same name does it, with its parameters: an importance matrix (its
// std::unordered_map<std::string, std::vector<float>> of per-column weights), metadata
// overrides, --pure, the output and token embedding types, requantizing.
//
// The input is memory-mapped and read once; each tensor is converted by nthread threads and
// appended to FNAME_OUT.tmp.PID, which is renamed into place only when complete, so a failed
// run never leaves a half-written output (a program that stops on a signal removes that name).
// Pages of the input are released once their tensor is written, keeping resident memory near
// the largest tensor.
#include "llama-impl.h"
#include "llama-quant-mix.h"

#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

struct quantize_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const char * fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char buf[2048];
    vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    throw quantize_error(buf);
}

// An override set in the output's metadata as llama.cpp sets it: integers as int32.
void apply_override(gguf_context * g, const llama_model_kv_override & o) {
    switch (o.tag) {
        case LLAMA_KV_OVERRIDE_TYPE_INT:
            if (o.val_i64 < INT32_MIN || o.val_i64 > INT32_MAX) fail("override %s=int:%lld: not a 32-bit integer", o.key, (long long) o.val_i64);
            gguf_set_val_i32(g, o.key, (int32_t) o.val_i64);
            return;
        case LLAMA_KV_OVERRIDE_TYPE_FLOAT: gguf_set_val_f32(g, o.key, (float) o.val_f64); return;
        case LLAMA_KV_OVERRIDE_TYPE_BOOL: gguf_set_val_bool(g, o.key, o.val_bool); return;
        case LLAMA_KV_OVERRIDE_TYPE_STR: gguf_set_val_str(g, o.key, o.val_str); return;
    }
    fail("override %s: unknown type", o.key);
}

int64_t key_u32_or(const gguf_context * g, const std::string & key, int64_t def) {
    const int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return def;
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT32: return gguf_get_val_u32(g, id);
        case GGUF_TYPE_INT32:  return gguf_get_val_i32(g, id);
        case GGUF_TYPE_UINT64: return (int64_t) gguf_get_val_u64(g, id);
        default:               return def;
    }
}

void write_all(int fd, const void * data, size_t n) {
    const char * p = (const char *) data;
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            fail("write failed: %s", strerror(errno));
        }
        p += w;
        n -= (size_t) w;
    }
}

struct gguf_ptr {
    gguf_context * g = nullptr;
    ~gguf_ptr() { gguf_free(g); }
};
struct ggml_ptr {
    ggml_context * c = nullptr;
    ~ggml_ptr() { ggml_free(c); }
};

// The temporary output: removed unless renamed into place.
struct tmp_file {
    std::string path;
    int fd = -1;
    ~tmp_file() {
        if (fd >= 0) close(fd);
        if (!path.empty()) unlink(path.c_str());
    }
};

using imatrix_map = std::unordered_map<std::string, std::vector<float>>;

void quantize(const std::string & in_path, const std::string & fname_out, const llama_model_quantize_params & p) {
    // keep_split: one output per input shard, named as llama.cpp names them from FNAME_OUT as a
    // prefix; split inputs are refused below, so that is the one shard PREFIX-00001-of-00001.gguf.
    std::string out_path = fname_out;
    if (p.keep_split) {
        char path[4096];
        llama_split_path(path, sizeof(path), fname_out.c_str(), 0, 1);
        out_path = path;
    }
    std::string ftype_str = std::to_string((int) p.ftype);
    const quant_target * target = p.only_copy ? quant_target_find("COPY") : quant_target_find(ftype_str);
    if (!target) fail("file type %d is not a quantization target", (int) p.ftype);
    const bool copy = target->base == GGML_TYPE_COUNT;
    if (in_path == out_path) fail("the output must not be the input file");
    for (ggml_type t : {p.output_tensor_type, p.token_embedding_type}) {
        if (t != GGML_TYPE_COUNT && (!ggml_type_is_valid(t) || !ggml_get_type_traits(t)->weight_target || (ggml_is_quantized(t) && !ggml_quantize_supported(t)))) {
            fail("type %d cannot be written as weights", (int) t);
        }
    }
    const int n_threads = p.nthread > 0 ? p.nthread : (int) std::max(1u, std::thread::hardware_concurrency());
    const imatrix_map * imatrix = (const imatrix_map *) p.imatrix;
    if (imatrix && imatrix->empty()) imatrix = nullptr;
    if (copy && imatrix) fail("an importance matrix with only_copy: nothing is quantized");

    // ---- read the input ----
    ggml_ptr meta;
    gguf_init_params params = {};
    params.no_alloc = false;
    params.ctx = &meta.c;
    params.use_mmap = true;
    gguf_ptr gin;
    gin.g = gguf_init_from_file(in_path.c_str(), params);
    if (!gin.g) fail("cannot load '%s' (see the message above)", in_path.c_str());
    if (key_u32_or(gin.g, "split.count", 1) > 1) {
        fail("'%s' is one shard of a split model: split models are not supported (merge it with llama.cpp's gguf-split --merge first)", in_path.c_str());
    }

    const int64_t arch_id = gguf_find_key(gin.g, "general.architecture");
    const std::string arch = arch_id >= 0 && gguf_get_kv_type(gin.g, arch_id) == GGUF_TYPE_STRING ? gguf_get_val_str(gin.g, arch_id) : "llama";
    quant_model_info info;
    info.arch = arch;
    info.n_layer = (int) key_u32_or(gin.g, arch + ".block_count", 0);
    info.n_head = (int) key_u32_or(gin.g, arch + ".attention.head_count", 0);
    info.n_head_kv = (int) key_u32_or(gin.g, arch + ".attention.head_count_kv", info.n_head);
    info.n_expert = (int) key_u32_or(gin.g, arch + ".expert_count", 0);
    info.has_output = gguf_find_tensor(gin.g, "output.weight") >= 0;
    info.n_ffn_down_per_layer = gguf_find_tensor(gin.g, "blk.0.ffn_down_shexp.weight") >= 0 ? 2 : 1;
    quant_options opt;
    opt.pure = p.pure;
    opt.quantize_output = p.quantize_output_tensor;
    opt.output_type = p.output_tensor_type;
    opt.token_embd_type = p.token_embedding_type;
    opt.has_imatrix = imatrix != nullptr;

    gguf_ptr gout;
    gout.g = gguf_init_empty();
    gguf_set_kv(gout.g, gin.g);
    if (!copy) {
        gguf_set_val_u32(gout.g, "general.quantization_version", 2);
        gguf_set_val_u32(gout.g, "general.file_type", (uint32_t) target->file_type);
    }
    if (p.kv_overrides) {
        for (const llama_model_kv_override & o : *(const std::vector<llama_model_kv_override> *) p.kv_overrides) {
            if (o.key[0]) apply_override(gout.g, o);
        }
    }

    // An importance matrix made for another model: a name it lacks, or another width, is refused.
    if (imatrix) {
        for (const auto & kv : *imatrix) {
            const ggml_tensor * t = ggml_get_tensor(meta.c, kv.first.c_str());
            if (!t) fail("the importance matrix has an entry for '%s', which %s lacks: it was made for another model", kv.first.c_str(), in_path.c_str());
            const int64_t want = t->ne[0] * t->ne[2] * t->ne[3];
            if ((int64_t) kv.second.size() != want && kv.first != "token_embd.weight") {
                fail("the importance matrix has %zu values for '%s', whose %lld columns x %lld matrices need %lld: it was made for another model",
                     kv.second.size(), kv.first.c_str(), (long long) t->ne[0], (long long) (t->ne[2] * t->ne[3]), (long long) want);
            }
        }
    }

    const int64_t n_tensors = gguf_get_n_tensors(gin.g);
    std::vector<ggml_tensor *> tensors;
    std::vector<ggml_type> out_types;
    std::vector<const float *> weights;  // per tensor: its importance weights, or NULL
    int n_without = 0;                   // quantized tensors with no entry in the importance matrix
    for (int64_t i = 0; i < n_tensors; i++) {
        const char * name = gguf_get_tensor_name(gin.g, i);
        ggml_tensor * t = ggml_get_tensor(meta.c, name);
        if (!t) fail("tensor '%s' missing from the loaded context", name);
        if (ggml_is_quantized(t->type) && !p.allow_requantize && !copy) {
            fail("'%s' is already quantized (%s); requantizing loses more than quantizing the original: allow it with --allow-requantize",
                 name, ggml_type_name(t->type));
        }
        if (!ggml_get_type_traits(t->type)->to_float) fail("tensor '%s' has type %s, which cannot be read", name, ggml_type_name(t->type));
        std::string why;
        ggml_type type = quant_choose_type(*target, info, name, ggml_n_dims(t), t->ne, t->type, opt, why);
        if (!why.empty()) LLAMA_LOG_WARN("llama_model_quantize: %s: %s\n", name, why.c_str());
        if (!copy && type == GGML_TYPE_F32 && t->type != GGML_TYPE_F32 && ggml_n_dims(t) >= 2 && target->base != GGML_TYPE_F32) {
            type = t->type;  // keep F16/BF16 matrices we would not quantize
        }
        const bool quantized = type != t->type && ggml_is_quantized(type);
        if (quantized && !ggml_quantize_supported(type)) fail("'%s' would be %s: quantizing to %s is not supported yet", name, ggml_type_name(type), ggml_type_name(type));
        const float * tw = nullptr;
        if (quantized && imatrix) {
            const auto w = imatrix->find(name);
            if (w != imatrix->end() && (int64_t) w->second.size() == t->ne[0] * t->ne[2] * t->ne[3]) tw = w->second.data();
        }
        if (quantized && !tw && (ggml_quantize_requires_imatrix(type) || quant_needs_imatrix(*target, name, type))) {
            fail("'%s' would be %s: a type this coarse needs an importance matrix, and %s; make one with llama-imatrix and pass it "
                 "with --imatrix (llama.cpp refuses the same)", name, ggml_type_name(type),
                 imatrix ? "the one given has no entry for this tensor" : "none was given");
        }
        n_without += quantized && !tw && imatrix ? 1 : 0;
        weights.push_back(tw);
        tensors.push_back(t);
        out_types.push_back(type);
        gguf_add_tensor(gout.g, t);
        gguf_set_tensor_type(gout.g, name, type);
    }
    if (n_without > 0) LLAMA_LOG_WARN("llama_model_quantize: %d quantized tensors have no entry in the importance matrix (quantized without)\n", n_without);

    // ---- write ----
    tmp_file tmp;
    tmp.path = out_path + ".tmp." + std::to_string((long) getpid());
    unlink(tmp.path.c_str());  // (left by an earlier process of the same id that was killed)
    tmp.fd = open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (tmp.fd < 0) {
        const std::string path = tmp.path;
        tmp.path.clear();
        fail("cannot create '%s': %s", path.c_str(), strerror(errno));
    }
    std::vector<uint8_t> header(gguf_get_meta_size(gout.g));
    gguf_get_meta_data(gout.g, header.data());
    write_all(tmp.fd, header.data(), header.size());
    const size_t alignment = gguf_get_alignment(gout.g);

    LLAMA_LOG_INFO("llama_model_quantize: %s -> %s as %s with %d threads (%lld tensors)\n", in_path.c_str(), out_path.c_str(), target->name,
                   n_threads, (long long) n_tensors);
    const auto t0 = std::chrono::steady_clock::now();
    size_t in_bytes = 0, out_bytes = 0, offset = 0;
    const size_t page = (size_t) sysconf(_SC_PAGESIZE);
    std::vector<uint8_t> out_buf;
    for (size_t i = 0; i < tensors.size(); i++) {
        const ggml_tensor * t = tensors[i];
        const ggml_type type = out_types[i];
        const size_t nin = ggml_nbytes(t);
        const size_t nout = ggml_row_size(type, t->ne[0]) * (size_t) ggml_nrows(t);
        const size_t want = gguf_get_tensor_offset(gout.g, gguf_find_tensor(gout.g, t->name));
        if (want < offset) fail("internal error: tensor offsets out of order");
        if (want > offset) {  // alignment padding
            std::vector<uint8_t> pad(want - offset, 0);
            write_all(tmp.fd, pad.data(), pad.size());
            offset = want;
        }
        if (type == t->type) {
            write_all(tmp.fd, t->data, nin);
        } else {
            out_buf.resize(nout);
            ggml_convert_rows(t, type, out_buf.data(), n_threads, weights[i], nullptr, nullptr);
            write_all(tmp.fd, out_buf.data(), nout);
        }
        offset += nout;
        in_bytes += nin;
        out_bytes += nout;
        LLAMA_LOG_INFO("[%4zu/%4zu] %-32s [%6lld %6lld %4lld] %-6s -> %-6s %9.2f MiB -> %8.2f MiB\n", i + 1, tensors.size(), t->name,
                       (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], ggml_type_name(t->type), ggml_type_name(type),
                       nin / 1048576.0, nout / 1048576.0);
        // The input pages of this tensor are not needed again: let the kernel drop them.
        const uintptr_t b = ((uintptr_t) t->data) & ~(uintptr_t) (page - 1);
        const uintptr_t e = ((uintptr_t) t->data + nin) & ~(uintptr_t) (page - 1);
        if (e > b) madvise((void *) b, e - b, MADV_DONTNEED);
    }
    const size_t pad = (alignment - offset % alignment) % alignment;
    if (pad) {
        std::vector<uint8_t> zeros(pad, 0);
        write_all(tmp.fd, zeros.data(), pad);
    }
    if (fsync(tmp.fd) != 0) fail("fsync failed: %s", strerror(errno));
    const int fd = tmp.fd;
    tmp.fd = -1;
    if (close(fd) != 0) fail("close failed: %s", strerror(errno));
    if (rename(tmp.path.c_str(), out_path.c_str()) != 0) fail("cannot rename to '%s': %s", out_path.c_str(), strerror(errno));
    tmp.path.clear();

    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t n_params = 0;
    for (const ggml_tensor * t : tensors) n_params += ggml_nelements(t);
    LLAMA_LOG_INFO("llama_model_quantize: model size %.2f MiB -> %.2f MiB (%.2f bits per weight), %.2f s\n", in_bytes / 1048576.0,
                   out_bytes / 1048576.0, n_params ? 8.0 * out_bytes / n_params : 0.0, secs);
}

}  // namespace

struct llama_model_quantize_params llama_model_quantize_default_params(void) {
    llama_model_quantize_params p;
    p.nthread = 0;
    p.ftype = LLAMA_FTYPE_MOSTLY_Q5_1;
    p.output_tensor_type = GGML_TYPE_COUNT;
    p.token_embedding_type = GGML_TYPE_COUNT;
    p.allow_requantize = false;
    p.quantize_output_tensor = true;
    p.only_copy = false;
    p.pure = false;
    p.keep_split = false;
    p.imatrix = nullptr;
    p.kv_overrides = nullptr;
    return p;
}

uint32_t llama_model_quantize(const char * fname_inp, const char * fname_out, const llama_model_quantize_params * params) {
    if (!fname_inp || !fname_out || !params) {
        LLAMA_LOG_ERROR("llama_model_quantize: a NULL argument\n");
        return 1;
    }
    try {
        quantize(fname_inp, fname_out, *params);
        return 0;
    } catch (const std::exception & e) {
        LLAMA_LOG_ERROR("llama_model_quantize: failed to quantize: %s\n", e.what());
        return 1;
    }
}
