// imatrix-file.cpp - llama.cpp's importance matrix files, .dat and GGUF (see imatrix-file.h).
#include "imatrix-file.h"

#include "ggml.h"
#include "gguf.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <unistd.h>
#include <unordered_map>

namespace {

constexpr const char * kKeyType = "general.type";
constexpr const char * kKeyDatasets = "imatrix.datasets";
constexpr const char * kKeyChunkCount = "imatrix.chunk_count";
constexpr const char * kKeyChunkSize = "imatrix.chunk_size";
constexpr const char * kSuffixSums = ".in_sum2";
constexpr const char * kSuffixCounts = ".counts";

struct byte_reader {
    const std::vector<uint8_t> & b;
    size_t o = 0;
    size_t left() const { return b.size() - o; }
    bool bytes(void * p, size_t n) {
        if (left() < n) return false;
        memcpy(p, b.data() + o, n);
        o += n;
        return true;
    }
    bool i32(int32_t & v) { return bytes(&v, sizeof(v)); }
};

bool read_all(const std::string & path, std::vector<uint8_t> & out, std::string & err) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) {
        err = "cannot open '" + path + "': " + strerror(errno);
        return false;
    }
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.insert(out.end(), buf, buf + n);
    const bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) err = "cannot read '" + path + "'";
    return !bad;
}

// Writes bytes to path through a temporary file beside it, renamed into place.
bool write_whole(const std::string & path, const std::vector<uint8_t> & bytes, std::string & err) {
    const std::string tmp = path + ".tmp." + std::to_string((long) getpid());
    FILE * f = fopen(tmp.c_str(), "wb");
    if (!f) {
        err = "cannot write '" + tmp + "': " + strerror(errno);
        return false;
    }
    bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    const int e = errno;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp.c_str(), path.c_str()) != 0) {
        err = "cannot rename '" + tmp + "' to '" + path + "': " + strerror(errno);
        unlink(tmp.c_str());
        return false;
    }
    if (!ok) {
        err = "cannot write '" + tmp + "': " + strerror(e ? e : EIO);
        unlink(tmp.c_str());
    }
    return ok;
}

bool read_dat(const std::vector<uint8_t> & bytes, const std::string & path, common_imatrix & out, std::string & err) {
    byte_reader r{bytes};
    const std::string what = "'" + path + "'";
    int32_t n = 0;
    if (!r.i32(n)) {
        err = what + " is empty or truncated: no entry count";
        return false;
    }
    if (n < 1) {
        err = what + " is not an importance matrix: it says it has " + std::to_string(n) + " entries";
        return false;
    }
    std::unordered_map<std::string, int> seen;
    for (int32_t i = 0; i < n; i++) {
        const std::string at = what + ", entry " + std::to_string(i + 1) + " of " + std::to_string(n);
        int32_t len = 0;
        if (!r.i32(len)) {
            err = what + " is truncated: it ends before entry " + std::to_string(i + 1) + " of " + std::to_string(n);
            return false;
        }
        if (len < 1 || len > 4096) {
            err = at + ": a name of " + std::to_string(len) + " bytes: not an importance matrix";
            return false;
        }
        common_imatrix::item it;
        it.name.resize((size_t) len);
        int32_t nval = 0;
        if (!r.bytes(&it.name[0], (size_t) len) || !r.i32(it.ncall) || !r.i32(nval)) {
            err = at + ": truncated";
            return false;
        }
        if (it.name.find('\0') != std::string::npos || it.ncall < 0 || nval < 1) {
            err = at + " ('" + it.name.substr(0, it.name.find('\0')) + "'): ncall " + std::to_string(it.ncall) + ", " +
                  std::to_string(nval) + " values: not an importance matrix";
            return false;
        }
        if ((size_t) nval > r.left() / sizeof(float)) {
            err = at + " ('" + it.name + "'): truncated (" + std::to_string(nval) + " values, " + std::to_string(r.left()) +
                  " bytes left)";
            return false;
        }
        it.values.resize((size_t) nval);
        r.bytes(it.values.data(), (size_t) nval * sizeof(float));
        for (float v : it.values) {
            if (!std::isfinite(v) || v < 0) {
                err = at + " ('" + it.name + "'): a value that is not a finite sum of squares (" + std::to_string(v) + ")";
                return false;
            }
        }
        if (!seen.emplace(it.name, i).second) {
            err = what + ": the entry '" + it.name + "' appears twice";
            return false;
        }
        out.items.push_back(std::move(it));
    }
    // The last chunk and the dataset's name (absent from the files of older builds).
    if (r.left() == 0) return true;
    int32_t len = 0;
    if (!r.i32(out.last_chunk) || !r.i32(len)) {
        err = what + " is truncated: it ends inside the chunk count and dataset name after the entries";
        return false;
    }
    if (out.last_chunk < 0 || len < 0 || (size_t) len > r.left()) {
        err = what + " is truncated or malformed: last chunk " + std::to_string(out.last_chunk) + ", a dataset name of " +
              std::to_string(len) + " bytes with " + std::to_string(r.left()) + " left";
        return false;
    }
    out.dataset.resize((size_t) len);
    if (len > 0) r.bytes(&out.dataset[0], (size_t) len);
    if (r.left() != 0) {
        err = what + " has " + std::to_string(r.left()) + " bytes after its end: not an importance matrix";
        return false;
    }
    return true;
}

