// fuzz-json: the JSON reader of the converter and the PEFT loader (src/llama-json.h), from a
// buffer (json_parse) and from a file (json_parse_file). Malformed input must give false with a
// message; a parsed document is walked, written out again (json_string for every string) and
// re-parsed, which must succeed and give the same document.
#include "fuzz-common.h"

#include "llama-json.h"
#include "llama-safetensors.h"  // json_string

#include <cmath>

namespace {

// The document as JSON text (numbers as written; NaN / Infinity as Python writes them).
void write(const json_value & v, std::string & out, int depth) {
    FUZZ_CHECK(depth <= 257);
    switch (v.kind) {
        case json_value::NUL: out += "null"; break;
        case json_value::BOOL: out += v.b ? "true" : "false"; break;
        case json_value::NUMBER:
            if (std::isnan(v.num) && v.str.empty()) out += "NaN";
            else if (std::isinf(v.num) && v.str.empty()) out += "Infinity";
            else out += v.str;
            break;
        case json_value::STRING: out += json_string(v.str); break;
        case json_value::ARRAY:
            out += '[';
            for (size_t i = 0; i < v.arr.size(); i++) {
                if (i) out += ',';
                write(v.arr[i], out, depth + 1);
            }
            out += ']';
            break;
        case json_value::OBJECT:
            out += '{';
            for (size_t i = 0; i < v.obj.size(); i++) {
                if (i) out += ',';
                out += json_string(v.obj[i].first);
                out += ':';
                write(v.obj[i].second, out, depth + 1);
            }
            out += '}';
            // Lookup by key finds the first member of that name.
            for (const auto & kv : v.obj) {
                size_t first = 0;
                while (v.obj[first].first != kv.first) first++;
                FUZZ_CHECK(v.get(kv.first) == &v.obj[first].second);
            }
            break;
    }
}

bool same(const json_value & a, const json_value & b) {
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case json_value::NUL: return true;
        case json_value::BOOL: return a.b == b.b;
        case json_value::NUMBER: return a.str == b.str && (a.num == b.num || (std::isnan(a.num) && std::isnan(b.num)));
        case json_value::STRING: return a.str == b.str;
        case json_value::ARRAY:
            if (a.arr.size() != b.arr.size()) return false;
            for (size_t i = 0; i < a.arr.size(); i++) if (!same(a.arr[i], b.arr[i])) return false;
            return true;
        case json_value::OBJECT:
            if (a.obj.size() != b.obj.size()) return false;
            for (size_t i = 0; i < a.obj.size(); i++) {
                if (a.obj[i].first != b.obj[i].first || !same(a.obj[i].second, b.obj[i].second)) return false;
            }
            return true;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string text((const char *) data, size);
    json_value v;
    std::string err;
    const bool ok = json_parse(text, v, err);
    FUZZ_CHECK(ok == err.empty());

    fuzz::mem_file f(data, size);
    json_value vf;
    std::string errf;
    FUZZ_CHECK(json_parse_file(f.path, vf, errf) == ok);
    if (!ok) return 0;
    FUZZ_CHECK(same(v, vf));

    std::string out;
    write(v, out, 0);
    json_value v2;
    std::string err2;
    FUZZ_CHECK(json_parse(out, v2, err2));
    FUZZ_CHECK(same(v, v2));
    (void) v.get("dtype");
    return 0;
}
