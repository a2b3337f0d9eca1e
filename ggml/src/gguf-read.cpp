// gguf-read.cpp - parses a GGUF file (versions 2 and 3), validating every field against the
// file size before trusting it, then optionally loads the tensor data (read or mmap) and creates
// a ggml context with one tensor per tensor info.
#include "gguf-impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_set>

namespace {

// Smallest possible encodings, used to bound counts by the bytes left in the file before
// anything is allocated for them.
constexpr uint64_t MIN_KV_BYTES     = 8 + 4 + 1;              // key length, type, one-byte value
constexpr uint64_t MIN_TENSOR_BYTES = 8 + 4 + 8 + 4 + 8;      // name length, n_dims, ne[0], type, offset
constexpr uint64_t MIN_STRING_BYTES = 8;                      // length of an empty string

struct file_closer {
    void operator()(FILE * f) const { fclose(f); }
};

struct parser {
    const char * fname;
    std::unique_ptr<FILE, file_closer> file;
    uint64_t size = 0;  // file size
    uint64_t pos  = 0;  // bytes consumed so far
    std::string where;  // what is being parsed, for messages

    uint64_t remaining() const { return size - pos; }

#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    bool fail(const char * fmt, ...) {
        char msg[512];
        va_list args;
        va_start(args, fmt);
        vsnprintf(msg, sizeof(msg), fmt, args);
        va_end(args);
        if (where.empty()) {
            ggml_log_error("gguf_init_from_file: %s: %s\n", fname, msg);
        } else {
            ggml_log_error("gguf_init_from_file: %s: %s: %s\n", fname, where.c_str(), msg);
        }
        return false;
    }

    bool open() {
        FILE * f = fopen(fname, "rb");
        if (!f) return fail("cannot open: %s", strerror(errno));
        file.reset(f);
        struct stat st;
        if (fstat(fileno(f), &st) != 0) return fail("cannot stat: %s", strerror(errno));
        if (!S_ISREG(st.st_mode)) return fail("not a regular file");
        size = (uint64_t) st.st_size;
        return true;
    }

    bool read(void * dst, uint64_t n, const char * what) {
        if (n > remaining()) {
            return fail("file truncated: %s at offset %llu needs %llu bytes, only %llu left", what,
                        (unsigned long long) pos, (unsigned long long) n, (unsigned long long) remaining());
        }
        if (n > 0 && fread(dst, 1, (size_t) n, file.get()) != n) {
            return fail("read error at offset %llu: %s", (unsigned long long) pos,
                        ferror(file.get()) ? strerror(errno) : "unexpected end of file");
        }
        pos += n;
        return true;
    }
    bool u32(uint32_t & v, const char * what) { return read(&v, 4, what); }
    bool u64(uint64_t & v, const char * what) { return read(&v, 8, what); }

    bool str(std::string & s, const char * what, uint64_t max_len = UINT64_MAX) {
        const uint64_t start = pos;
        uint64_t len;
        if (!u64(len, what)) return false;
        if (len > remaining()) {
            return fail("%s at offset %llu: string length %llu exceeds the %llu bytes left in the file", what,
                        (unsigned long long) start, (unsigned long long) len, (unsigned long long) remaining());
        }
        if (len > max_len) {
            return fail("%s at offset %llu: length %llu is too long (at most %llu)", what, (unsigned long long) start,
                        (unsigned long long) len, (unsigned long long) max_len);
        }
        s.resize((size_t) len);
        return read(&s[0], len, what);
    }

    // Bounds a count of items of at least min_bytes each by the bytes left in the file.
    bool check_count(uint64_t n, uint64_t min_bytes, const char * what, uint64_t at) {
        if (n > remaining() / min_bytes) {
            return fail("%s = %llu at offset %llu cannot fit in the %llu bytes left in the file", what,
                        (unsigned long long) n, (unsigned long long) at, (unsigned long long) remaining());
        }
        return true;
    }

    bool header(gguf_context & ctx, uint64_t & n_tensors, uint64_t & n_kv);
    bool kv_pair(gguf_context & ctx, uint64_t i, std::unordered_set<std::string> & keys);
    bool alignment(gguf_context & ctx);
    bool tensor_info(gguf_context & ctx, uint64_t i, std::unordered_set<std::string> & names);
    bool check_data_layout(gguf_context & ctx);
};

