// llama.cpp - process-wide pieces of the runtime: the log callback and backend init/free.
#include "llama.h"
#include "llama-impl.h"

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <vector>

namespace {

void log_to_stderr(int level, const char * text, void * user_data) {
    (void) level;
    (void) user_data;
    fputs(text, stderr);
    fflush(stderr);
}

// The callback and its data change together, so they sit behind one mutex; logging is rare
// enough that the lock costs nothing.
std::mutex g_log_mutex;
llama_log_callback g_log_callback = log_to_stderr;
void * g_log_user_data = nullptr;

}  // namespace

void llama_log_set(llama_log_callback callback, void * user_data) {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log_callback = callback ? callback : log_to_stderr;
    g_log_user_data = callback ? user_data : nullptr;
}

void llama_log(int level, const char * fmt, ...) {
    char small[512];
    va_list args;
    va_start(args, fmt);
    va_list args_copy;
    va_copy(args_copy, args);
    const int n = vsnprintf(small, sizeof(small), fmt, args);
    va_end(args);
    const char * text = small;
    std::vector<char> big;
    if (n >= (int) sizeof(small)) {
        big.resize((size_t) n + 1);
        vsnprintf(big.data(), big.size(), fmt, args_copy);
        text = big.data();
    }
    va_end(args_copy);
    if (n < 0) return;
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log_callback(level, text, g_log_user_data);
}

int64_t llama_time_us(void) {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

void llama_backend_init(void) {}
void llama_backend_free(void) {}
