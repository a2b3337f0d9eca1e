// llama-grammar.cpp - GBNF grammars: the parser (rules, alternatives, groups, literals, character
// classes, repetitions, comments), the matcher (a set of stacks of grammar positions advanced code
// point by code point, as a pushdown automaton that keeps every possibility), and the grammar
// sampler of llama.h with its lazy form.
#include "llama-grammar.h"
#include "llama-impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

namespace {

// ---- the parser ----------------------------------------------------------------------------

struct parse_error {
    size_t pos;
    std::string msg;
};

using alts_t = std::vector<std::vector<llama_gbnf_elem>>;

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Grammars larger than this (after repetitions are expanded) are refused.
constexpr size_t MAX_ELEMENTS = 1u << 21;
// What a rule made for an optional repetition counts against it besides its elements.
constexpr size_t RULE_COST = 30;

struct gbnf_parser {
    const std::string & src;
    size_t pos = 0;
    std::map<std::string, int32_t> ids;
    std::vector<std::string> names;
    std::vector<bool> defined;
    std::vector<size_t> first_ref;  // where a rule was first referenced (for "undefined rule")
    std::vector<alts_t> rules;
    size_t n_elems = 0;

    explicit gbnf_parser(const std::string & s) : src(s) {}

    char at(size_t p) const { return p < src.size() ? src[p] : '\0'; }
    bool at_end() const { return pos >= src.size(); }
    [[noreturn]] void fail(const std::string & msg) const { throw parse_error{pos, msg}; }
    [[noreturn]] void fail_at(size_t p, const std::string & msg) const { throw parse_error{p, msg}; }

    void count(size_t n) {
        n_elems += n;
        if (n_elems > MAX_ELEMENTS) fail("the grammar is too large (repetition counts too high)");
    }

    void skip_space(bool newline_ok) {
        while (!at_end()) {
            const char c = src[pos];
            if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
                pos++;
            } else if (c == '#') {
                while (!at_end() && src[pos] != '\r' && src[pos] != '\n') pos++;
            } else {
                break;
            }
        }
    }

    int32_t rule_id(const std::string & name) {
        auto it = ids.find(name);
        if (it != ids.end()) return it->second;
        const int32_t id = (int32_t) names.size();
        ids[name] = id;
        names.push_back(name);
        defined.push_back(false);
        first_ref.push_back(pos);
        rules.emplace_back();
        return id;
    }

    // A rule made for a group or a repetition inside the rule base.
    int32_t new_rule(const std::string & base) {
        std::string name;
        for (size_t n = names.size();; n++) {
            name = base + "_" + std::to_string(n);
            if (!ids.count(name)) break;
        }
        const int32_t id = rule_id(name);
        defined[id] = true;
        return id;
    }

    std::string parse_name() {
        const size_t start = pos;
        while (is_word_char(at(pos))) pos++;
        if (pos == start) fail("expecting a rule name");
        return src.substr(start, pos - start);
    }

