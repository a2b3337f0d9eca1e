// llama-gguf-stream.cpp - the streaming GGUF writer (same scheme as llama-quantize: header from
// gguf_get_meta_data, then each tensor at its offset with alignment padding, fsync, rename).
#include "llama-gguf-stream.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace {

// The path to remove on an interruption; a plain array so the signal handler only reads memory.
char g_tmp_path[4096];

void on_signal(int sig) {
    if (g_tmp_path[0]) unlink(g_tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

void write_all(int fd, const void * data, size_t n) {
    const char * p = (const char *) data;
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw std::runtime_error(std::string("write failed: ") + strerror(errno));
        }
        p += w;
        n -= (size_t) w;
    }
}

}  // namespace

void gguf_stream_write(const gguf_context * meta, const std::vector<gguf_stream_tensor> & tensors,
                       const std::string & out_path) {
    if (out_path.size() + 16 >= sizeof(g_tmp_path)) throw std::runtime_error("output path too long");
    std::string tmpl = out_path + ".tmp.XXXXXX";
    snprintf(g_tmp_path, sizeof(g_tmp_path), "%s", tmpl.c_str());
    char buf_path[sizeof(g_tmp_path)];
    snprintf(buf_path, sizeof(buf_path), "%s", tmpl.c_str());
    g_tmp_path[0] = '\0';
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int fd = mkstemp(buf_path);
    if (fd < 0) throw std::runtime_error("cannot create '" + tmpl + "': " + strerror(errno));
    memcpy(g_tmp_path, buf_path, sizeof(g_tmp_path));
    {
        const mode_t mask = umask(0);  // mkstemp creates 0600; give the output the usual 0666 & ~umask
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    try {
        std::vector<uint8_t> header(gguf_get_meta_size(meta));
        gguf_get_meta_data(meta, header.data());
        write_all(fd, header.data(), header.size());
        const size_t alignment = gguf_get_alignment(meta);
        size_t offset = 0;
        std::vector<uint8_t> buf;
        for (const auto & t : tensors) {
            const int64_t tid = gguf_find_tensor(meta, t.name);
            if (tid < 0) throw std::runtime_error(std::string("internal error: no tensor info for ") + t.name);
            const size_t want = gguf_get_tensor_offset(meta, tid);
            if (want < offset || gguf_get_tensor_size(meta, tid) != t.nbytes) {
                throw std::runtime_error(std::string("internal error: bad layout for ") + t.name);
            }
            if (want > offset) {
                const std::vector<uint8_t> pad(want - offset, 0);
                write_all(fd, pad.data(), pad.size());
                offset = want;
            }
            buf.clear();
            t.produce(buf);
            if (buf.size() != t.nbytes) throw std::runtime_error(std::string("internal error: wrong size for ") + t.name);
            write_all(fd, buf.data(), buf.size());
            offset += buf.size();
        }
        const size_t pad = (alignment - offset % alignment) % alignment;
        if (pad) {
            const std::vector<uint8_t> zeros(pad, 0);
            write_all(fd, zeros.data(), pad);
        }
        if (fsync(fd) != 0) throw std::runtime_error(std::string("fsync failed: ") + strerror(errno));
        const int closed = close(fd);
        fd = -1;  // closed either way: the error path must not close it again
        if (closed != 0) throw std::runtime_error(std::string("close failed: ") + strerror(errno));
        if (rename(g_tmp_path, out_path.c_str()) != 0) {
            throw std::runtime_error("cannot rename to '" + out_path + "': " + strerror(errno));
        }
        g_tmp_path[0] = '\0';
    } catch (...) {
        if (g_tmp_path[0]) {
            if (fd >= 0) close(fd);
            unlink(g_tmp_path);
            g_tmp_path[0] = '\0';
        }
        throw;
    }
}
