// ggml-backend.cpp - the clock and the backend loader: the CPU backend is built in.
#include "ggml.h"
#include "ggml-backend.h"

#include <chrono>

void ggml_time_init(void) {}

int64_t ggml_time_us(void) {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

int64_t ggml_time_ms(void) { return ggml_time_us() / 1000; }

void ggml_backend_load_all(void) {}