bool parser::header(gguf_context & ctx, uint64_t & n_tensors, uint64_t & n_kv) {
    char magic[4];
    if (!read(magic, 4, "magic")) return false;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) {
        return fail("not a GGUF file: bad magic %02x %02x %02x %02x (expected \"GGUF\")", (uint8_t) magic[0],
                    (uint8_t) magic[1], (uint8_t) magic[2], (uint8_t) magic[3]);
    }
    uint32_t version;
    if (!u32(version, "version")) return false;
    if (version == 1) return fail("GGUF version 1 is not supported (only versions 2 and 3)");
    if (version != 2 && version != 3) {
        const uint32_t swapped = __builtin_bswap32(version);
        if (swapped == 2 || swapped == 3) return fail("big-endian GGUF files are not supported");
        return fail("unknown GGUF version %u (supported: 2 and 3)", version);
    }
    ctx.version = version;
    if (!u64(n_tensors, "tensor count")) return false;
    if (!u64(n_kv, "key-value count")) return false;
    if (!check_count(n_kv, MIN_KV_BYTES, "key-value count", 16)) return false;
    return check_count(n_tensors, MIN_TENSOR_BYTES, "tensor count", 8);
}

bool parser::kv_pair(gguf_context & ctx, uint64_t i, std::unordered_set<std::string> & keys) {
    where = "key-value pair " + std::to_string(i);
    gguf_kv kv;
    if (!str(kv.key, "key")) return false;
    where += " ('" + kv.key + "')";
    // Keys are looked up as C strings: one with a NUL byte would hide another key's name.
    if (kv.key.find('\0') != std::string::npos) return fail("the key contains a NUL byte");
    if (!keys.insert(kv.key).second) return fail("duplicate key");

    uint32_t type;
    const uint64_t type_at = pos;
    if (!u32(type, "value type")) return false;
    if (type >= GGUF_TYPE_COUNT) return fail("unknown value type %u at offset %llu", type, (unsigned long long) type_at);
    uint64_t n = 1;
    if (type == GGUF_TYPE_ARRAY) {
        kv.is_array = true;
        if (!u32(type, "array element type")) return false;
        if (type == GGUF_TYPE_ARRAY) return fail("nested arrays are not supported");
        if (type >= GGUF_TYPE_COUNT) {
            return fail("unknown array element type %u at offset %llu", type, (unsigned long long) type_at + 4);
        }
        const uint64_t n_at = pos;
        if (!u64(n, "array length")) return false;
        const size_t es = gguf_type_size((gguf_type) type);
        if (!check_count(n, es ? es : MIN_STRING_BYTES, "array length", n_at)) return false;
    }
    kv.type = (gguf_type) type;

    if (kv.type == GGUF_TYPE_STRING) {
        // Grows with what was actually read, never with what a count field claims.
        for (uint64_t j = 0; j < n; j++) {
            std::string s;
            if (!str(s, "string value")) return false;
            kv.strs.push_back(std::move(s));
        }
    } else {
        const uint64_t nbytes = n * gguf_type_size(kv.type);  // bounded by the file size above
        kv.data.resize((size_t) nbytes);
        if (!read(kv.data.data(), nbytes, "value")) return false;
    }
    ctx.kv.push_back(std::move(kv));
    return true;
}

bool parser::alignment(gguf_context & ctx) {
    where.clear();
    const int64_t id = gguf_find_key(&ctx, GGUF_KEY_GENERAL_ALIGNMENT);
    if (id < 0) return true;
    const gguf_kv & kv = ctx.kv[(size_t) id];
    if (kv.is_array || kv.type != GGUF_TYPE_UINT32) {
        return fail(GGUF_KEY_GENERAL_ALIGNMENT " has type %s%s, expected u32", kv.is_array ? "array of " : "",
                    gguf_type_name(kv.type));
    }
    const uint32_t a = gguf_get_val_u32(&ctx, id);
    if (a == 0 || (a & (a - 1)) != 0) return fail(GGUF_KEY_GENERAL_ALIGNMENT " = %u is not a power of two", a);
    ctx.alignment = a;
    return true;
}

