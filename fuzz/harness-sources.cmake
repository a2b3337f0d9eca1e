# harness-sources.cmake - what a harness compiles in besides the libraries llama and ggml: the
# sources of examples/ whose readers it feeds (the programs' files are in no library) and their
# folders, for the headers. Included by fuzz/CMakeLists.txt (the fuzzers, fuzz-make-app-seeds) and
# tests/CMakeLists.txt (test-fuzz-regressions). Variables by harness id (fuzz-<id>, - as _):
#   LLAMA_FUZZ_EXTRA_SOURCES_<id>, LLAMA_FUZZ_EXTRA_INCLUDES_<id>.
get_filename_component(_llama_fuzz_ex ${CMAKE_CURRENT_LIST_DIR}/../examples ABSOLUTE)

set(LLAMA_FUZZ_EXTRA_SOURCES_checkpoint ${_llama_fuzz_ex}/finetune/finetune-checkpoint.cpp
                                        ${_llama_fuzz_ex}/finetune/finetune-report.cpp)
set(LLAMA_FUZZ_EXTRA_INCLUDES_checkpoint ${_llama_fuzz_ex}/finetune)

set(LLAMA_FUZZ_EXTRA_SOURCES_finetune_data ${_llama_fuzz_ex}/finetune/finetune-data.cpp)
set(LLAMA_FUZZ_EXTRA_INCLUDES_finetune_data ${_llama_fuzz_ex}/finetune)

set(LLAMA_FUZZ_EXTRA_SOURCES_llama2c ${_llama_fuzz_ex}/convert/llama2c.cpp)
set(LLAMA_FUZZ_EXTRA_INCLUDES_llama2c ${_llama_fuzz_ex}/convert)

# llama-server's request reader needs common/ (json-schema-to-grammar, built with nlohmann-json)
# and nlohmann-json itself: without them the harness is left out (LLAMA_FUZZ_SKIP).
find_package(nlohmann_json 3 QUIET)
if (nlohmann_json_FOUND)
    set(LLAMA_FUZZ_EXTRA_SOURCES_server_request ${_llama_fuzz_ex}/server/server-request.cpp)
    set(LLAMA_FUZZ_EXTRA_INCLUDES_server_request ${_llama_fuzz_ex}/server)
    set(LLAMA_FUZZ_EXTRA_LIBS_server_request common nlohmann_json::nlohmann_json)
else()
    list(APPEND LLAMA_FUZZ_SKIP fuzz-server-request)
endif()
