// finetune-data.cpp - documents to sequences (see finetune-data.h). Chat examples are formatted
// with the model's chat template one turn at a time: the text each assistant turn adds (its
// content and the template's end-of-turn marker) counts for the loss, the rest is context.
#include "finetune-data.h"

#include "llama-json.h"

#include <fstream>
#include <sys/stat.h>
#include <sstream>

int64_t ft_sequence::n_targets() const {
    int64_t n = 0;
    for (size_t i = 1; i < counts.size(); i++) n += counts[i];
    return n;
}

uint64_t ft_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

std::vector<int64_t> ft_shuffled_order(int64_t n, uint64_t seed) {
    std::vector<int64_t> order((size_t) n);
    for (int64_t i = 0; i < n; i++) order[(size_t) i] = i;
    uint64_t s = seed;
    for (int64_t i = n - 1; i > 0; i--) {
        s = ft_mix(s);
        const int64_t j = (int64_t) (s % (uint64_t) (i + 1));
        std::swap(order[(size_t) i], order[(size_t) j]);
    }
    return order;
}

namespace {

// A document: tokens and, per token, whether it counts as a target.
struct document {
    std::vector<llama_token> tokens;
    std::vector<uint8_t> counts;

    // Appends the tokens of text (with BOS first when add_special and the model adds one).
    // parse_special: template markers like <|im_start|> become their special tokens.
    bool add(const llama_vocab * vocab, const std::string & text, bool add_special, bool count, std::string & err,
             bool parse_special = true) {
        if (text.empty()) return true;
        if (text.size() > (size_t) INT32_MAX / 2) {
            err = "text too long";
            return false;
        }
        std::vector<llama_token> t(text.size() + 8);
        int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), t.data(), (int32_t) t.size(), add_special, parse_special);
        if (n < 0) {
            t.resize((size_t) -n);
            n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), t.data(), (int32_t) t.size(), add_special,
                               parse_special);
        }
        if (n < 0) {
            err = "tokenization failed";
            return false;
        }
        tokens.insert(tokens.end(), t.begin(), t.begin() + n);
        counts.insert(counts.end(), (size_t) n, count ? 1 : 0);
        return true;
    }
};

void cut(const document & d, int32_t n_ctx, std::vector<ft_sequence> & out) {
    const size_t n = d.tokens.size();
    if (n < 2) return;
    size_t s = 0;
    while (s + 1 < n) {
        const size_t e = std::min(n, s + (size_t) n_ctx);
        ft_sequence q;
        q.tokens.assign(d.tokens.begin() + (long) s, d.tokens.begin() + (long) e);
        q.counts.assign(d.counts.begin() + (long) s, d.counts.begin() + (long) e);
        q.counts[0] = 0;
        if (q.n_targets() > 0) out.push_back(std::move(q));
        s = e - 1;
    }
}

std::string apply_template(const char * tmpl, const std::vector<llama_chat_message> & msgs, bool add_ass) {
    const int32_t n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), add_ass, nullptr, 0);
    if (n < 0) return std::string();
    std::string s((size_t) n + 1, '\0');
    llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), add_ass, &s[0], n + 1);
    s.resize((size_t) n);
    return s;
}

