// arg.h - the programs' command-line options, each declared once (common/arg.cpp) with llama.cpp's
// names and aliases, its value and range, its help text, the environment variable that sets it
// (llama.cpp's LLAMA_ARG_* names) and the programs that take it. Parsing, range errors, --help
// (grouped as llama.cpp groups it) and the usage line all come from that one table: a flag that N
// programs share is one entry.
//
// A program calls common_params_parse(argc, argv, params, LLAMA_EXAMPLE_X) after setting its own
// defaults in params. An option of llama.cpp whose feature this engine lacks is declared too,
// with the reason: it is refused as "not supported", never as an unknown option.
#pragma once

#include "common.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

// The programs (llama.cpp's enum, with the programs this project has).
enum llama_example {
    LLAMA_EXAMPLE_MAIN,    // llama-cli
    LLAMA_EXAMPLE_SIMPLE,
    LLAMA_EXAMPLE_PERPLEXITY,
    LLAMA_EXAMPLE_BENCH,
    LLAMA_EXAMPLE_QUANTIZE,
    LLAMA_EXAMPLE_FINETUNE,
    LLAMA_EXAMPLE_EXPORT_LORA,
    LLAMA_EXAMPLE_CONVERT,
    LLAMA_EXAMPLE_TOKENIZE,
    LLAMA_EXAMPLE_LOGITS,
    LLAMA_EXAMPLE_EMBEDDING,
    LLAMA_EXAMPLE_BATCHED,        // llama-batched (llama.cpp's LLAMA_EXAMPLE_COMMON program)
    LLAMA_EXAMPLE_BATCHED_BENCH,  // llama-batched-bench (llama.cpp's LLAMA_EXAMPLE_BENCH)
    LLAMA_EXAMPLE_PARALLEL,       // llama-parallel
    LLAMA_EXAMPLE_SAVE_LOAD_STATE,  // llama-save-load-state (llama.cpp's LLAMA_EXAMPLE_COMMON program)
    LLAMA_EXAMPLE_SERVER,  // llama-server
    LLAMA_EXAMPLE_IMATRIX,  // llama-imatrix
    LLAMA_EXAMPLE_COUNT,
};

// The sections of --help, in llama.cpp's order.
enum common_arg_group {
    COMMON_ARG_GROUP_COMMON,    // "----- common params -----"
    COMMON_ARG_GROUP_SAMPLING,  // "----- sampling params -----"
    COMMON_ARG_GROUP_EXAMPLE,   // "----- example-specific params -----"
};

struct common_arg {
    enum value_kind { NONE, INT, FLOAT, STRING, STRING_PAIR, OPTIONAL_CHOICE };

    std::vector<std::string> args;          // the names: "-c", "--ctx-size"
    const char * value_hint = nullptr;      // "N"; none: a flag without a value
    const char * value_hint_2 = nullptr;    // the second value of STRING_PAIR
    std::string help;
    const char * env = nullptr;             // LLAMA_ARG_...: sets the option when the command line does not
    std::set<llama_example> examples;       // the programs that take it
    common_arg_group group = COMMON_ARG_GROUP_COMMON;
    value_kind kind = NONE;
    double lo = 0, hi = 0;                  // INT and FLOAT: the allowed range
    std::vector<std::string> choices;       // OPTIONAL_CHOICE: the values that may follow the flag
    std::string unsupported;                // not empty: refused with this reason
    std::set<llama_example> no_effect;      // programs that take it as llama.cpp's do, to no effect (noted)
    bool single = false;                    // common_params_parse_lists: one value, not a list
    bool int_ranges = false;                // common_params_parse_lists: a STRING value that takes integer ranges too

    std::function<void(common_params &)> on_flag;
    std::function<void(common_params &, int64_t)> on_int;
    std::function<void(common_params &, double)> on_float;
    std::function<void(common_params &, const std::string &)> on_string;  // STRING, OPTIONAL_CHOICE ("" when bare)
    std::function<void(common_params &, const std::string &, const std::string &)> on_pair;

    common_arg & set_examples(std::initializer_list<llama_example> ex) {
        examples = ex;
        return *this;
    }
    common_arg & set_env(const char * e) {
        env = e;
        return *this;
    }
    common_arg & set_sparam() {
        group = COMMON_ARG_GROUP_SAMPLING;
        return *this;
    }
    // Taken by these programs too, as llama.cpp's programs take it, with a note that it changes nothing there.
    common_arg & set_no_effect(std::initializer_list<llama_example> ex) {
        for (llama_example e : ex) {
            examples.insert(e);
            no_effect.insert(e);
        }
        return *this;
    }
    common_arg & set_group(common_arg_group g) {
        group = g;
        return *this;
    }
    common_arg & set_single() {
        single = true;
        return *this;
    }
};

// An option's values on a list-taking command line (llama-bench), in the order given.
struct common_arg_list {
    const common_arg * arg;
    std::string name;                 // as first given ("-t")
    std::vector<std::string> values;  // one per test dimension value, ranges expanded
};

// The options a program takes, in table order.
std::vector<common_arg> common_args_for(llama_example ex);

// The program's name (llama-cli, ...) and its usage line.
const char * common_example_name(llama_example ex);

// Parses the environment (LLAMA_ARG_*), then argv, into params; --help prints the program's
// options and exits 0; a bad or unknown option prints "<program>: <why>" and "(see <program>
// --help)" and returns false. Program-specific checks (a required -m, ...) are the caller's.
bool common_params_parse(int argc, char ** argv, common_params & params, llama_example ex);

// llama-bench's command line: every option with a value takes a comma-separated list (integers
// also first-last, first-last+step, first-last*mult; the option repeated extends the list), but
// those marked single; flags and single options are applied to params, the lists returned in
// `lists` (each value checked now, as the option alone would check it). The environment is not
// read (as llama.cpp's llama-bench). Errors as common_params_parse.
bool common_params_parse_lists(int argc, char ** argv, common_params & params, llama_example ex,
                               std::vector<common_arg_list> & lists);

// Applies one value of a list to params, as the option given alone would; throws
// std::invalid_argument with the message on a bad value.
void common_arg_apply(const common_arg & a, common_params & params, const std::string & name, const std::string & value);

// The --help text of a program (what --help prints).
std::string common_params_help(llama_example ex);
