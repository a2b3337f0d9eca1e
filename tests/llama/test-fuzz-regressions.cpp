// test-fuzz-regressions.cpp - every input the fuzzers once crashed on, fed again to the same
// harness code (fuzz/fuzz-<target>.cpp, compiled into this test with its entry point renamed),
// so the normal test suite keeps each fixed bug fixed without libFuzzer. The inputs live in
// tests/data/fuzz-regressions/<target>/ (file names say what broke); the seed corpora of
// fuzz/corpus/<target>/ are run too. A broken invariant aborts the test (FUZZ_CHECK); under the
// ASan + UBSan build (make asan) out-of-bounds accesses, undefined behaviour and leaks fail it.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "llama.h"

extern "C" {
int fuzz_entry_gguf(const uint8_t * data, size_t size);
int fuzz_entry_model(const uint8_t * data, size_t size);
int fuzz_entry_tokenizer(const uint8_t * data, size_t size);
int fuzz_entry_chat_template(const uint8_t * data, size_t size);
int fuzz_entry_json(const uint8_t * data, size_t size);
int fuzz_entry_safetensors(const uint8_t * data, size_t size);
int fuzz_entry_adapter(const uint8_t * data, size_t size);
int fuzz_entry_checkpoint(const uint8_t * data, size_t size);
int fuzz_entry_finetune_data(const uint8_t * data, size_t size);
int fuzz_entry_llama2c(const uint8_t * data, size_t size);
int fuzz_entry_grammar(const uint8_t * data, size_t size);
int fuzz_entry_state(const uint8_t * data, size_t size);
int fuzz_entry_batch(const uint8_t * data, size_t size);
#ifdef FUZZ_SERVER_REQUEST
int fuzz_entry_server_request(const uint8_t * data, size_t size);
#endif
}

namespace {

using entry_fn = int (*)(const uint8_t *, size_t);

struct target {
    const char * name;
    entry_fn fn;
};

const target TARGETS[] = {
    { "fuzz-gguf", fuzz_entry_gguf },
    { "fuzz-model", fuzz_entry_model },
    { "fuzz-tokenizer", fuzz_entry_tokenizer },
    { "fuzz-chat-template", fuzz_entry_chat_template },
    { "fuzz-json", fuzz_entry_json },
    { "fuzz-safetensors", fuzz_entry_safetensors },
    { "fuzz-adapter", fuzz_entry_adapter },
    { "fuzz-checkpoint", fuzz_entry_checkpoint },
    { "fuzz-finetune-data", fuzz_entry_finetune_data },
    { "fuzz-llama2c", fuzz_entry_llama2c },
    { "fuzz-grammar", fuzz_entry_grammar },
    { "fuzz-state", fuzz_entry_state },
    { "fuzz-batch", fuzz_entry_batch },
#ifdef FUZZ_SERVER_REQUEST
    { "fuzz-server-request", fuzz_entry_server_request },  // (where nlohmann-json is found)
#endif
};

struct input_case {
    std::string target;
    std::string path;
    entry_fn fn;
};

// gtest prints the parameter of a failing case: its file.
void PrintTo(const input_case & c, std::ostream * os) { *os << c.path; }

std::vector<std::string> list_dir(const std::string & dir) {
    std::vector<std::string> out;
    if (DIR * d = opendir(dir.c_str())) {
        while (dirent * e = readdir(d)) {
            const std::string n = e->d_name;
            struct stat st;
            if (n[0] != '.' && stat((dir + "/" + n).c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(n);
        }
        closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<input_case> all_cases() {
    std::vector<input_case> v;
    for (const target & t : TARGETS) {
        for (const std::string & base : { std::string(LLAMA_TEST_DATA_DIR) + "/fuzz-regressions/",
                                          std::string(FUZZ_SOURCE_DIR) + "/corpus/" }) {
            const std::string dir = base + t.name;
            for (const std::string & f : list_dir(dir)) v.push_back({ t.name, dir + "/" + f, t.fn });
        }
    }
    return v;
}

std::string case_name(const testing::TestParamInfo<input_case> & info) {
    // "fuzz-gguf/corpus/all-types.gguf" -> "gguf_corpus_all_types_gguf"
    const std::string & p = info.param.path;
    const bool corpus = p.find("/fuzz-regressions/") == std::string::npos;
    std::string s = info.param.target.substr(5) + (corpus ? "_corpus_" : "_") + p.substr(p.rfind('/') + 1);
    for (char & c : s) {
        if (!isalnum((unsigned char) c)) c = '_';
    }
    return s + "_" + std::to_string(info.index);
}

class FuzzRegression : public testing::TestWithParam<input_case> {};

TEST_P(FuzzRegression, HarnessRunsCleanly) {
    const input_case & c = GetParam();
    std::ifstream f(c.path, std::ios::binary);
    ASSERT_TRUE(f.good()) << c.path;
    const std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(c.fn(data.data(), data.size()), 0) << c.path;
}

INSTANTIATE_TEST_SUITE_P(Inputs, FuzzRegression, testing::ValuesIn(all_cases()), case_name);

// Every target has its folder of regression inputs (possibly empty but for a README) and seeds.
TEST(FuzzRegression, EveryTargetHasSeeds) {
    for (const target & t : TARGETS) {
        EXPECT_FALSE(list_dir(std::string(FUZZ_SOURCE_DIR) + "/corpus/" + t.name).empty()) << t.name;
    }
}

}  // namespace
