// llama-unicode.h - what the tokenizer needs from Unicode: general categories (a generated table),
// UTF-8 decoding that never fails, GPT-2's byte-to-unicode mapping, and the pre-tokenizers of
// byte-level BPE models (their split regexes, hand-written over code point classes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// Unicode general categories; the order is the generator's (tools/gen-unicode-tables.py).
enum llama_unicode_category : uint8_t {
    LLAMA_UCAT_LU, LLAMA_UCAT_LL, LLAMA_UCAT_LT, LLAMA_UCAT_LM, LLAMA_UCAT_LO,
    LLAMA_UCAT_MN, LLAMA_UCAT_MC, LLAMA_UCAT_ME,
    LLAMA_UCAT_ND, LLAMA_UCAT_NL, LLAMA_UCAT_NO,
    LLAMA_UCAT_PC, LLAMA_UCAT_PD, LLAMA_UCAT_PS, LLAMA_UCAT_PE, LLAMA_UCAT_PI, LLAMA_UCAT_PF, LLAMA_UCAT_PO,
    LLAMA_UCAT_SM, LLAMA_UCAT_SC, LLAMA_UCAT_SK, LLAMA_UCAT_SO,
    LLAMA_UCAT_ZS, LLAMA_UCAT_ZL, LLAMA_UCAT_ZP,
    LLAMA_UCAT_CC, LLAMA_UCAT_CF, LLAMA_UCAT_CS, LLAMA_UCAT_CO, LLAMA_UCAT_CN,
};

// The generated tables (llama-unicode-data.cpp): sorted (first code point << 5) | category;
// the simple lowercase mappings; the first code point of canonical decompositions.
extern const uint32_t llama_unicode_category_runs[];
extern const size_t   llama_unicode_category_runs_n;
extern const uint32_t llama_unicode_lowercase[][2];
extern const size_t   llama_unicode_lowercase_n;
extern const uint32_t llama_unicode_nfd_ranges[][3];
extern const size_t   llama_unicode_nfd_ranges_n;

// A byte that is not part of valid UTF-8 decodes to this plus the byte's value: a "code point"
// outside Unicode, in no category (not a letter, number or space), so it stays one unit.
constexpr uint32_t LLAMA_UNICODE_INVALID_BASE = 0x110000;

// The classes the split regexes use: \p{L}, \p{N}, \s (the White_Space property).
enum : uint8_t {
    LLAMA_UFLAG_LETTER = 1,
    LLAMA_UFLAG_NUMBER = 2,
    LLAMA_UFLAG_SPACE  = 4,
};

enum llama_unicode_category llama_unicode_category_of(uint32_t cp);  // CN for invalid values
uint8_t llama_unicode_flags(uint32_t cp);
// The simple lowercase mapping (cp itself when it has none).
uint32_t llama_unicode_tolower(uint32_t cp);
// The first code point of cp's canonical decomposition (NFD): the base letter of an accented one
// (U+00E9 -> 'e'), cp itself when it does not decompose. What llama.cpp's WordPiece tokenizer
// calls NFD normalization.
uint32_t llama_unicode_nfd_base(uint32_t cp);

// Decodes the character at text[i] (i < len) into *cp and returns its length in bytes (1..4).
// Overlong forms, surrogates, values past U+10FFFF and truncated sequences decode one byte at a
// time as LLAMA_UNICODE_INVALID_BASE + byte.
size_t llama_utf8_decode(const char * text, size_t len, size_t i, uint32_t * cp);
void   llama_utf8_append(std::string & out, uint32_t cp);  // cp must be a valid code point

// GPT-2's byte-level alphabet: every byte maps to a printable code point (printable Latin-1
// bytes to themselves, the others to U+0100 upwards in byte order).
uint32_t llama_byte_to_unicode(uint8_t byte);
int      llama_unicode_to_byte(uint32_t cp);  // -1 when cp is not in the alphabet

// The split rules of byte-level BPE models (tokenizer.ggml.pre):
//   GPT2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   LLAMA3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   QWEN2:  as LLAMA3 with \p{N} (one digit) in place of \p{N}{1,3}
//   SMOLLM: every \p{N} is a piece of its own; GPT2's rule splits the text between them
enum class llama_pretok { GPT2, LLAMA3, QWEN2, SMOLLM };

// Splits text into consecutive pieces that cover it; appends each piece's end offset (bytes) to
// ends, in order. Empty text gives no pieces.
void llama_pretokenize(llama_pretok kind, const char * text, size_t len, std::vector<size_t> & ends);
