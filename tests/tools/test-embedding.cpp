// llama-embedding as a user runs it, against llama.cpp build 4747's own llama-embedding on the same
// model and flags (tests/data/embedding-reference): every pooling type, causal and non-causal
// attention, each normalisation and output format. The text must be the same but for the numbers'
// last digits (natively within 2e-6: llama.cpp pools the mean inside its graph; see the bound
// below). And bad input.
#include "test-llama.h"

#include <fstream>
#include <regex>
#include <sstream>

namespace {

std::string bin(const std::string & prog) { return std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog; }
std::string model_path() { return tu::models_dir() + "/stories260K.gguf"; }
std::string ref_dir() { return std::string(LLAMA_TEST_DATA_DIR) + "/embedding-reference"; }

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The numbers of a text, and the text with each number replaced by '#'.
void split_numbers(const std::string & s, std::vector<double> & nums, std::string & shape) {
    static const std::regex num(R"(-?\d+(\.\d+)?)");
    shape.clear();
    size_t last = 0;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), num); it != std::sregex_iterator(); ++it) {
        shape += s.substr(last, (size_t) it->position() - last) + "#";
        nums.push_back(std::stod(it->str()));
        last = (size_t) (it->position() + it->length());
    }
    shape += s.substr(last);
}

TEST(Embedding, OutputsMatchLlamaCpp) {
    TU_REQUIRE_FILE(model_path());
    std::ifstream cases(ref_dir() + "/cases.txt");
    ASSERT_TRUE(cases.good());
    std::string line;
    int n = 0;
    while (std::getline(cases, line)) {
        const size_t sp = line.find(' ');
        const std::string file = line.substr(0, sp), flags = line.substr(sp + 1);
        SCOPED_TRACE(flags);
        std::string err;
        const tu::run_result r = tu::run_command(bin("llama-embedding") + " -m " + model_path() +
                                                 " -p 'Once upon a time\\nthe cat sat' -c 128 -b 128 " + flags, &err);
        ASSERT_EQ(r.status, 0) << err;
        std::vector<double> got, want;
        std::string got_shape, want_shape;
        split_numbers(r.output, got, got_shape);
        split_numbers(read_file(ref_dir() + "/" + file), want, want_shape);
        EXPECT_EQ(got_shape, want_shape);
        ASSERT_EQ(got.size(), want.size());
        // The same kernels as llama.cpp's x86 build give the last printed digit (2e-6 of values of
        // at most 1); other kernel sets (the scalar-only build, NEON) round differently: 1e-4 of
        // the largest value (normalized, int16-scaled or raw).
        double worst = 0, largest = 1.0;
        for (size_t i = 0; i < got.size(); i++) {
            worst = std::max(worst, std::fabs(got[i] - want[i]));
            largest = std::max(largest, std::fabs(want[i]));
        }
        EXPECT_LE(worst, 1e-4 * largest);
        n++;
    }
    EXPECT_EQ(n, 9);
}

TEST(Embedding, BadInputIsRefused) {
    TU_REQUIRE_FILE(model_path());
    const std::string base = bin("llama-embedding") + " -m " + model_path() + " -p 'Once upon a time' ";
    std::string err;
    tu::run_result r = tu::run_command(base + "--pooling rank", &err);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(err.find("not supported"), std::string::npos) << err;
    r = tu::run_command(base + "--pooling sum", &err);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(err.find("--pooling"), std::string::npos) << err;
    r = tu::run_command(base + "-c 128 -b 3", &err);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(err.find("exceeds batch size"), std::string::npos) << err;
    r = tu::run_command(base + "--embd-output-format xml", &err);
    EXPECT_NE(r.status, 0);
}

}  // namespace
