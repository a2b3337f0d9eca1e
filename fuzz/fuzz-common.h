// fuzz-common.h - helpers shared by the libFuzzer harnesses in fuzz/ (and by
// tests/test-fuzz-regressions.cpp, which feeds the same harness code the saved crash inputs):
// inputs as files the library opens by name, a silent log, and invariant checks that crash.
#pragma once

#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace fuzz {

// A broken invariant of the library (not an error it reports cleanly): abort so that the fuzzer
// records the input as a crash and the regression test fails.
#define FUZZ_CHECK(cond)                                                                                  \
    do {                                                                                                  \
        if (!(cond)) {                                                                                    \
            fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                 \
            abort();                                                                                      \
        }                                                                                                 \
    } while (0)

// The input as a file: an anonymous memory file named /proc/self/fd/N (nothing touches the
// disk), or a temporary file in $TMPDIR when memfd_create is unavailable. Removed at scope exit.
struct mem_file {
    int fd = -1;
    std::string path;
    bool on_disk = false;

    mem_file(const void * data, size_t size) {
#ifdef MFD_CLOEXEC
        fd = memfd_create("fuzz-input", MFD_CLOEXEC);
#endif
        if (fd >= 0) {
            path = "/proc/self/fd/" + std::to_string(fd);
        } else {
            const char * tmp = getenv("TMPDIR");
            std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/llama-fuzz-XXXXXX";
            fd = mkstemp(&tmpl[0]);
            if (fd < 0) {
                perror("fuzz: mkstemp");
                abort();
            }
            path = tmpl;
            on_disk = true;
        }
        const char * p = (const char *) data;
        while (size > 0) {
            const ssize_t w = write(fd, p, size);
            if (w <= 0) {
                perror("fuzz: write");
                abort();
            }
            p += w;
            size -= (size_t) w;
        }
    }
    ~mem_file() {
        if (on_disk) unlink(path.c_str());
        close(fd);
    }
    mem_file(const mem_file &) = delete;
    mem_file & operator=(const mem_file &) = delete;
};

inline void quiet_log(enum ggml_log_level, const char *, void *) {}

// Silences the runtime's log (errors are the expected outcome of most inputs). Set
// LLAMA_FUZZ_VERBOSE=1 to see the messages while reproducing a case.
inline void quiet() {
    static const bool once = [] {
        if (!getenv("LLAMA_FUZZ_VERBOSE")) llama_log_set(quiet_log, nullptr);
        return true;
    }();
    (void) once;
}

// Reads every byte of [p, p + n) so that ASan sees any out-of-bounds pointer the library hands out;
// the result is used so that the reads are not optimized away.
inline uint8_t touch(const void * p, size_t n) {
    const volatile uint8_t * b = (const volatile uint8_t *) p;
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) acc ^= b[i];
    return acc;
}

// Splits the input into fields: take(n) returns the next n bytes (fewer at the end), u8() one byte
// (0 once consumed), rest() what is left.
struct reader {
    const uint8_t * p;
    size_t n;
    uint8_t u8() {
        if (n == 0) return 0;
        n--;
        return *p++;
    }
    std::string take(size_t k) {
        if (k > n) k = n;
        std::string s((const char *) p, k);
        p += k;
        n -= k;
        return s;
    }
    std::string rest() { return take(n); }
};

}  // namespace fuzz
