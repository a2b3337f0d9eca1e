// fuzz-grammar: the GBNF parser and matcher (src/llama-grammar.h). Input: a grammar text, a 0x00
// byte, then a text. A grammar that does not parse must say where (line and column); one that
// parses follows the text byte by byte and whole, with the same verdict both ways.
#include "fuzz-common.h"

#include "llama-grammar.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::reader in{ data, size };
    const std::string all = in.rest();
    const size_t nul = all.find('\0');
    const std::string grammar = all.substr(0, nul);
    std::string text = nul == std::string::npos ? std::string() : all.substr(nul + 1);
    if (text.size() > 256) text.resize(256);

    std::string err;
    auto g = llama_gbnf_parse(grammar, "root", &err);
    if (!g) {
        if (err.empty()) abort();  // a refusal always says why
        return 0;
    }
    llama_gbnf_state whole = llama_gbnf_start(*g);
    const bool ok_whole = llama_gbnf_accept_text(whole, text);
    llama_gbnf_state bytes = llama_gbnf_start(*g);
    bool ok_bytes = true;
    for (size_t i = 0; i < text.size() && ok_bytes; i++) ok_bytes = llama_gbnf_accept_text(bytes, text.substr(i, 1));
    if (ok_whole != ok_bytes) abort();
    if (ok_whole && llama_gbnf_can_end(whole) != llama_gbnf_can_end(bytes)) abort();
    return 0;
}