bool parser::tensor_info(gguf_context & ctx, uint64_t i, std::unordered_set<std::string> & names) {
    where = "tensor info " + std::to_string(i);
    gguf_tensor_info t;
    if (!str(t.name, "tensor name", GGML_MAX_NAME - 1)) return false;
    where += " ('" + t.name + "')";
    // Names are C strings in ggml tensors: one with a NUL byte could duplicate another's.
    if (t.name.find('\0') != std::string::npos) return fail("the tensor name contains a NUL byte");
    if (!names.insert(t.name).second) return fail("duplicate tensor name");

    if (!u32(t.n_dims, "n_dims")) return false;
    if (t.n_dims < 1 || t.n_dims > GGML_MAX_DIMS) return fail("n_dims = %u is not in 1..%d", t.n_dims, GGML_MAX_DIMS);
    for (uint32_t d = 0; d < t.n_dims; d++) {
        uint64_t ne;
        if (!u64(ne, "ne")) return false;
        if (ne > (uint64_t) INT64_MAX) return fail("ne[%u] = %llu is out of range", d, (unsigned long long) ne);
        t.ne[d] = (int64_t) ne;
    }
    int64_t nelements = 1;
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (__builtin_mul_overflow(nelements, t.ne[d], &nelements)) {
            return fail("element count of shape [%lld, %lld, %lld, %lld] overflows int64", (long long) t.ne[0],
                        (long long) t.ne[1], (long long) t.ne[2], (long long) t.ne[3]);
        }
    }

    uint32_t type;
    if (!u32(type, "tensor type")) return false;
    if (!ggml_type_is_valid((int) type)) return fail("unknown tensor type id %u", type);
    t.type = (ggml_type) type;
    const int64_t blck = ggml_blck_size(t.type);
    if (t.ne[0] % blck != 0) {
        return fail("ne[0] = %lld is not a multiple of the block size %lld of type %s", (long long) t.ne[0],
                    (long long) blck, ggml_type_name(t.type));
    }
    if (!gguf_tensor_nbytes(t.type, t.ne, &t.size)) return fail("byte size overflows");

    if (!u64(t.offset, "tensor data offset")) return false;
    if (t.offset % ctx.alignment != 0) {
        return fail("data offset %llu is not a multiple of the alignment %zu", (unsigned long long) t.offset, ctx.alignment);
    }
    ctx.tensors.push_back(std::move(t));
    return true;
}

// Every tensor's bytes lie inside the file and no two tensors share bytes.
bool parser::check_data_layout(gguf_context & ctx) {
    where.clear();
    ctx.data_offset = (size_t) gguf_pad(pos, ctx.alignment);
    if (ctx.tensors.empty()) return true;  // files without tensors may end without padding
    if (ctx.data_offset > size) {
        return fail("file truncated: the data section would start at offset %llu, past the end of the file (%llu bytes)",
                    (unsigned long long) ctx.data_offset, (unsigned long long) size);
    }
    const uint64_t data_bytes = size - ctx.data_offset;
    for (const gguf_tensor_info & t : ctx.tensors) {
        if (t.offset > data_bytes || t.size > data_bytes - t.offset) {
            return fail("tensor '%s' (offset %llu, %zu bytes) extends past the end of the file: the data section "
                        "starts at %llu and holds %llu bytes",
                        t.name.c_str(), (unsigned long long) t.offset, t.size, (unsigned long long) ctx.data_offset,
                        (unsigned long long) data_bytes);
        }
    }
    std::vector<const gguf_tensor_info *> order;
    for (const gguf_tensor_info & t : ctx.tensors) {
        if (t.size > 0) order.push_back(&t);
    }
    std::sort(order.begin(), order.end(),
              [](const gguf_tensor_info * a, const gguf_tensor_info * b) { return a->offset < b->offset; });
    for (size_t i = 1; i < order.size(); i++) {
        const gguf_tensor_info & a = *order[i - 1], & b = *order[i];
        if (a.offset + a.size > b.offset) {
            return fail("the data of tensors '%s' (offset %llu, %zu bytes) and '%s' (offset %llu) overlap",
                        a.name.c_str(), (unsigned long long) a.offset, a.size, b.name.c_str(),
                        (unsigned long long) b.offset);
        }
    }
    return true;
}

