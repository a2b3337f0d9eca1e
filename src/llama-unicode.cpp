// llama-unicode.cpp - category lookup, UTF-8 decoding, GPT-2's byte alphabet, and the
// pre-tokenizer splitters. Each splitter is the regex of its model written out as code: at each
// position the alternatives are tried in the regex's order, each with the regex's greedy and
// backtracking behaviour, so the pieces are exactly what the regex engine would find.
#include "llama-unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

// ---- categories ----------------------------------------------------------------------------
static enum llama_unicode_category category_by_search(uint32_t cp) {
    // The last run whose first code point is <= cp.
    const uint32_t * begin = llama_unicode_category_runs;
    const uint32_t * end   = begin + llama_unicode_category_runs_n;
    const uint32_t * it = std::upper_bound(begin, end, cp, [](uint32_t c, uint32_t run) { return c < (run >> 5); });
    return (enum llama_unicode_category) (it[-1] & 31);
}

static bool is_white_space(uint32_t cp) {
    // Unicode's White_Space property (PropList.txt), which is what \s matches.
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    switch (cp) {
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

static uint8_t flags_of_category(enum llama_unicode_category cat) {
    if (cat <= LLAMA_UCAT_LO) return LLAMA_UFLAG_LETTER;
    if (cat >= LLAMA_UCAT_ND && cat <= LLAMA_UCAT_NO) return LLAMA_UFLAG_NUMBER;
    return 0;
}

// Flags and categories of the Basic Multilingual Plane, expanded once from the runs.
struct bmp_tables {
    std::array<uint8_t, 0x10000> category;
    std::array<uint8_t, 0x10000> flags;
    bmp_tables() {
        for (uint32_t cp = 0; cp < 0x10000; cp++) {
            category[cp] = (uint8_t) category_by_search(cp);
            flags[cp] = (uint8_t) (flags_of_category((enum llama_unicode_category) category[cp]) |
                                   (is_white_space(cp) ? LLAMA_UFLAG_SPACE : 0));
        }
    }
};

static const bmp_tables & bmp() {
    static const bmp_tables tables;
    return tables;
}

enum llama_unicode_category llama_unicode_category_of(uint32_t cp) {
    if (cp < 0x10000) return (enum llama_unicode_category) bmp().category[cp];
    if (cp >= 0x110000) return LLAMA_UCAT_CN;
    return category_by_search(cp);
}

uint8_t llama_unicode_flags(uint32_t cp) {
    if (cp < 0x10000) return bmp().flags[cp];
    if (cp >= 0x110000) return 0;
    return flags_of_category(category_by_search(cp));  // no White_Space beyond the BMP
}

uint32_t llama_unicode_tolower(uint32_t cp) {
    const uint32_t (*end)[2] = llama_unicode_lowercase + llama_unicode_lowercase_n;
    const uint32_t (*it)[2] = std::lower_bound(llama_unicode_lowercase, end, cp,
                                               [](const uint32_t (&e)[2], uint32_t c) { return e[0] < c; });
    return it != end && (*it)[0] == cp ? (*it)[1] : cp;
}

uint32_t llama_unicode_nfd_base(uint32_t cp) {
    const uint32_t (*end)[3] = llama_unicode_nfd_ranges + llama_unicode_nfd_ranges_n;
    // The first range whose last code point is at or after cp.
    const uint32_t (*it)[3] = std::lower_bound(llama_unicode_nfd_ranges, end, cp,
                                               [](const uint32_t (&e)[3], uint32_t c) { return e[1] < c; });
    return it != end && (*it)[0] <= cp ? (*it)[2] : cp;
}

// ---- UTF-8 ---------------------------------------------------------------------------------
size_t llama_utf8_decode(const char * text, size_t len, size_t i, uint32_t * cp) {
    const unsigned char * s = (const unsigned char *) text + i;
    const size_t avail = len - i;
    const unsigned c0 = s[0];
    if (c0 < 0x80) { *cp = c0; return 1; }
    // Length and the allowed range of the second byte (which excludes overlong forms, surrogates
    // and values past U+10FFFF); the remaining bytes are plain continuation bytes.
    size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c0 >= 0xC2 && c0 <= 0xDF) n = 2;
    else if (c0 >= 0xE0 && c0 <= 0xEF) { n = 3; if (c0 == 0xE0) lo = 0xA0; if (c0 == 0xED) hi = 0x9F; }
    else if (c0 >= 0xF0 && c0 <= 0xF4) { n = 4; if (c0 == 0xF0) lo = 0x90; if (c0 == 0xF4) hi = 0x8F; }
    bool ok = n != 0 && avail >= n && s[1] >= lo && s[1] <= hi;
    for (size_t k = 2; ok && k < n; k++) ok = (s[k] & 0xC0) == 0x80;
    if (!ok) { *cp = LLAMA_UNICODE_INVALID_BASE + c0; return 1; }
    uint32_t v = c0 & (0x7F >> n);
    for (size_t k = 1; k < n; k++) v = (v << 6) | (s[k] & 0x3F);
    *cp = v;
    return n;
}

void llama_utf8_append(std::string & out, uint32_t cp) {
    if (cp < 0x80) {
        out += (char) cp;
    } else if (cp < 0x800) {
        out += (char) (0xC0 | (cp >> 6));
        out += (char) (0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += (char) (0xE0 | (cp >> 12));
        out += (char) (0x80 | ((cp >> 6) & 0x3F));
        out += (char) (0x80 | (cp & 0x3F));
    } else {
        out += (char) (0xF0 | (cp >> 18));
        out += (char) (0x80 | ((cp >> 12) & 0x3F));
        out += (char) (0x80 | ((cp >> 6) & 0x3F));
        out += (char) (0x80 | (cp & 0x3F));
    }
}

// ---- GPT-2 byte alphabet -------------------------------------------------------------------
static bool byte_maps_to_itself(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

struct byte_alphabet {
    uint32_t to_cp[256];
    int16_t  to_byte[0x100 + 256];
    byte_alphabet() {
        std::fill(std::begin(to_byte), std::end(to_byte), (int16_t) -1);
        uint32_t next = 0x100;
        for (unsigned b = 0; b < 256; b++) {
            to_cp[b] = byte_maps_to_itself(b) ? b : next++;
            to_byte[to_cp[b]] = (int16_t) b;
        }
    }
};

static const byte_alphabet & alphabet() {
    static const byte_alphabet a;
    return a;
}

uint32_t llama_byte_to_unicode(uint8_t byte) { return alphabet().to_cp[byte]; }

int llama_unicode_to_byte(uint32_t cp) {
    return cp < 0x200 ? alphabet().to_byte[cp] : -1;
}

// ---- pre-tokenizers ------------------------------------------------------------------------
namespace {

// The text as code points with their flags; offset[i] is where code point i starts (offset[n]
// is the text's length).
struct code_points {
    std::vector<uint32_t> cp;
    std::vector<uint8_t>  flags;
    std::vector<size_t>   offset;

    void decode(const char * text, size_t len) {
        cp.clear(); flags.clear(); offset.clear();
        cp.reserve(len); flags.reserve(len); offset.reserve(len + 1);
        for (size_t i = 0; i < len;) {
            uint32_t c;
            const size_t n = llama_utf8_decode(text, len, i, &c);
            cp.push_back(c);
            flags.push_back(llama_unicode_flags(c));
            offset.push_back(i);
            i += n;
        }
        offset.push_back(len);
    }
};

bool is_other(uint8_t f) { return f == 0; }  // [^\s\p{L}\p{N}]

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// Length of 's|'t|'re|'ve|'m|'ll|'d at i (0: none). Case-insensitive matching also accepts
// U+017F LATIN SMALL LETTER LONG S for 's', as Unicode case folding does.
size_t match_contraction(const code_points & t, size_t i, size_t end, bool ignore_case) {
    if (t.cp[i] != '\'' || i + 1 >= end) return 0;
    auto lower = [&](uint32_t c) { return ignore_case ? (c == 0x17F ? 's' : ascii_lower(c)) : c; };
    const uint32_t c1 = lower(t.cp[i + 1]);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (i + 2 >= end) return 0;
    const uint32_t c2 = lower(t.cp[i + 2]);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

size_t run_of(const code_points & t, size_t j, size_t end, uint8_t flag) {
    while (j < end && (t.flags[j] & flag)) j++;
    return j;
}

size_t run_of_other(const code_points & t, size_t j, size_t end) {
    while (j < end && is_other(t.flags[j])) j++;
    return j;
}

// \s+(?!\S)|\s+ at i, where t.cp[i] is white space: the run, less its last character when that
// is followed by a non-space and the run is longer than one.
size_t match_trailing_space(const code_points & t, size_t i, size_t end) {
    const size_t e = run_of(t, i, end, LLAMA_UFLAG_SPACE);
    if (e < end && e - i >= 2) return e - 1;
    return e;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const code_points & t, size_t i, size_t end) {
    if (size_t n = match_contraction(t, i, end, false)) return i + n;
    // The optional space belongs to the piece when the class follows it.
    const size_t j = (t.cp[i] == ' ' && i + 1 < end) ? i + 1 : i;
    const uint8_t f = t.flags[j];
    if (f & LLAMA_UFLAG_LETTER) return run_of(t, j, end, LLAMA_UFLAG_LETTER);
    if (t.flags[i] & LLAMA_UFLAG_LETTER) return run_of(t, i, end, LLAMA_UFLAG_LETTER);
    if (f & LLAMA_UFLAG_NUMBER) return run_of(t, j, end, LLAMA_UFLAG_NUMBER);
    if (t.flags[i] & LLAMA_UFLAG_NUMBER) return run_of(t, i, end, LLAMA_UFLAG_NUMBER);
    if (is_other(f)) return run_of_other(t, j, end);
    if (is_other(t.flags[i])) return run_of_other(t, i, end);
    return match_trailing_space(t, i, end);
}

// Llama 3 (digits = 3) and Qwen2 (digits = 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_llama3(const code_points & t, size_t i, size_t end, size_t digits) {
    if (size_t n = match_contraction(t, i, end, true)) return i + n;
    const uint32_t c = t.cp[i];
    const uint8_t  f = t.flags[i];
    if (f & LLAMA_UFLAG_LETTER) return run_of(t, i, end, LLAMA_UFLAG_LETTER);
    // One character that is no letter, number, CR or LF may lead a run of letters.
    if (!(f & LLAMA_UFLAG_NUMBER) && c != '\r' && c != '\n' && i + 1 < end && (t.flags[i + 1] & LLAMA_UFLAG_LETTER)) {
        return run_of(t, i + 1, end, LLAMA_UFLAG_LETTER);
    }
    if (f & LLAMA_UFLAG_NUMBER) {
        size_t j = i;
        while (j < end && j - i < digits && (t.flags[j] & LLAMA_UFLAG_NUMBER)) j++;
        return j;
    }
    const size_t j = (c == ' ' && i + 1 < end && is_other(t.flags[i + 1])) ? i + 1 : i;
    if (is_other(t.flags[j])) {
        size_t e = run_of_other(t, j, end);
        while (e < end && (t.cp[e] == '\r' || t.cp[e] == '\n')) e++;
        return e;
    }
    // Here c is white space. \s*[\r\n]+ ends at the last CR or LF of the white-space run.
    const size_t e = run_of(t, i, end, LLAMA_UFLAG_SPACE);
    for (size_t k = e; k > i; k--) {
        if (t.cp[k - 1] == '\r' || t.cp[k - 1] == '\n') return k;
    }
    return match_trailing_space(t, i, end);
}

template <typename Match>
void split_range(const code_points & t, size_t begin, size_t end, std::vector<size_t> & ends, Match match) {
    for (size_t i = begin; i < end;) {
        const size_t e = match(i, end);
        ends.push_back(t.offset[e]);
        i = e;
    }
}

}  // namespace

void llama_pretokenize(llama_pretok kind, const char * text, size_t len, std::vector<size_t> & ends) {
    code_points t;
    t.decode(text, len);
    const size_t n = t.cp.size();
    switch (kind) {
        case llama_pretok::GPT2:
            split_range(t, 0, n, ends, [&](size_t i, size_t end) { return match_gpt2(t, i, end); });
            break;
        case llama_pretok::LLAMA3:
            split_range(t, 0, n, ends, [&](size_t i, size_t end) { return match_llama3(t, i, end, 3); });
            break;
        case llama_pretok::QWEN2:
            split_range(t, 0, n, ends, [&](size_t i, size_t end) { return match_llama3(t, i, end, 1); });
            break;
        case llama_pretok::SMOLLM:
            // Digits first (each one a piece), then GPT-2's rule on each stretch between them:
            // a stretch's end is the end of the text for its lookahead.
            for (size_t i = 0; i < n;) {
                if (t.flags[i] & LLAMA_UFLAG_NUMBER) {
                    ends.push_back(t.offset[++i]);
                    continue;
                }
                size_t e = i;
                while (e < n && !(t.flags[e] & LLAMA_UFLAG_NUMBER)) e++;
                split_range(t, i, e, ends, [&](size_t k, size_t end) { return match_gpt2(t, k, end); });
                i = e;
            }
            break;
    }
}