// One JSONL example: {"messages": [...]} or {"prompt": ..., "completion": ...}.
bool jsonl_document(const llama_model * model, const json_value & j, document & d, std::string & err, bool & chatml) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    if (!j.is_object()) {
        err = "not a JSON object";
        return false;
    }
    if (const json_value * m = j.get("messages")) {
        if (!m->is_array() || m->arr.empty()) {
            err = "\"messages\" is not a non-empty array";
            return false;
        }
        std::vector<std::string> roles, contents;
        for (const json_value & msg : m->arr) {
            const json_value * r = msg.get("role");
            const json_value * c = msg.get("content");
            if (!r || !r->is_string() || !c || !c->is_string()) {
                err = "a message lacks a string \"role\" or \"content\"";
                return false;
            }
            roles.push_back(r->str);
            contents.push_back(c->str);
        }
        std::vector<llama_chat_message> msgs;
        for (size_t i = 0; i < roles.size(); i++) msgs.push_back({roles[i].c_str(), contents[i].c_str()});
        const char * tmpl = llama_model_chat_template(model, nullptr);
        if (!tmpl || llama_chat_apply_template(tmpl, nullptr, 0, false, nullptr, 0) < 0) {  // none, or not a built-in format
            tmpl = "chatml";
            chatml = true;
        }
        // The formatted text grows turn by turn; each piece is tokenized on its own, so the
        // counted tokens are exactly those of the assistant pieces.
        std::string done;
        bool any_assistant = false;
        for (size_t i = 0; i < msgs.size(); i++) {
            const bool assistant = roles[i] == "assistant";
            std::vector<llama_chat_message> upto(msgs.begin(), msgs.begin() + (long) i + 1);
            if (assistant) {
                std::vector<llama_chat_message> before(msgs.begin(), msgs.begin() + (long) i);
                const std::string prompt = apply_template(tmpl, before, true);
                if (prompt.size() < done.size() || prompt.compare(0, done.size(), done) != 0) {
                    err = "the chat template does not format the conversation incrementally";
                    return false;
                }
                if (!d.add(vocab, prompt.substr(done.size()), done.empty(), false, err)) return false;
                done = prompt;
                any_assistant = true;
            }
            const std::string text = apply_template(tmpl, upto, false);
            if (text.size() < done.size() || text.compare(0, done.size(), done) != 0) {
                err = "the chat template does not format the conversation incrementally";
                return false;
            }
            if (!d.add(vocab, text.substr(done.size()), done.empty(), assistant, err)) return false;
            done = text;
        }
        if (!any_assistant) {
            err = "no assistant message (nothing to learn)";
            return false;
        }
        return true;
    }
    const json_value * p = j.get("prompt");
    const json_value * c = j.get("completion");
    if (!p || !p->is_string() || !c || !c->is_string()) {
        err = "neither \"messages\" nor string \"prompt\" and \"completion\"";
        return false;
    }
    if (!d.add(vocab, p->str, true, false, err) || !d.add(vocab, c->str, d.tokens.empty(), true, err)) return false;
    // The model learns to stop after the completion (as TRL's SFT appends EOS).
    const llama_token eos = llama_vocab_eos(vocab);
    if (eos != LLAMA_TOKEN_NULL) {
        d.tokens.push_back(eos);
        d.counts.push_back(1);
    }
    return true;
}

}  // namespace

bool ft_load_data(const llama_model * model, const std::string & path, ft_data_format format, int32_t n_ctx,
                  std::vector<ft_sequence> & out, std::string & err, bool * chatml_fallback) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        err = "data file '" + path + "' is a directory (give a text or JSONL file)";
        return false;
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        err = "cannot open data file '" + path + "'";
        return false;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) {
        err = "cannot read data file '" + path + "'";
        return false;
    }
    return ft_parse_data(model, ss.str(), path, format, n_ctx, out, err, chatml_fallback);
}

bool ft_parse_data(const llama_model * model, const std::string & text, const std::string & path, ft_data_format format,
                   int32_t n_ctx, std::vector<ft_sequence> & out, std::string & err, bool * chatml_fallback) {
    bool chatml = false;
    if (chatml_fallback) *chatml_fallback = false;
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        err = "data file '" + path + "' is empty";
        return false;
    }
    out.clear();
    if (format == FT_DATA_TEXT) {
        document d;
        if (!d.add(llama_model_get_vocab(model), text, true, true, err, false)) return false;
        cut(d, n_ctx, out);
    } else {
        std::istringstream lines(text);
        std::string line;
        int64_t lineno = 0;
        while (std::getline(lines, line)) {
            lineno++;
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            json_value j;
            document d;
            if (!json_parse(line, j, err) || !jsonl_document(model, j, d, err, chatml)) {
                err = path + ":" + std::to_string(lineno) + ": " + err;
                return false;
            }
            cut(d, n_ctx, out);
        }
    }
    if (out.empty()) {
        err = "data file '" + path + "' gives no training sequence (too short: at least two tokens are needed)";
        return false;
    }
    if (chatml_fallback) *chatml_fallback = chatml;
    return true;
}