// Reads n bytes at file offset `at` into dst.
bool pread_all(int fd, void * dst, size_t n, uint64_t at) {
    char * p = (char *) dst;
    errno = 0;  // a short file leaves no errno
    while (n > 0) {
        const ssize_t k = pread(fd, p, std::min<size_t>(n, (size_t) 1 << 30), (off_t) at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        at += (uint64_t) k;
        n -= (size_t) k;
    }
    return true;
}

// Maps the file and/or creates the ggml context, as params ask.
bool load_data(parser & p, gguf_context & ctx, const gguf_init_params & params) {
    uint64_t data_size = 0;  // up to the end of the last tensor (the final padding may be absent)
    for (const gguf_tensor_info & t : ctx.tensors) data_size = std::max<uint64_t>(data_size, t.offset + t.size);

    const bool map = !params.no_alloc && params.use_mmap;
    const bool read_data = !params.no_alloc && !params.use_mmap && params.ctx != nullptr && data_size > 0;
    if (map) {
        void * addr = mmap(nullptr, (size_t) p.size, PROT_READ, MAP_PRIVATE, fileno(p.file.get()), 0);
        if (addr == MAP_FAILED) return p.fail("mmap failed: %s", strerror(errno));
        ctx.map_addr = addr;
        ctx.map_size = (size_t) p.size;
        ctx.data = (char *) addr + ctx.data_offset;
    }
    if (params.ctx == nullptr) {
        if (ctx.data) {
            for (gguf_tensor_info & t : ctx.tensors) t.data = (const char *) ctx.data + t.offset;
        }
        return true;
    }

    // Tensor structs only; with read_data also one buffer (not a tensor) holding the whole data section.
    size_t mem_size = ctx.tensors.size() * ggml_tensor_overhead() + GGML_MEM_ALIGN;
    if (read_data) mem_size += 2 * GGML_MEM_ALIGN + GGML_OBJECT_SIZE + (size_t) data_size;
    ggml_init_params ip = { mem_size, nullptr, true };
    ggml_context * gctx = ggml_init(ip);
    if (!gctx) return p.fail("cannot allocate %zu bytes for the ggml context", mem_size);
    if (read_data) {
        void * buf = ggml_new_buffer(gctx, (size_t) data_size);
        GGML_ASSERT(buf);  // sized above
        if (!pread_all(fileno(p.file.get()), buf, (size_t) data_size, ctx.data_offset)) {
            ggml_free(gctx);
            return p.fail("cannot read the %llu bytes of tensor data at offset %zu: %s", (unsigned long long) data_size,
                          ctx.data_offset, errno ? strerror(errno) : "unexpected end of file");
        }
        ctx.data = buf;
    }
    for (gguf_tensor_info & t : ctx.tensors) {
        ggml_tensor * tensor = ggml_new_tensor(gctx, t.type, (int) t.n_dims, t.ne);
        ggml_set_name(tensor, t.name.c_str());
        if (ctx.data) {
            tensor->data = (char *) ctx.data + t.offset;
            t.data = tensor->data;
        }
    }
    ggml_set_no_alloc(gctx, params.no_alloc);
    *params.ctx = gctx;
    return true;
}

}  // namespace

struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params) {
    if (params.ctx) *params.ctx = nullptr;
    if (!fname) {
        ggml_log_error("gguf_init_from_file: no file name\n");
        return nullptr;
    }
    parser p;
    p.fname = fname;
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> ctx(new gguf_context(), gguf_free);
    if (!p.open()) return nullptr;

    uint64_t n_tensors, n_kv;
    if (!p.header(*ctx, n_tensors, n_kv)) return nullptr;
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (!p.kv_pair(*ctx, i, seen)) return nullptr;
    }
    if (!p.alignment(*ctx)) return nullptr;
    seen.clear();
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (!p.tensor_info(*ctx, i, seen)) return nullptr;
    }
    if (!p.check_data_layout(*ctx)) return nullptr;
    if (!load_data(p, *ctx, params)) return nullptr;
    return ctx.release();
}