    uint32_t parse_hex(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; i++) {
            const int h = hex_value(at(pos));
            if (h < 0) fail("expecting " + std::to_string(n) + " hex digits");
            v = (v << 4) | (uint32_t) h;
            pos++;
        }
        return v;
    }

    // One character of a literal or a class: an escape or a UTF-8 sequence.
    uint32_t parse_char() {
        if (at_end()) fail("unexpected end of input");
        const unsigned char c = (unsigned char) src[pos];
        if (c == '\\') {
            pos++;
            const char e = at(pos);
            if (at_end()) fail("unexpected end of input after '\\'");
            pos++;
            switch (e) {
                case 'x': return parse_hex(2);
                case 'u': return parse_hex(4);
                case 'U': return parse_hex(8);
                case 'n': return '\n';
                case 't': return '\t';
                case 'r': return '\r';
                case '\\': return '\\';
                case '"': return '"';
                case '[': return '[';
                case ']': return ']';
                default: pos--; fail(std::string("unknown escape '\\") + e + "'");
            }
        }
        int len = 1;
        uint32_t v = c;
        if (c >= 0xF0) { len = 4; v = c & 0x07; }
        else if (c >= 0xE0) { len = 3; v = c & 0x0F; }
        else if (c >= 0xC0) { len = 2; v = c & 0x1F; }
        pos++;
        for (int i = 1; i < len && !at_end() && ((unsigned char) src[pos] & 0xC0) == 0x80; i++) {
            v = (v << 6) | ((unsigned char) src[pos] & 0x3F);
            pos++;
        }
        return v;
    }

    uint32_t parse_int() {
        const size_t start = pos;
        uint64_t v = 0;
        while (at(pos) >= '0' && at(pos) <= '9') {
            v = v * 10 + (uint64_t) (at(pos) - '0');
            if (v > 1000000) fail_at(start, "repetition count too large");
            pos++;
        }
        if (pos == start) fail("expecting an integer");
        return (uint32_t) v;
    }

    // Replaces seq[start..] (the last item) by its repetition min..max times (max < 0: unbounded).
    void repeat(std::vector<llama_gbnf_elem> & seq, size_t start, uint32_t min, int64_t max, const std::string & base) {
        const std::vector<llama_gbnf_elem> item(seq.begin() + (ptrdiff_t) start, seq.end());
        seq.resize(start);
        count((size_t) min * item.size());
        for (uint32_t i = 0; i < min; i++) seq.insert(seq.end(), item.begin(), item.end());
        llama_gbnf_elem ref;
        ref.kind = llama_gbnf_elem::REF;
        if (max < 0) {
            // R ::= item R | (empty)
            const int32_t r = new_rule(base);
            std::vector<llama_gbnf_elem> alt = item;
            ref.rule = r;
            alt.push_back(ref);
            count(alt.size());
            rules[r] = {alt, {}};
            seq.push_back(ref);
        } else if ((int64_t) min < max) {
            // Nested optionals: R_k ::= item R_(k-1) | (empty). Each is a rule of its own, far
            // dearer than an element (a name, a map entry), so the budget is checked up front at
            // RULE_COST elements a rule: "a"{2,888884} is refused at once, not after 0.9 M rules.
            count((size_t) (max - (int64_t) min) * (item.size() + RULE_COST));
            int32_t prev = -1;
            for (int64_t k = 0; k < max - (int64_t) min; k++) {
                const int32_t r = new_rule(base);
                std::vector<llama_gbnf_elem> alt = item;
                if (prev >= 0) {
                    ref.rule = prev;
                    alt.push_back(ref);
                }
                rules[r] = {alt, {}};
                prev = r;
            }
            ref.rule = prev;
            seq.push_back(ref);
        }
    }

    std::vector<llama_gbnf_elem> parse_sequence(const std::string & rule, bool nested) {
        std::vector<llama_gbnf_elem> seq;
        size_t last = std::string::npos;  // where the last item starts in seq
        while (!at_end()) {
            const char c = src[pos];
            if (c == '"') {
                pos++;
                last = seq.size();
                while (at(pos) != '"') {
                    if (at_end()) fail("unterminated string literal");
                    llama_gbnf_elem e;
                    e.kind = llama_gbnf_elem::CHAR;
                    const uint32_t cp = parse_char();
                    e.ranges.push_back({cp, cp});
                    seq.push_back(e);
                    count(1);
                }
                pos++;
                skip_space(nested);
            } else if (c == '[') {
                pos++;
                llama_gbnf_elem e;
                e.kind = llama_gbnf_elem::CHAR;
                if (at(pos) == '^') {
                    e.negated = true;
                    pos++;
                }
                while (at(pos) != ']') {
                    if (at_end()) fail("unterminated character class");
                    const uint32_t lo = parse_char();
                    uint32_t hi = lo;
                    if (at(pos) == '-' && pos + 1 < src.size() && src[pos + 1] != ']') {
                        pos++;
                        hi = parse_char();
                    }
                    e.ranges.push_back({lo, hi});
                }
                pos++;
                last = seq.size();
                seq.push_back(e);
                count(1);
                skip_space(nested);
            } else if (is_word_char(c)) {
                const size_t at_ref = pos;
                const std::string name = parse_name();
                llama_gbnf_elem e;
                e.kind = llama_gbnf_elem::REF;
                e.rule = rule_id(name);
                if (!defined[e.rule] && first_ref[e.rule] > at_ref) first_ref[e.rule] = at_ref;
                last = seq.size();
                seq.push_back(e);
                count(1);
                skip_space(nested);
            } else if (c == '(') {
                pos++;
                skip_space(true);
                const int32_t r = new_rule(rule);
                alts_t alts = parse_alternates(rule, true);
                rules[r] = std::move(alts);
                if (at(pos) != ')') fail("expecting ')'");
                pos++;
                llama_gbnf_elem e;
                e.kind = llama_gbnf_elem::REF;
                e.rule = r;
                last = seq.size();
                seq.push_back(e);
                count(1);
                skip_space(nested);
            } else if (c == '.') {
                pos++;
                llama_gbnf_elem e;
                e.kind = llama_gbnf_elem::CHAR;
                e.negated = true;  // no range excluded: any code point
                last = seq.size();
                seq.push_back(e);
                count(1);
                skip_space(nested);
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (last == std::string::npos) fail(std::string("expecting an item before '") + c + "'");
                uint32_t min = 0;
                int64_t max = -1;
                pos++;
                if (c == '+') min = 1;
                if (c == '?') max = 1;
                if (c == '{') {
                    skip_space(nested);
                    min = parse_int();
                    skip_space(nested);
                    if (at(pos) == ',') {
                        pos++;
                        skip_space(nested);
                        if (at(pos) != '}') {
                            max = parse_int();
                            skip_space(nested);
                            if (max < (int64_t) min) fail("repetition maximum below its minimum");
                        }
                    } else {
                        max = min;
                    }
                    if (at(pos) != '}') fail("expecting '}'");
                    pos++;
                }
                repeat(seq, last, min, max, rule);
                if (last >= seq.size()) last = std::string::npos;
                skip_space(nested);
            } else {
                break;
            }
        }
        return seq;
    }

    alts_t parse_alternates(const std::string & rule, bool nested) {
        alts_t alts;
        alts.push_back(parse_sequence(rule, nested));
        while (at(pos) == '|') {
            pos++;
            skip_space(true);
            alts.push_back(parse_sequence(rule, nested));
        }
        return alts;
    }

    void parse_rule() {
        const std::string name = parse_name();
        const int32_t id = rule_id(name);
        skip_space(false);
        if (src.compare(pos, 3, "::=") != 0) fail("expecting '::='");
        pos += 3;
        skip_space(true);
        alts_t alts = parse_alternates(name, false);
        rules[id] = std::move(alts);
        defined[id] = true;
        if (at(pos) == '\r') pos++;
        if (at(pos) == '\n') {
            pos++;
        } else if (!at_end()) {
            fail(std::string("unexpected '") + src[pos] + "' (expecting a newline or the end)");
        }
    }

    void parse_all() {
        skip_space(true);
        while (!at_end()) {
            parse_rule();
            skip_space(true);
        }
    }
};

