// llama-json.h - a small JSON reader for Hugging Face config and tokenizer files and PEFT adapter
// configs (RFC 8259: objects keep their key order, numbers are kept as double and as their source
// text).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

struct json_value {
    enum kind_t { NUL, BOOL, NUMBER, STRING, ARRAY, OBJECT } kind = NUL;
    bool b = false;
    double num = 0;
    std::string str;  // STRING: the decoded UTF-8 text; NUMBER: the literal as written
    std::vector<json_value> arr;
    std::vector<std::pair<std::string, json_value>> obj;

    // Object member by key, or nullptr (also when this is not an object).
    const json_value * get(const std::string & key) const;
    bool is_null() const { return kind == NUL; }
    bool is_string() const { return kind == STRING; }
    bool is_number() const { return kind == NUMBER; }
    bool is_object() const { return kind == OBJECT; }
    bool is_array() const { return kind == ARRAY; }
};

// Parses text; false with a message (byte offset included) in err on malformed input.
bool json_parse(const std::string & text, json_value & out, std::string & err);
// Reads and parses a file; false with a message in err.
bool json_parse_file(const std::string & path, json_value & out, std::string & err);
