// llama-impl.h - internals shared by the runtime's files: logging through the callback set with
// llama_log_set.
#pragma once

#include "llama.h"

#include <cstdint>

// Formats the message and hands it to the log callback (default: stderr). A trailing newline is
// the caller's business, as in printf.
#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
void llama_log(enum ggml_log_level level, const char * fmt, ...);

#define LLAMA_LOG_ERROR(...) llama_log(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)
#define LLAMA_LOG_WARN(...)  llama_log(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define LLAMA_LOG_INFO(...)  llama_log(GGML_LOG_LEVEL_INFO, __VA_ARGS__)