std::string where(const std::string & src, size_t pos) {
    pos = std::min(pos, src.size());
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos; i++) {
        if (src[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    std::string near = src.substr(pos, 20);
    const size_t nl = near.find_first_of("\r\n");
    if (nl != std::string::npos) near.resize(nl);
    return "line " + std::to_string(line) + ", column " + std::to_string(col) + (near.empty() ? " (at the end)" : " (at '" + near + "')");
}

// Rules that can derive the empty string.
std::vector<bool> nullable_rules(const std::vector<alts_t> & rules) {
    std::vector<bool> nullable(rules.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < rules.size(); r++) {
            if (nullable[r]) continue;
            for (const auto & alt : rules[r]) {
                bool all = true;
                for (const auto & e : alt) {
                    if (e.kind == llama_gbnf_elem::CHAR || (e.kind == llama_gbnf_elem::REF && !nullable[e.rule])) {
                        all = false;
                        break;
                    }
                }
                if (all) {
                    nullable[r] = changed = true;
                    break;
                }
            }
        }
    }
    return nullable;
}

// A rule that can reach itself without consuming a character (left recursion), or -1.
int32_t left_recursive_rule(const std::vector<alts_t> & rules) {
    const std::vector<bool> nullable = nullable_rules(rules);
    std::vector<std::vector<int32_t>> edges(rules.size());
    for (size_t r = 0; r < rules.size(); r++) {
        for (const auto & alt : rules[r]) {
            for (const auto & e : alt) {
                if (e.kind != llama_gbnf_elem::REF) break;
                edges[r].push_back(e.rule);
                if (!nullable[e.rule]) break;
            }
        }
    }
    // Iterative depth-first search for a cycle.
    std::vector<int> color(rules.size(), 0);  // 0 new, 1 on the path, 2 done
    for (size_t s = 0; s < rules.size(); s++) {
        if (color[s]) continue;
        std::vector<std::pair<int32_t, size_t>> path = {{(int32_t) s, 0}};
        color[s] = 1;
        while (!path.empty()) {
            auto & [r, i] = path.back();
            if (i < edges[r].size()) {
                const int32_t n = edges[r][i++];
                if (color[n] == 1) return n;
                if (color[n] == 0) {
                    color[n] = 1;
                    path.push_back({n, 0});
                }
            } else {
                color[r] = 2;
                path.pop_back();
            }
        }
    }
    return -1;
}

// ---- the matcher ---------------------------------------------------------------------------

using gstack = std::vector<const llama_gbnf_elem *>;

void add_unique(std::vector<gstack> & out, gstack && s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
}

// Expansions one advance may make: nested repetitions (("b" | "c")+++...) multiply the stacks by
// two per level, so a grammar a user wrote by mistake would otherwise hang the matcher. The
// parser refuses a grammar whose start already needs more (llama_gbnf_parse).
constexpr int64_t kMaxExpansions = 1 << 12;

// Expands the references on top of the stack until each resulting stack has a character class on
// top or is empty (the grammar complete). False when budget (expansions left) ran out.
bool advance(const llama_gbnf_grammar & g, gstack && st, std::vector<gstack> & out, int64_t & budget) {
    if (--budget < 0) return false;
    if (st.empty() || st.back()->kind == llama_gbnf_elem::CHAR) {
        add_unique(out, std::move(st));
        return true;
    }
    const llama_gbnf_elem * top = st.back();
    for (const auto & alt : g.rules[top->rule]) {
        gstack ns(st.begin(), st.end() - 1);
        if (top[1].kind != llama_gbnf_elem::END) ns.push_back(top + 1);
        if (alt[0].kind != llama_gbnf_elem::END) ns.push_back(&alt[0]);
        if (!advance(g, std::move(ns), out, budget)) return false;
    }
    return true;
}

// The stacks after the character on top of st has been matched.
bool advance_past_top(const llama_gbnf_grammar & g, const gstack & st, std::vector<gstack> & out, int64_t & budget) {
    const llama_gbnf_elem * top = st.back();
    gstack ns(st.begin(), st.end() - 1);
    if (top[1].kind != llama_gbnf_elem::END) ns.push_back(top + 1);
    return advance(g, std::move(ns), out, budget);
}

bool match_char(const llama_gbnf_elem & e, uint32_t cp) {
    bool in = false;
    for (const auto & r : e.ranges) {
        if (cp >= r.first && cp <= r.second) {
            in = true;
            break;
        }
    }
    return in != e.negated;
}

// Whether an unfinished UTF-8 sequence (value so far, bytes still to come) can complete to a code
// point the class takes.
bool match_partial(const llama_gbnf_elem & e, uint32_t value, int remain) {
    if (remain < 0 || (remain == 1 && value < 2)) return false;  // invalid, or an overlong 2-byte form
    uint32_t low = value << (6 * remain);
    const uint32_t high = low | ((1u << (6 * remain)) - 1);
    if (low == 0) low = remain == 2 ? 0x800 : remain == 3 ? 0x10000 : low;  // overlong forms
    // As llama.cpp: a negated class refuses the sequence when an excluded range meets the possible
    // code points at all (it may still complete to one the class takes).
    for (const auto & r : e.ranges) {
        if (r.first <= high && r.second >= low) return !e.negated;
    }
    return e.negated;
}

// Decodes UTF-8 bytes, continuing an unfinished sequence; false on an invalid byte.
bool decode_utf8(const char * s, size_t n, uint32_t & value, int & remain, std::vector<uint32_t> & out) {
    static const int len_of[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    if (remain < 0) remain = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char b = (unsigned char) s[i];
        if (remain > 0) {
            if ((b & 0xC0) != 0x80) {
                remain = -1;
                return false;
            }
            value = (value << 6) | (b & 0x3F);
            if (--remain == 0) out.push_back(value);
            continue;
        }
        const int len = len_of[b >> 4];
        if (len == 0) {
            remain = -1;
            return false;
        }
        value = b & ((1u << (8 - len)) - 1);
        if (len == 1) value = b;
        remain = len - 1;
        if (remain == 0) out.push_back(value);
    }
    return true;
}

struct candidate {
    size_t index;
    const uint32_t * p;
    const uint32_t * end;
    uint32_t pvalue;
    int premain;
};

std::vector<candidate> reject_stacks(const llama_gbnf_grammar & g, const std::vector<gstack> & stacks, const std::vector<candidate> & cands);

// The candidates that cannot continue from this one stack.
std::vector<candidate> reject_stack(const llama_gbnf_grammar & g, const gstack & st, const std::vector<candidate> & cands) {
    std::vector<candidate> rejected;
    if (st.empty()) {
        for (const candidate & c : cands) {
            if (c.p != c.end || c.premain != 0) rejected.push_back(c);
        }
        return rejected;
    }
    const llama_gbnf_elem & top = *st.back();
    std::vector<candidate> next;
    for (const candidate & c : cands) {
        if (c.p == c.end) {
            if (c.premain != 0 && !match_partial(top, c.pvalue, c.premain)) rejected.push_back(c);
        } else if (match_char(top, *c.p)) {
            candidate n = c;
            n.p++;
            next.push_back(n);
        } else {
            rejected.push_back(c);
        }
    }
    if (next.empty()) return rejected;
    std::vector<gstack> after;
    int64_t budget = kMaxExpansions;
    if (!advance_past_top(g, st, after, budget)) {  // too many alternatives: refused (the parser's check makes this rare)
        for (candidate c : next) {
            c.p--;
            rejected.push_back(c);
        }
        return rejected;
    }
    // The candidates refused further on, back at this position (the next stack tries them again).
    for (candidate c : reject_stacks(g, after, next)) {
        c.p--;
        rejected.push_back(c);
    }
    return rejected;
}

std::vector<candidate> reject_stacks(const llama_gbnf_grammar & g, const std::vector<gstack> & stacks, const std::vector<candidate> & cands) {
    std::vector<candidate> rejected = cands;
    for (const gstack & st : stacks) {
        if (rejected.empty()) break;
        rejected = reject_stack(g, st, rejected);
    }
    return rejected;
}

}  // namespace

