// server-http.h - what llama-server adds to cpp-httplib's connection handling so that slow or
// stalled clients cannot hold the others up: threads that grow while all are busy, and a
// deadline for a connection's request headers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// The HTTP connections' threads: n_min kept, more started while every one is busy, up to n_max.
// cpp-httplib's fixed pool lets a few slow or stalled clients (each holds its thread until it
// has sent its request, or until its deadline) keep every other client waiting.
class connection_pool : public httplib::TaskQueue {
public:
    connection_pool(size_t n_min, size_t n_max);
    void enqueue(std::function<void()> fn) override;
    void shutdown() override;

private:
    void start();
    const size_t n_max_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    std::vector<std::thread> threads_;
    size_t n_idle_ = 0;
    bool stop_ = false;
};

// Closes a connection whose first request's headers are not all in within `seconds` of its
// being seen. cpp-httplib's read timeout (-to) bounds each read, so a client sending a byte a
// second would never trip it. cpp-httplib does not tell which socket a request came on; the
// watchdog finds the server's connected sockets in /proc/self/fd (by local port) and knows a
// connection's request by its peer's address and port (seen(), from the pre-routing handler).
class header_deadline {
public:
    header_deadline(int port, int seconds);
    ~header_deadline();
    // The headers of a request from this peer are in (called by the pre-routing handler).
    void seen(const std::string & addr, int port);

private:
    void loop();
    struct conn {
        std::string peer;
        std::chrono::steady_clock::time_point since;
    };
    const int port_;
    const std::chrono::seconds deadline_;
    std::mutex m_;
    std::condition_variable cv_;
    std::set<std::string> served_;  // peers whose request headers came in
    std::map<int, conn> conns_;     // fd -> the connection on it
    bool stop_ = false;
    std::thread thread_;
};
