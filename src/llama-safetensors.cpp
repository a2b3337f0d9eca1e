// llama-safetensors.cpp - the safetensors reader (header checked against the file size) and
// writer, and the file helpers they stand on (mappings, atomic writes).
#include "llama-safetensors.h"

#include "llama-json.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <stdexcept>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <set>
#include <sys/stat.h>

namespace {

[[noreturn]] void fail(const std::string & m) { throw std::runtime_error(m); }

}  // namespace

mapped_file::~mapped_file() {
    if (data && size) munmap((void *) data, size);
}

std::shared_ptr<mapped_file> map_file(const std::string & path) {
    auto m = std::make_shared<mapped_file>();
    m->path = path;
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) fail("cannot open '" + path + "': " + strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        fail("'" + path + "' is not a regular file");
    }
    m->size = (size_t) st.st_size;
    if (m->size > 0) {
        void * p = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            fail("cannot map '" + path + "': " + strerror(errno));
        }
        m->data = (const uint8_t *) p;
    }
    close(fd);
    return m;
}

void release_pages(const void * p, size_t n) {
    const uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
    const uintptr_t b = ((uintptr_t) p + page - 1) & ~(page - 1);  // whole pages inside the range only
    const uintptr_t e = ((uintptr_t) p + n) & ~(page - 1);
    if (e > b) madvise((void *) b, e - b, MADV_DONTNEED);
}

void safetensors_load_file(const std::string & path, std::map<std::string, st_tensor> & out) {
    auto f = map_file(path);
    if (f->size < 8) throw std::runtime_error("'" + path + "' is too small for a safetensors file");
    uint64_t hlen;
    memcpy(&hlen, f->data, 8);
    if (hlen > f->size - 8 || hlen > (100u << 20)) throw std::runtime_error("'" + path + "': bad header length");
    json_value h;
    std::string err;
    if (!json_parse(std::string((const char *) f->data + 8, (size_t) hlen), h, err) || !h.is_object()) {
        throw std::runtime_error("'" + path + "': malformed header: " + (err.empty() ? "not an object" : err));
    }
    const size_t base = 8 + (size_t) hlen, data_size = f->size - base;
    std::vector<std::pair<uint64_t, uint64_t>> spans;  // each tensor's [begin, end) in the data
    std::map<std::string, st_tensor> mine;
    for (const auto & kv : h.obj) {
        if (kv.first == "__metadata__") continue;
        const json_value & t = kv.second;
        const json_value * dt = t.get("dtype");
        const json_value * sh = t.get("shape");
        const json_value * off = t.get("data_offsets");
        if (!dt || !dt->is_string() || !sh || !sh->is_array() || !off || !off->is_array() || off->arr.size() != 2) {
            throw std::runtime_error("'" + path + "': tensor '" + kv.first + "' lacks dtype, shape or data_offsets");
        }
        st_tensor st;
        st.name = kv.first;
        size_t esize;
        if (dt->str == "F32") { st.type = GGML_TYPE_F32; esize = 4; }
        else if (dt->str == "F16") { st.type = GGML_TYPE_F16; esize = 2; }
        else if (dt->str == "BF16") { st.type = GGML_TYPE_BF16; esize = 2; }
        else throw std::runtime_error("'" + path + "': tensor '" + kv.first + "' has dtype " + dt->str + " (F32, F16 or BF16 supported)");
        // Values are checked in ranges NaN fails, before any conversion to an integer; the
        // element and byte counts must not wrap around (a huge shape over a few bytes).
        uint64_t n = 1;
        for (const auto & d : sh->arr) {
            if (!d.is_number() || !(d.num >= 0 && d.num <= 1e12) || d.num != std::floor(d.num) ||
                __builtin_mul_overflow(n, (uint64_t) d.num, &n)) {
                throw std::runtime_error("'" + path + "': tensor '" + kv.first + "' has a bad shape");
            }
            st.shape.push_back((int64_t) d.num);
        }
        const double b = off->arr[0].num, e = off->arr[1].num;
        auto in_data = [&](const json_value & v) {
            return v.is_number() && v.num >= 0 && v.num <= (double) data_size && v.num == std::floor(v.num);
        };
        uint64_t nbytes = 0;
        if (!in_data(off->arr[0]) || !in_data(off->arr[1]) || e < b || __builtin_mul_overflow(n, (uint64_t) esize, &nbytes) ||
            (uint64_t) (e - b) != nbytes) {
            throw std::runtime_error("'" + path + "': tensor '" + kv.first + "' has data offsets outside the file or not matching its shape");
        }
        st.file = f;
        st.data = f->data + base + (size_t) b;
        st.nbytes = (size_t) (e - b);
        if (out.count(st.name)) throw std::runtime_error("tensor '" + st.name + "' appears in more than one file");
        spans.push_back({(uint64_t) b, (uint64_t) e});
        mine[st.name] = st;
    }
    // The format requires the tensors to tile the data section: no gap, no overlap, nothing after
    // the last one. A header length one byte short still parses (the JSON is padded with spaces)
    // but shifts every tensor by a byte: this is what catches it.
    std::sort(spans.begin(), spans.end());
    uint64_t end = 0;
    for (const auto & sp : spans) {
        if (sp.first != end) {
            throw std::runtime_error("'" + path + "': the tensors' data does not tile the data section (" +
                                     (sp.first > end ? "a gap" : "an overlap") + " at byte " + std::to_string(std::min(sp.first, end)) +
                                     "): bad header length or offsets");
        }
        end = sp.second;
    }
    if (end != data_size) {
        throw std::runtime_error("'" + path + "': the data section is " + std::to_string(data_size) + " bytes, the tensors end at " +
                                 std::to_string(end) + ": bad header length or offsets (truncated or padded file?)");
    }
    out.insert(mine.begin(), mine.end());
}

