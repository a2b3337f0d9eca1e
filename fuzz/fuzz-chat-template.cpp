// fuzz-chat-template: llama_chat_apply_template with a template and messages built from the
// input. Input: byte 0 holds the flags (add_ass, null template, output buffer size class), then
// fields separated by a 0x00 byte: the template, then role, content, role, content, ... The
// result must be the same whatever the buffer size (snprintf semantics), and stay in bounds; a
// template that is none of the built-in formats is refused.
#include "fuzz-common.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::reader in{ data, size };
    const uint8_t flags = in.u8();
    std::vector<std::string> fields;
    std::string cur;
    for (const char c : in.rest()) {
        if (c == '\0') {
            fields.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    fields.push_back(cur);

    const bool add_ass = flags & 1;
    const bool null_tmpl = flags & 2;
    // A few names the formatter knows, to reach each style with the fields as messages.
    static const char * const names[] = { nullptr, "chatml", "llama2", "llama3", "zephyr", "mistral", "phi3" };
    const char * named = names[(flags >> 2) % (sizeof(names) / sizeof(names[0]))];
    const std::string & tmpl = fields[0];

    std::vector<llama_chat_message> msgs;
    for (size_t i = 1; i + 1 < fields.size(); i += 2) msgs.push_back({ fields[i].c_str(), fields[i + 1].c_str() });
    const llama_chat_message * chat = msgs.empty() ? nullptr : msgs.data();

    for (int k = 0; k < 2; k++) {
        const char * t = k == 0 ? (null_tmpl ? nullptr : tmpl.c_str()) : named;
        const int32_t n = llama_chat_apply_template(t, chat, msgs.size(), add_ass, nullptr, 0);
        // A template text that is none of the built-in formats is refused (-1), whatever the messages.
        if (k == 0 && t && n == -1 && llama_chat_apply_template(t, nullptr, 0, false, nullptr, 0) == -1) continue;
        FUZZ_CHECK(n >= 0);
        // The whole text, and a truncated copy into a buffer of a size picked by the flags.
        std::vector<char> full((size_t) n + 1, 'x');
        FUZZ_CHECK(llama_chat_apply_template(t, chat, msgs.size(), add_ass, full.data(), (int32_t) full.size()) == n);
        FUZZ_CHECK(full[(size_t) n] == '\0');
        const int32_t small = (int32_t) (((flags >> 5) * 7) % (n + 2));
        std::vector<char> part((size_t) small + 1, 'y');
        FUZZ_CHECK(llama_chat_apply_template(t, chat, msgs.size(), add_ass, part.data(), small) == n);
        FUZZ_CHECK(part[(size_t) small] == 'y');  // nothing written past the given length
        if (small > 0) {
            FUZZ_CHECK(memcmp(part.data(), full.data(), (size_t) small - 1 < (size_t) n ? (size_t) small - 1 : (size_t) n) == 0);
        }
    }
    // Bad arguments are refused, not dereferenced.
    llama_chat_message bad = { nullptr, "x" };
    FUZZ_CHECK(llama_chat_apply_template(tmpl.c_str(), &bad, 1, add_ass, nullptr, 0) == -1);
    FUZZ_CHECK(llama_chat_apply_template(tmpl.c_str(), nullptr, 1, add_ass, nullptr, 0) == -1);
    return 0;
}