std::shared_ptr<const llama_gbnf_grammar> llama_gbnf_parse(const std::string & text, const std::string & root, std::string * err) {
    gbnf_parser p(text);
    try {
        p.parse_all();
        for (size_t r = 0; r < p.names.size(); r++) {
            if (!p.defined[r]) p.fail_at(p.first_ref[r], "undefined rule '" + p.names[r] + "'");
        }
        if (p.names.empty()) throw parse_error{0, "the grammar has no rules"};
        if (!p.ids.count(root)) throw parse_error{std::string::npos, "the grammar has no rule '" + root + "' to start from"};
        const int32_t lr = left_recursive_rule(p.rules);
        if (lr >= 0) throw parse_error{p.first_ref[lr], "left recursion in rule '" + p.names[lr] + "' (not supported)"};
    } catch (const parse_error & e) {
        if (err) *err = e.pos == std::string::npos ? e.msg : where(text, e.pos) + ": " + e.msg;
        return nullptr;
    }
    auto g = std::make_shared<llama_gbnf_grammar>();
    g->rules = std::move(p.rules);
    for (auto & alts : g->rules) {
        for (auto & alt : alts) {
            alt.emplace_back();  // END
            alt.shrink_to_fit();
        }
    }
    g->names = std::move(p.names);
    g->root = p.ids[root];
    int64_t budget = kMaxExpansions;
    for (const auto & alt : g->rules[g->root]) {
        gstack s;
        if (alt[0].kind != llama_gbnf_elem::END) s.push_back(&alt[0]);
        std::vector<gstack> stacks;
        if (!advance(*g, std::move(s), stacks, budget)) {
            if (err) *err = "the grammar expands to more than " + std::to_string(kMaxExpansions) +
                            " alternatives at its start (nested repetitions such as x++?)";
            return nullptr;
        }
    }
    return g;
}

