// llama-chat.cpp - chat templates: the common formats, chosen by name or recognised by the
// markers in a model's Jinja template (tokenizer.chat_template). ChatML for NULL; a template that
// is none of them is refused (-1), as llama.cpp refuses it, rather than formatted as another.
#include "llama.h"

#include <cctype>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class chat_style { chatml, llama2, llama3, zephyr, mistral, phi3, gemma };

bool contains(const std::string & s, const char * needle) { return s.find(needle) != std::string::npos; }

std::string trim(const std::string & s) {
    size_t a = 0, b = s.size();
    while (a < b && isspace((unsigned char) s[a])) a++;
    while (b > a && isspace((unsigned char) s[b - 1])) b--;
    return s.substr(a, b - a);
}

chat_style detect_style_or_chatml(const char * tmpl);

// False when the template is none of the built-in formats.
bool detect_style(const char * tmpl, chat_style & style) {
    style = detect_style_or_chatml(tmpl);
    if (!tmpl) return true;
    const std::string t = tmpl;
    return style != chat_style::chatml || t == "chatml" || contains(t, "<|im_start|>");
}

chat_style detect_style_or_chatml(const char * tmpl) {
    if (!tmpl) return chat_style::chatml;
    const std::string t = tmpl;
    // Names first.
    if (t == "chatml") return chat_style::chatml;
    if (t == "llama2" || t == "llama-2") return chat_style::llama2;
    if (t == "llama3" || t == "llama-3") return chat_style::llama3;
    if (t == "zephyr") return chat_style::zephyr;
    if (t == "mistral" || t == "mistral-v1") return chat_style::mistral;
    if (t == "phi3" || t == "phi-3") return chat_style::phi3;
    if (t == "gemma") return chat_style::gemma;
    // Then the markers a Jinja template of each family writes.
    if (contains(t, "<|im_start|>")) return chat_style::chatml;
    if (contains(t, "<|start_header_id|>")) return chat_style::llama3;
    if (contains(t, "[INST]")) return contains(t, "<<SYS>>") ? chat_style::llama2 : chat_style::mistral;
    if (contains(t, "<|user|>")) return contains(t, "<|end|>") ? chat_style::phi3 : chat_style::zephyr;
    if (contains(t, "<start_of_turn>")) return chat_style::gemma;
    return chat_style::chatml;
}

std::string format_chat(chat_style style, const llama_chat_message * chat, size_t n, bool add_ass) {
    std::string out;
    switch (style) {
        case chat_style::chatml:
            for (size_t i = 0; i < n; i++) {
                out += "<|im_start|>" + std::string(chat[i].role) + "\n" + chat[i].content + "<|im_end|>\n";
            }
            if (add_ass) out += "<|im_start|>assistant\n";
            break;
        case chat_style::llama3:
            for (size_t i = 0; i < n; i++) {
                out += "<|start_header_id|>" + std::string(chat[i].role) + "<|end_header_id|>\n\n" + chat[i].content + "<|eot_id|>";
            }
            if (add_ass) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
            break;
        case chat_style::zephyr:
        case chat_style::phi3: {
            const char * end = style == chat_style::zephyr ? "</s>" : "<|end|>";
            for (size_t i = 0; i < n; i++) {
                out += "<|" + std::string(chat[i].role) + "|>\n" + chat[i].content + end + "\n";
            }
            if (add_ass) out += "<|assistant|>\n";
            break;
        }
        case chat_style::gemma: {
            // <start_of_turn>ROLE\n...<end_of_turn>\n with "model" for the assistant; Gemma has no
            // system role: the system text opens the next user turn (as llama.cpp formats it).
            std::string system;
            for (size_t i = 0; i < n; i++) {
                std::string role = chat[i].role;
                if (role == "system") {
                    system = trim(chat[i].content);
                    continue;
                }
                if (role == "assistant") role = "model";
                out += "<start_of_turn>" + role + "\n";
                if (!system.empty() && role != "model") {
                    out += system + "\n\n";
                    system.clear();
                }
                out += trim(chat[i].content) + "<end_of_turn>\n";
            }
            if (add_ass) out += "<start_of_turn>model\n";
            break;
        }
        case chat_style::llama2:
        case chat_style::mistral: {
            // [INST] user [/INST] assistant</s>: the system message goes inside the first [INST],
            // wrapped in <<SYS>> for Llama 2, as a preceding paragraph for Mistral. The first
            // BOS comes from the tokenizer; later turns open with an explicit <s>.
            std::string system;
            bool first_user = true;
            for (size_t i = 0; i < n; i++) {
                const std::string role = chat[i].role;
                const std::string content = chat[i].content;
                if (role == "system") {
                    system = content;
                } else if (role == "user") {
                    if (!first_user && style == chat_style::llama2) out += "<s>";
                    out += "[INST] ";
                    if (first_user && !system.empty()) {
                        out += style == chat_style::llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" : system + "\n\n";
                    }
                    out += content + " [/INST]";
                    first_user = false;
                } else {
                    out += " " + content + "</s>";
                }
            }
            break;
        }
    }
    return out;
}

}  // namespace

int32_t llama_chat_apply_template(const char * tmpl, const struct llama_chat_message * chat, size_t n_msg, bool add_ass,
                                  char * buf, int32_t length) {
    if (n_msg > 0 && !chat) return -1;
    for (size_t i = 0; i < n_msg; i++) {
        if (!chat[i].role || !chat[i].content) return -1;
    }
    chat_style style;
    if (!detect_style(tmpl, style)) return -1;
    const std::string out = format_chat(style, chat, n_msg, add_ass);
    if (buf && length > 0) {
        const size_t n = std::min(out.size(), (size_t) length - 1);
        memcpy(buf, out.data(), n);
        buf[n] = '\0';
    }
    return (int32_t) out.size();
}

int32_t llama_chat_builtin_templates(const char ** output, size_t len) {
    static const char * const names[] = { "chatml", "gemma", "llama2", "llama3", "mistral", "phi3", "zephyr" };
    const size_t n = sizeof(names) / sizeof(names[0]);
    for (size_t i = 0; output && i < len && i < n; i++) output[i] = names[i];
    return (int32_t) n;
}
