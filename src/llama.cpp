// llama.cpp - process-wide pieces of the runtime: the log callback, backend init/free, the
// clock, what this build supports, and split file names.
#include "llama.h"
#include "llama-impl.h"

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

void log_to_stderr(enum ggml_log_level level, const char * text, void * user_data) {
    (void) level;
    (void) user_data;
    fputs(text, stderr);
    fflush(stderr);
}

// The callback and its data change together, so they sit behind one mutex; logging is rare
// enough that the lock costs nothing.
std::mutex g_log_mutex;
ggml_log_callback g_log_callback = log_to_stderr;
void * g_log_user_data = nullptr;

}  // namespace

void llama_log_set(ggml_log_callback log_callback, void * user_data) {
    ggml_log_set(log_callback, user_data);  // ggml's messages too, as llama.cpp routes them
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log_callback = log_callback ? log_callback : log_to_stderr;
    g_log_user_data = log_callback ? user_data : nullptr;
}

void llama_log(enum ggml_log_level level, const char * fmt, ...) {
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

size_t llama_max_devices(void) { return 16; }
bool llama_supports_mmap(void) { return true; }
bool llama_supports_mlock(void) { return true; }
bool llama_supports_gpu_offload(void) { return ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU) != nullptr; }
bool llama_supports_rpc(void) { return false; }

const char * llama_print_system_info(void) {
    static std::string s;
    s = std::string("CPU : ") + ggml_cpu_isa_name() + " = 1 | ";
    if (ggml_cpu_has_avx2()) s += "AVX2 = 1 | ";
    if (ggml_cpu_has_avx512()) s += "AVX512 = 1 | ";
    if (ggml_cpu_has_avx512_vnni()) s += "AVX512_VNNI = 1 | ";
    if (ggml_cpu_has_amx_int8()) s += "AMX_INT8 = 1 | ";
    if (ggml_cpu_has_neon()) s += "NEON = 1 | ";
    if (ggml_cpu_has_dotprod()) s += "DOTPROD = 1 | ";
    return s.c_str();
}

// ---- split files ---------------------------------------------------------------------------
namespace {

std::string split_suffix(int split_no, int split_count) {
    char buf[64];
    snprintf(buf, sizeof(buf), "-%05d-of-%05d.gguf", split_no + 1, split_count);
    return buf;
}

}  // namespace

int llama_split_path(char * split_path, size_t maxlen, const char * path_prefix, int split_no, int split_count) {
    if (!split_path || maxlen == 0 || !path_prefix) return 0;
    const std::string s = path_prefix + split_suffix(split_no, split_count);
    snprintf(split_path, maxlen, "%s", s.c_str());
    return (int) strlen(split_path);
}

int llama_split_prefix(char * split_prefix, size_t maxlen, const char * split_path, int split_no, int split_count) {
    if (!split_prefix || maxlen == 0 || !split_path) return 0;
    const std::string path = split_path;
    const std::string suffix = split_suffix(split_no, split_count);
    if (path.size() <= suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) return 0;
    const size_t n = path.size() - suffix.size();
    snprintf(split_prefix, maxlen, "%.*s", (int) n, path.c_str());
    return (int) n;
}