llama_gbnf_state llama_gbnf_start(const llama_gbnf_grammar & g) {
    llama_gbnf_state st;
    st.grammar = &g;
    for (const auto & alt : g.rules[g.root]) {
        gstack s;
        if (alt[0].kind != llama_gbnf_elem::END) s.push_back(&alt[0]);
        int64_t budget = kMaxExpansions;
        advance(g, std::move(s), st.stacks, budget);  // (within the budget: llama_gbnf_parse checked)
    }
    return st;
}

bool llama_gbnf_accept_text(llama_gbnf_state & st, const std::string & text) {
    std::vector<uint32_t> cps;
    uint32_t value = st.partial_value;
    int remain = st.partial_remain;
    if (!decode_utf8(text.data(), text.size(), value, remain, cps)) return false;
    std::vector<gstack> stacks = st.stacks;
    for (uint32_t cp : cps) {
        std::vector<gstack> next;
        int64_t budget = kMaxExpansions;  // (for all the stacks of this character)
        for (const gstack & s : stacks) {
            if (!s.empty() && match_char(*s.back(), cp) && !advance_past_top(*st.grammar, s, next, budget)) return false;
        }
        if (next.empty()) return false;
        stacks = std::move(next);
    }
    st.stacks = std::move(stacks);
    st.partial_value = value;
    st.partial_remain = remain;
    return true;
}

