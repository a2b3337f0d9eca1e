// gguf-write.cpp - serializes a GGUF context (version 3) and writes files atomically: to a
// temporary name in the target's directory, renamed into place once everything is on disk.
#include "gguf-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

// ---- metadata ------------------------------------------------------------------------------
namespace {

struct byte_writer {
    std::vector<uint8_t> & out;

    void bytes(const void * p, size_t n) { out.insert(out.end(), (const uint8_t *) p, (const uint8_t *) p + n); }
    void u32(uint32_t v) { bytes(&v, 4); }
    void u64(uint64_t v) { bytes(&v, 8); }
    void str(const std::string & s) {
        u64(s.size());
        bytes(s.data(), s.size());
    }
};

}  // namespace

std::vector<uint8_t> gguf_serialize_meta(const struct gguf_context * ctx) {
    std::vector<uint8_t> out;
    byte_writer w{out};
    w.bytes(GGUF_MAGIC, 4);
    w.u32(GGUF_VERSION);
    w.u64(ctx->tensors.size());
    w.u64(ctx->kv.size());
    for (const gguf_kv & kv : ctx->kv) {
        w.str(kv.key);
        if (kv.is_array) {
            w.u32(GGUF_TYPE_ARRAY);
            w.u32(kv.type);
            w.u64(kv.n_elements());
        } else {
            w.u32(kv.type);
        }
        if (kv.type == GGUF_TYPE_STRING) {
            for (const std::string & s : kv.strs) w.str(s);
        } else {
            w.bytes(kv.data.data(), kv.data.size());
        }
    }
    for (const gguf_tensor_info & t : ctx->tensors) {
        w.str(t.name);
        w.u32(t.n_dims);
        for (uint32_t i = 0; i < t.n_dims; i++) w.u64((uint64_t) t.ne[i]);
        w.u32(t.type);
        w.u64(t.offset);
    }
    out.resize(gguf_pad(out.size(), ctx->alignment), 0);
    return out;
}

size_t gguf_get_meta_size(const struct gguf_context * ctx) {
    return gguf_serialize_meta(ctx).size();
}

void gguf_get_meta_data(const struct gguf_context * ctx, void * data) {
    const std::vector<uint8_t> meta = gguf_serialize_meta(ctx);
    memcpy(data, meta.data(), meta.size());
}

// ---- files ---------------------------------------------------------------------------------
namespace {

// An output file under a temporary name; removed unless commit() renamed it into place.
struct atomic_file {
    std::string path, tmp_path;
    int fd = -1;
    uint64_t written = 0;
    bool committed = false;

    ~atomic_file() {
        if (fd >= 0) close(fd);
        if (!tmp_path.empty() && !committed) unlink(tmp_path.c_str());
    }

    bool fail(const char * what) {
        ggml_log_error("gguf_write_to_file: %s: %s: %s\n", path.c_str(), what, strerror(errno));
        return false;
    }

    bool open(const char * fname) {
        path = fname;
        static std::atomic<unsigned> counter{0};
        // O_EXCL with a fresh name: never clobbers another writer's temporary file.
        for (int attempt = 0; attempt < 100; attempt++) {
            tmp_path = path + ".tmp." + std::to_string((long) getpid()) + "." + std::to_string(counter++);
            fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd >= 0) return true;
            if (errno != EEXIST) break;
        }
        const int err = errno;
        tmp_path.clear();
        errno = err;
        return fail("cannot create a temporary file next to it");
    }

    bool write(const void * p, size_t n) {
        const char * c = (const char *) p;
        while (n > 0) {
            const ssize_t k = ::write(fd, c, std::min<size_t>(n, (size_t) 1 << 30));
            if (k < 0) {
                if (errno == EINTR) continue;
                return fail("write failed");
            }
            c += k;
            n -= (size_t) k;
            written += (uint64_t) k;
        }
        return true;
    }

    bool write_zeros(uint64_t n) {
        static const uint8_t zeros[4096] = {};
        while (n > 0) {
            const size_t k = (size_t) std::min<uint64_t>(n, sizeof(zeros));
            if (!write(zeros, k)) return false;
            n -= k;
        }
        return true;
    }

    bool commit() {
        if (fsync(fd) != 0) return fail("fsync failed");
        const int rc = close(fd);
        fd = -1;
        if (rc != 0) return fail("close failed");
        if (rename(tmp_path.c_str(), path.c_str()) != 0) return fail("cannot rename the temporary file into place");
        committed = true;
        return true;
    }
};

}  // namespace

bool gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta) {
    GGML_ASSERT(ctx && fname);
    if (!only_meta) {
        for (const gguf_tensor_info & t : ctx->tensors) {
            if (t.size > 0 && t.data == nullptr) {
                ggml_log_error("gguf_write_to_file: %s: tensor '%s' has no data (gguf_set_tensor_data, or only_meta)\n",
                               fname, t.name.c_str());
                return false;
            }
        }
    }
    const std::vector<uint8_t> meta = gguf_serialize_meta(ctx);

    atomic_file f;
    if (!f.open(fname)) return false;
    if (!f.write(meta.data(), meta.size())) return false;
    if (!only_meta) {
        // In offset order, gaps (only in files read with such gaps) filled with zeros.
        std::vector<const gguf_tensor_info *> order;
        for (const gguf_tensor_info & t : ctx->tensors) order.push_back(&t);
        std::stable_sort(order.begin(), order.end(),
                         [](const gguf_tensor_info * a, const gguf_tensor_info * b) { return a->offset < b->offset; });
        const uint64_t data_start = meta.size();
        for (const gguf_tensor_info * t : order) {
            if (t->size == 0) continue;  // may share its offset with another tensor
            const uint64_t pos = f.written - data_start;
            GGML_ASSERT(t->offset >= pos);  // offsets never overlap (checked on read, laid out on add)
            if (!f.write_zeros(t->offset - pos)) return false;
            if (!f.write(t->data, t->size)) return false;
        }
        const uint64_t data_size = f.written - data_start;
        if (!f.write_zeros(gguf_pad(data_size, ctx->alignment) - data_size)) return false;
    }
    return f.commit();
}
