// llama-impl.h - internals shared by the runtime's files: logging through the callback set with
// llama_log_set, and a monotonic clock.
#pragma once

#include <cstdint>

enum llama_log_level {
    LLAMA_LOG_LEVEL_ERROR = 2,
    LLAMA_LOG_LEVEL_WARN  = 3,
    LLAMA_LOG_LEVEL_INFO  = 4,
};

// Formats the message and hands it to the log callback (default: stderr). A trailing newline is
// the caller's business, as in printf.
#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
void llama_log(int level, const char * fmt, ...);

#define LLAMA_LOG_ERROR(...) llama_log(LLAMA_LOG_LEVEL_ERROR, __VA_ARGS__)
#define LLAMA_LOG_WARN(...)  llama_log(LLAMA_LOG_LEVEL_WARN, __VA_ARGS__)
#define LLAMA_LOG_INFO(...)  llama_log(LLAMA_LOG_LEVEL_INFO, __VA_ARGS__)

// Microseconds from a monotonic clock (for the timings).
int64_t llama_time_us(void);