struct gguf_files {
    gguf_context * g = nullptr;
    ggml_context * meta = nullptr;
    ~gguf_files() {
        gguf_free(g);
        ggml_free(meta);
    }
};

// A u32 key that must be there; the getters abort on another type, so the type is checked first.
bool key_u32(const gguf_context * g, const char * key, uint32_t & v, const std::string & what, std::string & err) {
    const int64_t id = gguf_find_key(g, key);
    if (id < 0) {
        err = what + " is not an importance matrix: it has no " + key + " key";
        return false;
    }
    if (gguf_get_kv_type(g, id) != GGUF_TYPE_UINT32) {
        const char * type = gguf_type_name(gguf_get_kv_type(g, id));
        err = what + ": " + key + " is of type " + (type ? type : "?") + ", not u32: not an importance matrix";
        return false;
    }
    v = gguf_get_val_u32(g, id);
    return true;
}

bool read_gguf(const std::string & path, common_imatrix & out, std::string & err) {
    const std::string what = "'" + path + "'";
    gguf_files f;
    gguf_init_params gp = {};
    gp.no_alloc = false;
    gp.ctx = &f.meta;
    f.g = gguf_init_from_file(path.c_str(), gp);
    if (!f.g) {
        err = what + " is a GGUF file that cannot be read: truncated or malformed (the reason is above)";
        return false;
    }
    const gguf_context * g = f.g;
    out.gguf = true;
    const int64_t type_id = gguf_find_key(g, kKeyType);
    if (type_id >= 0) {
        const bool str = gguf_get_kv_type(g, type_id) == GGUF_TYPE_STRING;
        if (!str || strcmp(gguf_get_val_str(g, type_id), "imatrix") != 0) {
            err = what + " is a GGUF file but not an importance matrix (" + kKeyType + " " +
                  (str ? "'" + std::string(gguf_get_val_str(g, type_id)) + "'" : std::string("not a string")) + ")";
            return false;
        }
    }
    const int64_t ds = gguf_find_key(g, kKeyDatasets);
    if (ds < 0) {
        err = what + " is not an importance matrix: it has no " + kKeyDatasets + " key";
        return false;
    }
    if (gguf_get_kv_type(g, ds) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, ds) != GGUF_TYPE_STRING) {
        err = what + ": " + kKeyDatasets + " is not an array of strings: not an importance matrix";
        return false;
    }
    for (size_t i = 0; i < gguf_get_arr_n(g, ds); i++) out.datasets.push_back(gguf_get_arr_str(g, ds, i));
    uint32_t chunk_count = 0;
    if (!key_u32(g, kKeyChunkCount, chunk_count, what, err) || !key_u32(g, kKeyChunkSize, out.chunk_size, what, err)) return false;
    if (chunk_count > (uint32_t) INT32_MAX || out.chunk_size == 0) {
        err = what + ": " + kKeyChunkCount + " " + std::to_string(chunk_count) + ", " + kKeyChunkSize + " " +
              std::to_string(out.chunk_size) + ": not an importance matrix";
        return false;
    }
    out.last_chunk = (int32_t) chunk_count;

    // NAME.in_sum2 and NAME.counts, paired by NAME (sorted: a deterministic order).
    std::map<std::string, std::pair<const ggml_tensor *, const ggml_tensor *>> pairs;
    const auto ends_with = [](const std::string & s, const char * suffix) {
        const size_t n = strlen(suffix);
        return s.size() > n && s.compare(s.size() - n, n, suffix) == 0;
    };
    for (ggml_tensor * t = ggml_get_first_tensor(f.meta); t; t = ggml_get_next_tensor(f.meta, t)) {
        const std::string name = t->name;
        if (ends_with(name, kSuffixSums)) {
            pairs[name.substr(0, name.size() - strlen(kSuffixSums))].first = t;
        } else if (ends_with(name, kSuffixCounts)) {
            pairs[name.substr(0, name.size() - strlen(kSuffixCounts))].second = t;
        }
    }
    if (pairs.empty()) {
        err = what + " is not an importance matrix: it has no NAME" + kSuffixSums + " and NAME" + kSuffixCounts + " tensors";
        return false;
    }
    for (const auto & [name, p] : pairs) {
        const std::string at = what + ", entry '" + name + "'";
        const ggml_tensor * sums = p.first, * counts = p.second;
        if (!sums || !counts) {
            err = at + ": " + (sums ? "no " + name + kSuffixCounts + " beside its " + name + kSuffixSums
                                    : "no " + name + kSuffixSums + " beside its " + name + kSuffixCounts) +
                  ": not a whole importance matrix";
            return false;
        }
        if (sums->type != GGML_TYPE_F32 || counts->type != GGML_TYPE_F32) {
            err = at + ": its tensors are " + ggml_type_name(sums->type) + " and " + ggml_type_name(counts->type) + ", not F32";
            return false;
        }
        if (sums->ne[0] < 1 || sums->ne[1] < 1 || sums->ne[2] != 1 || sums->ne[3] != 1 || counts->ne[0] != 1 ||
            counts->ne[1] != sums->ne[1] || counts->ne[2] != 1 || counts->ne[3] != 1) {
            err = at + ": in_sum2 of shape [" + std::to_string(sums->ne[0]) + ", " + std::to_string(sums->ne[1]) + ", " +
                  std::to_string(sums->ne[2]) + ", " + std::to_string(sums->ne[3]) + "], counts [" + std::to_string(counts->ne[0]) +
                  ", " + std::to_string(counts->ne[1]) + ", " + std::to_string(counts->ne[2]) + ", " + std::to_string(counts->ne[3]) +
                  "]: not [n_per_row, n_mat] and [1, n_mat]";
            return false;
        }
        common_imatrix::item it;
        it.name = name;
        const float * s = (const float *) sums->data, * c = (const float *) counts->data;
        it.values.assign(s, s + ggml_nelements(sums));
        it.counts.assign(c, c + ggml_nelements(counts));
        for (float v : it.values) {
            if (!std::isfinite(v) || v < 0) {
                err = at + ": a sum that is not a finite sum of squares (" + std::to_string(v) + ")";
                return false;
            }
        }
        for (float v : it.counts) {
            // (whole numbers below 2^53: exact as an int64 and as a double)
            if (!std::isfinite(v) || v < 0 || v != std::floor(v) || v > 9007199254740992.0f) {
                err = at + ": a count that is not a number of rows (" + std::to_string(v) + ")";
                return false;
            }
        }
        out.items.push_back(std::move(it));
    }
    return true;
}