std::map<std::string, st_tensor> safetensors_load_dir(const std::string & dir) {
    std::map<std::string, st_tensor> out;
    struct stat st;
    const std::string index = dir + "/model.safetensors.index.json";
    if (stat(index.c_str(), &st) == 0) {
        json_value j;
        std::string err;
        if (!json_parse_file(index, j, err)) throw std::runtime_error(err);
        const json_value * wm = j.get("weight_map");
        if (!wm || !wm->is_object()) throw std::runtime_error("'" + index + "' has no weight_map");
        std::set<std::string> files;
        for (const auto & kv : wm->obj) {
            if (!kv.second.is_string() || kv.second.str.find('/') != std::string::npos) throw std::runtime_error("'" + index + "': bad file for " + kv.first);
            files.insert(kv.second.str);
        }
        for (const auto & f : files) safetensors_load_file(dir + "/" + f, out);
        for (const auto & kv : wm->obj) {
            auto it = out.find(kv.first);
            if (it == out.end()) throw std::runtime_error("'" + index + "' lists '" + kv.first + "' but " + kv.second.str + " does not hold it");
        }
        return out;
    }
    const std::string single = dir + "/model.safetensors";
    if (stat(single.c_str(), &st) == 0) {
        safetensors_load_file(single, out);
        return out;
    }
    std::vector<std::string> files;
    if (DIR * d = opendir(dir.c_str())) {
        while (dirent * e = readdir(d)) {
            const std::string n = e->d_name;
            if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) files.push_back(n);
        }
        closedir(d);
    }
    if (files.empty()) throw std::runtime_error("no *.safetensors files in '" + dir + "'");
    std::sort(files.begin(), files.end());
    for (const auto & f : files) safetensors_load_file(dir + "/" + f, out);
    return out;
}

std::string json_string(const std::string & s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += (char) c;
        } else if (c < 0x20) {
            char b[8];
            snprintf(b, sizeof(b), "\\u%04x", c);
            o += b;
        } else {
            o += (char) c;
        }
    }
    return o + "\"";
}

namespace {

const char * st_dtype(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32: return "F32";
        case GGML_TYPE_F16: return "F16";
        case GGML_TYPE_BF16: return "BF16";
        default: fail(std::string("safetensors cannot hold type ") + ggml_type_name(t));
    }
}

}  // namespace

