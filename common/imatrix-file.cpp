// imatrix-file.cpp - reading llama.cpp's importance matrix files (see imatrix-file.h).
#include "imatrix-file.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace {

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

}  // namespace

bool common_imatrix_read(const std::string & path, common_imatrix & out, std::string & err) {
    std::vector<uint8_t> bytes;
    if (!read_all(path, bytes, err)) return false;
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

