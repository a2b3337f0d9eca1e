// server-http.cpp - connection threads and the header deadline (see server-http.h).
#include "server-http.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>

connection_pool::connection_pool(size_t n_min, size_t n_max) : n_max_(std::max(n_min, n_max)) {
    std::lock_guard<std::mutex> lk(m_);
    for (size_t i = 0; i < n_min; i++) start();
}

void connection_pool::enqueue(std::function<void()> fn) {
    std::lock_guard<std::mutex> lk(m_);
    jobs_.push_back(std::move(fn));
    if (n_idle_ < jobs_.size() && threads_.size() < n_max_) start();
    cv_.notify_one();
}

void connection_pool::shutdown() {
    {
        std::lock_guard<std::mutex> lk(m_);
        stop_ = true;
    }
    cv_.notify_all();
    for (std::thread & t : threads_) t.join();  // (no thread starts once stop_ is set)
}

void connection_pool::start() {
    threads_.emplace_back([this] {
        std::unique_lock<std::mutex> lk(m_);
        for (;;) {
            n_idle_++;
            cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
            n_idle_--;
            if (jobs_.empty()) return;  // (stopping, nothing left)
            std::function<void()> fn = std::move(jobs_.front());
            jobs_.pop_front();
            lk.unlock();
            fn();
            lk.lock();
        }
    });
}

namespace {

// "address:port" of a socket address (IPv4 or IPv6), as cpp-httplib writes remote_addr and
// remote_port; the port alone in *port. Empty for other families.
std::string address_of(const sockaddr_storage & a, int * port) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (a.ss_family == AF_INET) {
        const auto & v4 = reinterpret_cast<const sockaddr_in &>(a);
        inet_ntop(AF_INET, &v4.sin_addr, buf, sizeof(buf));
        *port = ntohs(v4.sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto & v6 = reinterpret_cast<const sockaddr_in6 &>(a);
        inet_ntop(AF_INET6, &v6.sin6_addr, buf, sizeof(buf));
        *port = ntohs(v6.sin6_port);
    } else {
        return "";
    }
    return std::string(buf) + ":" + std::to_string(*port);
}

}  // namespace

header_deadline::header_deadline(int port, int seconds) : port_(port), deadline_(seconds) {
    thread_ = std::thread([this] { loop(); });
}

header_deadline::~header_deadline() {
    {
        std::lock_guard<std::mutex> lk(m_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void header_deadline::seen(const std::string & addr, int port) {
    std::lock_guard<std::mutex> lk(m_);
    served_.insert(addr + ":" + std::to_string(port));
}

void header_deadline::loop() {
    std::unique_lock<std::mutex> lk(m_);
    while (!stop_) {
        cv_.wait_for(lk, std::chrono::milliseconds(250));
        if (stop_) break;
        const auto now = std::chrono::steady_clock::now();
        std::map<int, conn> live;
        std::set<std::string> peers;
        DIR * d = opendir("/proc/self/fd");
        if (!d) continue;
        while (dirent * e = readdir(d)) {
            char * end = nullptr;
            const long fd = strtol(e->d_name, &end, 10);
            if (end == e->d_name || *end != '\0') continue;
            sockaddr_storage local{}, remote{};
            socklen_t nl = sizeof(local), nr = sizeof(remote);
            int lport = -1, rport = -1;
            // The server's connections: sockets on its port with a peer (the listening one has none).
            if (getsockname((int) fd, (sockaddr *) &local, &nl) != 0 || address_of(local, &lport).empty() || lport != port_) continue;
            if (getpeername((int) fd, (sockaddr *) &remote, &nr) != 0) continue;
            const std::string peer = address_of(remote, &rport);
            if (peer.empty()) continue;
            peers.insert(peer);
            auto it = conns_.find((int) fd);
            conn c = it != conns_.end() && it->second.peer == peer ? it->second : conn{peer, now};
            if (!served_.count(peer) && now - c.since > deadline_) {
                ::shutdown((int) fd, SHUT_RDWR);  // (its thread's read ends; cpp-httplib closes it)
                continue;
            }
            live[(int) fd] = c;
        }
        closedir(d);
        conns_.swap(live);
        // Forget the peers whose connections are gone.
        for (auto it = served_.begin(); it != served_.end();) it = peers.count(*it) ? std::next(it) : served_.erase(it);
    }
}
