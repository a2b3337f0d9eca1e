// llama-json.cpp - recursive-descent JSON parser (depth-limited so hostile input cannot overflow the stack).
#include "llama-json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

const json_value * json_value::get(const std::string & key) const {
    if (kind != OBJECT) return nullptr;
    for (const auto & kv : obj) {
        if (kv.first == key) return &kv.second;
    }
    return nullptr;
}

namespace {

struct parser {
    const std::string & s;
    size_t p = 0;
    std::string err;

    explicit parser(const std::string & text) : s(text) {}

    bool fail(const char * what) {
        if (err.empty()) err = std::string(what) + " at byte " + std::to_string(p);
        return false;
    }
    void ws() {
        while (p < s.size() && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r')) p++;
    }
    bool lit(const char * word) {
        size_t n = 0;
        while (word[n]) n++;
        if (s.compare(p, n, word) != 0) return fail("invalid literal");
        p += n;
        return true;
    }
    static void put_utf8(std::string & o, uint32_t c) {
        if (c < 0x80) {
            o += (char) c;
        } else if (c < 0x800) {
            o += (char) (0xC0 | (c >> 6));
            o += (char) (0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            o += (char) (0xE0 | (c >> 12));
            o += (char) (0x80 | ((c >> 6) & 0x3F));
            o += (char) (0x80 | (c & 0x3F));
        } else {
            o += (char) (0xF0 | (c >> 18));
            o += (char) (0x80 | ((c >> 12) & 0x3F));
            o += (char) (0x80 | ((c >> 6) & 0x3F));
            o += (char) (0x80 | (c & 0x3F));
        }
    }
    bool hex4(uint32_t & v) {
        if (p + 4 > s.size()) return fail("truncated \\u escape");
        v = 0;
        for (int i = 0; i < 4; i++) {
            const char c = s[p++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= (uint32_t) (c - '0');
            else if (c >= 'a' && c <= 'f') v |= (uint32_t) (c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') v |= (uint32_t) (c - 'A' + 10);
            else return fail("bad \\u escape");
        }
        return true;
    }
    bool string(std::string & o) {
        if (p >= s.size() || s[p] != '"') return fail("expected a string");
        p++;
        o.clear();
        while (true) {
            if (p >= s.size()) return fail("unterminated string");
            const char c = s[p++];
            if (c == '"') return true;
            if ((unsigned char) c < 0x20) return fail("control character in string");
            if (c != '\\') {
                o += c;
                continue;
            }
            if (p >= s.size()) return fail("unterminated string");
            const char e = s[p++];
            switch (e) {
                case '"': o += '"'; break;
                case '\\': o += '\\'; break;
                case '/': o += '/'; break;
                case 'b': o += '\b'; break;
                case 'f': o += '\f'; break;
                case 'n': o += '\n'; break;
                case 'r': o += '\r'; break;
                case 't': o += '\t'; break;
                case 'u': {
                    uint32_t c1 = 0;
                    if (!hex4(c1)) return false;
                    if (c1 >= 0xD800 && c1 < 0xDC00 && p + 1 < s.size() && s[p] == '\\' && s[p + 1] == 'u') {
                        p += 2;
                        uint32_t c2 = 0;
                        if (!hex4(c2)) return false;
                        if (c2 >= 0xDC00 && c2 < 0xE000) {
                            c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
                        } else {
                            put_utf8(o, 0xFFFD);
                            c1 = c2;
                        }
                    }
                    put_utf8(o, c1);
                    break;
                }
                default: return fail("bad escape");
            }
        }
    }
    bool number(json_value & v) {
        const size_t b = p;
        if (p < s.size() && s[p] == '-') p++;
        while (p < s.size() && ((s[p] >= '0' && s[p] <= '9') || s[p] == '.' || s[p] == 'e' || s[p] == 'E' ||
                                s[p] == '+' || s[p] == '-')) p++;
        v.kind = json_value::NUMBER;
        v.str = s.substr(b, p - b);
        char * end = nullptr;
        v.num = strtod(v.str.c_str(), &end);
        if (v.str.empty() || !end || *end != '\0') return fail("bad number");
        return true;
    }
    bool value(json_value & v, int depth) {
        if (depth > 256) return fail("nesting too deep");
        ws();
        if (p >= s.size()) return fail("unexpected end");
        const char c = s[p];
        if (c == '{') {
            p++;
            v.kind = json_value::OBJECT;
            ws();
            if (p < s.size() && s[p] == '}') { p++; return true; }
            while (true) {
                ws();
                std::string key;
                if (!string(key)) return false;
                ws();
                if (p >= s.size() || s[p] != ':') return fail("expected ':'");
                p++;
                v.obj.emplace_back(std::move(key), json_value());
                if (!value(v.obj.back().second, depth + 1)) return false;
                ws();
                if (p < s.size() && s[p] == ',') { p++; continue; }
                if (p < s.size() && s[p] == '}') { p++; return true; }
                return fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            p++;
            v.kind = json_value::ARRAY;
            ws();
            if (p < s.size() && s[p] == ']') { p++; return true; }
            while (true) {
                v.arr.emplace_back();
                if (!value(v.arr.back(), depth + 1)) return false;
                ws();
                if (p < s.size() && s[p] == ',') { p++; continue; }
                if (p < s.size() && s[p] == ']') { p++; return true; }
                return fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v.kind = json_value::STRING;
            return string(v.str);
        }
        if (c == 't') { v.kind = json_value::BOOL; v.b = true; return lit("true"); }
        if (c == 'f') { v.kind = json_value::BOOL; v.b = false; return lit("false"); }
        if (c == 'n') { v.kind = json_value::NUL; return lit("null"); }
        if (c == '-' || (c >= '0' && c <= '9')) return number(v);
        // Python's json writes these for non-finite floats.
        if (s.compare(p, 3, "NaN") == 0) { p += 3; v.kind = json_value::NUMBER; v.num = NAN; return true; }
        if (s.compare(p, 8, "Infinity") == 0) { p += 8; v.kind = json_value::NUMBER; v.num = INFINITY; return true; }
        return fail("unexpected character");
    }
};

}  // namespace

bool json_parse(const std::string & text, json_value & out, std::string & err) {
    parser ps(text);
    out = json_value();
    if (!ps.value(out, 0)) {
        err = ps.err;
        return false;
    }
    ps.ws();
    if (ps.p != text.size()) {
        err = "trailing characters at byte " + std::to_string(ps.p);
        return false;
    }
    return true;
}

bool json_parse_file(const std::string & path, json_value & out, std::string & err) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        err = "cannot open '" + path + "'";
        return false;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    if (!json_parse(ss.str(), out, err)) {
        err = "'" + path + "': " + err;
        return false;
    }
    return true;
}
