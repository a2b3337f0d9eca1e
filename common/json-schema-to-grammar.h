// json-schema-to-grammar.h - a JSON schema to a GBNF grammar whose root rule takes the JSON texts
// the schema describes (llama.cpp's common/json-schema-to-grammar.h signature).
//
// Supported: type (object, array, string, number, integer, boolean, null, or a list of them),
// properties with required (the others optional, in the declared order), additionalProperties
// (absent or false: none; true or a schema: more keys after the declared ones), enum, const,
// items (a schema, or a list: a tuple) with minItems / maxItems, prefixItems, anyOf / oneOf, allOf
// of one schema, $ref to #/definitions/NAME and #/$defs/NAME (recursion included), string
// minLength / maxLength. A schema that is none of these (a pattern, an external $ref) throws
// std::runtime_error naming what is not supported. Numbers' minimum / maximum and string formats
// are not enforced (any number / any string).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

std::string json_schema_to_grammar(const nlohmann::ordered_json & schema);
