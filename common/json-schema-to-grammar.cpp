// json-schema-to-grammar.cpp - JSON schema to GBNF: each (sub)schema becomes a rule; the JSON
// primitives (string, number, value, ...) are fixed rules added when used. Whitespace between
// tokens is the rule `space` (nothing, one space, or a newline with up to 20 spaces or tabs).
#include "json-schema-to-grammar.h"

#include <map>
#include <set>
#include <stdexcept>
#include <vector>

using json = nlohmann::ordered_json;

namespace {

// A count of the schema (minItems, maxLength, ...): absent, the default; else a non-negative
// integer a grammar can hold (JSON allows 1e30 or 2.5 there; converting those to an integer would
// be undefined, so they are refused like any schema this converter cannot honour).
int64_t schema_count(const nlohmann::ordered_json & schema, const char * key, int64_t dflt) {
    if (!schema.contains(key)) return dflt;
    const auto & v = schema[key];
    if (v.is_number_unsigned() && v.get<uint64_t>() <= (uint64_t) 1e9) return (int64_t) v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= (int64_t) 1e9) return v.get<int64_t>();
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (d >= 0.0 && d <= 1e9 && d == (double) (int64_t) d) return (int64_t) d;
    }
    throw std::runtime_error(std::string("json_schema_to_grammar: ") + key + " must be an integer from 0 to 1e9");
}

struct primitive {
    const char * name;
    const char * body;
    std::vector<const char *> deps;
};