std::vector<uint8_t> serialize_dat(const common_imatrix & m) {
    std::vector<uint8_t> out;
    auto put = [&](const void * p, size_t n) { out.insert(out.end(), (const uint8_t *) p, (const uint8_t *) p + n); };
    auto put_i32 = [&](int32_t v) { put(&v, sizeof(v)); };
    put_i32((int32_t) m.items.size());
    for (const common_imatrix::item & it : m.items) {
        put_i32((int32_t) it.name.size());
        put(it.name.data(), it.name.size());
        put_i32(it.ncall);
        put_i32((int32_t) it.values.size());
        put(it.values.data(), it.values.size() * sizeof(float));
    }
    put_i32(m.last_chunk);
    put_i32((int32_t) m.dataset.size());
    put(m.dataset.data(), m.dataset.size());
    return out;
}

bool write_gguf(const std::string & path, const common_imatrix & m, std::string & err) {
    for (const common_imatrix::item & it : m.items) {
        if (it.counts.empty() || it.values.empty() || it.values.size() % it.counts.size() != 0) {
            err = "cannot write '" + path + "': the entry '" + it.name + "' has " + std::to_string(it.values.size()) + " sums for " +
                  std::to_string(it.counts.size()) + " matrices";
            return false;
        }
        if (it.name.size() + strlen(kSuffixSums) >= GGML_MAX_NAME) {
            err = "cannot write '" + path + "': the entry '" + it.name + "' has too long a name for a GGUF tensor (" +
                  std::to_string(GGML_MAX_NAME - 1) + " bytes with '" + kSuffixSums + "')";
            return false;
        }
    }
    std::vector<const common_imatrix::item *> sorted;
    for (const common_imatrix::item & it : m.items) sorted.push_back(&it);
    std::sort(sorted.begin(), sorted.end(), [](const auto * a, const auto * b) { return a->name < b->name; });

    gguf_files f;
    ggml_init_params ip = {};
    ip.mem_size = (2 * sorted.size() + 1) * ggml_tensor_overhead();
    ip.no_alloc = true;  // the data stays in m: gguf_set_tensor_data points at it
    f.meta = ggml_init(ip);
    f.g = gguf_init_empty();
    if (!f.meta || !f.g) {
        err = "cannot write '" + path + "': out of memory";
        return false;
    }
    gguf_set_val_str(f.g, kKeyType, "imatrix");
    std::vector<const char *> ds;
    for (const std::string & d : m.datasets) ds.push_back(d.c_str());
    gguf_set_arr_str(f.g, kKeyDatasets, ds.data(), ds.size());
    gguf_set_val_u32(f.g, kKeyChunkCount, (uint32_t) std::max(0, m.last_chunk));
    gguf_set_val_u32(f.g, kKeyChunkSize, m.chunk_size);
    for (const common_imatrix::item * it : sorted) {
        const int64_t n_mat = (int64_t) it->counts.size(), n_per_row = (int64_t) it->values.size() / n_mat;
        ggml_tensor * sums = ggml_new_tensor_2d(f.meta, GGML_TYPE_F32, n_per_row, n_mat);
        ggml_tensor * counts = ggml_new_tensor_2d(f.meta, GGML_TYPE_F32, 1, n_mat);
        ggml_set_name(sums, (it->name + kSuffixSums).c_str());
        ggml_set_name(counts, (it->name + kSuffixCounts).c_str());
        gguf_add_tensor(f.g, sums);
        gguf_add_tensor(f.g, counts);
        gguf_set_tensor_data(f.g, sums->name, it->values.data());
        gguf_set_tensor_data(f.g, counts->name, it->counts.data());
    }
    if (!gguf_write_to_file(f.g, path.c_str(), false)) {
        err = "cannot write '" + path + "' (the reason is above)";
        return false;
    }
    return true;
}

}  // namespace

bool common_imatrix_read(const std::string & path, common_imatrix & out, std::string & err) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) {
        err = "cannot open '" + path + "': " + strerror(errno);
        return false;
    }
    char magic[4] = {};
    const bool gguf = fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    fclose(f);
    if (gguf) return read_gguf(path, out, err);
    std::vector<uint8_t> bytes;
    return read_all(path, bytes, err) && read_dat(bytes, path, out, err);
}

bool common_imatrix_write(const std::string & path, const common_imatrix & m, std::string & err) {
    return m.gguf ? write_gguf(path, m, err) : write_whole(path, serialize_dat(m), err);
}

std::vector<float> common_imatrix_weights(const common_imatrix::item & it) {
    std::vector<float> w = it.values;
    if (it.counts.empty()) {
        if (it.ncall > 0) {
            for (float & v : w) v /= (float) it.ncall;
        }
        return w;
    }
    const size_t n_per_row = w.size() / it.counts.size();
    for (size_t m = 0; m < it.counts.size(); m++) {
        for (size_t j = m * n_per_row; j < (m + 1) * n_per_row; j++) w[j] = it.counts[m] > 0 ? w[j] / it.counts[m] : 1.0f;
    }
    return w;
}