bool llama_gbnf_can_end(const llama_gbnf_state & st) {
    for (const auto & s : st.stacks) {
        if (s.empty()) return true;
    }
    return false;
}

int llama_gbnf_match(const std::string & grammar, const std::string & root, const std::string & text, std::string * err) {
    auto g = llama_gbnf_parse(grammar, root, err);
    if (!g) return -1;
    llama_gbnf_state st = llama_gbnf_start(*g);
    if (!llama_gbnf_accept_text(st, text)) return 0;
    return st.partial_remain == 0 && llama_gbnf_can_end(st) ? 1 : 0;
}

// ---- the sampler ---------------------------------------------------------------------------

namespace {

// The vocabulary's token texts (special tokens by their text, as llama.cpp's grammar sees them)
// and end-of-generation flags, shared by a sampler's clones.
struct vocab_pieces {
    std::vector<std::string> piece;
    std::vector<bool> eog;
};

std::shared_ptr<const vocab_pieces> make_pieces(const llama_vocab * vocab) {
    auto v = std::make_shared<vocab_pieces>();
    const int32_t n = llama_vocab_n_tokens(vocab);
    v->piece.resize((size_t) n);
    v->eog.resize((size_t) n);
    std::vector<char> buf(64);
    for (llama_token t = 0; t < n; t++) {
        int32_t k = llama_token_to_piece(vocab, t, buf.data(), (int32_t) buf.size(), 0, true);
        if (k < 0) {
            buf.resize((size_t) -k);
            k = llama_token_to_piece(vocab, t, buf.data(), (int32_t) buf.size(), 0, true);
        }
        v->piece[(size_t) t].assign(buf.data(), (size_t) std::max(k, 0));
        if (llama_vocab_get_attr(vocab, t) & LLAMA_TOKEN_ATTR_UNKNOWN) {
            const char * text = llama_vocab_get_text(vocab, t);  // "<unk>", as llama.cpp's grammar sees it
            if (text) v->piece[(size_t) t] = text;
        }
        v->eog[(size_t) t] = llama_vocab_is_eog(vocab, t);
    }
    return v;
}

struct grammar_sampler {
    std::shared_ptr<const llama_gbnf_grammar> grammar;  // null: the sampler does nothing
    std::shared_ptr<const vocab_pieces> vocab;
    llama_gbnf_state state;
    bool lazy = false;
    bool awaiting = false;
    std::vector<std::string> trigger_words;
    std::vector<llama_token> trigger_tokens;
    std::string trigger_buffer;

    void start() {
        if (grammar) state = llama_gbnf_start(*grammar);
        awaiting = lazy;
        trigger_buffer.clear();
    }

    const std::string & piece(llama_token t) const {
        static const std::string none;
        return t >= 0 && (size_t) t < vocab->piece.size() ? vocab->piece[(size_t) t] : none;
    }

    bool is_eog(llama_token t) const { return t >= 0 && (size_t) t < vocab->eog.size() && vocab->eog[(size_t) t]; }

    void accept_text(const std::string & text) {
        if (!llama_gbnf_accept_text(state, text)) {
            LLAMA_LOG_WARN("grammar sampler: the text '%s' does not fit the grammar; ignored\n", text.c_str());
        }
    }

    void accept(llama_token t) {
        if (!grammar) return;
        const std::string & p = piece(t);
        if (awaiting) {
            if (std::find(trigger_tokens.begin(), trigger_tokens.end(), t) != trigger_tokens.end()) {
                awaiting = false;
                trigger_buffer.clear();
                accept_text(p);
                return;
            }
            trigger_buffer += p;
            for (const std::string & w : trigger_words) {
                const size_t at = trigger_buffer.find(w);
                if (at != std::string::npos) {
                    awaiting = false;
                    const std::string rest = trigger_buffer.substr(at);
                    trigger_buffer.clear();
                    accept_text(rest);
                    return;
                }
            }
            return;
        }
        if (is_eog(t)) return;
        accept_text(p);
    }