const std::vector<primitive> PRIMITIVES = {
    {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", {}},
    {"boolean", "(\"true\" | \"false\") space", {"space"}},
    {"null", "\"null\" space", {"space"}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {}},
    {"decimal-part", "[0-9]{1,16}", {}},
    {"integer", "(\"-\"? integral-part) space", {"integral-part", "space"}},
    {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space", {"integral-part", "decimal-part", "space"}},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", {}},
    {"string", "\"\\\"\" char* \"\\\"\" space", {"char", "space"}},
    {"value", "object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}},
    {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space", {"string", "value", "space"}},
    {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", {"value", "space"}},
};

// A GBNF string literal of the bytes of s.
std::string literal(const std::string & s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20 || c == 0x7F) {
                    static const char * d = "0123456789ABCDEF";
                    out += "\\x";
                    out += d[c >> 4];
                    out += d[c & 15];
                } else {
                    out += (char) c;
                }
        }
    }
    return out + "\"";
}

// A rule name from any text: letters, digits and dashes.
std::string rule_name(const std::string & s) {
    std::string out;
    for (char c : s) out += ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? c : '-';
    return out.empty() ? "r" : out;
}

std::string repetition(const std::string & item, uint64_t min, int64_t max) {
    if (max < 0) return min == 0 ? "(" + item + ")*" : "(" + item + "){" + std::to_string(min) + ",}";
    if (min == 0 && max == 1) return "(" + item + ")?";
    if ((int64_t) min == max) return "(" + item + "){" + std::to_string(min) + "}";
    return "(" + item + "){" + std::to_string(min) + "," + std::to_string(max) + "}";
}

struct converter {
    const json & root_schema;
    std::vector<std::pair<std::string, std::string>> rules;  // in order of addition
    std::map<std::string, std::string> bodies;
    std::map<std::string, std::string> refs;  // "#/..." -> rule name
    int depth = 0;

    explicit converter(const json & root) : root_schema(root) {}

    // Adds a rule (a new name when the name is taken by another body); returns its name.
    std::string add_rule(const std::string & want, const std::string & body) {
        const std::string base = rule_name(want);
        std::string name = base;
        for (int i = 1;; i++) {
            auto it = bodies.find(name);
            if (it == bodies.end()) break;
            if (it->second == body) return name;
            name = base + std::to_string(i);
        }
        bodies[name] = body;
        rules.push_back({name, body});
        return name;
    }

    void set_rule(const std::string & name, const std::string & body) {
        bodies[name] = body;
        for (auto & r : rules) {
            if (r.first == name) r.second = body;
        }
    }

    std::string use_primitive(const std::string & name) {
        for (const primitive & p : PRIMITIVES) {
            if (name != p.name) continue;
            if (bodies.count(name)) return name;
            add_rule(name, p.body);
            for (const char * d : p.deps) use_primitive(d);
            return name;
        }
        throw std::runtime_error("json_schema_to_grammar: no primitive " + name);
    }

    std::string value_literal(const json & v) { return literal(v.dump()) + " space"; }

    const json & resolve(const std::string & ref) {
        std::string path;
        if (ref.rfind("#/definitions/", 0) == 0 || ref.rfind("#/$defs/", 0) == 0) {
            path = ref.substr(1);
        } else if (ref == "#") {
            return root_schema;
        } else {
            throw std::runtime_error("json_schema_to_grammar: $ref '" + ref + "' not supported (only #/definitions/... and #/$defs/...)");
        }
        const json * cur = &root_schema;
        size_t at = 1;
        while (at <= path.size()) {
            size_t next = path.find('/', at);
            if (next == std::string::npos) next = path.size();
            std::string key = path.substr(at, next - at);
            for (size_t p; (p = key.find("~1")) != std::string::npos;) key.replace(p, 2, "/");
            for (size_t p; (p = key.find("~0")) != std::string::npos;) key.replace(p, 2, "~");
            if (!cur->is_object() || !cur->contains(key)) throw std::runtime_error("json_schema_to_grammar: $ref '" + ref + "' not found");
            cur = &(*cur)[key];
            at = next + 1;
        }
        return *cur;
    }

    std::string ref_rule(const std::string & ref) {
        auto it = refs.find(ref);
        if (it != refs.end()) return it->second;
        const json & target = resolve(ref);
        const std::string name = add_rule("ref" + ref.substr(ref.rfind('/')), "\"\"");  // placeholder: recursion
        refs[ref] = name;
        set_rule(name, visit(target, name));
        return name;
    }

    // The body of an object with the given properties (declared order; optional ones may be left
    // out) and, when extra is not null, more keys after them with values of schema extra.
    std::string object_body(const json & props, const std::set<std::string> & required, const json * extra, const std::string & name) {
        std::vector<std::string> kvs;
        std::vector<bool> req;
        for (const auto & [key, sub] : props.items()) {
            const std::string vname = visit_rule(sub, name + "-" + key);
            kvs.push_back(add_rule(name + "-" + key + "-kv", literal(json(key).dump()) + " space \":\" space " + vname));
            req.push_back(required.count(key) > 0);
        }
        std::string extra_kv;
        if (extra) {
            const std::string vname = visit_rule(*extra, name + "-additional");
            extra_kv = add_rule(name + "-additional-kv", use_primitive("string") + " \":\" space " + vname);
        }
        const size_t n = kvs.size();
        // rest[i]: keys i.. after one has been written (each with its comma); first[i]: none yet.
        std::vector<std::string> rest(n + 1), first(n + 1);
        rest[n] = extra ? "(\",\" space " + extra_kv + ")*" : "";
        first[n] = extra ? "(" + extra_kv + " (\",\" space " + extra_kv + ")*)?" : "";
        for (size_t i = n; i-- > 0;) {
            const std::string after = rest[i + 1].empty() ? "" : " " + rest[i + 1];
            std::string r = req[i] ? "\",\" space " + kvs[i] + after : "(\",\" space " + kvs[i] + ")?" + after;
            rest[i] = add_rule(name + "-rest-" + std::to_string(i), r.empty() ? "\"\"" : r);
            std::string f = kvs[i] + " " + rest[i + 1];
            if (rest[i + 1].empty()) f = kvs[i];
            if (!req[i]) f = "(" + f + ") | " + (first[i + 1].empty() ? "\"\"" : first[i + 1]);
            first[i] = add_rule(name + "-first-" + std::to_string(i), f);
        }
        return "\"{\" space " + (first[0].empty() ? "" : first[0] + " ") + "\"}\" space";
    }

    // A rule name for the schema (a primitive's own name when the schema is just that type).
    std::string visit_rule(const json & schema, const std::string & name) {
        const std::string body = visit(schema, name);
        for (const primitive & p : PRIMITIVES) {
            if (body == p.name) return body;
        }
        return add_rule(name, body);
    }

    std::string alternatives(const json & list, const std::string & name) {
        std::string out;
        int i = 0;
        for (const auto & s : list) {
            out += (out.empty() ? "" : " | ") + visit_rule(s, name + "-" + std::to_string(i++));
        }
        return out.empty() ? "\"\"" : out;
    }

    std::string visit(const json & schema, const std::string & name) {
        if (++depth > 200) throw std::runtime_error("json_schema_to_grammar: the schema is nested too deeply");
        std::string r = visit_inner(schema, name);
        depth--;
        return r;
    }

    std::string visit_inner(const json & schema, const std::string & name) {
        if (schema.is_boolean()) {
            if (schema.get<bool>()) return use_primitive("value");
            throw std::runtime_error("json_schema_to_grammar: the schema false takes no value");
        }
        if (!schema.is_object()) throw std::runtime_error("json_schema_to_grammar: a schema must be an object");
        if (schema.contains("$ref")) return ref_rule(schema["$ref"].get<std::string>());
        if (schema.contains("oneOf")) return alternatives(schema["oneOf"], name);
        if (schema.contains("anyOf")) return alternatives(schema["anyOf"], name);
        if (schema.contains("allOf")) {
            if (schema["allOf"].size() != 1) throw std::runtime_error("json_schema_to_grammar: allOf of more than one schema not supported");
            return visit(schema["allOf"][0], name);
        }
        if (schema.contains("const")) return value_literal(schema["const"]);
        if (schema.contains("enum")) {
            std::string out;
            for (const auto & v : schema["enum"]) out += (out.empty() ? "" : " | ") + value_literal(v);
            if (out.empty()) throw std::runtime_error("json_schema_to_grammar: an empty enum takes no value");
            return out;
        }
        if (schema.contains("type") && schema["type"].is_array()) {
            std::string out;
            for (const auto & t : schema["type"]) {
                json sub = schema;
                sub["type"] = t;
                out += (out.empty() ? "" : " | ") + visit_rule(sub, name + "-" + t.get<std::string>());
            }
            return out.empty() ? "\"\"" : out;
        }
        std::string type = schema.contains("type") ? schema["type"].get<std::string>() : "";
        if (type.empty() && (schema.contains("properties") || schema.contains("additionalProperties"))) type = "object";
        if (type.empty() && (schema.contains("items") || schema.contains("prefixItems"))) type = "array";
        if (type == "object") {
            std::set<std::string> required;
            if (schema.contains("required")) {
                for (const auto & k : schema["required"]) required.insert(k.get<std::string>());
            }
            const json props = schema.contains("properties") ? schema["properties"] : json::object();
            const json * extra = nullptr;
            static const json any = json::object();
            if (schema.contains("additionalProperties")) {
                const json & ap = schema["additionalProperties"];
                if (ap.is_object()) extra = &ap;
                else if (ap.is_boolean() && ap.get<bool>()) extra = &any;
            } else if (!schema.contains("properties")) {
                extra = &any;  // {"type": "object"}: any object
            }
            return object_body(props, required, extra, name);
        }
        if (type == "array") {
            const uint64_t min = (uint64_t) schema_count(schema, "minItems", 0);
            const int64_t max = schema_count(schema, "maxItems", -1);
            const json * tuple = nullptr;
            if (schema.contains("prefixItems")) tuple = &schema["prefixItems"];
            else if (schema.contains("items") && schema["items"].is_array()) tuple = &schema["items"];
            if (tuple) {
                std::string out = "\"[\" space";
                int i = 0;
                for (const auto & s : *tuple) {
                    out += (i ? " \",\" space " : " ") + visit_rule(s, name + "-" + std::to_string(i));
                    i++;
                }
                return out + " \"]\" space";
            }
            const std::string item = schema.contains("items") ? visit_rule(schema["items"], name + "-item") : use_primitive("value");
            if (max == 0) return "\"[\" space \"]\" space";
            std::string list;
            if (min == 0) {
                list = "(" + item + " " + repetition("\",\" space " + item, 0, max < 0 ? -1 : max - 1) + ")?";
            } else {
                list = item + " " + repetition("\",\" space " + item, min - 1, max < 0 ? -1 : max - 1);
            }
            return "\"[\" space " + list + " \"]\" space";
        }
        if (type == "string") {
            if (schema.contains("pattern")) throw std::runtime_error("json_schema_to_grammar: string pattern not supported");
            const uint64_t min = (uint64_t) schema_count(schema, "minLength", 0);
            const int64_t max = schema_count(schema, "maxLength", -1);
            if (min == 0 && max < 0) return use_primitive("string");
            use_primitive("char");
            use_primitive("space");
            std::string chars = max == 0 ? "" : repetition("char", min, max) + " ";
            return "\"\\\"\" " + chars + "\"\\\"\" space";
        }
        if (type == "number" || type == "integer" || type == "boolean" || type == "null") return use_primitive(type);
        if (type.empty()) return use_primitive("value");
        throw std::runtime_error("json_schema_to_grammar: type '" + type + "' not supported");
    }
};

}  // namespace

std::string json_schema_to_grammar(const json & schema) {
    converter c(schema);
    c.add_rule("root", "\"\"");
    c.use_primitive("space");
    c.set_rule("root", c.visit(schema, "root"));
    std::string out;
    for (const auto & [name, body] : c.rules) out += name + " ::= " + body + "\n";
    return out;
}
