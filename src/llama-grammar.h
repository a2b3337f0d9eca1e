// llama-grammar.h - GBNF grammars (llama.cpp's grammar format, grammars/README.md there): the
// parser, a matcher that follows a text through the grammar code point by code point, and the
// grammar sampler of llama.h (llama_sampler_init_grammar / _lazy). Internals shared with the tests.
#pragma once

#include "llama.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// A parsed grammar: rules of alternatives of elements (a character class or a reference to a
// rule). Repetitions and groups become rules of their own.
struct llama_gbnf_elem {
    enum kind_t : uint8_t { END, CHAR, REF } kind = END;
    bool negated = false;                               // CHAR: [^...] ('.' is an empty negated class)
    int32_t rule = -1;                                  // REF
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // CHAR: inclusive code point ranges
};

struct llama_gbnf_grammar {
    // rules[r][a]: alternative a of rule r, ending with an END element.
    std::vector<std::vector<std::vector<llama_gbnf_elem>>> rules;
    std::vector<std::string> names;  // rule names (generated rules: parent_N)
    int32_t root = -1;
};

// Parses grammar text with the start rule root; nullptr with err ("line L, column C: ...") on a
// text that does not parse, an undefined rule, a missing root rule or left recursion.
std::shared_ptr<const llama_gbnf_grammar> llama_gbnf_parse(const std::string & text, const std::string & root, std::string * err);

// The state of a match: the possible stacks of grammar positions (each top is a CHAR element; an
// empty stack: the grammar can be complete here) and an unfinished UTF-8 sequence.
struct llama_gbnf_state {
    const llama_gbnf_grammar * grammar = nullptr;
    std::vector<std::vector<const llama_gbnf_elem *>> stacks;
    uint32_t partial_value = 0;
    int partial_remain = 0;  // bytes the UTF-8 sequence still needs; -1: invalid UTF-8 seen
};

// The state at the start of the grammar.
llama_gbnf_state llama_gbnf_start(const llama_gbnf_grammar & g);
// Advances st by the UTF-8 bytes of text; false (st unchanged) when the grammar cannot go on.
bool llama_gbnf_accept_text(llama_gbnf_state & st, const std::string & text);
// Whether the text seen so far can be a complete string of the grammar.
bool llama_gbnf_can_end(const llama_gbnf_state & st);
// 1: text is a complete string of the grammar, 0: it is not, -1: the grammar does not parse
// (err says why).
int llama_gbnf_match(const std::string & grammar, const std::string & root, const std::string & text, std::string * err);
