// safetensors.cpp - the safetensors reader (header checked against the file size).
#include "safetensors.h"

#include "json.h"

#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <set>
#include <sys/stat.h>

void safetensors_load_file(const std::string & path, std::map<std::string, st_tensor> & out) {
    auto f = map_file(path);
    if (f->size < 8) throw convert_error("'" + path + "' is too small for a safetensors file");
    uint64_t hlen;
    memcpy(&hlen, f->data, 8);
    if (hlen > f->size - 8 || hlen > (100u << 20)) throw convert_error("'" + path + "': bad header length");
    json_value h;
    std::string err;
    if (!json_parse(std::string((const char *) f->data + 8, (size_t) hlen), h, err) || !h.is_object()) {
        throw convert_error("'" + path + "': malformed header: " + (err.empty() ? "not an object" : err));
    }
    const size_t base = 8 + (size_t) hlen, data_size = f->size - base;
    for (const auto & kv : h.obj) {
        if (kv.first == "__metadata__") continue;
        const json_value & t = kv.second;
        const json_value * dt = t.get("dtype");
        const json_value * sh = t.get("shape");
        const json_value * off = t.get("data_offsets");
        if (!dt || !dt->is_string() || !sh || !sh->is_array() || !off || !off->is_array() || off->arr.size() != 2) {
            throw convert_error("'" + path + "': tensor '" + kv.first + "' lacks dtype, shape or data_offsets");
        }
        st_tensor st;
        st.name = kv.first;
        size_t esize;
        if (dt->str == "F32") { st.type = GGML_TYPE_F32; esize = 4; }
        else if (dt->str == "F16") { st.type = GGML_TYPE_F16; esize = 2; }
        else if (dt->str == "BF16") { st.type = GGML_TYPE_BF16; esize = 2; }
        else throw convert_error("'" + path + "': tensor '" + kv.first + "' has dtype " + dt->str + " (F32, F16 or BF16 supported)");
        uint64_t n = 1;
        for (const auto & d : sh->arr) {
            if (!d.is_number() || d.num < 0 || d.num > 1e12 || d.num != (double) (int64_t) d.num) {
                throw convert_error("'" + path + "': tensor '" + kv.first + "' has a bad shape");
            }
            st.shape.push_back((int64_t) d.num);
            n *= (uint64_t) d.num;
        }
        const double b = off->arr[0].num, e = off->arr[1].num;
        if (!off->arr[0].is_number() || !off->arr[1].is_number() || b < 0 || e < b || e > (double) data_size ||
            (uint64_t) (e - b) != n * esize) {
            throw convert_error("'" + path + "': tensor '" + kv.first + "' has data offsets outside the file or not matching its shape");
        }
        st.file = f;
        st.data = f->data + base + (size_t) b;
        st.nbytes = (size_t) (e - b);
        if (out.count(st.name)) throw convert_error("tensor '" + st.name + "' appears in more than one file");
        out[st.name] = st;
    }
}

std::map<std::string, st_tensor> safetensors_load_dir(const std::string & dir) {
    std::map<std::string, st_tensor> out;
    struct stat st;
    const std::string index = dir + "/model.safetensors.index.json";
    if (stat(index.c_str(), &st) == 0) {
        json_value j;
        std::string err;
        if (!json_parse_file(index, j, err)) throw convert_error(err);
        const json_value * wm = j.get("weight_map");
        if (!wm || !wm->is_object()) throw convert_error("'" + index + "' has no weight_map");
        std::set<std::string> files;
        for (const auto & kv : wm->obj) {
            if (!kv.second.is_string() || kv.second.str.find('/') != std::string::npos) throw convert_error("'" + index + "': bad file for " + kv.first);
            files.insert(kv.second.str);
        }
        for (const auto & f : files) safetensors_load_file(dir + "/" + f, out);
        for (const auto & kv : wm->obj) {
            auto it = out.find(kv.first);
            if (it == out.end()) throw convert_error("'" + index + "' lists '" + kv.first + "' but " + kv.second.str + " does not hold it");
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
    if (files.empty()) throw convert_error("no *.safetensors files in '" + dir + "'");
    std::sort(files.begin(), files.end());
    for (const auto & f : files) safetensors_load_file(dir + "/" + f, out);
    return out;
}