    void apply(llama_token_data_array & cur) {
        if (!grammar || awaiting) return;
        const bool allow_eog = llama_gbnf_can_end(state);
        std::vector<std::vector<uint32_t>> decoded(cur.size);
        std::vector<candidate> cands;
        cands.reserve(cur.size);
        for (size_t i = 0; i < cur.size; i++) {
            llama_token_data & d = cur.data[i];
            if (std::isinf(d.logit) && d.logit < 0) continue;
            if (is_eog(d.id)) {
                if (!allow_eog) d.logit = -INFINITY;
                continue;
            }
            const std::string & p = piece(d.id);
            uint32_t value = state.partial_value;
            int remain = state.partial_remain;
            if (p.empty() || p[0] == '\0' || !decode_utf8(p.data(), p.size(), value, remain, decoded[i])) {
                d.logit = -INFINITY;
                continue;
            }
            cands.push_back({i, decoded[i].data(), decoded[i].data() + decoded[i].size(), value, remain});
        }
        for (const candidate & c : reject_stacks(*grammar, state.stacks, cands)) cur.data[c.index].logit = -INFINITY;
    }
};

grammar_sampler * gs(const llama_sampler * smpl) { return static_cast<grammar_sampler *>(smpl->ctx); }

const char * gs_name(const llama_sampler *) { return "grammar"; }
void gs_accept(llama_sampler * smpl, llama_token t) { gs(smpl)->accept(t); }
void gs_apply(llama_sampler * smpl, llama_token_data_array * cur) { gs(smpl)->apply(*cur); }
void gs_reset(llama_sampler * smpl) { gs(smpl)->start(); }
llama_sampler * gs_clone(const llama_sampler * smpl);
void gs_free(llama_sampler * smpl) { delete gs(smpl); }

const llama_sampler_i grammar_iface = {gs_name, gs_accept, gs_apply, gs_reset, gs_clone, gs_free};

llama_sampler * gs_clone(const llama_sampler * smpl) {
    auto * c = new grammar_sampler(*gs(smpl));
    if (c->grammar) c->state.grammar = c->grammar.get();
    return llama_sampler_init(&grammar_iface, c);
}

llama_sampler * init_grammar(const char * func, const llama_vocab * vocab, const char * grammar_str, const char * grammar_root, bool lazy,
                             const char ** trigger_words, size_t n_words, const llama_token * trigger_tokens, size_t n_tokens) {
    auto * s = new grammar_sampler();
    if (grammar_str && grammar_str[0]) {
        if (!vocab) {
            LLAMA_LOG_ERROR("%s: no vocabulary\n", func);
            delete s;
            return nullptr;
        }
        std::string err;
        s->grammar = llama_gbnf_parse(grammar_str, grammar_root ? grammar_root : "root", &err);
        if (!s->grammar) {
            LLAMA_LOG_ERROR("%s: the grammar does not parse: %s\n", func, err.c_str());
            delete s;
            return nullptr;
        }
        s->vocab = make_pieces(vocab);
        s->lazy = lazy;
        for (size_t i = 0; i < n_words && trigger_words; i++) {
            if (trigger_words[i]) s->trigger_words.emplace_back(trigger_words[i]);
        }
        if (trigger_tokens) s->trigger_tokens.assign(trigger_tokens, trigger_tokens + n_tokens);
        s->start();
    }
    return llama_sampler_init(&grammar_iface, s);
}

}  // namespace

struct llama_sampler * llama_sampler_init_grammar(const struct llama_vocab * vocab, const char * grammar_str, const char * grammar_root) {
    return init_grammar("llama_sampler_init_grammar", vocab, grammar_str, grammar_root, false, nullptr, 0, nullptr, 0);
}

struct llama_sampler * llama_sampler_init_grammar_lazy(const struct llama_vocab * vocab, const char * grammar_str, const char * grammar_root,
                                                       const char ** trigger_words, size_t num_trigger_words,
                                                       const llama_token * trigger_tokens, size_t num_trigger_tokens) {
    return init_grammar("llama_sampler_init_grammar_lazy", vocab, grammar_str, grammar_root, true, trigger_words, num_trigger_words,
                        trigger_tokens, num_trigger_tokens);
}