void safetensors_write(const std::string & path, const std::vector<st_out_tensor> & tensors,
                       const std::map<std::string, std::string> & metadata) {
    std::vector<const st_out_tensor *> order;
    for (const auto & t : tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const st_out_tensor * a, const st_out_tensor * b) { return a->name < b->name; });
    std::string h = "{";
    if (!metadata.empty()) {
        h += "\"__metadata__\":{";
        bool first = true;
        for (const auto & kv : metadata) {
            h += (first ? "" : ",") + json_string(kv.first) + ":" + json_string(kv.second);
            first = false;
        }
        h += "}";
    }
    size_t off = 0;
    for (const st_out_tensor * t : order) {
        uint64_t n = 1;
        std::string shape;
        for (int64_t d : t->shape) {
            shape += (shape.empty() ? "" : ",") + std::to_string(d);
            n *= (uint64_t) d;
        }
        if (n * ggml_type_size(t->type) != t->data.size()) fail("safetensors_write: '" + t->name + "' has the wrong size");
        if (h.size() > 1) h += ",";
        h += json_string(t->name) + ":{\"dtype\":\"" + st_dtype(t->type) + "\",\"shape\":[" + shape +
             "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + t->data.size()) + "]}";
        off += t->data.size();
    }
    h += "}";
    while (h.size() % 8) h += ' ';  // the data starts 8-byte aligned
    std::string out(8, '\0');
    const uint64_t hlen = h.size();
    memcpy(&out[0], &hlen, 8);
    out += h;
    out.reserve(out.size() + off);
    for (const st_out_tensor * t : order) out.append((const char *) t->data.data(), t->data.size());
    write_file_atomic(path, out);
}

void write_file_atomic(const std::string & path, const std::string & text) {
    // PATH.tmp.PID.N, as gguf_write_to_file names its temporaries, so that
    // remove_stale_temporaries can tell a dead writer's leftover from a live one's file.
    static std::atomic<unsigned> counter{0};
    std::string tmp;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        tmp = path + ".tmp." + std::to_string((long) getpid()) + "." + std::to_string(counter++);
        fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // 0666 & ~umask
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) fail("cannot create '" + tmp + "': " + strerror(errno));
    const char * p = text.data();
    size_t n = text.size();
    bool ok = true;
    while (n > 0 && ok) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        ok = w > 0;
        if (ok) {
            p += w;
            n -= (size_t) w;
        }
    }
    const std::string why = ok ? "" : strerror(errno);
    ok = ok && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string e = why.empty() ? strerror(errno) : why;
        unlink(tmp.c_str());
        fail("cannot write '" + path + "': " + e);
    }
}

std::vector<std::string> remove_stale_temporaries(const std::string & path) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
    std::vector<std::string> removed;
    DIR * d = opendir(dir.c_str());
    if (!d) return removed;
    while (dirent * e = readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() <= prefix.size() || n.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string tail = n.substr(prefix.size());
        bool stale = false;
        const size_t dot = tail.find('.');
        auto digits = [](const std::string & x) { return !x.empty() && x.size() < 12 && x.find_first_not_of("0123456789") == std::string::npos; };
        if (dot != std::string::npos && digits(tail.substr(0, dot)) && digits(tail.substr(dot + 1))) {
            // PID.N: stale when process PID is gone (a live one may be writing it now)
            const long pid = std::stol(tail.substr(0, dot));
            stale = pid > 0 && pid != (long) getpid() && kill((pid_t) pid, 0) != 0 && errno == ESRCH;
        } else if (tail.size() == 6 && tail.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") ==
                                           std::string::npos) {
            stale = true;  // mkstemp's XXXXXX: what earlier versions of write_file_atomic left
        }
        struct stat st;
        const std::string full = dir + "/" + n;
        if (stale && lstat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode) && unlink(full.c_str()) == 0) removed.push_back(full);
    }
    closedir(d);
    return removed;
}

std::vector<float> safetensors_to_f32(const st_tensor & t) {
    const size_t n = t.nbytes / ggml_type_size(t.type);
    std::vector<float> out(n);
    ggml_get_type_traits(t.type)->to_float(t.data, out.data(), (int64_t) n);
    return out;
}
